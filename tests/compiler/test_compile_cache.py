"""Compile cache and pipeline cache: hits, and damaged entries change speed only, never results."""
import os

import numpy as np
import pytest

import gpuc
from gpuc.compiler import compile as compile_result
from helpers.builder import ModelBuilder
from helpers.data import rnd

pytest.importorskip("vulkan")


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("GPUC_NO_CACHE", raising=False)
    return tmp_path / "cache"


def model():
    mb = ModelBuilder()
    x = mb.input("x", [1, 6, 6, 3])
    y = mb.tensor("y", [1, 6, 6, 4])
    mb.op("CONV_2D", [x, mb.const("w", rnd((4, 3, 3, 3), 1)), mb.const("b", rnd((4,), 2))], [y],
          padding="SAME", stride_h=1, stride_w=1, fused_activation_function="RELU")
    mb.output(y)
    return mb.finish()


def test_compile_cache_hit_and_options_in_key(cache_dir, tmp_path):
    m = model()
    a = compile_result(m, output=tmp_path / "a.bundle")
    assert a.cache == "miss" and not a.hit and a.path == tmp_path / "a.bundle"
    b = compile_result(m, output=tmp_path / "b.bundle")
    assert b.hit and b.key == a.key and a.bundle == b.bundle == (tmp_path / "b.bundle").read_bytes()
    assert compile_result(m, disable_passes=["fuse_activation"]).cache == "miss"
    assert compile_result(m, cache=False).cache is None
    assert oct(os.stat(cache_dir).st_mode & 0o777) == "0o700"


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty"])
def test_damaged_compile_cache_entry_is_recompiled(cache_dir, damage):
    m = model()
    good = gpuc.compile(m)
    (entry,) = (cache_dir / "bundles").glob("*.bundle")
    data = bytearray(entry.read_bytes())
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "flip":
        data[len(data) // 2] ^= 0x40
    else:
        data = b""
    entry.write_bytes(bytes(data))
    r = compile_result(m)
    assert r.bundle == good and r.cache == "miss"


def test_cache_size_cap_evicts_least_recently_used(cache_dir, monkeypatch):
    monkeypatch.setenv("GPUC_CACHE_MAX_BYTES", "1")
    gpuc.compile(model())
    assert len(list((cache_dir / "bundles").glob("*.bundle"))) <= 1
    assert not list((cache_dir / "bundles").glob("*.meta"))         # evicted with its entry


def _run(bundle, x):
    with gpuc.load(bundle) as m:
        return m.run([x])[0], m.load_info["pipeline_cache"]


@pytest.mark.parametrize("damage", ["truncate", "flip_header", "flip_data", "foreign", "garbage"])
def test_damaged_pipeline_cache_changes_nothing(cache_dir, damage):
    bundle = gpuc.compile(model(), cache=False)
    x = rnd((1, 6, 6, 3), 5)
    ref, status = _run(bundle, x)
    assert status == "miss"
    (entry,) = (cache_dir / "pipelines").iterdir()
    out, status = _run(bundle, x)
    assert status == "hit"
    np.testing.assert_array_equal(out, ref)
    data = bytearray(entry.read_bytes())
    if damage == "truncate":
        data = data[: len(data) - 7]
    elif damage == "flip_header":
        data[9] ^= 1                      # vendor ID: as if from another device
    elif damage == "flip_data":
        data[-1] ^= 0xFF
    elif damage == "foreign":
        data[12:16] = b"\xff\xff\xff\xff"  # another device ID
    else:
        data = os.urandom(len(data))
    entry.write_bytes(bytes(data))
    out, status = _run(bundle, x)
    assert status == "miss"                # refused by our header check, rewritten
    np.testing.assert_array_equal(out, ref)
    assert _run(bundle, x)[1] == "hit"


def test_pipeline_cache_can_be_disabled(monkeypatch):
    monkeypatch.setenv("GPUC_PIPELINE_CACHE", "0")
    assert _run(gpuc.compile(model()), rnd((1, 6, 6, 3)))[1] == "off"


def test_compile_is_deterministic():
    assert gpuc.compile(model(), cache=False) == gpuc.compile(model(), cache=False)


def test_concurrent_compiles_leave_only_complete_entries(cache_dir, tmp_path):
    """8 processes compile the same and different models into one cache at once."""
    import subprocess
    import sys
    models = []
    for k in range(3):
        mb = ModelBuilder()
        x = mb.input("x", [1, 4 + k])
        y = mb.tensor("y", [1, 4 + k])
        mb.op("RELU6", [x], [y])
        mb.output(y)
        p = tmp_path / f"m{k}.tflite"
        p.write_bytes(mb.finish())
        models.append(p)
    code = ("import sys, gpuc\nfor _ in range(5):\n"
            "    gpuc.compile(sys.argv[1], output=sys.argv[2])\n")
    env = dict(os.environ, GPUC_CACHE_DIR=str(cache_dir), GPUC_CACHE_MAX_BYTES="20000")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(models[i % 3]), str(tmp_path / f"out{i}.bundle")],
                              env=env) for i in range(8)]
    assert all(p.wait() == 0 for p in procs)
    from gpuc.runtime.bundle import read_bundle
    files = list((cache_dir / "bundles").iterdir())
    assert files and not [e for e in files if e.name.endswith(".tmp")]
    entries = [e for e in files if e.suffix == ".bundle"]
    assert entries
    from gpuc.compiler import cache
    for e in entries:
        read_bundle(e.read_bytes())
        meta = cache.read_meta(e.stem)                 # a sidecar, where there is one, is that entry's
        assert meta is None or cache.vouches(meta, e.read_bytes())
    for i in range(8):
        read_bundle((tmp_path / f"out{i}.bundle").read_bytes())
