"""One-op NON_MAX_SUPPRESSION_V4 / V5 and TOPK_V2 test models, written as TensorFlow's converter writes
them (selected outputs [1] with shape signature [-1]; LiteRT resizes them), and random box sets."""
from __future__ import annotations

import numpy as np

from .builder import ModelBuilder


def nms_model(n, v5=False, max_out=10, iou=0.5, thr=0.0, sigma=0.0, rt_max=False) -> bytes:
    mb = ModelBuilder()
    b, s = mb.input("boxes", [n, 4]), mb.input("scores", [n])
    m = mb.input("max_output_size", [], "int32") if rt_max else mb.const("max_output_size", np.array(max_out, np.int32))
    ins = [b, s, m, mb.const("iou_threshold", np.array(iou, np.float32)),
           mb.const("score_threshold", np.array(thr, np.float32))]
    outs = [mb.tensor("selected_indices", [1], "int32", shape_signature=[-1])]
    if v5:
        ins.append(mb.const("soft_nms_sigma", np.array(sigma, np.float32)))
        outs.append(mb.tensor("selected_scores", [1], "float32", shape_signature=[-1]))
    outs.append(mb.tensor("valid_outputs", [], "int32"))
    mb.op("NON_MAX_SUPPRESSION_V5" if v5 else "NON_MAX_SUPPRESSION_V4", ins, outs)
    for o in outs:
        mb.output(o)
    return mb.finish()


def random_boxes(n, rng, swap=0.3, degenerate=0.05, size=0.4):
    """[n, 4] boxes [y1, x1, y2, x2] in the unit square; a `swap` share with their corners swapped
    (y1 > y2, x1 > x2), a `degenerate` share with zero height."""
    c = rng.uniform(0, 1, (n, 2))
    b = np.concatenate([c, c + rng.uniform(0, size, (n, 2))], 1).astype(np.float32)
    sw = rng.uniform(size=n) < swap
    b[sw] = b[sw][:, [2, 3, 0, 1]]
    dg = rng.uniform(size=n) < degenerate
    b[dg, 2] = b[dg, 0]
    return b


def random_scores(n, rng, grid=0):
    """Uniform scores; grid > 0: multiples of 1/grid (many exact ties)."""
    s = rng.uniform(0, 1, n)
    return (np.floor(s * grid) / grid if grid else s).astype(np.float32)


def topk_model(shape, k, dtype="float32", rt_k=False) -> bytes:
    mb = ModelBuilder()
    x = mb.input("x", list(shape), dtype)
    kt = mb.input("k", [], "int32") if rt_k else mb.const("k", np.array(k, np.int32))
    out_shape = list(shape[:-1]) + [k]
    sig = list(shape[:-1]) + [-1] if rt_k else None
    v = mb.tensor("values", out_shape, dtype, shape_signature=sig)
    i = mb.tensor("indices", out_shape, "int32", shape_signature=sig)
    mb.op("TOPK_V2", [x, kt], [v, i])
    mb.output(v)
    mb.output(i)
    return mb.finish()


def litert(model: bytes, inputs: list) -> list:
    """LiteRT's outputs (helpers.litert.run_litert feeds a 0-d input as [1]: np.ascontiguousarray)."""
    from .litert import make_interpreter
    it = make_interpreter(model)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], np.asarray(x))
    it.invoke()
    return [np.array(it.get_tensor(d["index"])) for d in it.get_output_details()]
