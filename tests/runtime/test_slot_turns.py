"""Back-to-back runs take turns over a model's slots (runtime/slots.py Slots.acquire: the least recently
submitted free slot): a submit then never lands on the slot holding the last completed run's timestamps,
so no run pays a timestamp read-back (run_in_place never did), last_gpu_ms still gives the last run's
time, the spin estimate is shared by the slots, and the outputs are those of the in-place path."""
import numpy as np
import pytest

import gpuc
from gpuc.runtime import commands

pytest.importorskip("vulkan")

from helpers.models import block_model  # noqa: E402


@pytest.fixture(scope="module")
def bundles():
    model = block_model()
    return gpuc.compile(model, cache=False), gpuc.compile(model, max_batch=4, cache=False)


def _x(spec, b, seed):
    return np.random.default_rng(seed).uniform(-1, 1, (b,) + tuple(spec.shape[1:])).astype(spec.dtype)


@pytest.mark.parametrize("batched", [False, True])
def test_runs_take_turns_without_read_back(bundles, batched, monkeypatch):
    reads = []
    real = commands.read_ms

    def read_ms(device, pool, count):
        reads.append(pool)
        return real(device, pool, count)
    monkeypatch.setattr(commands, "read_ms", read_ms)
    with gpuc.load(bundles[batched]) as m:
        if not m.timestamps:
            pytest.skip("device has no timestamp queries")
        b = 3 if batched else 1
        xs = [_x(m.inputs[0], b, i) for i in range(6)]
        used = []
        for x in xs:
            m.run(x if batched else x[0:1])
            used.append(max(m.slots, key=lambda sl: sl.seq))
        assert used[0] is not used[1] and all(sl is used[i % 2] for i, sl in enumerate(used))
        assert not reads                                     # no submit read the timestamps back
        ms = m.last_gpu_ms                                   # read now, from the last run's slot
        assert ms is not None and ms >= 0 and len(reads) == 1 and reads[0] is used[-1].pool
        keys = {sl.submitted for sl in m.slots}
        assert len(m.slots._took) == 1                       # one estimate for the same work in both slots
        assert keys == {None}
        # the outputs equal the in-place path's for the same inputs
        bb = b if batched else None
        for x in xs[:2]:
            x = x if batched else x[0:1]
            got = m.run(x)[0]
            m.input_view(0, batch=bb)[...] = x if batched else x.reshape(m.inputs[0].shape)
            m.run_in_place(batch=bb)
            np.testing.assert_array_equal(got, np.asarray(m.output_view(0, batch=bb)).reshape(got.shape))


def test_one_slot_still_reads_back(bundles, monkeypatch):
    """With one slot the next submit resets the timestamps of the run just completed: they are read
    first, so last_gpu_ms still gives the last completed run's time."""
    from gpuc.runtime.executor import LoadedModel
    from gpuc.runtime.bundle import read_bundle
    m = LoadedModel(read_bundle(bundles[0]), slots=1)
    try:
        if not m.timestamps:
            pytest.skip("device has no timestamp queries")
        x = _x(m.inputs[0], 1, 0)
        m.run(x)
        m.run(x)
        assert m.last_gpu_ms is not None
    finally:
        m.close()
