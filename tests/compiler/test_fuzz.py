"""A bounded fuzz run inside `make test` (`make fuzz` runs 10,000 cases)."""
import sys

from helpers.repo import ROOT

sys.path.insert(0, str(ROOT / "scripts"))

import fuzz  # noqa: E402
import fuzz_fields  # noqa: E402


def test_mutated_models_compile_or_fail_cleanly():
    r = fuzz.fuzz_models(400, seed=7, timeout=60, chunk=200)
    assert r["failures"] == [] and r["ok"] + r["reject"] == 400


def test_bundle_bit_flips_are_all_refused():
    assert fuzz.fuzz_bundle(1000, seed=3)["accepted"] == 0


def test_resealed_field_lies_run_unchanged_or_are_refused():
    """One semantic field changed, every digest recomputed: the same outputs or a one-line refusal."""
    r = fuzz_fields.fuzz(150, seed=11, timeout=60, chunk=150)
    assert r["failures"] == [] and r["same"] + r["refused_total"] + r["skipped"] == 150
    assert r["refused_total"] > 75
