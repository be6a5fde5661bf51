"""fuse_gemm_epilogue (passes/gemm_epilogue.py, ops/epi_chain.py, shaders/epi_chain.glsl): the
elementwise work after a FULLY_CONNECTED / CONV_2D / BATCH_MATMUL (GELU builtin or decomposed, bias /
residual / mask ADD, scaling, activations) runs in that kernel's epilogue.  Each fusion fires on tiny
models in every legal variation, gives results bit-identical to the unfused program (fp32 and
--precision fp16) and within 1e-5 x max|ref| of LiteRT; it is refused when a precondition fails."""
import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.compiler.frontend.importer import load_tflite  # noqa: E402
from gpuc.compiler.ops.epi_chain import chain_reason, index_expr  # noqa: E402
from gpuc.compiler.passes import run_passes  # noqa: E402
from gpuc.runtime.bundle import read_bundle  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.float_view import keep_float_view  # noqa: E402
from helpers.litert import run_litert  # noqa: E402

RNG = np.random.default_rng(15)
PASS = "fuse_gemm_epilogue"
SQRT_2_PI = 0.7978845608028654


@pytest.fixture(autouse=True)
def _fp16_plain_gemms(compile_options):
    """These tests exercise float16 storage around small gemms, which --precision fp16 otherwise keeps
    float32 (ops/gemm_coopmat.py storage_wishes): store those as float16 too."""
    compile_options(fp16_plain_gemms=True)


def run(model, inputs, **opts):
    b = gpuc.compile(model, cache=False, **opts)
    with gpuc.load(b) as m:
        return [np.array(o) for o in m.run(inputs)], len(read_bundle(b).dispatches)


def on_off(model, inputs, **opts):
    """Outputs and dispatch counts with the pass on and off; asserts bit-identical outputs."""
    on, d_on = run(model, inputs, **opts)
    off, d_off = run(model, inputs, disable_passes=[PASS], **opts)
    for a, b in zip(on, off):
        np.testing.assert_array_equal(a, b)
    return on, d_on, d_off


def close_to_litert(outs, model, inputs, rel=1e-5):
    for o, r in zip(outs, run_litert(model, inputs)):
        assert o.shape == r.shape
        assert np.abs(o - r).max() <= rel * np.abs(r).max(), (np.abs(o - r).max(), np.abs(r).max())


def fused_ops(model, **kw):
    g = load_tflite(model).main
    run_passes(g, **kw)
    return [n.op for n in g.nodes]


def rand(*shape, lo=-3.0, hi=3.0):
    return RNG.uniform(lo, hi, shape).astype(np.float32)


# ---- elementwise tails, as converters write them: (mb, t, shape) -> output tensor --------------------

class Tail:
    def __init__(self, mb, shape):
        self.mb, self.shape, self.n = mb, list(shape), 0

    def op(self, op, ins, **opts):
        self.n += 1
        t = self.mb.tensor(f"e{self.n}", self.shape)
        self.mb.op(op, [self.c(i) if isinstance(i, float) else i for i in ins], [t], **opts)
        return t

    def c(self, v):
        self.n += 1
        return self.mb.const(f"c{self.n}", np.array(v, np.float32))


def gelu(approximate):
    return lambda tl, x: tl.op("GELU", [x], approximate=approximate)


