"""TFLite frontend: real models against the manifest / refs / LiteRT, synthetic models for every
validation rule, and seeded fuzzing (every mutated file loads or raises ModelFormatError)."""
import json
import random
import subprocess
import sys
import time

import numpy as np
import pytest

from gpuc.compiler.frontend.fbreader import SCALAR_DTYPES
from gpuc.compiler.frontend.importer import load_tflite
from gpuc.compiler.frontend.tflite_schema import ENUMS, TABLES
from gpuc.errors import GpucError, ModelFormatError
from helpers.repo import shared_models_dir

OPS = ENUMS["BuiltinOperator"]
OPTS = ENUMS["BuiltinOptions"]


MODELS = shared_models_dir()
needs_models = pytest.mark.skipif(MODELS is None, reason="shared models not found (set GPUC_SHARED_MODELS)")


def _manifest():
    return {m["name"]: m for m in json.loads((MODELS / "manifest.json").read_text())["models"]}


def _model_names():
    return sorted(_manifest()) if MODELS is not None else []


# ---------------------------------------------------------------------------------------------
# a small schema-driven flatbuffer writer for synthetic models (unions given as (table, dict))
# ---------------------------------------------------------------------------------------------
_PREPEND = {"b": "Int8", "B": "Uint8", "h": "Int16", "H": "Uint16", "i": "Int32", "I": "Uint32",
            "q": "Int64", "Q": "Uint64", "f": "Float32", "d": "Float64", "?": "Bool"}


def _write(b, table, value):
    fields, children = TABLES[table], {}
    for name, v in value.items():
        slot, kind, _ = fields[name]
        if kind == "str":
            children[name] = b.CreateString(v)
        elif kind.startswith("table:"):
            children[name] = v if isinstance(v, int) else _write(b, kind[6:], v)
        elif kind == "union":
            children[name] = _write(b, v[0], v[1])
        elif kind.startswith("["):
            inner = kind[1:-1]
            if inner in SCALAR_DTYPES:
                children[name] = b.CreateNumpyVector(np.ascontiguousarray(v, dtype=SCALAR_DTYPES[inner]))
            else:
                offs = [x if isinstance(x, int) else b.CreateString(x) if inner == "str" else _write(b, inner[6:], x)
                        for x in v]                           # an int is an already written table
                b.StartVector(4, len(offs), 4)
                for o in reversed(offs):
                    b.PrependUOffsetTRelative(o)
                children[name] = b.EndVector()
    b.StartObject(max((s for s, _, _ in fields.values()), default=-1) + 1)
    for name, v in value.items():
        slot, kind, default = fields[name]
        if name in children:
            b.PrependUOffsetTRelativeSlot(slot, children[name], 0)
        else:
            getattr(b, f"Prepend{_PREPEND[kind]}Slot")(slot, v, None)   # None: always written
    return b.EndObject()


def build(model: dict) -> bytes:
    flatbuffers = pytest.importorskip("flatbuffers")
    b = flatbuffers.Builder(1024)
    b.Finish(_write(b, "Model", model), file_identifier=b"TFL3")
    return bytes(b.Output())


def tiny(**sub):
    """y = relu(x + c): x [1, 4] float32 input, c constant [4]."""
    sg = {"name": "main", "inputs": [0], "outputs": [3],
          "tensors": [{"name": "x", "shape": [1, 4], "type": 0, "buffer": 0},
                      {"name": "c", "shape": [4], "type": 0, "buffer": 1},
                      {"name": "s", "shape": [1, 4], "type": 0, "buffer": 0},
                      {"name": "y", "shape": [1, 4], "type": 0, "buffer": 0}],
          "operators": [{"opcode_index": 0, "inputs": [0, 1], "outputs": [2],
                         "builtin_options_type": OPTS["AddOptions"],
                         "builtin_options": ("AddOptions", {"fused_activation_function": 0})},
                        {"opcode_index": 1, "inputs": [2], "outputs": [3]}]}
    sg.update(sub.pop("sg", {}))
    m = {"version": 3, "description": "tiny",
         "operator_codes": [{"deprecated_builtin_code": OPS["ADD"], "builtin_code": OPS["ADD"], "version": 1},
                            {"deprecated_builtin_code": OPS["RELU"], "builtin_code": OPS["RELU"], "version": 1}],
         "buffers": [{}, {"data": np.array([1, -2, 3, -4], np.float32).view(np.uint8)}],
         "subgraphs": [sg]}
    m.update(sub)
    return m


