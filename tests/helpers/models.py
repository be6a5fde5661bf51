"""Small models that several test modules use: a conv block (block_model, and its two halves
head_model / tail_model), a GPU -> CPU -> GPU model
(mixed_model), a sequence LSTM (lstm_model), elementwise chains (chain_model, UNARY_CHAINS,
hard_swish_model, layer_norm_model, ln_model), a deliberately slow one (heavy_model)."""
from __future__ import annotations

import numpy as np

from helpers.builder import ModelBuilder
from helpers.data import rnd


def _block_head(mb, x):
    """conv 3x3 -> relu6 op: r1."""
    c1 = mb.tensor("c1", [1, 6, 6, 4])
    mb.op("CONV_2D", [x, mb.const("w1", rnd((4, 3, 3, 4), 1)), mb.const("b1", rnd((4,), 2))], [c1],
          padding="SAME", stride_h=1, stride_w=1)
    r1 = mb.tensor("r1", [1, 6, 6, 4])
    mb.op("RELU6", [c1], [r1])
    return r1


def _block_tail(mb, r1, x):
    """1x1 conv (no act) + residual x (fused relu); reshape; FC -> logistic op: y."""
    c2 = mb.tensor("c2", [1, 6, 6, 4])
    mb.op("CONV_2D", [r1, mb.const("w2", rnd((4, 1, 1, 4), 3)), mb.const("b2", rnd((4,), 4))], [c2],
          padding="VALID", stride_h=1, stride_w=1)
    a = mb.tensor("a", [1, 6, 6, 4])
    mb.op("ADD", [x, c2], [a], fused_activation_function="RELU")
    f = mb.tensor("f", [1, 144])
    mb.op("RESHAPE", [a, mb.const("shape", np.array([1, 144], np.int32))], [f], new_shape=[1, 144])
    g = mb.tensor("g", [1, 3])
    mb.op("FULLY_CONNECTED", [f, mb.const("w3", rnd((3, 144), 5, -0.1, 0.1)), mb.const("b3", rnd((3,), 6))], [g])
    y = mb.tensor("y", [1, 3])
    mb.op("LOGISTIC", [g], [y])
    return y


def block_model():
    """conv -> relu6 op; 1x1 conv (no act) + residual add (fused relu); reshape; FC -> logistic op."""
    mb = ModelBuilder()
    x = mb.input("x", [1, 6, 6, 4])
    mb.output(_block_tail(mb, _block_head(mb, x), x))
    return mb.finish()


def head_model():
    """block_model's first half: x -> conv 3x3 -> relu6 -> r1."""
    mb = ModelBuilder()
    mb.output(_block_head(mb, mb.input("x", [1, 6, 6, 4])))
    return mb.finish()


def tail_model():
    """block_model's second half: (r1, x) -> 1x1 conv + residual x -> reshape -> FC -> logistic."""
    mb = ModelBuilder()
    r1 = mb.input("r1", [1, 6, 6, 4])
    mb.output(_block_tail(mb, r1, mb.input("x", [1, 6, 6, 4])))
    return mb.finish()


# compile options for mixed_model: RFFT2D read by COMPLEX_ABS would otherwise run on the GPU as matmuls
MIXED_OPTIONS = {"disable_passes": ["rfft_as_matmul"]}


def mixed_model():
    """GPU (ADD) -> CPU (RFFT2D, COMPLEX_ABS) -> GPU (ADD, MUL, LOGISTIC), and a GPU branch alongside
    (compiled with MIXED_OPTIONS)."""
    mb = ModelBuilder()
    x = mb.input("x", [1, 4, 8])
    a = mb.tensor("a", [1, 4, 8])
    mb.op("ADD", [x, mb.const("c", np.full([1, 4, 8], 0.25, np.float32))], [a])
    f = mb.tensor("f", [1, 4, 5], "complex64")
    mb.op("RFFT2D", [a, mb.const("n", np.array([4, 8], np.int32))], [f])
    mag = mb.tensor("mag", [1, 4, 5])
    mb.op("COMPLEX_ABS", [f], [mag])
    g = mb.tensor("g", [1, 4, 8])
    mb.op("MUL", [a, a], [g])                       # GPU work independent of the CPU ops
    v = mb.tensor("v", [1, 4, 5])
    mb.op("ADD", [mag, mag], [v])
    y = mb.tensor("y", [1, 4, 5])
    mb.op("MUL", [v, mb.const("s", np.full([1, 4, 5], 0.5, np.float32))], [y])
    z = mb.tensor("z", [1, 4, 5])
    mb.op("LOGISTIC", [y], [z])
    mb.output(z)
    mb.output(g)
    return mb.finish()


