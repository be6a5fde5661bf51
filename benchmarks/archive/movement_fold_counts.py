"""fold_movement's effect: dispatches with the pass off and on, and whether every output is
bit-identical between the two (lavapipe or any device), plus the error against a model's LiteRT
reference where `ref/NAME.in0.npy` / `ref/NAME.out0.npy` sit beside it.

    python -m benchmarks.archive.movement_fold_counts MODEL.tflite ...
"""
import os
import sys
import time

import numpy as np

import gpuc
from gpuc.runtime.bundle import read_bundle


def main(paths):
    for path in paths:
        name = os.path.basename(path)[:-len(".tflite")]
        ref_dir = os.path.join(os.path.dirname(path), "ref")
        x = ref = None
        if os.path.exists(os.path.join(ref_dir, name + ".in0.npy")):
            x = np.load(os.path.join(ref_dir, name + ".in0.npy"))
            ref = np.load(os.path.join(ref_dir, name + ".out0.npy"))
        outs = {}
        for label, disabled in (("off", ["fold_movement"]), ("on", [])):
            t0 = time.time()
            b = gpuc.compile(path, disable_passes=disabled)
            with gpuc.load(b) as m:
                if x is None:
                    spec = m.inputs[0]
                    x = np.random.default_rng(0).uniform(-1, 1, spec.shape).astype(spec.dtype)
                outs[label] = (len(read_bundle(b).dispatches), m.run([x]))
            print(f"{name} fold_movement {label}: {outs[label][0]} dispatches ({time.time() - t0:.0f} s)", flush=True)
        same = all(a.tobytes() == b.tobytes() for a, b in zip(outs["off"][1], outs["on"][1]))
        line = f"{name}: dispatches {outs['off'][0]} -> {outs['on'][0]}, outputs bit-identical off/on: {same}"
        if ref is not None:
            o = outs["on"][1][0]
            line += f", max|o-ref| / max|ref| = {np.abs(o - ref).max() / np.abs(ref).max():.2e}"
        print(line, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
