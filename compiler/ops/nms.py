"""NON_MAX_SUPPRESSION_V4 / V5 on the GPU, selecting exactly what LiteRT's reference kernel selects
(tensorflow/lite/kernels/non_max_suppression.cc, internal/reference/non_max_suppression.h, float32):

  inputs   boxes [N, 4] ([y1, x1, y2, x2], either corner first), scores [N], max_output_size (int32
           scalar, constant or run-time), iou_threshold, score_threshold (float32 scalars), V5: soft_nms_sigma
           (a constant float32 scalar);
  outputs  V4: selected_indices [M], valid_outputs []; V5: selected_indices [M], selected_scores [M],
           valid_outputs []: M = max_output_size (LiteRT resizes them to it), zeros past valid_outputs.

What LiteRT does (and gpuc with it; tests/ops/test_nms.py checks each against ai_edge_litert): a
candidate is a score > score_threshold (strictly); candidates come out of a std::priority_queue (a
libstdc++ binary heap built in index order), so equal scores do NOT come out lower index first; IoU >=
iou_threshold suppresses; corners are normalized; a box of area <= 0 has IoU 0 with everything; a
selected candidate goes back into the queue (LiteRT's loop has no `continue`), which changes the heap's
order of later ties, and a zero-area box (or any box when iou_threshold > 1) is then selected again
and again; soft-NMS (sigma > 0) decays a score by exp(-0.5 iou^2 / sigma) per selected box and puts
it back into the queue.  shaders/nms_heap.comp runs that algorithm in one workgroup (the heap in a
scratch tensor, the IoU comparisons spread over the workgroup).  Up to FAST_CAP boxes it first sorts the
candidates in shared memory: with no equal candidate scores and no soft-NMS decay, the heap's pops are the
sorted order, and the workgroup walks it, each selected box suppressing the later candidates in parallel
(the heap only for ties and soft-NMS).

A run-time max_output_size gives outputs of a size known only at run time: the compiler sizes them
for min(N, MS_CAP) and the bundle records that their length is that input's value (runtime/
output_sizes.py trims what run() returns; a larger value fails the run, naming the op).
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import NEUTRAL, SHAPE_ONLY, Why, declare, register, rules, template
from gpuc.compiler.ops.output_lengths import declare_length
from gpuc.compiler.ops.step_chunks import LOOP_BUDGET

OPS = ("NON_MAX_SUPPRESSION_V4", "NON_MAX_SUPPRESSION_V5")
MS_CAP = 2048            # selected boxes a run may hold (shared memory: 8 KiB)
FAST_CAP = 2048          # boxes the sorted path holds (16 KiB of keys and indices + 8 KiB of selections: under 32 KiB)
WG = 256

VARIANTS = {
    "nms_heap": (dict(N=100, MAXO=10, WG=WG, NP=128), {"SOFT": [0, 1], "FAST": [0, 1]},
                 ["sel", "sel_scores", "valid", "heap", "boxes", "scores", "max_out", "iou_thr", "score_thr",
                  "sigma_in"],
                 {"sel": "int32", "valid": "int32", "heap": "uint32", "max_out": "int32"},
                 lambda d: dict(local_x=WG, rw=("sel_scores", "valid", "heap"))),
    "nms_heap:staged": (dict(N=100, MAXO=10, WG=WG, NP=128, STAGED=1),
                        {"SOFT": [0, 1], "FAST": [0, 1], "STAGE": [0, 1, 2]},
                        ["sel", "sel_scores", "valid", "heap", "boxes", "scores", "max_out", "iou_thr", "score_thr",
                         "sigma_in", "st", "steps"], {"sel": "int32", "valid": "int32", "heap": "uint32",
                                                      "max_out": "int32", "st": "uint32", "steps": "int32"},
                        lambda d: dict(local_x=WG, rw=("sel_scores", "valid", "heap", "sel", "st"))),
}


def _scalar(graph, tid):
    t = graph.t(tid)
    return None if not t.is_const else np.asarray(t.data).reshape(-1)[0]


def _plan(node, graph):
    soft = node.op == OPS[1]
    want_in, want_out = (6, 3) if soft else (5, 2)
    if len(node.inputs) != want_in or len(node.outputs) != want_out:
        raise ValueError(f"has {len(node.inputs)} inputs and {len(node.outputs)} outputs "
                         f"(LiteRT's kernel takes {want_in} and {want_out})")
    boxes, scores, mo, iou, thr = (graph.t(i) for i in node.inputs[:5])
    if len(boxes.shape) != 2 or boxes.shape[1] != 4:
        raise ValueError(f"boxes {boxes.name!r} have shape {list(boxes.shape)}, expected [N, 4]")
    n = boxes.shape[0]
    if list(scores.shape) != [n]:
        raise ValueError(f"scores {scores.name!r} have shape {list(scores.shape)}, expected [{n}]")
    for t in (boxes, scores, iou, thr) + ((graph.t(node.inputs[5]),) if soft else ()):
        if t.dtype != "float32":
            raise ValueError(f"tensor {t.name!r} is {t.dtype}: gpuc runs the float32 kernel (LiteRT's int8 / "
                             "int16 path, with its look-up tables, is not implemented)")
    for t in (mo, iou, thr) + ((graph.t(node.inputs[5]),) if soft else ()):
        if len(t.shape):
            raise ValueError(f"{t.name!r} has shape {list(t.shape)}, LiteRT takes a scalar")
    if mo.dtype != "int32":
        raise ValueError(f"max_output_size {mo.name!r} is {mo.dtype}, LiteRT takes int32")
    m = _scalar(graph, node.inputs[2])
    if m is not None:
        m = int(m)
        if m < 0:
            raise ValueError(f"max_output_size is {m} (LiteRT's kernel fails on a negative size)")
        if m > MS_CAP:
            raise ValueError(f"max_output_size {m} exceeds the {MS_CAP} selections a GPU workgroup holds")
        cap = m
    else:
        cap = min(n, MS_CAP)
    if soft:
        sigma = _scalar(graph, node.inputs[5])
        if sigma is None:
            raise ValueError("soft_nms_sigma is a run-time tensor: gpuc takes it constant (as the converter writes it)")
        if not sigma >= 0:
            raise ValueError(f"soft_nms_sigma is {sigma} (LiteRT's kernel fails on a negative sigma)")
    return soft, n, cap, m


def output_shapes(node, graph) -> list:
    """The shapes LiteRT gives the outputs (the converter writes [1] with signature [-1]): [M]."""
    soft, n, cap, m = _plan(node, graph)
    return [(cap,), (cap,), ()] if soft else [(cap,), ()]


def _check(node, graph):
    try:
        soft, n, cap, m = _plan(node, graph)
    except ValueError as e:
        return str(e)
    want = [("int32", (cap,))] + ([("float32", (cap,))] if soft else []) + [("int32", ())]
    for o, (dt, s) in zip(node.outputs, want):
        t = graph.t(o)
        if t.dtype != dt or tuple(t.shape) != s:
            return f"output {t.name!r} is {t.dtype} {list(t.shape)}, LiteRT makes it {dt} {list(s)}"
    if m is None:
        return declare_length(node, graph, [0, 1] if soft else [0], node.inputs[2], check_only=True)
    return None


@register(*OPS, check=_check, inputs=(5, 6), outputs=(2, 3), dtypes=("float32", "int32"), shapes=output_shapes,
          summary="greedy / soft NMS exactly as LiteRT (its heap order of equal scores, re-selection quirks); float32")
def lower_nms(node, graph):
    soft, n, cap, m = _plan(node, graph)
    if m is None:
        declare_length(node, graph, [0, 1] if soft else [0], node.inputs[2])
    outs = list(node.outputs)
    heap = graph.add_tensor(f"{node.label()}/heap", [3 * max(n, 1)], "uint32")
    scores_out = outs[1] if soft else graph.add_tensor(f"{node.label()}/no_scores", [1], "float32")
    sigma = node.inputs[5] if soft else node.inputs[3]
    binds = [("sel", outs[0]), ("sel_scores", scores_out), ("valid", outs[-1]), ("heap", heap),
             ("boxes", node.inputs[0]), ("scores", node.inputs[1]), ("max_out", node.inputs[2]),
             ("iou_thr", node.inputs[3]), ("score_thr", node.inputs[4]), ("sigma_in", sigma)]
    np2 = 1 << max(1, (n - 1).bit_length())
    fast = dict(FAST=int(np2 <= FAST_CAP), NP=np2 if np2 <= FAST_CAP else 1)
    d = dict(N=n, MAXO=cap, WG=WG, SOFT=int(soft), **fast)
    rw = ("sel_scores", "valid", "heap")
    build, select, pops = _stages(n, cap, soft)
    if build is None:
        return [Kernel("nms_heap", binds, WG, d, node.label(), local_x=WG, rw=rw)]
    st = graph.add_tensor(f"{node.label()}/state", [4], "uint32")
    binds = binds + [("st", st)]
    rw = rw + ("sel", "st")

    def stage(k, label, steps):
        c = graph.add_const(f"{node.label()}/{label.replace(' ', '_')}", np.array(steps, np.int32))
        return Kernel("nms_heap", binds + [("steps", c)], WG, dict(d, STAGED=1, STAGE=k), f"{node.label()}: {label}",
                      local_x=WG, rw=rw)
    ks = [stage(0, ("sorted walk, else " if fast["FAST"] else "") + f"push 0..{min(build, n) - 1}", [0, min(build, n)])]
    ks += [stage(1, f"push {i}..{min(i + build, n) - 1}", [i, min(build, n - i)]) for i in range(build, n, build)]
    ks += [stage(2, f"pops {j}", [j, pops]) for j in range(select - 1)]
    return ks + [stage(2, "pops to the end, outputs", [select - 1, 0])]


def _stages(n: int, cap: int, soft: bool):
    """(boxes a push dispatch takes, pop dispatches, pops each) where one invocation's loops could pass
    step_chunks.LOOP_BUDGET in one dispatch (llvmpipe ends them after 65,535 passes and runs on), else
    (None, 0, 0).  A push passes its sift-up, up to 1 + log2 N times; a pop its sift-down and refill (2 log2 N)
    and its comparisons (invocation 0 walks the selections with soft-NMS; else a share of them), and each
    selection a push.  Hard NMS pops at most once per push (N candidates, and every selection pushed back):
    N + MAXO pops; soft-NMS may pop more, so its last pop dispatch runs to the end."""
    logn = max(1, n.bit_length())
    per_pop = 2 * logn + 3 + (cap if soft else cap // WG)
    if n == 0 or n * (1 + logn) + (n + cap) * per_pop + cap * logn <= LOOP_BUDGET:
        return None, 0, 0
    pops = max(1, (LOOP_BUDGET - cap * logn - cap // WG - 2) // per_pop)
    return max(1, LOOP_BUDGET // (1 + logn)), -(-(n + cap) // pops), pops


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
declare(*OPS, shape=Why("no shape rule: OpDef.shapes sizes its outputs from max_output_size"), exact=SHAPE_ONLY,
        sym_shape=Why("no dynamic-size rule: its output size is a value"),
        batch=Why("no batch rule: a --max-batch program with it replicates per item"),
        pieces=Why("computes values"), fp16=NEUTRAL, in_place=False, templates=("nms_heap",), flops=rules.per_output,
        cpu=Why("no CPU kernel: the GPU runs LiteRT's algorithm for every float model"))
template("nms_heap", item_major=False, flat=False)