def lstm_model(b=2, t=4, i=5, c=6, o=None, cifg=False, peephole=False, proj=False, proj_bias=True,
               time_major=False, act=4, cell_clip=0.0, proj_clip=0.0, state=None, seed=0, layer_norm=False,
               state_buffer=True):
    """state: (h [b,o], c [b,c]) initial values, stored as the variable tensors' buffers when state_buffer."""
    rng = np.random.default_rng(seed)
    o = o if o is not None else (c if not proj else c - 2)
    w = lambda *s: rng.uniform(-0.5, 0.5, s).astype(np.float32)  # noqa: E731
    mb = ModelBuilder()
    x = mb.input("x", (t, b, i) if time_major else (b, t, i))
    ins = [x]
    ins += [-1 if (cifg and g == 0) else mb.const(f"wx{g}", w(c, i)) for g in range(4)]
    ins += [-1 if (cifg and g == 0) else mb.const(f"wh{g}", w(c, o)) for g in range(4)]
    ins += [-1 if (not peephole or (cifg and g == 0)) else mb.const(f"p{g}", w(c)) for g in range(3)]
    ins += [-1 if (cifg and g == 0) else mb.const(f"b{g}", w(c)) for g in range(4)]
    ins += [mb.const("pw", w(o, c)) if proj else -1, mb.const("pb", w(o)) if proj and proj_bias else -1]
    hv, cv = state if state is not None else (None, None)
    h0 = mb.tensor("h_state", (b, o), data=hv if state_buffer else None)
    c0 = mb.tensor("c_state", (b, c), data=cv if state_buffer else None)
    for s in (h0, c0):
        mb.tensors[s]["is_variable"] = True
    ins += [h0, c0]
    ins += [mb.const(f"ln{g}", w(c)) if layer_norm else -1 for g in range(4)]
    y = mb.tensor("y", (t, b, o) if time_major else (b, t, o))
    mb.op("UNIDIRECTIONAL_SEQUENCE_LSTM", ins, [y], fused_activation_function=act, cell_clip=cell_clip,
          proj_clip=proj_clip, time_major=time_major)
    mb.output(y)
    return mb.finish(), tuple(mb.tensors[x]["shape"])


def hard_swish_model(shape=(1, 4, 4, 3), div=False):
    """MediaPipe's x * relu6(x + 3) / 6 (or * 1/6)."""
    mb = ModelBuilder()
    x = mb.input("x", list(shape))
    t1 = mb.tensor("t1", list(shape))
    mb.op("ADD", [x, mb.const("three", np.array([3.0], np.float32))], [t1], fused_activation_function="RELU6")
    t2 = mb.tensor("t2", list(shape))
    mb.op("MUL", [x, t1], [t2])
    y = mb.tensor("y", list(shape))
    if div:
        mb.op("DIV", [t2, mb.const("six", np.array(6.0, np.float32))], [y])
    else:
        mb.op("MUL", [t2, mb.const("sixth", np.array([1 / 6], np.float32))], [y])
    mb.output(y)
    return mb.finish()


def layer_norm_chain(mb, x, shape, rng, eps=1e-3):
    """The LayerNorm chain over the last axis of tensor `x`: mean / squared difference / mean / +eps / rsqrt /
    (x-mean)*inv*gamma+beta, gamma and beta drawn from `rng`.  Returns the output tensor."""
    red = list(shape[:-1]) + [1]
    ax = mb.const("axis", np.array([-1], np.int32))
    mean = mb.tensor("mean", red)
    mb.op("MEAN", [x, ax], [mean], keep_dims=True)
    sq = mb.tensor("sq", list(shape))
    mb.op("SQUARED_DIFFERENCE", [x, mean], [sq])
    var = mb.tensor("var", red)
    mb.op("MEAN", [sq, ax], [var], keep_dims=True)
    ve = mb.tensor("ve", red)
    mb.op("ADD", [var, mb.const("eps", np.array([eps], np.float32))], [ve])
    inv = mb.tensor("inv", red)
    mb.op("RSQRT", [ve], [inv])
    d = mb.tensor("d", list(shape))
    mb.op("SUB", [x, mean], [d])
    n1 = mb.tensor("n1", list(shape))
    mb.op("MUL", [d, inv], [n1])
    n2 = mb.tensor("n2", list(shape))
    mb.op("MUL", [n1, mb.const("gamma", rng.uniform(0.5, 2, shape[-1:]).astype(np.float32))], [n2])
    y = mb.tensor("y", list(shape))
    mb.op("ADD", [n2, mb.const("beta", rng.uniform(-1, 1, shape[-1:]).astype(np.float32))], [y])
    return y