def gelu_tanh(cube):
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), x^3 as POW or as two MULs."""
    def f(tl, x):
        x3 = tl.op("POW", [x, 3.0]) if cube == "pow" else tl.op("MUL", [x, tl.op("MUL", [x, x])])
        u = tl.op("MUL", [tl.op("ADD", [x, tl.op("MUL", [x3, 0.044715])]), SQRT_2_PI])
        return tl.op("MUL", [tl.op("MUL", [x, 0.5]), tl.op("ADD", [tl.op("TANH", [u]), 1.0])])
    return f


def gelu_erf(tl, x):
    """x * 0.5 * (1 + erf(x / sqrt(2))) with erf decomposed (Abramowitz-Stegun 7.1.26), as a converter
    without an ERF op writes it."""
    z = tl.op("DIV", [x, 1.4142135623730951])
    t = tl.op("DIV", [1.0, tl.op("ADD", [tl.op("MUL", [tl.op("ABS", [z]), 0.3275911]), 1.0])])
    poly = 1.061405429
    for a in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly = tl.op("ADD", [tl.op("MUL", [t, poly]), a])
    poly = tl.op("MUL", [poly, t])
    e = tl.op("EXP", [tl.op("NEG", [tl.op("MUL", [z, z])])])
    erf = tl.op("MUL", [tl.op("SIGN", [z]), tl.op("SUB", [1.0, tl.op("MUL", [poly, e])])])
    return tl.op("MUL", [tl.op("MUL", [x, 0.5]), tl.op("ADD", [erf, 1.0])])


def silu(tl, x):
    return tl.op("MUL", [x, tl.op("LOGISTIC", [x])])


def bias_add(tl, x):
    return tl.op("ADD", [x, tl.mb.const(f"bias{tl.n}", rand(tl.shape[-1]))])


def bias_gelu(tl, x):
    return gelu(False)(tl, bias_add(tl, x))


def scale_relu6(tl, x):
    return tl.op("RELU6", [tl.op("MUL", [x, 1.5])])


TAILS = {"gelu_exact": gelu(False), "gelu_approx": gelu(True), "gelu_tanh_pow": gelu_tanh("pow"),
         "gelu_tanh_mul": gelu_tanh("mul"), "gelu_erf": gelu_erf, "bias_add": bias_add, "bias_gelu": bias_gelu,
         "silu": silu, "scale_relu6": scale_relu6}


# ---- FULLY_CONNECTED ----------------------------------------------------------------------------------

def fc_model(tail, keep_num_dims=True, bias=True, act="NONE", residual=False):
    mb = ModelBuilder()
    x = mb.input("x", [2, 5, 8])
    w = mb.const("w", rand(12, 8, lo=-0.5, hi=0.5))
    b = mb.const("b", rand(12)) if bias else -1
    shape = [2, 5, 12] if keep_num_dims else [10, 12]
    a = mb.tensor("a", shape)
    mb.op("FULLY_CONNECTED", [x, w, b], [a], keep_num_dims=keep_num_dims, fused_activation_function=act)
    ins = [x]
    if residual:
        r = mb.input("r", shape)
        ins.append(r)
        s = mb.tensor("s", shape)
        mb.op("ADD", [a, r], [s])
        a = s
    mb.output(TAILS[tail](Tail(mb, shape), a))
    return mb.finish(), [rand(2, 5, 8)] + ([rand(*shape)] if residual else [])


@pytest.mark.parametrize("tail", sorted(TAILS))
@pytest.mark.parametrize("keep_num_dims", [True, False])
def test_fc_tail_is_one_dispatch(tail, keep_num_dims):
    model, xs = fc_model(tail, keep_num_dims, bias=tail not in ("bias_add", "bias_gelu"))
    assert fused_ops(model) == ["FULLY_CONNECTED"]
    outs, d_on, d_off = on_off(model, xs)
    assert d_on == 1 and d_off >= 2
    close_to_litert(outs, model, xs)


@pytest.mark.parametrize("act", ["RELU", "RELU6"])
def test_fc_fused_activation_residual_then_gelu(act):
    """The FC's own activation and a fused residual ADD come first, then the chain."""
    model, xs = fc_model("gelu_approx", act=act, residual=True)
    assert fused_ops(model) == ["FULLY_CONNECTED"]
    outs, d_on, d_off = on_off(model, xs)
    assert (d_on, d_off) == (1, 2)
    close_to_litert(outs, model, xs)


def test_fc_through_reshape_view_then_gelu():
    """ConvNeXt's form: FULLY_CONNECTED [HW, C], RESHAPE to [1, H, W, C], GELU (a graph output): the
    chain reads a view of the FC's result; the output becomes a view of the FC's tensor."""
    mb = ModelBuilder()
    x = mb.input("x", [1, 3, 3, 8])
    x2 = mb.tensor("x2", [9, 8])
    mb.op("RESHAPE", [x, mb.const("s1", np.array([9, 8], np.int32))], [x2], new_shape=[9, 8])
    a = mb.tensor("a", [9, 12])
    mb.op("FULLY_CONNECTED", [x2, mb.const("w", rand(12, 8, lo=-0.5, hi=0.5)), mb.const("b", rand(12))], [a])
    v = mb.tensor("v", [1, 3, 3, 12])
    mb.op("RESHAPE", [a, mb.const("s2", np.array([1, 3, 3, 12], np.int32))], [v], new_shape=[1, 3, 3, 12])
    mb.output(bias_gelu(Tail(mb, [1, 3, 3, 12]), v))
    model, xs = mb.finish(), [rand(1, 3, 3, 8)]
    assert fused_ops(model) == ["FULLY_CONNECTED"]
    for precision in ("fp32", "fp16"):
        outs, d_on, d_off = on_off(model, xs, precision=precision)
        assert (d_on, d_off) == (1, 2)
    close_to_litert(run(model, xs)[0], model, xs)


