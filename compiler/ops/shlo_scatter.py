"""STABLEHLO_SCATTER on the GPU (shaders/shlo_scatter.comp), LiteRT's semantics (tensorflow/lite/kernels/
stablehlo_scatter.cc): update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims,
index_vector_dim; int32 / int64 indices; the update computation read from its subgraph as LiteRT
does: no op (replace), or one STABLEHLO_ADD / MULTIPLY / MAXIMUM / MINIMUM.  Updates apply in
row-major order (repeated targets combine in that order: float sums match LiteRT's bit for bit); a
target with a component outside its dim (negative ones included: measured on LiteRT 2.3) is skipped as
LiteRT skips it.  float32 and int32 data.
"""
from __future__ import annotations

from gpuc.compiler import ir
from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import NEUTRAL, REFUSAL_ATTR, SHAPE_ONLY, Why, declare, register, rules, template
from gpuc.compiler.ops.math import words
from gpuc.compiler.ops.shlo_gather import attr_ints, index_vector_dim
from gpuc.compiler.ops.step_chunks import in_chunks
from gpuc.compiler.ops.util import checked, size

OP = "STABLEHLO_SCATTER"
COMPUTATION = "scatter_computation"      # attribute set at import: 0 replace, 1 add, 2 mul, 3 max, 4 min
BODIES = {"STABLEHLO_ADD": 1, "STABLEHLO_MULTIPLY": 2, "STABLEHLO_MAXIMUM": 3, "STABLEHLO_MINIMUM": 4}
_ARR = dict(OPSHAPE=[4, 3], OPSTR=[3, 1], USHAPE=[2, 3], ISWIN=[0, 1], WOPDIM=[0, 1], ISTR=[1, 1], UBPOS=[0],
            SMAP=[0], IVD=1)
_BINDS = ["out_", "x", "idx", "upd"]
VARIANTS = {
    "shlo_scatter": (dict(_ARR, OR_=2, UR=2, NIV=1, NU=6, IDX64=0), {"OP": [0, 1, 2, 3, 4], "FLOATS": [0, 1]},
                     _BINDS, {"idx": "int32"}),
    "shlo_scatter:int64": (dict(_ARR, OR_=2, UR=2, NIV=1, NU=6, OP=1, FLOATS=1, IDX64=1), {}, _BINDS,
                           {"idx": "uint32"}),
    "shlo_scatter:chunked": (dict(_ARR, OR_=2, UR=2, NIV=1, NU=6, IDX64=0, CHUNKED=1),
                             {"OP": [0, 1, 2, 3, 4], "FLOATS": [0, 1]}, _BINDS + ["steps"],
                             {"idx": "int32", "steps": "int32"}, lambda d: dict(rw=("out_",))),
}


def _plan(node, graph):
    if len(node.inputs) != 3 or len(node.outputs) != 1:
        raise ValueError(f"has {len(node.inputs)} inputs and {len(node.outputs)} outputs (LiteRT takes 3 and 1)")
    x, ix, u = (graph.t(i) for i in node.inputs)
    y = graph.t(node.outputs[0])
    if ix.dtype not in ("int32", "int64"):
        raise ValueError(f"scatter indices {ix.name!r} are {ix.dtype} (LiteRT takes int32 or int64)")
    if u.dtype != x.dtype or y.dtype != x.dtype or tuple(y.shape) != tuple(x.shape):
        raise ValueError(f"updates {u.dtype} and output {y.dtype} {list(y.shape)} must be the operand's {x.dtype} "
                         f"{list(x.shape)}")
    if x.dtype not in ("float32", "int32"):
        raise ValueError(f"operand {x.name!r} is {x.dtype}: gpuc scatters float32 / int32 (no kernel yet for the "
                         "other dtypes LiteRT takes)")
    if COMPUTATION not in node.attrs:
        raise ValueError("no update computation")
    win, ins, smap = (attr_ints(node, n) for n in ("update_window_dims", "inserted_window_dims",
                                                "scatter_dims_to_operand_dims"))
    orank, irank, urank = len(x.shape), len(ix.shape), len(u.shape)
    ivd = index_vector_dim(node, irank)
    niv = int(ix.shape[ivd])
    if len(smap) != niv or any(not 0 <= m < orank for m in smap):
        raise ValueError(f"scatter_dims_to_operand_dims {smap} must name {niv} operand dims")
    if any(not 0 <= d < orank for d in ins) or len(set(ins)) != len(ins):
        raise ValueError(f"inserted_window_dims {ins} must be distinct operand dims")
    kept = [d for d in range(orank) if d not in ins]
    if sorted(win) != win or any(not 0 <= d < urank for d in win) or len(win) != len(kept):
        raise ValueError(f"update_window_dims {win} must be sorted update dims, one per operand dim not inserted")
    sdims = [d for d in range(urank) if d not in win]
    bdims = [d for d in range(irank) if d != ivd]
    if [u.shape[d] for d in sdims] != [ix.shape[d] for d in bdims]:
        raise ValueError(f"updates {list(u.shape)}: their scatter dims do not match the indices {list(ix.shape)}")
    wop, o = [], 0
    for d in range(urank):
        wop.append(kept[o] if d in win else 0)
        o += d in win
    return dict(x=x, ix=ix, u=u, y=y, win=win, smap=smap, ivd=ivd, bdims=bdims, wop=wop, niv=niv,
                op=int(node.attrs[COMPUTATION]))


