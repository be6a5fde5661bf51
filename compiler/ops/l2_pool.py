"""L2_POOL_2D (shaders/l2_pool.comp): sqrt(mean of the squares) over each window's cells inside the
input, NHWC, SAME / VALID, strides, fused activation; float32, as LiteRT's kernel."""
from __future__ import annotations

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import NEUTRAL, SHAPE_ONLY, Why, declare, register, template
from gpuc.compiler.ops.conv import window, window_sym
from gpuc.compiler.ops.step_chunks import in_chunks
from gpuc.compiler.ops.util import act_code, check_act, checked, size

VARIANTS = {"l2_pool": (dict(N=1, H=5, W=6, C=3, OH=3, OW=3, KH=2, KW=3, SH=2, SW=2, PT=0, PL=1), {"ACT": [0, 1]},
                        ["out_", "x"]),
            "l2_pool:chunked": (dict(N=1, H=5, W=6, C=3, OH=3, OW=3, KH=2, KW=3, SH=2, SW=2, PT=0, PL=1, CHUNKED=1),
                                {"ACT": [0, 1]}, ["out_", "x", "steps", "ps"], {"steps": "int32"},
                                lambda d: dict(rw=("ps",)))}


def _plan(node, graph):
    kh, kw = int(node.attrs.get("filter_height", 0)), int(node.attrs.get("filter_width", 0))
    if kh < 1 or kw < 1:
        raise ValueError(f"filter size {kh}x{kw} must be >= 1")
    if node.epilogue.pad is not None:
        raise ValueError("a folded PAD is not supported")
    geo, c, oc = window(node, graph, kh, kw)
    if c != oc:
        raise ValueError("pooling must keep the channel count")
    geo.pop("DH"), geo.pop("DW")
    return dict(geo, C=c, KH=kh, KW=kw)


@checked
def _check(node, graph):
    _plan(node, graph)
    return check_act(node, graph)


@register("L2_POOL_2D", check=_check, inputs=(1, 1), summary="2-D L2 pooling, SAME/VALID, fused activation")
def lower_l2_pool(node, graph):
    d = _plan(node, graph)
    n = size(graph.t(node.outputs[0]).shape)
    if not n:
        return []
    k = Kernel("l2_pool", [("out_", node.outputs[0]), ("x", node.inputs[0])], n, dict(d, ACT=act_code(node)),
               node.label())
    return in_chunks(k, graph, d["KW"] + 1, "KH", scratch=("ps", [n]))     # (tall windows: rows in chunks)


def _flops(node, graph):
    return 2 * graph.t(node.outputs[0]).size * int(node.attrs.get("filter_height", 1)) * \
        int(node.attrs.get("filter_width", 1))


declare("L2_POOL_2D", shape=Why("no host rule: the symbolic rule gives its shape"), exact=SHAPE_ONLY,
        sym_shape=window_sym, batch="merge", pieces=Why("computes values"), fp16=NEUTRAL, in_place=False,
        templates=("l2_pool",), flops=_flops, cpu=Why("no CPU kernel: the GPU runs every float L2 pool"))
template("l2_pool", item_major=True, flat=True)
