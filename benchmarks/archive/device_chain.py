"""Two bundles chained: host round trip vs device-resident tensors (keep_on_device), and batch
throughput of one --max-batch bundle.

    python benchmarks/device_chain.py [--size 112] [--channels 32] [--runs 100] [--device N|NAME]
                                      [--batch 1,8,32] [--json]

The chain is a synthetic conv model split in two (head: 3x3 conv + relu6 on [1,S,S,C]; tail:
1x1 conv + residual + mean): `host` runs head, reads its output back and feeds the array to tail;
`device` keeps head's output on the device and passes the DeviceTensor to tail.  Prints median /
p90 / min ms per chain and the output agreement; then images/s of the head at each batch.
"""
import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from helpers.builder import ModelBuilder  # noqa: E402
from benchmarks.timing import timed  # noqa: E402


def rnd(shape, seed, lo=-0.5, hi=0.5):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(np.float32)


def head(s, c):
    mb = ModelBuilder()
    x = mb.input("x", [1, s, s, c])
    y = mb.tensor("y", [1, s, s, c])
    mb.op("CONV_2D", [x, mb.const("w", rnd((c, 3, 3, c), 1, -0.1, 0.1)), mb.const("b", rnd((c,), 2))], [y],
          padding="SAME", stride_h=1, stride_w=1, fused_activation_function="RELU6")
    mb.output(y)
    return mb.finish()


def tail(s, c):
    mb = ModelBuilder()
    h = mb.input("h", [1, s, s, c])
    x = mb.input("x", [1, s, s, c])
    c2 = mb.tensor("c2", [1, s, s, c])
    mb.op("CONV_2D", [h, mb.const("w", rnd((c, 1, 1, c), 3, -0.1, 0.1)), mb.const("b", rnd((c,), 4))], [c2],
          padding="VALID", stride_h=1, stride_w=1)
    a = mb.tensor("a", [1, s, s, c])
    mb.op("ADD", [x, c2], [a])
    m = mb.tensor("m", [1, c])
    mb.op("MEAN", [a, mb.const("ax", np.array([1, 2], np.int32))], [m], keep_dims=False)
    mb.output(m)
    return mb.finish()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=112)
    ap.add_argument("--channels", type=int, default=32)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--device")
    ap.add_argument("--batch", default="1,8,32")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    import gpuc
    s, c = a.size, a.channels
    batches = sorted({int(b) for b in a.batch.split(",")})
    rows = []
    with gpuc.open_device(a.device) as dev:
        with gpuc.load(gpuc.compile(head(s, c)), device=dev) as hm, \
                gpuc.load(gpuc.compile(tail(s, c)), device=dev) as tm:
            x = rnd((1, s, s, c), 0, -1, 1)

            def host():
                return tm.run([hm.run([x])[0], x])[0]

            def device():
                (h,) = hm.run([x], keep_on_device=True)
                with h:
                    return tm.run([h, x])[0]
            err = float(np.abs(host() - device()).max())
            for name, fn in (("host", host), ("device", device)):
                rows.append({"chain": name, "tensor_bytes": s * s * c * 4, **timed(fn, a.runs, warmup_s=0)})
            rows.append({"chain": "host vs device max abs diff", "value": err})
        with gpuc.load(gpuc.compile(head(s, c), max_batch=max(batches)), device=dev) as bm:
            xs = rnd((max(batches), s, s, c), 5, -1, 1)
            for b in batches:
                r = timed(lambda: bm.run([xs[:b]]), a.runs, warmup_s=0)
                rows.append({"batch": b, **r, "images_per_s": b / (r["median_ms"] * 1e-3),
                             "gpu_ms": bm.last_gpu_ms})
        name = dev.name
    if a.json:
        print(json.dumps({"device": name, "rows": rows}))
        return
    print(f"device: {name}; tensor [1,{s},{s},{c}] float32")
    for r in rows:
        print("  " + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in r.items()))


if __name__ == "__main__":
    main()
