"""TFLite_Detection_PostProcess test models: one custom op with its flexbuffer options, as the TF
Object Detection API exports it (inputs box encodings [1, N, 4], class scores [1, N, C(+1)], anchors
[N, 4] constant; outputs boxes, classes, scores, num_detections with shapes LiteRT sets at Prepare)."""
from __future__ import annotations

import numpy as np
from flatbuffers import flexbuffers

from .builder import ModelBuilder

OP = "TFLite_Detection_PostProcess"
DEFAULTS = dict(max_detections=10, max_classes_per_detection=1, detections_per_class=100, use_regular_nms=False,
                nms_score_threshold=0.0, nms_iou_threshold=0.5, num_classes=3, y_scale=10.0, x_scale=10.0,
                h_scale=5.0, w_scale=5.0)


def flex_options(opts: dict) -> bytes:
    """The op's custom_options: a flexbuffer map (ints, floats and bools as the exporter writes them)."""
    return bytes(flexbuffers.Dumps({k: (bool(v) if isinstance(v, (bool, np.bool_)) else
                                        float(v) if isinstance(v, (float, np.floating)) else int(v))
                                    for k, v in opts.items()}))


def detection_model(n_anchors: int, n_scores: int, anchors: np.ndarray | None = None, options: bytes | None = None,
                    anchors_input: bool = False, **opts) -> bytes:
    """One-op model; `opts` override DEFAULTS (a None value leaves the key out of the map)."""
    o = {k: v for k, v in dict(DEFAULTS, **opts).items() if v is not None}
    mb = ModelBuilder()
    boxes = mb.input("box_encodings", [1, n_anchors, 4])
    scores = mb.input("class_predictions", [1, n_anchors, n_scores])
    if anchors_input:
        anc = mb.input("anchors", [n_anchors, 4])
    else:
        anc = mb.const("anchors", np.asarray(anchors, np.float32).reshape(n_anchors, 4))
    outs = [mb.tensor(n, []) for n in ("detection_boxes", "detection_classes", "detection_scores", "num_detections")]
    mb.custom(OP, [boxes, scores, anc], outs, flex_options(o) if options is None else options)
    for t in outs:
        mb.output(t)
    return mb.finish()


def random_anchors(n: int, rng) -> np.ndarray:
    """Centre-size anchors (y, x, h, w) inside the unit square."""
    c = rng.uniform(0.1, 0.9, (n, 2))
    s = rng.uniform(0.05, 0.4, (n, 2))
    return np.concatenate([c, s], 1).astype(np.float32)
