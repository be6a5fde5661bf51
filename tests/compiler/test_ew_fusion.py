"""fuse_elementwise (passes/ew_fusion.py, ops/ew_fused.py, shaders/ew_fused.comp): chains of
elementwise ops become one dispatch whose results are bit-identical to the unfused program (fp32,
fake-quantized int8 and --precision fp16) and match LiteRT."""
import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.compiler.frontend.importer import load_tflite  # noqa: E402
from gpuc.compiler.passes import run_passes  # noqa: E402
from gpuc.runtime.bundle import read_bundle  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.float_view import keep_float_view  # noqa: E402
from helpers.litert import run_litert  # noqa: E402
from helpers.models import UNARY_CHAINS, chain_model, hard_swish_model, layer_norm_model  # noqa: E402

RNG = np.random.default_rng(11)
OFF = ["fuse_elementwise"]


def run(model, inputs, **opts):
    b = gpuc.compile(model, cache=False, **opts)
    with gpuc.load(b) as m:
        return [np.array(o) for o in m.run(inputs)], len(read_bundle(b).dispatches)


def on_off(model, inputs, also_off=(), **opts):
    """Outputs and dispatch counts with the pass on and off (passes `also_off` off in both); asserts
    bit-identical outputs."""
    on, d_on = run(model, inputs, disable_passes=list(also_off), **opts)
    off, d_off = run(model, inputs, disable_passes=OFF + list(also_off), **opts)
    for a, b in zip(on, off):
        np.testing.assert_array_equal(a, b)      # NaN positions must agree too
    return on, d_on, d_off


def close_to_litert(outs, model, inputs, rtol=1e-5):
    for o, r in zip(outs, run_litert(model, inputs)):
        if r.dtype.kind == "f":
            fin = np.isfinite(r)
            np.testing.assert_array_equal(np.isnan(o), np.isnan(r))
            np.testing.assert_array_equal(o[np.isinf(r)], r[np.isinf(r)])
            np.testing.assert_allclose(o[fin], r[fin], rtol=rtol, atol=rtol * max(1.0, float(np.abs(r[fin]).max())))
        else:
            assert np.abs(o.astype(np.int64) - r.astype(np.int64)).max() <= 1


@pytest.mark.parametrize("div", [False, True])
def test_hard_swish_graph_is_one_dispatch(div):
    model = hard_swish_model(div=div)
    x = RNG.uniform(-5, 5, (1, 4, 4, 3)).astype(np.float32)
    outs, d_on, d_off = on_off(model, [x])
    assert (d_on, d_off) == (1, 3)
    close_to_litert(outs, model, [x])


def test_pass_builds_one_node_with_inlined_constants():
    g = load_tflite(hard_swish_model()).main
    run_passes(g)
    assert [n.op for n in g.nodes] == ["FUSED_ELEMENTWISE"]
    n = g.nodes[0]
    assert n.attrs["fused"] == ["ADD", "MUL", "MUL"] and len(n.inputs) == 1
    kinds = [[k for k, _ in s["args"]] for s in n.attrs["steps"]]
    assert kinds == [["x", "c"], ["x", "t"], ["t", "c"]]
    assert n.attrs["steps"][0]["act"] == 3          # the ADD's fused RELU6


def test_layer_norm_chains_with_broadcasting():
    model = layer_norm_model(rng=RNG)
    x = RNG.normal(0, 3, (2, 3, 8)).astype(np.float32)
    outs, d_on, d_off = on_off(model, [x], also_off=["fuse_layer_norm"])    # (one LAYER_NORM: test_layer_norm.py)
    # MEAN, SQUARED_DIFFERENCE+MEAN (fuse_reduce_prologue, on in both), ADD+RSQRT, SUB+MUL+MUL+ADD
    assert (d_on, d_off) == (4, 8)
    close_to_litert(outs, model, [x], rtol=1e-4)


