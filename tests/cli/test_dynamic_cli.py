"""`gpuc compile --dynamic NAME:AXIS<=MAX` off the batch axis from the command line: the summary and
`gpuc inspect` name the dynamic dims, `gpuc run` takes any size within the bound, and a model whose
RESHAPE fixes the length (text_conv1d_lstm) fails with a message naming that RESHAPE."""
import json
import subprocess
import sys

import numpy as np
import pytest

from helpers.litert import run_litert
from helpers.repo import shared_models_dir
from helpers.seqmodels import attention_model


def gpuc(*args):
    return subprocess.run([sys.executable, "-m", "gpuc.cli", *map(str, args)], capture_output=True, text=True)


def test_compile_inspect_run(tmp_path):
    model = tmp_path / "att.tflite"
    model.write_bytes(attention_model())
    bundle = tmp_path / "att.bundle"
    r = gpuc("compile", model, "-o", bundle, "--dynamic", "tokens:1<=24", "--no-cache")
    assert r.returncode == 0, r.stderr
    assert "dynamic tokens:1 1..24" in r.stdout and "batch" not in r.stdout
    r = gpuc("inspect", bundle)
    assert r.returncode == 0 and "dynamic dims: tokens:1 in 1..24" in r.stdout and "[1, 24*] int32" in r.stdout
    rep = json.loads(gpuc("inspect", bundle, "--json").stdout)
    assert rep["dynamic_dims"] == [{"input": "tokens", "axis": 1, "max": 24}]
    assert rep["inputs"][0]["dynamic_axes"] == [1] and rep["outputs"][0]["dynamic_axes"] == [1]
    x = np.random.default_rng(3).integers(0, 16, (1, 5)).astype(np.int32)
    np.save(tmp_path / "x.npy", x)
    r = gpuc("run", bundle, "--input", tmp_path / "x.npy", "--output", tmp_path / "y.npz")
    assert r.returncode == 0, r.stderr
    got = np.load(tmp_path / "y.npz")["out"]
    ref, = run_litert(model.read_bytes(), [x])
    assert got.shape == (1, 5, 8)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-5 * np.abs(ref).max())


def test_text_conv1d_lstm_names_its_reshape(tmp_path):
    d = shared_models_dir()
    if d is None or not (d / "text_conv1d_lstm_tfkeras_f32.tflite").is_file():
        pytest.skip("shared models not present")
    path = d / "text_conv1d_lstm_tfkeras_f32.tflite"
    from gpuc.compiler.frontend.importer import load_tflite
    g = load_tflite(path.read_bytes()).main
    name = g.t(g.inputs[0]).name
    r = gpuc("compile", path, "-o", tmp_path / "t.bundle", "--dynamic", f"{name}:1<=64", "--no-cache")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "RESHAPE (operator #" in r.stderr and "2048" in r.stderr, r.stderr
