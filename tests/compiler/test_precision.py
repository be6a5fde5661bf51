"""`--precision fp16` (compiler/passes/precision.py, storage macros in shaders/common.glsl): fp16
storage with fp32 arithmetic, ops kept in fp32, and the fp32 fallback on a device without 16-bit
storage buffers (simulated with GPUC_DISABLE_FP16=1).  References are LiteRT's float32 kernels; fp16
results must be within 2e-2 * max|ref| (fp16 rounding of stored values only)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.runtime.bundle import read_bundle  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import run_litert  # noqa: E402
from helpers.precision import assert_close16, dtype_of, run16  # noqa: E402


@pytest.fixture(autouse=True)
def _fp16_plain_gemms(compile_options):
    """These tests exercise float16 storage around small gemms, which --precision fp16 otherwise keeps
    float32 (ops/gemm_coopmat.py storage_wishes): store those as float16 too."""
    compile_options(fp16_plain_gemms=True)


def cnn_model():
    """conv -> depthwise -> avg pool + max pool -> add -> fully connected -> softmax."""
    rng = np.random.default_rng(1)
    mb = ModelBuilder()
    x = mb.input("x", [1, 9, 9, 3])
    w = mb.const("w", rng.normal(0, 0.5, (8, 3, 3, 3)).astype(np.float32))
    b = mb.const("b", rng.normal(0, 0.1, 8).astype(np.float32))
    c = mb.tensor("conv", [1, 9, 9, 8])
    mb.op("CONV_2D", [x, w, b], [c], padding="SAME", stride_w=1, stride_h=1, fused_activation_function="RELU6")
    dw = mb.const("dw", rng.normal(0, 0.5, (1, 3, 3, 8)).astype(np.float32))
    db = mb.const("db", rng.normal(0, 0.1, 8).astype(np.float32))
    d = mb.tensor("dwconv", [1, 5, 5, 8])
    mb.op("DEPTHWISE_CONV_2D", [c, dw, db], [d], padding="SAME", stride_w=2, stride_h=2, depth_multiplier=1)
    p1, p2, s = mb.tensor("avg", [1, 2, 2, 8]), mb.tensor("max", [1, 2, 2, 8]), mb.tensor("sum", [1, 2, 2, 8])
    pool = dict(padding="VALID", stride_w=2, stride_h=2, filter_width=2, filter_height=2)
    mb.op("AVERAGE_POOL_2D", [d], [p1], **pool)
    mb.op("MAX_POOL_2D", [d], [p2], **pool)
    mb.op("ADD", [p1, p2], [s])
    fw = mb.const("fw", rng.normal(0, 0.3, (10, 32)).astype(np.float32))
    f, y = mb.tensor("fc", [1, 10]), mb.tensor("y", [1, 10])
    mb.op("FULLY_CONNECTED", [s, fw, -1], [f])
    mb.op("SOFTMAX", [f], [y], beta=1.0)
    mb.output(y)
    return mb.finish(), [rng.uniform(-1, 1, (1, 9, 9, 3)).astype(np.float32)]


def test_fp16_cnn_matches_litert(gpu):
    model, xs = cnn_model()
    outs, b = run16(gpu, model, xs)
    assert_close16(outs, run_litert(model, xs))
    # activations and weights in fp16; the user's inputs and outputs stay float32
    from gpuc.runtime.bundle import WEIGHTS
    assert {dtype_of(b, n) for n in ("conv", "dwconv", "avg", "max", "sum", "fc")} == {"float16"}
    assert {t.dtype for t in b.tensors if t.memory == WEIGHTS} == {"float16"}
    assert dtype_of(b, "x") == dtype_of(b, "y") == "float32"
    assert b.stats["fp16_tensors"] > 0 and b.fallback
    # the fp16 program moves fewer bytes than its fp32 fallback
    fb = read_bundle(b.fallback)
    assert b.weights.nbytes < fb.weights.nbytes and b.arena_bytes < fb.arena_bytes
    assert all(t.dtype != "float16" for t in fb.tensors)


def _scaled_reduce(op, scale=2.0, n=16, c=4):
    """x * scale (an fp16 intermediate of magnitude ~3000) -> MEAN/SUM over H, W -> + 1."""
    rng = np.random.default_rng(2)
    mb = ModelBuilder()
    x = mb.input("x", [1, n, n, c])
    k = mb.const("k", np.array([scale], np.float32))
    m = mb.tensor("scaled", [1, n, n, c])
    mb.op("MUL", [x, k], [m])
    axes = mb.const("axes", np.array([1, 2], np.int32))
    r = mb.tensor("reduced", [1, c])
    mb.op(op, [m, axes], [r], keep_dims=False)
    one = mb.const("one", np.array([1.0], np.float32))
    y = mb.tensor("y", [1, c])
    mb.op("ADD", [r, one], [y])
    mb.output(y)
    return mb.finish(), [rng.uniform(1000, 2000, (1, n, n, c)).astype(np.float32)]


def test_fp16_mean_accumulates_in_fp32(gpu):
    """256 values ~3000 sum to ~7.7e5, far beyond fp16's 65504: fp16 accumulation gives inf."""
    model, xs = _scaled_reduce("MEAN")
    outs, b = run16(gpu, model, xs, disable_passes=["fuse_reduce_prologue"])     # (keeps "scaled")
    assert dtype_of(b, "scaled") == "float16" and dtype_of(b, "reduced") == "float16"
    assert_close16(outs, run_litert(model, xs))