@pytest.mark.parametrize("chain", range(len(UNARY_CHAINS)))
def test_unary_chains(chain):
    ops = UNARY_CHAINS[chain]
    model = chain_model(ops)
    x = RNG.uniform(-4, 4, (2, 5, 7)).astype(np.float32)
    x.reshape(-1)[:6] = [0.0, -0.0, np.inf, -np.inf, np.nan if chain < 2 else 2.5, 1e-40]   # (clamps drop NaN)
    b = np.ones(7, np.float32)
    outs, d_on, d_off = on_off(model, [x, b])
    assert (d_on, d_off) == (1, len(ops))
    close_to_litert(outs, model, [x, b], rtol=1e-4)


BINARY_CHAINS = [
    [("ADD", {"fused_activation_function": "RELU"}), ("MUL", {}), ("SUB", {"fused_activation_function": "RELU6"}),
     ("DIV", {}), ("MAXIMUM", {}), ("MINIMUM", {})],
    [("SQUARED_DIFFERENCE", {}), ("FLOOR_MOD", {}), ("PRELU", {}), ("FLOOR_DIV", {}), ("POW", {})],
]


@pytest.mark.parametrize("chain", range(len(BINARY_CHAINS)))
def test_binary_chains_with_broadcast_operand(chain):
    ops = BINARY_CHAINS[chain]
    model = chain_model(ops)
    x = RNG.uniform(-4, 4, (2, 5, 7)).astype(np.float32)
    x.reshape(-1)[:4] = [0.0, -0.0, 1e30, -1e30]
    b = np.array([2.0, -3.0, 0.5, -0.25, 1.5, 3.0, -1.0], np.float32)
    outs, d_on, d_off = on_off(model, [x, b])
    assert (d_on, d_off) == (1, len(ops))
    close_to_litert(outs, model, [x, b], rtol=1e-4)


def test_shared_intermediate_and_outputs_are_not_fused_away():
    """t1 feeds two ops of one group: computed once inside it; t3 is a graph output too: it stays
    materialized (tests/compiler/test_gemm_epilogue.py: a value also read outside the group stays)."""
    mb = ModelBuilder()
    x = mb.input("x", [3, 4])
    t1, t2, t3, y = (mb.tensor(n, [3, 4]) for n in ("t1", "t2", "t3", "y"))
    mb.op("EXP", [x], [t1])
    mb.op("NEG", [t1], [t2])
    mb.op("ADD", [t1, t2], [t3])          # t1 used twice, both readers in one group: EXP joins it
    mb.op("ABS", [t3], [y])               # t3 is an output: ADD stays its own kernel
    mb.output(y)
    mb.output(t3)
    model = mb.finish()
    g = load_tflite(model).main
    run_passes(g)
    assert [n.op for n in g.nodes] == ["FUSED_ELEMENTWISE", "ABS"]
    x = RNG.uniform(-2, 2, (3, 4)).astype(np.float32)
    outs, d_on, d_off = on_off(model, [x])
    assert (d_on, d_off) == (2, 4)
    close_to_litert(outs, model, [x])


def test_many_inputs_split_into_several_kernels():
    """Each ADD brings a new runtime input: groups stop at MAX_INPUTS bindings."""
    from gpuc.compiler.ops.ew_fused import MAX_INPUTS
    mb = ModelBuilder()
    n = MAX_INPUTS + 3
    xs = [mb.input(f"x{i}", [4, 6]) for i in range(n)]
    cur = xs[0]
    for i in range(1, n):
        t = mb.tensor(f"s{i}", [4, 6])
        mb.op("ADD" if i % 2 else "MUL", [cur, xs[i]], [t])
        cur = t
    mb.output(cur)
    model = mb.finish()
    g = load_tflite(model).main
    run_passes(g)
    assert all(len(nd.inputs) <= MAX_INPUTS for nd in g.nodes) and len(g.nodes) == 2
    inputs = [RNG.uniform(-2, 2, (4, 6)).astype(np.float32) for _ in range(n)]
    outs, d_on, d_off = on_off(model, inputs)
    assert (d_on, d_off) == (2, n - 1)
    close_to_litert(outs, model, inputs)


