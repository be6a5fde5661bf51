"""TFLite importer: real models parse to the IR the manifest describes; hostile bytes are refused cleanly."""
import json
from collections import Counter

import numpy as np
import pytest

from gpuc.compiler.frontend.tflite import load_tflite
from gpuc.errors import GpucError, ModelFormatError


def manifest(models_dir):
    return {m["name"]: m for m in json.loads((models_dir / "manifest.json").read_text())["models"]}


def test_shared_models_match_manifest(models_dir):
    for name, info in manifest(models_dir).items():
        model = load_tflite(models_dir / f"{name}.tflite")
        hist = Counter(n.op for g in model.subgraphs for n in g.nodes)
        assert dict(hist) == info["op_histogram"], name
        assert [len(g.nodes) for g in model.subgraphs] == [s["num_ops"] for s in info["subgraphs"]], name
        g = model.main
        for i, tid in enumerate(g.inputs):
            ref = models_dir / "ref" / f"{name}.in{i}.npy"
            if ref.exists():
                a = np.load(ref)
                assert g.t(tid).shape == a.shape and g.t(tid).dtype == a.dtype.name, (name, i)


def test_int8_quantization_matches_litert(models_dir):
    from ai_edge_litert.interpreter import Interpreter
    path = models_dir / "mobilenet_v2_224_int8.tflite"
    g = load_tflite(path).main
    it = Interpreter(model_path=str(path))
    for d in it.get_tensor_details():
        t = g.t(d["index"])
        assert t.name == d["name"] and list(t.shape) == list(d["shape"])
        qp = d["quantization_parameters"]
        if len(qp["scales"]):
            assert t.quant is not None
            np.testing.assert_allclose(t.quant.scale, qp["scales"])
            np.testing.assert_array_equal(t.quant.zero_point, qp["zero_points"])
            assert t.quant.axis == qp["quantized_dimension"]


def test_conv_attrs_and_constants(models_dir):
    g = load_tflite(models_dir / "mobilenet_v2_224_f32.tflite").main
    conv = g.nodes[0]
    assert conv.op == "CONV_2D" and conv.attrs["stride_h"] == 2 and conv.attrs["fused_activation_function"] == 3
    w = g.t(conv.inputs[1])
    assert w.is_const and w.data.shape == w.shape and w.data.dtype == np.float32


@pytest.mark.parametrize("junk", [b"", b"hello", bytes(64), b"\x89PNG\r\n\x1a\n" + bytes(100),
                                  np.random.default_rng(0).bytes(4096)])
def test_not_a_model(junk):
    with pytest.raises(ModelFormatError, match="not a TFLite model|invalid model"):
        load_tflite(junk)


def test_missing_file():
    with pytest.raises(GpucError, match="cannot read model"):
        load_tflite("/nonexistent/model.tflite")


def test_fuzz_truncations_and_bit_flips(models_dir):
    """Every mutated model either loads or raises ModelFormatError: nothing else escapes."""
    rng = np.random.default_rng(1)
    for name in ("mlp_small_f32", "microwakeword_okay_nabu", "text_conv1d_lstm_tfkeras_f32"):
        data = (models_dir / f"{name}.tflite").read_bytes()
        for _ in range(60):
            kind = rng.integers(0, 3)
            if kind == 0:
                bad = data[:int(rng.integers(0, len(data)))]
            else:
                b = bytearray(data)
                for pos in rng.integers(0, min(len(b), 4096) if kind == 1 else len(b), int(rng.integers(1, 8))):
                    b[pos] = int(rng.integers(0, 256))
                bad = bytes(b)
            try:
                load_tflite(bad)
            except ModelFormatError as e:
                assert "\n" not in str(e)
