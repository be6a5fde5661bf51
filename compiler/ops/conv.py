"""CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, AVERAGE_POOL_2D, MAX_POOL_2D: their checks, the conv/pool
window geometry, the depthwise dispatch and the lowerings; a conv or FC is a `gemm` dispatch built by
ops/gemm_dispatch.py on the tile plan of ops/gemm_plan.py."""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import LOCAL_X, Kernel, flat_local_x
from gpuc.compiler import sym_shapes as D
from gpuc.compiler import symbolic as S
from gpuc.compiler.ops import NEUTRAL, SHAPE_ONLY, Why, declare, register, rules, template
from gpuc.compiler.ops.depthwise_plan import plan_depthwise, plan_variants, weights_in_registers
from gpuc.compiler.ops.epi_chain import apply_chain
from gpuc.compiler.ops import gemm_q8, gemm_qb, ln_fold
from gpuc.compiler.ops.gemm_dispatch import float_const, gemm_kernels, relayout
from gpuc.compiler.ops.reduce import SUBGROUP_VARIANT
from gpuc.compiler.ops.util import (PADDING_SAME, PADDING_VALID, act_code, check_act, checked, epilogue,
                                    same_padding, size)
from gpuc.compiler.symbolic import hint


def _bias(node, graph, n_out):
    if len(node.inputs) < 3 or node.inputs[2] < 0:
        return None
    b = graph.t(node.inputs[2])
    if b.size != n_out:
        raise ValueError(f"bias {b.name!r} has {b.size} elements, expected {n_out}")
    return node.inputs[2]


