"""Dispatch order (compiler/schedule.py): independent kernels side by side, fewer barriers, same
results; program order kept where the arena would grow."""
import numpy as np
import pytest

import gpuc
from gpuc.compiler import schedule
from gpuc.compiler.ir import GPU
from gpuc.compiler.prepare import prepare
from gpuc.errors import GpucError
from gpuc.runtime.bundle import read_bundle
from helpers.builder import ModelBuilder
from helpers.data import rnd


def two_chains():
    """x -> FC a1 -> FC a2 -> ya;  x -> FC b1 -> FC b2 -> yb (written branch after branch)."""
    mb = ModelBuilder()
    x = mb.input("x", [2, 8])
    for name in ("a", "b"):
        t = x
        for j in (1, 2):
            o = mb.tensor(f"{name}{j}", [2, 8])
            seed = ord(name) * 10 + j
            mb.op("FULLY_CONNECTED", [t, mb.const(f"w{name}{j}", rnd((8, 8), seed)), mb.const(f"c{name}{j}", rnd((8,), seed))],
                  [o])
            t = o
        mb.output(t)
    return mb.finish()


def labels(bundle_bytes):
    return [d.label.split(" ")[0] + d.label.split("#")[1].rstrip(")") for d in read_bundle(bundle_bytes).dispatches]


def test_levels_interleave_independent_chains():
    p = prepare(two_chains(), warn=False)
    ks = [k for k in p.program if k.kind == GPU]
    assert schedule.levels(p.graph, ks) == [0, 1, 0, 1]
    assert [ks.index(k) for k in schedule.by_levels(p.graph, p.program)] == [0, 2, 1, 3]


def test_scheduled_bundle_has_fewer_barriers_and_same_results():
    pytest.importorskip("vulkan")
    x = rnd((2, 8), 7)
    on, off = gpuc.compile(two_chains(), cache=False), gpuc.compile(two_chains(), cache=False,
                                                                    disable_passes=["schedule_dispatches"])
    assert labels(on) == ["FULLY_CONNECTED0", "FULLY_CONNECTED2", "FULLY_CONNECTED1", "FULLY_CONNECTED3"]
    assert labels(off) == ["FULLY_CONNECTED0", "FULLY_CONNECTED1", "FULLY_CONNECTED2", "FULLY_CONNECTED3"]
    with gpuc.load(on) as a, gpuc.load(off) as b:
        assert sum(a.recorder.barriers_before(0, 4)) == 1 < sum(b.recorder.barriers_before(0, 4))
        for u, v in zip(a.run([x]), b.run([x])):
            np.testing.assert_array_equal(u, v)


def test_program_order_kept_when_the_arena_would_grow(monkeypatch):
    monkeypatch.setattr(schedule, "ARENA_SLACK", 0.5)       # any reordering "costs too much"
    monkeypatch.setattr(schedule, "ARENA_SLACK_BYTES", -1)
    assert labels(gpuc.compile(two_chains(), cache=False)) == labels(
        gpuc.compile(two_chains(), cache=False, disable_passes=["schedule_dispatches"]))


def test_pass_name_is_known():
    with pytest.raises(GpucError, match="schedule_dispatches"):
        gpuc.compile(two_chains(), cache=False, disable_passes=["no_such_pass"])
