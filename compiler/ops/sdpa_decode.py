"""SDPA_DECODE: an `odml.scaled_dot_product_attention` composite for one query token (an LLM's decode
step) in two dispatches, made by compiler/frontend/composite.py where its decomposition is the form
litert-torch writes: K and V [1, KV, KH, D] put in head-major order (TRANSPOSE) and repeated to the H
query heads (RESHAPE + BROADCAST_TO: GQA), Q and K each multiplied by a scalar, BATCH_MATMUL(Q, K^T),
ADD of the mask [.., KV], SOFTMAX (beta 1), BATCH_MATMUL(P, V), back to [1, 1, H, D].  The match
checks every movement op by tracing element indices through it (numpy), so any other layout, a
per-head mask or another op keeps the decomposition.  Prefill (more than one query row) keeps it too
(passes/attention.py fuses its core).

Inputs: q [1, 1, H, D], k, v [1, KV, KH, D], mask [KV elements] (optional); attrs q_scale, k_scale
(the decomposition's constants, applied as it does: (q * q_scale) . (k * k_scale)).  Flash-decoding:
shaders/sdpa_decode_split.comp gives each workgroup one KV head, its H / KH query heads and CHUNK keys
(score, chunk max, exp, sum, P.V: a partial [m, l, acc[D]] per (query head, chunk); a chunk of masked
keys only is skipped where another key is live: the step reads the cache up to its position);
shaders/sdpa_decode_combine.comp rescales and sums a head's partials, one workgroup a head.  Query head h
reads KV head h / (H / KH).  A decode step's attention is latency-bound (the cache up to the position
is ~1 MB a layer), so both kernels spread every stage over their invocations (several a key for the
scores, key slices x columns for P.V, workgroup reductions for the maxima and sums) and chunks stay
small (RP keys while a head has at most MAX_NCHUNK of them).
attrs kv_write (ops/kv_write.py fold_into_attention): the step's cache writes run in the split too --
inputs kx, vx, start after cos and sin, outputs y and the k and v caches; the workgroup whose chunk holds
the position writes the new row and reads it from registers (shaders/sdpa_decode_split.comp KV_WRITE).
ONE_DISPATCH (off: slower on the H100, see there): the split's FUSED form does both in one dispatch --
each workgroup arrives on a per-KV-head counter after its partials (a persistent uint32 variable, 0 at
load and reset, left 0 by every run: every workgroup arrives, and a run the host gave up on still
finishes on the GPU), and the last to arrive combines its head."""
from __future__ import annotations

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ir import Node
from gpuc.compiler.ops import NEUTRAL, Why, declare, fuses, register, template
from gpuc.compiler.ops.decomposition import Decomposition, attributes
from gpuc.compiler.ops.reduce import SUBGROUP_VARIANT
from gpuc.compiler.ops.util import checked

OP = "SDPA_DECODE"
COMPOSITE = "odml.scaled_dot_product_attention"
LOCAL = 64                   # invocations per workgroup of the variant tests' builds
MAX_D = 256                  # head sizes the split shader holds in shared memory
RP = 32                      # keys the split scores at a time (TPR = its invocations / RP a key)
SEG = 32                     # invocations that reduce a query head's chunk max and sum (NVIDIA's subgroup)
MAX_CHUNK = 256              # keys a split workgroup takes at most (a multiple of RP)
MIN_CHUNK = RP // 2          # keys a split workgroup takes at least (RP, or a power of two below it: one pass).
                             # 16, not 32: the H100's 1.5B decode, 11.2 against 11.8 us a layer in one profile
                             # (session 8), and 1.4299 against 1.4456 ms a token (session 10, same run)
MAX_NCHUNK = 64              # chunks a head has at most before chunks grow (the combine's serial work)
COMBINE_LOCAL = 256          # invocations of a combine workgroup (one query head)
SHARED_WORDS = 4096          # floats of shared memory a split workgroup may take (16 KiB: Vulkan's minimum)
MAX_TRACE = 1 << 25          # elements an index trace may build (compile-time memory)
# One dispatch a layer (the split's FUSED form: its last workgroup of each KV head combines) instead of
# split + combine: off.  On the H100 (1.5B Qwen-shaped decode, 12 / 2 heads of 128, KV 1024, position
# 600) it took 13.2 us a layer against 8.3 + 3.4 us, 1.65 against 1.60 ms a step: the combine's
# reads (G heads x chunks x D floats) land on one SM per KV head instead of one workgroup per query
# head, which costs more than the dispatch it saves.  Kept exact and tested for a target where it wins.
ONE_DISPATCH = False

