"""Tuning rounds with and without a warm-up per round (runtime/tuning.py ROUND_WARM_S): a batch-1 fp16 ConvNeXt-T
bundle whose small-M gemms carry 15 coopmat tile plans each (K chunks 32 / 64 / 128, set here), loaded with a fresh
cache so that every plan is timed in its own round; prints each listed gemm's per-plan times (the tuning file's).
Without the warm-up the plans timed in the last rounds came out 2-4x slower than the same plans timed warm.

    GPUC_CACHE_DIR=/tmp/fresh python -m benchmarks.archive.tuning_round_warm_ab CONVNEXT_TINY.tflite ROUND_WARM_S
"""
import sys, os, json, glob, gpuc
from gpuc.compiler.ops import gemm_candidates as gc
from gpuc.compiler.ops.gemm_coopmat import CoopPlan as P
from gpuc.runtime.bundle import read_bundle
plans = []
for bk in (32, 64):
    plans += [P(1, 4, 1, 1, bk, 2), P(2, 4, 1, 1, bk, 2), P(2, 2, 2, 2, bk, 2), P(1, 4, 1, 2, bk, 2)]
plans += [P(1, 4, 1, 1, 128, 2), P(2, 4, 1, 1, 128, 1), P(2, 2, 2, 2, 128, 1), P(1, 4, 1, 2, 128, 1),
          P(1, 4, 1, 1, 128, 2, 2), P(1, 4, 1, 1, 64, 2, 2), P(1, 4, 1, 1, 128, 1)]
gc.SMALL_PLANS = tuple(plans); gc.MID_PLANS = ()
from gpuc.runtime import tuning
tuning.ROUND_WARM_S = float(sys.argv[2])
data = gpuc.compile(sys.argv[1], precision="fp16", cache=False, tune_candidates=40, coopmat_mid_candidates=0)
b = read_bundle(data)
before = set(glob.glob(os.environ["GPUC_CACHE_DIR"] + "/tuning/*"))
with gpuc.load(data) as m:
    from benchmarks.timing import warm_profile
    outs, p = warm_profile(m, 20)
print("run GPU ms", round(p["run_gpu_ms"], 3), "round warm", tuning.ROUND_WARM_S)
f = sorted(set(glob.glob(os.environ["GPUC_CACHE_DIR"] + "/tuning/*")) - before)
d = json.load(open(f[-1]))
# map variant -> plan via order: per dispatch the variants are small_plans(...) sorted order; recover by groups only
import collections
want = {"#30)": (3136,384,96), "#33)": (3136,96,384), "#102)": (784,768,192), "#105)": (784,192,768), "#174)": (196,1536,384), "#360)": (49,3072,768), "#87)": (784, 192, 384)}
for disp, t in sorted(d["us"].items(), key=lambda e: int(e[0])):
    D = b.dispatches[int(disp)]
    hit = [v for w, v in want.items() if w in D.label]
    if not hit: continue
    order = gc.small_plans(*hit[0], 1, 40)
    print(disp, D.label[:44], hit[0], "plain", t.get("plain"), "n", len(t) - 1, len(order))
    for k, v in t.items():
        if k == "plain": continue
        V = b.variants[int(k)]
        i = [x for x in t if x != "plain"].index(k)
        pl = order[i] if i < len(order) else None
        print(f"    wg {V.groups[0]:5d} {v:6.1f} us  {pl and (pl.BM, pl.BN, pl.BK, pl.ST, pl.KS)}")
