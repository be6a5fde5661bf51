"""The TFLite model builder (tests/helpers/builder.py), proven by LiteRT and by LiteRT's own schema code.

Every configuration of the single-op catalogue (tests/helpers/catalogue.py, `CASES`) that the op
tests compare gpuc against is checked here to load, allocate and invoke in LiteRT with the declared
output shapes, and to read back field by field through `ai_edge_litert.schema_py_generated`.
Needs LiteRT only (no Vulkan, no gpuc compiler).
"""
from __future__ import annotations

import numpy as np
import pytest

from gpuc.compiler.frontend.tflite_schema import ENUMS, TABLES
from helpers.builder import ModelBuilder, OP_OPTIONS, UNION_ENUMS, enum_value, write_root
from helpers.catalogue import CASES
from helpers.litert import run_litert

# ---------------------------------------------------------------------------------------------------
# read-back helpers

def _norm(name: str) -> str:
    return name.replace("_", "").lower()


def assert_matches(obj, table: str, value: dict, path: str = "") -> None:
    """Compare a dict written by write_table with LiteRT's object-API unpacking of it."""
    attrs = {_norm(k): k for k in vars(obj)}
    for name, v in value.items():
        if v is None:
            continue
        slot, kind, default = TABLES[table][name]
        got = getattr(obj, attrs[_norm(name)])
        p = f"{path}.{name}"
        if kind == "str":
            assert got.decode() == v, p
        elif kind.startswith("table:"):
            assert_matches(got, kind[6:], v, p)
        elif kind == "union":
            assert_matches(got, v[0], v[1], p)
            assert getattr(obj, attrs[_norm(name + "_type")]) == ENUMS[UNION_ENUMS[name]][v[0]], p
        elif kind.startswith("[table:"):
            assert len(got) == len(v), p
            for i, (g, x) in enumerate(zip(got, v)):
                assert_matches(g, kind[7:-1], x, f"{p}[{i}]")
        elif kind.startswith("["):
            want = np.asarray(v).reshape(-1)
            got = np.zeros(0) if got is None else np.asarray(got).reshape(-1)
            if want.dtype == np.uint8 and kind == "[B]":
                assert got.tobytes() == want.tobytes(), p
            else:
                np.testing.assert_array_equal(got, want.astype(got.dtype) if got.size else want, err_msg=p)
        elif kind == "?":
            assert bool(got) == bool(v), p
        elif kind in "fd":
            assert got == pytest.approx(float(v), rel=1e-7), p
        else:
            assert got == enum_value(name, v, table), p


def unpack(model: bytes):
    from ai_edge_litert import schema_py_generated as S
    assert S.Model.ModelBufferHasIdentifier(model, 0)
    return S, S.ModelT.InitFromPackedBuf(bytearray(model), 0)


# ---------------------------------------------------------------------------------------------------
# tests

