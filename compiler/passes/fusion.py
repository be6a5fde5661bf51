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
from gpuc.compiler.ops.util import act_code

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


def _single_use(graph: Graph, tid: int, users) -> bool:
    return len(users.get(tid, [])) == 1 and tid not in graph.outputs


def _absorb(graph: Graph, producer: Node, consumer: Node) -> None:
    """Producer now writes the consumer's output; consumer disappears."""
    producer.outputs = [consumer.outputs[0]]
    producer.attrs["fused"] = producer.attrs.get("fused", []) + [consumer.op]
    graph.nodes.remove(consumer)


def fuse_add_epilogue(graph: Graph) -> None:
    """ADD(conv(x), r) with equal shapes -> conv with a residual epilogue."""
    changed = True
    while changed:
        changed = False
        users, prod = graph.consumers(), graph.producers()
        for add in graph.nodes:
            if add.op != "ADD" or len(add.inputs) != 2 or len(add.outputs) != 1 or min(add.inputs) < 0 \
                    or add.attrs.get("fused"):
                continue
            y = graph.t(add.outputs[0])
            for k in (0, 1):
                src, res = add.inputs[k], add.inputs[1 - k]
                p = prod.get(src)
                if (p is None or p.op not in EPILOGUE_OPS or p.epilogue.residual is not None
                        or not _single_use(graph, src, users) or graph.t(src).shape != y.shape
                        or graph.t(res).shape != y.shape or graph.t(res).is_const
                        or graph.nodes.index(prod.get(graph.storage(res), p)) > graph.nodes.index(p)):
                    continue
                p.epilogue.act = act_code(p, ignore=() if p.op == "FULLY_CONNECTED" else (4, 5))
                p.epilogue.residual = res
                p.epilogue.act2 = act_code(add)
                _absorb(graph, p, add)
                changed = True
                break
            if changed:
                break


def fuse_activation(graph: Graph) -> None:
    """An activation op (RELU, RELU6, TANH ...: ew_table rows with a code) after a producer with a free
    activation slot."""
    users, prod = graph.consumers(), graph.producers()
    for node in list(graph.nodes):
        if node.op not in ACT_OPS or len(node.inputs) != 1 or len(node.outputs) != 1 or node.inputs[0] < 0:
            continue
        src = node.inputs[0]
        p = prod.get(src)
        if p is None or p.op not in ACT_HOSTS or not _single_use(graph, src, users):
            continue
        if graph.t(src).shape != graph.t(node.outputs[0]).shape:
            continue
        if p.epilogue.residual is not None:
            if p.epilogue.act2:
                continue
            p.epilogue.act2 = ACT_OPS[node.op]
        else:
            if act_code(p, ignore=() if p.op == "FULLY_CONNECTED" else (4, 5)):
                continue
            p.epilogue.act = ACT_OPS[node.op]
        _absorb(graph, p, node)
        users, prod = graph.consumers(), graph.producers()


VIEW_OPS = {"RESHAPE", "SQUEEZE", "EXPAND_DIMS"}


def reshape_as_view(graph: Graph) -> None:
    """RESHAPE / SQUEEZE / EXPAND_DIMS of a runtime tensor: the output shares the input's memory."""
    for node in list(graph.nodes):
        if node.op in VIEW_OPS and len(node.outputs) == 1 and node.inputs and node.inputs[0] >= 0 \
                and not graph.t(node.inputs[0]).is_const \
                and graph.t(node.inputs[0]).dtype == graph.t(node.outputs[0]).dtype:
            graph.aliases[node.outputs[0]] = node.inputs[0]
            graph.nodes.remove(node)


