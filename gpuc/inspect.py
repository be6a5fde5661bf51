"""`gpuc inspect`: a model's ops with their support status, or a bundle's contents."""
from __future__ import annotations

from collections import Counter

from gpuc.runtime import read_bundle_file


def inspect_bundle(data: bytes):
    from gpuc.runtime.bundle import read_bundle
    b = read_bundle(data)
    ts = b.tensors
    rep = {"kind": "bundle", "model": b.model_name, "format_version": b.format_version,
           "compiler_version": b.compiler_version, "fingerprint": b.fingerprint, "options": b.options,
           "dispatches": len(b.dispatches), "shaders": len(b.shaders), "arena_bytes": b.arena_bytes,
           "weights_bytes": int(b.weights.nbytes), **{k: v for k, v in b.stats.items() if k not in ("dispatches",)},
           "inputs": [{"name": ts[i].name, "shape": list(ts[i].shape), "dtype": ts[i].dtype, "quant": ts[i].quant}
                      for i in b.inputs],
           "outputs": [{"name": ts[i].name, "shape": list(ts[i].shape), "dtype": ts[i].dtype, "quant": ts[i].quant}
                       for i in b.outputs],
           "dispatch_list": [{"label": d.label, "shader": b.shaders[d.shader].name, "groups": list(d.groups),
                              "shapes": [list(ts[t].shape) for t in d.bindings]} for d in b.dispatches]}
    lines = [f"bundle {b.model_name!r}: format v{b.format_version}, gpuc {b.compiler_version}, "
             f"fingerprint {b.fingerprint[:16]}",
             f"dispatches {len(b.dispatches)}, shaders {len(b.shaders)}, arena {b.arena_bytes} B, "
             f"weights {b.weights.nbytes} B"]
    for k in ("inputs", "outputs"):
        for t in rep[k]:
            lines.append(f"{k[:-1]:>6}: {t['name']} {t['shape']} {t['dtype']}")
    lines.append(f"{'#':>4}  {'shader':<16} {'groups':<16} op / shapes (output first)")
    for i, d in enumerate(rep["dispatch_list"]):
        lines.append(f"{i:>4}  {d['shader']:<16} {str(d['groups']):<16} {d['label']}  {d['shapes']}")
    return rep, "\n".join(lines)


def inspect_model(data: bytes, name: str):
    from gpuc.compiler import ops
    from gpuc.compiler.frontend.importer import load_tflite
    from gpuc.compiler.passes.fold import foldable
    m = load_tflite(data)
    rep = {"kind": "tflite", "model": name, "subgraphs": []}
    lines = []
    for gi, g in enumerate(m.subgraphs):
        nodes = []
        for n in g.nodes:
            folded = foldable(g, n)
            reason = None if folded else ops.unsupported_reason(n, g)
            nodes.append({"index": n.index, "op": n.op, "version": n.version, "supported": reason is None,
                          "folded": folded,
                          "reason": reason, "inputs": [list(g.t(i).shape) if i >= 0 else None for i in n.inputs],
                          "outputs": [list(g.t(o).shape) for o in n.outputs]})
        n_ok = sum(x["supported"] for x in nodes)
        rep["subgraphs"].append({"index": gi, "name": g.name, "ops": len(nodes), "supported": n_ok, "nodes": nodes})
        lines.append(f"subgraph {gi} {g.name!r}: {len(nodes)} ops, {n_ok} supported on the GPU")
        for x in nodes:
            mark = "fold " if x["folded"] else "ok   " if x["supported"] else "NO   "
            why = "" if x["supported"] else f"  <- {x['reason']}"
            lines.append(f"  {mark}#{x['index']:<4} {x['op']:<24} v{x['version']} {x['inputs']} -> {x['outputs']}{why}")
        hist = Counter(x["op"] for x in nodes if not x["supported"])
        if hist:
            lines.append("  unsupported: " + ", ".join(f"{k} x{v}" for k, v in hist.most_common()))
    rep["fully_supported"] = all(s["supported"] == s["ops"] for s in rep["subgraphs"]) and len(m.subgraphs) == 1
    return rep, "\n".join(lines)


def inspect_path(path: str):
    data = read_bundle_file(path)
    if data[4:8] == b"GPUB":
        return inspect_bundle(data)
    import os
    return inspect_model(data, os.path.basename(path))
