"""LLM decode-step fusions around the weight-only int8 FULLY_CONNECTED (ops/gemm_q8.py), pass
`fuse_q8_gemv` (after simulate_quantization marks the int8 FCs, before the elementwise / epilogue passes):

- GLU: litert-torch's MLP  MUL(MUL(g, LOGISTIC(g)), u)  with g = FC(x, Wgate) and u = FC(x, Wup), both
  int8 FCs of the same input and shape, becomes the gate FC alone computing both dot products over the
  one quantized row and silu(g) * u in its epilogue (gemm_q8 GLU): one dispatch instead of two, the input
  read and quantized once.
- RMS prologue: an RMS_NORM (ops/rms_norm.py) whose output only int8 FCs read (over its last axis)
  disappears: each FC reads the norm's input and normalizes the row itself before quantizing it
  (gemm_q8 RMS, rms_norm.comp's arithmetic).  One dispatch and one [rows, D] round trip fewer per norm.

Each FC still quantizes exactly what LiteRT's hybrid FC quantizes (the normalized row), so results
stay those of the unfused program to float rounding (the row sums of the norm may add in another order).
"""
from __future__ import annotations

from gpuc.compiler.ir import Graph, Node
from gpuc.compiler.ops import gemm_q8, rms_norm
from gpuc.compiler.ops.util import fused_act

FC = "FULLY_CONNECTED"


def _free(g: Graph, t: int, keep: set) -> bool:
    return t not in keep and not g.t(t).is_variable


def _plain_q8(n: Node | None, glu: bool = False) -> bool:
    """An int8-weight FC (gemm_q8) without anything fused into it yet (glu: but maybe a GLU)."""
    return (n is not None and n.op == FC and bool(n.attrs.get(gemm_q8.ATTR)) and fused_act(n) == 0
            and (glu or not n.attrs.get(gemm_q8.GLU_ATTR)) and not n.attrs.get(gemm_q8.RMS_ATTR)
            and n.epilogue.residual is None and not n.epilogue.chain and len(n.outputs) == 1)


def _bias(n: Node) -> int:
    return n.inputs[2] if len(n.inputs) > 2 and n.inputs[2] >= 0 else -1


def _glu(g: Graph, fin: Node, prod: dict, users: dict, keep: set) -> bool:
    if fin.op != "MUL" or len(fin.inputs) != 2 or fused_act(fin) != 0:
        return False
    shape = tuple(g.t(fin.outputs[0]).shape)
    for a, b in (fin.inputs, fin.inputs[::-1]):
        sm, up = prod.get(a), prod.get(b)
        if sm is None or sm.op != "MUL" or fused_act(sm) != 0 or len(sm.inputs) != 2 or not _plain_q8(up):
            continue
        for gt, lt in (sm.inputs, sm.inputs[::-1]):
            lg, gate = prod.get(lt), prod.get(gt)
            if lg is None or lg.op != "LOGISTIC" or list(lg.inputs) != [gt] or not _plain_q8(gate) or gate is up:
                continue
            if gate.inputs[0] != up.inputs[0] or g.t(gate.inputs[1]).shape != g.t(up.inputs[1]).shape:
                continue
            ub = _bias(up)
            if ub >= 0 and not g.t(ub).is_const:
                continue
            ts = (gt, lt, a, b)
            if any(tuple(g.t(t).shape) != shape or g.t(t).dtype != "float32" or not _free(g, t, keep) for t in ts):
                continue
            if sorted(map(id, users.get(gt, []))) != sorted(map(id, [lg, sm])) or \
                    [id(u) for u in users.get(lt, [])] != [id(sm)] or [id(u) for u in users.get(a, [])] != [id(fin)] \
                    or [id(u) for u in users.get(b, [])] != [id(fin)]:
                continue
            gate.outputs = [fin.outputs[0]]
            gate.attrs[gemm_q8.GLU_ATTR] = (up.inputs[1], ub)
            gone = {id(lg), id(sm), id(fin), id(up)}
            g.nodes = [n for n in g.nodes if id(n) not in gone]
            return True
    return False


def _rms(g: Graph, rn: Node, users: dict, keep: set) -> bool:
    y, (x, w) = rn.outputs[0], rn.inputs
    readers = users.get(y, [])
    if not readers or not _free(g, y, keep) or not g.t(w).is_const or g.t(w).dtype != "float32":
        return False
    d = int(g.t(x).shape[-1])
    for fc in readers:
        if not _plain_q8(fc, glu=True) or fc.inputs[0] != y or y in fc.inputs[1:] or int(g.t(fc.inputs[1]).shape[1]) != d:
            return False
    for fc in readers:
        fc.inputs = [x] + list(fc.inputs[1:])
        fc.attrs[gemm_q8.RMS_ATTR] = (w, float(rn.attrs["eps"]))
    g.nodes = [n for n in g.nodes if n is not rn]
    return True


def fuse_q8_gemv(g: Graph) -> None:
    """GLU gate/up merges, then RMS_NORM prologues (module docstring)."""
    keep = set(g.outputs)
    changed = True
    while changed:
        changed = False
        prod, users = g.producers(), g.consumers()
        for n in list(g.nodes):
            if _glu(g, n, prod, users, keep):
                changed = True
                break
    users = g.consumers()
    for n in list(g.nodes):
        if n.op == rms_norm.OP and _rms(g, n, users, keep):
            users = g.consumers()
