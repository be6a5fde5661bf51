"""Reference outputs from LiteRT's CPU interpreter, with plain builtin kernels (no default delegates), or
with default=True its default interpreter (XNNPACK: e.g. its dynamic-range FC, which quantizes each row);
`run_litert_both` runs both, for behaviour where the two differ;
`litert_stream` / `litert_runs` invoke one interpreter once per input (state carries over)."""
from __future__ import annotations

import numpy as np


def make_interpreter(model_bytes: bytes, default: bool = False):
    """An Interpreter of the plain builtin kernels (default=True: LiteRT's default resolver, XNNPACK)."""
    from ai_edge_litert.interpreter import Interpreter
    if default:
        return Interpreter(model_content=bytes(model_bytes))
    try:
        from ai_edge_litert.interpreter import OpResolverType
        resolver = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    except ImportError:                                   # older LiteRT: default resolver
        return Interpreter(model_content=bytes(model_bytes))
    return Interpreter(model_content=bytes(model_bytes), experimental_op_resolver_type=resolver)


def run_litert(model_bytes: bytes, inputs: list[np.ndarray], default: bool = False) -> list[np.ndarray]:
    """Load, allocate, feed `inputs` in model input order, invoke; outputs in model output order (default:
    through LiteRT's default resolver, see make_interpreter)."""
    it = make_interpreter(model_bytes, default)
    it.allocate_tensors()
    details = it.get_input_details()
    if len(details) != len(inputs):
        raise ValueError(f"model has {len(details)} inputs, got {len(inputs)}")
    inputs = [np.ascontiguousarray(x) for x in inputs]
    resized = False
    for d, x in zip(details, inputs):
        if tuple(x.shape) != tuple(d["shape"]):
            it.resize_tensor_input(d["index"], list(x.shape))
            resized = True
    if resized:
        it.allocate_tensors()
    for d, x in zip(details, inputs):
        it.set_tensor(d["index"], x)          # raises on a dtype mismatch (no silent casts)
    it.invoke()
    return [np.array(it.get_tensor(d["index"])) for d in it.get_output_details()]


def run_litert_both(model_bytes: bytes, inputs: list[np.ndarray], post=None) -> list:
    """[default (XNNPACK) outputs, builtin-kernel outputs], each passed through `post` if given; None in
    place of an interpreter that cannot load the model or fails to invoke it (e.g. FLOOR_DIV by 0)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    res = []
    for kw in ({}, {"experimental_op_resolver_type": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES}):
        try:
            it = Interpreter(model_content=bytes(model_bytes), **kw)
            it.allocate_tensors()
            for d, x in zip(it.get_input_details(), inputs):
                it.set_tensor(d["index"], x)
            it.invoke()
        except (RuntimeError, ValueError):
            res.append(None)
            continue
        outs = [np.array(it.get_tensor(d["index"])) for d in it.get_output_details()]
        res.append(post(outs) if post else outs)
    return res


def assert_equals_either(outs: list[np.ndarray], model_bytes: bytes, inputs: list[np.ndarray]) -> None:
    """Every output equals (NaN matching NaN) that of one of LiteRT's two interpreters."""
    refs = [r for r in run_litert_both(model_bytes, inputs) if r is not None]
    assert refs, "LiteRT ran neither interpreter"
    for k, o in enumerate(outs):
        if not any(np.array_equal(o, r[k], equal_nan=o.dtype.kind == "f") for r in refs):
            raise AssertionError(f"output {k}: {o} is neither interpreter's: {[r[k] for r in refs]}")


def litert_stream(model_bytes: bytes, xs, state=None) -> list[list[np.ndarray]]:
    """One interpreter, invoked once per input (fed to the first model input), so that variables and
    LSTM state carry over as in LiteRT: each invoke's outputs.  state: {tensor name: initial value}
    set before the first invoke."""
    it = make_interpreter(model_bytes)
    it.allocate_tensors()
    for d in it.get_tensor_details():
        if state and d["name"] in state:
            it.set_tensor(d["index"], state[d["name"]])
    ind, outs = it.get_input_details()[0]["index"], it.get_output_details()
    res = []
    for x in xs:
        it.set_tensor(ind, x)
        it.invoke()
        res.append([np.array(it.get_tensor(o["index"])) for o in outs])
    return res


def litert_runs(model_bytes: bytes, xs, state=None) -> list[np.ndarray]:
    """litert_stream's first output of each invoke."""
    return [outs[0] for outs in litert_stream(model_bytes, xs, state)]


def assert_items_bitexact(bundle: bytes, model_bytes: bytes, feeds: list[np.ndarray], items: int, device=None) -> None:
    """Run a --max-batch `bundle` on `feeds` (each holding the items along axis 0) and check items
    [0, items) of its first output against LiteRT running `model_bytes` on each item alone, byte for byte."""
    import gpuc
    m = gpuc.load(bundle, device=device)
    try:
        out = m.run(feeds)[0]
    finally:
        m.close()
    for item in range(items):
        ref = run_litert(model_bytes, [f[item:item + 1] for f in feeds])[0]
        assert out[item:item + 1].tobytes() == ref.tobytes(), f"item {item}"
