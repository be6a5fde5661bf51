"""The basic-RNN cell shared by RNN (rnn.py), UNIDIRECTIONAL_SEQUENCE_RNN (rnn_sequence.py) and
BIDIRECTIONAL_SEQUENCE_RNN (rnn_bidirectional.py): weight and state validation, and one
shaders/rnn.comp dispatch per direction (one workgroup per batch element looping over the steps, the
state updated in place in its variable tensor, so it persists across runs as in LiteRT).

Weights must be float32 constants.  Hybrid-quantized weights (int8 with a float input) are refused:
LiteRT then quantizes the input and the state per batch row at run time (symmetric, or asymmetric with
asymmetric_quantize_inputs) and accumulates in integers; gpuc's cell is float32 only.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import step_chunks, template
from gpuc.compiler.ops.util import ACT_NAMES, fused_act

ACTS = (0, 1, 2, 3, 4, 5)           # every TFLite fused activation: LiteRT's ApplyActivationToVector takes each
MAX_UNITS = 4096                    # h + next h in shared memory: 32 KiB


def cell(node, graph, b: int, i: int) -> tuple:
    """A basic RNN's operands 1-4 (input weights [U, I], recurrent weights [U, U], bias [U], hidden state
    [B, U]), checked: (w, r, bias, h, U)."""
    w = weight(node, graph, 1, (graph.t(node.inputs[1]).shape[0], i), "input weights")
    u = w.shape[0]
    units_fit(u)
    r = weight(node, graph, 2, (u, u), "recurrent weights")
    bias = weight(node, graph, 3, (u,), "bias")
    h = state(node, graph, 4, (b, u), "hidden state")
    return w, r, bias, h, u


def flops(node, graph) -> int:
    """A basic RNN's work: every output element takes an input and a recurrent dot product."""
    w, r = graph.t(node.inputs[1]).shape, graph.t(node.inputs[2]).shape
    return 2 * graph.t(node.outputs[0]).size * (w[1] + r[1])


def present(node, pos) -> bool:
    return pos < len(node.inputs) and node.inputs[pos] >= 0


def weight(node, graph, pos, shape, what):
    """Input `pos` as a float32 constant of `shape` (ValueError naming it otherwise)."""
    if not present(node, pos):
        raise ValueError(f"{what} (input {pos}) is required")
    t = graph.t(node.inputs[pos])
    if not t.is_const or t.is_variable:
        raise ValueError(f"{what} (input {pos}, {t.name!r}) must be a constant")
    stored = t.dequantized or t.dtype          # (passes/quant.py dequantizes int8 constants first)
    if stored in ("int8", "uint8", "int16"):
        raise ValueError(f"{what} (input {pos}, {t.name!r}) is hybrid-quantized {stored}: LiteRT then quantizes "
                         "the float input and state per batch row at run time (asymmetric_quantize_inputs picks "
                         "symmetric or asymmetric) and accumulates in integers; gpuc runs float32 weights only")
    if t.dtype != "float32":
        raise ValueError(f"{what} (input {pos}, {t.name!r}) has dtype {t.dtype} (float32 weights only)")
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{what} (input {pos}, {t.name!r}) has shape {list(t.shape)}, expected {list(shape)}")
    return np.asarray(t.data, np.float32).reshape(shape)


def state(node, graph, pos, shape, what) -> int:
    """Input `pos`: a float32 variable tensor of `shape` (the recurrent state); its id."""
    if not present(node, pos):
        raise ValueError(f"{what} (input {pos}) is required")
    s = graph.t(node.inputs[pos])
    if not s.is_variable:
        raise ValueError(f"{what} (input {pos}, {s.name!r}) must be a variable tensor")
    if tuple(s.shape) != tuple(shape) or s.dtype != "float32":
        raise ValueError(f"{what} (input {pos}, {s.name!r}) must be float32 {list(shape)}, "
                         f"got {s.dtype} {list(s.shape)}")
    return s.id


def output(graph, tid, shape, what):
    y = graph.t(tid)
    if tuple(y.shape) != tuple(shape):
        raise ValueError(f"{what} {y.name!r} has shape {list(y.shape)}, expected {list(shape)}")


def check_act(node) -> None:
    a = fused_act(node)
    if a not in ACTS:
        raise ValueError(f"fused activation {ACT_NAMES.get(a, a)} not supported")


def units_fit(u: int, what="units") -> None:
    if u < 1:
        raise ValueError(f"{what}: empty dimension")
    if u > MAX_UNITS:
        raise ValueError(f"{u} {what} do not fit one workgroup's shared memory (at most {MAX_UNITS})")


