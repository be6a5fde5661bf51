"""How long a run may take on the GPU (LoadedModel.timeout_s, gpuc.load(timeout_s=), GPUC_GPU_TIMEOUT_S,
--timeout): a default that fits the device (no limit on a CPU implementation such as lavapipe, 60 s
on a GPU); past the limit a clear GpuTimeoutError (exit 4), and the model stays usable or closes
cleanly.  A deliberately slow builder model (helpers.models.heavy_model) stands in for a big one."""
import math
import subprocess
import sys
import time

import numpy as np
import pytest

import gpuc
from gpuc.errors import GpucError, GpuTimeoutError
from gpuc.runtime import device as D
from helpers.models import heavy_model

pytest.importorskip("vulkan")

SHAPE, LAYERS = (512, 512), 6          # about 0.6 s a run on lavapipe (2 cores)


@pytest.fixture(scope="module")
def heavy(tmp_path_factory):
    """(bundle path, input path, input, reference output, seconds of one run, a timeout it overruns)."""
    d = tmp_path_factory.mktemp("timeout")
    bundle, xpath = d / "heavy.gpuc", d / "x.npy"
    gpuc.compile(heavy_model(*SHAPE, LAYERS), output=str(bundle), cache=False)
    x = np.random.default_rng(1).uniform(-1, 1, SHAPE).astype(np.float32)
    np.save(xpath, x)
    with gpuc.load(str(bundle)) as m:
        m.run([x])                                   # warm
        t0 = time.perf_counter()
        ref = m.run([x])[0]
        seconds = time.perf_counter() - t0
    if seconds < 0.2:
        pytest.skip(f"one run takes {seconds * 1e3:.1f} ms here: too fast to overrun a timeout reliably")
    return bundle, xpath, x, ref, seconds, min(0.05, seconds / 10)


def test_parse_and_defaults():
    assert D.parse_timeout(None) is None and D.parse_timeout("") is None
    assert D.parse_timeout("0") == D.parse_timeout(0) == D.parse_timeout("none") == math.inf
    assert D.parse_timeout("2.5") == 2.5
    for bad in ("abc", -1, "nan", True):
        with pytest.raises(GpucError, match="number of seconds"):
            D.parse_timeout(bad)

    class Fake:
        is_cpu = False
    assert D.Device.default_timeout_s(Fake()) == 60.0          # a GPU: a minute means hung
    Fake.is_cpu = True
    assert D.Device.default_timeout_s(Fake()) == math.inf      # lavapipe: big models take minutes


def test_default_fits_the_device_and_env_and_load_override(heavy, monkeypatch):
    bundle = heavy[0]
    with gpuc.load(str(bundle)) as m:
        assert m.timeout_s == (math.inf if m.device.is_cpu else 60.0)
    monkeypatch.setenv("GPUC_GPU_TIMEOUT_S", "7")
    with gpuc.load(str(bundle)) as m:
        assert m.timeout_s == 7
        m.timeout_s = 0
        assert m.timeout_s == math.inf
    with gpuc.load(str(bundle), timeout_s=3) as m:
        assert m.timeout_s == 3
    with pytest.raises(GpucError, match="timeout_s must be"):
        gpuc.load(str(bundle), timeout_s="soon")


def test_timeout_is_clear_and_the_model_stays_usable(heavy):
    bundle, _, x, ref, _, short = heavy
    with gpuc.load(str(bundle), timeout_s=short) as m:
        dev = m.device
        t0 = time.perf_counter()
        with pytest.raises(GpuTimeoutError, match=f"did not finish within {short:g} s .*--timeout"):
            m.run([x])
        assert time.perf_counter() - t0 < 0.5 + short        # it did not wait for the run
        h = m.run_async([x])
        with pytest.raises(GpuTimeoutError):
            h.wait()                                          # a handle's wait times out too ...
        m.timeout_s = 0
        np.testing.assert_array_equal(h.wait()[0], ref)       # ... and may be waited for again
        np.testing.assert_array_equal(m.run([x])[0], ref)     # the model runs on, with the same result
        m.timeout_s = short
        with pytest.raises(GpuTimeoutError):
            m.run([x])
        with pytest.raises(GpuTimeoutError):
            m.reset_state()                                   # waits for that run: still too long
    # closing with a timed-out run in flight waits for it, then frees everything (no warning: it ended)
    assert not dev._late