def window(node, graph, kh, kw):
    """Shared geometry of conv/pool: input/output NHWC dims, strides, dilation, leading pads."""
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    if len(x.shape) != 4 or len(y.shape) != 4:
        raise ValueError(f"input and output must be 4-D NHWC (got {list(x.shape)} -> {list(y.shape)})")
    a = node.attrs
    sh, sw = int(a.get("stride_h", 1) or 0), int(a.get("stride_w", 1) or 0)
    dh, dw = int(a.get("dilation_hfactor", 1) or 0), int(a.get("dilation_wfactor", 1) or 0)
    pad = int(a.get("padding", 0))
    if min(sh, sw, dh, dw) < 1:
        raise ValueError(f"strides ({sh},{sw}) and dilations ({dh},{dw}) must be >= 1")
    if pad not in (PADDING_SAME, PADDING_VALID):
        raise ValueError(f"padding {pad} not supported")
    n, h0, w0, c = x.shape
    et, eb, el, er = node.epilogue.pad or (0, 0, 0, 0)      # a PAD folded into this op (fold_pad pass)
    h, w = h0 + et + eb, w0 + el + er
    on, oh, ow, oc = y.shape
    if pad == PADDING_SAME:
        exp = (-(-h // sh), -(-w // sw))
    else:
        exp = ((h - (kh - 1) * dh - 1) // sh + 1, (w - (kw - 1) * dw - 1) // sw + 1)
    if on != n or (oh, ow) != exp:
        raise ValueError(f"output shape {list(y.shape)} does not match input {list(x.shape)} "
                         f"with kernel {kh}x{kw}, strides {sh}x{sw}, {'SAME' if pad == 0 else 'VALID'}")
    pt = et + same_padding(h, kh, sh, dh, oh, pad)
    pl = el + same_padding(w, kw, sw, dw, ow, pad)
    return dict(N=n, H=h0, W=w0, OH=oh, OW=ow, SH=sh, SW=sw, DH=dh, DW=dw, PT=pt, PL=pl), c, oc


@checked
def _check_conv(node, graph):
    if len(node.inputs) < 2 or node.inputs[1] < 0:
        return "missing filter input"
    f = graph.t(node.inputs[1])
    if len(f.shape) != 4:
        return f"filter {f.name!r} must be 4-D"
    dw = node.op == "DEPTHWISE_CONV_2D"
    geo, ci, co = window(node, graph, f.shape[1], f.shape[2])
    if dw:
        if f.shape[0] != 1 or f.shape[3] != co or co % ci:
            return f"depthwise filter {list(f.shape)} does not fit input channels {ci} -> {co}"
    elif f.shape[0] != co or f.shape[3] < 1 or ci % f.shape[3] or co % (ci // f.shape[3]):
        return f"filter {list(f.shape)} does not fit input channels {ci} -> {co}"
    _bias(node, graph, co)
    return check_act(node, graph)


def depthwise_kernel(node, graph, geo: dict, ci: int, co: int, kh: int, kw: int, bias) -> Kernel:
    """One `depthwise` dispatch; the filter [1, KH, KW, CO] is used as it is ([KH][KW][CO])."""
    w_id = node.inputs[1]
    if float_const(graph, w_id) and graph.t(w_id).dtype != "float32":
        w_id = relayout(graph, w_id, "f32", lambda: graph.t(node.inputs[1]).data)
    binds = [("out_", node.outputs[0]), ("x", node.inputs[0]), ("w", w_id)]
    if bias is not None:
        binds.append(("bias", bias))
    mult = co // ci
    cg = -(-co // 4)
    vec_ok = co % 4 == 0 and mult == 1         # vec4 views of every binding work
    plan = plan_depthwise(*(hint(geo[k]) for k in ("N", "OH", "OW")), co, kh, kw,     # (speed only: at the bound)
                          geo["SH"], geo["SW"], geo["DH"], geo["DW"], vec=vec_ok)
    oxb = -(-geo["OW"] // plan.px)
    vec = vec_ok and not plan.scalar
    defines = dict(geo, CI=ci, CO=co, KH=kh, KW=kw, MULT=mult, PX=plan.px, CG=cg, OXB=oxb, VEC=int(vec),
                   TILE=plan.tile, HAS_BIAS=int(bias is not None), **epilogue(node, binds))
    if plan.tile:
        oyb = -(-geo["OH"] // plan.ry)
        defines.update(RY=plan.ry, OYB=oyb, WREG=int(weights_in_registers(kh, kw, vec)))
        invocations = geo["N"] * oyb * oxb * (cg if vec else co)
    else:
        invocations = geo["N"] * geo["OH"] * oxb * cg
    vec4 = ("out_", "x", "w", "bias", "res") if vec else ()
    k = Kernel("depthwise", binds, invocations, defines, node.label(), vec4=vec4,
               variants=plan_variants(plan, geo["N"], geo["OH"], geo["OW"], co, kh, kw, vec_ok))
    return apply_chain(k, node, graph)     # a fused elementwise chain last (ops/epi_chain.py)


@register("CONV_2D", "DEPTHWISE_CONV_2D", check=_check_conv, inputs=(2, 3), optional=(2,), summary="NHWC conv, groups, dilation, SAME/VALID")
def lower_conv(node, graph):
    f = graph.t(node.inputs[1])
    kh, kw = f.shape[1], f.shape[2]
    geo, ci, co = window(node, graph, kh, kw)
    bias = _bias(node, graph, co)
    if node.op == "DEPTHWISE_CONV_2D":
        return [depthwise_kernel(node, graph, geo, ci, co, kh, kw, bias)]
    cig = f.shape[3]
    groups = ci // cig
    cog = co // groups
    gk = kh * kw * cig
    w_kn = None
    if float_const(graph, node.inputs[1]):     # [CO, KH, KW, CIG] -> [G, KH*KW*CIG, COG]
        w_kn = np.asarray(f.data, np.float32).reshape(groups, cog, gk).transpose(0, 2, 1)
    pointwise = (kh == kw == 1 and geo["SH"] == geo["SW"] == 1 and geo["PT"] == geo["PL"] == 0
                 and geo["OH"] == geo["H"] and geo["OW"] == geo["W"])
    conv = dict(geo, CIG=cig, KW=kw, _pointwise=pointwise)
    return gemm_kernels(node, graph, M=geo["N"] * geo["OH"] * geo["OW"], GN=cog, GK=gk, G=groups, lda=ci, ldc=co,
                        w_id=node.inputs[1], w_kn=w_kn, bias=bias, conv=conv)


@checked
def _check_fc(node, graph):
    if len(node.inputs) < 2 or node.inputs[1] < 0:
        return "missing weights input"
    if int(node.attrs.get("weights_format", 0)) != 0:
        return "shuffled weights format not supported"
    x, w, y = graph.t(node.inputs[0]), graph.t(node.inputs[1]), graph.t(node.outputs[0])
    if len(w.shape) != 2 or w.shape[1] < 1 or x.size % w.shape[1]:
        return f"weights {list(w.shape)} do not fit input {list(x.shape)}"
    if y.size != x.size // w.shape[1] * w.shape[0]:
        return f"output {list(y.shape)} does not fit input {list(x.shape)} and weights {list(w.shape)}"
    _bias(node, graph, w.shape[0])
    return check_act(node, graph, allowed=(0, 1, 2, 3))


@register("FULLY_CONNECTED", check=_check_fc, inputs=(2, 4), optional=(2,), summary="dense layer, any leading dims, optional bias")
def lower_fc(node, graph):
    w = graph.t(node.inputs[1])
    o, k = w.shape
    bias = _bias(node, graph, o)
    if node.attrs.get(gemm_q8.ATTR) and w.dtype == "int8":       # int8 weights kept (passes/quant.py)
        return gemm_q8.q8_kernels(node, graph, bias)
    if gemm_qb.applies(node):                     # blockwise int4 weights kept (frontend/blockwise.py)
        return gemm_qb.qb_kernels(node, graph, bias)
    rows = size(graph.t(node.outputs[0]).shape) // o
    if ln_fold.LN_ATTR in node.attrs:             # a LayerNorm folded in (ops/ln_fold.py)
        return ln_fold.folded_fc(node, graph, bias, lambda w_id, w_kn, b, ln: gemm_kernels(
            node, graph, M=rows, GN=o, GK=k, G=1, lda=k, ldc=o, w_id=w_id, w_kn=w_kn, bias=b, conv=None,
            ignore=(), ln=ln), lower_fc)
    w_kn = np.asarray(w.data, np.float32).T[None] if float_const(graph, node.inputs[1]) else None
    return gemm_kernels(node, graph, M=rows, GN=o, GK=k, G=1, lda=k, ldc=o, w_id=node.inputs[1], w_kn=w_kn,
                        bias=bias, conv=None, ignore=())


@checked
def _check_pool(node, graph):
    kh, kw = int(node.attrs.get("filter_height", 0)), int(node.attrs.get("filter_width", 0))
    if kh < 1 or kw < 1:
        return f"filter size {kh}x{kw} must be >= 1"
    _, c, oc = window(node, graph, kh, kw)
    if c != oc:
        return "pooling must keep the channel count"
    return check_act(node, graph)


@register("AVERAGE_POOL_2D", "MAX_POOL_2D", check=_check_pool, inputs=(1, 1), summary="2-D pooling, SAME/VALID")
def lower_pool(node, graph):
    kh, kw = int(node.attrs["filter_height"]), int(node.attrs["filter_width"])
    geo, c, _ = window(node, graph, kh, kw)
    geo.pop("DH"), geo.pop("DW")
    defines = dict(geo, C=c, KH=kh, KW=kw, OP=int(node.op == "MAX_POOL_2D"), ACT=act_code(node))
    if node.epilogue.pad is not None:    # a PAD folded in (passes/fusion.py fold_pad_pool): its cells count
        defines.update(FOLDED_PAD=1, PAD_VALUE=float(node.epilogue.pad_value),
                       **dict(zip(("EPT", "EPB", "EPL", "EPR"), node.epilogue.pad)))
    binds = [("out_", node.outputs[0]), ("x", node.inputs[0])]
    outputs = size(graph.t(node.outputs[0]).shape)
    if kh * kw < POOL_WG_MIN:
        vec = isinstance(c, int) and c % 4 == 0 and isinstance(outputs, int)
        n = outputs // 4 if vec else outputs
        # (independent invocations here, as a flat template's: as wide as those once the grid is large)
        local = flat_local_x(n) if isinstance(n, int) else LOCAL_X
        return [Kernel("pool2d", binds, n, dict(defines, VEC=int(vec)), node.label(), local_x=local,
                       vec4=("out_", "x") if vec else ())]
    # large windows (global pools): one workgroup per output element (shaders/pool2d.comp WG_PER_OUT)
    local = 256 if kh * kw >= 4096 else 128 if kh * kw >= 1024 else 64
    k = Kernel("pool2d", binds, outputs * local, dict(defines, WG_PER_OUT=1, OUTPUTS=outputs), node.label(),
               local_x=local)
    k.variants.append(SUBGROUP_VARIANT)
    return [k]


POOL_WG_MIN = 256            # window cells from which a workgroup computes each output (H100: a global
#                              average pool over 128x128 took 306 us with one invocation per output)


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
def window_sym(node, graph, values=None):
    x, shapes = D.in_shapes(node, graph)[0], D.in_shapes(node, graph)
    a = node.attrs
    if len(x) != 4:
        D.refuse(node, graph, "a rank other than 4")
    if node.op in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        w = shapes[1]
        kh, kw = w[1], w[2]
        co = w[0] if node.op == "CONV_2D" else w[3]
        if D.is_dyn(x[3]):
            D.refuse(node, graph, "a dynamic channel count")
        dh, dw = int(a.get("dilation_h_factor", 1) or 1), int(a.get("dilation_w_factor", 1) or 1)
    else:
        kh, kw = int(a.get("filter_height", 1)), int(a.get("filter_width", 1))
        co, dh, dw = x[3], 1, 1
    sh, sw = int(a.get("stride_h", 1) or 1), int(a.get("stride_w", 1) or 1)
    return [[x[0], D.spatial(node, graph, x[1], kh, sh, dh), D.spatial(node, graph, x[2], kw, sw, dw), co]]


def _fc_sym(node, graph, values=None):
    x, w = D.in_shapes(node, graph)[:2]
    if D.is_dyn(x[-1]):
        D.refuse(node, graph, "a dynamic input depth (the weights fix it)")
    if node.attrs.get("out_shape"):
        return [list(node.attrs["out_shape"])]
    if node.attrs.get("keep_num_dims"):
        return [x[:-1] + [w[0]]]
    return [[S.prod(x[:-1]), w[0]]]


def _fc_shape(node, vals, graph, need=None):
    x = vals[0]
    n, k = graph.t(node.inputs[1]).shape[0], graph.t(node.inputs[1]).shape[-1]
    shape = list(x.shape[:-1]) + [n] if node.attrs.get("keep_num_dims") else [x.size // k, n]
    if node.attrs.get("out_shape") and np.prod(node.attrs["out_shape"]) == np.prod(shape):
        shape = list(node.attrs["out_shape"])      # a residual ADD's shape, set by passes/fusion.py
    return [rules.placeholder(shape, rules.out_dtype(node, graph))]


def _conv_flops(node, graph):
    """Multiply-adds count 2: per output element, the filter taps (times the input channels of a group)."""
    if len(node.inputs) < 2:
        return rules.per_output(node, graph)
    w = graph.t(node.inputs[1]).shape
    return 2 * graph.t(node.outputs[0]).size * w[1] * w[2] * (w[3] if node.op == "CONV_2D" else 1)


def _fc_flops(node, graph):
    if len(node.inputs) < 2:
        return rules.per_output(node, graph)
    return 2 * graph.t(node.outputs[0]).size * graph.t(node.inputs[1]).shape[-1]          # weights [N, K]


_NO_HOST = Why("no host rule: the symbolic rule gives its shape")
_COMMON = dict(exact=SHAPE_ONLY, batch="merge", pieces=Why("computes values"), fp16=NEUTRAL, in_place=False)
declare("CONV_2D", shape=_NO_HOST, sym_shape=window_sym, templates=("gemm", "grouped_conv"), flops=_conv_flops,
        cpu=Why("no CPU kernel: LiteRT's float conv is what the GPU runs"), **_COMMON)
declare("DEPTHWISE_CONV_2D", shape=_NO_HOST, sym_shape=window_sym, templates=("depthwise",), flops=_conv_flops,
        cpu=Why("no CPU kernel: LiteRT's float depthwise conv is what the GPU runs"), **_COMMON)
declare("FULLY_CONNECTED", shape=_fc_shape, sym_shape=_fc_sym, templates=("gemm", "gemm_q8"), flops=_fc_flops,
        cpu=Why("no CPU kernel: the GPU runs every float FC"), **_COMMON)
declare("AVERAGE_POOL_2D", "MAX_POOL_2D", shape=_NO_HOST, sym_shape=window_sym, templates=("pool2d",),
        flops=rules.per_output, cpu=Why("no CPU kernel: the GPU runs every float pool"), **_COMMON)
template("gemm", item_major=False, flat=False, in_place=("res",))
template("depthwise", item_major=True, flat=False, in_place=("res",))
template("pool2d", item_major=True, flat=False)
