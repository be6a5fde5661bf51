"""`gpuc run` and `gpuc verify` report NaN / +Inf / -Inf outputs (issue 19, parts 3-4): counts per
output; verify matches NaN with NaN and an Inf with the same Inf, and names the first op where a
tensor finite in LiteRT turns non-finite in gpuc (an fp16 storage overflow here)."""
import json

import numpy as np
import pytest
from click.testing import CliRunner

from gpuc.cli import _summary, main
from gpuc.verify import compare
from helpers.builder import ModelBuilder

SPECIAL = np.array([[0, np.nan, np.inf, -np.inf, 4, 5, np.inf, 7]], np.float32)


def test_summary_counts_nonfinite_and_keeps_stats_finite():
    s = _summary("y", SPECIAL)
    assert s.startswith("y: shape [1, 8] float32 finite min 0 max 7 mean 4\n")
    assert "  non-finite: 1 NaN, 2 +Inf, 1 -Inf (of 8 elements)" in s
    assert "non-finite" not in _summary("y", np.arange(8, dtype=np.float32)[None])
    assert "non-finite" not in _summary("y", np.arange(8, dtype=np.int32)[None])


def test_compare_matches_same_nonfinite_only():
    ref = SPECIAL.copy()
    c = compare(ref.copy(), ref)
    assert (c["finiteness_mismatch"], c["turned_nonfinite"], c["max_rel"]) == (0, 0, 0.0)
    out = ref.copy()
    out[0, 0] = np.nan               # finite in LiteRT only
    out[0, 2] = -np.inf              # the other Inf
    out[0, 3] = 0.0                  # finite in gpuc only
    out[0, 7] = 7.7
    c = compare(out, ref)
    assert (c["finiteness_mismatch"], c["turned_nonfinite"]) == (3, 1)
    assert c["max_abs"] == pytest.approx(0.7, rel=1e-5) and c["max_rel"] == pytest.approx(0.1, rel=1e-5)
    assert compare(out[:, :4], ref)["max_rel"] == float("inf")


# ---------------------------------------------------------------------------------------------------
# through the command line (lavapipe)

def one_input_model(*ops):
    """x [1, 8] -> each (op, const or None) in turn -> output; a const is a second operand."""
    mb = ModelBuilder()
    t = mb.input("x", [1, 8])
    for i, (op, k) in enumerate(ops):
        out = mb.tensor(f"t{i}", [1, 8])
        mb.op(op, [t] if k is None else [t, mb.const(f"k{i}", np.full((1,), k, np.float32))], [out])
        t = out
    mb.output(t)
    return mb.finish()


@pytest.fixture
def files(tmp_path, monkeypatch):
    """files(model, x) -> (model path, input path), written under tmp_path; compile cache off."""
    pytest.importorskip("vulkan")
    pytest.importorskip("ai_edge_litert")
    monkeypatch.setenv("GPUC_NO_CACHE", "1")

    def write(model, x):
        (tmp_path / "m.tflite").write_bytes(model)
        np.save(tmp_path / "x.npy", x)
        return str(tmp_path / "m.tflite"), str(tmp_path / "x.npy")
    return write


def gpuc(*args):
    return CliRunner().invoke(main, list(args))


def test_run_summary_counts_nonfinite(files, tmp_path):
    model, x = files(one_input_model(("NEG", None)), SPECIAL)
    assert gpuc("compile", model, "-o", str(tmp_path / "m.bundle"), "-q").exit_code == 0
    r = gpuc("run", str(tmp_path / "m.bundle"), "-i", x)
    assert r.exit_code == 0, r.output
    assert "t0: shape [1, 8] float32 finite min -7 max -0 mean -4\n  non-finite: 1 NaN, 1 +Inf, 2 -Inf (of 8 elements)" \
        in r.output


def test_verify_nan_and_inf_match_litert(files):
    model, x = files(one_input_model(("NEG", None)), SPECIAL)
    r = gpuc("verify", model, "-i", x, "--json")
    rep = json.loads(r.output)
    assert r.exit_code == 0 and rep["pass"], rep
    row = rep["outputs"][0]
    assert row["nonfinite"] == row["ref_nonfinite"] == {"nan": 1, "posinf": 1, "neginf": 2}
    assert row["finiteness_mismatch"] == 0


X100 = np.full((1, 8), 100, np.float32)


def test_verify_fp16_names_the_op_that_overflows(files):
    """x * 1000 = 1e5 overflows fp16 storage (max 65504) to +Inf; |Inf| reaches the output.  Without
    --per-op, verify walks the ops itself to name the MUL."""
    model, x = files(one_input_model(("MUL", 1000), ("ABS", None)), X100)
    r = gpuc("verify", model, "-i", x, "--precision", "fp16")
    assert r.exit_code == 3, r.output
    assert "non-finite: gpuc 0 NaN, 8 +Inf, 0 -Inf; LiteRT 0 NaN, 0 +Inf, 0 -Inf; 8 element(s) differ" in r.output
    assert "first op turning non-finite: MUL (operator #0) (tensor t0: 8 element(s)" in r.output


def test_verify_per_op_fp16_names_overflow_under_a_clamp(files):
    """x * 1000 * 1000: the first product overflows fp16 storage; the second MUL's output is fp32, and
    its Inf may be clamped to FLT_MAX (LiteRT's builtin kernels clamp so), a finite wrong output: the
    per-op walk, which stores intermediates as the fp16 compile does, still names the first MUL."""
    model, x = files(one_input_model(("MUL", 1000), ("MUL", 1000)), X100)
    r = gpuc("verify", model, "-i", x, "--precision", "fp16", "--per-op", "--json")
    rep = json.loads(r.output)
    assert r.exit_code == 3 and not rep["pass"]
    assert rep["first_nonfinite_op"] == {"op": "MUL (operator #0)", "tensor": "t0", "elements": 8}
    assert rep["per_op"][0]["turned_nonfinite"] == 8 and not rep["per_op"][0]["pass"]


def test_verify_accepts_either_interpreter(files):
    """ADD of +-Inf: LiteRT's builtin kernels clamp the sum to +-FLT_MAX, its default (XNNPACK) keeps
    +-Inf, as gpuc does: verify passes against the default interpreter."""
    model, x = files(one_input_model(("ADD", 1.0)), SPECIAL)
    rep = json.loads(gpuc("verify", model, "-i", x, "--json").output)
    assert rep["pass"], rep
    assert rep["outputs"][0]["nonfinite"] == rep["outputs"][0]["ref_nonfinite"] == {"nan": 1, "posinf": 2, "neginf": 1}
