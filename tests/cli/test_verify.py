"""gpuc verify: passes on a correct compile; --per-op names a deliberately broken op."""
import json
import subprocess
import sys

import numpy as np
import pytest

from helpers.builder import ModelBuilder
from helpers.data import rnd

pytest.importorskip("vulkan")
pytest.importorskip("ai_edge_litert")


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    mb = ModelBuilder()
    x = mb.input("x", [1, 6, 6, 3])
    c = mb.tensor("c", [1, 6, 6, 4])
    mb.op("CONV_2D", [x, mb.const("w", rnd((4, 3, 3, 3), 1)), mb.const("b", rnd((4,), 2))], [c],
          padding="SAME", stride_h=1, stride_w=1, fused_activation_function="RELU")
    a = mb.tensor("a", [1, 6, 6, 4])
    mb.op("ADD", [c, mb.const("k", rnd((4,), 3))], [a])
    m = mb.tensor("m", [1, 4])
    mb.op("MEAN", [a, mb.const("ax", np.array([1, 2], np.int32))], [m], keep_dims=False)
    mb.output(m)
    p = tmp_path_factory.mktemp("verify") / "m.tflite"
    p.write_bytes(mb.finish())
    return p


def verify(path, *args, env=None):
    import os
    r = subprocess.run([sys.executable, "-m", "gpuc.cli", "verify", str(path), "--json", *args],
                       capture_output=True, text=True, env=dict(os.environ, GPUC_NO_CACHE="1", **(env or {})))
    return r.returncode, json.loads(r.stdout) if r.stdout.strip() else r.stderr


def test_verify_passes(model_path):
    rc, rep = verify(model_path, "--per-op")
    assert rc == 0 and rep["pass"] and rep["first_divergent_op"] is None and len(rep["per_op"]) == 3


def test_per_op_names_the_broken_op(model_path):
    rc, rep = verify(model_path, "--per-op", env={"GPUC_TEST_BREAK_OP": "ADD"})
    assert rc == 3 and not rep["pass"]
    assert rep["first_divergent_op"].startswith("ADD")
