"""Hostile index inputs (issue 26): a gpuc run fails exactly where a LiteRT invoke fails, naming the op.

GATHER / GATHER_ND / EMBEDDING_LOOKUP fed runtime indices (in range, out of range, negative) must
agree with LiteRT's CPU interpreter on error vs success, with equal outputs where both succeed, and
gpuc's error names the op (compiler/status.py, runtime/status.py).  Also through run_async,
run_in_place, a batch-native bundle, a program with a host (CPU) step, a --dynamic bundle and the
CPU GATHER fallback; constant indices out of range are refused at compile time.  One compile per model.
"""
import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.errors import GpucError, RunError, UnsupportedError  # noqa: E402
from gpuc.runtime.bundle import read_bundle  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import run_litert  # noqa: E402

F, I = "float32", "int32"


def model(op, params, idx_shape, idx_dtype, out_shape, out_dtype=F, params_first=True, **options):
    """A one-op model with runtime inputs params `p` and indices `idx` (in that order)."""
    mb = ModelBuilder()
    p = mb.input("p", params.shape, params.dtype.name)
    i = mb.input("idx", idx_shape, idx_dtype)
    y = mb.tensor("y", out_shape, out_dtype)
    mb.op(op, [p, i] if params_first else [i, p], [y], **options)
    mb.output(y)
    return mb.finish()


def litert(m, feeds):
    """LiteRT's outputs, or the exception its invoke raised."""
    try:
        return run_litert(m, [f.copy() for f in feeds])
    except Exception as e:                 # noqa: BLE001 - LiteRT raises RuntimeError / ValueError
        return e


def agree(gm, m, feeds, op):
    """gpuc (loaded bundle gm) and LiteRT agree: both fail (gpuc naming op), or equal outputs."""
    ref = litert(m, feeds)
    if isinstance(ref, Exception):
        with pytest.raises(RunError, match=op):
            gm.run([f.copy() for f in feeds])
        return False
    outs = gm.run([f.copy() for f in feeds])
    for o, r in zip(outs, ref):
        np.testing.assert_array_equal(o, r)
    return True


def indices(rng, shape, bounds, dtype, bad: bool):
    """Random indices in [0, bounds) (per last-axis component), with one bad entry when `bad`."""
    v = (rng.integers(0, 1 << 30, shape) % np.asarray(bounds)).astype(dtype)
    if bad:
        flat = v.reshape(-1)
        k = int(rng.integers(flat.size))
        b = int(np.broadcast_to(np.asarray(bounds), v.shape).reshape(-1)[k])
        flat[k] = rng.choice([-1, b, b + int(rng.integers(1, 50)), -int(rng.integers(2, 50))])
        if dtype == np.int64 and rng.integers(2):
            flat[k] = (1 << 33) + b
    return v