def bad(model_or_bytes, *fragments):
    data = model_or_bytes if isinstance(model_or_bytes, bytes) else build(model_or_bytes)
    with pytest.raises(ModelFormatError) as e:
        load_tflite(data)
    msg = str(e.value)
    assert "\n" not in msg
    for f in fragments:
        assert f in msg, msg
    return msg


# ---------------------------------------------------------------------------------------------
# real models
# ---------------------------------------------------------------------------------------------
@needs_models
@pytest.mark.parametrize("name", _model_names())
def test_shared_model_matches_manifest(name):
    info = _manifest()[name]
    data = (MODELS / info["file"].removeprefix("models/")).read_bytes()
    t0 = time.perf_counter()
    model = load_tflite(data)
    elapsed = time.perf_counter() - t0
    assert elapsed < 0.5, f"{name}: import took {elapsed:.3f} s"
    assert model.version == info["schema_version"] and model.description == info["description"]
    hist = {}
    for g in model.subgraphs:
        for n in g.nodes:
            hist[n.op] = hist.get(n.op, 0) + 1
    assert hist == info["op_histogram"]
    assert {n.op[7:] for g in model.subgraphs for n in g.nodes if n.op.startswith("CUSTOM:")} == set(info["custom_ops"])
    assert [(g.name, len(g.nodes), len(g.tensors)) for g in model.subgraphs] == \
        [(s["name"], s["num_ops"], s["num_tensors"]) for s in info["subgraphs"]]
    dtypes = {}
    for g in model.subgraphs:
        for t in g.tensors:
            dtypes[t.dtype.upper()] = dtypes.get(t.dtype.upper(), 0) + 1
    assert dtypes == info["tensor_dtype_counts"]
    assert sum(t.is_variable for g in model.subgraphs for t in g.tensors) == info["variable_tensors"]
    assert [s["key"] for s in model.signatures] == info["signature_keys"]
    for s in model.signatures:
        want = info["signature_list"][s["key"]]
        assert list(s["inputs"]) == want["inputs"] and list(s["outputs"]) == want["outputs"]

    g = model.main
    for side, ids in (("inputs", g.inputs), ("outputs", g.outputs)):
        assert len(ids) == len(info[side])
        for tid, want in zip(ids, info[side]):
            t = g.tensors[tid]
            assert (tid, t.name, list(t.shape), t.dtype) == (want["index"], want["name"], want["shape"], want["dtype"])
            assert list(t.shape_signature or t.shape) == want["shape_signature"]
            q = want["quantization"]
            if q is None:
                assert t.quant is None
            else:
                np.testing.assert_array_equal(t.quant.scale, np.float32(q["scales"]))
                np.testing.assert_array_equal(t.quant.zero_point, q["zero_points"])
                assert t.quant.axis == q["quantized_dimension"]
            ref = MODELS / want.get("ref_file", f"ref/{name}.out{info[side].index(want)}.npy")
            if ref.is_file():
                arr = np.load(ref)
                assert arr.shape == t.shape and arr.dtype.name == t.dtype

    for gr in model.subgraphs:
        done = set(gr.inputs) | {t.id for t in gr.tensors if t.is_const or t.is_variable}
        for n in gr.nodes:                                   # topological order
            assert all(i < 0 or i in done or not any(i in m.outputs for m in gr.nodes) for i in n.inputs)
            done.update(n.outputs)
        for t in gr.tensors:
            if t.is_const and t.dtype in ("float32", "float16", "int32", "int8", "uint8", "int64", "int16"):
                assert t.data.shape == t.shape and t.data.dtype.name == t.dtype


