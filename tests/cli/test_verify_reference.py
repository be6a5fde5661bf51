"""gpuc verify's reference side: integer inputs it makes up are valid ids / indices; where LiteRT cannot run
the model on the inputs, a clear error (exit 2), not an internal one; quantized outputs pass within one
step of their grid."""
import subprocess
import sys

import numpy as np
import pytest

from helpers.builder import ModelBuilder
from helpers.data import rnd

pytest.importorskip("vulkan")
pytest.importorskip("ai_edge_litert")


@pytest.fixture(scope="module")
def lookup(tmp_path_factory):
    mb = ModelBuilder()
    ids = mb.input("ids", (1, 3), "int32")
    e = mb.tensor("e", (1, 3, 2))
    mb.op("GATHER", [mb.const("table", rnd((12, 2), 1)), ids], [e], axis=0)
    mb.output(e)
    p = tmp_path_factory.mktemp("m") / "lookup.tflite"
    p.write_bytes(mb.finish())
    return p


def verify(*args):
    return subprocess.run([sys.executable, "-m", "gpuc.cli", "verify", *map(str, args)], capture_output=True,
                          text=True)


def test_made_up_integer_inputs_are_in_range(lookup):
    r = verify(lookup)
    assert r.returncode == 0 and "PASS" in r.stdout, r.stdout + r.stderr


def test_litert_failing_on_the_inputs_is_a_clear_error(lookup, tmp_path):
    np.save(tmp_path / "ids.npy", np.array([[1, 40, 2]], np.int32))       # 40: out of the table
    r = verify(lookup, "--input", tmp_path / "ids.npy")
    assert r.returncode == 2, r.stdout + r.stderr
    # gpuc's own run fails first now (the index check on the GPU), where LiteRT's invoke fails too
    assert ("index 40 out of range" in r.stderr or "LiteRT's CPU interpreter, the reference, cannot run" in r.stderr) \
        and "internal error" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_quantized_output_within_one_step():
    from gpuc.verify import _passes, compare
    out, ref = np.array([[10, 20, 31]], np.int8), np.array([[10, 20, 30]], np.int8)
    c = compare(out, ref)
    assert _passes(dict(c, integer=True), 1e-3) and not _passes(dict(c, integer=False), 1e-3)
    assert not _passes(dict(compare(np.array([[10, 22, 30]], np.int8), ref), integer=True), 1e-3)
