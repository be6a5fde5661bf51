"""The last builtins LiteRT's CPU interpreter runs (issue 28), against LiteRT with random inputs:
WHERE (compiler/ops/where.py: coordinates of nonzero elements, rows trimmed per run) and UNIQUE
(compiler/ops/unique.py: first-occurrence order, idx int32 / int64, length trimmed per run)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import run_litert  # noqa: E402


def _same(out, ref):
    assert out.shape == ref.shape and out.dtype == ref.dtype, (out.shape, ref.shape, out.dtype, ref.dtype)
    assert np.array_equal(out, ref, equal_nan=out.dtype.kind == "f"), (out, ref)


def _where_model(dtype, shape):
    mb = ModelBuilder()
    x = mb.input("x", shape, dtype)
    y = mb.tensor("y", [1, len(shape)], "int64")
    mb.op("WHERE", [x], [y])
    mb.output(y)
    return mb.finish()


def _values(rng, shape, dtype, p):
    mask = rng.random(shape) < p
    if dtype == "bool":
        return mask
    if dtype == "float32":
        v = rng.standard_normal(shape).astype(np.float32)
        v.reshape(-1)[:2] = [np.nan, -0.0] if v.size > 2 else v.reshape(-1)[:2]   # NaN counts, -0 does not
        return np.where(mask | np.isnan(v), v, np.float32(0))
    return (mask * rng.integers(1, 100, shape)).astype(dtype)


@pytest.mark.parametrize("dtype,shape", [("bool", [3, 4]), ("float32", [7]), ("int32", [2, 600]),
                                         ("uint32", [5, 2]), ("int8", [2, 3, 5]), ("uint8", [9]),
                                         ("int64", [4, 1, 3])])
def test_where_against_litert(dtype, shape):
    rng = np.random.default_rng(len(dtype) * 7 + len(shape))
    model = _where_model(dtype, shape)
    with gpuc.load(gpuc.compile(model)) as m:
        for p in (0.0, 0.3, 1.0):
            x = _values(rng, shape, dtype, p)
            out = m.run([x])[0]
            if not np.count_nonzero(x):           # LiteRT resizes to [0, rank] (its python API cannot read it)
                assert out.shape == (0, len(shape)) and out.dtype == np.int64
                continue
            _same(out, run_litert(model, [x])[0])


def test_where_refusals():
    with pytest.raises(gpuc.errors.GpucError, match="WHERE.*int16"):
        gpuc.compile(_where_model("int16", [4]))
    mb = ModelBuilder()                                   # the coordinates feed another op: not trimmable
    x = mb.input("x", [4], "bool")
    y, z = mb.tensor("y", [1, 1], "int64"), mb.tensor("z", [1, 1], "int64")
    mb.op("WHERE", [x], [y])
    mb.op("NEG", [y], [z])
    mb.output(z)
    with pytest.raises(gpuc.errors.GpucError, match="WHERE.*another op reads"):
        gpuc.compile(mb.finish())


def _unique_model(dtype, n, idx_dtype):
    mb = ModelBuilder()
    x = mb.input("x", [n], dtype)
    y, i = mb.tensor("y", [n], dtype), mb.tensor("i", [n], idx_dtype)
    mb.op("UNIQUE", [x], [y, i], idx_out_type=idx_dtype.upper())
    mb.output(y)
    mb.output(i)
    return mb.finish()


@pytest.mark.parametrize("dtype,n,idx_dtype", [("float32", 9, "int32"), ("int32", 300, "int64"),
                                               ("int64", 11, "int32"), ("int16", 13, "int64"),
                                               ("int8", 10, "int32"), ("uint8", 7, "int64")])
def test_unique_against_litert(dtype, n, idx_dtype):
    rng = np.random.default_rng(n)
    model = _unique_model(dtype, n, idx_dtype)
    with gpuc.load(gpuc.compile(model)) as m:
        for hi in (1, 4, 1000):            # one value repeated .. mostly distinct
            x = rng.integers(-hi if dtype != "uint8" else 0, hi, n).astype(dtype)
            if dtype == "float32":
                x = x * np.float32(0.5)
                x[-1] = -0.0 if 0 in x[:-1] else x[-1]            # std::map: -0 == 0
            for out, ref in zip(m.run([x]), run_litert(model, [x])):
                _same(out, ref)


@pytest.mark.parametrize("dtype,idx_dtype", [("float32", "int32"), ("int32", "int64"), ("int64", "int32"),
                                             ("int16", "int64"), ("int8", "int32"), ("uint8", "int64")])
def test_unique_long_inputs_in_sorted_blocks(dtype, idx_dtype):
    """Past BLOCKS_FROM: first occurrences from blocks of 256 sorted by raw bits (negatives, -0 == 0) and binary
    searches, a last block 8 long; one value .. mostly distinct. The one-workgroup kernel's loops went past
    llvmpipe's limit at ~6,000 elements (lavapipe then reported a NaN the input did not hold)."""
    from gpuc.compiler.ops.step_chunks import sorted_block
    from gpuc.compiler.ops.unique import BLOCKS_FROM
    n = 5128
    assert n > BLOCKS_FROM and n % sorted_block(n) == 8
    rng = np.random.default_rng(len(dtype))
    model = _unique_model(dtype, n, idx_dtype)
    with gpuc.load(gpuc.compile(model)) as m:
        for hi in (1, 40, 100000):
            x = rng.integers(-hi if dtype != "uint8" else 0, hi, n).astype(dtype)
            if dtype == "float32":
                x = x * np.float32(0.5)
                x[rng.random(n) < 0.1] = -0.0                     # std::map: -0 == 0
            for out, ref in zip(m.run([x]), run_litert(model, [x])):
                _same(out, ref)
        if dtype == "float32":
            x[n // 2] = np.nan
            with pytest.raises(gpuc.errors.GpucError, match="'y'.*NaN"):
                m.run([x])


def test_unique_nan_fails_the_run():
    model = _unique_model("float32", 4, "int32")
    with gpuc.load(gpuc.compile(model)) as m:
        with pytest.raises(gpuc.errors.GpucError, match="'y'.*NaN"):
            m.run([np.array([1, np.nan, 2, 1], np.float32)])
    with pytest.raises(gpuc.errors.GpucError, match="UNIQUE.*1-D"):
        mb = ModelBuilder()
        x = mb.input("x", [2, 3], "int32")
        y, i = mb.tensor("y", [6], "int32"), mb.tensor("i", [6], "int32")
        mb.op("UNIQUE", [x], [y, i], idx_out_type="INT32")
        mb.output(y)
        mb.output(i)
        gpuc.compile(mb.finish())


FUNCTIONS = ["ADD", "MUL", "MINIMUM", "MAXIMUM", "ALL", "ANY"]


def _window_values(rng, shape, dtype):
    if dtype == "bool":
        return rng.random(shape) < 0.6
    if dtype in ("float32", "float64"):
        v = rng.standard_normal(shape).astype(dtype)
        v.reshape(-1)[::7] = 0
        v.reshape(-1)[3::11] = np.nan             # MAXIMUM / MINIMUM: a >= b ? a : b, as LiteRT
        return v
    return rng.integers(-3 if dtype != "uint8" else 0, 4, shape).astype(dtype)


def _reduce_window_model(dtype, shape, win, strides, dil, fn):
    from gpuc.runtime.cpu_reduce_window import plan
    out = plan({"reduce_function": FUNCTIONS.index(fn) + 1}, shape, [win, strides, dil])["out"]
    mb = ModelBuilder()
    x, i = mb.input("x", shape, dtype), mb.input("init", [], dtype)
    ins = [x, i] + [mb.const(n, np.array(v, np.int64)) for n, v in (("w", win), ("s", strides), ("d", dil))]
    y = mb.tensor("y", out, dtype)
    mb.op("REDUCE_WINDOW", ins, [y], reduce_function=fn)
    mb.output(y)
    return mb.finish()


@pytest.mark.parametrize("dtype", ["float32", "int32", "bool", "int8", "int16", "int64", "uint8", "float64"])
def test_reduce_window_against_litert(dtype):
    rng = np.random.default_rng(len(dtype))
    configs = [([5, 6], [2, 3], [1, 2], [1, 1]), ([2, 7, 4], [1, 3, 2], [1, 2, 1], [1, 2, 1]),
               ([9], [4], [3], [2]), ([3, 4], [5, 1], [1, 1], [1, 1])]        # (last: a window past the input)
    fns = FUNCTIONS if dtype in ("float32", "int32") else FUNCTIONS[::2] if len(dtype) % 2 else FUNCTIONS[1::2]
    for k, fn in enumerate(fns):
        shape, win, st, dil = configs[k % len(configs)]
        model = _reduce_window_model(dtype, shape, win, st, dil, fn)
        x, init = _window_values(rng, shape, dtype), _window_values(rng, [], dtype)
        with gpuc.load(gpuc.compile(model)) as m:
            _same(m.run([x, init])[0], run_litert(model, [x, init])[0])


@pytest.mark.parametrize("fn,dtype", [("ADD", "float32"), ("MAXIMUM", "float32"), ("MUL", "int32")])
def test_reduce_window_over_a_long_window_in_chunks(fn, dtype):
    """Windows of 70,000 positions (two outputs, overlapping): one dispatch a chunk of window positions
    (step_chunks), each resuming from the output the one before wrote, LiteRT's fold order kept. One dispatch was
    wrong on lavapipe (llvmpipe ends a shader's loops after 65,535 passes)."""
    rng = np.random.default_rng(len(fn))
    model = _reduce_window_model(dtype, [1, 70001], [1, 70000], [1, 1], [1, 1], fn)
    x = (rng.standard_normal([1, 70001]) * 3).astype(np.float32) if dtype == "float32" else \
        np.ones([1, 70001], np.int32)
    x[0, 69000] = 100 if fn == "MAXIMUM" else -1 if fn == "MUL" else x[0, 69000]   # (late in both windows)
    init = np.array(0.5 if dtype == "float32" else 1, dtype)
    with gpuc.load(gpuc.compile(model)) as m:
        _same(m.run([x, init])[0], run_litert(model, [x, init])[0])


def _shlo_window_model(dtype, shape, out, body_op, **attrs):
    from helpers.builder import with_subgraphs
    mb = ModelBuilder()
    x, i = mb.input("x", shape, dtype), mb.input("init", [], dtype)
    y = mb.tensor("y", out, dtype)
    mb.op("STABLEHLO_REDUCE_WINDOW", [x, i], [y], body_subgraph_index=1, **attrs)
    mb.output(y)
    body = ModelBuilder()
    a, b = body.input("a", [], dtype), body.input("b", [], dtype)
    c = body.tensor("c", [], dtype)
    body.op(body_op, [a, b], [c])
    body.output(c)
    return with_subgraphs(mb, body)


@pytest.mark.parametrize("body_op,dtype", [("STABLEHLO_ADD", "float32"), ("STABLEHLO_MAXIMUM", "float32"),
                                           ("STABLEHLO_MULTIPLY", "int32"), ("STABLEHLO_MINIMUM", "int8")])
def test_stablehlo_reduce_window_against_litert(body_op, dtype):
    """Base dilations, padding (negative: a crop) and window dilations, the function read from the body."""
    from gpuc.runtime.cpu_reduce_window import plan
    rng = np.random.default_rng(len(body_op))
    shape = [4, 5]
    attrs = dict(window_dimensions=[2, 3], window_strides=[2, 1], base_dilations=[2, 1], window_dilations=[1, 2],
                 padding=[1, 2, -1, 3])
    out = plan(dict(attrs, reduce_function=1), shape)["out"]
    model = _shlo_window_model(dtype, shape, out, body_op, **attrs)
    x, init = _window_values(rng, shape, dtype), _window_values(rng, [], dtype)
    with gpuc.load(gpuc.compile(model)) as m:
        _same(m.run([x, init])[0], run_litert(model, [x, init])[0])


def _els_model(n, dense, vshape, combiner):
    mb = ModelBuilder()
    ids, ind = mb.input("ids", [n], "int32"), mb.input("ind", [n, len(dense)], "int32")
    ds = mb.const("ds", np.array(dense, np.int32))
    w, v = mb.input("w", [n], "float32"), mb.input("v", vshape, "float32")
    y = mb.tensor("y", list(dense[:-1]) + list(vshape[1:]), "float32")
    mb.op("EMBEDDING_LOOKUP_SPARSE", [ids, ind, ds, w, v], [y], combiner=combiner)
    mb.output(y)
    return mb.finish()


@pytest.mark.parametrize("combiner", ["SUM", "MEAN", "SQRTN"])
def test_embedding_lookup_sparse_against_litert(combiner):
    """Random buckets: a row met in several separate runs is divided once per run, as LiteRT does."""
    rng = np.random.default_rng(len(combiner))
    for n, dense, vshape in ((7, [3, 4], [5, 3]), (9, [2, 2, 5], [6, 2, 2]), (4, [6], [3, 4])):
        model = _els_model(n, dense, vshape, combiner)
        with gpuc.load(gpuc.compile(model)) as m:
            for trial in range(2):
                ids = rng.integers(0, vshape[0], n).astype(np.int32)
                ind = np.stack([rng.integers(0, d, n) for d in dense], 1).astype(np.int32)
                if trial:
                    ind = ind[np.lexsort(ind.T[::-1])]          # sorted rows: one run per row
                w = rng.uniform(0.5, 2, n).astype(np.float32)
                v = rng.standard_normal(vshape).astype(np.float32)
                out, ref = m.run([ids, ind, w, v])[0], run_litert(model, [ids, ind, w, v])[0]
                assert out.shape == ref.shape
                np.testing.assert_allclose(out, ref, rtol=2e-6, atol=1e-6)


def test_embedding_lookup_sparse_bad_indices_fail_the_run():
    from gpuc.errors import RunError
    model = _els_model(3, [2, 4], [5, 2], "MEAN")
    ids, ind = np.array([1, 2, 3], np.int32), np.array([[0, 0], [1, 1], [1, 3]], np.int32)
    w, v = np.ones(3, np.float32), np.ones([5, 2], np.float32)
    with gpuc.load(gpuc.compile(model)) as m:
        m.run([ids, ind, w, v])
        with pytest.raises(RuntimeError):                       # LiteRT checks ids
            run_litert(model, [np.array([1, 5, 0], np.int32), ind, w, v])
        with pytest.raises(RunError, match="EMBEDDING_LOOKUP_SPARSE.*'ids'.*index 5"):
            m.run([np.array([1, 5, 0], np.int32), ind, w, v])
        with pytest.raises(RunError, match="EMBEDDING_LOOKUP_SPARSE.*'ind'.*index 2"):   # LiteRT 2.3 does not
            m.run([ids, np.array([[0, 0], [2, 1], [1, 3]], np.int32), w, v])


def _hashtable_model(n, keys, vshape, dtype, const_keys=True):
    mb = ModelBuilder()
    look = mb.input("look", [n], "int32")
    k = mb.const("keys", np.asarray(keys, np.int32)) if const_keys else mb.input("keys", [len(keys)], "int32")
    v = mb.input("v", vshape, dtype)
    y, h = mb.tensor("y", [n] + list(vshape[1:]), dtype), mb.tensor("h", [n], "uint8")
    mb.op("HASHTABLE_LOOKUP", [look, k, v], [y, h])
    mb.output(y)
    mb.output(h)
    return mb.finish()


@pytest.mark.parametrize("dtype,vshape", [("float32", [6, 3]), ("int32", [6]), ("int64", [6, 2]),
                                          ("uint8", [6, 4]), ("int16", [6, 2, 3])])
def test_hashtable_lookup_against_litert(dtype, vshape):
    """Sorted keys, unsorted keys (bsearch's answers) and extreme values (the comparator wraps)."""
    rng = np.random.default_rng(vshape[0] * len(vshape))
    for keys in (np.sort(rng.choice(50, 6, replace=False)), rng.choice(50, 6, replace=False),
                 np.array([-2 ** 31, -5, 0, 7, 2 ** 31 - 2, 2 ** 31 - 1])):
        model = _hashtable_model(9, keys, vshape, dtype)
        with gpuc.load(gpuc.compile(model)) as m:
            look = np.concatenate([rng.choice(keys, 5), rng.integers(-60, 60, 3), [2 ** 31 - 1]]).astype(np.int32)
            v = (rng.standard_normal(vshape) * 100).astype(dtype)
            for out, ref in zip(m.run([look, v]), run_litert(model, [look, v])):
                _same(out, ref)


@pytest.mark.parametrize("op", ["CONCAT_EMBEDDINGS", "CALL"])
def test_ops_litert_does_not_run_are_refused_as_litert_refuses(op):
    mb = ModelBuilder()
    a, b = mb.input("a", [2, 3]), mb.input("b", [2, 3])
    y = mb.tensor("y", [2, 6])
    mb.op(op, [a, b], [y])
    mb.output(y)
    model = mb.finish()
    with pytest.raises((RuntimeError, ValueError), match=op):
        run_litert(model, [np.ones([2, 3], np.float32)] * 2)
    with pytest.raises(gpuc.errors.GpucError, match=f"{op}.*LiteRT's interpreter does not run it"):
        gpuc.compile(model)


def _binary_model(op, dtype, shape):
    mb = ModelBuilder()
    a, b = mb.input("a", shape, dtype), mb.input("b", shape, dtype)
    y = mb.tensor("y", shape, dtype)
    mb.op(op, [a, b], [y])
    mb.output(y)
    return mb.finish()


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32"])
def test_stablehlo_integer_and_against_litert(dtype):
    rng = np.random.default_rng(len(dtype))
    info = np.iinfo(dtype)
    model = _binary_model("STABLEHLO_AND", dtype, [3, 7])
    a, b = (rng.integers(info.min, info.max, [3, 7], endpoint=True).astype(dtype) for _ in range(2))
    with gpuc.load(gpuc.compile(model)) as m:
        _same(m.run([a, b])[0], run_litert(model, [a, b])[0])


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32"])
def test_stablehlo_shift_left_against_litert(dtype):
    """Counts in [0, 31] (LiteRT's answer past that depends on its code path: see int_bitwise.py)."""
    rng = np.random.default_rng(len(dtype) + 1)
    info = np.iinfo(dtype)
    model = _binary_model("STABLEHLO_SHIFT_LEFT", dtype, [5, 9])
    a = rng.integers(info.min, info.max, [5, 9], endpoint=True).astype(dtype)
    c = rng.integers(0, 32, [5, 9]).astype(dtype)
    with gpuc.load(gpuc.compile(model)) as m:
        _same(m.run([a, c])[0], run_litert(model, [a, c])[0])
        out = m.run([a, np.full([5, 9], -1, dtype)])[0]
        assert not out.any()                            # counts outside [0, 31]: 0


GATHERS = [   # operand, dtype, indices shape, index dtype, attributes, output shape
    ([5, 4], "float32", [3, 1], "int32", dict(offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0],
                                              index_vector_dim=1, slice_sizes=[1, 4]), [3, 4]),
    ([4, 5, 6], "int8", [2, 3, 2], "int64", dict(offset_dims=[2, 3], collapsed_slice_dims=[0],
                                                 start_index_map=[0, 2], index_vector_dim=2,
                                                 slice_sizes=[1, 2, 3]), [2, 3, 2, 3]),
    ([3, 4], "int16", [2, 1], "int32", dict(offset_dims=[0], collapsed_slice_dims=[1], start_index_map=[1],
                                            index_vector_dim=1, slice_sizes=[3, 1]), [3, 2]),
    ([6, 2], "float64", [1, 4], "int32", dict(offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0],
                                              index_vector_dim=0, slice_sizes=[1, 2]), [4, 2]),
]


