"""End-to-end: real models from ../shared/models compiled, run on Vulkan, compared with LiteRT refs."""
import numpy as np
import pytest

import gpuc

pytest.importorskip("vulkan")

FLOAT_MODELS = ["mobilenet_v2_224_f32", "mlp_small_f32", "mp_hand_landmark_lite", "unet_small_128_f32",
                "mp_selfie_segmentation"]


@pytest.fixture(scope="module")
def device():
    from gpuc.runtime.device import Device
    d = Device()
    yield d
    d.close()


@pytest.mark.parametrize("name", FLOAT_MODELS)
def test_float_model_matches_litert(models_dir, device, name, tmp_path):
    path = tmp_path / f"{name}.bundle"
    gpuc.compile(models_dir / f"{name}.tflite", output=path)
    x = np.load(models_dir / "ref" / f"{name}.in0.npy")
    with gpuc.load(path, device=device) as m:
        outs = m.run([x])
        for i, out in enumerate(outs):
            ref = np.load(models_dir / "ref" / f"{name}.out{i}.npy")
            assert out.shape == ref.shape and out.dtype == ref.dtype
            err = np.abs(out.astype(np.float64) - ref).max()
            assert err <= 1e-3 * np.abs(ref).max(), f"{name} output {i}: max err {err}"
        # a second run of the same loaded model gives the same answer
        again = m.run([x])
        for a, b in zip(outs, again):
            np.testing.assert_array_equal(a, b)


def test_mobilenet_logits(models_dir, device):
    """The softmax input is a much sharper check than near-uniform probabilities."""
    import gpuc.compiler.driver as drv
    from gpuc.compiler.frontend.importer import load_tflite
    from gpuc.compiler.passes import run_passes
    from gpuc.compiler.prepare import lower_graph
    name = "mobilenet_v2_224_f32"
    data = (models_dir / f"{name}.tflite").read_bytes()
    model = load_tflite(data)
    g = model.main
    sm = [n for n in g.nodes if n.op == "SOFTMAX"][-1]
    g.outputs = [sm.inputs[0]]
    g.nodes = g.nodes[:g.nodes.index(sm)]
    run_passes(g)
    kernels = lower_graph(g)
    from gpuc.compiler import DEFAULT_OPTIONS
    bundle = drv.build_bundle(g, kernels, name, dict(DEFAULT_OPTIONS), "test", {})
    ref = np.load(models_dir / "ref" / f"{name}.out0.preact.nodelegate.npy")
    with gpuc.load(bundle, device=device) as m:
        out = m.run([np.load(models_dir / "ref" / f"{name}.in0.npy")])[0]
    assert np.abs(out - ref).max() <= 1e-3 * np.abs(ref).max()


def test_mobilenet_plan_targets(models_dir):
    """Issue #4 targets: fusion brings 65 ops to <= 55 dispatches; the arena is near its lower bound."""
    from gpuc.inspect import inspect_bundle
    rep, _ = inspect_bundle(gpuc.compile(models_dir / "mobilenet_v2_224_f32.tflite"))
    assert rep["dispatches"] <= 55
    assert rep["arena_bytes"] <= 1.05 * rep["arena_lower_bound_bytes"]
    assert rep["arena_bytes"] <= rep["naive_bytes"] / 3
    assert len(rep["dispatch_list"]) == rep["dispatches"]
