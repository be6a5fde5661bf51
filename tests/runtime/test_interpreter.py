"""gpuc.Interpreter and gpuc.CompiledModel as drop-ins for LiteRT's (gpuc/interpreter.py,
gpuc/compiled_model.py): the same user scripts run against ai_edge_litert's classes and gpuc's,
changing only the import, and give the same details and outputs (a tiny quantized model with a -1
dim and a signature, a two-signature model, shared models); then gpuc's own paths: bundles,
resize within --max-batch / --dynamic bounds, gpuc.load of a .tflite, errors."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vulkan")
pytest.importorskip("ai_edge_litert")

import gpuc  # noqa: E402
from gpuc.interpreter import InterpreterError  # noqa: E402
from helpers.builder import ModelBuilder, signature_model, write_root  # noqa: E402

RNG = np.random.default_rng(31)


def sig_model() -> bytes:
    """sum = x + y (x [-1, 4], y [1, 4]), quant = QUANTIZE(sum); signature names differ from tensor
    names and are declared out of order."""
    mb = ModelBuilder()
    x = mb.input("serving_default_x:0", [1, 4], shape_signature=[-1, 4])
    y = mb.input("serving_default_y:0", [1, 4])
    s = mb.tensor("PartitionedCall:0", [1, 4])
    mb.op("ADD", [x, y], [s])
    q = mb.tensor("PartitionedCall:1", [1, 4], "int8", quant=(0.05, -3))
    mb.op("QUANTIZE", [s], [q])
    mb.output(s)
    mb.output(q)
    m = mb.model_dict("serving_default")
    m["signature_defs"][0]["inputs"] = [{"name": "y", "tensor_index": y}, {"name": "x", "tensor_index": x}]
    m["signature_defs"][0]["outputs"] = [{"name": "sum", "tensor_index": s}, {"name": "quant", "tensor_index": q}]
    return write_root("Model", m, file_identifier=b"TFL3", size=4096)


def two_signature_model() -> bytes:
    """Signature 'add' (subgraph 0): a + b; signature 'scale' (subgraph 1): v * 3."""
    add, sc = ModelBuilder(), ModelBuilder()
    a, b = add.input("a", [2, 3]), add.input("b", [2, 3])
    o = add.tensor("o", [2, 3])
    add.op("ADD", [a, b], [o])
    add.output(o)
    v = sc.input("v", [4])
    k = sc.const("k", np.full([1], 3, np.float32))
    w = sc.tensor("w", [4])
    sc.op("MUL", [v, k], [w])
    sc.output(w)
    return signature_model([("add", add, {"inputs": {"a": a, "b": b}, "outputs": {"out": o}}),
                            ("scale", sc, {"inputs": {"v": v}, "outputs": {"out": w}})])


def _litert():
    from ai_edge_litert.interpreter import Interpreter
    return Interpreter


def _plain(d):
    """Details as comparable plain values (arrays as lists, dtypes as names)."""
    if isinstance(d, dict):
        return {k: _plain(v) for k, v in d.items()}
    if isinstance(d, (list, tuple)):
        return [_plain(v) for v in d]
    if isinstance(d, np.ndarray):
        return np.round(d.astype(np.float64), 6).tolist()
    if isinstance(d, type):
        return np.dtype(d).name
    if isinstance(d, float):
        return round(d, 6)
    return d


def interpreter_script(Interpreter, model: bytes, feeds: list[dict]) -> dict:
    """LiteRT user code: details, set_tensor / invoke / get_tensor, signature runners, resize."""
    it = Interpreter(model_content=model)
    it.allocate_tensors()
    out = {"inputs": it.get_input_details(), "outputs": it.get_output_details(),
           "signatures": it.get_signature_list(), "runs": []}
    for feed in feeds:
        for d in it.get_input_details():
            it.set_tensor(d["index"], feed[d["name"]])
        it.invoke()
        out["runs"].append([it.get_tensor(d["index"]) for d in it.get_output_details()])
    for key in it.get_signature_list():
        runner = it.get_signature_runner(key)
        out[key] = {"in": runner.get_input_details(), "out": runner.get_output_details()}
        args = {n: np.ones(d["shape"], d["dtype"]) * (j + 1)
                for j, (n, d) in enumerate(runner.get_input_details().items())}
        out[key]["result"] = {k: np.array(v) for k, v in runner(**args).items()}
    return out


def resize_script(Interpreter, model: bytes, n: int) -> dict:
    it = Interpreter(model_content=model)
    ins = it.get_input_details()
    for d in ins:
        it.resize_tensor_input(d["index"], [n] + list(d["shape"][1:]))
    it.allocate_tensors()
    out = {"inputs": [d["shape"] for d in it.get_input_details()],
           "outputs": [d["shape"] for d in it.get_output_details()]}
    for j, d in enumerate(it.get_input_details()):
        it.set_tensor(d["index"], (np.arange(n * 4, dtype=np.float32).reshape(n, 4) * (j + 1)))
    it.invoke()
    out["result"] = [it.get_tensor(d["index"]) for d in it.get_output_details()]
    return out


def compiled_model_script(CompiledModel, model: bytes) -> dict:
    """LiteRT's CompiledModel flow: buffers, run_by_index and run_by_name."""
    cm = CompiledModel.from_buffer(model)
    out = {"signatures": cm.get_signature_list(), "n": cm.get_num_signatures(), "runs": []}
    for si, key in enumerate(cm.get_signature_list()):
        out[key] = {"in": cm.get_input_tensor_details(key), "out": cm.get_output_tensor_details(key),
                    "by_index": cm.get_signature_by_index(si), "index": cm.get_signature_index(key)}
        ins, outs = cm.create_input_buffers(si), cm.create_output_buffers(si)
        for j, (name, d) in enumerate(out[key]["in"].items()):
            ins[j].write(np.full(d["shape"], j + 2, d["dtype"]))
        cm.run_by_index(si, ins, outs)
        res = [o.read(int(np.prod(d["shape"])), d["dtype"]) for o, d in zip(outs, out[key]["out"].values())]
        in_map = {n: cm.create_input_buffer_by_name(key, n) for n in out[key]["in"]}
        out_map = {n: cm.create_output_buffer_by_name(key, n) for n in out[key]["out"]}
        for j, (name, d) in enumerate(out[key]["in"].items()):
            in_map[name].write(np.full(d["shape"], j + 2, d["dtype"]))
        cm.run_by_name(key, in_map, out_map)
        res2 = [out_map[n].read(int(np.prod(d["shape"])), d["dtype"]) for n, d in out[key]["out"].items()]
        out["runs"].append((res, res2))
    return out