@needs_models
def test_int8_mobilenet_quantization_and_litert():
    model = load_tflite(MODELS / "mobilenet_v2_224_int8.tflite")
    g = model.main
    convs = [n for n in g.nodes if n.op == "CONV_2D"]
    assert convs and all(n.attrs["padding"] in (0, 1) and "stride_w" in n.attrs for n in convs)
    w = g.tensors[convs[0].inputs[1]]
    assert w.dtype == "int8" and w.quant.per_channel and w.quant.axis == 0
    assert w.quant.scale.size == w.shape[0] and np.all(w.quant.zero_point == 0)
    b = g.tensors[convs[0].inputs[2]]
    assert b.dtype == "int32" and b.data.shape == (w.shape[0],)
    assert all(t.quant is not None for t in g.tensors if t.dtype == "int8")

    interp = pytest.importorskip("ai_edge_litert.interpreter").Interpreter(
        model_path=str(MODELS / "mobilenet_v2_224_int8.tflite"))
    interp.allocate_tensors()
    details = interp.get_tensor_details()
    assert len(details) == len(g.tensors)
    consts = 0
    for d in details:
        t = g.tensors[d["index"]]
        assert (t.name, list(t.shape), t.dtype) == (d["name"], list(d["shape"]), np.dtype(d["dtype"]).name)
        assert list(t.shape_signature or t.shape) == list(d["shape_signature"])
        qp = d["quantization_parameters"]
        if qp["scales"].size:
            np.testing.assert_array_equal(t.quant.scale, qp["scales"])
            np.testing.assert_array_equal(t.quant.zero_point, qp["zero_points"])
            assert t.quant.axis == qp["quantized_dimension"]
        else:
            assert t.quant is None
        if t.is_const:
            np.testing.assert_array_equal(t.data, interp.get_tensor(d["index"]))
            consts += 1
    assert consts > 100


@needs_models
def test_conv_attrs_and_constants():
    g = load_tflite(MODELS / "mobilenet_v2_224_f32.tflite").main
    conv = g.nodes[0]
    assert conv.op == "CONV_2D" and conv.version >= 1
    assert conv.attrs == {"padding": 0, "stride_w": 2, "stride_h": 2, "fused_activation_function": 3,
                          "dilation_wfactor": 1, "dilation_hfactor": 1, "quantized_bias_type": 0}
    w = g.t(conv.inputs[1])
    assert w.is_const and w.data.shape == w.shape == (32, 3, 3, 3) and w.data.dtype == np.float32


@needs_models
def test_custom_op_options():
    g = load_tflite(MODELS / "mp_selfie_segmentation.tflite").main
    custom = [n for n in g.nodes if n.op == "CUSTOM:Convolution2DTransposeBias"]
    assert custom and all(isinstance(n.attrs.get("custom_options", b""), bytes) for n in custom)


# ---------------------------------------------------------------------------------------------
# synthetic models: every rule
# ---------------------------------------------------------------------------------------------
def test_tiny_model():
    data = build(tiny())
    m = load_tflite(data)
    g = m.main
    assert m.description == "tiny" and g.name == "main" and g.inputs == [0] and g.outputs == [3]
    assert [n.op for n in g.nodes] == ["ADD", "RELU"]
    assert g.nodes[0].attrs == {"fused_activation_function": 0, "pot_scale_int16": True}
    assert g.nodes[1].attrs == {}
    np.testing.assert_array_equal(g.tensors[1].data, [1, -2, 3, -4])
    assert not g.tensors[1].data.flags.writeable
    # the writer is sound: LiteRT runs the same bytes
    lite = pytest.importorskip("ai_edge_litert.interpreter")
    it = lite.Interpreter(model_content=data)
    it.allocate_tensors()
    x = np.array([[0.5, 0.5, -5, 5]], np.float32)
    it.set_tensor(0, x)
    it.invoke()
    np.testing.assert_array_equal(it.get_tensor(3), np.maximum(x + [1, -2, 3, -4], 0))


def test_operators_out_of_order_are_sorted():
    m = tiny()
    ops = m["subgraphs"][0]["operators"]
    ops.reverse()
    g = load_tflite(build(m)).main
    assert [n.op for n in g.nodes] == ["ADD", "RELU"] and [n.index for n in g.nodes] == [1, 0]


def test_cycle_and_double_producer():
    m = tiny()
    m["subgraphs"][0]["operators"] = [
        {"opcode_index": 1, "inputs": [3], "outputs": [2]}, {"opcode_index": 1, "inputs": [2], "outputs": [3]}]
    bad(m, "cycle", "tensor")
    m["subgraphs"][0]["operators"] = [
        {"opcode_index": 1, "inputs": [0], "outputs": [3]}, {"opcode_index": 1, "inputs": [0], "outputs": [3]}]
    bad(m, "'y'", "produced by two operators")