@pytest.mark.parametrize("tail", ["gelu_exact", "gelu_tanh_pow", "bias_gelu"])
def test_fp16_chain_is_rounded_as_stored(tail):
    """--precision fp16: the FC's result, which the unfused program stored as float16, is rounded so in
    registers (a hidden FC keeps its output fp16: it feeds a second FC)."""
    mb = ModelBuilder()
    x = mb.input("x", [6, 8])
    a = mb.tensor("a", [6, 12])
    mb.op("FULLY_CONNECTED", [x, mb.const("w", rand(12, 8, lo=-0.5, hi=0.5)), mb.const("b", rand(12))], [a])
    g = TAILS[tail](Tail(mb, [6, 12]), a)
    y = mb.tensor("y", [6, 4])
    mb.op("FULLY_CONNECTED", [g, mb.const("w2", rand(4, 12, lo=-0.5, hi=0.5)), mb.const("b2", rand(4))], [y])
    mb.output(y)
    model, xs = mb.finish(), [rand(6, 8)]
    outs, d_on, d_off = on_off(model, xs, precision="fp16")
    assert (d_on, d_off) == (2, 3)
    outs32, d32, _ = on_off(model, xs)
    assert d32 == 2
    close_to_litert(outs32, model, xs)


# ---- CONV_2D --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kernel", [1, 3])
@pytest.mark.parametrize("tail", ["gelu_exact", "gelu_approx", "gelu_tanh_mul", "silu", "bias_add", "scale_relu6"])
def test_conv_tail_is_one_dispatch(kernel, tail):
    mb = ModelBuilder()
    x = mb.input("x", [1, 6, 6, 4])
    a = mb.tensor("a", [1, 6, 6, 8])
    mb.op("CONV_2D", [x, mb.const("w", rand(8, kernel, kernel, 4, lo=-0.5, hi=0.5)), mb.const("b", rand(8))], [a],
          padding="SAME", stride_h=1, stride_w=1)
    mb.output(TAILS[tail](Tail(mb, [1, 6, 6, 8]), a))
    model, xs = mb.finish(), [rand(1, 6, 6, 4)]
    assert fused_ops(model) == ["CONV_2D"]
    outs, d_on, d_off = on_off(model, xs)
    assert d_on == 1 and d_off == 2
    close_to_litert(outs, model, xs)


def test_conv_residual_add_then_gelu():
    """EfficientFormer's form: conv, residual ADD (the conv's residual epilogue), GELU (the chain)."""
    mb = ModelBuilder()
    x = mb.input("x", [1, 5, 5, 8])
    a = mb.tensor("a", [1, 5, 5, 8])
    mb.op("CONV_2D", [x, mb.const("w", rand(8, 1, 1, 8, lo=-0.5, hi=0.5)), mb.const("b", rand(8))], [a],
          padding="VALID", stride_h=1, stride_w=1)
    s = mb.tensor("s", [1, 5, 5, 8])
    mb.op("ADD", [x, a], [s])
    mb.output(gelu(False)(Tail(mb, [1, 5, 5, 8]), s))
    model, xs = mb.finish(), [rand(1, 5, 5, 8)]
    assert fused_ops(model) == ["CONV_2D"]
    outs, d_on, d_off = on_off(model, xs)
    assert (d_on, d_off) == (1, 2)
    close_to_litert(outs, model, xs)


# ---- BATCH_MATMUL ---------------------------------------------------------------------------------------