def test_fp16_storage_rounds_where_the_unfused_program_stored_fp16():
    """--precision fp16: the fused kernel rounds every intermediate the unfused program stored as
    float16, so both programs give identical bits."""
    import os
    if os.environ.get("GPUC_DISABLE_FP16"):
        pytest.skip("fp16 storage disabled")
    model = layer_norm_model((2, 4, 16), rng=RNG)
    x = RNG.normal(0, 3, (2, 4, 16)).astype(np.float32)
    outs, d_on, d_off = on_off(model, [x], also_off=["fuse_layer_norm"], precision="fp16")
    assert d_on < d_off
    hs = hard_swish_model((1, 6, 6, 8))
    x = RNG.uniform(-5, 5, (1, 6, 6, 8)).astype(np.float32)
    # make the chain's intermediates fp16 tensors: put it between two ops (graph I/O stay fp32)
    outs, d_on, d_off = on_off(hs, [x], precision="fp16")
    close_to_litert(outs, hs, [x], rtol=1e-2)


def test_fake_quant_intermediates_are_rounded_as_before():
    """int8 ADD -> MUL chain in a simulated integer program (a side op without an int8 form,
    helpers/float_view.py, keeps the model off native int8): each int8 intermediate's grid is applied inside the
    fused kernel."""
    mb = ModelBuilder()
    a = mb.input("a", [1, 4, 4, 8], "int8", quant=(0.03, 2))
    b = mb.input("b", [1, 4, 4, 8], "int8", quant=(0.07, -9))
    s = mb.tensor("s", [1, 4, 4, 8], "int8", quant=(0.09, 1))
    mb.op("ADD", [a, b], [s])
    p = mb.tensor("p", [1, 4, 4, 8], "int8", quant=(0.11, -3))
    mb.op("MUL", [s, b], [p])
    y = mb.tensor("y", [1, 4, 4, 8], "int8", quant=(0.05, 0))
    mb.op("SUB", [p, a], [y], fused_activation_function="RELU")
    mb.output(y)
    keep_float_view(mb, a, [1, 4, 4, 8])
    model = mb.finish()
    rng = np.random.default_rng(1)             # (its own inputs: the module's RNG depends on the tests run before)
    inputs = [rng.integers(-128, 128, (1, 4, 4, 8)).astype(np.int8) for _ in range(2)]
    g = load_tflite(model).main
    run_passes(g)
    fused = [n for n in g.nodes if n.op == "FUSED_ELEMENTWISE"]
    assert len(fused) == 1 and all(s.get("fq") for s in fused[0].attrs["steps"][:-1])
    outs, d_on, d_off = on_off(model, inputs)
    assert d_on == d_off - 2
    ref = run_litert(model, inputs)[0]
    d = np.abs(outs[0].astype(int) - ref.astype(int))
    assert d.max() <= 1 and (d == 0).mean() > 0.97


def test_cast_from_int32_starts_a_chain():
    mb = ModelBuilder()
    i = mb.input("i", [3, 5], "int32")
    x = mb.input("x", [5])
    f, m, y = (mb.tensor(n, [3, 5]) for n in ("f", "m", "y"))
    mb.op("CAST", [i], [f])
    mb.op("MUL", [f, x], [m])
    mb.op("ADD", [m, mb.const("c", np.array(0.25, np.float32))], [y])
    mb.output(y)
    model = mb.finish()
    iv = RNG.integers(-2**31, 2**31 - 1, (3, 5)).astype(np.int32)
    iv.reshape(-1)[:3] = [2**24 + 1, -(2**24 + 3), 7]      # rounded by the int -> float conversion
    xs = [iv, RNG.uniform(-2, 2, 5).astype(np.float32)]
    outs, d_on, d_off = on_off(model, xs)
    assert (d_on, d_off) == (1, 3)
    close_to_litert(outs, model, xs)