def test_options_rules():
    m = tiny()
    op = m["subgraphs"][0]["operators"][0]
    op["builtin_options_type"] = 200
    bad(m, "operators[0].builtin_options_type", "unknown options type 200")
    op["builtin_options_type"] = OPTS["MulOptions"]          # wrong table for ADD: accepted as is
    op["builtin_options"] = ("MulOptions", {"fused_activation_function": 3})
    assert load_tflite(build(m)).main.nodes[0].attrs == {"fused_activation_function": 3}
    op["builtin_options_type"] = OPTS["ReshapeOptions"]      # type given, table absent: defaults
    del op["builtin_options"]
    assert load_tflite(build(m)).main.nodes[0].attrs == {"new_shape": None}
    op["builtin_options_type"] = OPTS["ReshapeOptions"]
    op["builtin_options"] = ("ReshapeOptions", {"new_shape": [2, -1]})
    assert load_tflite(build(m)).main.nodes[0].attrs == {"new_shape": [2, -1]}


def test_operator_codes():
    m = tiny()
    m["operator_codes"][1] = {"deprecated_builtin_code": 127, "builtin_code": OPS["GELU"]}
    assert load_tflite(build(m)).main.nodes[1].op == "GELU"
    m["operator_codes"][1] = {"deprecated_builtin_code": 127, "builtin_code": 1000}
    bad(m, "operator_codes[1]", "unknown builtin operator code 1000")
    m["operator_codes"][1] = {"deprecated_builtin_code": OPS["CUSTOM"], "custom_code": "MyOp", "version": 2}
    m["subgraphs"][0]["operators"][1]["custom_options"] = np.frombuffer(b"\x01\x02\x03", np.uint8)
    n = load_tflite(build(m)).main.nodes[1]
    assert (n.op, n.version, n.attrs) == ("CUSTOM:MyOp", 2, {"custom_options": b"\x01\x02\x03"})
    m["subgraphs"][0]["operators"][0]["opcode_index"] = 7
    bad(m, "operators[0].opcode_index", "out of range")


def _with_tail(m, patch, tail: bytes):
    """Build with data appended after the flatbuffer; patch(m, offset) sets the absolute offsets."""
    patch(m, 1 << 40)                                       # same encoded size as the real offset
    off = (len(build(m)) + 15) // 16 * 16
    patch(m, off)
    data = build(m)
    return data + b"\0" * (off - len(data)) + tail


def test_external_buffer_and_large_custom_options():
    m = tiny()
    vals = np.array([5, 6, 7, 8], np.float32)

    def patch(m, off):
        m["buffers"][1] = {"offset": off, "size": 16}
        m["operator_codes"][1] = {"deprecated_builtin_code": OPS["CUSTOM"], "custom_code": "Big"}
        m["subgraphs"][0]["operators"][1].update(large_custom_options_offset=off + 16, large_custom_options_size=3)
    data = _with_tail(m, patch, vals.tobytes() + b"abc")
    g = load_tflite(data).main
    np.testing.assert_array_equal(g.tensors[1].data, vals)
    assert g.nodes[1].attrs["custom_options"] == b"abc"
    bad(data[:-1], "large_custom_options_offset", "beyond the end of the file")
    bad(data[:-4], "buffers[1]", "beyond the end of the file")


def test_tensor_rules():
    def tensors(**kw):
        m = tiny()
        m["subgraphs"][0]["tensors"][1].update(kw)
        return m
    bad(tensors(shape=[5]), "tensors[1]", "'c'", "16 bytes", "needs 20")
    bad(tensors(shape=[-4]), "tensors[1].shape", "negative")
    bad(tensors(shape=[65536, 65536, 2]), "more than 2^31")
    bad(tensors(buffer=9), "tensors[1].buffer", "buffer 9 out of range")
    bad(tensors(type=99), "tensors[1].type", "unknown type 99")
    bad(tensors(shape_signature=[-2]), "shape_signature")
    t = load_tflite(build(tensors(shape_signature=[-1]))).main.tensors[1]
    assert t.shape_signature == (-1,) and t.shape == (4,)
    m = tiny()
    m["subgraphs"][0]["tensors"][0]["type"] = ENUMS["TensorType"]["RESOURCE"]
    m["subgraphs"][0]["tensors"][0]["is_variable"] = True
    t = load_tflite(build(m)).main.tensors[0]
    assert t.dtype == "resource" and t.is_variable
    m = tiny()
    m["subgraphs"][0]["tensors"][1]["type"] = ENUMS["TensorType"]["BOOL"]
    m["buffers"][1] = {"data": np.array([0, 2, 1, 0, 255, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], np.uint8)}
    m["subgraphs"][0]["tensors"][1]["shape"] = [16]
    want = [False, True, True, False, True] + [False] * 10 + [True]
    assert load_tflite(build(m)).main.tensors[1].data.tolist() == want
    m = tiny()                                                 # non-numpy types keep raw bytes
    m["subgraphs"][0]["tensors"][1]["type"] = ENUMS["TensorType"]["INT4"]
    assert load_tflite(build(m)).main.tensors[1].data.dtype == np.uint8


