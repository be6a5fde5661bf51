"""Inputs as strict as LiteRT's (issue 26, build 5; rows 10 and 11): a typed value whose dtype is not the
input's is refused, naming the input and both dtypes; cast=True converts only values that fit (integer
ranges checked, floats into integers only when integral, no wrap, no finite overflow to inf).  Python
lists and scalars (no dtype) convert like np.asarray(x, input dtype), under the same checks."""
import numpy as np
import pytest

import gpuc
from gpuc.errors import GpucError
from helpers.builder import ModelBuilder
from helpers.data import rnd

pytest.importorskip("vulkan")

DTYPES = ["float32", "int32", "uint8", "int8", "int64", "bool", "int16"]


def passthrough_model() -> bytes:
    """One [2, 3] input per dtype in DTYPES, each reshaped to a [6] output."""
    mb = ModelBuilder()
    for d in DTYPES:
        x = mb.input(f"x_{d}", [2, 3], d)
        y = mb.tensor(f"y_{d}", [6], d)
        mb.op("RESHAPE", [x, mb.const(f"s_{d}", np.array([6], np.int32))], [y])
        mb.output(y)
    return mb.finish()


def gather_model() -> bytes:
    """Rows of a constant [4, 2] table picked by an int32 index input."""
    mb = ModelBuilder()
    idx = mb.input("idx", [1], "int32")
    table = mb.const("table", np.arange(8, dtype=np.float32).reshape(4, 2))
    y = mb.tensor("rows", [1, 2])
    mb.op("GATHER", [table, idx], [y], axis=0)
    mb.output(y)
    return mb.finish()


def scale_model() -> bytes:
    """A float32 "image" times 2."""
    mb = ModelBuilder()
    x = mb.input("image", [1, 4, 4, 3])
    y = mb.tensor("y", [1, 4, 4, 3])
    mb.op("MUL", [x, mb.const("two", np.array([2.0], np.float32))], [y])
    mb.output(y)
    return mb.finish()


@pytest.fixture(scope="module")
def device():
    d = gpuc.open_device()
    yield d
    d.close()


@pytest.fixture(scope="module")
def passthrough(device):
    data = passthrough_model()
    with gpuc.load(gpuc.compile(data, cache=False), device=device) as m:
        yield data, m


@pytest.fixture(scope="module")
def gather(device):
    with gpuc.load(gpuc.compile(gather_model(), cache=False), device=device) as m:
        yield m


@pytest.fixture(scope="module")
def scale(device):
    with gpuc.load(gpuc.compile(scale_model(), cache=False), device=device) as m:
        yield m


# -- row 10: an int64 with high bits set into an int32 index -------------------------------------
def test_int64_into_int32_index_is_refused_not_wrapped(gather):
    with pytest.raises(GpucError, match=r"input #0 'idx': expected dtype int32, got int64"):
        gather.run([np.array([2**32 + 1], np.int64)])


def test_cast_refuses_an_int64_that_does_not_fit_naming_index_and_value(gather):
    with pytest.raises(GpucError, match=r"input #0 'idx'.*\[0\] = 4294967297.*int32"):
        gather.run([np.array([2**32 + 1], np.int64)], cast=True)


def test_cast_converts_an_int64_that_fits(gather):
    np.testing.assert_array_equal(gather.run([np.array([1], np.int64)], cast=True)[0], [[2.0, 3.0]])
    np.testing.assert_array_equal(gather.run_async({"idx": np.array([3], np.int64)}, cast=True).wait()[0],
                                  [[6.0, 7.0]])


# -- row 11: a uint8 image into a float32 model ---------------------------------------------------
def test_uint8_image_into_float32_is_refused(scale):
    img = np.random.default_rng(0).integers(0, 256, (1, 4, 4, 3)).astype(np.uint8)
    with pytest.raises(GpucError, match=r"input #0 'image': expected dtype float32, got uint8.*cast=True"):
        scale.run(img)