# ---------------------------------------------------------------------------------------------------
# fuse_reduce_prologue: the reduced tensor is computed per element inside the reduction

def reduce_model(op, shape, axes, keep=True, prologue="SQUARED_DIFFERENCE"):
    """x, m (broadcast) -> prologue (SQUARED_DIFFERENCE(x, m), or SUB + SQUARE) -> reduce over axes."""
    mb = ModelBuilder()
    x = mb.input("x", list(shape))
    mshape = [1 if d in [a % len(shape) for a in axes] else s for d, s in enumerate(shape)]
    m = mb.input("m", mshape)
    t = mb.tensor("t", list(shape))
    if prologue == "SQUARED_DIFFERENCE":
        mb.op("SQUARED_DIFFERENCE", [x, m], [t])
    else:
        d = mb.tensor("d", list(shape))
        mb.op("SUB", [x, m], [d])
        mb.op("SQUARE", [d], [t])
    out = [1 if d in [a % len(shape) for a in axes] else s for d, s in enumerate(shape)] if keep else \
        [s for d, s in enumerate(shape) if d not in [a % len(shape) for a in axes]]
    y = mb.tensor("y", out)
    mb.op(op, [t, mb.const("axes", np.array(axes, np.int32))], [y], keep_dims=keep)
    mb.output(y)
    return mb.finish(), mshape


@pytest.mark.parametrize("op,shape,axes,keep,prologue", [
    ("MEAN", (2, 3, 8), [-1], True, "SQUARED_DIFFERENCE"),
    ("SUM", (2, 5, 6), [1], False, "SUB+SQUARE"),
    ("REDUCE_MAX", (3, 4, 5), [0, 2], True, "SQUARED_DIFFERENCE"),
    ("MEAN", (1, 40, 30), [1, 2], True, "SUB+SQUARE"),        # 1200 elements: a workgroup per output
])
def test_reduce_prologue(op, shape, axes, keep, prologue):
    model, mshape = reduce_model(op, shape, axes, keep, prologue)
    g = load_tflite(model).main
    run_passes(g)
    assert [n.op for n in g.nodes] == ["FUSED_REDUCE"]
    xs = [RNG.normal(0, 2, shape).astype(np.float32), RNG.normal(0, 1, mshape).astype(np.float32)]
    outs, d_on = run(model, xs)
    for disabled in (["fuse_reduce_prologue"], ["fuse_elementwise", "fuse_reduce_prologue"]):
        off, d_off = run(model, xs, disable_passes=disabled)
        np.testing.assert_array_equal(outs[0], off[0])
    assert d_on == 1 and d_off == (2 if prologue == "SQUARED_DIFFERENCE" else 3)
    close_to_litert(outs, model, xs, rtol=1e-4)


def test_layer_norm_variance_prologue_under_fp16():
    import os
    if os.environ.get("GPUC_DISABLE_FP16"):
        pytest.skip("fp16 storage disabled")
    model = layer_norm_model((2, 4, 16), rng=RNG)
    x = RNG.normal(0, 3, (2, 4, 16)).astype(np.float32)
    g = load_tflite(model).main
    run_passes(g, disabled=["fuse_layer_norm"])      # (else one LAYER_NORM: test_layer_norm.py)
    assert [n.op for n in g.nodes] == ["MEAN", "FUSED_REDUCE", "FUSED_ELEMENTWISE", "FUSED_ELEMENTWISE"]
    on, _ = run(model, [x], precision="fp16", disable_passes=["fuse_layer_norm"])
    off, _ = run(model, [x], precision="fp16",
                 disable_passes=["fuse_layer_norm", "fuse_elementwise", "fuse_reduce_prologue"])
    np.testing.assert_array_equal(on[0], off[0])