P = np.arange(60, dtype=np.float32).reshape(5, 4, 3)
CASES = {   # name -> (op, params, idx shape, idx dtype, bounds of one index (or per component), out shape, options)
    "gather-axis0": ("GATHER", P, [3], I, 5, [3, 4, 3], {}),
    "gather-axis1-2d": ("GATHER", P, [2, 2], I, 4, [5, 2, 2, 3], dict(axis=1)),
    "gather-int64": ("GATHER", P, [4], "int64", 5, [4, 4, 3], {}),
    "gather-batch_dims": ("GATHER", P, [5, 2], I, 4, [5, 2, 3], dict(axis=1, batch_dims=1)),
    "gather-int8": ("GATHER", (np.arange(60) % 100).astype(np.int8).reshape(5, 4, 3), [3], I, 5, [3, 4, 3], {}),
    "gather_nd": ("GATHER_ND", P, [3, 2], I, [5, 4], [3, 3], {}),
    "gather_nd-int64": ("GATHER_ND", P, [2, 3], "int64", [5, 4, 3], [2], {}),
    "embedding": ("EMBEDDING_LOOKUP", P, [3], I, 5, [3, 4, 3], {}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_agrees_with_litert(gpu, name):
    op, params, ishape, idt, bounds, oshape, options = CASES[name]
    m = model(op, params, ishape, idt, oshape, params.dtype.name, params_first=op != "EMBEDDING_LOOKUP", **options)
    rng = np.random.default_rng(len(name))
    with gpu.load(m) as gm:
        ok = [agree(gm, m, [params, indices(rng, ishape, bounds, np.dtype(idt), bad)], op)
              for bad in (False, True, False, True, True, False)]
    assert ok == [True, False, True, False, False, True]       # LiteRT failed exactly on the bad ones


def test_message_and_run_paths(gpu):
    """The error names op, operator, tensor, value and range; run_async and run_in_place fail too;
    a good run after a bad one succeeds (the words are zeroed every run)."""
    m = model("GATHER", P, [2], I, [2, 4, 3])
    good, bad = [P, np.array([4, 0], np.int32)], [P, np.array([1, 7], np.int32)]
    with gpu.load(m) as gm:
        with pytest.raises(RunError, match=r"GATHER \(operator #0, indices 'idx'\): index 7 out of range \[0, 5\)"):
            gm.run(bad)
        np.testing.assert_array_equal(gm.run(good)[0], P[[4, 0]])
        hs = [gm.run_async(f) for f in (bad, good, bad, good)]
        for h, ok in zip(hs, (False, True, False, True)):
            if ok:
                np.testing.assert_array_equal(h.wait()[0], P[[4, 0]])
            else:
                with pytest.raises(RunError, match="GATHER"):
                    h.wait()
        gm.input_view(0)[:] = P
        gm.input_view(1)[:] = [-3, 0]
        with pytest.raises(RunError, match="index -3"):
            gm.run_in_place()
        gm.input_view(1)[:] = [2, 3]
        gm.run_in_place()
        np.testing.assert_array_equal(gm.output_view(0), P[[2, 3]])


def test_keep_on_device_and_device_tensor_inputs_check_too(gpu):
    """Runs whose outputs stay on the device (or whose inputs are DeviceTensors) copy the status words
    back as well: a bad index fails them."""
    m = model("GATHER", P, [2], I, [2, 4, 3])
    good, bad = [P, np.array([4, 0], np.int32)], [P, np.array([1, 9], np.int32)]
    with gpu.load(m) as gm:
        with pytest.raises(RunError, match="index 9 out of range"):
            gm.run(bad, keep_on_device=True)
        outs = gm.run(good, keep_on_device=True)
        np.testing.assert_array_equal(outs[0].numpy(), P[[4, 0]])
        for o in outs:
            o.close()
        xd = gpuc.to_device(P, gm.device)
        with pytest.raises(RunError, match="index 9 out of range"):
            gm.run([xd, bad[1]])
        np.testing.assert_array_equal(gm.run([xd, good[1]])[0], P[[4, 0]])
        xd.close()


def test_inspect_lists_the_checks():
    from gpuc.inspect import inspect_bundle
    rep, text = inspect_bundle(gpuc.compile(model("GATHER", P, [2], I, [2, 4, 3])))
    assert rep["run_time_checks"] == [{"op": "GATHER", "operator": 0, "tensor": "idx", "bounds": [5]}]
    assert "run-time checks: GATHER #0 ('idx' within [5])" in text


def test_no_checks_no_cost():
    """A model with constant (or no) indices gets no status tensor, no check and no extra dispatch."""
    mb = ModelBuilder()
    p = mb.input("p", [5, 3], F)
    y = mb.tensor("y", [2, 3], F)
    mb.op("GATHER", [p, mb.const("c", np.array([4, 1], np.int32))], [y])
    mb.output(y)
    b = read_bundle(gpuc.compile(mb.finish(), cache=False))
    assert b.checks == [] and not any("status" in t.name for t in b.tensors)
    assert all("status" not in d.label for d in b.dispatches)


@pytest.mark.parametrize("op, idx, options", [("GATHER", [1, 5], {}), ("GATHER", [-1], dict(axis=1)),
                                              ("GATHER_ND", [[0, 4]], {}), ("EMBEDDING_LOOKUP", [5], {})])
def test_constant_indices_refused_at_compile_time(op, idx, options):
    mb = ModelBuilder()
    idx = np.array(idx, np.int32)
    p = mb.input("p", [5, 4], F)
    c = mb.const("c", idx)
    out = {"GATHER": [len(idx), 4] if not options else [5, 1], "GATHER_ND": [1], "EMBEDDING_LOOKUP": [1, 4]}[op]
    y = mb.tensor("y", out, F)
    mb.op(op, [c, p] if op == "EMBEDDING_LOOKUP" else [p, c], [y], **options)
    mb.output(y)
    m = mb.finish()
    assert isinstance(litert(m, [np.zeros((5, 4), np.float32)]), Exception)
    with pytest.raises(UnsupportedError, match=f"{op} \\(operator #0\\).*out of range"):
        gpuc.compile(m, cache=False)


def test_batch_native(gpu):
    """--max-batch: the item that holds the bad index is named; items beyond the run's batch (stale
    indices of an earlier, larger run) do not count."""
    m = model("GATHER", np.arange(12, dtype=np.float32).reshape(1, 4, 3), [1, 3], I, [1, 3, 3],
              axis=1, batch_dims=1)
    b = gpuc.compile(m, max_batch=4, cache=False)
    assert read_bundle(b).options.get("batch_native")
    ps = np.arange(48, dtype=np.float32).reshape(4, 4, 3)
    idx = np.array([[0, 1, 2], [3, 3, 0], [1, 9, 2], [2, 1, 0]], np.int32)
    with gpuc.load(b, device=gpu.device) as gm:
        with pytest.raises(RunError, match="batch item 2"):
            gm.run([ps, idx])
        np.testing.assert_array_equal(gm.run([ps[:2], idx[:2]])[0], np.take_along_axis(
            ps[:2], idx[:2, :, None].repeat(3, 2), 1))
        idx[3, 0] = -1                  # item 3 bad, item 2 fixed: a run of 3 items succeeds
        idx[2, 1] = 3
        with pytest.raises(RunError, match="batch item 3"):
            gm.run([ps, idx])
        out = gm.run([ps[:3], idx[:3]])[0]
        np.testing.assert_array_equal(out, np.take_along_axis(ps[:3], idx[:3, :, None].repeat(3, 2), 1))


def test_program_with_host_step(gpu):
    """A GPU GATHER followed by a CPU op (LSH_PROJECTION: a host step): the program's run fails naming GATHER."""
    mb = ModelBuilder()
    p, i = mb.input("p", [5, 3], F), mb.input("idx", [2], I)
    g, y = mb.tensor("g", [2, 3], F), mb.tensor("y", [4], I)
    mb.op("GATHER", [p, i], [g])
    hv = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(4, 3)
    mb.op("LSH_PROJECTION", [mb.const("hash", hv), g], [y], type=1)
    mb.output(y)
    m = mb.finish()
    b = gpuc.compile(m, cache=False)
    assert read_bundle(b).steps and read_bundle(b).checks
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    with gpuc.load(b, device=gpu.device) as gm:
        for idx in ([4, 1], [5, 1], [0, -2], [2, 2]):
            agree(gm, m, [x, np.array(idx, np.int32)], "GATHER")


def test_cpu_gather_fallback(gpu):
    """int64 params run GATHER / GATHER_ND on the CPU: a bad index fails there as in LiteRT."""
    x = np.arange(15, dtype=np.int64).reshape(5, 3)
    for op, ishape, oshape, bounds in (("GATHER", [2], [2, 3], 5), ("GATHER_ND", [2, 2], [2], [5, 3])):
        m = model(op, x, ishape, I, oshape, "int64")
        rng = np.random.default_rng(3)
        with gpu.load(m) as gm:
            for bad in (False, True, True, False):
                feeds = [x, indices(rng, ishape, bounds, np.int32, bad)]
                ref = litert(m, feeds)
                if isinstance(ref, Exception):
                    with pytest.raises(GpucError, match=op):
                        gm.run(feeds)
                else:
                    np.testing.assert_array_equal(gm.run(feeds)[0], ref[0])


def test_dynamic(gpu):
    """--dynamic on the indices' length: the check holds at every size."""
    m = model("GATHER", P, [1, 6], I, [1, 6, 4, 3])
    b = gpuc.compile(m, dynamic=["idx:1<=6"], cache=False)
    with gpuc.load(b, device=gpu.device) as gm:
        np.testing.assert_array_equal(gm.run([P, np.array([[4, 0, 1]], np.int32)])[0], P[None, [4, 0, 1]])
        with pytest.raises(RunError, match="index 5"):
            gm.run([P, np.array([[1, 5]], np.int32)])
        np.testing.assert_array_equal(gm.run([P, np.array([[3]], np.int32)])[0], P[None, [3]])
