"""Detection post-processing speed: TFLite_Detection_PostProcess (regular NMS over many anchors and
classes; the SSD-sized fast NMS) and NON_MAX_SUPPRESSION_V4, each as a one-op model, timed in one
process with gpuc (run() wall time and GPU time), LiteRT's CPU interpreter running the same op, and
torchvision.ops.batched_nms / nms on CUDA over the same boxes (where torch and a GPU are there).

    python -m benchmarks.nms_speed [--runs 50] [--json OUT]

The torchvision peer does less work than the op: it gets boxes already decoded and the candidates
above the score threshold already selected; its time covers the selection, the NMS and the sync.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

from benchmarks.timing import timed


def median_ms(fn, runs: int) -> float:
    return timed(fn, runs)["median_ms"]


def decode(enc, anchors, scales=(10.0, 10.0, 5.0, 5.0)):
    """Centre-size decoding as the op does (numpy), for the torchvision peer."""
    ya, xa, ha, wa = anchors[:, 0], anchors[:, 1], anchors[:, 2], anchors[:, 3]
    yc = enc[:, 0] / scales[0] * ha + ya
    xc = enc[:, 1] / scales[1] * wa + xa
    h = np.exp(enc[:, 2] / scales[2]) * ha
    w = np.exp(enc[:, 3] / scales[3]) * wa
    return np.stack([xc - w / 2, yc - h / 2, xc + w / 2, yc + h / 2], 1)


def case_gpuc(model: bytes, xs, runs: int) -> dict:
    import gpuc
    with gpuc.load(gpuc.compile(model)) as m:
        gpu = []

        def one():
            m.run(xs)
            if m.last_gpu_ms is not None:
                gpu.append(m.last_gpu_ms)
        wall = median_ms(one, runs)
        return {"gpuc_run_ms": round(wall, 4), "gpuc_gpu_ms": round(statistics.median(gpu), 4) if gpu else None,
                "device": m.device.name}


def case_litert(model: bytes, xs, runs: int) -> dict:
    """LiteRT's CPU interpreter, made once; set_tensor + invoke + get_tensor timed."""
    try:
        from ai_edge_litert.interpreter import Interpreter
        it = Interpreter(model_content=model)
        it.allocate_tensors()
        ins, outs = it.get_input_details(), it.get_output_details()

        def one():
            for d, x in zip(ins, xs):
                it.set_tensor(d["index"], x)
            it.invoke()
            return [it.get_tensor(d["index"]) for d in outs]
        one()
    except Exception as e:  # noqa: BLE001 - report, do not fail the other peers
        return {"litert_cpu_ms": None, "litert_error": str(e)[:200]}
    return {"litert_cpu_ms": round(median_ms(one, runs), 4)}


def case_torch(boxes, scores, thr: float, iou: float, runs: int, per_class: bool) -> dict:
    try:
        import torch
        import torchvision
        if not torch.cuda.is_available():
            return {"torch_cuda_ms": None}
    except ImportError:
        return {"torch_cuda_ms": None}
    b = torch.as_tensor(boxes, device="cuda")
    s = torch.as_tensor(scores, device="cuda")

    def one():
        if per_class:
            keep = s > thr
            idx = keep.nonzero()
            r = torchvision.ops.batched_nms(b[idx[:, 0]], s[keep], idx[:, 1], iou)
        else:
            best, _ = s.max(1) if s.dim() == 2 else (s, None)
            keep = best > thr
            r = torchvision.ops.nms(b[keep], best[keep], iou)
        r.cpu()
    return {"torch_cuda_ms": round(median_ms(one, runs), 4)}


def main() -> int:
    from tests.helpers.detection import detection_model, random_anchors
    from tests.helpers.nms import nms_model, random_boxes, random_scores
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    out = []
    for name, n, classes, regular in (("regular NMS, 20000 anchors x 90 classes", 20000, 90, True),
                                      ("fast NMS, 1917 anchors x 1 class (SSD)", 1917, 1, False)):
        anchors = random_anchors(n, rng).astype(np.float32)
        enc = rng.normal(0, 1, (1, n, 4)).astype(np.float32)
        sc = rng.uniform(0, 1, (1, n, classes + 1)).astype(np.float32) ** 8
        model = detection_model(n, classes + 1, anchors=anchors, use_regular_nms=regular, num_classes=classes,
                                max_detections=100, detections_per_class=100, nms_score_threshold=0.3,
                                nms_iou_threshold=0.6)
        r = {"case": name}
        r.update(case_gpuc(model, [enc, sc], a.runs))
        r.update(case_litert(model, [enc, sc], max(5, a.runs // 5)))
        r.update(case_torch(decode(enc[0], anchors).astype(np.float32), sc[0, :, 1:], 0.3, 0.6, a.runs, regular))
        out.append(r)
        print(json.dumps(r), flush=True)
    n = 2000
    boxes, scores = random_boxes(n, rng), random_scores(n, rng)
    model = nms_model(n, max_out=100, iou=0.5, thr=0.1)
    r = {"case": f"NON_MAX_SUPPRESSION_V4, {n} boxes"}
    r.update(case_gpuc(model, [boxes, scores], a.runs))
    r.update(case_litert(model, [boxes, scores], a.runs))
    r.update(case_torch(boxes[:, [1, 0, 3, 2]], scores, 0.1, 0.5, a.runs, False))
    out.append(r)
    print(json.dumps(r), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
