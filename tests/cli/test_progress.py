"""Long work shows its progress on a terminal only: `gpuc compile` its stages and N of M shaders,
`gpuc verify` and `gpuc bench` their runs.  Pipes, --json and --quiet get exactly what they got
before (gpuc/progress.py)."""
import json
import os
import subprocess
import sys

import pytest

from helpers.models import block_model
from helpers.terminal import run_on_terminal

pytest.importorskip("vulkan")

STAGES = ["importing the model...", "running passes (", "lowering...", "planning memory...", "packing weights...",
          "compiling shaders", "writing the bundle..."]


@pytest.fixture
def env(tmp_path):
    e = dict(os.environ, GPUC_CACHE_DIR=str(tmp_path / "cache"))
    e.pop("GPUC_NO_CACHE", None)
    return e


@pytest.fixture
def model(tmp_path):
    p = tmp_path / "block.tflite"
    p.write_bytes(block_model())
    return p


def cli(*args):
    return [sys.executable, "-m", "gpuc", *map(str, args)]


def test_compile_on_a_terminal_shows_its_stages(model, tmp_path, env):
    rc, out = run_on_terminal(cli("compile", model, "-o", tmp_path / "b.gpuc", "--no-cache"), env=env)
    assert rc == 0, out
    at = [out.index(s) for s in STAGES]
    assert at == sorted(at), out                         # in the order they run
    r = subprocess.run(cli("inspect", "--json", tmp_path / "b.gpuc"), capture_output=True, text=True, env=env)
    shaders = json.loads(r.stdout)["shaders"]
    assert shaders > 1 and f"{shaders}/{shaders}" in out                 # the bar counts to M of M
    assert out.rstrip().splitlines()[-1].startswith("wrote ")


def test_compile_quiet_or_piped_prints_what_it_always_did(model, tmp_path, env):
    rc, out = run_on_terminal(cli("compile", model, "-o", tmp_path / "q.gpuc", "--no-cache", "-q"), env=env)
    assert (rc, out) == (0, "")
    r = subprocess.run(cli("compile", model, "-o", tmp_path / "p.gpuc", "--no-cache"), capture_output=True, text=True,
                       env=env)
    assert r.returncode == 0 and r.stderr == ""
    assert len(r.stdout.splitlines()) == 1 and r.stdout.startswith("wrote ")


def test_verify_shows_its_runs_on_a_terminal_only(model, env):
    pytest.importorskip("ai_edge_litert")
    rc, out = run_on_terminal(cli("verify", model), env=env)
    assert rc == 0, out
    assert "compiling shaders" in out and "running on " in out and "running LiteRT" in out
    assert out.rstrip().endswith("PASS")
    rc, out = run_on_terminal(cli("verify", model, "--json"), env=env)
    ours = [ln for ln in out.splitlines() if not ln.startswith("INFO: ")]      # (LiteRT's own notice)
    assert rc == 0 and len(ours) == 1 and json.loads(ours[0])["pass"]          # nothing but the JSON
    r = subprocess.run(cli("verify", model), capture_output=True, text=True, env=env)
    assert r.returncode == 0 and "running" not in r.stdout + r.stderr and "compiling" not in r.stderr


def test_bench_shows_its_runs_on_a_terminal_only(model, tmp_path, env):
    bundle = tmp_path / "b.gpuc"
    assert subprocess.run(cli("compile", model, "-o", bundle, "-q"), env=env).returncode == 0
    rc, out = run_on_terminal(cli("bench", bundle, "--runs", "5"), env=env)
    assert rc == 0, out
    assert "load in a fresh process, no pipeline cache..." in out and "5 timed runs" in out and "5/5" in out
    assert "median_ms" in out
    rc, out = run_on_terminal(cli("bench", bundle, "--runs", "5", "--json"), env=env)
    assert rc == 0 and json.loads(out)["runs"] == 5


def test_run_counts_pipelines_on_a_first_run_only(model, tmp_path, env):
    """`gpuc run` of a bundle the pipeline cache has not seen: "compiling pipelines N/M" on a
    terminal; a pipe (--json here) and a second run (a pipeline cache hit) show nothing of it."""
    bundle = tmp_path / "b.gpuc"
    assert subprocess.run(cli("compile", model, "-o", bundle, "-q"), env=env).returncode == 0
    r = subprocess.run(cli("inspect", "--json", bundle), capture_output=True, text=True, env=env)
    shaders = json.loads(r.stdout)["shaders"]
    env["GPUC_CACHE_DIR"] = str(tmp_path / "fresh")                    # no pipeline cache for it yet
    r = subprocess.run(cli("run", bundle, "-i", "x=ones", "--json"), capture_output=True, text=True, env=env)
    assert r.returncode == 0 and r.stderr == "" and json.loads(r.stdout)["outputs"]
    env["GPUC_CACHE_DIR"] = str(tmp_path / "fresh2")
    rc, out = run_on_terminal(cli("run", bundle, "-i", "x=ones"), env=env)
    assert rc == 0, out
    assert "compiling pipelines" in out and f"{shaders}/{shaders}" in out, out
    assert out.index("compiling pipelines") < out.index("device: ")         # before the run's summary
    rc, out = run_on_terminal(cli("run", bundle, "-i", "x=ones"), env=env)                 # the pipeline cache serves them
    assert rc == 0 and "compiling pipelines" not in out and "device: " in out, out
