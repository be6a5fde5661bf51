"""Where the host time of one run() goes (the part that is not GPU work).

    python -m benchmarks.run_overhead BUNDLE [--runs 300] [--device N|NAME]

Prints medians (µs) of: a whole run() (passive and active wait), run_in_place, and the pieces of
a run timed one by one on the same model -- input normalisation, the copy into mapped staging
memory, vkQueueSubmit, the fence wait, the output copy, the timestamp read -- plus a bare
submit+wait of an empty command buffer (the floor any Vulkan runtime pays from Python) and the
GPU time of the run from its timestamps.
"""
import argparse

import numpy as np

from benchmarks.timing import timed


def med(fn, runs):
    """Median µs of `runs` calls (timing.timed, no warm-up beyond its one untimed call)."""
    return timed(fn, runs, warmup_s=0)["median_ms"] * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bundle")
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--device")
    a = ap.parse_args()
    import vulkan as vk
    import gpuc
    from gpuc.runtime import commands, iospec
    m = gpuc.load(a.bundle, device=a.device)
    rng = np.random.default_rng(0)
    xs = [rng.uniform(-1, 1, s.shape).astype(s.dtype) for s in m.inputs]
    for _ in range(20):
        m.run(xs)
    rows = [("run() passive", med(lambda: m.run(xs), a.runs)),
            ("run() active", med(lambda: m.run(xs, wait="active"), a.runs))]
    sl = m.slots[0]
    for i, x in enumerate(xs):
        m.input_view(i)[...] = x
    rows += [("run_in_place passive", med(lambda: m.run_in_place(), a.runs)),
             ("run_in_place active", med(lambda: m.run_in_place(wait="active"), a.runs))]
    if m.program is None and getattr(sl, "cmd", None) is not None:
        d = m.device

        def copy_in():
            for v, x in zip(sl.in_views, xs):
                v[...] = x

        def submit_wait(active):
            d.submit(sl.cmd, sl.fence)
            d.wait(sl.fence, active=active)
        rows += [("  normalize", med(lambda: iospec.normalize(m.inputs, xs), a.runs)),
                 ("  copy into staging", med(copy_in, a.runs)),
                 ("  submit+wait passive", med(lambda: submit_wait(False), a.runs)),
                 ("  submit+wait active", med(lambda: submit_wait(True), a.runs)),
                 ("  output copy", med(lambda: [v.copy() for v in sl.out_views], a.runs))]
        if sl.pool is not None:
            rows.append(("  timestamp read", med(lambda: commands.read_ms(m.device, sl.pool, 2), a.runs)))
        empty = m.recorder.alloc()
        vk.vkBeginCommandBuffer(empty, vk.VkCommandBufferBeginInfo())
        vk.vkEndCommandBuffer(empty)

        def bare(active):
            d.submit(empty, sl.fence)
            d.wait(sl.fence, active=active)
        rows += [("empty cmd submit+wait passive", med(lambda: bare(False), a.runs)),
                 ("empty cmd submit+wait active", med(lambda: bare(True), a.runs))]
    m.run(xs)
    print(f"device {m.device.name}; bundle {a.bundle}; GPU time of a run {1e3 * (m.last_gpu_ms or 0):.1f} µs")
    for name, us in rows:
        print(f"  {name:<32} {us:9.1f} µs")
    m.close()


if __name__ == "__main__":
    main()