def _same(a, b, tol=1e-5):
    """Details equal; arrays close (quantized outputs within one step)."""
    if isinstance(a, dict):
        assert list(a) == list(b), (list(a), list(b))
        for k in a:
            _same(a[k], b[k], tol)
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), (a, b)
        for x, y in zip(a, b):
            _same(x, y, tol)
    elif isinstance(a, np.ndarray) and a.dtype.kind in "f":
        assert b.dtype == a.dtype and b.shape == a.shape
        np.testing.assert_allclose(b, a, rtol=tol, atol=tol)
    elif isinstance(a, np.ndarray):
        assert b.dtype == a.dtype and b.shape == a.shape, (a, b)
        assert np.abs(a.astype(np.int64) - b.astype(np.int64)).max(initial=0) <= 1, (a, b)
    else:
        assert _plain(a) == _plain(b), (a, b)


def _feeds(model: bytes, n=2) -> list[dict]:
    it = _litert()(model_content=model)
    out = []
    for _ in range(n):
        feed = {}
        for d in it.get_input_details():
            dt = np.dtype(d["dtype"])
            feed[d["name"]] = (RNG.standard_normal(d["shape"]).astype(dt) if dt.kind == "f"
                               else RNG.integers(-100, 100, d["shape"]).astype(dt))
        out.append(feed)
    return out


