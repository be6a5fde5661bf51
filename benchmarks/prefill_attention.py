"""LLM prefill attention, fused vs unfused: litert-torch's decomposition of
odml.scaled_dot_product_attention (tests/helpers/prefill_attention.py: q [1, T, H, D], the KV caches
[1, KV, KH, D] through the head transpose and the GQA broadcast, a causal mask gathered by the positions)
compiled with the attention fusion (one ATTENTION dispatch: attention_wide.comp at these sizes) and
without it (the BATCH_MATMUL / SOFTMAX chain); each result checked against numpy in float64 and timed per
dispatch with GPU timestamps (runtime/profile.py, what `gpuc profile` uses).

    python -m benchmarks.prefill_attention [--heads 14/2/64,12/2/128] [--T 512] [--KV 1024] [--start 0,512]
                                           [--runs 10] [--tol 1e-4] [--prefetch 1,0]

--heads: H/KH/D per shape (default: Qwen2.5-0.5B's and 1.5B's attention).  --start: the first position of
each run (0: keys past T masked for every query, their tiles skipped).  --prefetch: the fused kernel
with attention_wide.comp's PF on (1) and / or off (0) (CompileOptions.attention_prefetch; default
ops/attention.py WIDE_PREFETCH).  One line per shape, form and start:
max |out - ref| / max |ref| and GPU us per shader.  Exit 1 if any result is out of --tol.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

import gpuc
from gpuc.compiler.ops import attention
from gpuc.runtime.profile import profile
from tests.helpers.prefill_attention import prefill_reference, prefill_sdpa


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--heads", default="14/2/64,12/2/128", help="H/KH/D per shape, comma separated")
    ap.add_argument("--T", type=int, default=512, help="query rows (prompt tokens)")
    ap.add_argument("--KV", type=int, default=1024, help="cache length (keys)")
    ap.add_argument("--start", default="0", help="first positions, comma separated")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--prefetch", default=str(int(attention.WIDE_PREFETCH)),
                    help="fused forms: PF values, comma separated")
    ap.add_argument("--tol", type=float, default=1e-4, help="max |out - ref| / max |ref|")
    a = ap.parse_args(argv)
    rng, bad = np.random.default_rng(0), 0
    for spec in a.heads.split(","):
        h, kh, d = (int(x) for x in spec.split("/"))
        model = prefill_sdpa(a.T, a.KV, h, kh, d)
        q = rng.normal(0, 1.5, (1, a.T, h, d)).astype(np.float32)
        k, v = (rng.normal(0, 1.5, (1, a.KV, kh, d)).astype(np.float32) for _ in range(2))
        runs = []
        for start in (int(s) for s in a.start.split(",")):
            xs = [q, k, v, np.arange(start, start + a.T, dtype=np.int32)]
            runs.append((start, xs, prefill_reference(*xs)))
        forms = [(f"fused PF{pf}", [], bool(int(pf))) for pf in a.prefetch.split(",")]
        forms.append(("unfused", ["fuse_attention"], None))     # (no attention_wide dispatch)
        for form, disable, pf in forms:
            m = gpuc.load(gpuc.compile(model, cache=False, disable_passes=disable, attention_prefetch=pf))
            try:
                for start, xs, ref in runs:
                    out = m.run(xs)[0]
                    err = float(np.abs(out - ref).max() / np.abs(ref).max())
                    us: dict = {}
                    for r in profile(m, xs, a.runs)["rows"]:
                        us[r["shader"]] = us.get(r["shader"], 0.0) + r["us"]
                    ok = err <= a.tol
                    bad += not ok
                    print(f"H{h} KH{kh} D{d} T{a.T} KV{a.KV} positions {start}..{start + a.T - 1} {form:9s} "
                          f"rel err {err:.1e}{'' if ok else ' FAIL'}  GPU us {sum(us.values()):8.1f}  "
                          + " ".join(f"{s} {u:.1f}" for s, u in sorted(us.items(), key=lambda x: -x[1])), flush=True)
            finally:
                m.close()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