def test_fp16_sum_stays_fp32(gpu):
    """SUM's result (~7.7e5) does not fit fp16: the op and what it feeds stay fp32."""
    model, xs = _scaled_reduce("SUM")
    outs, b = run16(gpu, model, xs, disable_passes=["fuse_reduce_prologue"])      # (keeps "scaled")
    ref = run_litert(model, xs)
    assert float(np.abs(ref[0]).min()) > 65504
    assert dtype_of(b, "scaled") == "float16" and dtype_of(b, "reduced") == "float32"
    assert_close16(outs, ref)


def test_fp16_unsupported_template_keeps_tensor_fp32(gpu):
    """GATHER runs in a template without fp16 storage: the tensors it touches stay fp32."""
    rng = np.random.default_rng(3)
    mb = ModelBuilder()
    x = mb.input("x", [2, 33])
    k = mb.const("k", np.array([-3.0], np.float32))
    idx = mb.const("idx", np.array([5, 0, 32, 7], np.int32))
    m, g, y = mb.tensor("m", [2, 33]), mb.tensor("g", [2, 4]), mb.tensor("y", [2, 4])
    mb.op("MUL", [x, k], [m])
    mb.op("GATHER", [m, idx], [g], axis=1)
    mb.op("MUL", [g, k], [y])
    mb.output(y)
    model, xs = mb.finish(), [rng.normal(0, 1, (2, 33)).astype(np.float32)]
    outs, b = run16(gpu, model, xs)
    assert dtype_of(b, "m") == "float32" and dtype_of(b, "g") == "float32"
    np.testing.assert_allclose(outs[0], run_litert(model, xs)[0], rtol=1e-6)


def test_fp16_math_ops(gpu):
    """binary_math / unary_math (MAXIMUM, PRELU, HARD_SWISH standalone ...) store fp16 too."""
    rng = np.random.default_rng(5)
    mb = ModelBuilder()
    x = mb.input("x", [1, 4, 4, 6])
    alpha = mb.const("alpha", rng.uniform(0.1, 0.3, (1, 1, 6)).astype(np.float32))
    p, h, a, y = (mb.tensor(n, [1, 4, 4, 6]) for n in ("p", "h", "a", "y"))
    mb.op("PRELU", [x, alpha], [p])
    mb.op("HARD_SWISH", [p], [h])
    mb.op("ABS", [h], [a])
    mb.op("MAXIMUM", [a, x], [y])
    mb.output(y)
    model, xs = mb.finish(), [rng.normal(0, 2, (1, 4, 4, 6)).astype(np.float32)]
    outs, b = run16(gpu, model, xs, disable_passes=["fuse_elementwise"])   # (fused, p and a would not exist)
    assert {dtype_of(b, n) for n in ("p", "a") if any(t.name == n for t in b.tensors)} == {"float16"}
    assert_close16(outs, run_litert(model, xs))


