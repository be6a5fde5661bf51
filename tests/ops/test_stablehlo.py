"""The STABLEHLO_* builtins (compiler/ops/stablehlo.py) against LiteRT: which ones LiteRT's interpreter
runs at all (the rest gpuc refuses for that reason), and the lowered ones on random shapes, dtypes and
attributes (ADD / MULTIPLY / MAXIMUM / MINIMUM with NaN and -0.0, bool AND, PAD with negative edges and
interior padding), exactly; inputs LiteRT refuses are refused with a reason naming the operator."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.compiler.frontend.tflite_schema import ENUMS  # noqa: E402
from gpuc.compiler.ops import REFUSED  # noqa: E402
from gpuc.compiler.ops.stablehlo import CONTROL, INLINED, LOWERINGS, NOT_RUN, NOT_RUN_REASON, NOT_YET  # noqa: E402
from gpuc.errors import GpucError  # noqa: E402
from gpuc.inspect import inspect_model  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import make_interpreter, run_litert  # noqa: E402

ALL = sorted(n for n in ENUMS["BuiltinOperator"] if n.startswith("STABLEHLO_"))


def _one_op(op, ins, out, **options):
    """A model of one `op`: ins [(shape, dtype)], out (shape, dtype)."""
    mb = ModelBuilder()
    xs = [mb.input(f"x{k}", s, d) for k, (s, d) in enumerate(ins)]
    y = mb.tensor("y", *out)
    mb.op(op, xs, [y], **options)
    mb.output(y)
    return mb.finish()


def _litert_has(op) -> bool:
    """Whether LiteRT's interpreter has a kernel for `op` (constructing it finds the op or not; a
    kernel that then rejects these made-up operands still counts as present)."""
    mb = ModelBuilder()
    x = mb.input("x", [2, 3], "float32")
    y = mb.tensor("y", [2, 3], "float32")
    mb.operators.append({"opcode_index": mb.opcode(op), "inputs": np.asarray([x], np.int32),
                         "outputs": np.asarray([y], np.int32)})
    mb.output(y)
    try:
        make_interpreter(mb.finish())
    except (RuntimeError, ValueError) as e:
        if "Didn't find op for builtin opcode" in str(e):
            return False
    return True


def test_the_table_is_what_litert_runs():
    assert len(ALL) >= 46
    runs = {op for op in ALL if _litert_has(op)}
    assert set(NOT_RUN) == set(ALL) - runs, "compiler/ops/stablehlo.py NOT_RUN differs from LiteRT"
    assert runs - {INLINED, CONTROL} <= set(LOWERINGS) | set(NOT_YET)
    for op in NOT_RUN:
        assert REFUSED[op] == NOT_RUN_REASON


def test_a_builtin_litert_does_not_run_is_refused():
    model = _one_op("STABLEHLO_TANH", [([2, 3], "float32")], ([2, 3], "float32"))
    with pytest.raises(GpucError, match=r"STABLEHLO_TANH \(operator #0\): LiteRT's interpreter does not run it"):
        gpuc.compile(model)


SPECIAL = [[np.nan, 1.0, -0.0, 0.0, np.nan, np.inf, 2.0], [1.0, np.nan, 0.0, -0.0, np.nan, -np.inf, 2.0]]


def _data(rng, shape, dtype, special=None):
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.startswith("int"):
        return rng.integers(-50, 50, shape).astype(dtype)
    x = (rng.standard_normal(shape) * 4).astype(dtype)
    if special is not None:     # operand k: NaN, -0.0 / +0.0 against numbers (std::max / std::min order)
        x.reshape(-1)[:len(SPECIAL[special])] = SPECIAL[special]
    return x


def _check(model, inputs, gpu_only=True):
    ref = run_litert(model, inputs)
    with gpuc.load(gpuc.compile(model)) as m:
        got = m.run(inputs)
        got = got if isinstance(got, (list, tuple)) else [got]
    if gpu_only:
        rep, _ = inspect_model(model, "m")
        assert rep["cpu_nodes"] == 0 and not any(n["op"].startswith("STABLEHLO_") for n in rep["subgraphs"][0]["nodes"])
    for a, b in zip(got, ref):
        a = np.asarray(a)
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_array_equal(a.view(np.uint8) if a.dtype.kind == "f" else a,
                                      b.view(np.uint8) if b.dtype.kind == "f" else b)


BINARY = [("STABLEHLO_ADD", "float32"), ("STABLEHLO_ADD", "int32"), ("STABLEHLO_MULTIPLY", "float32"),
          ("STABLEHLO_MULTIPLY", "int32"), ("STABLEHLO_MAXIMUM", "float32"), ("STABLEHLO_MINIMUM", "float32"),
          ("STABLEHLO_MAXIMUM", "int32"), ("STABLEHLO_MINIMUM", "int32"), ("STABLEHLO_AND", "bool"),
          ("STABLEHLO_ADD", "int64")]


@pytest.mark.parametrize("op,dtype", BINARY)
def test_elementwise_against_litert(op, dtype):
    rng = np.random.default_rng(len(op) * 7 + len(dtype))
    shape = [int(d) for d in rng.integers(1, 5, rng.integers(0, 3))] + [8]
    model = _one_op(op, [(shape, dtype)] * 2, (shape, dtype))
    inputs = [_data(rng, shape, dtype, special=k) for k in range(2)]
    if dtype.startswith("int"):
        inputs[0].reshape(-1)[0] = np.iinfo(dtype).max          # wraps like LiteRT's
    _check(model, inputs, gpu_only=dtype != "int64")


def test_elementwise_litert_refuses_is_refused():
    model = _one_op("STABLEHLO_ADD", [([2, 3], "float32"), ([1, 3], "float32")], ([2, 3], "float32"))
    with pytest.raises(RuntimeError):
        run_litert(model, [np.zeros((2, 3), np.float32), np.zeros((1, 3), np.float32)])
    with pytest.raises(GpucError, match=r"STABLEHLO_ADD \(operator #0\): operand shapes \[2, 3\] / \[1, 3\]"):
        gpuc.compile(model)


def _pad_model(shape, dtype, lo, hi, mid):
    dil = [n + max(n - 1, 0) * m for n, m in zip(shape, mid)]
    out = [d + a + b for d, a, b in zip(dil, lo, hi)]
    mb = ModelBuilder()
    x = mb.input("x", shape, dtype)
    v = mb.const("v", np.asarray(7, dtype))
    y = mb.tensor("y", out, dtype)
    mb.op("STABLEHLO_PAD", [x, v], [y], edge_padding_low=np.asarray(lo, np.int64),
          edge_padding_high=np.asarray(hi, np.int64), interior_padding=np.asarray(mid, np.int64))
    mb.output(y)
    return mb.finish()


PADS = [([3, 4], "float32", [1, 0], [2, 3], [0, 0]),
        ([3, 4], "float32", [-1, 2], [1, -2], [0, 0]),
        ([2, 3, 4], "int32", [0, 1, -1], [1, 0, 2], [1, 0, 2]),
        ([4, 5], "float32", [-2, 3], [-3, -1], [2, 1]),
        ([5], "float32", [0], [0], [0])]


@pytest.mark.parametrize("case", range(len(PADS)))
def test_pad_against_litert(case):
    shape, dtype, lo, hi, mid = PADS[case]
    rng = np.random.default_rng(case)
    _check(_pad_model(shape, dtype, lo, hi, mid), [_data(rng, shape, dtype)])


def test_pad_litert_refuses_is_refused():
    mb = ModelBuilder()
    x = mb.input("x", [3, 4], "float32")
    v = mb.const("v", np.asarray(0, np.float32))
    y = mb.tensor("y", [3, 9], "float32")
    mb.op("STABLEHLO_PAD", [x, v], [y], edge_padding_low=np.asarray([0, 1], np.int64),
          edge_padding_high=np.asarray([0, 1], np.int64), interior_padding=np.asarray([0, 0], np.int64))
    mb.output(y)
    with pytest.raises(GpucError, match=r"STABLEHLO_PAD \(operator #0\): output \[3, 9\] is not"):
        gpuc.compile(mb.finish())