@pytest.mark.parametrize("k", range(len(GATHERS)))
def test_stablehlo_gather_against_litert(k):
    """Start indices past either end are clipped so the slice fits, as LiteRT does."""
    shape, dtype, ishape, idt, attrs, out = GATHERS[k]
    rng = np.random.default_rng(k)
    mb = ModelBuilder()
    x, i = mb.input("x", shape, dtype), mb.input("i", ishape, idt)
    y = mb.tensor("y", out, dtype)
    mb.op("STABLEHLO_GATHER", [x, i], [y], **attrs)
    mb.output(y)
    model = mb.finish()
    with gpuc.load(gpuc.compile(model)) as m:
        for trial in range(2):
            xv = (rng.standard_normal(shape) * 50).astype(dtype)
            iv = rng.integers(-2, max(shape) + 2, ishape).astype(idt)
            _same(m.run([xv, iv])[0], run_litert(model, [xv, iv])[0])


@pytest.mark.parametrize("dtype", ["float16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool"])
def test_stablehlo_gather_dtypes(dtype):
    rng = np.random.default_rng(7)
    mb = ModelBuilder()
    x, i = mb.input("x", [5, 3], dtype), mb.input("i", [4, 1], "int32")
    y = mb.tensor("y", [4, 3], dtype)
    mb.op("STABLEHLO_GATHER", [x, i], [y], offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0],
          index_vector_dim=1, slice_sizes=[1, 3])
    mb.output(y)
    model = mb.finish()
    xv = (rng.standard_normal([5, 3]) * 50).astype(dtype) if dtype != "bool" else rng.random([5, 3]) < 0.5
    iv = rng.integers(-1, 7, [4, 1]).astype(np.int32)
    with gpuc.load(gpuc.compile(model)) as m:
        _same(m.run([xv, iv])[0], run_litert(model, [xv, iv])[0])


