"""BITCAST: the input's bytes reinterpreted as the output's dtype, as LiteRT's kernel: a wider input
element gains a last dim (input size / output size), a narrower one needs its last dim to equal
output size / input size and loses it.  On the GPU a copy of 32-bit words (shaders/copy_nd.comp)
between uint32 views of the two tensors; constants fold."""
from __future__ import annotations

import numpy as np

from gpuc.compiler.ops import ALWAYS, NEUTRAL, Why, declare, register, rules
from gpuc.compiler.ops.shape import copy_kernel
from gpuc.compiler.ops.util import checked

DTYPES = ("float32", "int32", "bool", "int8", "uint8", "int16", "float16", "int64", "uint32", "uint16")


def expected_shape(shape, src: str, dst: str) -> list[int]:
    a, b = np.dtype(src).itemsize, np.dtype(dst).itemsize
    shape = list(shape)
    if a > b:
        return shape + [a // b]
    if a < b:
        if not shape or shape[-1] != b // a:
            raise ValueError(f"{src} -> {dst} needs a last dim of {b // a} (input {shape})")
        return shape[:-1]
    return shape


def _plan(node, graph):
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    want = expected_shape(x.shape, x.dtype, y.dtype)
    if list(y.shape) != want:
        raise ValueError(f"output {list(y.shape)} differs from the expected {want}")
    return x, y


def _bits(graph, tid: int) -> int:
    """A uint32 view of tensor tid's bytes (whole words; a padded copy of a constant)."""
    t = graph.t(tid)
    n = -(-t.nbytes // 4)
    if t.is_const:
        raw = np.zeros(n * 4, np.uint8)
        raw[:t.nbytes] = np.ascontiguousarray(t.data).view(np.uint8).reshape(-1)
        return graph.add_const(f"{t.name}#bits", raw.view("<u4"))
    v = graph.add_tensor(f"{t.name}#bits", (n,), "uint32")
    graph.aliases[v] = tid
    return v


@register("BITCAST", check=checked(lambda n, g: _plan(n, g) and None), dtypes=DTYPES, inputs=(1, 1),
          summary="bytes reinterpreted (a copy of words), every dtype")
def lower_bitcast(node, graph):
    x, y = _plan(node, graph)
    n = -(-y.nbytes // 4)
    if not n:
        return []
    return [copy_kernel(_bits(graph, x.id), _bits(graph, y.id), [n], [1], [1], label=node.label())]


def _shape(node, vals, graph, need=None):
    x = np.ascontiguousarray(vals[0])
    dt = rules.out_dtype(node, graph)
    shape = expected_shape(x.shape, x.dtype.name, dt)
    if need is not None and not all(need):
        return [rules.placeholder(shape, dt)]
    return [x.view(dt).reshape(shape)]


declare("BITCAST", shape=_shape, exact=ALWAYS, sym_shape=Why("no dynamic-size rule yet"),
        batch=Why("no batch rule yet"), pieces=Why("reinterprets bytes"), fp16=NEUTRAL, in_place=False,
        templates=("copy_nd",), flops=rules.per_output, cpu=Why("no CPU kernel: the GPU copies every dtype"))
