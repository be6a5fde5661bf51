"""`gpuc inspect`: a model's ops with their support status, or a bundle's contents."""
from __future__ import annotations

from collections import Counter

from gpuc.runtime import read_bundle_file


PRECISION = {"float32": "fp32", "float16": "fp16"}


def precision(t) -> str:
    """A tensor's storage precision: fp32 / fp16 / int8 ... ("+q" marks quantized I/O)."""
    p = PRECISION.get(t.dtype, t.dtype)
    return p + "+q" if t.quant is not None and t.dtype in ("int8", "uint8", "int16") else p


def inspect_bundle(data: bytes):
    from gpuc.runtime.bundle import WEIGHTS, read_bundle
    b = read_bundle(data)
    ts = b.tensors
    from gpuc.runtime.bundle import GPU, HOST, STEP_KINDS
    io = {i: "input" for i in b.inputs} | {i: "output" for i in b.outputs}
    tensor_list = [{"index": i, "name": t.name, "shape": list(t.shape), "dtype": t.dtype, "precision": precision(t),
                    "memory": "weights" if t.memory == WEIGHTS else "arena", "bytes": t.nbytes,
                    "role": io.get(i, "const" if t.memory == WEIGHTS else "activation")} for i, t in enumerate(ts)]
    by_prec = Counter(x["precision"] for x in tensor_list)
    rep = {"kind": "bundle", "model": b.model_name, "format_version": b.format_version,
           "compiler_version": b.compiler_version, "fingerprint": b.fingerprint, "options": b.options,
           "dispatches": len(b.dispatches), "shaders": len(b.shaders), "arena_bytes": b.arena_bytes,
           "weights_bytes": int(b.weights.nbytes),
           **({"max_batch": b.options["max_batch"], "batch_native": bool(b.options.get("batch_native"))}
              if b.options.get("max_batch", 1) > 1 else {}),
           **{k: v for k, v in b.stats.items() if k not in ("dispatches",)},
           "inputs": [{"name": ts[i].name, "shape": list(ts[i].shape), "dtype": ts[i].dtype, "quant": ts[i].quant,
                       "precision": precision(ts[i])} for i in b.inputs],
           "outputs": [{"name": ts[i].name, "shape": list(ts[i].shape), "dtype": ts[i].dtype, "quant": ts[i].quant,
                        "precision": precision(ts[i])} for i in b.outputs],
           "precision": b.options.get("precision", "fp32"), "fp32_fallback": bool(b.fallback),
           "tensor_precisions": dict(by_prec), "tensors": tensor_list,
           "program": [{"kind": STEP_KINDS[s.kind], **({"dispatches": s.count} if s.kind == GPU else
                                                       {"op": s.op, "label": s.label} if s.kind == HOST else
                                                       {"target": s.target})} for s in b.steps],
           "dispatch_list": [{"label": d.label, "shader": b.shaders[d.shader].name, "groups": list(d.groups),
                              "shapes": [list(ts[t].shape) for t in d.bindings],
                              "precisions": [precision(ts[t]) for t in d.bindings],
                              "variants": [v.name for v in b.variants if v.dispatch == j]}
                             for j, d in enumerate(b.dispatches)],
           "variants": [{"dispatch": v.dispatch, "name": v.name, "shader": b.shaders[v.shader].name,
                         "groups": list(v.groups), "requires": v.requires} for v in b.variants],
           "run_time_checks": [{"op": c.op, "operator": c.operator, "tensor": c.tensor, "bounds": c.bounds}
                               for c in b.checks]}
    lines = [f"bundle {b.model_name!r}: format v{b.format_version}, gpuc {b.compiler_version}, "
             f"fingerprint {b.fingerprint[:16]}",
             f"dispatches {len(b.dispatches)}, shaders {len(b.shaders)}, arena {b.arena_bytes} B, "
             f"weights {b.weights.nbytes} B"
             + ((f"; batch 1..{b.options['max_batch']} (batch-native: each dispatch computes the items)"
                 if b.options.get("batch_native") else
                 f"; batch 1..{b.options['max_batch']} replicated per item, not batch-native (the batch-1 "
                 f"program runs once per item, one arena each): {b.stats.get('batch_refusal')}")
                if b.options.get("max_batch", 1) > 1 else "")]
    if b.checks:                         # kernels that fail the run where LiteRT's invoke fails (runtime/status.py)
        lines.append("run-time checks: " + ", ".join(f"{c.op} #{c.operator} ({c.tensor!r} within {c.bounds})"
                                                     for c in b.checks[:8]) + (" ..." if len(b.checks) > 8 else ""))
    for sig, st in (b.stats.get("signatures") or {}).items():     # multi-signature bundles (compiler/signatures.py)
        io = " ".join(f"{k}={[ts_name for ts_name in _io_names(b, sig, k)]}" for k in ("inputs", "outputs"))
        derived = (f" (derived from {st['derived_from']!r}: feeds its argmax back as the next token, on the device)"
                   if st.get("derived_from") else "")
        lines.append(f"signature {sig!r}{' (this program, below)' if sig == b.signature else ''}{derived}: "
                     f"{st.get('dispatches')} dispatches, cpu_nodes {st.get('cpu_nodes')}, {io}, "
                     f"state {st.get('state') or []}")
    dyn = b.options.get("dynamic_dims")
    if dyn:                              # --dynamic off the batch axis (runtime/dynamic.py)
        rep["dynamic_dims"] = [{"input": ts[b.inputs[i]].name, "axis": a, "max": m} for i, a, m, _ in dyn["dims"]]
        for k, idx in (("inputs", b.inputs), ("outputs", b.outputs)):
            for t, i in zip(rep[k], idx):
                t["dynamic_axes"] = [d for d, e in enumerate(dyn["shapes"].get(str(i), [])) if not isinstance(e, int)]
        lines.append("dynamic dims: " + ", ".join(f"{d['input']}:{d['axis']} in 1..{d['max']}"
                                                  for d in rep["dynamic_dims"])
                     + " (sizes pushed per run; shapes below at the bound, * marks a dynamic axis)")
        if b.stats.get("dynamic_skipped_passes"):
            lines.append(f"passes skipped for the dynamic dims: {len(b.stats['dynamic_skipped_passes'])}")
    fb = " (fp32 fallback program included)" if b.fallback else ""
    lines.append(f"precision {rep['precision']}{fb}; tensors: "
                 + ", ".join(f"{n} {p}" for p, n in sorted(by_prec.items())))
    for k in ("inputs", "outputs"):
        for t in rep[k]:
            q = f" quant scale={t['quant']['scale'][:4]} zero_point={t['quant']['zero_point'][:4]}" if t["quant"] else ""
            shape = t["shape"] if not t.get("dynamic_axes") else \
                "[" + ", ".join(f"{n}*" if d in t["dynamic_axes"] else str(n) for d, n in enumerate(t["shape"])) + "]"
            lines.append(f"{k[:-1]:>6}: {t['name']} {shape} {t['dtype']} ({t['precision']}){q}")
    if b.variants:                       # kernel variants (runtime/variants.py), chosen at load
        reqs = {v.name: v.requires for v in b.variants}
        lines.append("kernel variants: " + "; ".join(f"{n} x{c} (needs {reqs[n]})" for n, c in
                                                     sorted(Counter(v.name for v in b.variants).items())))
    if b.steps:
        lines.append(f"program: {len(b.steps)} steps, {b.stats.get('cpu_nodes', 0)} CPU node(s), "
                     f"{b.stats.get('host_round_trips', 0)} host round trip(s): "
                     + " ".join(f"[{s['kind']}:{s.get('op') or s.get('dispatches', s.get('target'))}]" for s in rep["program"]))
    lines.append(f"{'#':>4}  {'shader':<16} {'groups':<16} op / shapes:precision (output first)")
    for i, d in enumerate(rep["dispatch_list"]):
        shp = ", ".join(f"{s}:{p}" for s, p in zip(d["shapes"], d["precisions"]))
        alt = f" (+{','.join(d['variants'])})" if d["variants"] else ""
        lines.append(f"{i:>4}  {d['shader']:<16} {str(d['groups']):<16} {d['label']}{alt}  [{shp}]")
    lines.append(f"{'#':>4}  {'precision':<9} {'memory':<8} {'role':<10} {'bytes':>10}  shape name")
    for x in tensor_list:
        lines.append(f"{x['index']:>4}  {x['precision']:<9} {x['memory']:<8} {x['role']:<10} {x['bytes']:>10}  "
                     f"{x['shape']} {x['name'][:80]}")
    return rep, "\n".join(lines)


