"""Data-movement ops (compiler/ops/movement.py, compiler/ops/gather.py) against LiteRT, exactly.

Every case is a one-op model written with tests/helpers/builder.py and run by LiteRT's builtin CPU
kernels; gpuc's outputs must be bit-identical (data movement does no arithmetic).  Configurations
LiteRT rejects (rank-5 SPACE_TO_BATCH_ND, non-contiguous REVERSE_V2 axes, out-of-range indices)
are compared with numpy's TF semantics instead, or must be reported unsupported by gpuc.
"""
import random
import zlib

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.compiler.ops.strided_slice import strided_slice_dims  # noqa: E402
from gpuc.errors import RunError, UnsupportedError  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import run_litert  # noqa: E402

F, I = "float32", "int32"


class In:
    """A runtime input; `data` defaults to seeded random values of the dtype."""

    def __init__(self, shape, dtype=F, data=None):
        self.shape, self.dtype, self.data = list(shape), dtype, data

    def value(self, seed):
        if self.data is not None:
            return np.asarray(self.data, self.dtype).reshape(self.shape)
        rng = np.random.default_rng(seed)
        if self.dtype == F:
            return rng.uniform(-10, 10, self.shape).astype(np.float32)
        return rng.integers(-1000, 1000, self.shape).astype(self.dtype)


def build(op, ins, outs, seed=0, **options):
    """ins: In -> runtime input, ndarray -> constant; outs: [(shape, dtype)].  -> (model, feeds)"""
    mb, ids, feeds = ModelBuilder(), [], []
    for k, a in enumerate(ins):
        if isinstance(a, In):
            ids.append(mb.input(f"x{k}", a.shape, a.dtype))
            feeds.append(a.value(seed + k))
        else:
            ids.append(mb.const(f"c{k}", np.asarray(a)))
    ys = [mb.tensor(f"y{k}", s, d) for k, (s, d) in enumerate(outs)]
    mb.op(op, ids, ys, **options)
    for y in ys:
        mb.output(y)
    return mb.finish(), feeds


@pytest.fixture(scope="module")
def gpu():
    from gpuc.runtime.device import Device
    dev = Device()
    yield dev
    dev.close()


def run_gpu(dev, model, feeds):
    m = gpuc.load(bytes(gpuc.compile(model)), device=dev)
    try:
        return m.run([f.copy() for f in feeds])
    finally:
        m.close()


def assert_same(outs, refs):
    assert len(outs) == len(refs)
    for k, (o, r) in enumerate(zip(outs, refs)):
        assert o.dtype == r.dtype and o.shape == r.shape, f"output {k}: {o.dtype}{o.shape} vs {r.dtype}{r.shape}"
        np.testing.assert_array_equal(o, r, err_msg=f"output {k}")


def i32(*v):
    return np.array(v, np.int32)


def i64(*v):
    return np.array(v, np.int64)


# name -> (op, inputs, outputs [(shape, dtype)], options)
CASES = {}


def case(name, op, ins, outs, **options):
    assert name not in CASES, name
    CASES[name] = (op, ins, outs, options)


