"""ATTENTION: an internal op made by passes/attention.py from BATCH_MATMUL(Q, K), scalar scales,
bias / mask ADDs, SOFTMAX and BATCH_MATMUL(P, V).  Inputs: q, k, v (the tensors the operands are
read from, through the strided views in attrs q / k / v), then up to 3 bias tensors; attrs n, m, d, dv,
batch, beta, steps (the score chain in order: MUL / DIV by a value, ADD / SUB of bias i read at
row terms + j * sj), q / k / v / o (views: batch terms, row and column strides, offset, scalar steps;
o: where the output is written, e.g. through a head merge).  One dispatch (shaders/attention.comp): a workgroup per BQ query rows of one
batch, K / V tiles of BK keys staged in shared memory, online softmax with fp32 statistics; for long
key sequences with many rows and heads up to 256 wide (LLM prefill, `wide`), shaders/attention_wide.comp:
32 rows x 64-key tiles, 4 x 4 register blocks (4 x 4 per 64 value columns), D in chunks of 64, fp32 at
every precision (an fp16 cooperative-matrix form was tried: NaN and slower on the H100).  Both skip key
tiles a mask hides from every row of the block (`mask_bias`: a causal mask's keys past the block's last query)."""
from __future__ import annotations

import dataclasses

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import NEUTRAL, Why, attention_cm, declare, register, rules, template
from gpuc.compiler.ops.util import checked
from gpuc.compiler.options import current
from gpuc.compiler.codegen.shared_memory import PORTABLE_SMEM

TX, TY = 8, 16               # invocations along key / value columns and along query rows (attention.comp)
SMEM_FLOATS = PORTABLE_SMEM // 4     # 32 KiB of shared memory per workgroup
MAX_ACC = 64                 # output accumulators per invocation (RQ * CV)
FILL_GROUPS = 264            # workgroups worth having in flight (2 per SM of an H100) before rows per group grow

