"""Batch-32 fp16 ResNets, three programs timed in turns: as before session 11 ("base": no PADV2 folded into a max
pool after a float32-pinned producer, element-gathered convolutions plain only), with the fold (passes/fusion.py
_rounding_commutes), and with the fold and the gathered convolutions' tensor-core candidates
(ops/gemm_candidates.py GATHER_MEASURED).  Prints the GPU time of a run, the stem convolution's and the pads' time,
and each output against the base program's.

    python -m benchmarks.archive.stem_pool_ab RESNET18.tflite RESNET50.tflite
"""
import sys, os
import numpy as np
import gpuc
from gpuc.compiler.passes import fusion
from gpuc.compiler.ops import gemm_candidates
from benchmarks.timing import profiles_in_turns
real = fusion._rounding_commutes
for path in sys.argv[1:]:
    models = {}
    for name, fold, gather in (("base", False, False), ("fold", True, False), ("fold+gather", True, True)):
        fusion._rounding_commutes = real if fold else (lambda g, p: False)
        gemm_candidates.GATHER_MEASURED = gather
        models[name] = gpuc.load(gpuc.compile(path, precision="fp16", max_batch=32, cache=False))
    rng = np.random.default_rng(0)
    m0 = models["base"]
    x = [rng.standard_normal([32] + list(s.shape[1:])).astype(s.dtype) for s in m0.inputs]
    outs = {}
    res, rows = profiles_in_turns(models, x)
    for name, m in models.items():
        outs[name] = np.asarray(m.run(x)[0], np.float64)
        m.close()
    ref = outs["base"]
    for name in models:
        st = sum(r["us"] for r in rows[name]["rows"] if "CONV_2D" in r["op"] and "[32, 230, 230, 3]" in str(r.get("shapes")))
        pads = sum(r["us"] for r in rows[name]["rows"] if r["op"].startswith("PAD"))
        print(os.path.basename(path), name, "GPU ms", res[name], "dispatches", rows[name]["dispatches"],
              f"stem {st:.1f} us, pad {pads:.1f} us", "max|d|/max", float(np.abs(outs[name] - ref).max() / np.abs(ref).max()),
              "argmax same", bool((outs[name].argmax(-1) == ref.argmax(-1)).all()), flush=True)