for dt in (F, I):
    case(f"transpose-2d-{dt}", "TRANSPOSE", [In([2, 3], dt), i32(1, 0)], [([3, 2], dt)])
    case(f"transpose-3d-{dt}", "TRANSPOSE", [In([2, 3, 4], dt), i32(2, 0, 1)], [([4, 2, 3], dt)])
    case(f"slice-4d-{dt}", "SLICE", [In([2, 3, 4, 5], dt), i32(0, 1, 1, 2), i32(-1, 2, 3, 2)], [([2, 2, 3, 2], dt)])
    case(f"strided-basic-{dt}", "STRIDED_SLICE", [In([4, 5], dt), i32(1, 0), i32(3, 5), i32(1, 2)], [([2, 3], dt)])
    case(f"gather-axis0-{dt}", "GATHER", [In([4, 3], dt), i32(2, 0, 3, 3)], [([4, 3], dt)])
    case(f"gather_nd-{dt}", "GATHER_ND", [In([2, 3, 4], dt), np.array([[1, 2], [0, 0], [1, 0]], np.int32)],
         [([3, 4], dt)])
    case(f"embedding-{dt}", "EMBEDDING_LOOKUP", [i32(2, 0, 2), In([3, 4], dt)], [([3, 4], dt)])
    case(f"split-axis1-{dt}", "SPLIT", [i32(1), In([2, 6, 3], dt)], [([2, 2, 3], dt)] * 3, num_splits=3)
    case(f"split_v-{dt}", "SPLIT_V", [In([2, 6], dt), i32(1, -1, 2), i32(-1)], [([2, 1], dt), ([2, 3], dt), ([2, 2], dt)],
         num_splits=3)
    case(f"pack-axis1-{dt}", "PACK", [In([2, 3], dt)] * 3, [([2, 3, 3], dt)], values_count=3, axis=1)
    case(f"unpack-axis0-{dt}", "UNPACK", [In([3, 2, 2], dt)], [([2, 2], dt)] * 3, num=3, axis=0)
    case(f"depth_to_space-b2-{dt}", "DEPTH_TO_SPACE", [In([1, 2, 3, 8], dt)], [([1, 4, 6, 2], dt)], block_size=2)
    case(f"space_to_depth-b2-{dt}", "SPACE_TO_DEPTH", [In([1, 4, 6, 3], dt)], [([1, 2, 3, 12], dt)], block_size=2)
    case(f"space_to_batch-pad-{dt}", "SPACE_TO_BATCH_ND", [In([1, 4, 3, 2], dt), i32(2, 2), np.array([[1, 1], [1, 0]], np.int32)],
         [([4, 3, 2, 2], dt)])
    case(f"batch_to_space-crop-{dt}", "BATCH_TO_SPACE_ND", [In([4, 2, 3, 2], dt), i32(2, 2), np.array([[1, 0], [0, 2]], np.int32)],
         [([1, 3, 4, 2], dt)])
    case(f"mirror_pad-reflect-{dt}", "MIRROR_PAD", [In([3, 4], dt), np.array([[2, 1], [3, 3]], np.int32)], [([6, 10], dt)],
         mode="REFLECT")
    case(f"mirror_pad-symmetric-{dt}", "MIRROR_PAD", [In([3, 4], dt), np.array([[3, 0], [1, 4]], np.int32)], [([6, 9], dt)],
         mode="SYMMETRIC")
    case(f"reverse-axis1-{dt}", "REVERSE_V2", [In([2, 3, 4], dt), i32(1)], [([2, 3, 4], dt)])

# TRANSPOSE
case("transpose-4d-nhwc-nchw", "TRANSPOSE", [In([2, 3, 4, 5]), i32(0, 3, 1, 2)], [([2, 5, 3, 4], F)])
case("transpose-5d", "TRANSPOSE", [In([2, 3, 1, 4, 2]), i32(4, 2, 0, 3, 1)], [([2, 1, 2, 4, 3], F)])
case("transpose-6d", "TRANSPOSE", [In([2, 1, 3, 2, 1, 2]), i32(5, 3, 1, 0, 2, 4)], [([2, 2, 1, 2, 3, 1], F)])
case("transpose-negative-perm", "TRANSPOSE", [In([2, 3, 4]), i32(-1, 0, -2)], [([4, 2, 3], F)])
case("transpose-int64-perm", "TRANSPOSE", [In([3, 5]), i64(1, 0)], [([5, 3], F)])
case("transpose-identity", "TRANSPOSE", [In([3, 5]), i32(0, 1)], [([3, 5], F)])
# SLICE
case("slice-size-minus1", "SLICE", [In([4, 5]), i32(1, 2), i32(2, -1)], [([2, 3], F)])
case("slice-int64", "SLICE", [In([4, 5]), i64(0, 3), i64(-1, 1)], [([4, 1], F)])
case("slice-6d", "SLICE", [In([2, 3, 2, 3, 2, 3]), i32(1, 0, 1, 1, 0, 2), i32(1, 3, 1, -1, 2, 1)], [([1, 3, 1, 2, 2, 1], F)])
# STRIDED_SLICE (LiteRT: int32 begin/end/strides, rank <= 5)
SS = [  # name, shape, begin, end, strides, masks (begin, end, ellipsis, new_axis, shrink), offset
    ("negative-strides", [5, 6], [-1, 4], [0, -7], [-1, -2], (0, 0, 0, 0, 0), False),
    ("reverse-all-masks", [3, 4, 2], [0, 0, 0], [0, 0, 0], [-1, -1, -1], (7, 7, 0, 0, 0), False),
    ("begin-end-masks", [5, 6], [3, 2], [1, 5], [1, 2], (1, 2, 0, 0, 0), False),
    ("clamped-out-of-range", [5, 6], [-9, 1], [20, 99], [2, 3], (0, 0, 0, 0, 0), False),
    ("lstm-last-step", [1, 30, 32], [0, -1, 0], [0, 0, 0], [1, 1, 1], (5, 5, 0, 0, 2), False),
    ("shrink-two", [3, 4, 5], [1, 0, -2], [2, 4, -1], [1, 1, 1], (0, 0, 0, 0, 5), False),
    ("ellipsis-first", [2, 3, 4, 5], [0, 1], [0, 3], [1, 1], (0, 0, 1, 0, 0), False),
    ("ellipsis-middle", [2, 3, 4, 5], [1, 0, -1], [2, 0, -6], [1, 1, -2], (0, 0, 2, 0, 1), False),
    ("new-axis", [3, 4], [0, 1, 0], [0, 3, 0], [1, 1, -1], (0, 0, 0, 1, 0), False),
    ("new-axis-ellipsis-shrink", [2, 3, 4], [0, 0, 2], [0, 0, 3], [1, 1, 1], (0, 0, 2, 1, 4), False),
    ("offset", [4, 6], [1, 2], [2, 3], [1, 1], (0, 0, 0, 0, 0), True),
    ("offset-strided", [4, 6], [0, 1], [4, 4], [2, 2], (0, 0, 0, 0, 0), True),
    ("fewer-specs", [3, 4, 5], [1], [3], [1], (0, 0, 0, 0, 0), False),
    ("5d", [2, 3, 2, 4, 3], [1, 0, 0, 3, 0], [2, 3, 2, 0, 3], [1, 2, 1, -2, 2], (0, 0, 0, 0, 1), False),
]


