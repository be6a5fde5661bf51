"""pad_conv_channels (compiler/ops/channel_pad.py) on and off: batch-32 fp16 programs of each model, timed in
turns (three rounds), with the first two dispatches (the input copy and the stem) and each output against the
program without the pass.

    python -m benchmarks.archive.channel_pad_ab MODEL.tflite ...
"""
import sys, os
import numpy as np
import gpuc
from benchmarks.timing import profiles_in_turns
for path in sys.argv[1:]:
    models = {}
    for name, dis in (("off", ["pad_conv_channels"]), ("on", [])):
        models[name] = gpuc.load(gpuc.compile(path, precision="fp16", max_batch=32, cache=False, disable_passes=dis))
    rng = np.random.default_rng(0)
    x = [rng.standard_normal([32] + list(s.shape[1:])).astype(s.dtype) for s in models["off"].inputs]
    outs = {}
    res, rows = profiles_in_turns(models, x)
    for name, m in models.items():
        outs[name] = np.asarray(m.run(x)[0], np.float64)
        m.close()
    for name in models:
        print(os.path.basename(path), name, "GPU ms", res[name], [(r["op"][:22], r["shader"], round(r["us"], 1)) for r in sorted(rows[name]["rows"], key=lambda r: r["index"])[:2]],
              "max|d|/max", float(np.abs(outs[name] - outs["off"]).max() / np.abs(outs["off"]).max()),
              "argmax same", bool((outs[name].argmax(-1) == outs["off"].argmax(-1)).all()), flush=True)