def _scatter_model(shape, dtype, ishape, idt, ushape, body, **attrs):
    from helpers.builder import with_subgraphs
    mb = ModelBuilder()
    x, i, u = mb.input("x", shape, dtype), mb.input("i", ishape, idt), mb.input("u", ushape, dtype)
    y = mb.tensor("y", shape, dtype)
    mb.op("STABLEHLO_SCATTER", [x, i, u], [y], update_computation_subgraph_index=1, **attrs)
    mb.output(y)
    comp = ModelBuilder()
    a, b = comp.input("a", [], dtype), comp.input("b", [], dtype)
    if body:
        c = comp.tensor("c", [], dtype)
        comp.op(body, [a, b], [c])
        comp.output(c)
    else:
        comp.output(b)
    return with_subgraphs(mb, comp)


@pytest.mark.parametrize("body,dtype", [(None, "float32"), ("STABLEHLO_ADD", "float32"), ("STABLEHLO_MULTIPLY", "int32"),
                                        ("STABLEHLO_MAXIMUM", "float32"), ("STABLEHLO_MINIMUM", "int32")])
def test_stablehlo_scatter_against_litert(body, dtype):
    """Repeated targets combine in update order; targets past a dim are skipped, as LiteRT skips them."""
    rng = np.random.default_rng(len(body or "") + len(dtype))
    attrs = dict(update_window_dims=[1], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
                 index_vector_dim=1)
    model = _scatter_model([5, 3], dtype, [6, 1], "int32", [6, 3], body, **attrs)
    with gpuc.load(gpuc.compile(model)) as m:
        for trial in range(2):
            x = (rng.standard_normal([5, 3]) * 4).astype(dtype)
            i = rng.integers(0, 7, [6, 1]).astype(np.int32)            # 5, 6: skipped
            u = (rng.standard_normal([6, 3]) * 4).astype(dtype)
            _same(m.run([x, i, u])[0], run_litert(model, [x, i, u])[0])
    attrs = dict(update_window_dims=[2], inserted_window_dims=[0, 1], scatter_dims_to_operand_dims=[0, 1],
                 index_vector_dim=2)                                     # 2-D indices [2, 2, 2], int64
    model = _scatter_model([3, 4, 2], dtype, [2, 2, 2], "int64", [2, 2, 2], body, **attrs)
    with gpuc.load(gpuc.compile(model)) as m:
        x = (rng.standard_normal([3, 4, 2]) * 4).astype(dtype)
        i = rng.integers(0, 4, [2, 2, 2]).astype(np.int64)
        u = (rng.standard_normal([2, 2, 2]) * 4).astype(dtype)
        _same(m.run([x, i, u])[0], run_litert(model, [x, i, u])[0])


