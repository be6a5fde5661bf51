"""Bounded batch (`--max-batch N`, runtime/batch.py): one bundle runs any batch 1..N, and row i of a
batch-b run is exactly the batch-1 result for row i; errors for b > N, for models whose I/O has no
batch dimension 1, and for a bad option; state (LSTM variables) is per item."""
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.errors import BundleError, GpucError, UnsupportedError  # noqa: E402
from gpuc.runtime import bundle as B  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.models import block_model  # noqa: E402


def rows(shape, n, seed):
    return np.random.default_rng(seed).uniform(-1, 1, (n,) + tuple(shape[1:])).astype(np.float32)


def two_input_model():
    """Two inputs (broadcast ADD), two outputs (one a reduction): every I/O has batch dim 1."""
    mb = ModelBuilder()
    a = mb.input("a", [1, 3, 4])
    b = mb.input("b", [1, 1, 4])
    s = mb.tensor("s", [1, 3, 4])
    mb.op("ADD", [a, b], [s], fused_activation_function="RELU")
    m = mb.tensor("m", [1, 4])
    mb.op("MEAN", [s, mb.const("ax", np.array([1], np.int32))], [m], keep_dims=False)
    mb.output(s)
    mb.output(m)
    return mb.finish()


def check_rows(gpu, model, n, seeds=(1, 2)):
    b1 = gpu.load(model)
    bn = gpuc.load(gpuc.compile(model, max_batch=n), device=gpu.device)
    try:
        assert bn.max_batch == n and b1.max_batch == 1
        assert [s.shape for s in bn.inputs] == [s.shape for s in b1.inputs]
        xs = [rows(s.shape, n, seed) for s, seed in zip(b1.inputs, seeds)]
        singles = [b1.run([x[i:i + 1] for x in xs]) for i in range(n)]
        for b in range(1, n + 1):
            outs = bn.run([x[:b] for x in xs])
            for k, o in enumerate(outs):
                assert o.shape == (b,) + b1.outputs[k].shape[1:]
                for i in range(b):
                    np.testing.assert_array_equal(o[i:i + 1], singles[i][k], err_msg=f"batch {b} row {i} out {k}")
        return bn, xs, singles
    finally:
        b1.close()
        bn.close()


def test_conv_model_batch_1_to_8_equals_batch_1(gpu):
    check_rows(gpu, block_model(), 8)


def test_two_inputs_two_outputs(gpu):
    check_rows(gpu, two_input_model(), 5)


def test_mlp_small_batch_1_to_8(gpu, models_dir):
    check_rows(gpu, (models_dir / "mlp_small_f32.tflite").read_bytes(), 8)


def test_batch_over_max_and_mismatch_are_clear_errors(gpu):
    with gpuc.load(gpuc.compile(two_input_model(), max_batch=4), device=gpu.device) as m:
        with pytest.raises(GpucError, match=r"batch 5 is outside 1..4"):
            m.run([rows((1, 3, 4), 5, 0), rows((1, 1, 4), 5, 1)])
        with pytest.raises(GpucError, match="disagree on the batch size"):
            m.run([rows((1, 3, 4), 2, 0), rows((1, 1, 4), 3, 1)])
        with pytest.raises(GpucError, match=r"expected shape \[2, 1, 4\]"):
            m.run([rows((1, 3, 4), 2, 0), rows((1, 2, 4), 2, 1)])
        with pytest.raises(GpucError, match="outside 1..4"):
            m.run([np.zeros((0, 3, 4), np.float32), np.zeros((0, 1, 4), np.float32)])
        # the model still works after the errors; async batched runs keep their own rows
        xs = [rows((1, 3, 4), 4, 3), rows((1, 1, 4), 4, 4)]
        hs = [m.run_async([x[:b] for x in xs]) for b in (1, 4, 2, 3)]
        full = m.run(xs)
        for h, b in zip(hs, (1, 4, 2, 3)):
            outs = h.wait()
            for o, f in zip(outs, full):
                np.testing.assert_array_equal(o, f[:b])