@pytest.mark.parametrize("name", list(CASES))
def test_case_runs_in_litert(name):
    c = CASES[name]()
    outs = run_litert(c.ref_model or c.model, c.inputs)
    assert [tuple(o.shape) for o in outs] == c.out_shapes
    assert [o.dtype.name for o in outs] == c.out_dtypes
    assert all(np.isfinite(o).all() for o in outs)
    if c.ref_model is not None:
        # LiteRT may reject the model itself (that is why it has a ref_model); if it runs it, it must agree
        try:
            direct = run_litert(c.model, c.inputs)
        except RuntimeError:
            return
        for d, r in zip(direct, c.reference()):
            np.testing.assert_allclose(d, r, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", list(CASES))
def test_case_reads_back(name):
    """Every field the builder wrote reads back through LiteRT's own generated schema code."""
    c = CASES[name]()
    for mb, model in zip(c.builders, [c.model] + ([c.ref_model] if c.ref_model else [])):
        _, m = unpack(model)
        assert m.version == 3
        assert m.buffers[0].data is None                       # the empty sentinel
        assert_matches(m, "Model", mb.model_dict())


def test_read_back_details():
    mb = ModelBuilder()
    x = mb.input("x", [1, 8, 8, 3], "float32")
    w = mb.const("w", np.arange(4 * 3 * 3 * 3, dtype=np.float32).reshape(4, 3, 3, 3), quant=([0.5, 0.25, 1, 2], 0, 0))
    b = mb.const("b", np.arange(4, dtype=np.int32))
    q = mb.tensor("q", [1, 8, 8, 4], "int8", quant=(0.125, -3))
    y = mb.tensor("y", [1, 4, 8, 4])
    mb.op("CONV_2D", [x, w, b], [q], padding="SAME", stride_w=1, stride_h=1, fused_activation_function="RELU6")
    mb.op("CONV_2D", [x, w, b], [y], padding="VALID", stride_w=1, stride_h=2, dilation_wfactor=2, version=2)
    mb.op("MEAN", [q, mb.const("axes", np.array([1, 2], np.int32))], [y], keep_dims=True)
    mb.op("SOFTMAX", [y], [y], beta=0.5)
    mb.op("RESHAPE", [y], [y], new_shape=[4, 8, 4])
    mb.op("LOGISTIC", [y], [y])
    mb.op("ADD", [y, y], [y], fused_activation_function=3)
    mb.output(y)
    data = mb.finish(signature_key="serving_default")
    S, m = unpack(data)
    assert [(oc.builtinCode, oc.deprecatedBuiltinCode, oc.version) for oc in m.operatorCodes] == [
        (3, 3, 1), (3, 3, 2), (40, 40, 1), (25, 25, 1), (22, 22, 1), (14, 14, 1), (0, 0, 1)]
    sg = m.subgraphs[0]
    assert [t.name for t in sg.tensors] == [b"x", b"w", b"b", b"q", b"y", b"axes"]
    assert list(sg.inputs) == [x] and list(sg.outputs) == [y]
    tw, tb, tq = sg.tensors[w], sg.tensors[b], sg.tensors[q]
    assert tw.type == ENUMS["TensorType"]["FLOAT32"] and tb.type == ENUMS["TensorType"]["INT32"]
    assert tq.type == ENUMS["TensorType"]["INT8"] and tq.buffer == 0
    np.testing.assert_array_equal(tw.quantization.scale, [0.5, 0.25, 1, 2])
    np.testing.assert_array_equal(tw.quantization.zeroPoint, [0, 0, 0, 0])
    assert tq.quantization.scale[0] == 0.125 and tq.quantization.zeroPoint[0] == -3
    np.testing.assert_array_equal(np.frombuffer(m.buffers[tw.buffer].data.tobytes(), np.float32),
                                  np.arange(108, dtype=np.float32))
    np.testing.assert_array_equal(np.frombuffer(m.buffers[tb.buffer].data.tobytes(), np.int32), np.arange(4))
    ops = sg.operators
    o0, o1 = ops[0].builtinOptions, ops[1].builtinOptions
    assert isinstance(o0, S.Conv2DOptionsT)
    assert (o0.padding, o0.strideW, o0.strideH, o0.fusedActivationFunction) == (0, 1, 1, 3)
    assert (o1.padding, o1.strideH, o1.dilationWFactor, o1.dilationHFactor) == (1, 2, 2, 1)
    assert ops[2].builtinOptionsType == ENUMS["BuiltinOptions"]["ReducerOptions"] and ops[2].builtinOptions.keepDims
    assert ops[3].builtinOptions.beta == 0.5
    assert list(ops[4].builtinOptions.newShape) == [4, 8, 4]
    assert ops[5].builtinOptionsType == 0 and ops[5].builtinOptions is None
    assert ops[6].builtinOptions.fusedActivationFunction == 3
    sig = m.signatureDefs[0]
    assert sig.signatureKey == b"serving_default"
    assert [(t.name, t.tensorIndex) for t in sig.inputs] == [(b"x", x)]
    assert [(t.name, t.tensorIndex) for t in sig.outputs] == [(b"y", y)]
    # tensor data is 16-byte aligned in the file
    fm = S.Model.GetRootAs(data, 0)
    for i in range(1, fm.BuffersLength()):
        buf = fm.Buffers(i)
        assert buf._tab.Vector(buf._tab.Offset(4)) % 16 == 0


def test_signature_runner():
    from ai_edge_litert.interpreter import Interpreter
    mb = ModelBuilder()
    x = mb.input("x", [2, 3])
    y = mb.tensor("y", [2, 3])
    mb.op("RELU6", [x], [y])
    mb.output(y)
    it = Interpreter(model_content=mb.finish(signature_key="serving_default"))
    runner = it.get_signature_runner("serving_default")
    v = np.array([[-1, 2, 7], [0.5, 9, -3]], np.float32)
    np.testing.assert_array_equal(runner(x=v)["y"], np.clip(v, 0, 6))


def test_generic_writer_roundtrip_through_gpuc_reader():
    """write_table -> bytes -> gpuc's schema reader gives the values back."""
    from gpuc.runtime import flatbuf
    value = {"padding": 1, "stride_w": 2, "stride_h": 3, "fused_activation_function": 4,
             "dilation_wfactor": 5, "dilation_hfactor": 6}
    got = flatbuf.read(write_root("Conv2DOptions", value), TABLES, "Conv2DOptions")
    assert {k: got[k] for k in value} == value
    fc = {"keep_num_dims": True, "fused_activation_function": "RELU"}
    got = flatbuf.read(write_root("FullyConnectedOptions", fc), TABLES, "FullyConnectedOptions")
    assert got["keep_num_dims"] is True or got["keep_num_dims"] == 1
    assert got["fused_activation_function"] == 1
    t = {"name": "t", "shape": [1, 2, 3], "type": "INT8", "buffer": 7,
         "quantization": {"scale": [0.5], "zero_point": [-2], "quantized_dimension": 0}}
    got = flatbuf.read(write_root("Tensor", t), TABLES, "Tensor")
    assert got["name"] == "t" and list(got["shape"]) == [1, 2, 3] and got["type"] == 9 and got["buffer"] == 7
    assert list(got["quantization"]["scale"]) == [0.5] and list(got["quantization"]["zero_point"]) == [-2]


def test_op_options_map_is_consistent():
    for op, table in OP_OPTIONS.items():
        assert op in ENUMS["BuiltinOperator"]
        assert table is None or (table in ENUMS["BuiltinOptions"] and table in TABLES)
    for op in ["CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "SUB", "MUL", "PAD", "MEAN", "SUM",
               "REDUCE_MAX", "RESHAPE", "SOFTMAX", "AVERAGE_POOL_2D", "MAX_POOL_2D", "CONCATENATION"]:
        assert OP_OPTIONS[op] is not None
    for op in ["LOGISTIC", "RELU", "RELU6", "TANH"]:
        assert OP_OPTIONS[op] is None


def test_builder_errors():
    mb = ModelBuilder()
    x = mb.input("x", [1, 4])
    with pytest.raises(KeyError, match="no field"):
        mb.op("CONV_2D", [x], [x], bogus=1)
    with pytest.raises(KeyError, match="Padding"):
        write_root("Conv2DOptions", {"padding": "HALF"})
    with pytest.raises(KeyError, match="takes no builtin options"):
        mb.op("RELU", [x], [x], fused_activation_function="RELU")
    with pytest.raises(KeyError):
        mb.op("NOT_AN_OP", [x], [x])
    with pytest.raises(ValueError, match="no outputs"):
        ModelBuilder().finish()
