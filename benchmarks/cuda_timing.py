"""GPU time of a CUDA call with torch events (the benchmarks' PyTorch side)."""
from __future__ import annotations

import statistics


def cuda_us(fn, runs: int, warm: int = 3) -> float:
    """Median microseconds of `fn()` between two CUDA events, after `warm` calls."""
    import torch
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    return statistics.median(times)
