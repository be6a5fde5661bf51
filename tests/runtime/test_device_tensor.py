"""Device-resident tensors (runtime/device_tensor.py): run(..., keep_on_device=True) returns
DeviceTensors that another bundle on the same Device takes as inputs (device->device copy in its
own submission).  A model split in two and chained through device tensors gives the one-model
result; host arrays and device tensors mix; other device / closed / wrong shape or dtype are clear
errors; tensors are freed by close() and with their device."""
import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.errors import GpucError  # noqa: E402
from gpuc.runtime.device import Device  # noqa: E402
from gpuc.runtime.device_tensor import DeviceTensor  # noqa: E402
from helpers.models import block_model, head_model, tail_model  # noqa: E402


@pytest.fixture(scope="module")
def dev():
    d = Device()
    yield d
    d.close()


@pytest.fixture(scope="module")
def chain(dev):
    head = gpuc.load(gpuc.compile(head_model()), device=dev)
    tail = gpuc.load(gpuc.compile(tail_model()), device=dev)
    full = gpuc.load(gpuc.compile(block_model()), device=dev)
    yield head, tail, full
    for m in (head, tail, full):
        m.close()


def x_of(seed, n=1):
    return np.random.default_rng(seed).uniform(-1, 1, (n, 6, 6, 4)).astype(np.float32)


def test_chain_equals_one_model(chain):
    head, tail, full = chain
    x = x_of(0)
    (r1,) = head.run([x], keep_on_device=True)
    assert isinstance(r1, DeviceTensor)
    assert (r1.name, r1.shape, r1.dtype) == ("r1", (1, 6, 6, 4), np.float32)
    np.testing.assert_array_equal(r1.numpy(), head.run([x])[0])
    (y,) = tail.run({"r1": r1, "x": x})                     # a device tensor and a host array
    np.testing.assert_allclose(y, full.run([x])[0], rtol=1e-6, atol=1e-7)
    (yd,) = tail.run([r1, x], keep_on_device=True)          # device in, device out
    np.testing.assert_array_equal(yd.numpy(), y)
    r1.close()
    yd.close()


def test_pipelined_chain(chain):
    """run_async producers and consumers in flight at once; each consumer sees its producer's data."""
    head, tail, full = chain
    xs = [x_of(s) for s in range(5)]
    refs = [full.run([x])[0] for x in xs]
    outs = []
    for x in xs:
        (r1,) = head.run_async([x], keep_on_device=True).wait()
        outs.append((tail.run_async([r1, x]), r1))
    for (h, r1), ref in zip(outs, refs):
        np.testing.assert_allclose(h.wait()[0], ref, rtol=1e-6, atol=1e-7)
        r1.close()


def test_consumer_submitted_before_producer_completes(chain):
    """h.device_outputs are usable at once: the consumer's submission is ordered after the producer's."""
    head, tail, full = chain
    xs = [x_of(s) for s in range(10, 14)]
    refs = [full.run([x])[0] for x in xs]
    pending = []
    for x in xs:
        hp = head.run_async([x], keep_on_device=True)
        (r1,) = hp.device_outputs
        pending.append((tail.run_async([r1, x]), hp, r1))
    for (hc, hp, r1), ref in zip(pending, refs):
        np.testing.assert_allclose(hc.wait()[0], ref, rtol=1e-6, atol=1e-7)
        assert hp.wait() == [r1]
        r1.close()
    (r1,) = head.run_async([xs[0]], keep_on_device=True).device_outputs
    r1.close()                                  # waits for its producer, then frees
    assert head.run_async([xs[0]]).device_outputs is None


def test_same_tensor_feeds_many_runs_and_close_waits(chain):
    head, tail, full = chain
    x = x_of(7)
    with head.run([x], keep_on_device=True)[0] as r1:
        hs = [tail.run_async([r1, x]) for _ in range(3)]
        r1.close()                                          # waits for the runs that read it
        assert r1.closed
        ref = full.run([x])[0]
        for h in hs:
            np.testing.assert_allclose(h.wait()[0], ref, rtol=1e-6, atol=1e-7)


