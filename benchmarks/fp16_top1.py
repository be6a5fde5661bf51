"""--precision fp16 against LiteRT CPU (fp32) on a few random inputs per model: max |err| / max|ref| and
whether the top-1 class agrees (issue 14's fp16 accuracy line).

    python benchmarks/fp16_top1.py MODEL.tflite ... [--inputs 8]
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

import gpuc


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--inputs", type=int, default=8)
    a = ap.parse_args()
    from ai_edge_litert.interpreter import Interpreter
    bad = 0
    for path in a.models:
        it = Interpreter(model_path=path)
        it.allocate_tensors()
        inp, out = it.get_input_details()[0], it.get_output_details()[0]
        rng = np.random.default_rng(0)
        errs, same = [], 0
        with gpuc.load(gpuc.compile(path, precision="fp16")) as m:
            for _ in range(a.inputs):
                x = rng.standard_normal(inp["shape"]).astype(np.float32)
                it.set_tensor(inp["index"], x)
                it.invoke()
                ref = it.get_tensor(out["index"]).astype(np.float64)
                y = np.asarray(m.run([x])[0], np.float64)
                errs.append(float(np.abs(y - ref).max() / np.abs(ref).max()))
                same += int(np.argmax(y.reshape(-1)) == np.argmax(ref.reshape(-1)))
        bad += same != a.inputs or max(errs) > 1e-2
        print(f"{path.split('/')[-1]:40s} fp16: max err {max(errs):.2e} of max|ref|, top-1 same {same}/{a.inputs}",
              flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