def bmm_model(adj_x, adj_y, tail, b_batch=(2, 3), const_rhs=False):
    m, k, n = 5, 6, 7
    mb = ModelBuilder()
    a = mb.input("a", [2, 3] + ([k, m] if adj_x else [m, k]))
    bshape = list(b_batch) + ([n, k] if adj_y else [k, n])
    b = mb.const("b", rand(*bshape, lo=-1, hi=1)) if const_rhs else mb.input("b", bshape)
    y = mb.tensor("y", [2, 3, m, n])
    mb.op("BATCH_MATMUL", [a, b], [y], adj_x=adj_x, adj_y=adj_y)
    xs = [rand(*([2, 3] + ([k, m] if adj_x else [m, k])))] + ([] if const_rhs else [rand(*bshape, lo=-1, hi=1)])
    tl = Tail(mb, [2, 3, m, n])
    if tail == "scale_mask":            # attention scores: * scale + mask [1, 1, M, N] (a runtime input)
        mask = mb.input("mask", [1, 1, m, n])
        xs.append(np.where(rand(1, 1, m, n) > 0, 0, -100).astype(np.float32))
        out = tl.op("ADD", [tl.op("MUL", [y, 0.40824829]), mask])
    elif tail == "residual":            # + a runtime tensor of the output's shape
        r = mb.input("r", [2, 3, m, n])
        xs.append(rand(2, 3, m, n))
        out = tl.op("ADD", [y, r])
    elif tail == "bias_rows":           # + a constant over the batch and rows
        out = tl.op("ADD", [y, mb.const("rb", rand(3, m, 1))])
    else:
        out = TAILS[tail](tl, y)
    mb.output(out)
    return mb.finish(), xs


@pytest.mark.parametrize("adj_x", [False, True])
@pytest.mark.parametrize("adj_y", [False, True])
@pytest.mark.parametrize("tail", ["scale_mask", "residual", "gelu_approx"])
def test_batch_matmul_tail_is_one_dispatch(adj_x, adj_y, tail):
    model, xs = bmm_model(adj_x, adj_y, tail)
    assert fused_ops(model) == ["BATCH_MATMUL"]
    outs, d_on, d_off = on_off(model, xs)
    assert d_on == 1 and d_off == 2
    close_to_litert(outs, model, xs)


@pytest.mark.parametrize("tail", ["bias_rows", "gelu_erf", "bias_gelu"])
def test_batch_matmul_broadcast_batch(tail):
    model, xs = bmm_model(False, True, tail, b_batch=(1, 3))
    outs, d_on, d_off = on_off(model, xs)
    assert d_on == 1 and d_off == 2
    close_to_litert(outs, model, xs)


@pytest.mark.parametrize("adj_y", [False, True])
def test_batch_matmul_constant_rhs_gemm_path(adj_y):
    """A constant RHS without batch runs the gemm template: the same chain in its finish."""
    model, xs = bmm_model(False, adj_y, "bias_gelu", b_batch=(), const_rhs=True)
    outs, d_on, d_off = on_off(model, xs)
    assert d_on == 1 and d_off == 2
    close_to_litert(outs, model, xs)


def test_chain_grows_across_views():
    """Swin's attention scores: BATCH_MATMUL, + relative position bias, RESHAPE to [B, nW, heads, N, N],
    + shifted-window mask, RESHAPE back: both ADDs (each after a view) join the matmul."""
    mb = ModelBuilder()
    q = mb.input("q", [4, 3, 5, 6])
    k = mb.input("k", [4, 3, 5, 6])
    s = mb.tensor("s", [4, 3, 5, 5])
    mb.op("BATCH_MATMUL", [q, k], [s], adj_y=True)
    s1 = mb.tensor("s1", [4, 3, 5, 5])
    mb.op("ADD", [s, mb.const("rel", rand(3, 5, 5))], [s1])
    v = mb.tensor("v", [2, 2, 3, 5, 5])
    mb.op("RESHAPE", [s1, mb.const("sh1", np.array([2, 2, 3, 5, 5], np.int32))], [v])
    s2 = mb.tensor("s2", [2, 2, 3, 5, 5])
    mb.op("ADD", [v, mb.const("mask", np.where(rand(2, 1, 5, 5) > 0, 0, -100).astype(np.float32))], [s2])
    v2 = mb.tensor("v2", [4, 3, 5, 5])
    mb.op("RESHAPE", [s2, mb.const("sh2", np.array([4, 3, 5, 5], np.int32))], [v2])
    p = mb.tensor("p", [4, 3, 5, 5])
    mb.op("SOFTMAX", [v2], [p], beta=1.0)
    mb.output(p)
    model, xs = mb.finish(), [rand(4, 3, 5, 6), rand(4, 3, 5, 6)]
    assert fused_ops(model) == ["BATCH_MATMUL", "SOFTMAX"]
    outs, d_on, d_off = on_off(model, xs)
    assert (d_on, d_off) == (2, 4)
    close_to_litert(outs, model, xs)


