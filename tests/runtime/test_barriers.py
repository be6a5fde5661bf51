"""Only the barriers that matter (runtime/hazards.py): a dispatch waits for the ones before it only
on a read-after-write, write-after-write or write-after-read of arena bytes.  `make validate` runs
its tests under the validation layer's synchronization validation, which reports every missing
barrier; the last test here proves that check can fail."""
import os
import subprocess
import sys

import numpy as np
import pytest

import gpuc
from gpuc.runtime import hazards, spirv
from gpuc.runtime.bundle import read_bundle
from helpers.builder import ModelBuilder
from helpers.data import rnd

pytest.importorskip("vulkan")


def branches_model():
    """x -> FC a -> ya;  x -> FC b -> yb;  ya + yb -> y: two independent FCs, then their sum."""
    mb = ModelBuilder()
    x = mb.input("x", [3, 8])
    ya, yb, y = (mb.tensor(n, [3, 5]) for n in ("ya", "yb", "y"))
    for name, out, seed in (("a", ya, 1), ("b", yb, 2)):
        mb.op("FULLY_CONNECTED", [x, mb.const(f"w{name}", rnd((5, 8), seed)), mb.const(f"b{name}", rnd((5,), seed + 9))],
              [out])
    mb.op("MUL", [ya, yb], [y])
    for t in (ya, yb, y):
        mb.output(t)
    return mb.finish()


def test_written_bindings_are_the_outputs():
    b = read_bundle(gpuc.compile(branches_model(), cache=False))
    for d in b.dispatches:
        sh = b.shaders[d.shader]
        assert spirv.written_bindings(sh.spirv, sh.bindings) == {0}, d.label
    assert spirv.written_bindings(b"not spir-v", 3) == {0, 1, 2}          # unreadable: all (safe)


def test_independent_dispatches_share_a_barrier():
    b = read_bundle(gpuc.compile(branches_model(), cache=False))
    labels = [d.label for d in b.dispatches]
    assert len(labels) == 3 and labels[2].startswith("MUL"), labels
    assert hazards.plan(hazards.arena_access(b)) == [False, False, True]        # FC b runs beside FC a; MUL waits for both


def test_results_and_all_barriers_switch(monkeypatch):
    model = branches_model()
    x = rnd((3, 8), 4)
    with gpuc.load(gpuc.compile(model, cache=False)) as m:
        elided = m.run([x])
    monkeypatch.setenv("GPUC_ALL_BARRIERS", "1")
    with gpuc.load(gpuc.compile(model, cache=False)) as m:
        assert sum(m.recorder.barriers_before(0, 3)) == 2
        for a, b in zip(elided, m.run([x])):
            np.testing.assert_array_equal(a, b)


SYNCVAL = dict(GPUC_VALIDATION="1", VK_LAYER_ENABLES="VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT")
SCRIPT = """
import sys, numpy as np, gpuc
sys.path.insert(0, {tests!r})
from gpuc.runtime import validation
import gpuc.runtime.recorder as R
from helpers.models import block_model
if {strip}:
    R.Recorder.barriers_before = lambda self, first, last: [False] * (last - first)
with gpuc.load(gpuc.compile(block_model(), cache=False)) as m:
    m.run([np.ones((1, 6, 6, 4), np.float32)])
print("hazards", sum("SYNC-HAZARD" in s for s in validation.MESSAGES), "messages", len(validation.MESSAGES))
"""


def _syncval_run(strip: bool) -> str:
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-c", SCRIPT.format(tests=tests, strip=strip)], capture_output=True,
                       text=True, env=dict(os.environ, **SYNCVAL), timeout=300)
    if "is not installed" in r.stderr:
        pytest.skip("VK_LAYER_KHRONOS_validation is not installed")
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout.strip().splitlines()[-1]


def test_synchronization_validation_sees_missing_barriers():
    """With no barriers at all the layer reports hazards; with the barrier plan, none."""
    assert _syncval_run(strip=False) == "hazards 0 messages 0"
    hazards = int(_syncval_run(strip=True).split()[1])
    assert hazards > 0
