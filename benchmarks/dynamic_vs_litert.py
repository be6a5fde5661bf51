"""One --dynamic bundle of a model against LiteRT CPU resized to each size (resize_tensor_input), for the
acceptance of issue 16 (e.g. MobileNetV2 with dynamic height and width, checked at 160 and 320):

    python -m benchmarks.dynamic_vs_litert MODEL.tflite --dynamic input:1<=320 --dynamic input:2<=320 \\
        --shapes 1x160x160x3,1x320x320x3

Prints each size's max |gpuc - LiteRT| / max |LiteRT| (first output) and the bundle's dispatch count;
exit 1 if any exceeds --tol (default 1e-3, fp32's bound).
"""
from __future__ import annotations

import argparse
import os

import numpy as np


import gpuc
from gpuc.runtime.bundle import read_bundle
from tests.helpers.litert import make_interpreter


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--dynamic", action="append", required=True)
    ap.add_argument("--shapes", required=True, help="input shapes to run, e.g. 1x160x160x3,1x320x320x3")
    ap.add_argument("--tol", type=float, default=1e-3)
    a = ap.parse_args()
    data = open(a.model, "rb").read()
    b = gpuc.compile(a.model, cache=False, dynamic=a.dynamic)
    print(f"{os.path.basename(a.model)} --dynamic {' '.join(a.dynamic)}: {len(read_bundle(b).dispatches)} dispatches")
    bad = 0
    with gpuc.load(b) as g:
        for text in a.shapes.split(","):
            shape = [int(v) for v in text.split("x")]
            x = np.random.default_rng(sum(shape)).uniform(-1, 1, shape).astype(np.float32)
            it = make_interpreter(data)
            idx = it.get_input_details()[0]["index"]
            it.resize_tensor_input(idx, shape)
            it.allocate_tensors()
            it.set_tensor(idx, x)
            it.invoke()
            ref = it.get_tensor(it.get_output_details()[0]["index"])
            out = g.run([x])[0]
            err = float(np.abs(out - ref).max() / max(float(np.abs(ref).max()), 1e-30))
            ok = out.shape == ref.shape and err <= a.tol
            bad += not ok
            print(f"  {text}: output {list(out.shape)}, max rel err {err:.2e} {'ok' if ok else 'FAIL'}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