def _io_names(b, sig: str, side: str) -> list:
    """A signature's input or output names (--signature NAME of gpuc run)."""
    sb = b if sig == b.signature else next((x for x in b.signatures if x.signature == sig), None)
    return [] if sb is None else [sb.tensors[i].name for i in getattr(sb, side)]


def inspect_model(data: bytes, name: str):
    from gpuc.compiler import ops
    from gpuc.compiler.frontend.importer import load_tflite
    from gpuc.compiler.partition import cpu_reason
    from gpuc.compiler.passes.fold import foldable
    from gpuc.compiler.control_flow import CONTROL_OPS
    from gpuc.compiler.passes.variables import VAR_OPS
    m = load_tflite(data)
    rep = {"kind": "tflite", "model": name, "subgraphs": []}
    split = _split(data)
    placed = split.pop("placement", None)       # {subgraph: {index: (device, why)}} after variables and passes
    lines = []
    for gi, g in enumerate(m.subgraphs):
        nodes = []
        where = None if placed is None else placed.get(gi)
        for n in g.nodes:
            folded = foldable(g, n)
            state = n.op in VAR_OPS
            if where is not None:
                device, reason = where.get(n.index, ("state" if state else "fold" if folded else "fused", None))
            else:
                reason = None if folded or state or n.op in CONTROL_OPS else ops.unsupported_reason(n, g)
                device = "fold" if folded else "state" if state else "ctrl" if n.op in CONTROL_OPS else \
                    "gpu" if reason is None else "cpu" if cpu_reason(n, g) is None else None
            reason = None if device in ("fold", "state", "fused", "ctrl", "gpu") else reason
            nodes.append({"index": n.index, "op": n.op, "version": n.version, "supported": device is not None,
                          "folded": folded, "device": device,
                          "reason": reason, "inputs": [list(g.t(i).shape) if i >= 0 else None for i in n.inputs],
                          "outputs": [list(g.t(o).shape) for o in n.outputs]})
        n_gpu = sum(x["device"] == "gpu" for x in nodes)
        n_cpu = sum(x["device"] == "cpu" for x in nodes)
        rep["subgraphs"].append({"index": gi, "name": g.name, "ops": len(nodes), "supported": n_gpu,
                                 "on_cpu": n_cpu, "nodes": nodes})
        lines.append(f"subgraph {gi} {g.name!r}: {len(nodes)} ops, {n_gpu} on the GPU, {n_cpu} on the CPU")
        for x in nodes:
            mark = {"fold": "fold ", "state": "state", "gpu": "ok   ", "cpu": "cpu  ", "fused": "fused",
                    "ctrl": "ctrl "}.get(x["device"], "NO   ")
            why = f"  <- {x['reason']}" if x["reason"] else ""
            lines.append(f"  {mark}#{x['index']:<4} {x['op']:<24} v{x['version']} {x['inputs']} -> {x['outputs']}{why}")
        hist = Counter(x["op"] for x in nodes if not x["supported"])
        if hist:
            lines.append("  unsupported: " + ", ".join(f"{k} x{v}" for k, v in hist.most_common()))
    rep.update(split)
    rep["fully_supported"] = rep.get("cpu_nodes") == 0
    lines.append(f"program: {rep['gpu_nodes']} nodes on the GPU, {rep['cpu_nodes']} on the CPU, "
                 f"{rep['host_round_trips']} host round trip(s) per run (a loop's counted once)" if "error" not in rep
                 else f"program: cannot compile: {rep['error']}")
    return rep, "\n".join(lines)