def test_model_without_batch_dim_1_is_refused():
    mb = ModelBuilder()
    x = mb.input("x", [2, 3])
    y = mb.tensor("y", [2, 3])
    mb.op("RELU", [x], [y])
    mb.output(y)
    data = mb.finish()
    with pytest.raises(UnsupportedError, match=r"--max-batch 4: input 'x' has shape \[2, 3\]"):
        gpuc.compile(data, max_batch=4, cache=False)
    assert gpuc.compile(data, max_batch=1, cache=False)           # batch 1: nothing to check
    with pytest.raises(GpucError, match="max_batch must be an integer"):
        gpuc.compile(data, max_batch=0, cache=False)


def test_runtime_checks_max_batch_option():
    b = B.read_bundle(gpuc.compile(block_model(), cache=False))
    from gpuc.runtime.batch import max_batch
    assert max_batch(b) == 1
    b.options["max_batch"] = 3
    assert max_batch(b) == 3
    b.options["max_batch"] = "8"
    with pytest.raises(BundleError, match="max_batch"):
        max_batch(b)
    b.options["max_batch"] = 2
    b.tensors[b.inputs[0]].shape = (2, 6, 6, 4)
    with pytest.raises(BundleError, match="batch dimension 1"):
        max_batch(b)


def test_cli_max_batch(tmp_path):
    src, out = tmp_path / "m.tflite", tmp_path / "m.bundle"
    src.write_bytes(block_model())
    r = subprocess.run([sys.executable, "-m", "gpuc.cli", "compile", str(src), "-o", str(out), "--max-batch", "3",
                        "--no-cache"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "batch 1..3" in r.stdout
    assert B.read_bundle(out.read_bytes()).options["max_batch"] == 3
    r = subprocess.run([sys.executable, "-m", "gpuc.cli", "inspect", str(out)], capture_output=True, text=True)
    assert r.returncode == 0 and "batch 1..3" in r.stdout
    x = tmp_path / "x.npy"
    np.save(x, rows((1, 6, 6, 4), 3, 0))
    r = subprocess.run([sys.executable, "-m", "gpuc.cli", "run", str(out), "--input", str(x)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "shape [3, 3]" in r.stdout
    mb = ModelBuilder()
    xi = mb.input("x", [3])
    y = mb.tensor("y", [3])
    mb.op("RELU", [xi], [y])
    mb.output(y)
    src.write_bytes(mb.finish())
    r = subprocess.run([sys.executable, "-m", "gpuc.cli", "compile", str(src), "-o", str(out), "--max-batch", "2",
                        "--no-cache"], capture_output=True, text=True)
    assert r.returncode == 2 and "input 'x' has shape [3]" in r.stderr and "Traceback" not in r.stderr


def test_state_is_per_item(gpu):
    from helpers.models import lstm_model
    data, shape = lstm_model(b=1, t=2, i=3, c=4)
    x1, x2 = rows(shape, 3, 1), rows(shape, 3, 2)
    refs = []
    for i in range(3):                          # each item alone: two runs, state carried over
        with gpuc.load(gpuc.compile(data), device=gpu.device) as m:
            refs.append([m.run([x1[i:i + 1]])[0], m.run([x2[i:i + 1]])[0]])
    with gpuc.load(gpuc.compile(data, max_batch=3), device=gpu.device) as m:
        o1, o2 = m.run([x1])[0], m.run([x2])[0]
        for i in range(3):
            np.testing.assert_array_equal(o1[i:i + 1], refs[i][0])
            np.testing.assert_array_equal(o2[i:i + 1], refs[i][1])
        m.reset_state()
        np.testing.assert_array_equal(m.run([x1[:2]])[0], o1[:2])


def test_model_with_host_steps_refuses_max_batch(gpu):
    from helpers.models import MIXED_OPTIONS, mixed_model
    model = mixed_model()
    with pytest.raises(UnsupportedError, match=r"--max-batch 2: the program has \d+ host \(CPU\) or control-flow"):
        gpuc.compile(model, max_batch=2, cache=False, **MIXED_OPTIONS)
    b = B.read_bundle(gpuc.compile(model, cache=False, **MIXED_OPTIONS))
    b.options["max_batch"] = 2                         # a bundle claiming it anyway is refused at load
    from gpuc.runtime.executor import LoadedModel
    with pytest.raises(BundleError, match="host"):
        LoadedModel(b, device=gpu.device)
    with gpuc.load(gpuc.compile(model, cache=False, **MIXED_OPTIONS), device=gpu.device) as m:
        with pytest.raises(GpucError, match="keep_on_device"):
            m.run([np.zeros(m.inputs[0].shape, np.float32)], keep_on_device=True)
