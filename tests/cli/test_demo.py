"""`python -m gpuc.demo` (`make demo`, gpuc/demo.py): MediaPipe's face detector, compiled and run by gpuc
on scikit-image's astronaut photo, finds her face; its box matches LiteRT's on the same input within
1e-3; the PNG shows it.  Also: the decoder's anchors and letterbox removal, and the README's
Quickstart (no path outside the repository; its command lines run)."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from helpers.litert import run_litert
from helpers.repo import ROOT, readme_block, require_demo_packages

pytest.importorskip("vulkan")

# the astronaut's face in the 512x512 photo, in pixels: hair line to chin, ear to ear (by eye)
FACE = {"x0": (160, 200), "y0": (60, 100), "x1": (255, 295), "y1": (160, 200)}


@pytest.fixture(scope="module")
def demo():
    require_demo_packages()
    from gpuc import demo
    return demo


@pytest.fixture(scope="module")
def run(demo, tmp_path_factory):
    """One run of the demo as a user starts it, --json: (its results, the PNG, the input it fed)."""
    d = tmp_path_factory.mktemp("demo")
    r = subprocess.run([sys.executable, "-m", "gpuc.demo", "--out", str(d / "face.png"), "--runs", "2",
                        "--save-input", str(d / "x.npy"), "--json"], capture_output=True, text=True, cwd=d)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout), d / "face.png", np.load(d / "x.npy")


def test_demo_finds_the_face(run):
    res, _, _ = run
    assert res["size"] == [512, 512] and res["image"] == "skimage.data.astronaut()"
    (det,) = res["detections"]
    assert det["score"] > 0.5
    for name, v in zip(("x0", "y0", "x1", "y1"), det["box_px"]):
        lo, hi = FACE[name]
        assert lo <= v <= hi, f"{name} = {v} px, not within {FACE[name]}: {det}"
    x0, y0, x1, y1 = det["box"]
    for kx, ky in det["keypoints"][:4]:                  # eyes, nose tip, mouth: inside the box
        assert x0 < kx < x1 and y0 < ky < y1
    assert res["gpuc_ms"] > 0 and res["litert_ms"] > 0


def test_demo_matches_litert(demo, run):
    """LiteRT's builtin kernels on the input the demo fed, decoded the same way: the same faces, each
    box coordinate within 1e-3 (the JSON rounds to 1e-6)."""
    res, _, x = run
    ref = demo.decode(*run_litert(demo.model_path().read_bytes(), [x]))
    assert len(ref) == len(res["detections"])
    for d, r in zip(res["detections"], ref):
        np.testing.assert_allclose(d["box"], r.box, atol=1e-3, rtol=0)
        assert abs(d["score"] - r.score) < 1e-3
    assert res["litert_max_box_diff"] < 1e-3


def test_demo_png(demo, run):
    from PIL import Image
    res, png, _ = run
    with Image.open(png) as im:
        assert im.size == (512, 512)
        px = np.asarray(im.convert("RGB"))
    x0, y0, x1, y1 = res["detections"][0]["box_px"]
    top_edge = px[y0 + 1, x0 + 4:x1 - 4]
    assert (top_edge == demo.GREEN).all(axis=1).mean() > 0.9, "no box drawn at the detection"


def test_anchors(demo):
    a = demo.ssd_anchors()
    assert a.shape == (896, 2)
    np.testing.assert_allclose(a[:2], [[1 / 32, 1 / 32]] * 2)          # 16x16 cells, 2 anchors each
    np.testing.assert_allclose(a[512:518], [[1 / 16, 1 / 16]] * 6)     # 8x8 cells, 6 anchors each
    np.testing.assert_allclose(a[-1], [15 / 16, 15 / 16])


def test_letterbox(demo):
    """The photo 1.5x larger with its lower third cut off (768x512): the model sees the same face at the
    same scale, now above a black bar, and the box comes back in the larger photo's pixels (LiteRT
    only: this checks the decoder's letterbox removal, not gpuc)."""
    from PIL import Image
    from skimage import data
    rgb = data.astronaut()
    wide = np.asarray(Image.fromarray(rgb).resize((768, 768), Image.BILINEAR))[:512]
    model = demo.model_path().read_bytes()
    boxes = []
    for img in (rgb, wide):
        x, pad = demo.preprocess(img)
        (det,) = demo.decode(*run_litert(model, [x]), pad)
        boxes.append(np.array(det.box_px(img.shape[1], img.shape[0])))
    assert np.abs(boxes[1] - boxes[0] * 1.5).max() <= 4, boxes


def test_quickstart_has_no_outside_path():
    text = (ROOT / "README.md").read_text()
    quick = text[text.index("## Quickstart"):text.index("## CLI reference")]
    assert "../" not in quick and "shared/" not in quick
    assert "![" in quick and (ROOT / "docs" / "face_demo.png").is_file()


def test_quickstart_cli_lines(run, tmp_path):
    """The README's command lines, in a copy of the repository's build/ layout: each exits 0."""
    _, _, x = run
    (tmp_path / "build").mkdir()
    np.save(tmp_path / "build" / "face_input.npy", x)
    shims = 'gpuc() { "$PY" -m gpuc "$@"; }\npython() { "$PY" "$@"; }\n'     # this interpreter's gpuc
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", shims + readme_block("quickstart-cli", "sh")],
                       cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "PY": sys.executable})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert re.search(r"^PASS$", r.stdout, re.M), r.stdout[-2000:]
    assert (tmp_path / "build" / "face_out.npz").is_file()


def test_full_range_detector_and_the_no_face_hint(demo, run, capsys):
    """--model full: the full-range detector (192x192 input, one stride-4 layer, 2304 anchors),
    decoded as MediaPipe does, finds the astronaut's face (LiteRT's outputs: this checks the decoder;
    gpuc runs the model as it runs the short-range one); a run that finds no face says why and
    names the other detector."""
    from skimage import data
    full = demo.DETECTORS["full"]
    a = demo.ssd_anchors(full)
    assert a.shape == (2304, 2)
    np.testing.assert_allclose(a[[0, 1, 48, -1]], [[1 / 96, 1 / 96], [3 / 96, 1 / 96], [1 / 96, 3 / 96],
                                                   [95 / 96, 95 / 96]])
    rgb = data.astronaut()
    x, pad = demo.preprocess(rgb, full.input_size)
    assert x.shape == (1, 192, 192, 3)
    (det,) = demo.decode(*run_litert(demo.model_path(full.file).read_bytes(), [x]), pad, full)
    for name, v in zip(("x0", "y0", "x1", "y1"), det.box_px(512, 512)):
        lo, hi = FACE[name]
        assert lo <= v <= hi, f"{name} = {v} px, not within {FACE[name]}"
    res, _, _ = run
    assert res["detector"] == "short" and demo.no_face_hint(res) is None
    none = dict(res, detections=[])
    text = demo.report(none)
    assert "0 face(s)" in text and "no face found" in text and "--model full" in text
    assert "--model short" in demo.no_face_hint(dict(none, detector="full"))
    assert demo.main(["--model", "full", "--model-path"]) == 0
    assert capsys.readouterr().out.strip().endswith("face_detection_full_range.tflite")
    with pytest.raises(SystemExit):
        demo.main(["--model", "long"])
