"""gpuc profile: one row per dispatch, times from GPU timestamps; last_gpu_ms after each run."""
import json
import subprocess
import sys

import gpuc
from test_passes import block_model


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
    assert any(x["gflop_per_s"] for x in rep["rows"])


def test_last_gpu_ms_is_reported():
    import numpy as np
    with gpuc.load(gpuc.compile(block_model(), cache=False)) as m:
        m.run([np.zeros(m.inputs[0].shape, np.float32)])
        assert m.last_gpu_ms is None or m.last_gpu_ms >= 0
