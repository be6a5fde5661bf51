"""run() reading large inputs from the caller's memory (runtime/host_import.py, VK_EXT_external_memory_host,
which lavapipe has): the same outputs as the copy through staging at every batch, with inputs changed
in place between runs, a second input staged beside an imported one; what is imported and when
(auto: an array's second run; never run_async, strided, read-only or small arrays); imports freed
once their array is gone and at close()."""
import gc

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.errors import GpucError  # noqa: E402
from gpuc.runtime import host_import, settings  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.models import block_model  # noqa: E402

ON = dict(host_import="on", host_import_bytes=16)


def two_inputs():
    """z = (x + y) * 0.5 and w = x * x: two inputs, two outputs."""
    mb = ModelBuilder()
    x, y = mb.input("x", [1, 6, 6, 4]), mb.input("y", [1, 6, 6, 4])
    s, z, w = mb.tensor("s", [1, 6, 6, 4]), mb.tensor("z", [1, 6, 6, 4]), mb.tensor("w", [1, 6, 6, 4])
    mb.op("ADD", [x, y], [s])
    mb.op("MUL", [s, mb.const("h", np.full([1, 6, 6, 4], 0.5, np.float32))], [z])
    mb.op("MUL", [x, x], [w])
    mb.output(z)
    mb.output(w)
    return mb.finish()


@pytest.fixture(scope="module")
def bundles():
    model = block_model()
    return gpuc.compile(model), gpuc.compile(model, max_batch=6), gpuc.compile(two_inputs(), max_batch=4)


@pytest.fixture(scope="module")
def device(bundles):
    m = gpuc.load(bundles[0])
    if not m.device.host_import_align:
        m.close()
        pytest.skip("the device has no VK_EXT_external_memory_host")
    yield m.device
    m.close()


def _xs(spec, b, seed):
    return np.random.default_rng(seed).uniform(-1, 1, (b,) + tuple(spec.shape[1:])).astype(spec.dtype)


def _load(bundle, device, **over):
    with settings.override(**over):
        return gpuc.load(bundle, device=device)


