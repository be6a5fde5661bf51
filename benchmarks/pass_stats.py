"""Compile every shared model and print the memory / dispatch figures of `gpuc inspect BUNDLE --json`.

    python -m benchmarks.pass_stats [MODELS_DIR] [--disable-pass NAME ...] [--precision fp32|fp16] [--json]

Used for issue 4's closing note: ops / dispatches / arena_bytes / arena_lower_bound_bytes /
naive_bytes / weights_bytes per model, with the passes on and with some disabled.
"""
import argparse
import json
import sys
from pathlib import Path

import gpuc
from gpuc.runtime.bundle import read_bundle

KEYS = ("ops", "dispatches", "arena_bytes", "arena_lower_bound_bytes", "naive_bytes", "weights_bytes", "in_place")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="?", default=str(Path(__file__).resolve().parents[2] / "shared" / "models"))
    ap.add_argument("--disable-pass", action="append", default=[])
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rows = []
    for p in sorted(Path(a.models).glob("*.tflite")):
        b = read_bundle(gpuc.compile(p, disable_passes=a.disable_pass, precision=a.precision, cache=False))
        rows.append(dict(model=p.stem, **{k: b.stats.get(k) for k in KEYS}))
    if a.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'model':<32}" + "".join(f"{k[:14]:>16}" for k in KEYS))
    for r in rows:
        print(f"{r['model']:<32}" + "".join(f"{r[k]!s:>16}" for k in KEYS))


if __name__ == "__main__":
    sys.exit(main())
