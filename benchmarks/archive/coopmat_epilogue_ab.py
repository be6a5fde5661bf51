"""A/B of the cooperative-matrix gemm's register epilogue (gemm.comp cm_epilogue, ops/gemm_coopmat.py
DIRECT) against the staged one, per model: GPU time of the gemm dispatches and of the whole run.
Configurations: register (every full tile), register-nochain (tiles of gemms with a fused chain staged),
staged (every tile); each compiled without the cache.

    python -m benchmarks.archive.coopmat_epilogue_ab MODEL.tflite ... [--batch 32] [--precision fp16]
"""
from __future__ import annotations

import argparse
import sys

from benchmarks.profile_models import one  # noqa: E402

from gpuc.compiler.ops import gemm_coopmat as cm

CONFIGS = {"register": dict(DIRECT=True, REG_CHAIN=True),            # (ops/gemm_coopmat.py switches)
           "register-nochain": dict(DIRECT=True, REG_CHAIN=False),
           "staged": dict(DIRECT=False, REG_CHAIN=False)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--precision", default="fp16")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--unfused", action="store_true", help="each configuration also without fuse_gemm_epilogue")
    a = ap.parse_args()
    for m in a.models:
        for name, off in [(c, o) for c in a.configs.split(",") for o in ([(), ("fuse_gemm_epilogue",)] if a.unfused
                                                                         else [()])]:
            for k, v in CONFIGS[name].items():
                setattr(cm, k, v)
            p = one(m, a.batch, a.precision, a.runs, cache=False, disable_passes=list(off))
            name += " unfused" if off else ""
            gemm = sum(us for k, us, _ in p["groups"] if "gemm" in k)
            print(f"{p['model']:36s} b{a.batch} {a.precision} {name:25s}: run {p['run_gpu_ms']:.3f} ms GPU, "
                  f"gemms {gemm / 1e3:.3f} ms; top: " + ", ".join(
                      f"{r['op'].split(' ')[0]}{r['op'][r['op'].find('+'):] if '+' in r['op'] else ''} {r['us']:.0f}"
                      for r in p["rows"][:4]))
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