def _split(data: bytes) -> dict:
    """The compiler's GPU/CPU placement (after variables and passes) of the main graph and of the
    subgraphs WHILE / IF call, lowered as in a compile but without generating code."""
    from gpuc.compiler.control_flow import CONTROL_OPS
    from gpuc.compiler.ir import HOST, JUMP
    from gpuc.compiler.prepare import prepare
    from gpuc.errors import GpucError
    try:
        p = prepare(data, warn=False)
    except GpucError as e:
        return {"error": str(e)}
    except (ValueError, KeyError, IndexError, TypeError) as e:     # as a compile would report it
        return {"error": f"cannot lower the model ({type(e).__name__}: {e})"}
    items = p.program
    hosts = [k for k in items if k.kind == HOST]
    trips = sum(1 for j, k in enumerate(items) if (k.kind == HOST and (j == 0 or items[j - 1].kind != HOST))
                or (k.kind == JUMP and k.cond is not None))

    def where(g, cpu):
        return {n.index: ("cpu", cpu[id(n)]) if id(n) in cpu else ("ctrl" if n.op in CONTROL_OPS else "gpu", None)
                for n in g.nodes}
    placement = {0: where(p.graph, p.front.cpu)}
    placement.update({gi: where(*prep) for gi, prep in p.lowering.prepared.items() if prep is not None})
    return {"gpu_nodes": p.lowering.gpu_nodes, "cpu_nodes": len(hosts), "host_round_trips": trips,
            "cpu_ops": [k.label for k in hosts], "placement": placement}


def inspect_path(path: str):
    data = read_bundle_file(path)
    if data[4:8] == b"GPUB":
        return inspect_bundle(data)
    import os
    from gpuc import require_compiler
    require_compiler("gpuc inspect of a model")
    return inspect_model(data, os.path.basename(path))
