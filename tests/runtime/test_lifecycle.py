"""Closing while running (issue 26, lifecycle): LoadedModel.close() and Device.close() while other
threads run; everything used after a close (runs, handles, views, device tensors) raises
GpucError("model is closed") and never touches freed memory; a jump loop in a bundle's program
honours the run's timeout.  Crash-prone cases run in a subprocess, so a segfault or a hang fails
the test instead of killing pytest."""
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import gpuc
from gpuc.errors import GpucError, GpuTimeoutError
from helpers.builder import ModelBuilder, with_subgraphs

pytest.importorskip("vulkan")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import fuzz_lifecycle  # noqa: E402


def _subprocess(code: str, timeout: float = 120) -> str:
    """Run `code` in a fresh interpreter (tests/ on the path); it must print OK and exit 0."""
    prelude = f"import sys; sys.path.insert(0, {str(ROOT / 'tests')!r}); sys.path.insert(0, {str(ROOT / 'scripts')!r})\n"
    p = subprocess.run([sys.executable, "-X", "faulthandler", "-c", prelude + textwrap.dedent(code)],
                       capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0 and p.stdout.strip().endswith("OK"), \
        f"exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"
    return p.stdout


@pytest.mark.parametrize("target", ["model", "device"])
def test_close_while_eight_threads_run(target):
    """8 threads in run / run_async / run_in_place / keep_on_device while another thread closes the
    model (or its device), 12 times: every run correct or "model is closed"; no crash, no hang."""
    res = fuzz_lifecycle.run(cases=12, seed=7, timeout=60, log=lambda s: None, threads=8, target=target)
    assert not res["failures"], res["failures"][:5]
    assert res["crashes"] == res["hangs"] == 0
    assert res["completed"] > 0 and res["closed"] > 0, res


USE_AFTER_CLOSE = """
import gc
import numpy as np
import gpuc
from gpuc.errors import GpucError
from gpuc.runtime.device_tensor import DeviceTensor
from fuzz_lifecycle import model_bytes

def closed(fn, *a, **k):
    try:
        fn(*a, **k)
    except GpucError as e:
        assert "model is closed" in str(e), str(e)
        return
    raise AssertionError(f"{fn} did not raise after close")

bundle = gpuc.compile(model_bytes(), cache=False)
dev = gpuc.open_device()
m = gpuc.load(bundle, device=dev)
xs = [np.full((4, 8), 2, np.float32), np.full((4, 8), 3, np.float32)]
ref = m.run(xs)[0]
pending = m.run_async(xs)                       # never waited for before the close
done = m.run_async(xs)
outs = done.wait()
vin, vout = m.input_view(0), m.output_view(0)
plain = vin.view(np.ndarray)                     # a plain array over the same staging memory
(t,) = m.run(xs, keep_on_device=True)
copy = m.output_view(0).copy()                   # its own memory: not tied to the model
m.close()
closed(m.run, xs)
closed(m.run_async, xs)
closed(m.run_in_place)
closed(m.input_view, 0)
closed(m.output_view, 0)
closed(m.reset_state)
closed(pending.wait)
closed(pending.done)
closed(vin.__setitem__, Ellipsis, 1.0)
closed(vout.__getitem__, 0)
closed(np.copyto, vin, 1.0)
closed(np.add, vout, 1)
closed(repr, vout)
assert np.array_equal(done.wait()[0], ref)       # completed before the close: its outputs stay
assert float(copy.sum()) == float(ref.sum())
plain[...] = 5.0                                 # still mapped while an array points into it
assert plain.sum() == 5.0 * plain.size
assert np.array_equal(t.numpy(), ref)            # device tensors belong to the device
assert dev._pinned                               # the staging memory waits for the views
dev.close()
closed(t.numpy)
closed(m.run, xs)
try:
    DeviceTensor.from_numpy(dev, xs[0])
    raise AssertionError("upload to a closed device")
except GpucError as e:
    assert "is closed" in str(e), str(e)
try:
    gpuc.load(bundle, device=dev)
    raise AssertionError("load on a closed device")
except GpucError as e:
    assert "is closed" in str(e), str(e)
plain[...] = 7.0
assert dev._deferred is not None                 # the VkDevice waits for the last view
del vin, vout, plain
gc.collect()
assert not dev._pinned and dev._deferred is None
print("OK")
"""


def test_everything_used_after_close_says_model_is_closed():
    _subprocess(USE_AFTER_CLOSE)


DEVICE_CLOSE_THEN_RUN = """
import numpy as np
import gpuc
from gpuc.errors import GpucError
from fuzz_lifecycle import model_bytes

dev = gpuc.open_device()
m = gpuc.load(gpuc.compile(model_bytes(), cache=False), device=dev)
xs = [np.ones((4, 8), np.float32)] * 2
m.run(xs)
h = m.run_async(xs)
v = m.input_view(1)
dev.close()                                      # the model is still open: closed first
for fn, args in ((m.run, (xs,)), (m.run_async, (xs,)), (h.wait, ()), (m.run_in_place, ()),
                 (v.__setitem__, (Ellipsis, 1.0))):
    try:
        fn(*args)
        raise AssertionError(f"{fn} ran after Device.close()")
    except GpucError as e:
        assert "model is closed" in str(e), str(e)
m.close()                                        # again: nothing to do
dev.close()
print("OK")
"""


def test_device_close_with_a_model_open_then_run():
    _subprocess(DEVICE_CLOSE_THEN_RUN)


def counting_loop_model():
    """i = 0; while i < limit: i += 1 -- `limit` an input, so a caller picks how long it runs."""
    mb = ModelBuilder()
    lim = mb.input("limit", [1], "int32")
    i0 = mb.const("i0", np.zeros(1, np.int32))
    oi, ol = mb.tensor("oi", [1], "int32"), mb.tensor("ol", [1], "int32")
    mb.op("WHILE", [i0, lim], [oi, ol], cond_subgraph_index=1, body_subgraph_index=2)
    mb.output(oi)
    cb = ModelBuilder()
    ci, cl = cb.input("i", [1], "int32"), cb.input("l", [1], "int32")
    c = cb.tensor("c", [1], "bool")
    cb.op("LESS", [ci, cl], [c])
    cb.output(c)
    bb = ModelBuilder()
    bi, bl = bb.input("i", [1], "int32"), bb.input("l", [1], "int32")
    ni = bb.tensor("ni", [1], "int32")
    bb.op("ADD", [bi, bb.const("one", np.ones(1, np.int32))], [ni])
    bb.output(ni)
    bb.output(bl)
    return with_subgraphs(mb, cb, bb)


@pytest.fixture(scope="module")
def loop_bundle():
    return gpuc.compile(counting_loop_model(), cache=False)


def test_jump_loop_honours_the_timeout(loop_bundle):
    with gpuc.load(loop_bundle, timeout_s=1.5) as m:
        assert m.program is not None                          # the loop runs as program steps and jumps
        assert m.run([np.array([3], np.int32)])[0].tolist() == [3]
        t0 = time.perf_counter()
        with pytest.raises(GpuTimeoutError, match="did not finish within 1.5 s"):
            m.run([np.array([2 ** 31 - 1], np.int32)])
        assert time.perf_counter() - t0 < 5
        assert m.run([np.array([4], np.int32)])[0].tolist() == [4]   # still usable


def test_close_stops_a_jump_loop_without_limit(loop_bundle):
    m = gpuc.load(loop_bundle, timeout_s=0)                          # no limit: only close() ends it
    err = []

    def endless():
        try:
            m.run([np.array([2 ** 31 - 1], np.int32)])
        except GpucError as e:
            err.append(str(e))
    t = threading.Thread(target=endless)
    t.start()
    time.sleep(0.3)
    t0 = time.perf_counter()
    m.close()
    t.join(10)
    assert not t.is_alive() and time.perf_counter() - t0 < 5
    assert err and "model is closed" in err[0]


def test_concurrent_closes_and_run_after(loop_bundle):
    m = gpuc.load(loop_bundle)
    ts = [threading.Thread(target=m.close) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    with pytest.raises(GpucError, match="model is closed"):
        m.run([np.array([1], np.int32)])