@register(OP, check=checked(lambda n, g: _plan(n, g) and None), dtypes=("float32", "int32", "int64"),
          inputs=(3, 3), summary="replace / add / mul / max / min in LiteRT's update order; float32/int32 data")
def lower_shlo_scatter(node, graph):
    p = _plan(node, graph)
    x, ix, u, y = p["x"], p["ix"], p["u"], p["y"]
    if y.size == 0:
        return []
    ur = len(u.shape)
    d = dict(OR_=len(x.shape), UR=ur, NIV=p["niv"], NU=u.size, OP=p["op"], FLOATS=int(x.dtype == "float32"),
             IDX64=int(ix.dtype == "int64"), OPSHAPE=list(x.shape),
             OPSTR=[size(x.shape[k + 1:]) for k in range(len(x.shape))], USHAPE=list(u.shape),
             ISWIN=[int(k in p["win"]) for k in range(ur)], WOPDIM=p["wop"],
             ISTR=[size(ix.shape[k + 1:]) for k in range(len(ix.shape))], UBPOS=p["bdims"] or [0],
             SMAP=p["smap"] or [0], IVD=p["ivd"])
    k = Kernel("shlo_scatter", [("out_", y.id), ("x", x.id), ("idx", words(graph, ix.id)), ("upd", u.id)],
               y.size, d, node.label())
    per_update = 1 + 3 * ur + 2 * len(x.shape) + p["niv"]         # (target()'s loops)
    return in_chunks(k, graph, per_update, "NU", rw=("out_",))


def from_stablehlo(g: ir.Graph, node: ir.Node, model) -> list[ir.Node]:
    """Read the update computation from its subgraph (at import, compiler/ops/stablehlo.py)."""
    bi = int(node.attrs.get("update_computation_subgraph_index") or 0)
    subs = getattr(model, "subgraphs", [])
    body = subs[bi].nodes if 0 < bi < len(subs) else None
    if body is None or len(body) > 1 or (body and body[0].op not in BODIES):
        node.attrs[REFUSAL_ATTR] = ("its update computation is not a single STABLEHLO_ADD / MULTIPLY / MAXIMUM / "
                                    "MINIMUM or a plain update (LiteRT's kernel refuses it)")
        return [node]
    node.attrs[COMPUTATION] = BODIES[body[0].op] if body else 0
    return [node]


def _shape(node, vals, graph, need=None):
    y = _plan(node, graph)["y"]
    return [rules.placeholder(y.shape, y.dtype)]


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
declare(OP, shape=_shape, exact=SHAPE_ONLY, sym_shape=Why("no dynamic-size rule yet"),
        batch=Why("no batch rule: the dimension numbers name any dims"), pieces=Why("computes values"),
        fp16=NEUTRAL, in_place=False, templates=("shlo_scatter",),
        flops=lambda node, graph: graph.t(node.outputs[0]).size * max(graph.t(node.inputs[2]).size, 1),
        cpu=Why("no CPU kernel yet: other dtypes are refused"))
template("shlo_scatter", item_major=False, flat=True)