def test_uint8_image_with_cast_matches_float32(scale):
    img = np.random.default_rng(0).integers(0, 256, (1, 4, 4, 3)).astype(np.uint8)
    np.testing.assert_array_equal(scale.run(img, cast=True)[0], scale.run(img.astype(np.float32))[0])


# -- the same accept / refuse decision as LiteRT's set_tensor ------------------------------------
GIVEN = ["float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint8", "uint32", "bool",
         "complex64"]


def _litert_accepts(data, pos, x) -> bool:
    from helpers.litert import make_interpreter
    it = make_interpreter(data)
    it.allocate_tensors()
    try:
        it.set_tensor(it.get_input_details()[pos]["index"], x)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("given", GIVEN)
def test_dtype_decisions_match_litert(passthrough, given):
    data, m = passthrough
    base = [np.arange(6).reshape(2, 3).astype(d) for d in DTYPES]
    for pos, want in enumerate(DTYPES):
        x = np.ones((2, 3), given)
        xs = list(base)
        xs[pos] = x
        try:
            out = m.run(xs)
            ours = True
        except GpucError as e:
            assert f"input #{pos} 'x_{want}'" in str(e) and want in str(e) and given in str(e)
            ours = False
        assert ours == _litert_accepts(data, pos, x), (want, given)
        if ours:
            np.testing.assert_array_equal(out[pos], x.reshape(-1))


def test_python_lists_and_scalars_convert_where_values_fit(passthrough):
    _, m = passthrough
    base = [np.zeros((2, 3), d) for d in DTYPES]
    xs = list(base)
    xs[0] = [[1.5, 2, 3], [4, 5, 6]]          # float32 input: python floats and ints
    xs[1] = [[-1, 2, 3], [4, 5, 2**31 - 1]]   # int32 input
    xs[5] = [[True, False, True], [0, 1, 0]]  # bool input: 0 / 1 fit
    out = m.run(xs)
    np.testing.assert_array_equal(out[0], [1.5, 2, 3, 4, 5, 6])
    np.testing.assert_array_equal(out[1], [-1, 2, 3, 4, 5, 2**31 - 1])
    np.testing.assert_array_equal(out[5], [True, False, True, False, True, False])
    for pos, bad, needle in [(1, [[1, 2, 3], [4, 5, 2**31]], r"\[1, 2\] = 2147483648"),
                             (2, [[0, 1, 2], [3, 256, 5]], r"\[1, 1\] = 256"),
                             (2, [[0, 1, 2], [3, -1, 5]], r"\[1, 1\] = -1"),
                             (1, [[1, 2, 3], [4, 5.5, 6]], r"\[1, 1\] = 5.5.*not an integer"),
                             (5, [[0, 1, 2], [0, 0, 0]], r"\[0, 2\] = 2")]:
        xs = list(base)
        xs[pos] = bad
        with pytest.raises(GpucError, match=rf"input #{pos} 'x_{DTYPES[pos]}'.*{needle}"):
            m.run(xs)


# -- cast=True: only values that fit ---------------------------------------------------------------
@pytest.mark.parametrize("pos,value,ok,needle", [
    (0, np.float64(1e39), False, r"overflows float32"),
    (0, np.float64(np.nan), True, None),                    # NaN and Inf are float32 values
    (0, np.float64(-np.inf), True, None),
    (0, np.int32(2**24 + 1), False, r"16777217.*not exactly a float32"),
    (0, np.int64(2**24), True, None),
    (1, np.float32(7.0), True, None),
    (1, np.float32(7.25), False, r"7.25.*not an integer"),
    (1, np.float64(np.nan), False, r"nan.*not an integer"),
    (1, np.float64(2**31), False, r"2147483648.*outside int32's range"),
    (1, np.uint32(2**31 - 1), True, None),
    (1, np.uint64(2**64 - 1), False, r"18446744073709551615.*outside int32's range"),
    (2, np.int8(-1), False, r"-1.*outside uint8's range 0..255"),
    (3, np.uint8(200), False, r"200.*outside int8's range"),
    (4, np.uint64(2**63), False, r"9223372036854775808.*outside int64's range"),
    (4, np.float64(2.0**63), False, r"outside int64's range"),
    (4, np.float64(-2.0**63), True, None),
    (5, np.int32(1), True, None),
    (5, np.float32(0.5), False, r"0.5"),
    (0, np.complex64(1), False, r"cannot cast complex64"),
])
def test_cast_converts_only_values_that_fit(passthrough, pos, value, ok, needle):
    _, m = passthrough
    xs = [np.zeros((2, 3), d) for d in DTYPES]
    x = np.zeros((2, 3), np.asarray(value).dtype)
    x[1, 2] = value
    xs[pos] = x
    if ok:
        out = m.run(xs, cast=True)[pos]
        np.testing.assert_array_equal(out, x.reshape(-1).astype(DTYPES[pos]))
        assert out.dtype == DTYPES[pos]
    else:
        with pytest.raises(GpucError, match=rf"input #{pos} 'x_{DTYPES[pos]}'.*{needle}"):
            m.run(xs, cast=True)