def layer_norm_model(shape=(2, 3, 8), rng=None):
    """layer_norm_chain over one input, with broadcasting; gamma and beta drawn from `rng` (default: a
    fresh generator seeded 11)."""
    rng = np.random.default_rng(11) if rng is None else rng
    mb = ModelBuilder()
    y = layer_norm_chain(mb, mb.input("x", list(shape)), shape, rng)
    mb.output(y)
    return mb.finish()


def ln_model(shape=(2, 3, 8), rng=None, axes=(-1,), keep_dims=True, var="sqdiff", eps="scalar", inv="rsqrt", out="dinv",
             gamma=True, beta=True, gamma_shape=None, second_use=None, x_view=False):
    """A LayerNorm chain over `axes` (the trailing ones), in the forms converters emit.
    var: sqdiff | mul | square | pow;  eps: scalar | vec1 | bcast;  inv: rsqrt | sqrt_div | pow;
    out: dinv ((x-mean)*inv*gamma+beta) | xinv (x*inv + (0 - mean*inv), litert-torch) |
    keras (inv *= gamma; x*inv + (beta - mean*inv)).  second_use: an intermediate also made an output.
    x_view: the elementwise ops read x through a RESHAPE to [1, *shape] (the MEAN reads x)."""
    rng = np.random.default_rng(15) if rng is None else rng
    mb = ModelBuilder()
    rank = len(shape)
    norm = sorted(a % rank for a in axes)
    keep = [1 if i in norm else d for i, d in enumerate(shape)]
    red = keep if keep_dims else [d for i, d in enumerate(shape) if i not in norm]
    nd = [shape[i] for i in range(rank) if i in norm or i > max(norm)]
    x = mb.input("x", list(shape))
    ax = mb.const("axes", np.array(list(axes), np.int32))
    names = iter(range(100))

    def op(name, ins, shp, **kw):
        t = mb.tensor(f"t{next(names)}", list(shp))
        mb.op(name, ins, [t], **kw)
        return t

    def kd(t):          # a row statistic in keep_dims shape (a RESHAPE when keep_dims is false)
        return t if keep_dims else op("RESHAPE", [t, mb.const(f"s{next(names)}", np.array(keep, np.int32))], keep,
                                      new_shape=keep)

    mean = op("MEAN", [x, ax], red, keep_dims=keep_dims)
    if x_view:
        shape = (1,) + tuple(shape)
        x = op("RESHAPE", [x, mb.const("xs", np.array(shape, np.int32))], shape, new_shape=list(shape))
    if var == "sqdiff":
        sq = op("SQUARED_DIFFERENCE", [x, kd(mean)], shape)
        d = None
    else:
        d = op("SUB", [x, kd(mean)], shape)
        sq = op("MUL", [d, d], shape) if var == "mul" else op("SQUARE", [d], shape) if var == "square" else \
            op("POW", [d, mb.const("two", np.array(2.0, np.float32))], shape)
    v = op("MEAN", [sq, ax], red, keep_dims=keep_dims)
    e = {"scalar": np.array(1e-5, np.float32), "vec1": np.array([1e-3], np.float32),
         "bcast": np.full(red, 1e-4, np.float32)}[eps]
    ve = op("ADD", [v, mb.const("eps", e)], red)
    if inv == "rsqrt":
        iv = op("RSQRT", [ve], red)
    elif inv == "pow":
        iv = op("POW", [ve, mb.const("mhalf", np.array(-0.5, np.float32))], red)
    else:
        iv = None
    g = mb.const("gamma", rng.uniform(0.5, 2, gamma_shape or nd).astype(np.float32)) if gamma else None
    b = mb.const("beta", rng.uniform(-1, 1, nd).astype(np.float32)) if beta else None
    if out == "dinv":
        d = d if d is not None else op("SUB", [x, kd(mean)], shape)
        y = op("MUL", [d, kd(iv)], shape) if iv is not None else op("DIV", [d, kd(op("SQRT", [ve], red))], shape)
        if g is not None:
            y = op("MUL", [y, g], shape)
        if b is not None:
            y = op("ADD", [y, b], shape)
    elif out == "xinv":
        a = op("MUL", [x, kd(iv)], shape)
        mi = op("MUL", [mean, iv], red)
        nmi = op("SUB", [mb.const("zero", np.array(0.0, np.float32)), mi], red)
        y = op("ADD", [a, kd(nmi)], shape)
        if g is not None:
            y = op("MUL", [y, g], shape)
        if b is not None:
            y = op("ADD", [y, b], shape)
    else:       # keras: inv = rsqrt(var + eps) * gamma; y = x * inv + (beta - mean * inv)
        ig = op("MUL", [kd(iv), g], shape)
        xi = op("MUL", [x, ig], shape)
        mi = op("MUL", [kd(mean), ig], shape)
        y = op("ADD", [xi, op("SUB", [b, mi], shape)], shape)
    mb.output(y)
    if second_use is not None:
        mb.output({"mean": mean, "var": v, "inv": iv}[second_use])
    return mb.finish()


