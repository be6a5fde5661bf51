"""Compile a model (MobileNetV2 by default) without the compile cache, run it N times on the default
(or given) Vulkan device and print the median run time, the dispatch count per kernel template and,
where the device has timestamp queries, GPU time per template and the slowest dispatches with the
tile each one was given (so the gemm planner in compiler/ops/gemm_plan.py can be tuned from the output).

    python -m benchmarks.kernel_bench [MODEL.tflite] [--runs 50] [--device N|NAME] [--no-profile] [--all]
"""
import argparse
import os
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

import gpuc

from benchmarks.timing import once, timed

MODEL_NAME = "mobilenet_v2_224_f32.tflite"


def default_model() -> str:
    """MobileNetV2 from $GPUC_SHARED_MODELS, ../shared/models or ./shared/models (repo-relative)."""
    here = Path(__file__).resolve().parents[1]
    env = os.environ.get("GPUC_SHARED_MODELS")
    for d in ([Path(env)] if env else []) + [here.parent / "shared" / "models", here / "shared" / "models"]:
        if (d / MODEL_NAME).is_file():
            return str(d / MODEL_NAME)
    return str(here.parent / "shared" / "models" / MODEL_NAME)


def kernel_notes(data: bytes) -> list[str]:
    """One line per dispatch, in dispatch order: template and its shape/tile defines."""
    from gpuc.compiler.frontend.importer import load_tflite
    from gpuc.compiler.passes import run_passes
    from gpuc.compiler.prepare import lower_graph
    g = load_tflite(data).main
    run_passes(g)
    notes = []
    for k in lower_graph(g):
        d = k.defines
        if k.template == "gemm":
            notes.append(f"gemm M={d['GM']} N={d['GN']} K={d['GK']} G={d['GROUPS']}"
                         f"{' im2col' if d['IM2COL'] else ''}{' vecA' if d['VEC_A'] else ''}"
                         f"{' runtimeW' if d['B_T'] else ''} tile={d['BM']}x{d['BN']}x{d['BK']} "
                         f"reg={d['TM']}x{d['TN']} KS={d['KS']} wg={k.local_x} nwg={d['NWG']}")
        elif k.template == "depthwise":
            notes.append(f"depthwise {d['H']}x{d['W']}x{d['CI']}->{d['OH']}x{d['OW']}x{d['CO']} "
                         f"k{d['KH']}x{d['KW']} s{d['SH']} PX={d['PX']} vec4={d['VEC']} inv={k.invocations}")
        else:
            notes.append(f"{k.template} inv={k.invocations}")
    return notes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?", default=None, help=f"default: {MODEL_NAME} from the shared models")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--device")
    ap.add_argument("--no-profile", action="store_true", help="skip per-dispatch timestamp profiling")
    ap.add_argument("--all", action="store_true", help="list every dispatch, not just the slowest 15")
    a = ap.parse_args()
    a.model = a.model or default_model()
    data = Path(a.model).read_bytes()

    bundle, t_compile = once(gpuc.compile, data, cache=False)
    from gpuc.inspect import inspect_bundle
    rep, _ = inspect_bundle(bundle)
    templates = Counter(d["shader"] for d in rep["dispatch_list"])
    notes = kernel_notes(data)

    m, t_load = once(gpuc.load, bundle, device=a.device)
    rng = np.random.default_rng(0)
    xs = [rng.uniform(-1, 1, s.shape).astype(s.dtype) if np.dtype(s.dtype).kind == "f" else np.zeros(s.shape, s.dtype)
          for s in m.inputs]
    gpu_ms = []

    def run():
        m.run(xs)
        if getattr(m, "last_gpu_ms", None) is not None:
            gpu_ms.append(m.last_gpu_ms)
    wall = timed(run, a.runs)
    gpu_ms = gpu_ms[-a.runs:]

    print(f"model {Path(a.model).name}  device {m.device.name}")
    print(f"compile {t_compile:.2f} s  load {t_load * 1e3:.1f} ms  dispatches {rep['dispatches']}  "
          f"shaders {rep['shaders']}")
    print(f"median run {wall['median_ms']:.3f} ms (wall, {a.runs} runs)"
          + (f"  median GPU {statistics.median(gpu_ms):.3f} ms" if gpu_ms else ""))
    print("dispatches per template: " + ", ".join(f"{t}={n}" for t, n in templates.most_common()))

    if not a.no_profile:
        try:
            from gpuc.runtime.profile import profile
            prof = profile(m, xs, max(3, min(a.runs, 20)))
        except Exception as e:                    # no timestamps on this device, or no profiler
            print(f"(no per-dispatch profile: {e})")
            prof = None
        if prof:
            per_t = defaultdict(float)
            for r in prof["rows"]:
                per_t[r["shader"]] += r["us"]
            print(f"sum of dispatch GPU times {prof['sum_dispatch_ms']:.3f} ms, run GPU time "
                  f"{prof['run_gpu_ms']:.3f} ms")
            print("GPU us per template: " + ", ".join(f"{t}={us:.1f} ({templates[t]})"
                                                     for t, us in sorted(per_t.items(), key=lambda kv: -kv[1])))
            rows = prof["rows"] if a.all else prof["rows"][:15]
            print(f"{'#':>4} {'us':>8} {'GB/s':>7} {'GFLOP/s':>8}  kernel")
            for r in rows:
                note = notes[r["index"]] if r["index"] < len(notes) else r["shader"]
                gbs = f"{r['gb_per_s']:.0f}" if r.get("gb_per_s") else "-"
                gfl = f"{r['gflop_per_s']:.0f}" if r.get("gflop_per_s") else "-"
                print(f"{r['index']:>4} {r['us']:>8.1f} {gbs:>7} {gfl:>8}  {note}")
    m.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
