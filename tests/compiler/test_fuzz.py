"""A bounded fuzz run inside `make test` (`make fuzz` runs 10,000 cases)."""
import sys

from helpers.repo import ROOT

sys.path.insert(0, str(ROOT / "scripts"))

import fuzz  # noqa: E402


def test_mutated_models_compile_or_fail_cleanly():
    r = fuzz.fuzz_models(400, seed=7, timeout=60, chunk=200)
    assert r["failures"] == [] and r["ok"] + r["reject"] == 400


def test_bundle_bit_flips_are_all_refused():
    assert fuzz.fuzz_bundle(1000, seed=3)["accepted"] == 0
