"""The vector form of FUSED_ELEMENTWISE (ops/ew_fused.py vector_form, shaders/ew_fused.comp EW_VEC):
4 (or 8) consecutive outputs along the innermost dim per invocation, vec4 loads of the contiguous
inputs, one scalar for an input broadcast along that dim.  Its results are the scalar form's bits
(fp32 and --precision fp16) and the unfused program's, and match LiteRT."""
import os

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.compiler.frontend.importer import load_tflite  # noqa: E402
from gpuc.compiler.options import from_environ, resolve, using  # noqa: E402
from gpuc.compiler.ops import ew_fused  # noqa: E402
from gpuc.compiler.passes import run_passes  # noqa: E402
from gpuc.runtime.bundle import read_bundle  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import run_litert  # noqa: E402

RNG = np.random.default_rng(30)
POOL = dict(padding="VALID", stride_w=1, stride_h=1, filter_width=1, filter_height=1)


def bn_model(shape, fp16_edges=False):
    """The pre-activation batch norm: relu((x - mean) * scale + bias), per-channel constants.  With
    fp16_edges the chain sits between two 1x1 max pools, so under --precision fp16 its input and
    output are float16 tensors (graph I/O stay float32)."""
    mb = ModelBuilder()
    c = shape[-1]
    x = mb.input("x", list(shape))
    if fp16_edges:
        p = mb.tensor("p", list(shape))
        mb.op("MAX_POOL_2D", [x], [p], **POOL)
        x = p
    t1, t2, t3 = (mb.tensor(n, list(shape)) for n in ("t1", "t2", "t3"))
    mb.op("SUB", [x, mb.const("mean", RNG.normal(0, 1, c).astype(np.float32))], [t1])
    mb.op("MUL", [t1, mb.const("scale", RNG.uniform(0.3, 3, c).astype(np.float32))], [t2])
    mb.op("ADD", [t2, mb.const("bias", RNG.normal(0, 1, c).astype(np.float32))], [t3],
          fused_activation_function="RELU")
    if fp16_edges:
        y = mb.tensor("y", list(shape))
        mb.op("MAX_POOL_2D", [t3], [y], **POOL)
        t3 = y
    mb.output(t3)
    return mb.finish()


def bcast_model(shape):
    """x - r (r broadcast along the innermost dim), * s (a runtime scalar), + z (full shape), * w
    (per channel), max with an inlined constant."""
    mb = ModelBuilder()
    x, z = mb.input("x", list(shape)), mb.input("z", list(shape))
    r = mb.input("r", list(shape[:-1]) + [1])
    s = mb.input("s", [1])
    w = mb.input("w", [1, 1, 1, shape[-1]])
    t = [mb.tensor(f"t{k}", list(shape)) for k in range(5)]
    mb.op("SUB", [x, r], [t[0]])
    mb.op("MUL", [t[0], s], [t[1]])
    mb.op("ADD", [t[1], z], [t[2]])
    mb.op("MUL", [t[2], w], [t[3]])
    mb.op("MAXIMUM", [t[3], mb.const("floor", np.array(-0.25, np.float32))], [t[4]])
    mb.output(t[4])
    inputs = {"x": RNG.normal(0, 2, shape), "z": RNG.normal(0, 2, shape), "r": RNG.normal(0, 1, list(shape[:-1]) + [1]),
              "s": RNG.uniform(0.5, 2, [1]), "w": RNG.normal(0, 1, [1, 1, 1, shape[-1]])}
    return mb.finish(), [inputs[n].astype(np.float32) for n in ("x", "z", "r", "s", "w")]


@pytest.fixture(autouse=True)
def two_vectors():
    """Up to two vec4 per invocation (CompileOptions.ew_vectors 2, in force for the lowerings below and as
    the base of each gpuc.compile's options), so both vector widths are exercised; the default (ew_fused.VECS
    1, measured faster on the H100) is checked by test_default_takes_one_vector."""
    with using(resolve(ew_vectors=2)):
        yield


def lowered(model):
    """(the FUSED_ELEMENTWISE kernel's defines, vec4 bindings, input tensor names)."""
    g = load_tflite(model).main
    run_passes(g)
    (n,) = [n for n in g.nodes if n.op == "FUSED_ELEMENTWISE"]
    (k,) = ew_fused.lower_ew_fused(n, g)
    return k.defines, k.vec4, [g.t(i).name for i in n.inputs]


def run(model, inputs, **opts):
    b = gpuc.compile(model, cache=False, **opts)
    fused = [d for d in read_bundle(b).dispatches if "+" in d.label]
    with gpuc.load(b) as m:
        return [np.array(o) for o in m.run(inputs)], fused


def three_ways(model, inputs, **opts):
    """Outputs of the lowering in force; asserts them bit-identical to the scalar form (ew_vectors 0) and to
    the unfused program.  Also returns the fused dispatch's workgroup count."""
    out, fused = run(model, inputs, **opts)
    assert len(fused) == 1
    scalar, sfused = run(model, inputs, ew_vectors=0, **opts)
    unfused, _ = run(model, inputs, disable_passes=["fuse_elementwise"], **opts)
    for a, b, c in zip(out, scalar, unfused):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
    return out, fused[0].groups[0], sfused[0].groups[0]


def close_to_litert(outs, model, inputs, rtol):
    for o, r in zip(outs, run_litert(model, inputs)):
        np.testing.assert_allclose(o, r, rtol=rtol, atol=rtol * max(1.0, float(np.abs(r).max())))