@pytest.mark.parametrize("op", ["SQUARED_DIFFERENCE", "PRELU", "MAXIMUM"])
def test_fake_quant_binary_math_intermediate(op):
    """int8 SQUARED_DIFFERENCE / PRELU / MAXIMUM -> ADD in a simulated integer program (a side op without an
    int8 form, helpers/float_view.py, keeps the model off native int8): the int8 intermediate is rounded to its
    grid, fused or not (binary_math rounds a fake-quantized output for every OP)."""
    mb = ModelBuilder()
    a = mb.input("a", [1, 4, 4, 8], "int8", quant=(0.03, 2))
    b = mb.input("b", [1, 4, 4, 8], "int8", quant=(0.05, -1) if op == "SQUARED_DIFFERENCE" else (0.03, 2))
    # (LiteRT's int8 MAXIMUM keeps the raw values: its output must share the inputs' parameters)
    s = mb.tensor("s", [1, 4, 4, 8], "int8", quant={"SQUARED_DIFFERENCE": (0.02, -128), "PRELU": (0.037, 5),
                                                    "MAXIMUM": (0.03, 2)}[op])
    mb.op(op, [a, b], [s])
    y = mb.tensor("y", [1, 4, 4, 8], "int8", quant=(0.05, 0))
    mb.op("ADD", [s, a], [y])
    mb.output(y)
    keep_float_view(mb, a, [1, 4, 4, 8])
    model = mb.finish()
    inputs = [RNG.integers(-128, 128, (1, 4, 4, 8)).astype(np.int8) for _ in range(2)]
    if op == "PRELU":
        inputs[1] = RNG.integers(0, 20, (1, 4, 4, 8)).astype(np.int8)
    outs, d_on, d_off = on_off(model, inputs)
    assert d_on == d_off - 1
    ref = run_litert(model, inputs)[0]
    d = np.abs(outs[0].astype(int) - ref.astype(int))
    assert d.max() <= 1 and (d == 0).mean() > 0.95


def test_fp16_rounding_of_intermediates_matches_a_float16_store():
    """x -> NEG -> NEG under fp16: the middle tensor is float16 unfused; the fused kernel rounds it
    with ew_round16 (packHalf2x16 and back): ties to even, fp16 subnormals, overflow to inf, NaN."""
    import os
    if os.environ.get("GPUC_DISABLE_FP16"):
        pytest.skip("fp16 storage disabled")
    mb = ModelBuilder()
    x = mb.input("x", [64])
    t, y = mb.tensor("t", [64]), mb.tensor("y", [64])
    mb.op("NEG", [x], [t])
    mb.op("NEG", [t], [y])
    mb.output(y)
    model = mb.finish()
    v = RNG.normal(0, 100, 64).astype(np.float32)
    v[:20] = [65504, 65519.996, 65520, -65536, 1e-8, 2.0 ** -25, 3 * 2.0 ** -26, 2.0 ** -24 * 1.5, 6.1e-5,
              np.inf, -np.inf, -0.0, 0.0, 1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11, 2049.0, 2051.0, 1e-40, -7e-8,
              0.1]
    outs, d_on, d_off = on_off(model, [v], precision="fp16")
    assert (d_on, d_off) == (1, 2)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(outs[0], v.astype(np.float16).astype(np.float32))


