"""`gpuc compile --input-shape NAME=DIMS` and `gpuc inspect --json` of a model with dynamic dims."""
import json
import subprocess
import sys

import pytest

from helpers.audio import FL, HOP, IN_NAME, audio_frontend

pytest.importorskip("vulkan")


def gpuc(*args):
    return subprocess.run([sys.executable, "-m", "gpuc.cli", *map(str, args)], capture_output=True, text=True)


def test_compile_input_shape(tmp_path):
    model = tmp_path / "frontend.tflite"
    model.write_bytes(audio_frontend())
    r = gpuc("inspect", model, "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["cpu_nodes"] == 0 and rep["host_round_trips"] == 0
    out = tmp_path / "f.bundle"
    r = gpuc("compile", model, "-o", out, "--input-shape", f"{IN_NAME}=1x2000", "--no-cache")
    assert r.returncode == 0, r.stderr
    from gpuc.runtime.bundle import read_bundle
    b = read_bundle(out.read_bytes())
    assert b.options["input_shapes"] == {IN_NAME: [1, 2000]}
    assert tuple(b.tensors[b.outputs[0]].shape) == ((2000 - FL) // HOP + 1, FL)
    r = gpuc("compile", model, "-o", out, "--input-shape", "nope=1x5", "--no-cache")
    assert r.returncode == 2 and "'nope'" in r.stderr and "Traceback" not in r.stderr
    r = gpuc("compile", model, "-o", out, "--input-shape", f"{IN_NAME}=1xfoo", "--no-cache")
    assert r.returncode == 2 and "not a list of integers" in r.stderr