def _ss_case(name, shape, b, e, s, masks, offset, dt=F):
    plan, out = strided_slice_dims(shape, b, e, s, *masks, offset)
    bm, em, el, na, sm = masks
    case(f"strided-{name}-{dt}", "STRIDED_SLICE", [In(shape, dt), i32(*b), i32(*e), i32(*s)], [(out, dt)],
         begin_mask=bm, end_mask=em, ellipsis_mask=el, new_axis_mask=na, shrink_axis_mask=sm, offset=offset)


for c in SS:
    _ss_case(*c)
_ss_case(*SS[1], dt=I)


def _fuzz_strided(count, seed=1234):
    """Random configurations gpuc accepts (it rejects those LiteRT reads garbage for)."""
    rng, made = random.Random(seed), 0
    while made < count:
        r = rng.randint(1, 4)
        shape = [rng.randint(1, 5) for _ in range(r)]
        n = rng.randint(1, r + 1)
        b, e = [rng.randint(-6, 6) for _ in range(n)], [rng.randint(-6, 6) for _ in range(n)]
        s = [rng.choice([1, 2, -1, -2, 3]) for _ in range(n)]
        bits = [sum(1 << i for i in range(n) if rng.random() < p) for p in (0.3, 0.3, 0, 0.15, 0.2)]
        bits[2] = (1 << rng.randrange(n)) if rng.random() < 0.25 else 0
        try:
            _, out = strided_slice_dims(shape, b, e, s, *bits, False)
        except ValueError:
            continue
        if 0 in out:
            continue
        _ss_case(f"fuzz{made}", shape, b, e, s, tuple(bits), False)
        made += 1


_fuzz_strided(16)
# GATHER
case("gather-axis1-runtime-2d-indices", "GATHER", [In([3, 5, 2]), In([2, 2], I, [4, 0, 1, 4])], [([3, 2, 2, 2], F)], axis=1)
case("gather-axis-negative", "GATHER", [In([3, 5]), i32(1, 4, 0)], [([3, 3], F)], axis=-1)
case("gather-batch_dims1", "GATHER", [In([2, 4, 3]), np.array([[1, 3], [0, 0]], np.int32)], [([2, 2, 3], F)],
     axis=1, batch_dims=1)
case("gather-batch_dims-negative", "GATHER", [In([2, 3, 4, 2]), In([2, 3, 2], I, np.arange(12) % 4)],
     [([2, 3, 2, 2], F)], axis=2, batch_dims=-1)
case("gather-batch_dims1-axis2", "GATHER", [In([2, 3, 4]), np.array([[2], [0]], np.int32)], [([2, 3, 1], F)],
     axis=2, batch_dims=1)
