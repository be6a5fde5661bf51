"""--dynamic NAME:AXIS<=MAX on the batch axis: one batch-native bundle runs any batch 1..MAX, each run
matching LiteRT resized to that batch; a channel axis and malformed specs fail with a clear message."""
import subprocess
import sys

import numpy as np
import pytest

import gpuc
from gpuc.errors import GpucError, UnsupportedError
from gpuc.runtime.bundle import read_bundle
from helpers.builder import ModelBuilder
from helpers.data import rnd
from helpers.litert import run_litert

NAME = "serving_default_x:0"          # a name with ':' (the last ':' separates the axis)


def cnn():
    mb = ModelBuilder()
    x = mb.input(NAME, (1, 6, 5, 3))
    c = mb.tensor("c", (1, 6, 5, 8))
    mb.op("CONV_2D", [x, mb.const("w", rnd((8, 3, 3, 3), 1)), mb.const("b", rnd((8,), 2))], [c], padding=0,
          stride_w=1, stride_h=1, fused_activation_function=1)
    d = mb.tensor("d", (1, 3, 3, 8))
    mb.op("DEPTHWISE_CONV_2D", [c, mb.const("dw", rnd((1, 3, 3, 8), 3)), mb.const("db", rnd((8,), 4))], [d],
          padding=0, stride_w=2, stride_h=2, depth_multiplier=1)
    m = mb.tensor("m", (1, 8))
    mb.op("MEAN", [d, mb.const("axes", np.array([1, 2], np.int32))], [m], keep_dims=False)
    f = mb.tensor("f", (1, 4))
    mb.op("FULLY_CONNECTED", [m, mb.const("fw", rnd((4, 8), 5)), mb.const("fb", rnd((4,), 6))], [f])
    y = mb.tensor("y", (1, 4))
    mb.op("SOFTMAX", [f], [y], beta=1.0)
    mb.output(y)
    return mb.finish()


def test_one_bundle_every_batch_matches_litert_resized():
    model = cnn()
    bundle = gpuc.compile(model, dynamic=[f"{NAME}:0<=5"], cache=False)
    b = read_bundle(bundle)
    assert b.options["max_batch"] == 5 and b.options.get("batch_native")
    with gpuc.load(bundle) as m:
        for n in (1, 3, 5):
            x = rnd((n, 6, 5, 3), 10 + n, -1, 1)
            got, = m.run([x])
            ref, = run_litert(model, [x])
            assert got.shape == ref.shape == (n, 4)
            np.testing.assert_allclose(got, ref, rtol=0, atol=1e-5 * np.abs(ref).max())


def test_other_axes_and_bad_specs_are_refused():
    model = cnn()                # (other axes: tests/compiler/test_dynamic_dims.py; the channels stay fixed)
    with pytest.raises(UnsupportedError, match=r"CONV_2D \(operator #0\) cannot take the dynamic dim.*channel"):
        gpuc.compile(model, dynamic=[f"{NAME}:3<=12"], cache=False)
    with pytest.raises(GpucError, match="expected NAME:AXIS<=MAX"):
        gpuc.compile(model, dynamic=["x<=12"], cache=False)
    with pytest.raises(GpucError, match="not an input"):
        gpuc.compile(model, dynamic=["nope:0<=4"], cache=False)
    with pytest.raises(GpucError, match="give one"):
        gpuc.compile(model, dynamic=[f"{NAME}:0<=4"], max_batch=8, cache=False)


def test_cli(tmp_path):
    p = tmp_path / "m.tflite"
    p.write_bytes(cnn())
    r = subprocess.run([sys.executable, "-m", "gpuc.cli", "compile", str(p), "-o", str(tmp_path / "m.bundle"),
                        "--dynamic", f"{NAME}:0<=4", "--no-cache"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "batch 1..4" in r.stdout
    r = subprocess.run([sys.executable, "-m", "gpuc.cli", "compile", str(p), "-o", str(tmp_path / "n.bundle"),
                        "--dynamic", f"{NAME}:3<=4", "--no-cache"], capture_output=True, text=True)
    assert r.returncode != 0 and "cannot take the dynamic dim" in r.stderr and "Traceback" not in r.stderr


def test_a_reshape_that_fixes_the_length_is_named():
    """Like text_conv1d_lstm: a RESHAPE with a constant target fixes the sequence length."""
    mb = ModelBuilder()
    x = mb.input("tokens", (1, 8, 4))
    r = mb.tensor("r", (1, 32))
    mb.op("RESHAPE", [x, mb.const("target", np.array([1, 32], np.int32))], [r], new_shape=[1, 32])
    y = mb.tensor("y", (1, 32))
    mb.op("RELU", [r], [y])
    mb.output(y)
    with pytest.raises(UnsupportedError, match=r"RESHAPE \(operator #0\)"):
        gpuc.compile(mb.finish(), dynamic=["tokens:1<=16"], cache=False)