def test_non_native_byte_order_keeps_its_values(scale):
    """LiteRT copies a big-endian float32's bytes as they are (wrong values); gpuc converts it exactly."""
    x = rnd((1, 4, 4, 3), 1)
    np.testing.assert_array_equal(scale.run(x.astype(">f4"))[0], scale.run(x)[0])


def test_device_tensors_are_not_converted(scale, device):
    t = gpuc.to_device(np.zeros((1, 4, 4, 3), np.float16), device)
    try:
        with pytest.raises(GpucError, match="expected dtype float32, got a device tensor of float16"):
            scale.run([t], cast=True)
    finally:
        t.close()


# -- every run path checks: batched, host steps, dynamic dims ------------------------------------
def test_batched_bundle_is_strict_and_casts(device):
    with gpuc.load(gpuc.compile(scale_model(), max_batch=4, cache=False), device=device) as m:
        x = np.random.default_rng(1).integers(0, 256, (3, 4, 4, 3)).astype(np.uint8)
        with pytest.raises(GpucError, match="input #0 'image': expected dtype float32, got uint8"):
            m.run(x)
        np.testing.assert_array_equal(m.run(x, cast=True)[0], 2.0 * x)
        outs = m.run(x, cast=True, keep_on_device=True)
        try:
            np.testing.assert_array_equal(outs[0].numpy(), 2.0 * x)
        finally:
            outs[0].close()


def test_host_step_bundle_is_strict(device):
    mb = ModelBuilder()
    x = mb.input("x", [1, 8])
    f = mb.tensor("f", [1, 5], "complex64")
    mb.op("RFFT2D", [x, mb.const("n", np.array([1, 8], np.int32))], [f])     # CPU (host) steps
    y = mb.tensor("y", [1, 5])
    mb.op("COMPLEX_ABS", [f], [y])
    mb.output(y)
    bundle = gpuc.compile(mb.finish(), cache=False, disable_passes=["rfft_as_matmul"])
    with gpuc.load(bundle, device=device) as m:
        assert m.program is not None
        x64 = np.random.default_rng(2).standard_normal((1, 8))
        with pytest.raises(GpucError, match="input #0 'x': expected dtype float32, got float64"):
            m.run(x64)
        np.testing.assert_array_equal(m.run(x64, cast=True)[0], m.run(x64.astype(np.float32))[0])


def test_dynamic_bundle_is_strict(device):
    mb = ModelBuilder()
    x = mb.input("x", [1, 8], shape_signature=[1, -1])
    y = mb.tensor("y", [1, 8], shape_signature=[1, -1])
    mb.op("ADD", [x, x], [y])
    mb.output(y)
    with gpuc.load(gpuc.compile(mb.finish(), dynamic=["x:1<=8"], cache=False), device=device) as m:
        assert m.dims is not None
        x = np.arange(5, dtype=np.int64).reshape(1, 5)
        with pytest.raises(GpucError, match="input #0 'x': expected dtype float32, got int64"):
            m.run(x)
        np.testing.assert_array_equal(m.run(x, cast=True)[0], 2.0 * x)