@pytest.mark.parametrize("which", ["sig", "two_signatures"])
def test_interpreter_script_same_as_litert(which):
    model = sig_model() if which == "sig" else two_signature_model()
    feeds = _feeds(model)
    _same(interpreter_script(_litert(), model, feeds), interpreter_script(gpuc.Interpreter, model, feeds))


@pytest.mark.parametrize("name", ["mlp_small_f32", "microwakeword_okay_nabu"])
def test_interpreter_script_shared_models(models_dir, name):
    model = (models_dir / f"{name}.tflite").read_bytes()
    feeds = _feeds(model, 1)
    _same(interpreter_script(_litert(), model, feeds), interpreter_script(gpuc.Interpreter, model, feeds), 1e-4)


def test_resize_recompiles_like_litert():
    """Batch 3 on x's -1 axis and y's fixed batch-1 axis (LiteRT's non-strict resize): gpuc
    recompiles with --max-batch 3 through the compile cache."""
    model = sig_model()
    _same(resize_script(_litert(), model, 3), resize_script(gpuc.Interpreter, model, 3))


@pytest.mark.parametrize("which", ["sig", "two_signatures"])
def test_compiled_model_script_same_as_litert(which):
    from ai_edge_litert.compiled_model import CompiledModel
    model = sig_model() if which == "sig" else two_signature_model()
    _same(compiled_model_script(CompiledModel, model), compiled_model_script(gpuc.CompiledModel, model))


def test_compiled_model_async_and_accelerator(tmp_path):
    from gpuc import CompiledModel, HardwareAccelerator
    p = tmp_path / "m.tflite"
    p.write_bytes(sig_model())
    cm = CompiledModel.from_file(str(p), hardware_accel=HardwareAccelerator.GPU | HardwareAccelerator.CPU)
    assert cm.is_fully_accelerated()
    ins, outs = cm.create_input_buffers(0), cm.create_output_buffers(0)
    ins[0].write(np.ones((1, 4), np.float32))
    ins[1].write(np.full((1, 4), 2, np.float32))
    h = cm.run_by_index_async(0, ins, outs)
    h.wait()
    assert outs[0].read(4, np.float32).tolist() == [3.0] * 4
    with pytest.raises(InterpreterError, match="GPU"):
        CompiledModel.from_file(str(p), hardware_accel=HardwareAccelerator.CPU)
    with pytest.raises(InterpreterError, match="holds 4 x float32"):
        ins[0].write(np.ones((1, 4), np.float64))


def test_bundle_interpreter_and_resize_within_max_batch(tmp_path):
    """A bundle (no .tflite): its own names; a resize inside --max-batch reuses it, one outside is
    refused naming what to do."""
    b = gpuc.compile(sig_model(), max_batch=4)
    it = gpuc.Interpreter(model_content=b)
    d = it.get_input_details()
    assert [x["name"] for x in d] == ["serving_default_x:0", "serving_default_y:0"]
    assert d[0]["shape"].tolist() == [1, 4] and d[0]["shape_signature"].tolist() == [-1, 4]
    for x in d:
        it.resize_tensor_input(x["index"], [3, 4])
    it.allocate_tensors()
    for x in d:
        it.set_tensor(x["index"], np.ones((3, 4), np.float32))
    it.invoke()
    o = it.get_output_details()
    assert o[0]["shape"].tolist() == [3, 4] and o[1]["quantization"][1] == -3
    np.testing.assert_array_equal(it.get_tensor(o[0]["index"]), np.full((3, 4), 2, np.float32))
    assert len(it._loaded) == 1                  # the bundle itself: nothing recompiled
    it.resize_tensor_input(d[0]["index"], [5, 4])
    with pytest.raises(InterpreterError, match="give the .tflite"):
        it.allocate_tensors()


