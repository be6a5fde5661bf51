"""An SSD object detector whose post-processing is inside the model: the TF Object Detection API's
export ends in the custom op TFLite_Detection_PostProcess (box decoding and non-max suppression),
which gpuc runs on the GPU with the rest of the network.  The four outputs (boxes, classes, scores,
count) come back as LiteRT gives them; the script checks them against LiteRT's CPU interpreter and
draws the boxes on the photo.

    python examples/detect.py [MODEL.tflite] [PHOTO] [--out detections.png]

MODEL defaults to the SSDLite-MobileNetV2 person detector of the shared models
($GPUC_SHARED_MODELS or ../shared/models: detection/pedestrian_ssdlite_mobilenet_v2.tflite); PHOTO to
scikit-image's astronaut.  The input is the photo resized to the model's input size, scaled to [-1, 1].
"""
import argparse
import os
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

import gpuc
from gpuc import demo

SHARED = "detection/pedestrian_ssdlite_mobilenet_v2.tflite"


def default_model() -> Path:
    here = Path(__file__).resolve().parents[1]
    for root in [os.environ.get("GPUC_SHARED_MODELS"), here.parent / "shared" / "models", here / "shared" / "models"]:
        if root and (Path(root) / SHARED).is_file():
            return Path(root) / SHARED
    raise SystemExit(f"no model given and {SHARED} not found (set GPUC_SHARED_MODELS)")


def prepare(rgb: np.ndarray, shape) -> np.ndarray:
    """[1, H, W, 3] float32 in [-1, 1]: the photo resized (bilinear) to the model's input."""
    h, w = int(shape[1]), int(shape[2])
    img = Image.fromarray(rgb).resize((w, h), Image.BILINEAR)
    return (np.asarray(img, np.float32)[None] / 127.5 - 1.0).astype(np.float32)


def post_process_order(names: list) -> list:
    """The outputs as the op gives them (boxes, classes, scores, count): the TF Object Detection API's
    export names them NAME:0 .. NAME:3 in that order (the model's own output order differs); other
    names: the model's order."""
    def suffix(n):
        head, _, k = n.rpartition(":")
        return int(k) if head and k.isdigit() else None
    return sorted(names, key=suffix) if all(suffix(n) is not None for n in names) else names


def litert(model: Path, x: np.ndarray) -> dict:
    """LiteRT CPU's outputs by name."""
    it = demo.litert_interpreter(model)
    outs = demo.litert_run(it, x)
    return {d["name"]: o for d, o in zip(it.get_output_details(), outs)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?", default=None)
    ap.add_argument("photo", nargs="?", default=None)
    ap.add_argument("--out", default="detections.png")
    ap.add_argument("--min-score", type=float, default=0.5, help="draw detections scoring at least this")
    a = ap.parse_args()
    model = Path(a.model) if a.model else default_model()
    rgb = demo.load_image(a.photo) if a.photo else demo.astronaut()
    with gpuc.load(gpuc.compile(model)) as m:
        x = prepare(rgb, m.inputs[0].shape)
        outs = dict(zip([o.name for o in m.outputs], m.run([x])))
        stats = m.bundle.stats
    names = post_process_order(list(outs))
    boxes, classes, scores, count = (outs[k] for k in names)
    print(f"model {model.name}: {stats.get('dispatches')} dispatches, {stats.get('cpu_nodes', 0)} CPU node(s), "
          f"{stats.get('host_round_trips', 0)} host round trip(s)")
    n = int(np.asarray(count).reshape(-1)[0])
    h, w = rgb.shape[:2]
    img = Image.fromarray(rgb)
    pen = ImageDraw.Draw(img)
    for i in range(n):
        y0, x0, y1, x1 = (boxes[0, i] * [h, w, h, w]).tolist()
        print(f"detection {i}: class {int(classes[0, i])} score {scores[0, i]:.3f} box (ymin xmin ymax xmax) "
              f"{np.round(boxes[0, i], 4).tolist()}")
        if scores[0, i] < a.min_score:
            continue
        pen.rectangle([x0, y0, x1, y1], outline=(255, 40, 40), width=3)
        pen.text((x0 + 4, y0 + 2), f"{int(classes[0, i])}: {scores[0, i]:.2f}", fill=(255, 40, 40))
    img.save(a.out)
    print(f"{n} detection(s), {int((scores[0, :n] >= a.min_score).sum())} drawn (score >= {a.min_score}); wrote {a.out}")
    ref = [litert(model, x)[name] for name in names]            # the same outputs, by name
    assert int(np.asarray(ref[3]).reshape(-1)[0]) == n and np.array_equal(ref[1][0, :n], classes[0, :n]), \
        "LiteRT found other detections"
    err = max(float(np.abs(ref[0][0, :n] - boxes[0, :n]).max(initial=0)),
              float(np.abs(ref[2][0, :n] - scores[0, :n]).max(initial=0)))
    print(f"LiteRT CPU: the same {n} detection(s) in the same order; boxes and scores within {err:.1e}")
    assert err <= 1e-5
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
