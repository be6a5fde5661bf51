"""--precision fp16 against LiteRT CPU (fp32) on a few random inputs per model: max |err| / max|ref| and
whether the top-1 class agrees (issue 14's fp16 accuracy line).

    python -m benchmarks.fp16_top1 MODEL.tflite ... [--inputs 8] [--batch 32]

With --batch B the bundle is batch-native (--max-batch B) and runs the inputs as one batch of B items.
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
    ap.add_argument("--batch", type=int, default=1)
    a = ap.parse_args()
    from ai_edge_litert.interpreter import Interpreter
    bad = 0
    for path in a.models:
        it = Interpreter(model_path=path)
        it.allocate_tensors()
        inp, out = it.get_input_details()[0], it.get_output_details()[0]
        rng = np.random.default_rng(0)
        errs, same = [], 0
        n = a.batch if a.batch > 1 else a.inputs
        xs = [rng.standard_normal(inp["shape"]).astype(np.float32) for _ in range(n)]
        refs = []
        for x in xs:
            it.set_tensor(inp["index"], x)
            it.invoke()
            refs.append(it.get_tensor(out["index"]).astype(np.float64))
        opts = {"max_batch": a.batch} if a.batch > 1 else {}
        with gpuc.load(gpuc.compile(path, precision="fp16", **opts)) as m:
            if a.batch > 1:
                ys = list(np.asarray(m.run([np.concatenate(xs)])[0], np.float64)[:, None])
            else:
                ys = [np.asarray(m.run([x])[0], np.float64) for x in xs]
        for y, ref in zip(ys, refs):
            errs.append(float(np.abs(y - ref).max() / np.abs(ref).max()))
            same += int(np.argmax(y.reshape(-1)) == np.argmax(ref.reshape(-1)))
        bad += same != n or max(errs) > 1e-2
        print(f"{path.split('/')[-1]:40s} fp16: max err {max(errs):.2e} of max|ref|, top-1 same {same}/{n}",
              flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
