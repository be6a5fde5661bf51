"""Reference outputs from LiteRT's CPU interpreter, with plain builtin kernels (no default delegates)."""
from __future__ import annotations

import numpy as np


def make_interpreter(model_bytes: bytes):
    from ai_edge_litert.interpreter import Interpreter
    try:
        from ai_edge_litert.interpreter import OpResolverType
        resolver = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    except ImportError:                                   # older LiteRT: default resolver
        return Interpreter(model_content=bytes(model_bytes))
    return Interpreter(model_content=bytes(model_bytes), experimental_op_resolver_type=resolver)


def run_litert(model_bytes: bytes, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Load, allocate, feed `inputs` in model input order, invoke; outputs in model output order."""
    it = make_interpreter(model_bytes)
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