VARIANTS = {
    "sdpa_decode_split": (dict(H=4, D=20, KV=70, KH=2, G=2, CHUNK=32, NCHUNK=3, QS=0.5, KS=0.25, TPR=2, RP=32, RS=3,
                               SEG=32),
                          {"HAS_MASK": [0, 1], "SUBGROUP": [0, 1]}, ["out_", "q", "k", "v", "mask"], {},
                          lambda d: dict(local_x=LOCAL)),
    "sdpa_decode_split:rope": (dict(H=4, D=20, KV=70, KH=2, G=2, CHUNK=32, NCHUNK=3, QS=0.5, KS=0.25, TPR=2, RP=32, RS=3, SEG=32, HAS_MASK=1, ROPE_Q=1,
                                    H2=10, SRC_ROW=80, SRC_W=160, SRC_BEGIN=40, RANK=4, HALF_SHAPE=[1, 1, 4, 10],
                                    CS_STRIDES=[0, 0, 0, 1]), {}, ["out_", "q", "k", "v", "mask", "cosv", "sinv"], {},
                               lambda d: dict(local_x=LOCAL)),
    "sdpa_decode_split:kv": (dict(H=4, D=20, KV=70, KH=2, G=2, CHUNK=32, NCHUNK=3, QS=0.5, KS=0.25, TPR=2, RP=32, RS=3, SEG=32, HAS_MASK=1, ROPE_Q=1,
                                  H2=10, SRC_ROW=80, SRC_W=160, SRC_BEGIN=40, RANK=4, HALF_SHAPE=[1, 1, 4, 10],
                                  CS_STRIDES=[0, 0, 0, 1], KV_WRITE=1, K_SRC_ROW=40, K_SRC_W=160, K_SRC_BEGIN=80,
                                  K_RANK=4, K_HALF_SHAPE=[1, 1, 2, 10], K_CS_STRIDES=[0, 0, 0, 1], V_ROW=40,
                                  V_W=160, V_BEGIN=120, MAX_POS=69),
                             {}, ["out_", "q", "k", "v", "mask", "cosv", "sinv", "kx", "vx", "start"],
                             {"start": "int32"}, lambda d: dict(local_x=LOCAL, rw=("k", "v"))),
    "sdpa_decode_combine": (dict(H=4, D=20, NCHUNK=3, RS=3), {"SUBGROUP": [0, 1]}, ["out_", "x"], {},
                            lambda d: dict(local_x=LOCAL)),
}


def _trace(dec: Decomposition, tid: int):
    """(source tensor, its element index per element of `tid`, the scalar MUL constants on the way)
    back through RESHAPE / TRANSPOSE / BROADCAST_TO and MULs by a scalar constant to the tensor another
    op (or none) makes; None where a trace grows too large."""
    m = dec.made.get(tid)
    t = dec.s.t(tid)
    sc = [dec.scalar(i) for i in m.inputs] if m is not None and m.op == "MUL" and len(m.inputs) == 2 else []
    scaled = sum(s is not None for s in sc) == 1 and m.attrs.get("fused_activation_function", 0) == 0
    if m is None or not scaled and m.op not in ("RESHAPE", "TRANSPOSE", "BROADCAST_TO"):
        if t.size > MAX_TRACE:
            return None
        return tid, np.arange(t.size, dtype=np.int64).reshape(t.shape), []
    if scaled:
        k = 0 if sc[0] is not None else 1
        r = _trace(dec, m.inputs[1 - k])
        if r is None or r[1].shape != tuple(t.shape):
            return None
        dec.used.add(id(m))
        return r[0], r[1], r[2] + [sc[k]]
    r = _trace(dec, m.inputs[0])
    if r is None:
        return None
    src, idx, scales = r
    if m.op == "RESHAPE":
        idx = idx.reshape(t.shape)
    elif m.op == "TRANSPOSE":
        perm = dec.const(m.inputs[1])
        if perm is None:
            return None
        idx = np.transpose(idx, [int(p) for p in perm.reshape(-1)])
    else:
        if int(np.prod(t.shape)) > MAX_TRACE:
            return None
        idx = np.broadcast_to(idx, tuple(t.shape))
    if idx.shape != tuple(t.shape):
        return None
    dec.used.add(id(m))
    return src, idx, scales


