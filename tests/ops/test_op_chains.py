"""A bounded run of scripts/fuzz_chains.py inside `make test`: seeded random chains of 2..6 float32 ops
(elementwise with broadcast operands, movement, reductions, softmax, FC, convolutions, pooling, resizes, and
scripts/fuzz_chains_more.py's matmuls, transposed convolutions, packing, splitting, comparisons, ...)
against LiteRT's two interpreters, through every fusion and folding pass; and int8 chains (a QUANTIZE, int8
ops, a DEQUANTIZE), on LiteRT's quantization steps exactly."""
import sys

import pytest

pytest.importorskip("vulkan")
pytest.importorskip("ai_edge_litert")

from helpers.repo import ROOT  # noqa: E402

sys.path.insert(0, str(ROOT / "scripts"))

import fuzz_chains  # noqa: E402


@pytest.mark.parametrize("part", range(3))
def test_op_chains_match_litert(part):
    verdicts = [(i, *fuzz_chains.run_case(1, i)) for i in range(part * 20, part * 20 + 20)]
    failures = [(i, detail) for i, verdict, detail in verdicts if verdict == "fail"]
    assert failures == []
    assert sum(v == "ok" for _, v, _ in verdicts) >= 15


@pytest.mark.parametrize("part", range(2))
def test_int8_chains_match_litert_exactly(part):
    verdicts = [(i, *fuzz_chains.run_case(1, i, "int8")) for i in range(part * 20, part * 20 + 20)]
    assert [(i, d) for i, v, d in verdicts if v == "fail"] == []
    assert sum(v == "ok" for _, v, _ in verdicts) >= 15


def test_chain_cases_are_reproducible():
    """Case i is a function of (seed, i) alone: the same model bytes and inputs twice."""
    a, fa = fuzz_chains.case(5, 17)
    b, fb = fuzz_chains.case(5, 17)
    assert a == b and all((x == y).all() for x, y in zip(fa, fb))
