"""REVERSE_SEQUENCE (shaders/index_map.comp, mode 0): along `seq_dim`, the first seq_lengths[b]
positions of batch row b (its coordinate along `batch_dim`) reversed, the rest copied, as LiteRT's
reference kernel.  A length of 0 or 1, or a negative one, copies the row.  LiteRT fails the invoke on
a first length past the sequence axis (and reads out of bounds for a later one): gpuc fails the run
on any such length (runtime/status.py).  Data: float32, int32, int64, uint8, int16 (LiteRT's set);
lengths int32 or int64, constant or computed at run time.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler import status
from gpuc.compiler.ops import NEUTRAL, SHAPE_ONLY, Why, declare, index_map, register, rules
from gpuc.compiler.ops.util import checked, strides

DTYPES = ("float32", "int32", "int64", "uint8", "int16")


def _plan(node, graph):
    x, ln = graph.t(node.inputs[0]), graph.t(node.inputs[1])
    y = graph.t(node.outputs[0])
    seq, bat = int(node.attrs.get("seq_dim", 0)), int(node.attrs.get("batch_dim", 0))
    r = len(x.shape)
    if not (0 <= seq < r and 0 <= bat < r and seq != bat):
        raise ValueError(f"seq_dim {seq} and batch_dim {bat} must be two different axes of the rank-{r} input "
                         f"(LiteRT takes no negative axis)")
    if ln.dtype not in ("int32", "int64") or len(ln.shape) != 1 or ln.shape[0] != x.shape[bat]:
        raise ValueError(f"seq_lengths must be a 1-D int32/int64 of {x.shape[bat]} values "
                         f"(got {ln.dtype} {list(ln.shape)})")
    if x.dtype != y.dtype or tuple(x.shape) != tuple(y.shape):
        raise ValueError(f"output {y.dtype} {list(y.shape)} differs from the input {x.dtype} {list(x.shape)}")
    if ln.is_const and (np.asarray(ln.data) > x.shape[seq]).any():
        raise ValueError(f"seq_lengths {np.asarray(ln.data).tolist()} exceed the sequence axis ({x.shape[seq]})")
    return x, ln, y, seq, bat


@register("REVERSE_SEQUENCE", check=checked(lambda n, g: _plan(n, g) and None), dtypes=DTYPES, inputs=(2, 2),
          rejects=("int8", "bool", "float16"),
          summary="any seq_dim / batch_dim, int32 or int64 lengths (constant or run time; one past the axis "
                  "fails the run as in LiteRT)")
def lower_reverse_sequence(node, graph):
    x, ln, y, seq, bat = _plan(node, graph)
    if not y.size:
        return []
    st = strides(x.shape)
    d = dict(SEQ_N=int(x.shape[seq]), SEQ_STRIDE=st[seq], BATCH_N=int(x.shape[bat]), BATCH_STRIDE=st[bat])
    k = index_map.kernel(graph, node, index_map.REVERSE_SEQUENCE, d, x.id, lens=ln.id)
    if not ln.is_const:
        status.index_check(graph, node, k, ln.id, [int(x.shape[seq]) + 1])
    return [k]


declare("REVERSE_SEQUENCE", shape=rules.same_shape, exact=SHAPE_ONLY, sym_shape="same",
        batch=Why("no batch rule: the batch axis is an attribute"), pieces=Why("a data-dependent permutation"),
        fp16=NEUTRAL, in_place=False, templates=("index_map",), flops=rules.per_output,
        cpu=Why("no CPU kernel: the GPU takes every dtype LiteRT does"))
