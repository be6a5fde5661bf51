"""Multi-signature bundles (compiler/signatures.py, runtime/signatures.py): a tiny model with two
signatures that thread a cache through DYNAMIC_UPDATE_SLICE (as litert-torch's prefill / decode do),
against LiteRT's signature runners fed the cache explicitly; the API, `gpuc inspect`, `gpuc run
--signature`, state shared across signatures and reset, weights shared, bad names and bad bundles."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.errors import BundleError, GpucError  # noqa: E402
from gpuc.runtime import bundle as B  # noqa: E402
from helpers.signatures import CACHE, W, two_signature_model  # noqa: E402

@pytest.fixture(scope="module")
def model_and_bundle():
    model = two_signature_model()
    return model, gpuc.compile(model)


def _litert(model, feeds):
    """LiteRT's signature runners over the feeds [(signature, x, pos)], the cache fed back each time."""
    from ai_edge_litert.interpreter import Interpreter
    it = Interpreter(model_content=model)
    cache, totals = np.zeros(CACHE, np.float32), []
    for key, x, pos in feeds:
        out = it.get_signature_runner(key)(x=x, pos=pos, cache=cache)
        cache = out["cache"]
        totals.append(out["total"])
    return totals


def test_state_shared_across_signatures_against_litert(model_and_bundle):
    model, bundle = model_and_bundle
    rng = np.random.default_rng(0)
    feeds = [("fill_3", rng.standard_normal([1, 3, 4]).astype(np.float32), np.array([0], np.int32))]
    feeds += [("step", rng.standard_normal([1, 1, 4]).astype(np.float32), np.array([p], np.int32)) for p in (3, 4, 9)]
    ref = _litert(model, feeds)                      # position 9: clamped to the last row, as LiteRT does
    with gpuc.load(bundle) as m:
        assert m.signatures == ["fill_3", "step"]
        step = m.signature("step")
        assert m.signature("fill_3") is m and m.signature("step") is step
        for spec in (m, step):                       # the cache is state: not an input, not an output
            assert [s.name for s in spec.inputs] == ["x", "pos"] and [s.name for s in spec.outputs] == ["total"]
        for rep in range(2):                         # reset_state of either runner zeroes the shared cache
            got = [(m if key == "fill_3" else step).run({"x": x, "pos": pos})[0] for key, x, pos in feeds]
            for g, r in zip(got, ref):
                np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)
            (step if rep == 0 else m).reset_state()
        # a step alone after reset sees zeros elsewhere in the cache
        x = feeds[1][1]
        np.testing.assert_allclose(step.run({"x": x, "pos": np.array([2], np.int32)})[0],
                                   2 * (x.reshape(1, 4) @ W.T), rtol=1e-5, atol=1e-5)


def test_bundle_layout_weights_shared_and_inspect(model_and_bundle, tmp_path):
    from click.testing import CliRunner
    from gpuc.cli import main
    _, bundle = model_and_bundle
    b = B.read_bundle(bundle)
    assert b.signature == "fill_3" and [s.signature for s in b.signatures] == ["step"]
    sub = b.signatures[0]
    assert sub.weights is b.weights and sub.arena_bytes == b.arena_bytes
    top_w = {(t.name, t.offset) for t in b.tensors if t.memory == B.WEIGHTS}
    sub_w = {(t.name, t.offset) for t in sub.tensors if t.memory == B.WEIGHTS}
    assert any(n.startswith("w/") for n, _ in top_w) and top_w == sub_w       # one copy of each weight
    assert b.weights.nbytes == 1024                                             # (4 blobs of 256 B, the cache's zeros)
    cache = [(t.offset, t.nbytes) for t in b.tensors if t.name == "cache"]
    assert cache and cache == [(t.offset, t.nbytes) for t in sub.tensors if t.name == "cache"]
    for st in b.stats["signatures"].values():
        assert st["cpu_nodes"] == 0 and st["state"] == ["cache"]
    path = tmp_path / "m.bundle"
    path.write_bytes(bundle)
    r = CliRunner().invoke(main, ["inspect", str(path)])
    assert r.exit_code == 0 and "signature 'fill_3' (this program" in r.output and "signature 'step'" in r.output
    np.save(tmp_path / "x.npy", np.ones([1, 1, 4], np.float32))
    np.save(tmp_path / "pos.npy", np.zeros([1], np.int32))
    r = CliRunner().invoke(main, ["run", str(path), "--signature", "step", "-i", f"x={tmp_path / 'x.npy'}",
                                  "-i", f"pos={tmp_path / 'pos.npy'}"])
    assert r.exit_code == 0 and "total" in r.output, r.output
    r = CliRunner().invoke(main, ["run", str(path), "--signature", "nope"])
    assert r.exit_code != 0 and "no signature 'nope'" in r.output and "fill_3, step" in r.output


def test_bad_signature_bundles_are_refused(model_and_bundle):
    _, bundle = model_and_bundle
    b = B.read_bundle(bundle)
    b.signatures[0].signature = b.signature                   # two signatures of one name
    with pytest.raises(BundleError, match="repeated"):
        B.read_bundle(B.write_bundle(b))
    b = B.read_bundle(bundle)
    b.signatures[0].arena_bytes += 256                        # not over the shared arena
    with pytest.raises(BundleError, match="one arena serves every signature"):
        B.read_bundle(B.write_bundle(b))
    b = B.read_bundle(bundle)
    t = next(t for t in b.signatures[0].tensors if t.memory == B.WEIGHTS)
    t.offset = b.weights.nbytes                               # a weight outside the shared blob
    with pytest.raises(BundleError, match="signature 0 .*outside its memory|lies outside"):
        B.read_bundle(B.write_bundle(b))
    with gpuc.load(bundle) as m, pytest.raises(GpucError, match="no signature 'decode'"):
        m.signature("decode")
