"""`gpuc verify`: compile a model, run gpuc and LiteRT's CPU interpreter on the same inputs, compare.

With per_op=True every intermediate tensor the GPU program computes is compared with LiteRT's
(`experimental_preserve_all_tensors`), in execution order, and the first op whose output diverges
is named.
"""
from __future__ import annotations

import numpy as np

from gpuc.errors import GpucError

TOLERANCE = {"fp32": 1e-3, "fp16": 2e-2}


def _litert(data: bytes, inputs, preserve=False):
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        raise GpucError("gpuc verify needs LiteRT as the reference: pip install ai-edge-litert") from None
    kw = {"experimental_preserve_all_tensors": True} if preserve else {}
    try:
        from ai_edge_litert.interpreter import OpResolverType
        kw["experimental_op_resolver_type"] = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    except ImportError:
        pass
    it = Interpreter(model_content=data, **kw)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], x)
    it.invoke()
    return it


def rel_err(out, ref) -> float:
    cplx = np.iscomplexobj(out) or np.iscomplexobj(ref)             # e.g. RFFT2D (a CPU op)
    out, ref = (np.asarray(x, np.complex128 if cplx else np.float64) for x in (out, ref))
    if out.shape != ref.shape:
        return float("inf")
    scale = max(float(np.abs(ref).max()) if ref.size else 0.0, 1e-30)
    return float(np.abs(out - ref).max() / scale) if ref.size else 0.0


def random_inputs(specs, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for s in specs:
        dt = np.dtype(s.dtype)
        if dt.kind == "f":
            out.append(rng.uniform(-1, 1, s.shape).astype(dt))
        elif dt.kind in "iu":
            info = np.iinfo(dt)
            out.append(rng.integers(max(info.min, -128), min(info.max, 127) + 1, s.shape).astype(dt))
        else:
            out.append(rng.integers(0, 2, s.shape).astype(dt))
    return out


def verify(model_path, inputs=None, per_op=False, device=None, precision="fp32") -> dict:
    import gpuc
    from gpuc.compiler import read_model_bytes
    data, name = read_model_bytes(model_path)
    tol = TOLERANCE[precision]
    report = {"model": name, "tolerance": tol}
    with gpuc.load(gpuc.compile(data, precision=precision), device=device) as m:
        xs = inputs if inputs is not None else random_inputs(m.inputs)
        outs = m.run(xs)
        names = [s.name for s in m.outputs]
    it = _litert(data, xs)
    refs = [it.get_tensor(d["index"]) for d in it.get_output_details()]
    rows = []
    for n, o, r in zip(names, outs, refs):
        e = rel_err(o, r)
        rows.append({"output": n, "max_abs": float(np.abs(o.astype(np.float64) - r).max()) if o.shape == r.shape else None,
                     "max_rel": e, "pass": e <= tol})
    report["outputs"] = rows
    report["pass"] = all(r["pass"] for r in rows)
    if per_op:
        report["per_op"] = _per_op(data, xs, device, precision, tol)
        report["first_divergent_op"] = next((r["op"] for r in report["per_op"] if not r["pass"]), None)
    return report


def _per_op(data, xs, device, precision, tol):
    """Compile with every intermediate exposed as an output; compare each with LiteRT's tensor."""
    import gpuc
    from gpuc.compiler import DEFAULT_OPTIONS
    from gpuc.compiler import partition
    from gpuc.compiler.control_flow import Context
    from gpuc.compiler.driver import _unsupported_message, build_bundle, lower_graph, lower_nodes
    from gpuc.compiler.frontend.importer import load_tflite
    from gpuc.compiler.passes import run_passes
    from gpuc.compiler.passes.variables import resolve_variables
    model = load_tflite(data)
    g = model.main
    n_model = len(g.tensors)             # tensors LiteRT knows (passes add more)
    resolve_variables(model, g)
    run_passes(g, ["eliminate_dead_nodes", "fuse_activation", "fuse_residual_add", "reshape_as_view",
                   "fuse_elementwise", "fuse_reduce_prologue"])      # (fusions would hide intermediates)
    order = [(n, o) for n in g.nodes for o in n.outputs if o not in g.inputs]
    g.outputs = list(dict.fromkeys(g.outputs + [o for _, o in order]))
    cpu, bad = partition.place(g, warn=False)          # CPU nodes run as host steps, as in a compile
    if bad:
        raise GpucError("per-op verification: " + _unsupported_message(bad))
    opts = dict(DEFAULT_OPTIONS, precision=precision)
    bundle = build_bundle(g, lower_graph(g, cpu, Context(model, (), lower_nodes)), "verify", opts, "verify", {})
    with gpuc.load(bundle, device=device) as m:
        outs = dict(zip(g.outputs, m.run(xs)))
    it = _litert(data, xs, preserve=True)
    rows = []
    for node, tid in order:
        if tid >= n_model:
            continue
        try:
            ref = it.get_tensor(tid)
        except ValueError:
            continue
        q = g.t(tid).quant
        if ref.dtype in (np.int8, np.uint8) and outs[tid].dtype == np.float32 and q is not None and q.scale.size == 1:
            ref = (ref.astype(np.float32) - np.float32(q.zero_point[0])) * np.float32(q.scale[0])   # simulated int8
        e = rel_err(outs[tid], ref)
        rows.append({"op": node.label(), "tensor": g.t(tid).name, "max_rel": e, "pass": e <= tol})
    return rows