# (shape, EW_VEC): innermost 8: two vec4 per invocation; 12: one; 6: the scalar form
CASES = [((2, 3, 5, 8), 2), ((2, 3, 5, 12), 1), ((2, 3, 5, 6), 0)]


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("shape,vec", CASES)
def test_batch_norm_chain(shape, vec, precision):
    if precision == "fp16" and os.environ.get("GPUC_DISABLE_FP16"):
        pytest.skip("fp16 storage disabled")
    model = bn_model(shape, fp16_edges=precision == "fp16")
    defines, vec4, names = lowered(model)
    assert defines.get("EW_VEC", 0) == vec and defines["EW_BCAST"] == 1
    if vec:     # every input contiguous along the innermost dim (per-channel operands too)
        assert defines["VEC_IN"] == (1 << len(names)) - 1 and set(vec4) == {"out_"} | {f"x{k}" for k in range(len(names))}
        assert defines["OUT_SHAPE"] == list(shape[:-1]) + [shape[-1] // (4 * vec)]
    else:
        assert "VEC_IN" not in defines and vec4 == ()
    x = RNG.normal(0, 3, shape).astype(np.float32)
    x.reshape(-1)[:4] = [0.0, -0.0, 1e30 if precision == "fp32" else 1e3, -1e-40]
    outs, groups, sgroups = three_ways(model, [x], precision=precision)
    n = int(np.prod(shape))
    assert sgroups == -(-n // 64) and groups == -(-n // (64 * max(1, 4 * vec)))
    close_to_litert(outs, model, [x], rtol=1e-5 if precision == "fp32" else 1e-2)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_broadcast_operands(precision):
    """Inputs broadcast along the innermost dim (r) and everywhere (s) load one scalar; the full-shape
    (x, z) and per-channel (w) ones a vec4."""
    if precision == "fp16" and os.environ.get("GPUC_DISABLE_FP16"):
        pytest.skip("fp16 storage disabled")
    shape = (2, 3, 5, 8)
    model, inputs = bcast_model(shape)
    defines, vec4, names = lowered(model)
    assert defines["EW_VEC"] == 2 and sorted(names) == ["r", "s", "w", "x", "z"]
    assert {names[k] for k in range(len(names)) if defines["VEC_IN"] >> k & 1} == {"x", "z", "w"}
    assert {names[int(b[1:])] for b in vec4 if b != "out_"} == {"x", "z", "w"}
    k = names.index("r")            # vec4 strides of the vectors, element strides of the scalars
    assert defines[f"I{k}_STRIDES"] == [15, 5, 1, 0] and defines[f"I{names.index('x')}_STRIDES"] == [30, 10, 2, 2]
    outs, _, _ = three_ways(model, inputs, precision=precision)
    close_to_litert(outs, model, inputs, rtol=1e-5 if precision == "fp32" else 1e-2)


def test_same_shape_inputs_flat():
    """No broadcast: the vector form indexes flat (EW_BCAST 0), 4 elements per group."""
    mb = ModelBuilder()
    x, z = mb.input("x", [3, 4]), mb.input("z", [3, 4])
    t, y = mb.tensor("t", [3, 4]), mb.tensor("y", [3, 4])
    mb.op("MUL", [x, z], [t])
    mb.op("ADD", [t, x], [y], fused_activation_function="RELU6")
    mb.output(y)
    model = mb.finish()
    defines, vec4, _ = lowered(model)
    assert defines["EW_BCAST"] == 0 and defines["EW_VEC"] == 1 and defines["VEC_IN"] == 3
    xs = [RNG.normal(0, 4, (3, 4)).astype(np.float32) for _ in range(2)]
    outs, _ = run(model, xs)
    off, _ = run(model, xs, disable_passes=["fuse_elementwise"])
    np.testing.assert_array_equal(outs[0], off[0])
    close_to_litert(outs, model, xs, rtol=1e-6)


def test_int32_cast_input_loads_ivec4():
    """CAST int32 -> float32 starting the chain: its input is loaded as an ivec4, converted per element."""
    mb = ModelBuilder()
    i, w = mb.input("i", [3, 8], "int32"), mb.input("w", [8])
    f, y = mb.tensor("f", [3, 8]), mb.tensor("y", [3, 8])
    mb.op("CAST", [i], [f])
    mb.op("MUL", [f, w], [y])
    mb.output(y)
    model = mb.finish()
    defines, vec4, names = lowered(model)
    assert defines["EW_VEC"] == 2 and defines["VEC_IN"] == 3 and set(vec4) == {"out_", "x0", "x1"}
    iv = RNG.integers(-2**31, 2**31 - 1, (3, 8)).astype(np.int32)
    iv.reshape(-1)[:3] = [2**24 + 1, -(2**24 + 3), 7]      # rounded by the int -> float conversion
    xs = [iv, RNG.uniform(-2, 2, 8).astype(np.float32)]
    outs, _ = run(model, xs)
    off, _ = run(model, xs, disable_passes=["fuse_elementwise"])
    np.testing.assert_array_equal(outs[0], off[0])
    close_to_litert(outs, model, xs, rtol=1e-6)


def test_default_takes_one_vector():
    assert ew_fused.VECS == 1
    with using(from_environ()) as opts:    # (no ew_vectors: the module's own VECS)
        assert opts.ew_vectors is None
        defines, _, _ = lowered(bn_model((2, 3, 5, 8), fp16_edges=False))
    assert defines["EW_VEC"] == 1 and defines["OUT_SHAPE"][-1] == 2