@pytest.mark.parametrize("view", [False, True])
def test_producer_moves_to_a_chain_input_made_after_it(view):
    """ADD(matmul, softmax(z)) with the SOFTMAX after the matmul in the model (view: read through a
    RESHAPE, as Swin's shifted-window mask is): the matmul runs after it."""
    mb = ModelBuilder()
    a, b = mb.input("a", [3, 4, 5]), mb.input("b", [3, 5, 6])
    z = mb.input("z", [3, 24] if view else [3, 4, 6])
    y = mb.tensor("y", [3, 4, 6])
    mb.op("BATCH_MATMUL", [a, b], [y])
    sz = mb.tensor("sz", [3, 24] if view else [3, 4, 6])
    mb.op("SOFTMAX", [z], [sz], beta=1.0)
    if view:
        v = mb.tensor("v", [3, 4, 6])
        mb.op("RESHAPE", [sz, mb.const("sh", np.array([3, 4, 6], np.int32))], [v])
        sz = v
    o = mb.tensor("o", [3, 4, 6])
    mb.op("ADD", [y, sz], [o])
    mb.output(o)
    model, xs = mb.finish(), [rand(3, 4, 5), rand(3, 5, 6), rand(3, 24) if view else rand(3, 4, 6)]
    assert fused_ops(model) == ["SOFTMAX", "BATCH_MATMUL"]
    outs, d_on, d_off = on_off(model, xs)
    assert (d_on, d_off) == (2, 3)
    close_to_litert(outs, model, xs)


def test_residual_view_made_after_the_conv():
    """fuse_add_epilogue: a residual read through a RESHAPE of a tensor made after the conv is not
    folded into the conv (which would read it before it is written)."""
    mb = ModelBuilder()
    x, z = mb.input("x", [1, 3, 3, 4]), mb.input("z", [9, 4])
    a = mb.tensor("a", [1, 3, 3, 4])
    mb.op("CONV_2D", [x, mb.const("w", rand(4, 1, 1, 4)), mb.const("b", rand(4))], [a], padding="VALID",
          stride_h=1, stride_w=1)
    sz = mb.tensor("sz", [9, 4])
    mb.op("SOFTMAX", [z], [sz], beta=1.0)
    v = mb.tensor("v", [1, 3, 3, 4])
    mb.op("RESHAPE", [sz, mb.const("sh", np.array([1, 3, 3, 4], np.int32))], [v])
    o = mb.tensor("o", [1, 3, 3, 4])
    mb.op("ADD", [a, v], [o])
    mb.output(o)
    model, xs = mb.finish(), [rand(1, 3, 3, 4), rand(9, 4)]
    outs, _, _ = on_off(model, xs)
    close_to_litert(outs, model, xs)


# ---- refused -------------------------------------------------------------------------------------------

def _fc_then(build):
    """x -> FULLY_CONNECTED a [4, 12] -> build(mb, a) (which marks the outputs)."""
    mb = ModelBuilder()
    x = mb.input("x", [4, 8])
    a = mb.tensor("a", [4, 12])
    mb.op("FULLY_CONNECTED", [x, mb.const("w", rand(12, 8, lo=-0.5, hi=0.5)), mb.const("b", rand(12))], [a])
    extra = build(mb, a)
    return mb.finish(), [rand(4, 8)] + (extra or [])


def _intermediate_is_output(mb, a):
    mb.output(gelu(False)(Tail(mb, [4, 12]), a))
    mb.output(a)


def _intermediate_used_twice(mb, a):
    tl = Tail(mb, [4, 12])
    mb.output(gelu(False)(tl, a))
    mb.output(tl.op("SOFTMAX", [a], beta=1.0))


def _view_is_output(mb, a):
    v = mb.tensor("v", [2, 2, 12])
    mb.op("RESHAPE", [a, mb.const("sh", np.array([2, 2, 12], np.int32))], [v])
    mb.output(gelu(True)(Tail(mb, [4, 12]), a))
    mb.output(v)


def _consumer_broadcasts(mb, a):
    """ADD([4, 12], r [3, 4, 12]) -> [3, 4, 12]: the FC's value is read three times."""
    r = mb.input("r", [3, 4, 12])
    mb.output(Tail(mb, [3, 4, 12]).op("ADD", [a, r]))
    return [rand(3, 4, 12)]