def _equal(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_array_equal(g, w)


def test_imported_runs_equal_copies(bundles, device):
    align = device.describe()["host_import_alignment"]
    assert align == device.host_import_align and align > 0 and not align & (align - 1)
    b1, bn, _ = bundles
    ref1, refn = _load(b1, device, host_import="off"), _load(bn, device, host_import="off")
    m1, mn = _load(b1, device, **ON), _load(bn, device, **ON)
    try:
        x1 = _xs(m1.inputs[0], 1, 0)
        _equal(m1.run(x1), ref1.run(x1))
        assert m1.imports.count == 1
        for b in (1, 4, 6):
            x = _xs(mn.inputs[0], b, b)
            _equal(mn.run(x), refn.run(x))
            x *= -0.5                                   # the next run reads the array as it is now
            _equal(mn.run(x), refn.run(x))
        assert mn.imports.count >= 1
        big = _xs(mn.inputs[0], 6, 7)
        part = big[1:5]                                 # a view inside another array: its own bytes only
        _equal(mn.run(part), refn.run(part.copy()))
        assert refn.imports.count == 0
    finally:
        for m in (m1, mn, ref1, refn):
            m.close()


def test_a_staged_input_beside_an_imported_one(bundles, device):
    ref = _load(bundles[2], device, host_import="off")
    m = _load(bundles[2], device, host_import="on", host_import_bytes=4 * 36 * 4 * 3)    # 3+ items
    try:
        for b in (2, 4):
            x, y = _xs(m.inputs[0], b, b), _xs(m.inputs[1], 1, b)[np.zeros(b, int)]
            y = y.copy() if b == 4 else np.ascontiguousarray(np.swapaxes(y, 1, 2)).swapaxes(1, 2)
            _equal(m.run([x, y]), ref.run([x, np.ascontiguousarray(y)]))
            spans = m.imports.spans([x, y])
            assert (spans is not None) == (b == 4)      # x of 2 items is under the size, y strided
            if spans:
                assert spans[0] is not None and spans[1] is not None
                m.imports.release(spans)
    finally:
        m.close()
        ref.close()


def test_auto_imports_an_arrays_second_run(bundles, device):
    m = _load(bundles[1], device, host_import="auto", host_import_bytes=16)
    try:
        x = _xs(m.inputs[0], 6, 1)
        m.run(x)
        assert m.imports.count == 0                     # seen once: copied
        m.run(x)
        assert m.imports.count == 1
        m.run(_xs(m.inputs[0], 6, 2))                   # a new array: copied, the import kept
        assert m.imports.count == 1
        del x
        gc.collect()
        m.run(_xs(m.inputs[0], 6, 3))                   # its array gone: the import is freed
        assert m.imports.count == 0
    finally:
        m.close()


def test_what_is_never_imported(bundles, device):
    m = _load(bundles[1], device, **ON)
    try:
        x = _xs(m.inputs[0], 6, 4)
        want = m.run(x.copy())
        assert m.imports.count == 0                     # a temporary: freed with its array
        _equal(m.run_async(x).wait(), want)             # run_async: its caller may refill x meanwhile
        assert m.imports.count == 0
        ro = x.copy()
        ro.flags.writeable = False
        _equal(m.run(ro), want)
        strided = np.ascontiguousarray(np.swapaxes(x, 1, 2)).swapaxes(1, 2)
        _equal(m.run(strided), want)
        _equal(m.run(np.frombuffer(x.tobytes(), x.dtype).reshape(x.shape)), want)    # bytes: read-only
        assert m.imports.count == 0
    finally:
        m.close()
    small = _load(bundles[1], device, host_import="on")     # the default size: these inputs are under it
    try:
        small.run(x)
        assert small.imports.count == 0
    finally:
        small.close()


def test_limit_and_runs_in_use(device):
    imp = host_import.Imports(device, "on", 16)
    arrays = [np.zeros(5000, np.float32) for _ in range(host_import.LIMIT + 2)]
    try:
        held = imp.span(arrays[0])                      # in use: never let go under its run
        done = []
        for a in arrays[1:]:
            done.append(imp.span(a))
            imp.release([done[-1]])
        assert imp.count == host_import.LIMIT
        assert held.buf is not None and not held.dropped
        assert [sp.buf is None for sp in done] == [True, True] + [False] * (host_import.LIMIT - 1)
        assert imp.span(arrays[0]) is held              # kept: found again
        imp.release([held, held])
        assert held.users == 0 and held.buf is not None
    finally:
        imp.close()
    assert held.buf is None and imp.count == 0
    assert imp.span(arrays[0]) is None                  # closed: nothing more is imported


def test_arrays_taking_turns_go_back_to_copies(device):
    """auto: 2 x LIMIT arrays in turn would import and free one every run; after WASTED such imports
    the model copies again.  A steady array keeps its import."""
    imp = host_import.Imports(device, "auto", 16)
    ring = [np.zeros(5000, np.float32) for _ in range(2 * host_import.LIMIT)]
    try:
        for _ in range(2 + host_import.WASTED):
            for a in ring:
                sp = imp.span(a)
                if sp is not None:
                    imp.release([sp])
        assert not imp.on and imp.span(ring[0]) is None
    finally:
        imp.close()
    steady = host_import.Imports(device, "auto", 16)
    try:
        for _ in range(10):
            sp = steady.span(ring[0])
            if sp is not None:
                steady.release([sp])
        assert steady.on and steady.count == 1
    finally:
        steady.close()


def test_settings(bundles, device):
    with settings.override(host_import="sometimes"):
        with pytest.raises(GpucError, match="GPUC_HOST_IMPORT"):
            gpuc.load(bundles[1], device=device)
    m = _load(bundles[1], device, host_import="off", host_import_bytes=16)
    try:
        x = _xs(m.inputs[0], 6, 5)
        m.run(x)
        m.run(x)
        assert m.imports.count == 0
    finally:
        m.close()


def test_close_frees_imports(bundles, device):
    m = _load(bundles[1], device, **ON)
    x = _xs(m.inputs[0], 6, 6)
    m.run(x)
    assert m.imports.count == 1
    m.close()
    assert m.imports.count == 0
    with pytest.raises(GpucError, match="closed"):
        m.run(x)


def test_close_frees_what_a_late_run_held(device):
    """A run whose wait timed out keeps its spans (release(late=True)); one let go meanwhile (its array gone, or
    evicted past LIMIT) is freed at close(), with the spans still kept."""
    imp = host_import.Imports(device, "on", 16)
    gone, kept = np.zeros(5000, np.float32), np.zeros(5000, np.float32)
    late = imp.span(gone)
    held = imp.span(kept)
    imp.release([late, held], late=True)
    del gone
    gc.collect()
    assert imp.count == 1 and late.dropped and late.buf is not None     # let go, still read by the late run
    imp.close()
    assert late.buf is None and held.buf is None and imp.count == 0
