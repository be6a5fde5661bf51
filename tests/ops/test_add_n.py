"""ADD_N on the GPU: a chain of ADD in LiteRT's order, made one dispatch; bit for bit against LiteRT's builtin
kernel (float32 -0.0 and rounding order, int32 wrapping), with constant and repeated operands; the forms
LiteRT refuses refused by name."""
from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("vulkan")
pytest.importorskip("ai_edge_litert")

import gpuc  # noqa: E402
from gpuc.errors import GpucError  # noqa: E402
from gpuc.runtime import bundle as B  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import make_interpreter, run_litert  # noqa: E402


def _model(n, shape, dtype="float32", consts=(), repeat=False, out_shape=None, out_dtype=None, in_shapes=None):
    mb = ModelBuilder()
    rng = np.random.default_rng(n)
    ids, feeds = [], []
    for k in range(n):
        s = (in_shapes or [shape] * n)[k]
        if k in consts:
            ids.append(mb.const(f"c{k}", (rng.standard_normal(s) * 100).astype(dtype)))
        elif repeat and k > 0 and k % 2 == 0:
            ids.append(ids[0])                              # the same tensor summed again
        else:
            ids.append(mb.input(f"x{k}", s, dtype))
            feeds.append(s)
    y = mb.tensor("y", out_shape or shape, out_dtype or dtype)
    mb.op("ADD_N", ids, [y])
    mb.output(y)
    return mb.finish(), feeds


def _feed(shapes, dtype, seed):
    rng = np.random.default_rng(seed)
    out = []
    for s in shapes:
        if dtype == "int32":
            out.append(rng.integers(-2**31, 2**31 - 1, s, dtype=np.int64).astype(np.int32))   # sums wrap
        else:
            v = (rng.standard_normal(s) * 10.0 ** rng.uniform(-4, 4, s)).astype(np.float32)
            v.reshape(-1)[:3] = -0.0                      # -0.0 + -0.0 ... stays -0.0 in LiteRT's order
            out.append(v)
    return out


@pytest.mark.parametrize("n, shape, dtype, consts, repeat", [
    (2, [7], "float32", (), False), (3, [2, 5, 3], "float32", (1,), False), (5, [1, 4, 4, 6], "float32", (), True),
    (8, [33], "float32", (0, 5), False), (2, [3, 4], "int32", (), False), (4, [2, 2, 9], "int32", (2,), True)])
def test_add_n_is_litert_s_bit_for_bit(n, shape, dtype, consts, repeat):
    model, shapes = _model(n, shape, dtype, consts, repeat)
    b = gpuc.compile(model, cache=False)
    info = B.read_bundle(b)
    assert info.stats["cpu_nodes"] == 0
    if dtype == "float32":                  # fused (elementwise fusion is float32's): one dispatch per kernel's bindings
        assert len(info.dispatches) <= max(1, (n - 1) // 2), [d.label for d in info.dispatches]
    with gpuc.load(b) as m:
        for seed in range(2):
            feeds = _feed(shapes, dtype, seed)
            out, ref = m.run(feeds)[0], run_litert(model, feeds)[0]
            assert out.dtype == ref.dtype and out.shape == ref.shape
            assert np.array_equal(out.view(np.uint32), ref.view(np.uint32))


@pytest.mark.parametrize("case, why", [
    (dict(n=1, shape=[4]), "has 1 inputs"),
    (dict(n=3, shape=[4], in_shapes=[[4], [4], [1]]), "input 'x2' is float32[1]"),
    (dict(n=2, shape=[4], dtype="int64"), "sums int64"),
    (dict(n=2, shape=[4], out_shape=[2, 2]), "output 'y' is float32[2, 2]")])
def test_forms_litert_refuses_are_refused(case, why):
    """(A declared output shape other than the inputs': LiteRT's Prepare replaces it, gpuc refuses it, as it
    does for every elementwise op.)"""
    model, _ = _model(**case)
    if "out_shape" not in case:
        with pytest.raises(Exception):
            it = make_interpreter(model)
            it.allocate_tensors()
            it.invoke()
    with pytest.raises(GpucError, match=r"ADD_N \(operator #0\): " + re.escape(why)):
        gpuc.compile(model, cache=False)


def test_gpuc_ops_lists_it_on_the_gpu():
    from gpuc.op_listing import listing
    e = next(x for x in listing()["builtins"] if x["op"] == "ADD_N")
    assert e["status"] == "GPU" and e["dtypes"] == ["float32", "int32"] and "chain of ADD" in e["note"]
