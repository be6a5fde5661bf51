"""Every dispatch's GPU time of one model at a batch and precision, as JSON (for comparing fp16 and
fp32 programs dispatch by dispatch; benchmarks/profile_models.py keeps only the top rows).

    python -m benchmarks.archive.profile_dump MODEL.tflite --batch 1 --precision fp16 --json OUT.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import numpy as np

import gpuc
from gpuc.runtime.profile import profile


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--json", required=True)
    ap.add_argument("--fp16-plain-gemms", action="store_true",
                    help="A/B: plain gemms take float16 tensors too (the fp16_plain_gemms compile option)")
    a = ap.parse_args()
    opts = {"precision": a.precision, "fp16_plain_gemms": a.fp16_plain_gemms}
    if a.batch > 1:
        opts["max_batch"] = a.batch
    out = os.path.join(tempfile.mkdtemp(), "m.bundle")
    gpuc.compile(a.model, out, cache=False, **opts)
    model = gpuc.load(out)
    rng = np.random.default_rng(0)
    inputs = []
    for spec in model.inputs:
        shape = list(spec.shape)
        if a.batch > 1:
            shape[0] = a.batch
        inputs.append(rng.standard_normal(shape).astype(spec.dtype))
    profile(model, inputs, 20)                 # clocks up
    p = profile(model, inputs, a.runs)
    b = model.bundle
    for r in p["rows"]:
        d = b.dispatches[r["index"]]
        r["dtypes"] = [str(b.tensors[t].dtype) for t in d.bindings]
    p.update(model=os.path.basename(a.model), batch=a.batch, precision=a.precision)
    with open(a.json, "w") as f:
        json.dump(p, f, indent=0, default=str)
    print(f"{p['model']} b{a.batch} {a.precision}: {p['run_gpu_ms']:.3f} ms GPU, {p['dispatches']} dispatches")
    return 0


if __name__ == "__main__":
    sys.exit(main())
