"""examples/: each script runs as a user would start it (from another folder) and reports what it
should; examples/models/blazeface_decoder.tflite is what scripts/gen_blazeface_decoder.py writes."""
import re
import subprocess
import sys

import pytest

from helpers.repo import ROOT, require_demo_packages

pytest.importorskip("vulkan")


def run_example(name, tmp_path, *args):
    require_demo_packages()
    r = subprocess.run([sys.executable, str(ROOT / "examples" / name), *args], cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return r.stdout


def test_classify_batch(tmp_path):
    out = run_example("classify_batch.py", tmp_path, "10")          # a batch of 8, then one of 2
    rows = re.findall(r"lfw_subset\[\s*(\d+)\]\s+(face|not face)\s+score ([\d.]+)\s+(ok|WRONG)", out)
    assert [int(r[0]) for r in rows] == [0, 1, 2, 3, 4, 100, 101, 102, 103, 104]
    ok = sum(r[3] == "ok" for r in rows)
    assert ok >= 9, out                         # lfw_subset[4] scores 0.33 in LiteRT too: the model's miss
    assert f"accuracy {ok / 10:.3f} on 10 images (in 2 run(s) of up to 8)" in out
    diff = float(re.search(r"largest difference from LiteRT CPU: (\S+)", out).group(1))
    assert diff < 1e-3


def test_wake_word_stream(tmp_path):
    out = run_example("wake_word_stream.py", tmp_path)
    assert "64 runs of 3; state kept on the device: True" in out
    m = re.search(r"'Okay Nabu' detected after ([\d.]+) s \(peak ([\d.]+)\)", out)
    assert m and 1.0 < float(m.group(1)) < 1.9 and float(m.group(2)) > 0.85, out
    m = re.search(r"LiteRT CPU, same stream: (\d+) of 64 outputs equal, all within (\d+) .* detected after ([\d.]+) s", out)
    assert m and int(m.group(2)) <= 8, out


def test_chain_on_device(tmp_path):
    out = run_example("chain_on_device.py", tmp_path)
    assert "decoder  [('regressors', (1, 896, 16)), ('classificators', (1, 896, 1))]" in out
    m = re.search(r"face 0: score ([\d.]+)\s+box px \[(\d+), (\d+), (\d+), (\d+)\]", out)
    assert m and float(m.group(1)) > 0.5
    x0, y0, x1, y1 = map(int, m.groups()[1:])
    assert 160 <= x0 <= 200 and 60 <= y0 <= 100 and 255 <= x1 <= 295 and 160 <= y1 <= 200
    assert "1 face(s); chained decoding vs host decoding" in out


def test_detect(tmp_path, models_dir):
    """An SSD with TFLite_Detection_PostProcess inside: every op on the GPU, LiteRT's detections."""
    out = run_example("detect.py", tmp_path, str(models_dir / "detection" / "pedestrian_ssdlite_mobilenet_v2.tflite"),
                      "--out", "d.png")
    assert "0 CPU node(s), 0 host round trip(s)" in out and "the same 10 detection(s) in the same order" in out
    assert "1 drawn" in out and (tmp_path / "d.png").stat().st_size > 10000


def test_decoder_model_is_current():
    require_demo_packages()
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from gen_blazeface_decoder import OUT, decoder_model
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    assert OUT.read_bytes() == decoder_model(), "run python scripts/gen_blazeface_decoder.py"
