"""CUSTOM:TFLite_Detection_PostProcess (the TF Object Detection API's SSD post-processing) on the GPU,
with LiteRT's semantics (tensorflow/lite/kernels/detection_postprocess.cc):

  inputs   box encodings [1, N, L >= 4] (y, x, h, w first), class scores [1, N, C + label offset]
           (offset 1 when a background column leads, else 0), anchors [N, 4] (y, x, h, w);
  options  a flexbuffer map (custom_options): max_detections, max_classes_per_detection,
           detections_per_class (default 100), use_regular_nms (default false), nms_score_threshold,
           nms_iou_threshold, num_classes, y_scale, x_scale, h_scale, w_scale;
  outputs  boxes [1, D, 4] (ymin, xmin, ymax, xmax), classes [1, D], scores [1, D] (float),
           num_detections [1], D = max_detections * max_classes_per_detection; unused slots are 0.

Dispatches: decode every anchor's box (shaders/det_decode.comp); make the (score, anchor) keys of
the scores >= the threshold and sort them, one segment per class for regular NMS or one segment of
each anchor's best class score for fast NMS (compiler/ops/sort.py, a bitonic sort: ties keep the
lower anchor, as LiteRT's std::stable_sort); greedy IoU suppression, one workgroup per segment over
chunks of candidates with a suppression bitmask (shaders/nms_greedy.comp); then the outputs
(shaders/det_output.comp): fast NMS repeats each kept box for its best classes in LiteRT's
std::partial_sort order, regular NMS orders every kept (class, anchor) by score, then class, then
anchor (what LiteRT's stable merge of the classes' lists gives) and keeps max_detections.

--max-batch: batch-native (batch fact ("per_item", (2,)): constant anchors shared by the items).  The
rewrite stacks the items on axis 0 of the inputs and outputs and sets node.attrs[ITEMS_ATTR]; each shader
then runs every item (its segments, boxes and output slots follow the previous item's), so item i's
outputs are exactly its batch-1 run's.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import NEUTRAL, SHAPE_ONLY, Why, declare, register, rules, template
from gpuc.compiler.ops.sort import bitonic_sort, padded

OP = "CUSTOM:TFLite_Detection_PostProcess"
CHUNK = 128                # candidates a suppression workgroup resolves per step (nms_greedy.comp)
MAX_KEPT = 1024            # boxes one segment may keep (they live in shared memory: 16 KiB)
ITEMS_ATTR = "batch_items"  # node attribute: the items of a batch-native --max-batch program (passes/batching.py)

VARIANTS = {
    "det_decode": (dict(N=100, L=4, YS=10.0, XS=10.0, HS=5.0, WS=5.0, ITEMS=2), {}, ["boxes", "enc", "anc"]),
    "nms_greedy": (dict(SEGS=6, ISEGS=3, NA=100, P=1024, M=100, MS=100, CHUNK=CHUNK, IOU=0.6), {},
                   ["sel", "keys", "boxes"], {"sel": "int32", "keys": "uint32"}, lambda d: dict(local_x=CHUNK)),
    "det_output": (dict(SEGS=3, M=100, MAXDET=10, KK=3, NCLS=5, CB=6, OFF=1, ITEMS=2, NA=100),
                   {"REGULAR": [0, 1], "NCAT": [1, 3]},
                   ["out_boxes", "out_classes", "out_scores", "out_num", "sel", "boxes", "scores"], {"sel": "int32"},
                   lambda d: dict(rw=("out_classes", "out_scores", "out_num"))),
}


@dataclass
class Options:
    max_detections: int
    max_classes_per_detection: int
    detections_per_class: int
    use_regular_nms: bool
    nms_score_threshold: float
    nms_iou_threshold: float
    num_classes: int
    y_scale: float
    x_scale: float
    h_scale: float
    w_scale: float


_INTS = ("max_detections", "max_classes_per_detection", "num_classes")
_FLOATS = ("nms_score_threshold", "nms_iou_threshold", "y_scale", "x_scale", "h_scale", "w_scale")


def parse_options(node) -> Options:
    """The flexbuffer map as LiteRT's Init reads it: an absent key reads as 0 (AsInt32 / AsFloat of
    null), but detections_per_class defaults to 100 and use_regular_nms to false."""
    raw = node.attrs.get("custom_options")
    if not raw:
        raise ValueError("custom_options (the flexbuffer map of its options) is missing")
    from flatbuffers import flexbuffers
    try:
        m = flexbuffers.Loads(bytes(raw))
    except Exception as e:          # (any defect of the bytes: flexbuffers raises many kinds)
        raise ValueError(f"custom_options is not a valid flexbuffer ({type(e).__name__}: {e})") from None
    if not isinstance(m, dict):
        raise ValueError(f"custom_options is a flexbuffer {type(m).__name__}, not a map")

    def num(key, kind, default=0):
        v = m.get(key, default)
        if v is None:
            v = default
        if isinstance(v, (bytes, str, list, dict)) or not isinstance(v, (bool, int, float)):
            raise ValueError(f"option {key!r} is a {type(v).__name__}, not a number")
        if kind is float:
            return float(np.float32(v))
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"option {key!r} is {v}")
        return kind(int(v)) if kind is bool else int(v)
    vals = {k: num(k, int) for k in _INTS}
    vals.update({k: num(k, float) for k in _FLOATS})
    vals["detections_per_class"] = num("detections_per_class", int, 100)
    vals["use_regular_nms"] = num("use_regular_nms", bool, False)
    return Options(**vals)


@dataclass
class Plan:
    opt: Options
    n: int                 # anchors
    enc_len: int           # L: values per box encoding
    cb: int                # score columns (classes + label offset)
    off: int               # label offset
    kk: int                # max_classes_per_detection: output slots per detection
    segs: int              # sorted lists: num_classes (regular) or 1 (fast)
    kept: int              # M: boxes a list may keep


def _plan(node, graph) -> Plan:
    o = parse_options(node)
    enc, sc, anc = (graph.t(i) for i in node.inputs)
    for t, rank in ((enc, 3), (sc, 3), (anc, 2)):
        if len(t.shape) != rank:
            raise ValueError(f"input {t.name!r} has shape {list(t.shape)}, expected rank {rank}")
    n, items = enc.shape[1], items_of(node)
    if enc.shape[0] != items or sc.shape[0] != items:
        raise ValueError(f"batch {enc.shape[0]} (inputs {enc.name!r}, {sc.name!r}): LiteRT's kernel takes batch 1")
    if enc.shape[2] < 4:
        raise ValueError(f"box encodings {enc.name!r} have {enc.shape[2]} values per box (at least 4)")
    if sc.shape[1] != n or list(anc.shape) != [n, 4]:
        raise ValueError(f"scores {list(sc.shape)} and anchors {list(anc.shape)} do not match {n} boxes "
                         f"(expected [1, {n}, C] and [{n}, 4])")
    for f in _FLOATS:
        if math.isnan(getattr(o, f)):
            raise ValueError(f"option {f!r} is NaN")
    cb = sc.shape[2]
    if o.num_classes < 1 or not 0 <= cb - o.num_classes <= 1:
        raise ValueError(f"num_classes {o.num_classes} does not fit scores with {cb} columns "
                         "(num_classes or num_classes + 1 for a background column)")
    if o.max_detections < 0:
        raise ValueError(f"max_detections {o.max_detections} is negative")
    if not 0.0 < o.nms_iou_threshold <= 1.0:
        raise ValueError(f"nms_iou_threshold {o.nms_iou_threshold} is not in (0, 1] (LiteRT's kernel fails)")
    if o.max_classes_per_detection < 1:
        raise ValueError(f"max_classes_per_detection {o.max_classes_per_detection} is not positive")
    if o.use_regular_nms and o.detections_per_class < 1:
        raise ValueError(f"detections_per_class {o.detections_per_class} is not positive")
    if anc.is_const:
        a = np.asarray(anc.data, np.float32).reshape(n, 4)
        if (a[:, 2:] < 0).any():
            raise ValueError(f"anchors {anc.name!r} have a negative height or width: LiteRT's kernel rejects "
                             "the decoded boxes (ymin > ymax)")
    segs = o.num_classes if o.use_regular_nms else 1
    kept = min(o.detections_per_class if o.use_regular_nms else o.max_detections, n)
    if kept > MAX_KEPT:
        what = "detections_per_class" if o.use_regular_nms else "max_detections"
        raise ValueError(f"{what} {kept} exceeds the {MAX_KEPT} boxes a GPU workgroup keeps in shared memory")
    return Plan(o, n, enc.shape[2], cb, cb - o.num_classes, o.max_classes_per_detection, segs, kept)


def items_of(node) -> int:
    """The batch items the node computes (1, or --max-batch's N in a batch-native program)."""
    return int(node.attrs.get(ITEMS_ATTR, 1))


def output_shapes(node, graph) -> list:
    """The shapes LiteRT's Prepare gives the outputs (the model leaves them unknown), per item stacked."""
    o, b = parse_options(node), items_of(node)
    d = o.max_detections * o.max_classes_per_detection
    return [(b, d, 4), (b, d), (b, d), (b,)]


def _check(node, graph):
    try:
        _plan(node, graph)
        want = output_shapes(node, graph)
    except ValueError as e:
        return str(e)
    for o, s in zip(node.outputs, want):
        t = graph.t(o)
        if t.dtype != "float32" or tuple(t.shape) != s:
            return f"output {t.name!r} is {t.dtype} {list(t.shape)}, LiteRT makes it float32 {list(s)}"
    return None


@register(OP, check=_check, inputs=(3, 3), outputs=(4, 4), shapes=output_shapes,
          summary="SSD box decoding + fast or regular NMS (GPU sort, bitmask suppression); float32")
def lower_detection(node, graph):
    p = _plan(node, graph)
    o, label, items = p.opt, node.label(), items_of(node)
    enc, scores, anc = node.inputs
    boxes = graph.add_tensor(f"{label}/decoded_boxes", [items * max(p.n, 1) * 4], "float32")
    ks = [Kernel("det_decode", [("boxes", boxes), ("enc", enc), ("anc", anc)], items * p.n,
                 dict(N=p.n, L=p.enc_len, YS=o.y_scale, XS=o.x_scale, HS=o.h_scale, WS=o.w_scale, ITEMS=items),
                 f"{label} decode")]
    seg_len, segs = padded(p.n), items * p.segs
    keys = graph.add_tensor(f"{label}/sort_keys", [2 * segs * seg_len], "uint32")
    init = ([("scores", scores)], dict(N=p.n, CB=p.cb, OFF=p.off, NCLS=o.num_classes, ISEGS=p.segs,
                                       PER_SEGMENT=int(o.use_regular_nms), THR=o.nms_score_threshold))
    ks += bitonic_sort(keys, segs, seg_len, label, init)
    sel = graph.add_tensor(f"{label}/kept", [segs * (p.kept + 1)], "int32")
    ks.append(Kernel("nms_greedy", [("sel", sel), ("keys", keys), ("boxes", boxes)], segs * CHUNK,
                     dict(SEGS=segs, ISEGS=p.segs, NA=p.n, P=seg_len, M=p.kept, MS=max(p.kept, 1), CHUNK=CHUNK,
                          IOU=o.nms_iou_threshold),
                     f"{label} suppression", local_x=CHUNK))
    outs = list(node.outputs)
    slots = o.max_detections * p.kk
    regular = int(o.use_regular_nms)
    ks.append(Kernel("det_output", [("out_boxes", outs[0]), ("out_classes", outs[1]), ("out_scores", outs[2]),
                                    ("out_num", outs[3]), ("sel", sel), ("boxes", boxes), ("scores", scores)],
                     items * (p.segs * p.kept + max(slots, 1) if regular else max(o.max_detections, 1)),
                     dict(REGULAR=regular, SEGS=p.segs, M=p.kept, MAXDET=o.max_detections, KK=p.kk,
                          NCAT=min(p.kk, o.num_classes) if not regular else 1, NCLS=o.num_classes, CB=p.cb,
                          OFF=p.off, ITEMS=items, NA=p.n),
                     f"{label} outputs", rw=("out_classes", "out_scores", "out_num")))
    return ks


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
declare(OP, shape=Why("no shape rule: OpDef.shapes sets its outputs' sizes from its options"), exact=SHAPE_ONLY,
        sym_shape=Why("no dynamic-size rule: its anchors fix the box count"),
        batch=("per_item", (2,), ITEMS_ATTR),
        pieces=Why("computes values"), fp16=NEUTRAL, in_place=False,
        templates=("det_decode", "sort_bitonic", "nms_greedy", "det_output"), flops=rules.per_output,
        cpu=Why("no CPU kernel: LiteRT's custom op has no numpy twin here; the GPU runs every float model"))
for _t in ("det_decode", "nms_greedy", "det_output"):
    template(_t, item_major=False, flat=False)