case("gather-int64-runtime", "GATHER", [In([5, 3]), In([4], "int64", [4, 0, 2, 2])], [([4, 3], F)])
case("gather-int64-const", "GATHER", [In([5, 3]), i64(3, 1)], [([2, 3], F)])
case("gather-scalar-index", "GATHER", [In([5, 3]), np.array(2, np.int32)], [([5], F)], axis=1)
case("gather-const-params-runtime-ids", "GATHER", [np.arange(40, dtype=np.float32).reshape(10, 4), In([1, 6], I, [9, 0, 3, 3, 7, 1])],
     [([1, 6, 4], F)])
# GATHER_ND
case("gather_nd-full-index", "GATHER_ND", [In([4, 3]), np.array([[0, 1], [3, 2], [2, 0]], np.int32)], [([3], F)])
case("gather_nd-runtime", "GATHER_ND", [In([3, 4, 2]), In([2, 2, 1], I, [2, 0, 1, 1])], [([2, 2, 4, 2], F)])
case("gather_nd-int64-runtime", "GATHER_ND", [In([3, 4]), In([2, 2], "int64", [2, 3, 0, 1])], [([2], F)])
case("gather_nd-int64-const", "GATHER_ND", [In([3, 4]), np.array([[1], [2]], np.int64)], [([2, 4], F)])
# EMBEDDING_LOOKUP
case("embedding-runtime-3d", "EMBEDDING_LOOKUP", [In([4], I, [1, 0, 2, 1]), In([3, 2, 2])], [([4, 2, 2], F)])
case("embedding-const-table", "EMBEDDING_LOOKUP", [In([3], I, [4, 0, 4]), np.arange(10, dtype=np.float32).reshape(5, 2)],
     [([3, 2], F)])
# SPLIT / SPLIT_V / PACK / UNPACK
case("split-axis0", "SPLIT", [i32(0), In([4, 3])], [([2, 3], F)] * 2, num_splits=2)
case("split-axis-negative", "SPLIT", [i32(-1), In([2, 3, 4])], [([2, 3, 1], F)] * 4, num_splits=4)
case("split-one", "SPLIT", [i32(1), In([2, 3])], [([2, 3], F)], num_splits=1)
case("split_v-int64-sizes", "SPLIT_V", [In([5, 2, 2]), i64(2, 3), i32(0)], [([2, 2, 2], F), ([3, 2, 2], F)], num_splits=2)
case("split_v-minus1-first", "SPLIT_V", [In([2, 7]), i32(-1, 2, 1), i32(1)], [([2, 4], F), ([2, 2], F), ([2, 1], F)],
     num_splits=3)
case("pack-axis0", "PACK", [In([3, 2])] * 2, [([2, 3, 2], F)], values_count=2, axis=0)
case("pack-axis-negative", "PACK", [In([3, 2])] * 4, [([3, 2, 4], F)], values_count=4, axis=-1)
case("pack-1d-last-axis", "PACK", [In([4])] * 3, [([4, 3], F)], values_count=3, axis=1)
case("unpack-axis-negative", "UNPACK", [In([2, 3, 4])], [([2, 3], F)] * 4, num=4, axis=-1)
case("unpack-axis1", "UNPACK", [In([2, 3, 4])], [([2, 4], F)] * 3, num=3, axis=1)
case("unpack-to-scalars", "UNPACK", [In([3])], [([], F)] * 3, num=3, axis=0)
# DEPTH_TO_SPACE / SPACE_TO_DEPTH
case("depth_to_space-b3-batch2", "DEPTH_TO_SPACE", [In([2, 2, 1, 18])], [([2, 6, 3, 2], F)], block_size=3)
case("space_to_depth-b3-batch2", "SPACE_TO_DEPTH", [In([2, 3, 6, 2])], [([2, 1, 2, 18], F)], block_size=3)
# SPACE_TO_BATCH_ND / BATCH_TO_SPACE_ND (LiteRT: 3-D or 4-D input)
case("space_to_batch-no-pad", "SPACE_TO_BATCH_ND", [In([2, 4, 6, 3]), i32(2, 3), np.zeros((2, 2), np.int32)],
     [([12, 2, 2, 3], F)])
case("space_to_batch-3d", "SPACE_TO_BATCH_ND", [In([2, 5, 2]), i32(3), np.array([[2, 2]], np.int32)], [([6, 3, 2], F)])
case("space_to_batch-pad-width-only", "SPACE_TO_BATCH_ND", [In([1, 2, 4, 1]), i32(2, 2), np.array([[0, 0], [2, 2]], np.int32)],
     [([4, 1, 4, 1], F)])