def _int_input(mb, a):
    """A chain with an int32 input (CAST int32 -> float32 + ADD: one FUSED_ELEMENTWISE)."""
    i = mb.input("i", [4, 12], "int32")
    tl = Tail(mb, [4, 12])
    mb.output(tl.op("ADD", [a, tl.op("CAST", [i], in_data_type="INT32", out_data_type="FLOAT32")]))
    return [RNG.integers(-5, 5, (4, 12)).astype(np.int32)]


def _not_elementwise(mb, a):
    mb.output(Tail(mb, [4, 12]).op("SOFTMAX", [a], beta=1.0))


REFUSED = {"intermediate_is_output": (_intermediate_is_output, ["FULLY_CONNECTED", "GELU"]),
           "intermediate_used_twice": (_intermediate_used_twice, ["FULLY_CONNECTED", "GELU", "SOFTMAX"]),
           "view_is_output": (_view_is_output, ["FULLY_CONNECTED", "GELU"]),
           "consumer_broadcasts": (_consumer_broadcasts, ["FULLY_CONNECTED", "ADD"]),
           "int32_chain_input": (_int_input, ["FULLY_CONNECTED", "FUSED_ELEMENTWISE"]),
           "not_elementwise": (_not_elementwise, ["FULLY_CONNECTED", "SOFTMAX"])}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused(case):
    build, ops = REFUSED[case]
    model, xs = _fc_then(build)
    assert fused_ops(model) == ops
    assert fused_ops(model, disabled=[PASS]) == ops
    outs, d_on, d_off = on_off(model, xs)
    assert d_on == d_off == len(ops)
    close_to_litert(outs, model, xs)


def test_refused_quantized():
    """An int8 FULLY_CONNECTED + ADD in a simulated integer program (a side op without an int8 form,
    helpers/float_view.py, keeps the model off native int8) keeps its ADD, rounded to its grid."""
    mb = ModelBuilder()
    x = mb.input("x", [4, 8], "int8", quant=(0.05, 0))
    a = mb.tensor("a", [4, 12], "int8", quant=(0.1, 3))
    w = mb.const("w", RNG.integers(-100, 100, (12, 8)).astype(np.int8), quant=(0.02, 0))
    b = mb.const("b", RNG.integers(-50, 50, 12).astype(np.int32), quant=(0.001, 0))
    mb.op("FULLY_CONNECTED", [x, w, b], [a])
    c = mb.const("c", RNG.integers(-100, 100, 12).astype(np.int8), quant=(0.04, -2))
    y = mb.tensor("y", [4, 12], "int8", quant=(0.12, 1))
    mb.op("ADD", [a, c], [y])
    mb.output(y)
    keep_float_view(mb, x, [4, 8])
    model = mb.finish()
    ops = fused_ops(model)
    assert ops == fused_ops(model, disabled=[PASS]) and ops.count("FULLY_CONNECTED") == ops.count("ADD") == 1
    xs = [RNG.integers(-128, 128, (4, 8)).astype(np.int8)]
    outs, d_on, d_off = on_off(model, xs)
    assert d_on == d_off
    ref = run_litert(model, xs)[0]
    assert np.abs(outs[0].astype(np.int32) - ref.astype(np.int32)).max() <= 1


@pytest.mark.parametrize("ci,mult", [(4, 1), (6, 1), (3, 2)])
@pytest.mark.parametrize("tail", ["gelu_exact", "silu", "bias_gelu"])
def test_depthwise_tail_is_one_dispatch(ci, mult, tail):
    """DEPTHWISE_CONV_2D's vec4 path (CO % 4 == 0, multiplier 1) and scalar path."""
    co = ci * mult
    mb = ModelBuilder()
    x = mb.input("x", [1, 5, 5, ci])
    a = mb.tensor("a", [1, 5, 5, co])
    mb.op("DEPTHWISE_CONV_2D", [x, mb.const("w", rand(1, 3, 3, co)), mb.const("b", rand(co))], [a], padding="SAME",
          stride_h=1, stride_w=1, depth_multiplier=mult)
    mb.output(TAILS[tail](Tail(mb, [1, 5, 5, co]), a))
    model, xs = mb.finish(), [rand(1, 5, 5, ci)]
    assert fused_ops(model) == ["DEPTHWISE_CONV_2D"]
    outs, d_on, d_off = on_off(model, xs)
    assert (d_on, d_off) == (1, 2)
    close_to_litert(outs, model, xs)