def test_quantization_rules():
    def q(shape, **kw):
        m = tiny()
        t = m["subgraphs"][0]["tensors"][1]
        t.update(shape=shape, type=ENUMS["TensorType"]["INT8"], quantization=kw)
        m["buffers"][1] = {"data": np.zeros(int(np.prod(shape)), np.uint8)}
        return m
    m = q([4, 4], scale=[.5, .25, 1, 2], zero_point=[0, 0, 0, 0], quantized_dimension=1)
    t = load_tflite(build(m)).main.tensors[1]
    assert t.quant.per_channel and t.quant.axis == 1 and t.quant.scale.dtype == np.float32
    np.testing.assert_array_equal(t.quant.scale, [.5, .25, 1, 2])
    bad(q([4, 4], scale=[.5, .25, 1], zero_point=[0, 0, 0], quantized_dimension=1), "per-channel")
    bad(q([4], scale=[.5], zero_point=[1, 2]), "1 scales but 2 zero points")
    # found by make fuzz: a zero point outside the dtype's range reached the shader defines
    bad(q([4], scale=[.5], zero_point=[300]), "zero_point", "300 outside the int8 range")
    bad(q([4], scale=[.5], zero_point=[-129]), "outside the int8 range")
    bad(q([4], scale=[float("inf")], zero_point=[0]), "quantization.scale", "non-finite")
    assert load_tflite(build(q([4], scale=[.5], zero_point=[127]))).main.tensors[1].quant.zero_point[0] == 127
    assert load_tflite(build(q([4], min=[0.0], max=[1.0]))).main.tensors[1].quant is None


def test_index_rules():
    m = tiny()
    m["subgraphs"][0]["operators"][0]["inputs"] = [0, 1, -1]
    assert load_tflite(build(m)).main.nodes[0].inputs == [0, 1, -1]
    m["subgraphs"][0]["operators"][0]["inputs"] = [0, 4]
    bad(m, "operators[0].inputs", "tensor index 4 out of range")
    m = tiny()
    m["subgraphs"][0]["operators"][0]["outputs"] = [-1]
    bad(m, "operators[0].outputs")
    bad(tiny(sg={"outputs": [9]}), "subgraphs[0].outputs", "out of range")
    bad(tiny(sg={"inputs": [-1]}), "subgraphs[0].inputs")


def test_model_level_rules():
    bad(tiny(version=2), "schema version 2")
    bad(tiny(subgraphs=[]), "no subgraphs")
    sig = {"signature_key": "serve", "subgraph_index": 0,
           "inputs": [{"name": "in", "tensor_index": 0}], "outputs": [{"name": "out", "tensor_index": 3}]}
    m = load_tflite(build(tiny(signature_defs=[sig])))
    assert m.signatures == [{"key": "serve", "subgraph": 0, "inputs": {"in": 0}, "outputs": {"out": 3}}]
    bad(tiny(signature_defs=[{**sig, "subgraph_index": 3}]), "signature_defs[0].subgraph_index")
    bad(tiny(signature_defs=[{**sig, "outputs": [{"name": "o", "tensor_index": 40}]}]),
        "signature_defs[0].outputs[0].tensor_index")
    m = tiny()
    m["subgraphs"].append({"name": "second", "tensors": [{"name": "a", "shape": [1], "buffer": 0}],
                           "inputs": [0], "outputs": [0]})
    assert [g.name for g in load_tflite(build(m)).subgraphs] == ["main", "second"]


def _sparse_model(shape, values, sparsity):
    m = tiny()
    m["operator_codes"][0] = {"deprecated_builtin_code": OPS["DENSIFY"], "builtin_code": OPS["DENSIFY"]}
    m["buffers"][1] = {"data": np.asarray(values, np.float32).view(np.uint8)}
    m["subgraphs"][0] = {"name": "main", "inputs": [], "outputs": [1], "tensors": [
        {"name": "sparse", "shape": shape, "type": 0, "buffer": 1, "sparsity": sparsity},
        {"name": "dense", "shape": shape, "type": 0, "buffer": 0}],
        "operators": [{"opcode_index": 0, "inputs": [0], "outputs": [1]}]}
    return build(m)


