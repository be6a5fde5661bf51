"""Per-dispatch GPU timing with timestamp queries (`gpuc profile`)."""
from __future__ import annotations

import statistics

from gpuc.errors import GpucError
from gpuc.runtime import commands, iospec


def profile(model, inputs, runs: int = 10, signature: str | None = None) -> dict:
    """Per-dispatch GPU time of a run on `inputs` (with a --max-batch bundle: 1..max_batch items along
    axis 0; a batch-native bundle records one dispatch per layer for any batch, a replicated one one
    per item, and each row is then the layer's time for all the items).  `signature`: that signature's
    program of a multi-signature bundle (default: the model's own, its first); it runs on the arenas the
    signatures share, so state such as a KV cache is what earlier runs left."""
    if signature is not None:
        model = model.signature(signature)
    if not model.timestamps:
        raise GpucError(f"device {model.device.name!r} has no timestamp queries; cannot profile")
    b = model.bundle
    if model.program is not None:
        raise GpucError("gpuc profile times GPU-only bundles; this one has host (CPU) steps or control flow")
    n = len(b.dispatches)
    arrays, items = iospec.normalize(model.inputs, inputs, model.max_batch)
    slot = model.slots.acquire()
    try:
        pool = model.resources.query_pool(n + 1)
        cmd = model.recorder.record(slot, pool, every_dispatch=True, items=items, cmd_pool=slot.command_pool())
        slot.write_inputs(arrays, items if model.max_batch > 1 else None)
        samples = []
        for _ in range(runs + 1):
            model.device.submit(cmd, slot.fence)
            model.slots.wait(slot)
            samples.append(commands.read_ms(model.device, pool, n + 1))
        samples = samples[1:]                       # the first run warms caches
    finally:
        slot.free()
    per = [statistics.median(s[i] - (s[i - 1] if i else 0.0) for s in samples) for i in range(n)]
    totals = []
    for _ in range(runs):
        model.run(arrays)
        totals.append(model.last_gpu_ms)
    run_ms = statistics.median(totals)
    # Each timestamp write between dispatches stalls the queue a little (H100: ~0.8 us); that probe
    # cost, measured as (profiled run - plain run) / dispatches, is taken off every interval, so the
    # rows add up to a plain run.  The raw intervals stay in the rows ("raw_us").
    raw_sum = sum(per)
    probe = max(0.0, (raw_sum - run_ms) / n) if n and run_ms else 0.0
    fixed = [max(ms - probe, 0.0) for ms in per]
    rows = []
    total = sum(fixed) or 1e-12
    # a batch-native bundle's tensors and work estimates hold max_batch items, a replicated one's one item
    scale = items / model.max_batch if iospec.batch_native(b) else items
    for i, (d, ms, raw) in enumerate(zip(b.dispatches, fixed, per)):
        nbytes = sum(b.tensors[t].nbytes for t in d.bindings) * scale
        rows.append({"index": i, "op": d.label, "shader": b.shaders[d.shader].name,
                     "shapes": [list(b.tensors[t].shape) for t in d.bindings], "us": ms * 1e3, "raw_us": raw * 1e3,
                     "percent": 100 * ms / total, "gb_per_s": nbytes / (ms * 1e-3) / 1e9 if ms > 0 else None,
                     "gflop_per_s": d.flops * scale / (ms * 1e-3) / 1e9 if ms > 0 and d.flops else None})
    recorded = n if iospec.batch_native(b) or items == 1 else n * items
    groups = {}
    for r in rows:                          # where the time goes, per shader (e.g. a decode step's FCs vs attention)
        g = groups.setdefault(r["shader"], {"shader": r["shader"], "dispatches": 0, "us": 0.0})
        g["dispatches"] += 1
        g["us"] += r["us"]
    by_shader = sorted(({**g, "percent": 100 * g["us"] / (total * 1e3)} for g in groups.values()), key=lambda g: -g["us"])
    return {"device": model.device.name, "signature": b.signature or None, "dispatches": n, "items": items, "recorded_dispatches": recorded, "sum_dispatch_ms": sum(fixed), "raw_sum_dispatch_ms": raw_sum,
            "probe_us": probe * 1e3, "run_gpu_ms": run_ms, "rows": sorted(rows, key=lambda r: -r["us"]), "by_shader": by_shader}
