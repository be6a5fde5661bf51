"""A/B of the workgroup size of the one-element-per-invocation kernels (codegen/kernel.py FLAT:
elementwise, copies, gathers): compile a model with those kernels' local_x forced to each size given, profile it, and print the GPU
time per template.

    python -m benchmarks.archive.local_size_ab MODEL.tflite --batch 32 --sizes 64,256 [--templates a,b]
"""
from __future__ import annotations

import argparse
import collections
import time

import numpy as np

import gpuc
from gpuc.compiler import driver
from gpuc.compiler.codegen.kernel import FLAT_LOCAL_X, LOCAL_X, flat_templates
from gpuc.runtime.profile import profile


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--sizes", default="64,256")
    ap.add_argument("--templates", default=",".join(flat_templates()))
    a = ap.parse_args()
    temps = set(a.templates.split(","))
    orig = driver.build_bundle
    for size in map(int, a.sizes.split(",")):
        def patched(graph, kernels, *args, size=size, **kw):
            for k in kernels:
                # (the size the compiler gave: 64, or FLAT_LOCAL_X for a large flat grid)
                if getattr(k, "template", None) in temps and k.local_x in (LOCAL_X, FLAT_LOCAL_X):
                    k.local_x = size
            return orig(graph, kernels, *args, **kw)
        driver.build_bundle = patched
        try:
            opts = dict(precision=a.precision, cache=False)
            if a.batch > 1:
                opts["max_batch"] = a.batch
            m = gpuc.load(gpuc.compile(a.model, **opts))
        finally:
            driver.build_bundle = orig
        rng = np.random.default_rng(0)
        xs = [rng.standard_normal([a.batch] + list(s.shape[1:])).astype(s.dtype) for s in m.inputs]
        t0 = time.time()
        while time.time() - t0 < 1.0:
            m.run(xs)
        p = profile(m, xs, 10)
        g = collections.defaultdict(lambda: [0.0, 0])
        for r in p["rows"]:
            g[r["shader"]][0] += r["us"]
            g[r["shader"]][1] += 1
        print(f"== {a.model.split('/')[-1]} b{a.batch} local_x {size}: run {p['run_gpu_ms']:.3f} ms GPU")
        for name, (us, n) in sorted(g.items(), key=lambda kv: -kv[1][0]):
            print(f"   {us:9.1f} us x{n:<3d} {name}")
        m.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
