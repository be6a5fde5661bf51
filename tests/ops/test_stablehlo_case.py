"""STABLEHLO_CASE (compiler/control_flow.py, compiler/ops/case_branch.py) against LiteRT: n-way branch
subgraphs by an int32 index, out-of-range indices taking the last branch, several operands and outputs,
a single branch; malformed ones refused with the op named."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.errors import GpucError  # noqa: E402
from helpers.builder import ModelBuilder, with_subgraphs  # noqa: E402
from helpers.litert import run_litert  # noqa: E402


def _branch(op, shape, two=False, out_shape=None):
    b = ModelBuilder()
    x = b.input("x", shape, "float32")
    w = b.input("w", shape, "float32")
    y = b.tensor("y", out_shape or shape, "float32")
    if out_shape is not None:         # another shape than the op's output
        b.op("SUM", [x, b.const("axes", np.arange(len(shape), dtype=np.int32))], [y], keep_dims=True)
    elif op in ("ADD", "MUL"):
        b.op(op, [x, w], [y])
    else:
        b.op(op, [x], [y])
    b.output(y)
    if two:                           # a second output: w + x (the same in every branch)
        z = b.tensor("z", shape, "float32")
        b.op("ADD", [w, x], [z])
        b.output(z)
    return b


def _model(ops, shape, two=False, index_shape=(), branch_ids=None, out_shape=None):
    mb = ModelBuilder()
    i = mb.input("i", list(index_shape), "int32")
    x = mb.input("x", shape, "float32")
    w = mb.input("w", shape, "float32")
    outs = [mb.tensor("y", shape, "float32")] + ([mb.tensor("z", shape, "float32")] if two else [])
    ids = branch_ids or list(range(1, len(ops) + 1))
    mb.op("STABLEHLO_CASE", [i, x, w], outs, branch_subgraph_indices=ids)
    for o in outs:
        mb.output(o)
    return with_subgraphs(mb, *[_branch(op, shape, two, out_shape if k == 0 else None) for k, op in enumerate(ops)])


CASES = [  # (branch ops, shape, two outputs, index shape)
    (["ABS", "NEG", "EXP"], [3], False, ()),
    (["ADD", "MUL", "TANH", "RELU", "NEG"], [2, 4], True, (1,)),
    (["MUL"], [5], False, ()),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_case_matches_litert(case):
    ops, shape, two, ishape = CASES[case]
    model = _model(ops, shape, two, ishape)
    rng = np.random.default_rng(case)
    with gpuc.load(gpuc.compile(model)) as m:
        for k in list(range(len(ops))) + [-1, len(ops), 1 << 30]:
            feeds = [np.full(ishape, k, np.int32), rng.standard_normal(shape).astype(np.float32),
                     rng.standard_normal(shape).astype(np.float32)]
            ref = run_litert(model, feeds)
            got = m.run(feeds)
            for g, r in zip(got, ref):
                np.testing.assert_allclose(g, r, rtol=1e-6, atol=1e-7, err_msg=f"index {k}")


def test_malformed_case_is_refused():
    with pytest.raises(GpucError, match="STABLEHLO_CASE.*branch subgraph 7 is not a subgraph"):
        gpuc.compile(_model(["ABS", "NEG"], [3], branch_ids=[1, 7]))
    with pytest.raises(GpucError, match="STABLEHLO_CASE.*branch output 0"):
        gpuc.compile(_model(["ABS", "NEG"], [3], out_shape=[1]))
    mb = ModelBuilder()
    i = mb.input("i", [2], "int32")
    x = mb.input("x", [3], "float32")
    w = mb.input("w", [3], "float32")
    y = mb.tensor("y", [3], "float32")
    mb.op("STABLEHLO_CASE", [i, x, w], [y], branch_subgraph_indices=[1, 2])
    mb.output(y)
    with pytest.raises(GpucError, match="index 'i' is int32 \\[2\\]"):
        gpuc.compile(with_subgraphs(mb, _branch("ABS", [3]), _branch("NEG", [3])))
