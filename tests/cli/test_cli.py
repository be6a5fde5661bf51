"""The gpuc command line: exit codes, messages, npz outputs, inspect."""
import json
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("vulkan")


def gpuc(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "gpuc.cli", *map(str, args)], capture_output=True, text=True, cwd=cwd)


@pytest.fixture(scope="module")
def mlp_bundle(models_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "mlp.bundle"
    r = gpuc("compile", models_dir / "mlp_small_f32.tflite", "-o", out)
    assert r.returncode == 0, r.stderr
    assert "dispatches" in r.stdout
    return out


def test_run_writes_npz_matching_reference(models_dir, mlp_bundle, tmp_path):
    npz = tmp_path / "o.npz"
    r = gpuc("run", mlp_bundle, "--input", models_dir / "ref" / "mlp_small_f32.in0.npy", "--output", npz)
    assert r.returncode == 0, r.stderr
    assert "top-5" in r.stdout and "shape" in r.stdout
    with np.load(npz) as z:
        out = z[z.files[0]]
    ref = np.load(models_dir / "ref" / "mlp_small_f32.out0.npy")
    assert np.abs(out - ref).max() <= 1e-3 * np.abs(ref).max()


def test_run_by_name(models_dir, mlp_bundle):
    r = gpuc("inspect", mlp_bundle, "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    name = rep["inputs"][0]["name"]
    assert rep["dispatches"] >= 1 and rep["arena_bytes"] > 0
    r = gpuc("run", mlp_bundle, "--input", f"{name}={models_dir / 'ref' / 'mlp_small_f32.in0.npy'}")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("args,needle", [
    (["compile", "/nonexistent.tflite", "-o", "x.bundle"], "cannot read model"),
    (["run", "/nonexistent.bundle"], "cannot read bundle"),
])
def test_bad_paths_exit_2(args, needle, tmp_path):
    r = gpuc(*args, cwd=tmp_path)
    assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr


def test_not_a_model_exit_2(tmp_path):
    p = tmp_path / "junk.tflite"
    p.write_bytes(b"this is not a model at all" * 10)
    r = gpuc("compile", p, "-o", tmp_path / "x.bundle")
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1


def test_corrupt_bundle_exit_2(mlp_bundle, tmp_path):
    data = bytearray(mlp_bundle.read_bytes())
    data[len(data) // 2] ^= 0xFF
    p = tmp_path / "bad.bundle"
    p.write_bytes(bytes(data))
    r = gpuc("run", p, "--input", "x.npy")
    assert r.returncode == 2 and "corrupt bundle" in r.stderr


def test_wrong_input_shape_exit_2(mlp_bundle, tmp_path):
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((3, 3), np.float32))
    r = gpuc("run", mlp_bundle, "--input", x)
    assert r.returncode == 2 and "expected shape" in r.stderr


def test_inspect_model_lists_support(models_dir):
    r = gpuc("inspect", models_dir / "microwakeword_okay_nabu.tflite", "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    nodes = rep["subgraphs"][0]["nodes"]
    assert {n["device"] for n in nodes} == {"gpu", "state", "fused"}    # state: variables, CALL_ONCE
    assert rep["fully_supported"] is True and rep["cpu_nodes"] == 0 and rep["host_round_trips"] == 0
    r = gpuc("inspect", models_dir / "mobilenet_v2_224_f32.tflite")
    assert r.returncode == 0 and "NO " not in r.stdout


def test_unsupported_model_names_the_op(tmp_path):
    """An op with neither a GPU nor a CPU kernel is a compile error naming it."""
    from helpers.builder import ModelBuilder
    mb = ModelBuilder()
    x = mb.input("x", [1], "int32")
    y = mb.tensor("y", [1], "int64")
    mb.op("HASHTABLE_SIZE", [x], [y])          # (refused outright: LOCAL_RESPONSE_NORMALIZATION now runs)
    mb.output(y)
    model = tmp_path / "hashtable.tflite"
    model.write_bytes(mb.finish())
    r = gpuc("compile", model, "-o", tmp_path / "x.bundle", "--no-cache")
    assert r.returncode == 2 and "unsupported" in r.stderr and "Traceback" not in r.stderr
    assert "HASHTABLE_SIZE" in r.stderr and "string" in r.stderr


def test_bench_json_separates_device_start_up(mlp_bundle):
    r = gpuc("bench", str(mlp_bundle), "--runs", "3", "--json")
    assert r.returncode == 0, r.stderr
    b = json.loads(r.stdout.strip().splitlines()[-1])
    for k in ("load_cold_ms", "load_warm_ms", "device_open_ms", "model_load_cold_ms", "model_load_warm_ms",
              "first_run_ms", "median_ms", "p90_ms", "min_ms", "runs_per_s", "device", "driver_version"):
        assert k in b, k
    assert b["runs"] == 3 and b["min_ms"] <= b["median_ms"] <= b["p90_ms"]
    assert 0 < b["device_open_ms"] < b["load_warm_ms"]
    assert abs(b["model_load_warm_ms"] + b["device_open_ms"] - b["load_warm_ms"]) < 0.01
    steps = b["load_steps_warm_ms"]
    assert list(steps) == ["bundle", "device_wait", "buffers", "pipelines", "descriptors", "record", "upload_wait"]
    assert all(v >= 0 for v in steps.values()) and sum(steps.values()) <= b["load_warm_ms"] + 0.01
    dev = b["device_open_steps_ms"]
    assert set(dev) == {"vkCreateInstance", "queries", "vkCreateDevice", "queue_pool"}
    assert sum(dev.values()) <= b["device_open_ms"] + 0.01
