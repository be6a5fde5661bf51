"""`--input` and `--output` files of the CLI (issue 26, build 5; rows 11, 13, 14): .npz inputs matched by
name (or arr_0.. in model order), strict dtypes with --cast as the opt-in, and --output that creates its
folder or fails before the run, writing .npy or .npz as named."""
import os
import subprocess
import sys

import numpy as np
import pytest

import gpuc
from helpers.builder import ModelBuilder

pytest.importorskip("vulkan")


def gpuc_cli(*args):
    return subprocess.run([sys.executable, "-m", "gpuc.cli", *map(str, args)], capture_output=True, text=True)


def two_output_model() -> bytes:
    """sum = a + b, diff = a - b."""
    mb = ModelBuilder()
    a, b = mb.input("a", [2, 3]), mb.input("b", [2, 3])
    s, d = mb.tensor("sum", [2, 3]), mb.tensor("diff", [2, 3])
    mb.op("ADD", [a, b], [s])
    mb.op("SUB", [a, b], [d])
    mb.output(s)
    mb.output(d)
    return mb.finish()


def one_output_model() -> bytes:
    mb = ModelBuilder()
    x = mb.input("x", [2, 3])
    y = mb.tensor("y", [2, 3])
    mb.op("MUL", [x, x], [y])
    mb.output(y)
    return mb.finish()


A = np.arange(6, dtype=np.float32).reshape(2, 3)
B = np.full((2, 3), 0.5, np.float32)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli_inputs")
    (d / "two.tflite").write_bytes(two_output_model())
    gpuc.compile(str(d / "two.tflite"), output=str(d / "two.bundle"), cache=False)
    gpuc.compile(one_output_model(), output=str(d / "one.bundle"), cache=False)
    np.save(d / "a.npy", A)
    np.save(d / "b.npy", B)
    np.savez(d / "named.npz", b=B, a=A)                 # by name, not in model order
    np.savez(d / "positional.npz", A, B)                # arr_0, arr_1
    np.savez(d / "unknown.npz", a=A, c=B)
    np.save(d / "a_u8.npy", A.astype(np.uint8))
    np.save(d / "a_f64.npy", A.astype(np.float64) + 0.25)
    np.save(d / "a_big.npy", np.full((2, 3), 1e39))
    return d


def _outputs(path):
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


# -- row 14: .npz inputs -----------------------------------------------------------------------------
@pytest.mark.parametrize("archive", ["named.npz", "positional.npz"])
def test_npz_input_by_name_or_position(files, tmp_path, archive):
    out = tmp_path / "o.npz"
    r = gpuc_cli("run", files / "two.bundle", "--input", files / archive, "--output", out)
    assert r.returncode == 0, r.stderr
    got = _outputs(out)
    np.testing.assert_array_equal(got["sum"], A + B)
    np.testing.assert_array_equal(got["diff"], A - B)


def test_npz_input_with_unknown_and_missing_names_lists_the_inputs(files):
    r = gpuc_cli("run", files / "two.bundle", "--input", files / "unknown.npz")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "unknown key(s) ['c']" in r.stderr and "missing input(s) ['b']" in r.stderr
    assert "the model's inputs are ['a', 'b']" in r.stderr


def test_npz_input_must_come_alone(files):
    r = gpuc_cli("run", files / "two.bundle", "--input", files / "named.npz", "--input", files / "b.npy")
    assert r.returncode == 2 and "only --input" in r.stderr


def test_npz_input_in_profile_and_verify(files):
    r = gpuc_cli("profile", files / "two.bundle", "--input", files / "named.npz", "--runs", "1", "--json")
    assert r.returncode == 0, r.stderr
    r = gpuc_cli("verify", files / "two.tflite", "--input", files / "positional.npz")
    assert r.returncode == 0 and "PASS" in r.stdout, r.stderr + r.stdout


# -- row 11 (CLI): dtypes as strict as LiteRT, --cast converts what fits ------------------------------
def test_dtype_mismatch_exit_2_and_cast(files, tmp_path):
    r = gpuc_cli("run", files / "two.bundle", "-i", files / "a_u8.npy", "-i", files / "b.npy")
    assert r.returncode == 2 and "input #0 'a': expected dtype float32, got uint8" in r.stderr
    assert "--cast" in r.stderr and "device:" not in r.stdout
    out = tmp_path / "o.npz"
    r = gpuc_cli("run", files / "two.bundle", "-i", files / "a_u8.npy", "-i", files / "b.npy", "--cast", "-o", out)
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(_outputs(out)["sum"], A + B)


def test_cast_refuses_a_value_that_does_not_fit(files):
    r = gpuc_cli("run", files / "two.bundle", "-i", files / "a_big.npy", "-i", files / "b.npy", "--cast")
    assert r.returncode == 2 and "input #0 'a'" in r.stderr and "1e+39" in r.stderr and "overflows float32" in r.stderr


def test_verify_is_strict_and_casts(files):
    r = gpuc_cli("verify", files / "two.tflite", "-i", files / "a_f64.npy", "-i", files / "b.npy")
    assert r.returncode == 2 and "expected dtype float32, got float64" in r.stderr
    r = gpuc_cli("verify", files / "two.tflite", "-i", files / "a_f64.npy", "-i", files / "b.npy", "--cast")
    assert r.returncode == 0 and "PASS" in r.stdout, r.stderr + r.stdout


# -- row 13: --output ------------------------------------------------------------------------------
def test_output_creates_its_folder(files, tmp_path):
    out = tmp_path / "new" / "deeper" / "out.npz"
    r = gpuc_cli("run", files / "two.bundle", "-i", files / "a.npy", "-i", files / "b.npy", "--output", out)
    assert r.returncode == 0, r.stderr
    assert set(_outputs(out)) == {"sum", "diff"}
    assert [p.name for p in out.parent.iterdir()] == ["out.npz"]        # no temporary file left


def test_output_under_a_file_fails_before_the_run(files, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = gpuc_cli("run", files / "two.bundle", "-i", files / "a.npy", "-i", files / "b.npy",
                 "--output", blocker / "out.npz")
    assert r.returncode == 2 and "is a file" in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == ""                                             # nothing ran


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes anywhere")
def test_output_in_a_read_only_folder_fails_before_the_run(files, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        r = gpuc_cli("run", files / "two.bundle", "-i", files / "a.npy", "-i", files / "b.npy", "-o", ro / "o.npz")
    finally:
        ro.chmod(0o755)
    assert r.returncode == 2 and "not writable" in r.stderr and r.stdout == ""


def test_output_npy_for_one_output(files, tmp_path):
    out = tmp_path / "y.npy"
    r = gpuc_cli("run", files / "one.bundle", "-i", files / "a.npy", "-o", out)
    assert r.returncode == 0, r.stderr
    y = np.load(out)
    assert isinstance(y, np.ndarray)                                  # an .npy, not an npz under that name
    np.testing.assert_array_equal(y, A * A)


def test_output_npy_refused_for_two_outputs_before_the_run(files, tmp_path):
    r = gpuc_cli("run", files / "two.bundle", "-i", files / "a.npy", "-i", files / "b.npy", "-o", tmp_path / "y.npy")
    assert r.returncode == 2 and "2 outputs" in r.stderr and r.stdout == ""
    assert not (tmp_path / "y.npy").exists()


@pytest.mark.parametrize("name", ["out.txt", "out"])
def test_output_needs_npz_or_npy(files, tmp_path, name):
    r = gpuc_cli("run", files / "one.bundle", "-i", files / "a.npy", "-o", tmp_path / name)
    assert r.returncode == 2 and ".npz" in r.stderr and r.stdout == ""