def test_fp16_disable_pass_gives_fp32(gpu):
    model, xs = cnn_model()
    outs, b = run16(gpu, model, xs, disable_passes=["plan_fp16_storage"])
    assert all(t.dtype != "float16" for t in b.tensors) and not b.fallback
    np.testing.assert_allclose(outs[0], run_litert(model, xs)[0], rtol=1e-4, atol=1e-6)


def test_fp16_bundle_falls_back_to_fp32_without_device_support(monkeypatch):
    from gpuc.runtime.device import Device
    model, xs = cnn_model()
    b16 = gpuc.compile(model, precision="fp16")
    b32 = gpuc.compile(model)
    monkeypatch.setenv("GPUC_DISABLE_FP16", "1")
    dev = Device()
    try:
        assert not dev.fp16_storage
        with pytest.warns(RuntimeWarning, match="16-bit storage"):
            m = gpuc.load(b16, device=dev)
        with m, gpuc.load(b32, device=dev) as m32:
            assert all(t.dtype != "float16" for t in m.bundle.tensors)
            np.testing.assert_array_equal(m.run(xs)[0], m32.run(xs)[0])
        # a bundle without its fallback cannot run there: a clear error, not a crash
        from gpuc.errors import DeviceError
        from gpuc.runtime import bundle as B
        stripped = read_bundle(b16)
        stripped.fallback = b""
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(DeviceError, match="16-bit storage"):
                gpuc.load(B.write_bundle(stripped), device=dev)
    finally:
        dev.close()


def test_fp16_mobilenet_v2(gpu, models_dir):
    name = "mobilenet_v2_224_f32"
    x = np.load(models_dir / "ref" / f"{name}.in0.npy")
    ref = np.load(models_dir / "ref" / f"{name}.out0.npy")
    (y,), b = run16(gpu, (models_dir / f"{name}.tflite").read_bytes(), [x])
    assert sum(t.dtype == "float16" for t in b.tensors) > 100
    assert_close16([y], [ref])
    assert int(y.argmax()) == int(ref.argmax())


def test_inspect_shows_storage_precision():
    from gpuc.inspect import inspect_bundle
    model, _ = cnn_model()
    rep, text = inspect_bundle(gpuc.compile(model, precision="fp16"))
    assert rep["precision"] == "fp16" and rep["fp32_fallback"]
    prec = {t["name"]: t["precision"] for t in rep["tensors"]}
    assert prec["x"] == prec["y"] == "fp32" and prec["conv"] == prec["fc"] == "fp16"
    assert rep["tensor_precisions"]["fp16"] == sum(p == "fp16" for p in prec.values())
    assert all(len(d["precisions"]) == len(d["shapes"]) for d in rep["dispatch_list"])
    assert "fp16" in text and "fallback" in text
    # quantized I/O: an int8 output with its quantization
    mb = ModelBuilder()
    x = mb.input("x", [2, 4])
    q = mb.tensor("q", [2, 4], "int8", quant=(0.05, -3))
    mb.op("QUANTIZE", [x], [q])
    mb.output(q)
    rep, text = inspect_bundle(gpuc.compile(mb.finish()))
    assert rep["outputs"][0]["precision"] == "int8+q" and rep["inputs"][0]["precision"] == "fp32"
    assert "int8+q" in text and rep["precision"] == "fp32" and not rep["fp32_fallback"]


