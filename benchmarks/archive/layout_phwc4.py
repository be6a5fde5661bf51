"""Does a channel-packed layout (PHWC4: C padded to a multiple of 4) pay for tensors with C % 4 != 0?

    python -m benchmarks.archive.layout_phwc4 [--runs 30] [--device N|NAME]

In the shared models the only such tensors are graph inputs (C=3 images) and outputs (C=1/2 masks),
which stay NHWC for the user, so PHWC4 there means a conversion dispatch at the boundary.  This
times, for MobileNetV2's first layer (3x3/2 conv, 224x224x3 -> 112x112x32): the conv on the NHWC C=3
input, the same conv on a C=4 input (zero 4th channel and weights, i.e. what PHWC4 would give it), and
the conversion itself (a channel PAD 3 -> 4).  PHWC4 helps only if conv4 + pad < conv3.
"""
import argparse
import statistics
import time

import numpy as np

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import gpuc  # noqa: E402
from gpuc.runtime.profile import profile  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402


def conv_model(ci, h=224, co=32):
    mb = ModelBuilder()
    x = mb.input("x", [1, h, h, ci])
    y = mb.tensor("y", [1, h // 2, h // 2, co])
    w = np.random.default_rng(0).uniform(-1, 1, (co, 3, 3, ci)).astype(np.float32)
    w[..., 3:] = 0
    mb.op("CONV_2D", [x, mb.const("w", w), mb.const("b", np.zeros(co, np.float32))], [y], padding="SAME",
          stride_h=2, stride_w=2, fused_activation_function="RELU6")
    mb.output(y)
    return mb.finish()


def pad_model(h=224):
    mb = ModelBuilder()
    x = mb.input("x", [1, h, h, 3])
    y = mb.tensor("y", [1, h, h, 4])
    mb.op("PAD", [x, mb.const("p", np.array([[0, 0], [0, 0], [0, 0], [0, 1]], np.int32))], [y])
    mb.output(y)
    return mb.finish()


def gpu_ms(model, runs, device):
    """Median GPU time of the dispatches (timestamps around each, as `gpuc profile`)."""
    b = gpuc.compile(model, cache=False)
    with gpuc.load(b, device=device) as m:
        xs = [np.random.default_rng(1).uniform(-1, 1, s.shape).astype(np.float32) for s in m.inputs]
        return profile(m, xs, runs)["sum_dispatch_ms"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--device")
    a = ap.parse_args()
    c3 = gpu_ms(conv_model(3), a.runs, a.device)
    c4 = gpu_ms(conv_model(4), a.runs, a.device)
    pd = gpu_ms(pad_model(), a.runs, a.device)
    print(f"conv NHWC C=3: {c3:.3f} ms   conv C=4 (PHWC4): {c4:.3f} ms   NHWC->PHWC4 conversion: {pd:.3f} ms")
    print(f"PHWC4 total {c4 + pd:.3f} ms vs NHWC {c3:.3f} ms (GPU time of the dispatches)")


if __name__ == "__main__":
    main()