def _csr(segments, indices):
    return {"format": 1, "array_segments_type": 1, "array_segments": ("Int32Vector", {"values": segments}),
            "array_indices_type": 3, "array_indices": ("Uint8Vector", {"values": indices})}


@pytest.mark.parametrize("case", ["csr", "block"])
def test_sparse_constants_densified_like_litert(case):
    if case == "csr":
        want = np.array([[1, 0, 0, 2], [0, 0, 0, 0], [0, 3, 0, 0]], np.float32)
        data = _sparse_model([3, 4], [1, 2, 3], {"traversal_order": [0, 1], "dim_metadata": [
            {"format": 0, "dense_size": 3}, _csr([0, 2, 2, 3], [0, 3, 1])]})
    else:    # 2x4 with 1x2 blocks along dim 1
        want = np.array([[0, 0, 1, 2], [3, 4, 0, 0]], np.float32)
        data = _sparse_model([2, 4], [1, 2, 3, 4], {"traversal_order": [0, 1, 2], "block_map": [1], "dim_metadata": [
            {"format": 0, "dense_size": 2}, _csr([0, 1, 2], [1, 0]), {"format": 0, "dense_size": 2}]})
    np.testing.assert_array_equal(load_tflite(data).main.tensors[0].data, want)
    lite = pytest.importorskip("ai_edge_litert.interpreter")
    it = lite.Interpreter(model_content=data,
                          experimental_op_resolver_type=lite.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.allocate_tensors()
    it.invoke()
    np.testing.assert_array_equal(it.get_tensor(1), want)


def test_sparse_rules():
    ok = {"traversal_order": [0, 1], "dim_metadata": [{"format": 0, "dense_size": 3}, _csr([0, 2, 2, 3], [0, 3, 1])]}
    bad(_sparse_model([3, 4], [1, 2], ok), "sparsity describes 3 values, buffer holds 2")
    bad(_sparse_model([3, 4], [1, 2, 3], {**ok, "traversal_order": [0, 0]}), "inconsistent")
    row = ok["dim_metadata"][0]
    bad(_sparse_model([3, 4], [1, 2, 3], {**ok, "dim_metadata": [row, _csr([0, 2, 9, 3], [0, 3, 1])]}),
        "array_segments")
    bad(_sparse_model([3, 4], [1, 2, 3], {**ok, "dim_metadata": [row, _csr([0, 2, 2, 3], [0, 4, 1])]}),
        "array_indices out of range")


def test_shared_references_cannot_amplify_work():
    """50k operators all pointing at one operator table with a 50k-entry input vector: a naive
    reader does 2.5e9 steps; the decoding budget stops it after a few."""
    flatbuffers = pytest.importorskip("flatbuffers")
    b = flatbuffers.Builder(1024)
    op = _write(b, "Operator", {"opcode_index": 0, "inputs": np.zeros(50000, np.int32), "outputs": []})
    sg = _write(b, "SubGraph", {"tensors": [{"name": "x", "shape": [1], "buffer": 0}], "operators": [op] * 50000,
                                "inputs": [0], "outputs": [0]})
    root = _write(b, "Model", {"version": 3, "subgraphs": [sg], "buffers": [{}], "operator_codes": [
        {"deprecated_builtin_code": OPS["RELU"], "builtin_code": OPS["RELU"]}]})
    b.Finish(root, file_identifier=b"TFL3")
    t0 = time.perf_counter()
    bad(bytes(b.Output()), "decoding budget")
    assert time.perf_counter() - t0 < 2


# ---------------------------------------------------------------------------------------------
# not TFLite at all, missing files
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("data,fragment", [
    (b"", "file is empty"), (b"hello", "only 5 bytes"),
    (b"\x89PNG\r\n\x1a\n" + b"\0" * 64, "PNG image"),
    (bytes(random.Random(1).randrange(256) for _ in range(4096)), "file identifier is"),
    (b"\x10\0\0\0TFL3", "truncated"),
    (b"\x10\0\0\0TFL3" + b"\0" * 32, "invalid model"),
])
def test_not_tflite(data, fragment):
    msg = bad(data, fragment)
    assert "TFL" in msg or "invalid model" in msg


def test_missing_file(tmp_path):
    p = tmp_path / "nope.tflite"
    with pytest.raises(GpucError) as e:
        load_tflite(p)
    assert str(p) in str(e.value)
    with pytest.raises(GpucError):
        load_tflite(str(tmp_path))                            # a directory


# ---------------------------------------------------------------------------------------------
# fuzzing
# ---------------------------------------------------------------------------------------------
def _mutate(rng, data: bytes) -> bytes:
    d = bytearray(data)
    kind = rng.randrange(4)
    meta = min(len(d), 65536)           # flatbuffer metadata tends to sit at the start and the end
    pick = lambda: rng.randrange(len(d)) if rng.random() < 0.3 else (  # noqa: E731
        rng.randrange(min(len(d), 4096)) if rng.random() < 0.5 else len(d) - 1 - rng.randrange(meta))
    if kind == 0:
        return bytes(d[:rng.randrange(len(d))])
    if kind == 1:
        for _ in range(rng.randint(1, 8)):
            d[pick()] ^= 1 << rng.randrange(8)
    elif kind == 2:
        for _ in range(rng.randint(1, 4)):
            p = pick()
            d[p:p + 4] = bytes(rng.randrange(256) for _ in range(4))[:len(d) - p]
    else:
        p = rng.randrange(len(d) - 4)
        d[p:p + 4] = rng.choice([b"\xff\xff\xff\x7f", b"\0\0\0\x80", b"\xff\xff\xff\xff", b"\0\0\0\0", b"\1\0\0\0"])
    return bytes(d)


def _fuzz(rng, corpus, cases):
    outcome = {"ok": 0, "error": 0}
    for _ in range(cases):
        data = _mutate(rng, rng.choice(corpus))
        try:
            load_tflite(data)
            outcome["ok"] += 1
        except ModelFormatError as e:
            assert "\n" not in str(e) and str(e)
            outcome["error"] += 1
    return outcome


def test_fuzz_synthetic():
    corpus = [build(tiny()), _sparse_model([3, 4], [1, 2, 3], {"traversal_order": [0, 1], "dim_metadata": [
        {"format": 0, "dense_size": 3}, _csr([0, 2, 2, 3], [0, 3, 1])]})]
    rng = random.Random(1234)
    out = _fuzz(rng, corpus, 1500)
    assert out["error"] > 100
    for data in corpus:                                       # every truncation point
        for cut in range(len(data)):
            try:
                load_tflite(data[:cut])
            except ModelFormatError:
                pass


@needs_models
def test_fuzz_shared_models():
    corpus = [p.read_bytes() for p in sorted(MODELS.glob("*.tflite"))]
    t0 = time.perf_counter()
    out = _fuzz(random.Random(20240601), corpus, 400)
    # (a hang guard, not a speed test: ~5 s alone on 2 cores, 10.7 s once beside other test runs)
    assert out["error"] > 50 and time.perf_counter() - t0 < 60


@pytest.mark.parametrize("op, version", [("ADD", 7), ("ADD", 0), ("RELU", 4), ("BROADCAST_TO", 1)])
def test_op_versions_litert_does_not_run_are_refused(op, version):
    """An operator code at a version LiteRT's resolver lacks: LiteRT refuses the model as it loads, and so does
    the importer, naming the field, the op and the versions LiteRT runs (compiler/ops/litert_versions.py)."""
    m = tiny()
    k = 0 if op == "ADD" else 1
    m["operator_codes"][k] = {"deprecated_builtin_code": min(OPS[op], 127), "builtin_code": OPS[op], "version": version}
    msg = bad(m, f"operator_codes[{k}].version", f"{op} version {version}", "LiteRT runs")
    assert "versions" in msg or "version 1)" in msg
    pytest.importorskip("ai_edge_litert")
    from helpers.litert import make_interpreter
    with pytest.raises(Exception, match="Didn't find op"):
        make_interpreter(build(m))


def test_op_version_table_is_litert_s():
    """compiler/ops/litert_versions.py is what scripts/litert_versions.py reads off the LiteRT installed
    (one one-op model per op and version: about 3 s)."""
    pytest.importorskip("ai_edge_litert")
    from helpers.repo import ROOT
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "litert_versions.py"), "--check"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
