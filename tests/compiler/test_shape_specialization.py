"""Shape specialization at compile time (issue 16, build 1): -1 dims of an input's shape_signature
take the model's shape or --input-shape / input_shapes=, shapes downstream are recomputed, and the
shape arithmetic folds so that the model runs on the GPU alone."""
import json

import numpy as np
import pytest

import gpuc
from gpuc.compiler import normalize_options
from gpuc.compiler.prepare import prepare
from gpuc.errors import GpucError
from gpuc.runtime.bundle import read_bundle
from helpers.audio import FL, HOP, IN_NAME, audio_frontend
from helpers.builder import ModelBuilder
from helpers.litert import run_litert
from helpers.ops import assert_matches


def signal(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, n)).astype(np.float32)


def run_bundle(bundle: bytes, xs):
    from helpers.runner import GpuRunner
    r = GpuRunner()
    try:
        m = gpuc.load(bytes(bundle), device=r.device)
        try:
            return m.run(xs)
        finally:
            m.close()
    finally:
        r.close()


def test_frontend_folds_to_gpu_only():
    p = prepare(audio_frontend())
    assert not p.front.cpu
    ops = [n.op for n in p.graph.nodes]          # SHAPE, the arithmetic, PACK and RANGE folded
    assert "GATHER" in ops and set(ops) <= {"STRIDED_SLICE", "RESHAPE", "GATHER", "MUL"}, ops
    assert all(t.shape_signature is None for t in p.graph.tensors)


def test_input_shape_recomputes_shapes():
    p = prepare(audio_frontend(), normalize_options({"input_shapes": {IN_NAME: (1, 4000)}}))
    nf = (4000 - FL) // HOP + 1
    assert p.graph.t(p.graph.outputs[0]).shape == (nf, FL)
    assert not p.front.cpu


@pytest.mark.parametrize("n", [1000, 4000, 64])
def test_frontend_matches_litert(n):
    pytest.importorskip("vulkan")
    model = audio_frontend()
    x = signal(n, n)
    shapes = None if n == 1000 else {IN_NAME: (1, n)}
    bundle = gpuc.compile(model, cache=False, input_shapes=shapes)
    stats = read_bundle(bundle).stats
    assert stats["cpu_nodes"] == 0 and stats["host_round_trips"] == 0
    ref = run_litert(model, [x.copy()])           # resized to [1, n] where n differs (resize_tensor_input)
    out = run_bundle(bundle, [x])
    assert_matches(out, ref)
    for o, r in zip(out, ref):                    # the bound: 1e-5 relative to max|ref|
        assert np.abs(o.astype(np.float64) - r).max() <= 1e-5 * np.abs(r).max()


def test_bad_input_shapes():
    model = audio_frontend()
    with pytest.raises(GpucError, match="'nope'.*not an input.*serving_default_audio:0"):
        gpuc.compile(model, cache=False, input_shapes={"nope": (1, 5)})
    with pytest.raises(GpucError, match="rank 3"):
        gpuc.compile(model, cache=False, input_shapes={IN_NAME: (1, 5, 5)})
    with pytest.raises(GpucError, match="each >= 1"):
        gpuc.compile(model, cache=False, input_shapes={IN_NAME: (1, 0)})
    with pytest.raises(GpucError, match="NAME=DIMS"):
        normalize_options({"input_shapes": ["1x5"]})
    with pytest.raises(GpucError, match="RANGE"):              # too short for one frame: RANGE is empty
        gpuc.compile(model, cache=False, input_shapes={IN_NAME: (1, 10)})


def test_fixed_dim_refused():
    mb = ModelBuilder()
    x = mb.input("x", [1, 8], shape_signature=[1, -1])
    y = mb.tensor("y", [1, 8])
    mb.op("RELU", [x], [y])
    mb.output(y)
    with pytest.raises(GpucError, match="dimension 0, which the model fixes"):
        gpuc.compile(mb.finish(), cache=False, input_shapes={"x": (2, 8)})


def test_unknown_op_shape_names_the_op():
    mb = ModelBuilder()
    x = mb.input("x", [1, 8, 8, 4], shape_signature=[1, -1, -1, 4])
    y = mb.tensor("y", [1, 16, 16, 1])
    mb.op("DEPTH_TO_SPACE", [x], [y], block_size=2)
    mb.output(y)
    with pytest.raises(GpucError, match=r"DEPTH_TO_SPACE \(operator #0\).*infer"):
        gpuc.compile(mb.finish(), cache=False, input_shapes={"x": (1, 4, 4, 4)})


def test_conv_shapes_follow_the_input_shape():
    """CONV_2D and pools take their output shapes from compiler/dynamic.py's rules (SAME / VALID)."""
    from helpers.litert import run_litert
    mb = ModelBuilder()
    x = mb.input("x", [1, 8, 8, 1], shape_signature=[1, -1, -1, 1])
    c = mb.tensor("c", [1, 4, 4, 2])
    mb.op("CONV_2D", [x, mb.const("w", np.ones((2, 3, 3, 1), np.float32)), mb.const("b", np.zeros(2, np.float32))],
          [c], padding="SAME", stride_h=2, stride_w=2)
    y = mb.tensor("y", [1, 3, 3, 2])
    mb.op("MAX_POOL_2D", [c], [y], padding="VALID", stride_w=1, stride_h=1, filter_width=2, filter_height=2)
    mb.output(y)
    model = mb.finish()
    x = np.random.default_rng(0).uniform(-1, 1, (1, 11, 7, 1)).astype(np.float32)
    with gpuc.load(gpuc.compile(model, cache=False, input_shapes={"x": (1, 11, 7, 1)})) as m:
        got, = m.run([x])
    ref, = run_litert(model, [x])
    assert got.shape == ref.shape == (1, 5, 3, 2)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_colon_names_parse():
    o = normalize_options({"input_shapes": ["serving_default_x:0=1x144000"]})
    assert o["input_shapes"] == {"serving_default_x:0": [1, 144000]}
    json.dumps(o)


def test_input_shapes_enter_the_cache_key():
    from gpuc.compiler.cache import model_key
    from gpuc.compiler.options import resolve
    model = audio_frontend()
    keys = {model_key(model, resolve(**o)) for o in
            ({}, {"input_shapes": {IN_NAME: (1, 2000)}}, {"input_shapes": [f"{IN_NAME}=1x3000"]})}
    assert len(keys) == 3