def test_pool_is_no_host():
    """A producer without an epilogue chain (pooling): the GELU after it stays a dispatch."""
    mb = ModelBuilder()
    x = mb.input("x", [1, 4, 4, 4])
    a = mb.tensor("a", [1, 2, 2, 4])
    mb.op("AVERAGE_POOL_2D", [x], [a], padding="VALID", stride_h=2, stride_w=2, filter_height=2, filter_width=2)
    mb.output(gelu(False)(Tail(mb, [1, 2, 2, 4]), a))
    assert fused_ops(mb.finish()) == ["AVERAGE_POOL_2D", "GELU"]


# ---- pieces ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("in_shape,out_shape", [((2, 3, 4), (2, 3, 4)), ((4,), (2, 3, 4)), ((), (2, 3, 4)),
                                                ((3, 1), (2, 3, 4)), ((2, 1, 4), (2, 3, 4)),
                                                ((1, 3, 1, 5), (2, 3, 4, 5)), ((2, 1, 1, 5), (2, 3, 4, 5)),
                                                ((1, 1, 4, 1), (2, 3, 4, 5))])
def test_index_expr_broadcasts(in_shape, out_shape):
    expr = index_expr(in_shape, out_shape).replace("/", "//")
    src = np.arange(int(np.prod(in_shape)), dtype=np.int64).reshape(in_shape)
    want = np.broadcast_to(src, out_shape).reshape(-1)
    got = np.array([eval(expr, {"o": o}) for o in range(want.size)])
    np.testing.assert_array_equal(got, want)


def test_chain_reason_limits():
    g = load_tflite(fc_model("gelu_exact")[0]).main
    x = g.inputs[0]
    step = dict(op="ADD", args=[("x", 0), ("x", 1)], act=0)
    assert chain_reason(g, 80, [step], [(x, (2, 5, 8))]) is None
    assert "at most" in chain_reason(g, 80, [step], [(x, (2, 5, 8))] * 7)
    assert "does not broadcast" in chain_reason(g, 80, [step], [(x, (2, 5, 4))])
    assert "bad operand" in chain_reason(g, 80, [dict(step, args=[("x", 0), ("x", 2)])], [(x, (2, 5, 8))])


# ---- a costly chain after a tensor-core gemm (--precision fp16) ----------------------------------------

def _big_fc_then(tail, rows=4096, ci=256, co=512):
    """FULLY_CONNECTED big enough for the cooperative-matrix variant (ops/gemm_coopmat.py worthwhile), then
    `tail` (compiled only: nothing runs)."""
    mb = ModelBuilder()
    x = mb.input("x", [rows, ci])
    x2 = mb.tensor("x2", [rows, ci])
    mb.op("ADD", [x, x], [x2])
    a = mb.tensor("a", [rows, co])
    mb.op("FULLY_CONNECTED", [x2, mb.const("w", rand(co, ci, lo=-0.1, hi=0.1)), mb.const("b", rand(co))], [a])
    mb.output(TAILS[tail](Tail(mb, [rows, co]), a))
    return mb.finish()


def _labels(model, precision):
    from gpuc.compiler import normalize_options
    from gpuc.compiler.driver import prepare_batched
    return [k.label for k in prepare_batched(model, normalize_options({"precision": precision})).program]


@pytest.mark.parametrize("tail,fused16", [("gelu_exact", False), ("gelu_tanh_pow", False), ("silu", False),
                                          ("bias_add", True), ("scale_relu6", True)])
def test_costly_chain_stays_apart_from_a_tensor_core_gemm(tail, fused16):
    """Under fp16 a tensor-core gemm keeps exp/tanh/erf steps out of its epilogue (a kernel of their own);
    cheap steps still fuse, and fp32 fuses both."""
    model = _big_fc_then(tail)
    fc16 = [lb for lb in _labels(model, "fp16") if lb.startswith("FULLY_CONNECTED")]
    assert len(fc16) == 1 and ("+" in fc16[0]) == fused16, fc16
    assert len(_labels(model, "fp16")) == (2 if fused16 else 3)
    assert len(_labels(model, "fp32")) == 2
    small = _big_fc_then(tail, rows=64)               # no tensor-core variant: fused in fp16 too
    assert len(_labels(small, "fp16")) == 2
