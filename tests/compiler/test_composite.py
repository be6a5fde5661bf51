"""STABLEHLO_COMPOSITE inlined at import (compiler/frontend/composite.py): an `odml.rms_norm`-like
composite whose decomposition subgraph holds the plain ops, compiled and run against numpy (and
LiteRT, which runs the decomposition itself); a composite nested in a decomposition; bad decomposition
indices and arity / shape mismatches are errors naming the operator.  The plain `odml.rms_norm` form
becomes one RMS_NORM (compiler/ops/rms_norm.py), checked here against numpy and LiteRT."""
from __future__ import annotations

import numpy as np
import pytest
from flatbuffers import flexbuffers

from gpuc.compiler.frontend.importer import load_tflite
from gpuc.errors import ModelFormatError
from helpers.builder import ModelBuilder, with_subgraphs

D = 8


def _composite(mb: ModelBuilder, inputs, outputs, sub: int, name="odml.rms_norm", attrs=None):
    code = mb.opcode("STABLEHLO_COMPOSITE")
    mb.operators.append({"opcode_index": code, "inputs": np.asarray(inputs, np.int32),
                         "outputs": np.asarray(outputs, np.int32),
                         "builtin_options2": ("StableHLOCompositeOptions",
                                              {"name": name, "decomposition_subgraph_index": sub,
                                               "composite_attributes": np.frombuffer(flexbuffers.Dumps(attrs or {}),
                                                                                     np.uint8)})})


def _rms_norm_sub(nested: int | None = None) -> ModelBuilder:
    """y = x * rsqrt(mean(x*x, -1) + eps) * w (with `nested`: the scaling by w is itself a composite)."""
    sb = ModelBuilder()
    x = sb.input("x", [1, 3, D])
    w = sb.input("w", [D])
    sq = sb.tensor("sq", [1, 3, D])
    sb.op("MUL", [x, x], [sq])
    ms = sb.tensor("ms", [1, 3, 1])
    sb.op("MEAN", [sq, sb.const("ax", np.array([-1], np.int32))], [ms], keep_dims=True)
    eps = sb.tensor("eps", [1, 3, 1])
    sb.op("ADD", [ms, sb.const("e", np.array([1e-6], np.float32))], [eps])
    r = sb.tensor("r", [1, 3, 1])
    sb.op("RSQRT", [eps], [r])
    xn = sb.tensor("xn", [1, 3, D])
    sb.op("MUL", [x, r], [xn])
    y = sb.tensor("y", [1, 3, D])
    if nested is None:
        sb.op("MUL", [xn, w], [y])
    else:
        _composite(sb, [xn, w], [y], nested, "odml.scale")
    sb.output(y)
    return sb


def _scale_sub() -> ModelBuilder:
    sb = ModelBuilder()
    a, b = sb.input("a", [1, 3, D]), sb.input("b", [D])
    y = sb.tensor("y", [1, 3, D])
    sb.op("MUL", [a, b], [y])
    sb.output(y)
    return sb


def model(nested=False, sub_index=1, shape=(1, 3, D), nested_index=2, attrs=None) -> bytes:
    mb = ModelBuilder()
    x = mb.input("x", list(shape))
    h = mb.tensor("h", list(shape))
    mb.op("ADD", [x, x], [h])
    y = mb.tensor("y", list(shape))
    _composite(mb, [h, mb.const("w", np.linspace(0.5, 1.5, D).astype(np.float32))], [y], sub_index, attrs=attrs)
    mb.output(y)
    subs = [_rms_norm_sub(nested_index if nested else None)] + ([_scale_sub()] if nested else [])
    return with_subgraphs(mb, *subs)


def _ref(x):
    h = 2 * x
    return h / np.sqrt((h * h).mean(-1, keepdims=True) + 1e-6) * np.linspace(0.5, 1.5, D).astype(np.float32)


@pytest.mark.parametrize("nested", [False, True])
def test_inlined_and_run(nested):
    pytest.importorskip("vulkan")
    import gpuc
    from gpuc.runtime.bundle import read_bundle
    data = model(nested)
    m = load_tflite(data)
    ops = [n.op for n in m.main.nodes]
    if nested:            # (its last MUL is itself a composite: not RMS_NORM's form, so inlined)
        assert "STABLEHLO_COMPOSITE" not in ops and ops.count("MUL") == 3 and "RSQRT" in ops
        assert {n.attrs.get("composite") for n in m.main.nodes[1:]} >= {"odml.rms_norm"}
    else:                 # the odml.rms_norm chain: one fused RMS_NORM (compiler/ops/rms_norm.py)
        assert ops == ["ADD", "RMS_NORM"]
    assert all(n.index == 1 for n in m.main.nodes[1:])            # messages name the composite
    bundle = gpuc.compile(data)
    assert read_bundle(bundle).stats["cpu_nodes"] == 0
    x = np.random.default_rng(1).standard_normal([1, 3, D]).astype(np.float32)
    out = gpuc.load(bundle).run([x])[0]
    np.testing.assert_allclose(out, _ref(x), rtol=1e-5, atol=1e-6)


def test_against_litert():
    pytest.importorskip("vulkan")
    import gpuc
    from helpers.litert import run_litert
    data = model()
    x = np.random.default_rng(2).standard_normal([1, 3, D]).astype(np.float32)
    try:
        ref = run_litert(data, [x])[0]
    except (RuntimeError, ValueError) as e:
        pytest.skip(f"this LiteRT does not run the test's STABLEHLO_COMPOSITE: {e}")
    np.testing.assert_allclose(gpuc.load(gpuc.compile(data)).run([x])[0], ref, rtol=1e-5, atol=1e-6)


def test_bad_decomposition_index():
    with pytest.raises(ModelFormatError, match=r"STABLEHLO_COMPOSITE \(operator #1\).*subgraph 7 out of range"):
        load_tflite(model(sub_index=7))


def test_recursive_decomposition():
    with pytest.raises(ModelFormatError, match="call themselves"):
        load_tflite(model(nested=True, nested_index=1))         # the decomposition calls itself


def test_shape_mismatch():
    with pytest.raises(ModelFormatError, match=r"input 0 is float32 \[1, 4, 8\].*takes float32 \[1, 3, 8\]"):
        load_tflite(model(shape=(1, 4, D)))


def test_rms_norm_epsilon_attribute():
    """An `epsilon` attribute equal to the decomposition's constant fuses; one that disagrees keeps the
    decomposition (LiteRT computes with its constant), which still gives the same answer."""
    assert [n.op for n in load_tflite(model(attrs={"epsilon": 1e-6})).main.nodes] == ["ADD", "RMS_NORM"]
    data = model(attrs={"epsilon": 1e-5})
    assert "RSQRT" in [n.op for n in load_tflite(data).main.nodes]
    pytest.importorskip("vulkan")
    import gpuc
    x = np.random.default_rng(3).standard_normal([1, 3, D]).astype(np.float32)
    np.testing.assert_allclose(gpuc.load(gpuc.compile(data)).run([x])[0], _ref(x), rtol=1e-5, atol=1e-6)