@pytest.mark.parametrize("body", [None, "STABLEHLO_ADD"])
def test_stablehlo_scatter_many_updates_in_chunks(body):
    """70,000 updates into 4 targets: one dispatch a chunk of updates (step_chunks), each resuming from the output
    the one before wrote: float sums in LiteRT's order, the last replacement wins. One dispatch was wrong on
    lavapipe (llvmpipe ends a shader's loops after 65,535 passes)."""
    rng = np.random.default_rng(8)
    n = 70000
    model = _scatter_model([4], "float32", [n, 1], "int32", [n], body, update_window_dims=[], inserted_window_dims=[0],
                           scatter_dims_to_operand_dims=[0], index_vector_dim=1)
    x = rng.standard_normal(4).astype(np.float32)
    i, u = rng.integers(0, 5, (n, 1)).astype(np.int32), rng.integers(-3, 4, n).astype(np.float32) * np.float32(1.1)
    with gpuc.load(gpuc.compile(model)) as m:
        _same(m.run([x, i, u])[0], run_litert(model, [x, i, u])[0])


def test_stablehlo_scatter_negative_indices():
    """LiteRT 2.3 skips a target with a negative component (measured), as one past a dim."""
    attrs = dict(update_window_dims=[2], inserted_window_dims=[0, 1], scatter_dims_to_operand_dims=[0, 1],
                 index_vector_dim=2)
    model = _scatter_model([3, 4, 2], "float32", [1, 1, 2], "int32", [1, 1, 2], "STABLEHLO_ADD", **attrs)
    x, u = np.arange(24, dtype=np.float32).reshape(3, 4, 2), np.array([[[100, 200]]], np.float32)
    with gpuc.load(gpuc.compile(model)) as m:
        for i in ([1, -1], [-1, 2], [1, 0]):
            i = np.array([[i]], np.int32)
            _same(m.run([x, i, u])[0], run_litert(model, [x, i, u])[0])