case("batch_to_space-no-crop", "BATCH_TO_SPACE_ND", [In([12, 2, 2, 3]), i32(2, 3), np.zeros((2, 2), np.int32)],
     [([2, 4, 6, 3], F)])
case("batch_to_space-3d", "BATCH_TO_SPACE_ND", [In([6, 3, 2]), i32(3), np.array([[2, 2]], np.int32)], [([2, 5, 2], F)])
# MIRROR_PAD
case("mirror_pad-1d-reflect-max", "MIRROR_PAD", [In([4]), i32(3, 3).reshape(1, 2)], [([10], F)], mode="REFLECT")
case("mirror_pad-4d-symmetric", "MIRROR_PAD", [In([1, 3, 3, 2]), np.array([[0, 0], [3, 2], [1, 3], [0, 0]], np.int32)],
     [([1, 8, 7, 2], F)], mode="SYMMETRIC")
case("mirror_pad-int64-paddings", "MIRROR_PAD", [In([2, 3]), np.array([[1, 1], [2, 0]], np.int64)], [([4, 5], F)],
     mode="REFLECT")
case("mirror_pad-zero-pads", "MIRROR_PAD", [In([2, 3]), np.zeros((2, 2), np.int32)], [([2, 3], F)], mode="REFLECT")
# REVERSE_V2 (LiteRT: int32 axes, contiguous)
case("reverse-axis0", "REVERSE_V2", [In([3, 4]), i32(0)], [([3, 4], F)])
case("reverse-axis-negative", "REVERSE_V2", [In([2, 3, 4]), i32(-1)], [([2, 3, 4], F)])
case("reverse-two-axes", "REVERSE_V2", [In([2, 3, 4, 2]), i32(1, 2)], [([2, 3, 4, 2], F)])


@pytest.mark.parametrize("name", list(CASES))
def test_movement(gpu, name):
    op, ins, outs, options = CASES[name]
    model, feeds = build(op, ins, outs, seed=zlib.crc32(name.encode()) % 1000, **options)
    assert_same(run_gpu(gpu, model, feeds), run_litert(model, feeds))


# --- configurations LiteRT rejects but TF defines: numpy reference -----------------------------------

