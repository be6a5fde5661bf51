"""Single-op models of the issue-3 ops at realistic sizes (attention matmuls, a video conv, vocab-sized
log-softmax / argmax, long cumsums): median run time of gpuc on the default (or given) Vulkan device,
LiteRT CPU for comparison, max error vs LiteRT, and GFLOP/s where the op has a flop count.

    python benchmarks/ops_bench.py [--runs 50] [--device N|NAME] [--small] [--json]

--small shrinks every shape ~8x (for a CPU Vulkan device such as lavapipe).
"""
import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import gpuc  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import make_interpreter  # noqa: E402
from benchmarks.timing import timed  # noqa: E402


def one_op(op, ins, out_shape, out_dtype="float32", **opts):
    """ins: [(array, is_const)].  Returns (model, runtime inputs)."""
    mb = ModelBuilder()
    ids, feeds = [], []
    for i, (v, const) in enumerate(ins):
        ids.append(mb.const(f"c{i}", v) if const else mb.input(f"x{i}", v.shape, v.dtype.name))
        if not const:
            feeds.append(v)
    y = mb.tensor("y", out_shape, out_dtype)
    mb.op(op, ids, [y], **opts)
    mb.output(y)
    return mb.finish(), feeds


def cases(s: int):
    """(name, model, inputs, flops); s divides the big dimensions."""
    r = np.random.default_rng(0)
    f = lambda *sh: r.uniform(-1, 1, sh).astype(np.float32)  # noqa: E731
    b, h, t, d = 4, 12, 256 // s, 64
    out = []
    m, x = one_op("BATCH_MATMUL", [(f(b, h, t, d), False), (f(b, h, t, d), False)], [b, h, t, t], adj_y=True)
    out.append(("bmm q@k^T runtime x runtime", m, x, 2 * b * h * t * t * d))
    m, x = one_op("BATCH_MATMUL", [(f(b, h, t, t), False), (f(b, h, t, d), False)], [b, h, t, d])
    out.append(("bmm attn@v runtime x runtime", m, x, 2 * b * h * t * t * d))
    k, n = 768 // s, 3072 // s
    m, x = one_op("BATCH_MATMUL", [(f(1, t, k), False), (f(k, n), True)], [1, t, n])
    out.append(("bmm x@W constant RHS (gemm)", m, x, 2 * t * k * n))
    dd, hw, ci, co = 8, 56 // (2 if s > 1 else 1), 16, 32
    m, x = one_op("CONV_3D", [(f(1, dd, hw, hw, ci), False), (f(3, 3, 3, ci, co), True), (f(co), True)],
                  [1, dd, hw, hw, co], padding="SAME", stride_d=1, stride_h=1, stride_w=1)
    out.append(("conv3d 3x3x3 SAME", m, x, 2 * dd * hw * hw * co * 27 * ci))
    v = 32000 // s
    m, x = one_op("LOG_SOFTMAX", [(f(64, v), False)], [64, v])
    out.append(("log_softmax 64 x vocab", m, x, 0))
    m, x = one_op("ARG_MAX", [(f(64, v), False), (np.array([1], np.int32), True)], [64], "int32",
                  output_type="INT32")
    out.append(("arg_max 64 x vocab", m, x, 0))
    m, x = one_op("L2_NORMALIZATION", [(f(4096 // s, 512), False)], [4096 // s, 512])
    out.append(("l2_normalization 4096 x 512", m, x, 0))
    m, x = one_op("CUMSUM", [(f(256, 4096 // s), False), (np.array(1, np.int32), True)], [256, 4096 // s])
    out.append(("cumsum 256 x 4096 axis 1", m, x, 0))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--device")
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rows = []
    for name, model, xs, flops in cases(8 if a.small else 1):
        it = make_interpreter(model)
        it.allocate_tensors()
        ind = it.get_input_details()

        def lite():
            for dd, x in zip(ind, xs):
                it.set_tensor(dd["index"], x)
            it.invoke()
        lite_ms = timed(lite, max(3, a.runs // 5), warmup_s=0)["median_ms"]
        ref = it.get_tensor(it.get_output_details()[0]["index"])
        with gpuc.load(gpuc.compile(model, cache=False), device=a.device) as m:
            ms = timed(lambda: m.run(xs), a.runs, warmup_s=0)["median_ms"]
            (y,) = m.run(xs)
        err = float(np.abs(y.astype(np.float64) - ref).max()) / max(1.0, float(np.abs(ref).max()))
        row = dict(op=name, gpuc_ms=round(ms, 4), litert_cpu_ms=round(lite_ms, 4), rel_err=err,
                   gflops=round(flops / ms / 1e6, 1) if flops else None)
        rows.append(row)
        if not a.json:
            g = f"{row['gflops']:>8} GFLOP/s" if flops else ""
            print(f"{name:<32} gpuc {ms:9.3f} ms   LiteRT CPU {lite_ms:9.3f} ms   rel err {err:.1e} {g}")
    if a.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