def test_close_right_after_a_timeout(heavy, capfd):
    bundle, _, x, _, seconds, short = heavy
    m = gpuc.load(str(bundle), timeout_s=short)
    with pytest.raises(GpuTimeoutError):
        m.run([x])
    t0 = time.perf_counter()
    m.close()
    assert time.perf_counter() - t0 < seconds * 3 + 1
    assert "warning" not in capfd.readouterr().err
    with gpuc.load(str(bundle)) as m2:                        # the shared device is fine
        m2.run([x])


LEFT_TO_EXIT = """
import sys, time, numpy as np, gpuc
from gpuc.errors import GpuTimeoutError
from gpuc.runtime import device as D
D.CLOSE_GRACE_S = 0.01                   # the run outlives the grace: it stands for a GPU that hangs
dev = gpuc.open_device()
m = gpuc.load(sys.argv[1], device=dev, timeout_s=0.01)
try:
    m.run([np.load(sys.argv[2])])
except GpuTimeoutError as e:
    print("timed out", file=sys.stderr)
t0 = time.perf_counter()
m.close()
dev.close()
print(f"{time.perf_counter() - t0:.3f}", dev.hung, dev.device is None)     # close()'s seconds, hung, left
"""


def test_a_run_that_never_ends_is_left_to_the_process_exit(heavy):
    """A run that times out and then outlives close()'s grace (a hung GPU): nothing is destroyed under
    it, close() returns, one warning says so, and the process exits normally."""
    bundle, xpath = heavy[0], heavy[1]
    r = subprocess.run([sys.executable, "-c", LEFT_TO_EXIT, str(bundle), str(xpath)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    closed, hung, gone = r.stdout.split()
    assert float(closed) < 0.5 and hung == "True" and gone == "True"
    warnings = [ln for ln in r.stderr.splitlines() if "warning" in ln]
    assert len(warnings) == 1 and "left to the process's exit" in warnings[0], r.stderr


def gpuc_cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "gpuc", *map(str, args)], capture_output=True, text=True, env=env)


def test_cli_timeout_exit_4_and_default_completes(heavy, tmp_path):
    bundle, xpath, _, ref, _, short = heavy
    r = gpuc_cli("run", bundle, "-i", xpath, "--timeout", short)
    assert r.returncode == 4, r.stderr
    assert r.stderr.startswith(f"gpuc: error: the GPU did not finish within {short:g} s") and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    out = tmp_path / "out.npz"
    r = gpuc_cli("run", bundle, "-i", xpath, "-o", out)            # the device's default: no limit on lavapipe
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(out)[f"y{LAYERS - 1}"], ref)


def test_cli_env_and_bad_values(heavy, monkeypatch):
    import os
    bundle, xpath, _, _, _, short = heavy
    r = gpuc_cli("run", bundle, "-i", xpath, env=dict(os.environ, GPUC_GPU_TIMEOUT_S=str(short)))
    assert r.returncode == 4 and "did not finish" in r.stderr
    r = gpuc_cli("run", bundle, "-i", xpath, env=dict(os.environ, GPUC_GPU_TIMEOUT_S="soon"))
    assert r.returncode == 2 and "GPUC_GPU_TIMEOUT_S must be a number of seconds" in r.stderr
    r = gpuc_cli("run", bundle, "-i", xpath, "--timeout", "-1")
    assert r.returncode == 2 and "--timeout" in r.stderr
    r = gpuc_cli("profile", bundle, "-i", xpath, "--runs", "1", "--timeout", short)
    assert r.returncode == 4 and "did not finish" in r.stderr