def test_cli_fp16_compile_inspect_verify(models_dir, tmp_path):
    import os
    import subprocess
    import sys

    def cli(*args):       # (the CLI reads the compile switch at its boundary: the variable, as a user sets it)
        return subprocess.run([sys.executable, "-m", "gpuc.cli", *map(str, args)], capture_output=True, text=True,
                              env=dict(os.environ, GPUC_FP16_PLAIN_GEMMS="1"))
    model, out = models_dir / "mlp_small_f32.tflite", tmp_path / "m16.bundle"
    r = cli("compile", model, "-o", out, "--precision", "fp16", "--no-cache")
    assert r.returncode == 0 and "tensors fp16" in r.stdout, r.stderr
    r = cli("inspect", out)
    assert r.returncode == 0 and "precision fp16 (fp32 fallback program included)" in r.stdout
    r = cli("verify", model, "--precision", "fp16")
    assert r.returncode == 0 and "PASS" in r.stdout, r.stdout + r.stderr


def test_fp16_wide_values_stay_fp32_until_bounded(gpu):
    """SUM's result and what it feeds stay fp32 until LOGISTIC or a fused RELU6 bounds the values."""
    rng = np.random.default_rng(4)
    mb = ModelBuilder()
    x = mb.input("x", [1, 8, 8, 4])
    axes = mb.const("axes", np.array([1, 2], np.int32))
    s, m, sig, r6, y = (mb.tensor(n, [1, 4]) for n in ("s", "m", "sig", "r6", "y"))
    mb.op("SUM", [x, axes], [s], keep_dims=False)
    mb.op("MUL", [s, mb.const("k", np.array([1e-3], np.float32))], [m])
    mb.op("LOGISTIC", [m], [sig])
    mb.op("ADD", [s, mb.const("c", np.array([-7e4], np.float32))], [r6], fused_activation_function="RELU6")
    mb.op("ADD", [sig, r6], [y])
    mb.output(y)
    model, xs = mb.finish(), [rng.uniform(1000, 2000, (1, 8, 8, 4)).astype(np.float32)]
    outs, b = run16(gpu, model, xs, disable_passes=["fuse_elementwise"])   # (keeps "sig" and "r6" tensors)
    names = {t.name for t in b.tensors}          # (LOGISTIC fuses into the MUL: "m" is gone)
    assert [dtype_of(b, n) for n in ("s", "sig", "r6")] == ["float32", "float16", "float16"]
    assert "m" not in names or dtype_of(b, "m") == "float32"
    assert_close16(outs, run_litert(model, xs))


def test_fp16_with_cpu_steps(gpu):
    """Tensors a host (CPU) step reads or writes stay fp32; GPU-only tensors around it go fp16."""
    rng = np.random.default_rng(6)
    mb = ModelBuilder()
    x = mb.input("x", [1, 4, 8])
    a, h, mag, v, y = mb.tensor("a", [1, 4, 8]), mb.tensor("h", [1, 4, 8]), mb.tensor("mag", [1, 4, 5]), \
        mb.tensor("v", [1, 4, 5]), mb.tensor("y", [1, 4, 5])
    mb.op("ADD", [x, mb.const("c", np.full([1, 4, 8], 0.25, np.float32))], [a])
    mb.op("MUL", [a, a], [h])
    f = mb.tensor("f", [1, 4, 5], "complex64")
    mb.op("RFFT2D", [h, mb.const("n", np.array([4, 8], np.int32))], [f])     # CPU
    mb.op("COMPLEX_ABS", [f], [mag])                                           # CPU
    mb.op("ADD", [mag, mag], [v])                                              # GPU
    mb.op("MUL", [v, mb.const("s", np.full([1, 4, 5], 0.5, np.float32))], [y])
    mb.output(y)
    model, xs = mb.finish(), [rng.uniform(-2, 2, (1, 4, 8)).astype(np.float32)]
    try:
        outs, b = run16(gpu, model, xs, disable_passes=["fuse_elementwise", "rfft_as_matmul"])   # (keeps "a"; RFFT2D stays on the CPU)
    except gpuc.errors.UnsupportedError:
        pytest.skip("this build runs no CPU steps")
    assert dtype_of(b, "a") == "float16"
    assert dtype_of(b, "h") == dtype_of(b, "mag") == "float32"
    assert_close16(outs, run_litert(model, xs))