VARIANTS = {
    "attention": (dict(N=5, M=7, D=20, DV=6, NBATCH=2, QBLOCKS=1, NWG=2, BETA=1.0, RQ=1, BQ=16, CK=1, BK=8, CV=1,
                       DC=16, VK=8, SKV_SIZE=144, Q_T=[1, 2, 100], Q_NT=1, Q_SR=20, Q_SC=1, K_T=[1, 2, 140], K_NT=1,
                       K_SJ=20, K_SC=1, V_T=[1, 2, 42], V_NT=1, V_SJ=6, V_SC=1, SC=[0.5, 2.0],
                       Q_OFF=0, K_OFF=0, V_OFF=0, O_T=[1, 2, 30], O_NT=1, O_SR=6, O_SC=1,
                       Q_STEPS="x = ew_mul(x, SC[0]);", K_STEPS="x = ew_div(x, SC[1]);", NBIAS=1, B_T=[1, 5, 7],
                       B_FIRST=[0], B_NT=[1], B_SJ=[1],
                       SCORE_STEPS="x = ew_add(x, LD(bias0, bo[0][a] + j * B_SJ[0]));", SKIP_BIAS=0, SKIP_SIGN=1,
                       SKIP_LD="LD(bias0, bo[0][a] + j * B_SJ[0])"),
                  {"QCHUNKS": [1, 2], "Q_CFAST": [0, 1], "K_CFAST": [0, 1], "V_CFAST": [0, 1], "SKIP_BIAS": [-1, 0]},
                  ["out_", "q", "k", "v", "bias0"], {}, lambda d: dict(local_x=TX * TY)),
    "attention:ksplit": (dict(N=5, M=30, D=20, DV=6, NBATCH=2, QBLOCKS=1, NWG=6, BETA=1.0, RQ=1, BQ=16, CK=1, BK=8,
                              CV=1, DC=20, QCHUNKS=1, VK=8, SKV_SIZE=168, KSPLIT=3, Q_T=[1, 2, 100], Q_NT=1, Q_SR=20,
                              Q_SC=1, Q_CFAST=1, K_T=[1, 2, 600], K_NT=1, K_SJ=20, K_SC=1, K_CFAST=1, V_T=[1, 2, 180],
                              V_NT=1, V_SJ=6, V_SC=1, V_CFAST=1, SC=[0.5], Q_OFF=0, K_OFF=0, V_OFF=0, O_T=[1, 2, 30],
                              O_NT=1, O_SR=6, O_SC=1, Q_STEPS="x = ew_mul(x, SC[0]);", K_STEPS="", NBIAS=1,
                              B_T=[1, 5, 30], B_FIRST=[0], B_NT=[1], B_SJ=[1],
                              SCORE_STEPS="x = ew_add(x, LD(bias0, bo[0][a] + j * B_SJ[0]));", SKIP_BIAS=0,
                              SKIP_SIGN=1, SKIP_LD="LD(bias0, bo[0][a] + j * B_SJ[0])"),
                         {"SKIP_BIAS": [-1, 0]}, ["out_", "q", "k", "v", "bias0"], {"out_": "float32"},
                         lambda d: dict(local_x=TX * TY)),
    "attention_merge": (dict(N=5, DV=6, NBATCH=2, KSPLIT=3, BETA=1.0, O_T=[1, 2, 30], O_NT=1, O_SR=6,
                             O_SC=1), {}, ["out_", "x"], {"x": "float32"}, lambda d: dict(local_x=64)),
    "attention_wide": (dict(N=40, M=300, D=20, DV=6, NBATCH=2, QBLOCKS=2, NWG=4, BETA=1.0,
                            Q_T=[1, 2, 800], Q_NT=1, Q_SR=20, Q_SC=1, K_T=[1, 2, 6000], K_NT=1, K_SJ=20, K_SC=1,
                            V_T=[1, 2, 1800], V_NT=1, V_SJ=6, V_SC=1, SC=[0.5, 2.0], Q_OFF=0, K_OFF=0, V_OFF=0,
                            O_T=[1, 2, 240], O_NT=1, O_SR=6, O_SC=1, Q_STEPS="x = ew_mul(x, SC[0]);",
                            K_STEPS="x = ew_div(x, SC[1]);", NBIAS=1, B_T=[1, 40, 300], B_FIRST=[0], B_NT=[1],
                            B_SJ=[1], SCORE_STEPS="x = ew_add(x, LD(bias0, bo[0][a] + j * B_SJ[0]));",
                            SKIP_BIAS=0, SKIP_SIGN=1, SKIP_LD="LD(bias0, bo[0][a] + j * B_SJ[0])",
                            DCH=1, VCH=1, VKP=16, PF=1),
                       {"SKIP_BIAS": [-1, 0], "DCH": [1, 3], "VCH": [1, 3], "PF": [0, 1]},
                       ["out_", "q", "k", "v", "bias0"], {}, lambda d: dict(local_x=WIDE_NT)),
}

WIDE_NT, WIDE_BQ, WIDE_MAX_D = 128, 32, 256    # attention_wide.comp: invocations, query rows, head width
WIDE_MIN_KEYS, WIDE_MIN_ROWS = 256, 64         # the shapes it takes (LLM prefill: long keys, many rows)
WIDE_PREFETCH = 0        # attention_wide.comp PF=1: the next stage's loads in flight while one is used
#   (CompileOptions.attention_prefetch overrides it).
#   Off: 2-5% faster on the H100 at T512 KV1024 (benchmarks/prefill_attention.py --prefetch 1,0, GPU us
#   PF0 vs PF1): 14 query / 2 KV heads of 64, positions 0..511 100.9 vs 103.6, 512..1023 212.4 vs 218.4;
#   12 / 2 heads of 128 122.8 vs 128.5, 321.1 vs 327.5.  The PF path stays for that A/B.


SPLIT_FILL = 528         # workgroups worth having in flight (4 per SM of an H100) ...
MAX_SPLIT = 8            # ... which a grid of fewer gets by splitting its key tiles up to this many ways