@pytest.mark.parametrize("algorithm,nstate,dtype,shape", [("DEFAULT", 2, "int32", [3, 5]), ("PHILOX", 3, "uint64", [7]),
                                                          ("THREEFRY", 2, "uint32", [2, 3]),
                                                          ("THREEFRY", 2, "int64", [5])])
def test_stablehlo_rng_bit_generator_against_litert(algorithm, nstate, dtype, shape):
    """Random states, a counter about to carry into its high word; the new state too."""
    rng = np.random.default_rng(nstate + len(shape))
    mb = ModelBuilder()
    s = mb.input("s", [nstate], "uint64")
    k, y = mb.tensor("k", [nstate], "uint64"), mb.tensor("y", shape, dtype)
    mb.op("STABLEHLO_RNG_BIT_GENERATOR", [s], [k, y], algorithm=["DEFAULT", "PHILOX", "THREEFRY"].index(algorithm))
    mb.output(k)
    mb.output(y)
    model = mb.finish()
    with gpuc.load(gpuc.compile(model)) as m:
        for state in (rng.integers(0, 2 ** 63, nstate, dtype=np.uint64) * np.uint64(2) + np.uint64(1),
                      np.array([7, 2 ** 32 - 2] + [5] * (nstate - 2), np.uint64)):
            for out, ref in zip(m.run([state]), run_litert(model, [state])):
                _same(out, ref)
