"""CLI conventions (issue 31): generated --input tensors (IREE's 1x4xf32=0, NAME=zeros/ones/random,
bare zeros/ones/random), --json on compile, run and devices; gpuc/generated_inputs.py."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("vulkan")

from gpuc import generated_inputs  # noqa: E402
from gpuc.errors import GpucError  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402


def _gpuc(*args, cwd):
    return subprocess.run([sys.executable, "-m", "gpuc", *map(str, args)], capture_output=True, text=True, cwd=cwd)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    d = tmp_path_factory.mktemp("conv")
    mb = ModelBuilder()
    x, y = mb.input("x", [1, 4]), mb.input("y", [1, 4], "int32")
    yf = mb.tensor("yf", [1, 4])
    mb.op("CAST", [y], [yf])
    o = mb.tensor("out", [1, 4])
    mb.op("ADD", [x, yf], [o])
    mb.output(o)
    (d / "m.tflite").write_bytes(mb.finish())
    r = _gpuc("compile", "m.tflite", "-o", "m.gpuc", "--json", cwd=d)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["output"] == "m.gpuc" and info["bytes"] == (d / "m.gpuc").stat().st_size
    assert info["cache"] in ("hit", "miss") and info["stats"]["dispatches"] >= 1
    return d


def test_parse_specs():
    name, g = generated_inputs.parse("1x224x224x3xf32=0")
    assert name is None and g.shape == (1, 224, 224, 3) and g.dtype == "float32" and g.fill == "0"
    name, g = generated_inputs.parse("serving_default_x:0=zeros")
    assert name == "serving_default_x:0" and g.shape is None and g.fill == "zeros"
    assert generated_inputs.parse("x=2x3xi8=random")[1].shape == (2, 3)
    assert generated_inputs.parse("f32=1.5")[1].shape == ()
    assert generated_inputs.parse("x=some/file.npy") is None and generated_inputs.parse("a.npy") is None
    with pytest.raises(GpucError, match="not a int8 value"):
        generated_inputs.parse("4xi8=300")[1].make(None, np.random.default_rng(0))


def test_run_generated_inputs_json(bundle):
    r = _gpuc("run", "m.gpuc", "-i", "1x4xf32=1.5", "-i", "1x4xi32=2", "--json", cwd=bundle)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["outputs"][0] == {"name": "out", "shape": [1, 4], "dtype": "float32", "min": 3.5, "max": 3.5,
                                 "mean": 3.5, "nonfinite": 0} and out["run_ms"] > 0 and out["device"]
    r = _gpuc("run", "m.gpuc", "-i", "y=ones", "-i", "x=zeros", "-o", "o.npy", "--json", cwd=bundle)
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(bundle / "o.npy"), np.ones((1, 4), np.float32))
    r1 = _gpuc("run", "m.gpuc", "-i", "random", "-i", "random", "-o", "r1.npy", cwd=bundle)
    r2 = _gpuc("run", "m.gpuc", "-i", "random", "-i", "random", "-o", "r2.npy", cwd=bundle)
    assert r1.returncode == 0 and r2.returncode == 0, r1.stderr + r2.stderr
    a = np.load(bundle / "r1.npy")
    np.testing.assert_array_equal(a, np.load(bundle / "r2.npy"))       # seeded
    assert np.unique(a).size > 1


def test_generated_input_errors(bundle):
    r = _gpuc("run", "m.gpuc", "-i", "1x4xf64=1", "-i", "1x4xi32=2", cwd=bundle)
    assert r.returncode == 2 and "expected dtype float32" in r.stderr and "Traceback" not in r.stderr
    r = _gpuc("run", "m.gpuc", "-i", "zeros", "-i", "zeros", "-i", "ones", cwd=bundle)
    assert r.returncode == 2 and "--input ones" in r.stderr


def test_devices_json(tmp_path):
    r = _gpuc("devices", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    devs = json.loads(r.stdout)
    assert devs and {"index", "name", "type"} <= set(devs[0])


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_bundles_honour_the_umask_and_cache_hits_are_copies(bundle, tmp_path, monkeypatch, umask):
    """A bundle written by compile (a miss, a library cache hit, the CLI's cached fast path) gets
    0666 less the umask, and is a file of its own: never a hard link to the cache's 0600 entry."""
    import gpuc
    cache = tmp_path / "cache"
    monkeypatch.setenv("GPUC_CACHE_DIR", str(cache))
    model = (bundle / "m.tflite").read_bytes()
    old = os.umask(umask)
    try:
        gpuc.compile(model, output=tmp_path / "miss.gpuc")
        gpuc.compile(model, output=tmp_path / "hit.gpuc")            # the same model and options: a cache hit
        for name in ("cli_miss.gpuc", "cli_hit.gpuc"):                # the second: the launcher's fast path
            r = _gpuc("compile", bundle / "m.tflite", "-o", tmp_path / name, "--json", cwd=tmp_path)
            assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["cache"] == "hit"
    finally:
        os.umask(old)
    cached = [p for p in cache.rglob("*") if p.is_file()]
    for name in ("miss.gpuc", "hit.gpuc", "cli_miss.gpuc", "cli_hit.gpuc"):
        data, st = (tmp_path / name).read_bytes(), (tmp_path / name).stat()
        entry = [p for p in cached if p.read_bytes() == data]
        assert len(entry) == 1 and entry[0].stat().st_mode & 0o777 == 0o600, name
        assert st.st_mode & 0o777 == 0o666 & ~umask, (name, oct(st.st_mode))
        assert st.st_nlink == 1 and st.st_ino != entry[0].stat().st_ino, name
    (tmp_path / "hit.gpuc").write_bytes(b"overwritten")          # the user's file is theirs: the cache is intact
    assert gpuc.compile(model) == (tmp_path / "miss.gpuc").read_bytes()


def test_cache_guard_sees_a_changed_user_cache(tmp_path, monkeypatch):
    """tests/helpers/cache_guard.py: a file added to, changed in or removed from the user's cache
    folder during a session is reported, and fails the session under GPUC_TEST_CACHE_GUARD=1."""
    from types import SimpleNamespace
    from helpers import cache_guard
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    root = tmp_path / "gpuc"
    (root / "bundles").mkdir(parents=True)
    (root / "bundles" / "a.bundle").write_bytes(b"a")
    (root / "bundles" / "b.bundle").write_bytes(b"b")
    state = cache_guard.start()
    assert state[0] == str(root) and len(state[1]) == 2
    lines = []
    session = SimpleNamespace(exitstatus=0, config=SimpleNamespace(pluginmanager=SimpleNamespace(
        get_plugin=lambda name: SimpleNamespace(write_line=lambda msg, **kw: lines.append(msg)))))
    monkeypatch.setenv("GPUC_TEST_CACHE_GUARD", "1")
    cache_guard.finish(session, state)
    assert (session.exitstatus, lines) == (0, [])                     # unchanged: nothing said
    (root / "bundles" / "a.bundle").write_bytes(b"aa")
    (root / "bundles" / "b.bundle").unlink()
    (root / "pipelines").mkdir()
    (root / "pipelines" / "c.bin").write_bytes(b"c")
    cache_guard.finish(session, state)
    assert session.exitstatus == 1 and "changed 3 file(s)" in lines[0] and "c.bin" in lines[0]
    session.exitstatus = 0
    monkeypatch.delenv("GPUC_TEST_CACHE_GUARD")
    cache_guard.finish(session, state)
    assert session.exitstatus == 0 and len(lines) == 2                 # plain pytest: reported only


def _commands():
    import click
    from gpuc.cli import main

    def walk(cmd, path):
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                yield from walk(sub, path + [name])
        else:
            yield " ".join(path), cmd
    return dict(walk(main, []))


def test_every_command_and_option_has_help():
    import click
    cmds = _commands()
    assert {"compile", "run", "verify", "profile", "bench", "generate", "serve", "devices", "ops"} <= set(cmds)
    bare = [f"{name} {p.opts}" for name, c in cmds.items() for p in c.params
            if isinstance(p, click.Option) and not p.hidden and not (p.help or "").strip()]
    assert bare == [], f"options without help: {bare}"
    assert [n for n, c in cmds.items() if not (c.help or "").strip()] == []


def test_readme_cli_reference_agrees_with_the_commands():
    """Each README CLI-reference row's synopsis names only options its command has; compile --help
    says what the README says of --dynamic (any axis, not the batch axis only)."""
    import re
    from helpers.repo import ROOT
    cmds = _commands()
    rows = 0
    for line in (ROOT / "README.md").read_text().splitlines():
        m = re.match(r"\| `gpuc ([a-z]+(?: [a-z]+)?)([^`]*)`", line)
        if not m:
            continue
        synopsis = m.group(2)
        name = m.group(1) if m.group(1) in cmds else m.group(1).split()[0]
        cmd = cmds.get(name) or next((c for n, c in cmds.items() if n.startswith(name + " ")), None)
        assert cmd is not None, f"README names a command gpuc lacks: {m.group(1)}"
        opts = {o for p in cmd.params for o in getattr(p, "opts", [])}
        named = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", synopsis))
        assert named <= opts, f"README's `gpuc {name}` names {sorted(named - opts)}, which it does not take"
        rows += 1
    assert rows >= 10
    r = subprocess.run([sys.executable, "-m", "gpuc", "compile", "--help"], capture_output=True, text=True)
    text = " ".join(r.stdout.split())
    assert r.returncode == 0 and "any other axis of an input" in text and "height and width" in text
    assert "any other axis" in (ROOT / "README.md").read_text()
