"""`gpuc compile --max-batch 8` then `gpuc inspect` (text and --json): a bundle runs batch-native, or inspect
says it is replicated per item and why, naming every op without a batch-native rule with its reason."""
from __future__ import annotations

import json

import numpy as np
from click.testing import CliRunner

from gpuc.cli import main
from helpers.builder import ModelBuilder
from helpers.detection import detection_model, random_anchors


def _inspect(tmp_path, model: bytes):
    src, out = tmp_path / "m.tflite", tmp_path / "m.bundle"
    src.write_bytes(model)
    r = CliRunner()
    res = r.invoke(main, ["compile", str(src), "-o", str(out), "--max-batch", "8"])
    assert res.exit_code == 0, res.output
    text = r.invoke(main, ["inspect", str(out)])
    js = r.invoke(main, ["inspect", str(out), "--json"])
    assert text.exit_code == 0 and js.exit_code == 0, text.output + js.output
    return text.output.splitlines()[1], json.loads(js.output)


def test_detection_bundle_is_batch_native(tmp_path):
    """(Its per-item exactness: tests/ops/test_detection_postprocess.py test_max_batch_runs_batch_native.)"""
    model = detection_model(12, 3, random_anchors(12, np.random.default_rng(0)), num_classes=2, max_detections=4)
    line, info = _inspect(tmp_path, model)
    assert "batch 1..8 (batch-native: each dispatch computes the items)" in line
    assert (info["max_batch"], info["batch_native"], info["batch"]) == (8, True, "native")
    assert (info["cpu_nodes"], info["host_round_trips"]) == (0, 0) and "batch_refusal" not in info


def test_every_op_without_a_rule_is_named(tmp_path):
    mb = ModelBuilder()
    x = mb.input("x", [1, 4])
    d = mb.tensor("d", [1, 4, 4])
    mb.op("MATRIX_DIAG", [x], [d])
    v, i = mb.tensor("v", [1, 2]), mb.tensor("i", [1, 2], "int32")
    mb.op("TOPK_V2", [x, mb.const("k", np.array(2, np.int32))], [v, i])
    v2, i2 = mb.tensor("v2", [1, 2]), mb.tensor("i2", [1, 2], "int32")
    mb.op("TOPK_V2", [x, mb.const("k2", np.array(2, np.int32))], [v2, i2])
    for t in (d, v, i, v2, i2):
        mb.output(t)
    line, info = _inspect(tmp_path, mb.finish())
    why = info["batch_refusal"]
    assert info["batch_native"] is False and why in line
    assert "MATRIX_DIAG (operator #0): no batch rule for MATRIX_DIAG (" in why
    assert "TOPK_V2 (operator #1) and 1 more: no batch rule for TOPK_V2 (" in why


def test_batch_native_bundle_says_so(tmp_path):
    mb = ModelBuilder()
    x = mb.input("x", [1, 4])
    y = mb.tensor("y", [1, 4])
    mb.op("ADD", [x, x], [y])
    mb.output(y)
    line, info = _inspect(tmp_path, mb.finish())
    assert "batch 1..8 (batch-native" in line
    assert (info["max_batch"], info["batch_native"], info["batch"]) == (8, True, "native")
    assert "batch_refusal" not in info
