"""UNIDIRECTIONAL_SEQUENCE_LSTM (float32): one dispatch, one workgroup per batch element looping
over the time steps (shaders/lstm.comp).

TFLite inputs: 0 x [B,T,I] ([T,B,I] when time_major); 1-4 input-to-{input,forget,cell,output}
weights [C,I]; 5-8 recurrent-to-gate weights [C,O]; 9-11 peephole (cell-to-{input,forget,output})
weights [C]; 12-15 gate biases [C]; 16 projection weights [O,C]; 17 projection bias [O];
18 output state [B,O] and 19 cell state [B,C] (variable tensors: updated in place, they persist
across runs); 20-23 layer-norm coefficients (not supported).  CIFG (no input gate: 1, 5, 12
absent), peephole, projection, cell_clip and proj_clip are supported.  All weights must be constants:
they are packed into one constant buffer at compile time.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler import sym_shapes as D
from gpuc.compiler.ops import NEUTRAL, SHAPE_ONLY, Why, declare, register, rules, step_chunks, template
from gpuc.compiler.ops.util import ACT_NAMES, checked
from gpuc.compiler.codegen.shared_memory import PORTABLE_SMEM

# TFLite codes matched against LiteRT's float LSTM (relu, relu6, tanh).  NONE is rejected: LiteRT's
# ApplyActivationToVector returns without writing its result for it, so its output is not defined.
CELL_ACTS = (1, 3, 4)
MAX_SHARED_FLOATS = PORTABLE_SMEM // 4     # h (O) + c (C) + m (C) floats of shared memory: 32 KiB
OPTIONAL = (1, 5, 9, 10, 11, 12, 16, 17, 20, 21, 22, 23)


def _dims(node, graph):
    x = graph.t(node.inputs[0])
    if len(x.shape) != 3:
        raise ValueError(f"input must be rank 3, got {list(x.shape)}")
    tm = bool(node.attrs.get("time_major", False))
    t, b = (x.shape[0], x.shape[1]) if tm else (x.shape[1], x.shape[0])
    i = x.shape[2]
    c = graph.t(node.inputs[2]).shape[0]
    o = graph.t(node.inputs[6]).shape[1] if len(graph.t(node.inputs[6]).shape) == 2 else -1
    return b, t, i, c, o, tm


def _const(node, graph, pos, shape, what):
    tid = node.inputs[pos] if pos < len(node.inputs) else -1
    if tid < 0:
        return None
    t = graph.t(tid)
    if not t.is_const or t.is_variable:
        raise ValueError(f"{what} (input {pos}, {t.name!r}) must be a constant")
    if t.dtype != "float32":
        raise ValueError(f"{what} (input {pos}) has dtype {t.dtype} (only float32 weights are supported)")
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{what} (input {pos}) has shape {list(t.shape)}, expected {list(shape)}")
    return np.asarray(t.data, np.float32).reshape(shape)


def _weights(node, graph):
    """Validated constants: (wx [4,C,I], wh [4,C,O], bias [4,C], peep [3,C], pw [O,C], pb [O], flags)."""
    b, t, i, c, o, tm = _dims(node, graph)
    present = lambda p: p < len(node.inputs) and node.inputs[p] >= 0  # noqa: E731
    cifg = not present(1)
    if cifg and (present(5) or present(12) or present(9)):
        raise ValueError("CIFG (no input-gate weights) needs the recurrent input-gate weights, the input-gate "
                         "bias and the cell-to-input peephole absent too")
    if not cifg and not (present(5) and present(12)):
        raise ValueError("input-gate weights present but recurrent input-gate weights or bias absent")
    if any(present(p) for p in (20, 21, 22, 23)):
        raise ValueError("layer-normalized LSTM not supported")
    if node.attrs.get("diagonal_recurrent_tensors"):
        raise ValueError("diagonal recurrent tensors not supported")
    peep = present(10) or present(11)
    if peep and not (present(10) and present(11) and (cifg or present(9))):
        raise ValueError("peephole weights must be given for every gate")
    proj = present(16)
    if not proj and present(17):
        raise ValueError("projection bias without projection weights")
    if not proj and o != c:
        raise ValueError(f"output size {o} differs from cell size {c} without a projection")
    wx = np.zeros((4, c, i), np.float32)
    wh = np.zeros((4, c, o), np.float32)
    bias = np.zeros((4, c), np.float32)
    pp = np.zeros((3, c), np.float32)
    for g in range(4):
        for dst, pos, shape, what in ((wx, 1 + g, (c, i), "input weights"), (wh, 5 + g, (c, o), "recurrent weights"),
                                      (bias, 12 + g, (c,), "gate bias")):
            v = _const(node, graph, pos, shape, what)
            if v is not None:
                dst[g] = v
            elif g > 0:
                raise ValueError(f"{what} (input {pos}) is required")
    for g in range(3):
        v = _const(node, graph, 9 + g, (c,), "peephole weights")
        if v is not None:
            pp[g] = v
    pw = _const(node, graph, 16, (o, c), "projection weights")
    pb = _const(node, graph, 17, (o,), "projection bias")
    pw = np.zeros((o, c), np.float32) if pw is None else pw
    pb = np.zeros((o,), np.float32) if pb is None else pb
    return wx, wh, bias, pp, pw, pb, dict(CIFG=int(cifg), PEEPHOLE=int(peep), PROJ=int(proj))


@checked
def lstm_check(node, graph):
    b, t, i, c, o, tm = _dims(node, graph)
    if min(b, t, i, c, o) < 1:
        return "empty dimension"
    act = int(node.attrs.get("fused_activation_function", 0) or 0)
    if act not in CELL_ACTS:
        return f"cell activation {ACT_NAMES.get(act, act)} not supported"
    if o + 2 * c > MAX_SHARED_FLOATS:
        return f"cell size {c} / output size {o} too large for one workgroup's shared memory"
    _weights(node, graph)
    for pos, shape, what in ((18, (b, o), "output state"), (19, (b, c), "cell state")):
        s = graph.t(node.inputs[pos])
        if not s.is_variable:
            return f"{what} (input {pos}, {s.name!r}) must be a variable tensor"
        if tuple(s.shape) != shape or s.dtype != "float32":
            return f"{what} (input {pos}) must be float32 {list(shape)}, got {s.dtype} {list(s.shape)}"
    y = graph.t(node.outputs[0])
    want = (t, b, o) if tm else (b, t, o)
    if tuple(y.shape) != want:
        return f"output shape {list(y.shape)}, expected {list(want)}"
    for clip in ("cell_clip", "proj_clip"):
        if float(node.attrs.get(clip, 0.0) or 0.0) < 0:
            return f"negative {clip}"
    return None


@register("UNIDIRECTIONAL_SEQUENCE_LSTM", check=lstm_check, inputs=(20, 24), optional=OPTIONAL,
          summary="float32; CIFG, peephole, projection, cell/proj clip, time_major; state persists across runs")
def lower_lstm(node, graph):
    return in_chunks(lstm_kernel(node, graph), graph)


def lstm_kernel(node, graph) -> Kernel:
    """The one lstm kernel of `node` over every step (lower_lstm chunks it; so does the bidirectional lowering,
    after adding its direction's defines)."""
    b, t, i, c, o, tm = _dims(node, graph)
    wx, wh, bias, pp, pw, pb, flags = _weights(node, graph)
    parts = [wx, wh, bias, pp, pw, pb]
    offs, cur = [], 0
    for p in parts:
        offs.append(cur)
        cur += p.size
    packed = graph.add_const(f"{graph.t(node.outputs[0]).name}/lstm_weights",
                             np.concatenate([p.reshape(-1) for p in parts]).astype(np.float32))
    cell_clip = float(node.attrs.get("cell_clip", 0.0) or 0.0)
    proj_clip = float(node.attrs.get("proj_clip", 0.0) or 0.0)
    wide = max(c, o)
    local = 32 if wide <= 32 else 64 if wide <= 64 else 128 if wide <= 128 else 256
    defines = dict(NB=b, T=t, I=i, C=c, O=o, TIME_MAJOR=int(tm), **flags,
                   OFF_WX=offs[0], OFF_WH=offs[1], OFF_B=offs[2], OFF_P=offs[3], OFF_PW=offs[4], OFF_PB=offs[5],
                   CELL_ACT=int(node.attrs.get("fused_activation_function", 0) or 0),
                   CCLIP=int(cell_clip > 0), CELL_CLIP=cell_clip,
                   PCLIP=int(proj_clip > 0 and flags["PROJ"]), PROJ_CLIP=proj_clip)
    binds = [("out_", node.outputs[0]), ("x", node.inputs[0]), ("w", packed),
             ("h_state", node.inputs[18]), ("c_state", node.inputs[19])]
    return Kernel("lstm", binds, b * local, defines, node.label(), local_x=local, rw=("h_state", "c_state"))


def step_passes(d: dict, local: int) -> int:
    """Loop passes one invocation of shaders/lstm.comp with defines `d` makes in a time step: its units' four gate
    sums over the input (and aux input) and the recurrent state, then its outputs (a projection over the cells)."""
    units, outs = -(-d["C"] // local), -(-d["O"] // local)
    aux = d.get("AUX_I", 0) if d.get("AUX") else 0
    return units * 4 * (1 + d["I"] + aux + d["O"]) + outs * (1 + (d["C"] if d.get("PROJ") else 0)) + 2


def in_chunks(k, graph) -> list:
    """The lstm kernel `k` in chunks of steps where a long sequence needs them (ops/step_chunks.py)."""
    return step_chunks.in_chunks(k, graph, step_passes(k.defines, k.local_x))


VARIANTS = {
    "lstm": (dict(NB=2, T=3, I=5, C=4, O=4, OFF_WX=0, OFF_WH=80, OFF_B=144, OFF_P=160, OFF_PW=172, OFF_PB=188,
                  CELL_CLIP=3.0, PROJ_CLIP=2.0),
             {"TIME_MAJOR": [0, 1], "CIFG": [0, 1], "PEEPHOLE": [0, 1], "PROJ": [0, 1], "CCLIP": [0, 1],
              "PCLIP": [0, 1], "CELL_ACT": list(CELL_ACTS)},
             ["out_", "x", "w", "h_state", "c_state"], {},
             lambda d: dict(local_x=32, rw=("h_state", "c_state"))),
    "lstm:chunked": (dict(NB=2, T=3, I=5, C=4, O=4, OFF_WX=0, OFF_WH=80, OFF_B=144, OFF_P=160, OFF_PW=172, OFF_PB=188,
                          CELL_CLIP=3.0, PROJ_CLIP=2.0, CELL_ACT=4, CHUNKED=1), {"REVERSE": [0, 1], "PROJ": [0, 1]},
                     ["out_", "x", "w", "h_state", "c_state", "steps"], {"steps": "int32"},
                     lambda d: dict(local_x=32, rw=("h_state", "c_state"))),
}


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
def _sym(node, graph, values=None):
    x = D.in_shapes(node, graph)[0]
    a = node.attrs
    o = graph.t(node.outputs[0]).shape[-1]
    if D.is_dyn(x[2]) or (not a.get("time_major") and D.is_dyn(x[0])) or (a.get("time_major") and D.is_dyn(x[1])):
        D.refuse(node, graph, "only its time axis may be dynamic")
    return [x[:2] + [o]]


declare("UNIDIRECTIONAL_SEQUENCE_LSTM", shape=Why("no host rule: the symbolic rule gives its shape"),
        exact=SHAPE_ONLY, sym_shape=_sym, batch="lstm", pieces=Why("computes values"), fp16=NEUTRAL, in_place=False,
        templates=("lstm",), flops=rules.per_output, cpu=Why("no CPU kernel: the GPU runs every float LSTM"))
template("lstm", item_major=False, flat=False)