def seq_dims(graph, tid, time_major):
    """(batch, time, features) of a rank-3 sequence tensor."""
    x = graph.t(tid)
    if len(x.shape) != 3:
        raise ValueError(f"input {x.name!r} must be rank 3, got {list(x.shape)}")
    t, b = (x.shape[0], x.shape[1]) if time_major else (x.shape[1], x.shape[0])
    if min(b, t, x.shape[2]) < 1:
        raise ValueError(f"input {x.name!r} has an empty dimension {list(x.shape)}")
    return b, t, x.shape[2]


def seq_strides(b, t, f, time_major):
    """(per step, per batch element) element strides of a [B,T,F] / [T,B,F] sequence."""
    return (b * f, f) if time_major else (f, t * f)


@dataclass
class Direction:
    """One direction of a cell over a sequence: its weights, tensors and addressing."""
    x: int                          # input tensor
    w: np.ndarray                   # [U, I]
    r: np.ndarray                   # [U, U]
    bias: np.ndarray                # [U]
    state: int                      # variable [B, U]
    out: int
    nb: int
    steps: int
    x_strides: tuple                # (per step, per batch element)
    o_strides: tuple                # (per step, per batch element, first column)
    reverse: bool = False
    aux: int = -1
    wa: np.ndarray | None = None    # [U, A]
    a_strides: tuple = (0, 0)


def kernel(node, graph, d: Direction, tag: str = "") -> list:
    """The rnn kernel(s) of one direction: one dispatch, or chunks of steps for a long sequence."""
    u, i = d.w.shape
    a = 0 if d.wa is None else d.wa.shape[1]
    parts = [d.w, d.r, d.bias] + ([d.wa] if a else [])
    offs, cur = [], 0
    for p in parts:
        offs.append(cur)
        cur += p.size
    name = graph.t(d.out).name + (f"/{tag}" if tag else "")
    packed = graph.add_const(f"{name}/rnn_weights",
                             np.concatenate([p.reshape(-1) for p in parts]).astype(np.float32))
    local = 32 if u <= 32 else 64 if u <= 64 else 128 if u <= 128 else 256
    defines = dict(NB=d.nb, T=d.steps, I=i, U=u, A=max(a, 1), OFF_W=offs[0], OFF_R=offs[1], OFF_B=offs[2],
                   OFF_A=offs[3] if a else 0, X_TS=d.x_strides[0], X_BS=d.x_strides[1],
                   A_TS=d.a_strides[0], A_BS=d.a_strides[1], O_TS=d.o_strides[0], O_BS=d.o_strides[1],
                   O_OFF=d.o_strides[2], RNN_ACT=fused_act(node), REVERSE=int(d.reverse), AUX=int(a > 0))
    binds = [("out_", d.out), ("x", d.x), ("w", packed), ("h_state", d.state)]
    if a:
        binds.append(("ax", d.aux))
    label = node.label() + (f" ({tag})" if tag else "")
    k = Kernel("rnn", binds, d.nb * local, defines, label, local_x=local, rw=("h_state",))
    per_step = -(-u // local) * (4 + i + a + u) + 2     # (loop passes an invocation makes a step)
    return step_chunks.in_chunks(k, graph, per_step)      # (a long sequence: chunks of steps)


VARIANTS = {
    "rnn": (dict(NB=2, T=3, I=5, U=4, A=3, OFF_W=0, OFF_R=20, OFF_B=36, OFF_A=40, X_TS=5, X_BS=15, A_TS=3, A_BS=9,
                 O_TS=8, O_BS=24, O_OFF=4),
            {"REVERSE": [0, 1], "AUX": [0, 1], "RNN_ACT": list(ACTS)},
            ["out_", "x", "w", "h_state", "ax"], {},
            lambda d: dict(local_x=32, rw=("h_state",))),
    "rnn:chunked": (dict(NB=2, T=3, I=5, U=4, A=3, OFF_W=0, OFF_R=20, OFF_B=36, OFF_A=40, X_TS=5, X_BS=15, A_TS=3,
                         A_BS=9, O_TS=8, O_BS=24, O_OFF=4, RNN_ACT=0, AUX=0, CHUNKED=1), {"REVERSE": [0, 1]},
                    ["out_", "x", "w", "h_state", "steps"], {"steps": "int32"},
                    lambda d: dict(local_x=32, rw=("h_state",))),
}
template("rnn", item_major=False, flat=False)