def _one_scale(scales) -> float | None:
    return 1.0 if not scales else scales[0] if len(scales) == 1 else None


@fuses(COMPOSITE)
def fuse(n: Node, g, s) -> list[Node] | None:
    """The SDPA_DECODE node computing composite `n` (one query token), or None for any other form."""
    if len(s.inputs) not in (3, 4) or len(s.outputs) != 1 or len(n.inputs) != len(s.inputs):
        return None
    q, k, v = (s.t(i) for i in s.inputs[:3])
    if len(q.shape) != 4 or len(k.shape) != 4 or tuple(k.shape) != tuple(v.shape) or q.shape[0] != 1 \
            or q.shape[1] != 1 or k.shape[0] != 1 or any(t.dtype != "float32" for t in (q, k, v)):
        return None
    _, _, H, D = (int(x) for x in q.shape)
    _, KV, KH, DK = (int(x) for x in k.shape)
    if DK != D or KH < 1 or H % KH or D > MAX_D or KV < 1 or _shared_words(H // KH, D, RP) > SHARED_WORDS:
        return None
    G = H // KH
    dec = Decomposition(n, s)
    # the output: BATCH_MATMUL(P, V) [H, 1, D] through movement ops to [1, 1, H, D]
    r = _trace(dec, s.outputs[0])
    if r is None or r[2]:
        return None
    pv = dec.node(r[0], "BATCH_MATMUL", 2, through_reshape=False)
    if pv is None or tuple(s.t(pv.outputs[0]).shape) != (H, 1, D) or \
            not np.array_equal(r[1].reshape(-1), np.arange(H * D)):
        return None
    if pv.attrs.get("adj_x") or pv.attrs.get("adj_y"):
        return None
    # V: [H, KV, D], element (h, j, d) = v[0, j, h // G, d]
    h, j, d = np.meshgrid(np.arange(H), np.arange(KV), np.arange(D), indexing="ij")
    rv = _trace(dec, pv.inputs[1])
    if rv is None or rv[0] != s.inputs[2] or rv[2] or \
            not np.array_equal(rv[1], (j * KH + h // G) * D + d):
        return None
    # P: SOFTMAX(beta 1) of ADD(scores, mask)
    sm = dec.node(pv.inputs[0], "SOFTMAX", 1)
    if sm is None or float(sm.attrs.get("beta", 1.0)) != 1.0 or s.t(sm.inputs[0]).shape[-1] != KV \
            or s.t(sm.inputs[0]).size != H * KV:
        return None                            # (softmax over the keys of each head)
    scores, mask = sm.inputs[0], -1
    if len(s.inputs) == 4:
        add = dec.node(scores, "ADD", 2)
        if add is None:
            return None
        srcs = [dec.source(i) for i in add.inputs]
        if srcs.count(s.inputs[3]) != 1 or s.t(s.inputs[3]).size != KV:
            return None                        # (a per-head or per-row mask: the decomposition)
        mt = s.t(add.inputs[srcs.index(s.inputs[3])])
        if not mt.shape or mt.shape[-1] != KV or s.t(add.outputs[0]).size != H * KV:
            return None                        # (the mask row must broadcast along the keys)
        scores = add.inputs[1 - srcs.index(s.inputs[3])]
        mask = n.inputs[3]
    qk = dec.node(scores, "BATCH_MATMUL", 2)
    if qk is None or tuple(s.t(qk.outputs[0]).shape) != (H, 1, KV) or qk.attrs.get("adj_x"):
        return None
    # Q: [H, 1, D] = q[0, 0, h, d]; K^T: [H, D, KV] = k[0, j, h // G, d] (adj_y: [H, KV, D])
    rq, rk = _trace(dec, qk.inputs[0]), _trace(dec, qk.inputs[1])
    if rq is None or rk is None or rq[0] != s.inputs[0] or rk[0] != s.inputs[1]:
        return None
    if not np.array_equal(rq[1].reshape(-1), np.arange(H * D)) or rq[1].shape != (H, 1, D):
        return None
    want = (j * KH + h // G) * D + d               # [H, KV, D]
    if not np.array_equal(rk[1], want if qk.attrs.get("adj_y") else np.transpose(want, (0, 2, 1))):
        return None
    qs, ks = _one_scale(rq[2]), _one_scale(rk[2])
    if qs is None or ks is None or not dec.all_used():
        return None
    given = attributes(n).get("scale")
    if given is not None and not np.isclose(np.float32(qs) * np.float32(ks), np.float32(given), rtol=1e-5):
        return None                            # (the attribute disagrees with what LiteRT computes)
    ins = list(n.inputs[:3]) + [mask]
    return [Node(OP, ins, list(n.outputs), {"q_scale": qs, "k_scale": ks, "composite": COMPOSITE}, 1, n.index)]


def _split_local(D: int) -> int:
    """Invocations of a split workgroup: RS = n / D >= 1 slices of keys for P.V, TPR = n / RP a key."""
    return 128 if D <= 64 else 256


def _shared_words(G: int, D: int, chunk: int) -> int:
    """Floats of shared memory the split takes: q (G * D), scores (G * chunk), partials (G * n), the
    reduction (n) and the new row (2 * D)."""
    n = _split_local(D)
    return G * (D + chunk + n) + n + 2 * D


def one_dispatch(G: int, D: int, nchunk: int) -> bool:
    """Whether the decode attention runs as one dispatch (the split's FUSED form: its last workgroup of
    each KV head combines, ordered by an atomic counter) rather than split + combine: ONE_DISPATCH, and
    the combine's shared memory (the head's chunk maxima and sums) fits beside the split's."""
    return ONE_DISPATCH and _shared_words(G, D, RP) + 2 * G * nchunk + G + 1 <= SHARED_WORDS


def _chunk(KV: int, G: int, D: int) -> int:
    """Keys per split workgroup (one per KV head and chunk, its G query heads together): MIN_CHUNK, doubled
    while a head has over MAX_NCHUNK chunks (and the scores fit).  Small chunks keep each workgroup's
    serial path short (a decode step is latency-bound: the cache up to the position is ~1 MB a layer);
    the chunks past the position are skipped."""
    c = MIN_CHUNK
    while c < MAX_CHUNK and -(-KV // c) > MAX_NCHUNK and _shared_words(G, D, 2 * c) <= SHARED_WORDS:
        c *= 2
    return c


def _q_shape(node, graph) -> tuple:
    """q's shape: its tensor's, or with attrs rope (ops/rope.py: q rotated as it is read) the rotated one."""
    rope = node.attrs.get("rope")
    return tuple(rope["q_shape"]) if rope else tuple(graph.t(node.inputs[0]).shape)


@checked
def _check(node, graph):
    from types import SimpleNamespace
    q, k, v, y = (graph.t(t) for t in (*node.inputs[:3], node.outputs[0]))
    kvw = node.attrs.get("kv_write")
    ints = {node.inputs[8]} if len(node.inputs) == 9 else set()
    if any(graph.t(t).dtype != "float32" for t in (*node.inputs, *node.outputs) if t >= 0 and t not in ints):
        return "attends over float32 tensors (int32: the cache writes' start indices only)"
    if kvw:
        bad = _check_kv_write(node, graph, kvw)
        if bad:
            return bad
    elif len(node.outputs) != 1:
        return "has one output unless it writes the KV caches (attrs kv_write)"
    if (len(node.inputs) in (6, 9)) != bool(node.attrs.get("rope")) or len(node.inputs) == 9 and not kvw:
        return ("takes cos and sin (inputs 4, 5) exactly when it rotates q (attrs rope), and the new k, v and "
                "start (inputs 6-8) exactly when it writes the caches (attrs kv_write)")
    if node.attrs.get("rope"):
        from gpuc.compiler.ops.rope import check_rope
        bad = check_rope(node.attrs["rope"], q, graph.t(node.inputs[4]), graph.t(node.inputs[5]))
        if bad:
            return bad
        q = SimpleNamespace(shape=_q_shape(node, graph))
        if int(np.prod(q.shape)) != int(np.prod(node.attrs["rope"]["x_shape"])):
            return f"q {list(q.shape)} is not the rotated {list(node.attrs['rope']['x_shape'])}"
    if len(q.shape) != 4 or len(k.shape) != 4 or tuple(q.shape[:2]) != (1, 1) or tuple(k.shape) != tuple(v.shape) \
            or k.shape[0] != 1 or k.shape[3] != q.shape[3] or q.shape[2] % k.shape[2] or tuple(y.shape) != tuple(q.shape):
        return (f"q {list(q.shape)}, k {list(k.shape)}, v {list(v.shape)} -> {list(y.shape)} is not one query "
                "token over a [1, KV, KH, D] cache with H a multiple of KH")
    if q.shape[3] > MAX_D:
        return f"head size {q.shape[3]} over {MAX_D}"
    if _shared_words(q.shape[2] // k.shape[2], q.shape[3], RP) > SHARED_WORDS:
        return f"{q.shape[2] // k.shape[2]} query heads per KV head of size {q.shape[3]}: over {SHARED_WORDS} floats"
    m = node.inputs[3] if len(node.inputs) > 3 else -1
    if m >= 0 and graph.t(m).size != k.shape[1]:
        return f"mask {list(graph.t(m).shape)} is not one row of {k.shape[1]} keys"
    return None


def _check_kv_write(node, graph, a) -> str | None:
    """Why the cache-writing form (ops/kv_write.py: inputs kx, vx, start; outputs y, k cache, v cache) cannot run."""
    from gpuc.compiler.ops.rope import check_rope
    if len(node.inputs) != 9 or len(node.outputs) != 3 or not node.attrs.get("rope"):
        return "writes the caches with 9 inputs (q, k, v, mask, cos, sin, kx, vx, start), 3 outputs and a rotated q"
    kc, vc, ko, vo = (graph.t(t) for t in (node.inputs[1], node.inputs[2], *node.outputs[1:]))
    kx, vx, st = (graph.t(t) for t in node.inputs[6:9])
    KV, KH, D = (int(d) for d in kc.shape[1:]) if len(kc.shape) == 4 else (0, 0, 0)
    if any(tuple(t.shape) != tuple(kc.shape) or t.dtype != "float32" for t in (vc, ko, vo)):
        return f"caches k {list(kc.shape)}, v {list(vc.shape)} -> {list(ko.shape)}, {list(vo.shape)} differ"
    if st.dtype != "int32" or tuple(st.shape) != (4,):
        return f"start indices must be int32 [4] (got {st.dtype} {list(st.shape)})"
    if tuple(a["rope_k"]["upd_shape"]) != (1, 1, KH, D):
        return f"the new key {list(a['rope_k']['upd_shape'])} is not one row [1, 1, {KH}, {D}] of the cache"
    bad = check_rope(a["rope_k"], kx, graph.t(node.inputs[4]), graph.t(node.inputs[5]))
    if bad:
        return bad
    if list(a["rope_k"]["x_shape"])[-1] != D or int(np.prod(a["rope_k"]["x_shape"])) != KH * D:
        return f"the new key {list(a['rope_k']['x_shape'])} is not {KH} heads of {D}"
    row, w, begin = (int(x) for x in a["v_src"])
    if vx.dtype != "float32" or row < 1 or begin < 0 or begin + row > w or (KH * D) % row \
            or vx.size != KH * D // row * w:
        return f"the new value [1, 1, {KH}, {D}] cannot be read from {list(vx.shape)} at (row {row}, width {w}, begin {begin})"
    return None


@register(OP, check=_check, inputs=(4, 9), optional=(3,), outputs=(1, 3), dtypes=("float32", "int32"),
          summary="internal: a decode-step odml.scaled_dot_product_attention composite (flash-decoding, GQA)")
def lower_sdpa_decode(node, graph):
    q, k, y = graph.t(node.inputs[0]), graph.t(node.inputs[1]), graph.t(node.outputs[0])
    H, D = (int(d) for d in _q_shape(node, graph)[2:])
    KV, KH = int(k.shape[1]), int(k.shape[2])
    n = _split_local(D)
    chunk = _chunk(KV, H // KH, D)
    nchunk = -(-KV // chunk)
    mask = node.inputs[3]
    part = graph.add_tensor(f"{y.name}/partials", (H, nchunk, D + 2), "float32")
    geo = dict(H=H, D=D, KV=KV, KH=KH, G=H // KH, CHUNK=chunk, NCHUNK=nchunk, TPR=n // RP, RP=RP, RS=n // D, SEG=SEG)
    binds = [("out_", part), ("q", q.id), ("k", k.id), ("v", node.inputs[2])] + ([("mask", mask)] if mask >= 0 else [])
    defines = dict(geo, QS=float(node.attrs["q_scale"]), KS=float(node.attrs["k_scale"]), HAS_MASK=int(mask >= 0))
    if node.attrs.get("rope"):          # q rotated as it is read (ops/rope.py)
        from gpuc.compiler.ops.rope import rope_defines
        defines.update(ROPE_Q=1, **rope_defines(node.attrs["rope"], graph.t(node.inputs[4]).shape))
        binds += [("cosv", node.inputs[4]), ("sinv", node.inputs[5])]
    kernels, rw = [], ()
    if node.attrs.get("kv_write"):      # the step's cache writes folded in (ops/kv_write.py)
        kernels, binds, rw = _kv_write(node, graph, binds, defines)
    if one_dispatch(H // KH, D, nchunk):  # the combine in the split's last workgroup of each KV head
        arrive = graph.add_tensor(f"{y.name}/arrivals", (KH,), "uint32")
        t = graph.t(arrive)             # (persistent state, 0 at load and reset; each run leaves it 0)
        t.is_variable, t.initial = True, np.zeros(KH, np.uint32)
        binds = [("out_", y.id)] + binds[1:] + [("xp", part), ("arrive", arrive)]
        split = Kernel("sdpa_decode_split", binds, KH * nchunk * n, dict(defines, FUSED=1), node.label(),
                       local_x=n, flops=4 * H * KV * D, rw=tuple(rw) + ("xp", "arrive"), coherent=("xp",))
        split.variants.append(SUBGROUP_VARIANT)
        return kernels + [split]
    split = Kernel("sdpa_decode_split", binds, KH * nchunk * n, defines, node.label(), local_x=n,
                   flops=4 * H * KV * D, rw=rw)
    combine = Kernel("sdpa_decode_combine", [("out_", y.id), ("x", part)], H * COMBINE_LOCAL,
                     dict(H=H, D=D, NCHUNK=nchunk, RS=COMBINE_LOCAL // D), node.label(), local_x=COMBINE_LOCAL)
    for kern in (split, combine):       # + subgroup-arithmetic reductions (ops/reduce.py)
        kern.variants.append(SUBGROUP_VARIANT)
    return kernels + [split, combine]


def _kv_write(node, graph, binds, defines):
    """(operand copies, the split's bindings, its read-write names) for the cache-writing form: k and v
    bound to the output caches (a copy of the input cache first where they do not share its bytes)."""
    from gpuc.compiler.ops.rope import rope_defines
    from gpuc.compiler.ops.shape import copy_kernel
    a = node.attrs["kv_write"]
    kernels = []
    for cin, cout in zip(node.inputs[1:3], node.outputs[1:3]):
        t = graph.t(cout)
        if graph.storage(cin) != graph.storage(cout) and t.size:
            kernels.append(copy_kernel(cin, cout, [t.size], [1], [1], label=f"{node.label()}: cache copy"))
    kd = rope_defines(a["rope_k"], graph.t(node.inputs[4]).shape)
    row, w, begin = (int(x) for x in a["v_src"])
    defines.update(KV_WRITE=1, K_SRC_ROW=kd["SRC_ROW"], K_SRC_W=kd["SRC_W"], K_SRC_BEGIN=kd["SRC_BEGIN"],
                   K_RANK=kd["RANK"], K_HALF_SHAPE=kd["HALF_SHAPE"], K_CS_STRIDES=kd["CS_STRIDES"],
                   V_ROW=row, V_W=w, V_BEGIN=begin, MAX_POS=int(graph.t(node.outputs[1]).shape[1]) - 1)
    binds = [(nm, node.outputs[1] if nm == "k" else node.outputs[2] if nm == "v" else t) for nm, t in binds]
    binds += [("kx", node.inputs[6]), ("vx", node.inputs[7]), ("start", node.inputs[8])]
    return kernels, binds, ("k", "v")


def _flops(node, graph) -> int:
    q, k = _q_shape(node, graph), graph.t(node.inputs[1])
    return 4 * int(q[2]) * int(k.shape[1]) * int(q[3])


def _shape(node, vals, graph, need=None):
    from gpuc.compiler.ops.rules import out_dtype, placeholder
    rope = node.attrs.get("rope")
    y = placeholder(tuple(rope["q_shape"]) if rope else vals[0].shape, out_dtype(node, graph))
    return [y] + [placeholder(vals[i].shape, vals[i].dtype) for i in (1, 2)][:len(node.outputs) - 1]


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
declare(OP, shape=_shape, exact=Why("computes values on the GPU only"), sym_shape="same",
        batch=Why("one query token of batch 1 (the decode step): --max-batch runs one arena per item"),
        pieces=Why("computes values"), fp16=NEUTRAL, in_place=False,
        templates=("sdpa_decode_split", "sdpa_decode_combine"), flops=_flops,
        cpu=Why("internal op: where the GPU refuses it the decomposition is inlined"))
template("sdpa_decode_split", item_major=False, flat=False)
template("sdpa_decode_combine", item_major=False, flat=False)