def chain_model(ops, shape=(2, 5, 7), bshape=(7,)):
    """x -> op1 -> op2 ...; binary ops take a runtime input of shape bshape (broadcast)."""
    mb = ModelBuilder()
    x = mb.input("x", list(shape))
    b = mb.input("b", list(bshape))
    cur = x
    for i, (op, opts) in enumerate(ops):
        t = mb.tensor(f"t{i}", list(shape))
        binary = op in ("ADD", "SUB", "MUL", "DIV", "POW", "SQUARED_DIFFERENCE", "MAXIMUM", "MINIMUM",
                        "FLOOR_DIV", "FLOOR_MOD", "PRELU")
        mb.op(op, [cur, b] if binary else [cur], [t], **opts)
        cur = t
    mb.output(cur)
    return mb.finish()


UNARY_CHAINS = [
    [("ABS", {}), ("SQRT", {}), ("LOG", {}), ("NEG", {}), ("EXP", {}), ("RSQRT", {})],
    [("SIN", {}), ("SQUARE", {}), ("COS", {}), ("FLOOR", {}), ("CEIL", {}), ("ROUND", {}), ("SIGN", {})],
    [("ELU", {}), ("HARD_SWISH", {}), ("GELU", {"approximate": True}), ("GELU", {}), ("LEAKY_RELU", {"alpha": 0.3}),
     ("RELU_0_TO_1", {}), ("LOGISTIC", {}), ("TANH", {}), ("RELU", {}), ("RELU6", {}), ("RELU_N1_TO_1", {})],
]


def heavy_model(m=768, k=768, layers=4):
    """A deliberately slow model for timeouts: `layers` FULLY_CONNECTED [m, k] x [k, k] sharing one
    weight matrix (a small bundle), 2*m*k*k*layers flops in one submission (768, 768, 4: 3.6 GFLOP,
    about 1 s on lavapipe with 2 cores)."""
    mb = ModelBuilder()
    x = mb.input("x", [m, k])
    w = mb.const("w", np.random.default_rng(0).uniform(-1, 1, (k, k)).astype(np.float32) / np.float32(np.sqrt(k)))
    for i in range(layers):
        y = mb.tensor(f"y{i}", [m, k])
        mb.op("FULLY_CONNECTED", [x, w, -1], [y])
        x = y
    mb.output(x)
    return mb.finish()


def conv_mean_softmax(ramp: bool = True, conv_output: bool = False) -> bytes:
    """CONV_2D (RELU6) -> MEAN -> SOFTMAX on a [1, 5, 5, 3] input: three dispatches of different sizes
    (the fuzzers' and the bundle-trust tests' seed).  ramp: weights from -1 to 1 and bias 0..3 (else ones
    and zeros); conv_output: the convolution's output is a model output too."""
    mb = ModelBuilder()
    x = mb.input("x", [1, 5, 5, 3])
    c = mb.tensor("c", [1, 5, 5, 4])
    w = np.linspace(-1, 1, 108, dtype=np.float32).reshape(4, 3, 3, 3) if ramp else np.ones((4, 3, 3, 3), np.float32)
    b = np.arange(4, dtype=np.float32) if ramp else np.zeros(4, np.float32)
    mb.op("CONV_2D", [x, mb.const("w", w), mb.const("b", b)], [c],
          padding="SAME", stride_h=1, stride_w=1, fused_activation_function="RELU6")
    m = mb.tensor("m", [1, 4])
    mb.op("MEAN", [c, mb.const("ax", np.array([1, 2], np.int32))], [m], keep_dims=False)
    y = mb.tensor("y", [1, 4])
    mb.op("SOFTMAX", [m], [y], beta=1.0)
    mb.output(y)
    if conv_output:
        mb.output(c)
    return mb.finish()
