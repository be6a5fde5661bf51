"""Where load time goes: imports, bundle read/verify, instance+device, and each LoadedModel setup step.

    python -m benchmarks.load_breakdown BUNDLE [--device N|NAME] [--runs 3]

Each step is timed by wrapping the runtime's own functions (so the figures follow the code as it
changes): the making of each object a LoadedModel owns (arenas, slots, pipelines, descriptors),
the weight upload, Device creation, bundle parsing, command recording.  Nested calls are charged to the outermost timed step only.  Run it in a fresh
process: the first load pays the driver's start-up; further loads (--runs) show the steady state.
"""
import argparse
import functools
import time

T: dict = {}
_depth = [0]


def charged(name, fn):
    """fn wrapped so that its time (outermost calls only) adds to T[name]."""
    @functools.wraps(fn)
    def wrapper(*a, **k):
        if _depth[0]:
            return fn(*a, **k)
        _depth[0] += 1
        t0 = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            _depth[0] -= 1
            T[name] = T.get(name, 0.0) + (time.perf_counter() - t0) * 1e3
    return wrapper


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bundle")
    ap.add_argument("--device")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    t = time.perf_counter()
    import numpy as np
    import vulkan  # noqa: F401
    T["import numpy+vulkan"] = (time.perf_counter() - t) * 1e3
    t = time.perf_counter()
    from gpuc.runtime import (arenas, bundle as B, descriptors, device as D, executor as ex, pipelines,
                              read_bundle_file, recorder, slots)
    T["import gpuc.runtime"] = (time.perf_counter() - t) * 1e3
    from benchmarks.timing import once          # (after the timed imports: it imports statistics)
    B.read_bundle = charged("verify+parse bundle", B.read_bundle)
    D.Device.__init__ = charged("instance+device", D.Device.__init__)
    recorder.Recorder.record = charged("record command buffers", recorder.Recorder.record)
    for cls in (arenas.Arenas, slots.Slot, pipelines.Pipelines, descriptors.Descriptors):
        cls.__init__ = charged(f"{cls.__name__}()", cls.__init__)
    arenas.Arenas.upload = charged("Arenas.upload (weights, state)", arenas.Arenas.upload)
    for i in range(a.runs):
        T.clear() if i else None
        data, sec = once(read_bundle_file, a.bundle)
        T["read file"] = sec * 1e3
        m, sec = once(lambda: ex.LoadedModel(B.read_bundle(data), device=a.device))
        total = sec * 1e3
        xs = [np.zeros(s.shape, s.dtype) for s in m.inputs]
        first = once(m.run, xs)[1] * 1e3
        second = once(m.run, xs)[1] * 1e3
        m.close()
        print(f"-- load {i + 1}: parse+load {total:.2f} ms, first run {first:.2f} ms, second run {second:.2f} ms, "
              f"pipeline cache {m.load_info.get('pipeline_cache')}")
        for name, ms in sorted(T.items(), key=lambda kv: -kv[1]):
            print(f"   {name:<40} {ms:9.2f} ms")


if __name__ == "__main__":
    main()