def test_batched_chain(dev):
    head = gpuc.load(gpuc.compile(head_model(), max_batch=4), device=dev)
    tail = gpuc.load(gpuc.compile(tail_model(), max_batch=4), device=dev)
    full = gpuc.load(gpuc.compile(block_model()), device=dev)
    try:
        x = x_of(3, 3)
        (r1,) = head.run([x], keep_on_device=True)
        assert r1.shape == (3, 6, 6, 4)
        (y,) = tail.run([r1, x])
        assert y.shape == (3, 3)
        for i in range(3):
            np.testing.assert_allclose(y[i:i + 1], full.run([x[i:i + 1]])[0], rtol=1e-6, atol=1e-7)
        with pytest.raises(GpucError, match="disagree on the batch size"):
            tail.run([r1, x[:2]])
        r1.close()
    finally:
        for m in (head, tail, full):
            m.close()


def test_errors(chain, dev):
    head, tail, _ = chain
    x = x_of(1)
    (r1,) = head.run([x], keep_on_device=True)
    with pytest.raises(GpucError, match=r"input 'x': expected shape \[1, 6, 6, 4\], got \[2, 6, 6, 4\]"):
        tail.run([r1, x_of(1, 2)])
    wrong = DeviceTensor.from_numpy(dev, np.zeros((1, 6, 6, 4), np.int32), "ints")
    with pytest.raises(GpucError, match="expected dtype float32, got a device tensor of int32"):
        tail.run([wrong, x])
    short = DeviceTensor.from_numpy(dev, np.zeros((1, 6, 6, 3), np.float32), "short")
    with pytest.raises(GpucError, match=r"input 'r1': expected shape \[1, 6, 6, 4\], got \[1, 6, 6, 3\]"):
        tail.run([short, x])
    other = Device()
    try:
        far = DeviceTensor.from_numpy(other, np.zeros((1, 6, 6, 4), np.float32), "far")
        with pytest.raises(GpucError, match="lives on another device"):
            tail.run([far, x])
    finally:
        other.close()
    assert far.closed                                       # freed with its device
    with pytest.raises(GpucError, match="is closed"):
        far.numpy()
    for t in (wrong, short):
        t.close()
    r1.close()
    r1.close()                                              # idempotent
    with pytest.raises(GpucError, match="device tensor 'r1' is closed"):
        tail.run([r1, x])
    with pytest.raises(GpucError, match="is closed"):
        r1.numpy()
    np.testing.assert_allclose(tail.run([head.run([x])[0], x])[0], tail.run([head.run([x])[0], x])[0])


def test_upload_round_trip_and_freed_with_their_device():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    dev = gpuc.open_device()
    m = gpuc.load(gpuc.compile(head_model()), device=dev)
    t = DeviceTensor.from_numpy(m.device, a, "a")
    np.testing.assert_array_equal(t.numpy(), a)
    (r1,) = m.run([x_of(2)], keep_on_device=True)
    assert "r1" in repr(r1) and not r1.closed
    m.close()                                               # the tensors belong to the device, not the model
    assert not r1.closed
    dev.close()
    assert t.closed and r1.closed and "closed" in repr(r1)


def test_models_loaded_without_a_device_share_one():
    """One VkInstance/VkDevice per process: closing one model leaves the shared device to the others."""
    a = gpuc.load(gpuc.compile(head_model()))
    b = gpuc.load(gpuc.compile(head_model()))
    assert a.device is b.device
    (r,) = a.run([x_of(2)], keep_on_device=True)
    a.close()
    np.testing.assert_array_equal(b.run([x_of(2)])[0], r.numpy())   # r outlives its model
    b.close()
    with gpuc.load(gpuc.compile(head_model())) as c:
        assert c.device.device is not None and not r.closed
    r.close()


def test_readme_device_example_runs(tmp_path):
    from helpers.repo import require_demo_packages, run_readme_block
    require_demo_packages()
    r = run_readme_block("readme-example-device", tmp_path)
    assert r.returncode == 0, r.stderr
    assert "(1, 896, 16) float32" in r.stdout


def test_a_tensor_collected_inside_the_recycler_does_not_deadlock(dev):
    """A garbage DeviceTensor's __del__ recycles its buffer; the collector may run it at any allocation,
    also inside the recycler's own locked sections on the same thread (scripts/fuzz_lifecycle.py found a
    keep_on_device run hung so): it must finish there."""
    import threading

    from gpuc.runtime import device_tensor as dt_mod
    done = []

    def nested():
        rec = dt_mod._Recycler.of(dev)
        with dt_mod._CREATE, rec.lock:
            t = DeviceTensor(dev, "g", (4,), np.float32)
            t.__del__()                                     # as the collector would, mid-section
            done.append(t.buffer is None)
    th = threading.Thread(target=nested, daemon=True)
    th.start()
    th.join(20)
    assert done == [True], "a buffer recycled inside the recycler's locked section hung"