def test_dynamic_bundle_resize_reuses_it():
    b = gpuc.compile(sig_model(), dynamic=["serving_default_x:0:0<=6", "serving_default_y:0:0<=6"])
    it = gpuc.Interpreter(model_content=b)
    x = it.get_input_details()[0]
    assert x["shape_signature"].tolist()[0] == -1
    for d in it.get_input_details():
        it.resize_tensor_input(d["index"], [5, 4])
    it.allocate_tensors()
    assert it.get_output_details()[0]["shape"].tolist() == [5, 4]
    for d in it.get_input_details():
        it.set_tensor(d["index"], np.full((5, 4), 1.5, np.float32))
    it.invoke()
    np.testing.assert_array_equal(it.get_tensor(it.get_output_details()[0]["index"]), np.full((5, 4), 3, np.float32))
    assert len(it._loaded) == 1                  # the bundle itself: nothing recompiled


def test_load_tflite_and_errors(tmp_path):
    p = tmp_path / "m.tflite"
    p.write_bytes(sig_model())
    m = gpuc.load(str(p))                        # compiled through the compile cache
    outs = m.run([np.ones((1, 4), np.float32), np.ones((1, 4), np.float32)])
    np.testing.assert_array_equal(outs[0], np.full((1, 4), 2, np.float32))
    it = gpuc.Interpreter(model_path=str(p))
    with pytest.raises(InterpreterError, match="no input tensor with index 7"):
        it.set_tensor(7, np.zeros((1, 4), np.float32))
    with pytest.raises(ValueError, match="expected type float32"):       # LiteRT users catch ValueError
        it.set_tensor(0, np.zeros((1, 4), np.float64))
    with pytest.raises(InterpreterError, match="resize_tensor_input first"):
        it.set_tensor(0, np.zeros((2, 4), np.float32))
    with pytest.raises(InterpreterError, match="strict resize"):
        it.resize_tensor_input(1, [2, 4], strict=True)
    with pytest.raises(InterpreterError, match="call invoke"):
        it.get_tensor(2)
    with pytest.raises(InterpreterError, match="Invalid signature_key"):
        it.get_signature_runner("nope")
    with pytest.raises(InterpreterError, match="exactly one"):
        gpuc.Interpreter()
    with pytest.raises(InterpreterError, match="takes inputs"):
        it.get_signature_runner()(x=np.ones((1, 4), np.float32))


def test_run_outputs_by_position_and_by_name():
    """LoadedModel.run / run_async: a list in model order that also answers by output name, and
    IOSpec's quantization under LiteRT's keys, equal to the Interpreter's details."""
    import pickle
    m = gpuc.load(gpuc.compile(sig_model()))
    x = {"serving_default_x:0": np.ones((1, 4), np.float32), "serving_default_y:0": np.full((1, 4), 2, np.float32)}
    out = m.run(x)
    s, q = out                                        # a list, as before
    assert isinstance(out, list) and len(out) == 2 and out.names == ("PartitionedCall:0", "PartitionedCall:1")
    assert out["PartitionedCall:0"] is s and out.get("PartitionedCall:1") is q and out.get("nope") is None
    assert "PartitionedCall:1" in out and "nope" not in out
    assert list(dict(out)) == list(out.as_dict()) == out.keys() == list(out.names)
    assert [k for k, _ in out.items()] == list(out.names) and out.values()[0] is s
    np.testing.assert_array_equal(out["PartitionedCall:0"], np.full((1, 4), 3, np.float32))
    with pytest.raises(KeyError, match="no output named 'nope'.*PartitionedCall:0"):
        out["nope"]
    h = m.run_async(x)
    assert h.wait() is h.wait() and h.wait()["PartitionedCall:1"].dtype == np.int8 and h.done()
    back = pickle.loads(pickle.dumps(out))            # e.g. through Ray
    assert back.names == out.names and np.array_equal(back["PartitionedCall:1"], q)
    spec = m.outputs[1]
    assert spec.quant == {"scale": [pytest.approx(0.05)], "zero_point": [-3], "axis": 0}
    assert spec.quantization == (pytest.approx(0.05), -3)
    it = gpuc.Interpreter(model_content=gpuc.compile(sig_model()))
    _same(it.get_output_details()[1]["quantization_parameters"], spec.quantization_parameters)
    assert m.outputs[0].quantization == (0.0, 0) and m.outputs[0].quantization_parameters["scales"].size == 0
