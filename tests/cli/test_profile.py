"""gpuc profile: one row per dispatch, times from GPU timestamps; last_gpu_ms after each run."""
import json
import subprocess
import sys

import gpuc
from helpers.models import block_model


def test_profile_lists_every_dispatch(tmp_path):
    p = tmp_path / "m.bundle"
    gpuc.compile(block_model(), output=p, cache=False)
    r = subprocess.run([sys.executable, "-m", "gpuc.cli", "profile", str(p), "--runs", "3", "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["dispatches"] == len(rep["rows"]) == 3
    assert sorted(x["index"] for x in rep["rows"]) == [0, 1, 2]
    assert rep["sum_dispatch_ms"] > 0 and rep["run_gpu_ms"] > 0
    # rows are the timestamp intervals less the measured probe cost: they add up to a plain run
    assert rep["raw_sum_dispatch_ms"] >= rep["sum_dispatch_ms"] and rep["probe_us"] >= 0
    assert all(x["raw_us"] >= x["us"] >= 0 for x in rep["rows"])
    assert abs(rep["sum_dispatch_ms"] - rep["run_gpu_ms"]) <= 0.1 * rep["run_gpu_ms"] or rep["probe_us"] == 0
    assert any(x["gflop_per_s"] for x in rep["rows"])


def test_last_gpu_ms_is_reported():
    import numpy as np
    with gpuc.load(gpuc.compile(block_model(), cache=False)) as m:
        m.run([np.zeros(m.inputs[0].shape, np.float32)])
        assert m.last_gpu_ms is None or m.last_gpu_ms >= 0


def test_last_gpu_ms_follows_the_last_completed_run():
    """Timestamps are read lazily; a slot reused by a later run must not lose or mix up the time."""
    import numpy as np
    with gpuc.load(gpuc.compile(block_model(), cache=False)) as m:
        if not m.timestamps:
            return
        x = np.zeros(m.inputs[0].shape, np.float32)
        for _ in range(3):
            hs = [m.run_async([x]) for _ in range(3)]      # 3 runs on 2 slots: slot 0 is reused
            for h in hs:
                h.wait()
            assert m.last_gpu_ms is not None and m.last_gpu_ms > 0
        m.run([x])
        first = m.last_gpu_ms
        assert first is not None and first > 0 and m.last_gpu_ms == first     # a second read: same value


def test_profile_takes_a_batch_of_a_max_batch_bundle(tmp_path):
    """A batch-native --max-batch bundle profiled on 5 items records as many dispatches as on one."""
    import numpy as np
    p = tmp_path / "m.bundle"
    gpuc.compile(block_model(), output=p, cache=False, max_batch=8)
    with gpuc.load(str(p)) as m:
        shape = (5,) + tuple(m.inputs[0].shape[1:])
    np.save(tmp_path / "x.npy", np.random.default_rng(0).standard_normal(shape).astype(np.float32))
    r = subprocess.run([sys.executable, "-m", "gpuc.cli", "profile", str(p), "--input", str(tmp_path / "x.npy"),
                        "--runs", "2", "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["items"] == 5 and rep["dispatches"] == rep["recorded_dispatches"] == len(rep["rows"]) == 3


def test_profile_of_an_input_with_a_leading_dim_above_one(tmp_path):
    """A batch-1 bundle whose input is [8, 8] (no --max-batch): the input is one item, whatever axis 0 is."""
    import numpy as np
    from helpers.builder import ModelBuilder
    mb = ModelBuilder()
    x = mb.input("x", (8, 8))
    y = mb.tensor("y", (8, 4))
    mb.op("FULLY_CONNECTED", [x, mb.const("w", np.ones((4, 8), np.float32)), -1], [y])
    mb.output(y)
    from gpuc.runtime.profile import profile
    with gpuc.load(gpuc.compile(mb.finish(), cache=False)) as m:
        if not m.timestamps:
            return
        r = profile(m, [np.ones((8, 8), np.float32)], runs=1)
    assert r["items"] == 1 and r["dispatches"] == 1


def _two_signature_model() -> bytes:
    from helpers.signatures import two_signature_model
    return two_signature_model()


def test_profile_a_chosen_signature(tmp_path):
    """--signature NAME profiles that signature's program (a decode step of an LLM bundle), not the first."""
    from gpuc.runtime.bundle import read_bundle
    p = tmp_path / "m.bundle"
    gpuc.compile(_two_signature_model(), output=p, cache=False)
    step = next(s for s in read_bundle(p.read_bytes()).signatures if s.signature == "step")
    r = subprocess.run([sys.executable, "-m", "gpuc.cli", "profile", str(p), "--signature", "step", "--runs", "2",
                        "--input", "x=random", "--input", "pos=1xi32=2", "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)                          # (fill_3 is the bundle's first signature)
    assert rep["signature"] == "step"
    assert rep["dispatches"] == len(rep["rows"]) == len(step.dispatches)
    assert sorted(x["op"] for x in rep["rows"]) == sorted(d.label for d in step.dispatches)
    shapes = {str(s) for x in rep["rows"] for s in x["shapes"]}
    assert "[1, 1, 4]" in shapes and "[1, 3, 4]" not in shapes        # the step's x, not fill_3's
    by = rep["by_shader"]                               # the time per shader adds up to the rows'
    assert sum(g["dispatches"] for g in by) == rep["dispatches"] and len({g["shader"] for g in by}) == len(by)
    assert abs(sum(g["us"] for g in by) - sum(x["us"] for x in rep["rows"])) < 1e-6 * max(1.0, rep["sum_dispatch_ms"] * 1e3)
    r = subprocess.run([sys.executable, "-m", "gpuc.cli", "profile", str(p), "--signature", "nope", "--json"],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "nope" in r.stderr and "Traceback" not in r.stderr