def fold_pad(graph: Graph) -> None:
    """A zero PAD of H/W feeding only a CONV_2D / DEPTHWISE_CONV_2D becomes extra leading/trailing
    padding of that conv (its bounds checks read zeros there); the padded tensor is never built."""
    users = graph.consumers()
    for pad in list(graph.nodes):
        if pad.op not in ("PAD", "PADV2") or len(pad.inputs) < 2 or len(pad.outputs) != 1 or min(pad.inputs) < 0:
            continue
        out = pad.outputs[0]
        consumers = users.get(out, [])
        p = graph.t(pad.inputs[1])
        x = graph.t(pad.inputs[0])
        if (len(consumers) != 1 or out in graph.outputs or not p.is_const or len(x.shape) != 4
                or consumers[0].op not in ("CONV_2D", "DEPTHWISE_CONV_2D") or consumers[0].inputs[0] != out
                or consumers[0].epilogue.pad is not None):
            continue
        if pad.op == "PADV2" and len(pad.inputs) > 2 and pad.inputs[2] >= 0:
            v = graph.t(pad.inputs[2])
            if not v.is_const or np.asarray(v.data).reshape(-1)[0] != 0:
                continue
        hw = _hw_pads(p.data)
        if hw is None:
            continue
        conv = consumers[0]
        conv.epilogue.pad = hw
        conv.inputs[0] = pad.inputs[0]
        conv.attrs["fused"] = ["PAD"] + conv.attrs.get("fused", [])
        graph.nodes.remove(pad)
        users = graph.consumers()


def _pad_value(graph: Graph, pad: Node):
    """The PAD's constant value (float), or None when it is not a constant."""
    if pad.op == "PADV2" and len(pad.inputs) > 2 and pad.inputs[2] >= 0:
        v = graph.t(pad.inputs[2])
        return float(np.asarray(v.data).reshape(-1)[0]) if v.is_const and v.size == 1 else None
    return 0.0


def fold_pad_pool(graph: Graph) -> None:
    """A PAD of H/W feeding only a MAX_POOL_2D / AVERAGE_POOL_2D becomes explicit padding of the pool
    (pool2d.comp FOLDED_PAD) whose cells take part exactly as the padded tensor's did, so the result
    is identical: the maximum sees the pad value (any constant: PADV2's -inf or the zero after a RELU
    alike), the average counts padded cells - only zero padding there, which adds nothing to the sum
    and so keeps LiteRT's summation exact.  Implicit SAME padding of the pool stays ignored.
    Runs after plan_fp16_storage: under --precision fp16 a fold is skipped where the padded tensor
    would have been float16 but its input fp32 (the pool would see unrounded values)."""
    users = graph.consumers()
    for pad in list(graph.nodes):
        if pad.op not in ("PAD", "PADV2") or len(pad.inputs) < 2 or len(pad.outputs) != 1 or min(pad.inputs[:2]) < 0:
            continue
        out, src = pad.outputs[0], pad.inputs[0]
        consumers = users.get(out, [])
        p, x, y = graph.t(pad.inputs[1]), graph.t(src), graph.t(out)
        if (len(consumers) != 1 or out in graph.outputs or not p.is_const or len(x.shape) != 4
                or consumers[0].op not in ("MAX_POOL_2D", "AVERAGE_POOL_2D") or consumers[0].inputs[0] != out
                or consumers[0].epilogue.pad is not None or x.dtype != "float32" or y.dtype != "float32"
                or out in graph.aliases.values() or out in graph.aliases):
            continue
        pool = consumers[0]
        value = _pad_value(graph, pad)
        if value is None or not (value == 0.0 or pool.op == "MAX_POOL_2D" and not np.isnan(value)):
            continue
        fq_in, fq_out = x.fake_quant, y.fake_quant
        if fq_out is not None and (fq_out != fq_in or value != 0.0):
            continue        # the PAD re-rounded to another grid: keep it
        pinned = graph.fp32_pinned
        if pinned is not None and graph.storage(src) in pinned and graph.storage(out) not in pinned:
            continue
        hw = _hw_pads(p.data)
        if hw is None:
            continue
        pool.epilogue.pad, pool.epilogue.pad_value = hw, value
        saved = pool.inputs[0]
        pool.inputs[0] = src
        if ops.unsupported_reason(pool, graph) is not None:        # geometry must still check out
            pool.inputs[0] = saved
            pool.epilogue.pad, pool.epilogue.pad_value = None, 0.0
            continue
        pool.attrs["fused"] = [pad.op] + pool.attrs.get("fused", [])
        graph.nodes.remove(pad)
        users = graph.consumers()