def random_graph(seed):
    """A random DAG of elementwise ops over x [2,3,5] and broadcast operands (some tensors reused,
    sometimes an intermediate also a graph output)."""
    from gpuc.compiler.ew_table import TABLE
    rng = np.random.default_rng(seed)
    unary = ["ABS", "NEG", "SQUARE", "SQRT", "RSQRT", "EXP", "LOG", "SIN", "COS", "FLOOR", "CEIL", "ROUND", "SIGN",
             "ELU", "HARD_SWISH", "GELU", "LEAKY_RELU", "RELU_0_TO_1", "LOGISTIC", "RELU", "RELU6", "TANH",
             "RELU_N1_TO_1"]
    binary = sorted(r.name for r in TABLE.values() if r.arity == 2 and r.fusible and r.name != "PRELU")
    shape = [2, 3, 5]
    mb = ModelBuilder()
    full, small = [mb.input("x", shape)], []
    feeds = [rng.uniform(-3, 3, shape).astype(np.float32)]
    for k in range(int(rng.integers(1, 3))):
        bs = [s if rng.random() < 0.5 else 1 for s in shape][int(rng.integers(0, 3)):]
        small.append(mb.input(f"b{k}", bs))
        feeds.append(rng.uniform(0.5, 2, bs).astype(np.float32))
    small.append(mb.const("c", np.array([rng.choice([0.5, 3.0, 1 / 6, 0.1])], np.float32)))
    for i in range(int(rng.integers(2, 9))):
        op = str(rng.choice(unary + binary))
        t = mb.tensor(f"t{i}", shape)
        a = full[int(rng.integers(0, len(full)))]
        if op in binary:
            b = (small + full)[int(rng.integers(0, len(small) + len(full)))]
            opts = {"fused_activation_function": str(rng.choice(["NONE", "RELU", "RELU6"]))} \
                if op in ("ADD", "SUB", "MUL", "DIV") else {}
            mb.op(op, [a, b] if rng.random() < 0.7 else [b, a], [t], **opts)
        else:
            opts = {"alpha": 0.2} if op == "LEAKY_RELU" else {"approximate": bool(rng.random() < 0.5)} \
                if op == "GELU" else {}
            mb.op(op, [a], [t], **opts)
        full.append(t)
    mb.output(full[-1])
    if rng.random() < 0.3:
        mb.output(full[int(rng.integers(1, len(full)))])
    return mb.finish(), feeds


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4, 5, 94])
def test_random_elementwise_graphs_are_bit_identical(seed, precision):
    import os
    if precision == "fp16" and os.environ.get("GPUC_DISABLE_FP16"):
        pytest.skip("fp16 storage disabled")
    model, feeds = random_graph(seed)
    on, d_on = run(model, feeds, precision=precision)
    off, d_off = run(model, feeds, precision=precision,
                     disable_passes=["fuse_elementwise", "fuse_reduce_prologue", "plan_in_place"])
    assert d_on <= d_off
    for a, b in zip(on, off):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("op", ["SUB", "DIV", "SQUARED_DIFFERENCE", "FLOOR_MOD", "MAXIMUM"])
def test_an_operand_used_twice_is_not_folded(op):
    """EXP(x) then op(e, e): x - x is not 0 and x / x not 1 for NaN / inf, in the fused kernel too."""
    mb = ModelBuilder()
    x = mb.input("x", [8])
    e, y = mb.tensor("e", [8]), mb.tensor("y", [8])
    mb.op("EXP", [x], [e])
    mb.op(op, [e, e], [y])
    mb.output(y)
    model = mb.finish()
    v = np.array([np.nan, np.inf, -np.inf, 0.0, 100.0, -100.0, 1.0, 89.0], np.float32)
    outs, d_on, d_off = on_off(model, [v])
    assert (d_on, d_off) == (1, 2)


def test_two_equal_steps_are_not_merged():
    """EXP(x) twice, then SUB of the two: inf - inf is NaN in both programs (no common subexpression)."""
    mb = ModelBuilder()
    x = mb.input("x", [8])
    e1, e2, y = mb.tensor("e1", [8]), mb.tensor("e2", [8]), mb.tensor("y", [8])
    mb.op("EXP", [x], [e1])
    mb.op("EXP", [x], [e2])
    mb.op("SUB", [e1, e2], [y])
    mb.output(y)
    model = mb.finish()
    v = np.array([np.nan, np.inf, -np.inf, 0.0, 100.0, -100.0, 1.0, 89.0], np.float32)
    outs, d_on, d_off = on_off(model, [v])
    assert (d_on, d_off) == (1, 3) and np.isnan(outs[0][[0, 1, 4, 7]]).all()