def key_split(groups: int, ktiles: int) -> int:
    """attention.comp's KSPLIT for a grid of `groups` workgroups over `ktiles` key tiles: with fewer than
    FILL_GROUPS workgroups (a batch-1 vision transformer: 12 heads x 13 row blocks) each one walks its keys
    alone, one tile after another, and most SMs idle; split into parts of at least one tile towards
    SPLIT_FILL workgroups, plus a merge dispatch (shaders/attention_merge.comp).
    CompileOptions.attention_split fixes it (at most ktiles)."""
    force = current().attention_split
    if force is not None:
        return max(1, min(force, ktiles))
    if groups >= FILL_GROUPS or ktiles < 2:
        return 1
    return min(ktiles, MAX_SPLIT, -(-SPLIT_FILL // groups))


def wide(n: int, m: int, d: int, dv: int) -> bool:
    """Whether attention_wide.comp runs this attention (else attention.comp)."""
    return d <= WIDE_MAX_D and dv <= WIDE_MAX_D and m >= WIDE_MIN_KEYS and n >= WIDE_MIN_ROWS


def prefetch() -> bool:
    """attention_wide.comp's PF: CompileOptions.attention_prefetch, else WIDE_PREFETCH."""
    pf = current().attention_prefetch
    return bool(WIDE_PREFETCH) if pf is None else pf


def wide_chunks(d: int, dv: int) -> dict:
    """attention_wide.comp's D chunks of 64 channels (DCH), value column groups of 64 (VCH) and the keys
    of V staged per pass (VKP: 64 / VCH rounded up to a power of two, within 1024 vec4 of shared memory)."""
    dch, vch = -(-d // 64), -(-dv // 64)
    return dict(DCH=dch, VCH=vch, VKP=64 // (1 << (vch - 1).bit_length()), PF=int(prefetch()))


def plan_tiles(n: int, m: int, d: int, dv: int, batch: int = 1 << 20, rq: int | None = None,
               ck: int | None = None):
    """(RQ, CK, CV, DC, VK, SKV_SIZE) for attention.comp, or None when no tiling fits.  BQ = 16 * RQ
    query rows and BK = 8 * CK keys per tile; CV value columns per invocation; Q and K are staged DC
    channels at a time (all of D at once, Q loaded once, where it fits); V VK keys at a time.
    `rq` / `ck` force those (benchmarks/archive/attention_plan_ab.py)."""
    cv = -(-dv // TX)
    if cv > MAX_ACC:
        return None
    if rq is None:
        rq = 1 if n <= 16 else 2 if n <= 32 else 4
        while rq > 1 and (rq * cv > MAX_ACC or batch * -(-n // (TY * rq)) < FILL_GROUPS):
            rq //= 2                             # fewer rows per workgroup: more workgroups in flight
    if ck is None:                               # keys per tile: 32, or 16 once the grid has many
        many = batch * -(-n // (TY * rq)) >= 8 * FILL_GROUPS      # workgroups (smaller score tiles:
        ck = 1 if m <= 8 else 2 if m <= 16 or many else 4         # more resident; H100, 49-key windows b32: 1.32x)
    bq, bk = TY * rq, TX * ck
    for dc in [d] + [c for c in (64, 32, 16, 8) if c < d]:
        vk = bk
        while vk > 1 and smem_floats(bq, bk, dc, max(dc * (bk + 1), vk * (dv + 1) + TX)) > SMEM_FLOATS:
            vk //= 2
        skv = max(dc * (bk + 1), vk * (dv + 1) + TX)
        if smem_floats(bq, bk, dc, skv) <= SMEM_FLOATS:
            return rq, ck, cv, dc, vk, skv
    return None


def smem_floats(bq: int, bk: int, dc: int, skv: int) -> int:
    """Words of shared memory attention.comp declares for BQ rows, BK keys, DC channels and SKV_SIZE: sQ, sKV,
    sS, sAl, sRed and the masked tiles' 3 live flags."""
    return dc * (bq + 1) + skv + bq * (bk + 1) + bq + TX * TY + 3


def tile_defines(plan: tuple, d: int) -> dict:
    """attention.comp's tile defines for plan_tiles' `plan` of a D-channel attention."""
    rq, ck, cv, dc, vk, skv = plan
    return dict(RQ=rq, BQ=TY * rq, CK=ck, BK=TX * ck, CV=cv, DC=dc, QCHUNKS=-(-d // dc), VK=vk, SKV_SIZE=skv)


# `make shaders` and the shared-memory check (tests/compiler/test_shared_memory.py): a plan close to SMEM_FLOATS
# (8-key tiles of 32 rows, 176 channels at once, V 4 keys at a time)
_BIG = dict(N=32, M=8, D=176, DV=256)
VARIANTS["attention:most_smem"] = (
    dict(VARIANTS["attention"][0], **_BIG, **tile_defines(plan_tiles(*_BIG.values()), _BIG["D"]), QBLOCKS=1, NWG=2,
         Q_SR=_BIG["D"], K_SJ=_BIG["D"], V_SJ=_BIG["DV"], O_SR=_BIG["DV"]),
    {"SKIP_BIAS": [-1, 0]}, ["out_", "q", "k", "v", "bias0"], {}, lambda d: dict(local_x=TX * TY))


def _terms(ts):
    return [int(x) for t in ts for x in t] or [0]


def _check(node, graph):
    a = node.attrs
    if len(node.inputs) != 3 + sum(s["op"] in ("ADD", "SUB") for s in a["steps"]):
        return "inputs do not match the score steps"
    if plan_tiles(a["n"], a["m"], a["d"], a["dv"], a["batch"]) is None:
        return f"head sizes {a['d']} / {a['dv']} do not fit one workgroup"
    y = graph.t(node.outputs[0])
    if y.size != a["batch"] * a["n"] * a["dv"]:
        return f"output {list(y.shape)} is not {a['batch']} x {a['n']} x {a['dv']}"
    return None


def mask_bias(steps, beta: float):
    """(bias index, sign) of the mask whose fully masked key tiles the kernel skips (attention.comp:
    the last score step adds, sign 1, or subtracts, -1, that bias), or None when the chain ends
    otherwise or beta is too small for a masked score's weight to be 0 surely."""
    if not steps or steps[-1]["op"] not in ("ADD", "SUB") or not beta >= 1e-6:
        return None
    return steps[-1]["bias"], 1 if steps[-1]["op"] == "ADD" else -1


def _steps_glsl(steps, consts, var="x"):
    out = []
    for s in steps:
        op, v = (s["op"], s.get("value")) if isinstance(s, dict) else s
        if op in ("MUL", "DIV"):
            consts.append(float(v))
            out.append(f"{var} = ew_{op.lower()}({var}, SC[{len(consts) - 1}]);")
        else:
            b = s["bias"]
            out.append(f"{var} = ew_{op.lower()}({var}, LD(bias{b}, bo[{b}][a] + j * B_SJ[{b}]));")
    return " ".join(out)


@register("ATTENTION", check=checked(_check), inputs=(3, 6),
          summary="internal: fused attention, softmax(scale * Q K^T + bias) V (passes/attention.py)")
def lower_attention(node, graph):
    a = node.attrs
    n, m, d, dv, nb = a["n"], a["m"], a["d"], a["dv"], a["batch"]
    y = graph.t(node.outputs[0])
    if y.size == 0:
        return []
    is_wide = wide(n, m, d, dv)
    plan = plan_tiles(n, m, d, dv, nb)
    bq = WIDE_BQ if is_wide else TY * plan[0]
    qblocks = -(-n // bq)
    consts: list[float] = []
    q, k, v, o = a["q"], a["k"], a["v"], a["o"]
    biases = [s for s in a["steps"] if s["op"] in ("ADD", "SUB")]
    b_first, acc = [], 0
    for s in biases:
        b_first.append(acc)
        acc += len(s["terms"])
    defines = dict(
        N=n, M=m, D=d, DV=dv, NBATCH=nb, QBLOCKS=qblocks, NWG=nb * qblocks, BETA=float(a["beta"]),
        **tile_defines(plan, d),
        Q_T=_terms(q["terms"]), Q_NT=len(q["terms"]), Q_SR=q["sr"], Q_SC=q["sc"], Q_CFAST=int(q["sc"] == 1),
        K_T=_terms(k["terms"]), K_NT=len(k["terms"]), K_SJ=k["sr"], K_SC=k["sc"], K_CFAST=int(k["sc"] == 1),
        V_T=_terms(v["terms"]), V_NT=len(v["terms"]), V_SJ=v["sr"], V_SC=v["sc"], V_CFAST=int(v["sc"] == 1),
        Q_OFF=q["off"], K_OFF=k["off"], V_OFF=v["off"],
        O_T=_terms(o["terms"]), O_NT=len(o["terms"]), O_SR=o["sr"], O_SC=o["sc"],
        Q_STEPS=_steps_glsl(q["steps"], consts), K_STEPS=_steps_glsl(k["steps"], consts),
        SCORE_STEPS=_steps_glsl(a["steps"], consts),
        NBIAS=len(biases), B_T=[x for s in biases for x in _terms(s["terms"])[:3 * len(s["terms"])]] or [0],
        B_FIRST=b_first or [0], B_NT=[len(s["terms"]) for s in biases] or [0], B_SJ=[s["sj"] for s in biases] or [0],
    )
    defines["SC"] = consts or [0.0]
    skip = mask_bias(a["steps"], float(a["beta"]))
    if skip is None:
        defines.update(SKIP_BIAS=-1, SKIP_SIGN=1, SKIP_LD="0.0")
    else:
        sb = skip[0]
        defines.update(SKIP_BIAS=sb, SKIP_SIGN=skip[1], SKIP_LD=f"LD(bias{sb}, bo[{sb}][a] + j * B_SJ[{sb}])")
    cm = attention_cm.variants(n, d, dv, nb)        # tensor cores, for fp16 bundles (ops/attention_cm.py)
    binds = [("out_", y.id), ("q", node.inputs[0]), ("k", node.inputs[1]), ("v", node.inputs[2])]
    binds += [(f"bias{i}", t) for i, t in enumerate(node.inputs[3:])]
    if is_wide:
        for key in ("RQ", "BQ", "CK", "BK", "CV", "DC", "QCHUNKS", "VK", "SKV_SIZE", "Q_CFAST", "K_CFAST", "V_CFAST"):
            del defines[key]
        defines.update(wide_chunks(d, dv))
        return [Kernel("attention_wide", binds, nb * qblocks * WIDE_NT, defines, node.label(), local_x=WIDE_NT,
                       flops=2 * nb * n * m * (d + dv), variants=cm)]
    ks = key_split(nb * qblocks, -(-m // defines["BK"]))    # (split: the tensor-core form's parts are measured)
    if ks == 1:
        return [Kernel("attention", binds, nb * qblocks * TX * TY, defines, node.label(), local_x=TX * TY,
                       flops=2 * nb * n * m * (d + dv), variants=cm)]
    part = graph.add_tensor(f"{y.name}/ksplit{ks}", (nb * n * ks, dv + 2), "float32")
    split = Kernel("attention", [("out_", part)] + binds[1:], nb * qblocks * ks * TX * TY,
                   dict(defines, KSPLIT=ks, NWG=nb * qblocks * ks), node.label(), local_x=TX * TY,
                   flops=2 * nb * n * m * (d + dv),
                   variants=[v if current().coopmat_emulate else dataclasses.replace(v, measured=True) for v in cm])
    merge = Kernel("attention_merge", [("out_", y.id), ("x", part)], nb * n * dv,
                   dict(N=n, DV=dv, NBATCH=nb, KSPLIT=ks, BETA=float(a["beta"]),
                        **{key: defines[key] for key in ("O_T", "O_NT", "O_SR", "O_SC")}), node.label(), local_x=64)
    return [split, merge]


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
_MADE = Why("an internal op the fusion passes make after shapes are propagated and the graph batched")
declare("ATTENTION", shape=_MADE, exact=_MADE, sym_shape=_MADE, batch=_MADE, pieces=Why("computes values"),
        fp16=NEUTRAL, in_place=False, templates=("attention", "attention_wide", "attention_cm", "attention_merge"), flops=rules.per_output,
        cpu=Why("internal op: no CPU kernel (the unfused ops have theirs)"))
template("attention", item_major=False, flat=False)
template("attention_wide", item_major=False, flat=False)
template("attention_merge", item_major=False, flat=True)