def np_space_to_batch(x, block, pads):
    m = len(block)
    x = np.pad(x, [(0, 0)] + list(pads) + [(0, 0)] * (x.ndim - 1 - m))
    b, sp, rest = x.shape[0], x.shape[1:1 + m], x.shape[1 + m:]
    shape = [b] + [v for s, k in zip(sp, block) for v in (s // k, k)] + list(rest)
    perm = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)] + list(range(1 + 2 * m, len(shape)))
    return x.reshape(shape).transpose(perm).reshape([b * int(np.prod(block))] + [s // k for s, k in zip(sp, block)] + list(rest))


def test_space_to_batch_and_back_rank5(gpu):
    """Rank 5 with a 3-D block (LiteRT allows only 3-D/4-D inputs): against numpy, then the inverse."""
    x = In([2, 4, 3, 2, 3]).value(7)
    block, pads = [2, 3, 1], [(1, 1), (0, 3), (0, 1)]
    want = np_space_to_batch(x, block, pads)
    model, _ = build("SPACE_TO_BATCH_ND", [In(x.shape), i32(*block), np.array(pads, np.int32)], [(want.shape, F)])
    assert_same(run_gpu(gpu, model, [x]), [want])
    model, _ = build("BATCH_TO_SPACE_ND", [In(want.shape), i32(*block), np.array(pads, np.int32)], [(x.shape, F)])
    assert_same(run_gpu(gpu, model, [want]), [x])


def test_reverse_non_contiguous_axes(gpu):
    x = In([2, 3, 4], I).value(3)
    model, _ = build("REVERSE_V2", [In(x.shape, I), i32(0, 2)], [(x.shape, I)])
    assert_same(run_gpu(gpu, model, [x]), [x[::-1, :, ::-1]])


@pytest.mark.parametrize("op,params,idx,axis,out", [
    ("GATHER", [4, 3], [0, 4, -1, 2], 0, [4, 3]),
    ("GATHER", [3, 4], [[1, 7]], 1, [3, 1, 2]),
    ("GATHER_ND", [3, 4], [[0, 1], [3, 0], [2, -1], [2, 3]], None, [4]),
    ("EMBEDDING_LOOKUP", [3, 2], [2, 3, -5], None, [3, 2]),
])
@pytest.mark.parametrize("idx_dtype", ["int32", "int64"])
def test_runtime_index_out_of_range_fails_the_run(gpu, op, params, idx, axis, out, idx_dtype):
    """LiteRT fails the Invoke on such an index; so does gpuc's run, naming the op (never reading out of
    bounds); tests/ops/test_index_errors.py compares many more with LiteRT."""
    if op == "EMBEDDING_LOOKUP" and idx_dtype == "int64":
        pytest.skip("EMBEDDING_LOOKUP takes int32 ids only")
    x = In(params).value(1)
    ids = np.array(idx, idx_dtype)
    if idx_dtype == "int64":
        ids[ids < 0] -= 1 << 40          # garbage high words must not alias a valid index either
    ins = [In(ids.shape, idx_dtype, ids), In(params)] if op == "EMBEDDING_LOOKUP" else [In(params), In(ids.shape, idx_dtype, ids)]
    model, _ = build(op, ins, [(out, F)], **({} if axis is None else {"axis": axis}))
    feeds = [ids, x] if op == "EMBEDDING_LOOKUP" else [x, ids]
    with pytest.raises(RunError, match=f"{op} \\(operator #0, indices 'x[01]'\\): index -?[0-9]+ out of range"):
        run_gpu(gpu, model, feeds)


# --- reported unsupported (LiteRT fails, or reads garbage) -------------------------------------------

@pytest.mark.parametrize("op,ins,outs,options,reason", [
    ("GATHER", [In([4, 3]), i32(0, 4)], [([2, 3], F)], {}, "out of range"),
    ("GATHER", [In([4, 3]), i32(-1)], [([1, 3], F)], {}, "out of range"),
    ("GATHER_ND", [In([4, 3]), np.array([[0, 3]], np.int32)], [([1], F)], {}, "out of range"),
    ("EMBEDDING_LOOKUP", [i32(3), In([3, 2])], [([1, 2], F)], {}, "out of range"),
    ("STRIDED_SLICE", [In([4]), i32(2), i32(3), i32(-1)], [([], F)], {"shrink_axis_mask": 1}, "shrink_axis"),
    ("STRIDED_SLICE", [In([4]), i32(7), i32(8), i32(1)], [([], F)], {"shrink_axis_mask": 1}, "shrink_axis"),
    ("STRIDED_SLICE", [In([4]), i32(2), i32(5), i32(1)], [([5], F)], {"offset": True}, "offset slice"),
    ("STRIDED_SLICE", [In([4]), i32(0), i32(4), i32(0)], [([4], F)], {}, "non-zero"),
    ("STRIDED_SLICE", [In([4, 4]), i32(0, 0), i32(2, 2), i32(1, 1)], [([3, 2], F)], {}, "shape"),
    ("SLICE", [In([4]), i32(-1), i32(1)], [([1], F)], {}, "invalid begin"),
    ("SLICE", [In([4]), i32(2), i32(3)], [([3], F)], {}, "invalid size"),
    ("MIRROR_PAD", [In([3]), i32(3, 0).reshape(1, 2)], [([6], F)], {"mode": "REFLECT"}, "exceed"),
    ("MIRROR_PAD", [In([3]), i32(0, 4).reshape(1, 2)], [([7], F)], {"mode": "SYMMETRIC"}, "exceed"),
    ("TRANSPOSE", [In([2, 3]), i32(1, 1)], [([3, 3], F)], {}, "permutation"),
    ("SPLIT", [i32(1), In([2, 3])], [([2, 1], F)] * 2, {"num_splits": 2}, "divide"),
    ("SPLIT_V", [In([2, 6]), i32(-1, -1), i32(1)], [([2, 3], F)] * 2, {"num_splits": 2}, "size_splits"),
    ("DEPTH_TO_SPACE", [In([1, 2, 2, 6])], [([1, 4, 4, 1], F)], {"block_size": 2}, "divisible"),
    ("SPACE_TO_BATCH_ND", [In([1, 3, 3, 1]), i32(2, 2), np.zeros((2, 2), np.int32)], [([4, 1, 1, 1], F)], {},
     "divisible"),
    ("GATHER", [In([4, 3], I), i32(1)], [([1, 3], F)], {}, "same dtype"),
    ("GATHER", [In([4, 3]), In([2], "int16")], [([2, 3], F)], {}, "int16"),
])
def test_unsupported(op, ins, outs, options, reason):
    model, _ = build(op, ins, outs, **options)
    with pytest.raises(UnsupportedError, match=reason):
        gpuc.compile(model)
