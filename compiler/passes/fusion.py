"""Fusion passes: fold an op into its producer's epilogue so it costs no dispatch and no memory.

Epilogue model (conv2d / fully_connected templates): v = act(acc + bias); v = act2(v + residual).
The passes fill the producer's `Node.epilogue` (act: gpuc activation code, residual: tensor id,
act2; a folded PAD: pad, pad_value).  The consumer node is removed and the producer writes the
consumer's output tensor.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler import ew_table, ops
from gpuc.compiler.ir import Graph, Node
from gpuc.compiler.ops.shape import pad_constant
from gpuc.compiler.ops.util import CLAMP_ACTS, act_code, fused_act
from gpuc.compiler.pattern import Op, Val, const, one_output, rewrite

EPILOGUE_OPS = {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV", "CUSTOM:Convolution2DTransposeBias"}
ACT_OPS = ew_table.ACT            # activation op -> its code
ACT_HOSTS = EPILOGUE_OPS | ew_table.ACT_HOSTS | {"AVERAGE_POOL_2D", "MAX_POOL_2D"}


def _hw_pads(data):
    """(top, bottom, left, right) of a constant [4, 2] NHWC PAD amount that pads only H and W by
    non-negative integers; else None (malformed paddings stay for the PAD check's clear error)."""
    pads = np.asarray(data)
    if pads.size != 8 or pads.dtype.kind not in "iu":
        return None
    pads = pads.reshape(4, 2)
    if (pads < 0).any() or pads[0].any() or pads[3].any():
        return None
    return int(pads[1, 0]), int(pads[1, 1]), int(pads[2, 0]), int(pads[2, 1])


def _absorb(graph: Graph, producer: Node, consumer: Node) -> None:
    """Producer now writes the consumer's output; consumer disappears."""
    producer.outputs = [consumer.outputs[0]]
    producer.attrs["fused"] = producer.attrs.get("fused", []) + [consumer.op]
    graph.nodes.remove(consumer)


def _own_act(p: Node) -> int:
    return act_code(p, ignore=() if p.op == "FULLY_CONNECTED" else (4, 5))


def _fc_rows(g, p: Node, y) -> bool:
    """An FC whose result is y's elements in y's order, in another shape: rows of N either way (a
    converter's rank-2 FC, [197, 768], added to a rank-3 residual [1, 197, 768]).  Static shapes only."""
    out = g.t(p.outputs[0]).shape
    return (p.op == "FULLY_CONNECTED" and len(y.shape) >= 1 and len(out) >= 1
            and all(isinstance(d, (int, np.integer)) for d in (*out, *y.shape))
            and out[-1] == y.shape[-1] and int(np.prod(out)) == int(np.prod(y.shape)))


def _add_fits(m, match) -> bool:
    g, p, add, res = m.g, match["p"], match["add"], match["res"]
    y = g.t(add.outputs[0])
    return (g.t(p.outputs[0]).shape == y.shape or _fc_rows(g, p, y)) and g.t(res).shape == y.shape \
        and not g.t(res).is_const and g.nodes.index(m.prod.get(g.storage(res), p)) <= g.nodes.index(p)


ADD_EPILOGUE = Op("ADD", Op(EPILOGUE_OPS, name="p", uses=1, where=lambda m, n: n.epilogue.residual is None),
                  Val("res"), commute=True, name="add", check=_add_fits,
                  where=lambda m, n: len(n.outputs) == 1 and not n.attrs.get("fused"))


def _add_residual(graph: Graph, match) -> None:
    _take_residual(graph, match["p"], match["add"], match["res"])


def _take_residual(graph: Graph, p: Node, add: Node, res: int) -> None:
    """p takes ADD `add`'s other operand `res` as its residual epilogue and writes the ADD's output."""
    y = graph.t(add.outputs[0])
    if graph.t(p.outputs[0]).shape != y.shape:
        p.attrs["out_shape"] = list(y.shape)      # (an FC now writing the ADD's shape: ops/conv.py _fc_shape)
    p.epilogue.act = _own_act(p)
    p.epilogue.residual = res
    p.epilogue.act2 = act_code(add)
    _absorb(graph, p, add)


def fuse_add_epilogue(graph: Graph) -> None:
    """ADD(conv(x), r) with equal shapes -> conv with a residual epilogue; also ADD(view of FC(x), r), the
    view a batched program's (passes/batching.py: [items * T, N] read as [items, 1, T, N])."""
    rewrite(graph, [(ADD_EPILOGUE, _add_residual)], restart=True, variables=False)
    _add_view_residuals(graph)


def _add_view_residuals(graph: Graph) -> None:
    """ADD(v, r) where v is a view (graph.aliases) of an FC's whole result that nothing else reads: the FC
    takes r as its residual and writes the ADD's output (its rows of N as y's: _fc_rows); the view goes."""
    users, prod = graph.consumers(), graph.producers()
    keep = set(graph.outputs) | {t.id for t in graph.tensors if t.is_variable}
    for add in [n for n in graph.nodes if n.op == "ADD"]:
        if len(add.inputs) != 2 or len(add.outputs) != 1 or add.attrs.get("fused") or min(add.inputs) < 0:
            continue
        for v, res in (add.inputs, add.inputs[::-1]):
            base = graph.aliases.get(v)
            p = prod.get(base) if base is not None and base not in graph.aliases else None
            if p is None or p.op != "FULLY_CONNECTED" or p.epilogue.residual is not None or p.outputs != [base] \
                    or users.get(base) or len(users.get(v, [])) != 1 or {base, v} & keep or res == v \
                    or any(users.get(t) or t in keep for t in graph.aliases if t != v and graph.storage(t) == base):
                continue
            y = graph.t(add.outputs[0])
            r = graph.t(res)
            if r.is_const or r.shape != y.shape or not _fc_rows(graph, p, y) \
                    or graph.nodes.index(prod.get(graph.storage(res), p)) > graph.nodes.index(p):
                continue
            _take_residual(graph, p, add, res)
            del graph.aliases[v]
            users, prod = graph.consumers(), graph.producers()
            break


def _act_slot_free(m, match) -> bool:
    p, act = match["p"], match["act"]
    if m.g.t(p.outputs[0]).shape != m.g.t(act.outputs[0]).shape:
        return False
    return not p.epilogue.act2 if p.epilogue.residual is not None else not _own_act(p)


ACTIVATION = Op(ACT_OPS, Op(ACT_HOSTS, name="p", uses=1), name="act", check=_act_slot_free, where=one_output)


def _set_act(graph: Graph, match) -> None:
    p, act = match["p"], match["act"]
    if p.epilogue.residual is not None:
        p.epilogue.act2 = ACT_OPS[act.op]
    else:
        p.epilogue.act = ACT_OPS[act.op]
    _absorb(graph, p, act)


def fuse_activation(graph: Graph) -> None:
    """An activation op (RELU, RELU6, TANH ...: ew_table rows with a code) after a producer with a free
    activation slot."""
    rewrite(graph, [(ACTIVATION, _set_act)], variables=False)


VIEW_OPS = {"RESHAPE", "SQUEEZE", "EXPAND_DIMS"}


def reshape_as_view(graph: Graph) -> None:
    """RESHAPE / SQUEEZE / EXPAND_DIMS of a runtime tensor: the output shares the input's memory."""
    for node in list(graph.nodes):
        if node.op in VIEW_OPS and len(node.outputs) == 1 and node.inputs and node.inputs[0] >= 0 \
                and not graph.t(node.inputs[0]).is_const \
                and graph.t(node.inputs[0]).dtype == graph.t(node.outputs[0]).dtype:
            graph.aliases[node.outputs[0]] = node.inputs[0]
            graph.nodes.remove(node)


def _hw_pad(m, n: Node) -> bool:
    return len(m.g.t(n.inputs[0]).shape) == 4 and _hw_pads(m.g.t(n.inputs[1]).data) is not None


PAD = Op(("PAD", "PADV2"), Val("x"), Val(where=const), name="pad", uses=1, prefix=True, where=(one_output, _hw_pad))
CONV_PAD = Op(("CONV_2D", "DEPTHWISE_CONV_2D"), PAD, name="conv", prefix=True,
              where=lambda m, n: n.epilogue.pad is None,
              check=lambda m, match: min(match["pad"].inputs) >= 0 and _pad_value(m.g, match["pad"]) == 0)


def _pad_conv(graph: Graph, match) -> None:
    pad, conv = match["pad"], match["conv"]
    conv.epilogue.pad = _hw_pads(graph.t(pad.inputs[1]).data)
    conv.inputs[0] = pad.inputs[0]
    conv.attrs["fused"] = ["PAD"] + conv.attrs.get("fused", [])
    graph.nodes.remove(pad)


def fold_pad(graph: Graph) -> None:
    """A zero PAD of H/W feeding only a CONV_2D / DEPTHWISE_CONV_2D becomes extra leading/trailing
    padding of that conv (its bounds checks read zeros there); the padded tensor is never built."""
    rewrite(graph, [(CONV_PAD, _pad_conv)], variables=False)


def _pad_value(graph: Graph, pad: Node):
    """The PAD's constant value as LiteRT writes it (float), or None when it is not a constant."""
    v = pad_constant(graph, pad)
    return None if v is None else float(v)


def fold_pad_pool(graph: Graph) -> None:
    """A PAD of H/W feeding only a MAX_POOL_2D / AVERAGE_POOL_2D becomes explicit padding of the pool
    (pool2d.comp FOLDED_PAD) whose cells take part exactly as the padded tensor's did, so the result
    is identical: the maximum sees the pad value (any constant: PADV2's -inf or the zero after a RELU
    alike), the average counts padded cells - only zero padding there, which adds nothing to the sum
    and so keeps LiteRT's summation exact.  Implicit SAME padding of the pool stays ignored.
    Runs after plan_fp16_storage: under --precision fp16 a fold is skipped where the padded tensor
    would have been float16 but its input fp32 (the pool would see unrounded values) -- except into a
    MAX_POOL_2D whose output is float16 too, with no activation or a clamp: rounding to float16 is monotone, so
    the float16 maximum of unrounded values is the maximum of the rounded ones (a batch-32 fp16 7x7 RGB stem:
    its plain fp32 convolution, then PADV2 -inf and the max pool, 115 us of PADV2 on the H100; a bottleneck CNN
    3.998 -> 3.862 ms, benchmarks/archive/stem_pool_ab.py)."""
    rewrite(graph, [(POOL_PAD, _pad_pool)], variables=False)


def _pool_pad_fits(m, match) -> bool:
    g, pad, pool = m.g, match["pad"], match["pool"]
    out, src = pad.outputs[0], pad.inputs[0]
    x, y = g.t(src), g.t(out)
    if x.dtype != "float32" or y.dtype != "float32" or out in g.aliases.values() or out in g.aliases:
        return False
    value = _pad_value(g, pad)
    if value is None or not (value == 0.0 or pool.op == "MAX_POOL_2D" and not np.isnan(value)):
        return False
    if y.fake_quant is not None and (y.fake_quant != x.fake_quant or value != 0.0):
        return False        # the PAD re-rounded to another grid: keep it
    pinned = g.fp32_pinned
    return (pinned is None or g.storage(src) not in pinned or g.storage(out) in pinned
            or _rounding_commutes(g, pool))


def _rounding_commutes(g: Graph, pool: Node) -> bool:
    """Whether a MAX_POOL_2D stored as float16 gives the same bits from unrounded inputs as from their float16
    roundings: a maximum, then a clamp at most, into float16 storage (round(max(x)) == max(round(x)))."""
    return (pool.op == "MAX_POOL_2D" and fused_act(pool) in CLAMP_ACTS
            and pool.epilogue.act is None and not pool.epilogue.chain and pool.epilogue.residual is None
            and g.storage(pool.outputs[0]) not in g.fp32_pinned)


POOL_PAD = Op(("MAX_POOL_2D", "AVERAGE_POOL_2D"), PAD, name="pool", prefix=True,
              where=lambda m, n: n.epilogue.pad is None, check=_pool_pad_fits)


def _pad_pool(graph: Graph, match):
    pad, pool = match["pad"], match["pool"]
    pool.epilogue.pad, pool.epilogue.pad_value = _hw_pads(graph.t(pad.inputs[1]).data), _pad_value(graph, pad)
    pool.inputs[0] = pad.inputs[0]
    if ops.unsupported_reason(pool, graph) is not None:        # geometry must still check out
        pool.inputs[0] = pad.outputs[0]
        pool.epilogue.pad, pool.epilogue.pad_value = None, 0.0
        return False
    pool.attrs["fused"] = [pad.op] + pool.attrs.get("fused", [])
    graph.nodes.remove(pad)
