"""`gpuc verify`: compile a model, run gpuc and LiteRT's CPU interpreter on the same inputs, compare.

With per_op=True every intermediate tensor the GPU program computes is compared with LiteRT's
(`experimental_preserve_all_tensors`), in execution order, and the first op whose output diverges
is named.  NaN matches NaN and an Inf the same signed Inf; the first op where a tensor finite in LiteRT
turns non-finite in gpuc (e.g. an fp16 storage overflow) is named too, also without per_op when an
output turned non-finite.
"""
from __future__ import annotations

import numpy as np

from gpuc import nonfinite, progress
from gpuc.errors import GpucError

TOLERANCE = {"fp32": 1e-3, "fp16": 2e-2}
# --per-op with fp16 storage: every intermediate is rounded to fp16 and the rounding accumulates
# (MobileNetV2: up to 6.3% of max|ref| inside the network while its output stays within 1%), so an
# intermediate diverges past 1e-1; a tensor turning non-finite diverges at any tolerance.
PER_OP_TOLERANCE = {"fp32": 1e-3, "fp16": 1e-1}


def _litert(data: bytes, inputs, preserve=False, builtin=True):
    """LiteRT's interpreter after invoke(): plain builtin kernels (what preserve_all_tensors can show),
    or with builtin=False the default one (XNNPACK)."""
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        raise GpucError("gpuc verify needs LiteRT as the reference: pip install ai-edge-litert") from None
    kw = {"experimental_preserve_all_tensors": True} if preserve else {}
    try:
        from ai_edge_litert.interpreter import OpResolverType
        if builtin:
            kw["experimental_op_resolver_type"] = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    except ImportError:
        pass
    it = Interpreter(model_content=data, **kw)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], x)
    it.invoke()
    return it


def compare(out, ref) -> dict:
    """gpuc's `out` against LiteRT's `ref`.  max_abs and max_rel (relative to the largest finite |ref|)
    cover the elements finite in both; an element non-finite in both the same way (NaN and NaN, or the
    same signed Inf) matches; `finiteness_mismatch` counts the elements whose finiteness differs (finite
    vs NaN vs +Inf vs -Inf), `turned_nonfinite` those of them finite in `ref`.  A shape mismatch gives
    max_rel inf and None elsewhere."""
    cplx = np.iscomplexobj(out) or np.iscomplexobj(ref)             # e.g. RFFT2D (a CPU op)
    out, ref = (np.asarray(x, np.complex128 if cplx else np.float64) for x in (out, ref))
    if out.shape != ref.shape:
        return {"max_abs": None, "max_rel": float("inf"), "finiteness_mismatch": None, "turned_nonfinite": None}
    co, cr = nonfinite.classes(out), nonfinite.classes(ref)
    both = (co == 0) & (cr == 0)
    finite_ref = np.abs(ref[cr == 0])
    diff = np.abs(out[both] - ref[both])
    max_abs = float(diff.max()) if diff.size else 0.0
    scale = max(float(finite_ref.max()) if finite_ref.size else 0.0, 1e-30)
    return {"max_abs": max_abs, "max_rel": max_abs / scale, "finiteness_mismatch": int((co != cr).sum()),
            "turned_nonfinite": int(((cr == 0) & (co != 0)).sum())}


def _passes(c: dict, tol: float) -> bool:
    """Within tol of max|ref|; an integer (quantized) output also passes within one step of its grid,
    where LiteRT's own interpreters differ (their requantization rounds products summed in another order)."""
    near = c["max_rel"] <= tol or (c.get("integer") and c["max_abs"] is not None and c["max_abs"] <= 1)
    return near and not c["finiteness_mismatch"]


def random_inputs(specs, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for s in specs:
        dt = np.dtype(s.dtype)
        if dt.kind == "f":
            out.append(rng.uniform(-1, 1, s.shape).astype(dt))
        elif dt.kind in "iu" and s.quant is not None:        # a quantized input: its whole range
            info = np.iinfo(dt)
            out.append(rng.integers(max(info.min, -128), min(info.max, 127) + 1, s.shape).astype(dt))
        elif dt.kind in "iu":           # ids, indices, lengths: small non-negative values every op accepts
            out.append(rng.integers(0, 10, s.shape).astype(dt))
        else:
            out.append(rng.integers(0, 2, s.shape).astype(dt))
    return out


def verify(model_path, inputs=None, per_op=False, device=None, precision="fp32", cast=False) -> dict:
    """The report: per output its errors and non-finite counts (gpuc's and LiteRT's); with per_op, or
    when an output is non-finite where LiteRT's is finite, the per-op walk's first op turning non-finite.
    `inputs`: a list in model order or a dict name -> array (default random), of the inputs' dtypes;
    cast=True converts values that fit (runtime/casting.py), for gpuc and LiteRT alike."""
    import gpuc
    from gpuc.compiler import read_model_bytes
    from gpuc.runtime import iospec
    data, name = read_model_bytes(model_path)
    tol = TOLERANCE[precision]
    report = {"model": name, "tolerance": tol}
    bundle = gpuc.compile(data, precision=precision)
    with gpuc.load(bundle, device=device) as m:
        prepare = iospec.cast_all if cast else iospec.ordered
        xs = random_inputs(m.inputs) if inputs is None else prepare(m.inputs, inputs)
        progress.stage(f"running on {m.device.name}")
        outs = m.run(xs)
        names = [s.name for s in m.outputs]
        fp16 = precision == "fp16" and getattr(m.device, "fp16_storage", False)     # else the fp32 fallback ran
    progress.stage("running LiteRT (the reference)")
    refs = _output_refs(data, xs)
    report["outputs"] = [_output_row(n, o, [r[k] for r in refs], tol) for k, (n, o) in enumerate(zip(names, outs))]
    report["pass"] = all(r["pass"] for r in report["outputs"])
    if per_op:
        progress.stage("per-op: every intermediate tensor, gpuc and LiteRT")
        report["per_op"] = _per_op(data, xs, device, fp16, PER_OP_TOLERANCE[precision])
        report["first_divergent_op"] = next((r["op"] for r in report["per_op"] if not r["pass"]), None)
        report["first_nonfinite_op"] = _first_nonfinite(report["per_op"])
    elif any(r["turned_nonfinite"] for r in report["outputs"]):
        try:                            # rare, and a failure anyway: name the op at the cost of a second compile
            report["first_nonfinite_op"] = _first_nonfinite(_per_op(data, xs, device, fp16, PER_OP_TOLERANCE[precision]))
        except GpucError as e:
            report["per_op_error"] = str(e).splitlines()[0]
    return report


def _output_refs(data: bytes, xs) -> list:
    """Outputs of LiteRT's builtin kernels and, where it runs, of its default interpreter (XNNPACK):
    they differ where special values meet clamps (gpuc follows XNNPACK for +-Inf under a fused
    activation, the builtin kernels clamp to +-FLT_MAX), and either is a right answer."""
    refs = []
    for builtin in (True, False):
        try:
            it = _litert(data, xs, builtin=builtin)
        except (RuntimeError, ValueError) as e:
            if builtin:
                first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                raise GpucError(f"LiteRT's CPU interpreter, the reference, cannot run this model on these inputs: "
                                f"{first}") from None
            continue
        refs.append([it.get_tensor(d["index"]) for d in it.get_output_details()])
    return refs


def _output_row(name, out, refs, tol) -> dict:
    """The comparison with the first reference `out` passes against (else with the first)."""
    integer = np.asarray(out).dtype.kind in "iu"
    rows = [{"output": name, **c, "integer": integer, "pass": _passes(dict(c, integer=integer), tol),
             "nonfinite": nonfinite.counts(out),
             "ref_nonfinite": nonfinite.counts(r)} for r in refs for c in [compare(out, r)]]
    return next((r for r in rows if r["pass"]), rows[0])


def _first_nonfinite(rows) -> dict | None:
    """The first per-op row (execution order) with elements finite in LiteRT and non-finite in gpuc."""
    row = next((r for r in rows if r["turned_nonfinite"]), None)
    return row and {"op": row["op"], "tensor": row["tensor"], "elements": row["turned_nonfinite"]}


# fusions would hide intermediates
PER_OP_DISABLED = ["eliminate_dead_nodes", "fuse_layer_norm", "fuse_softmax_chain", "fuse_attention",
                   "sink_transposes", "compose_transposes", "transpose_into_matmul", "fold_movement",
                   "fuse_activation", "fuse_add_epilogue", "reshape_as_view", "fuse_elementwise",
                   "fuse_reduce_prologue", "fuse_gemm_epilogue"]


def _per_op(data, xs, device, fp16, tol):
    """Compile with every intermediate exposed as an output; compare each with LiteRT's tensor.
    With fp16, tensors are stored as float16 where a `--precision fp16` compile stores them (the plan is
    made before the intermediates become outputs), so an fp16 overflow shows where it happens."""
    import gpuc
    from gpuc.compiler import DEFAULT_OPTIONS
    from gpuc.compiler.driver import build_bundle
    from gpuc.compiler.passes.precision import store_fp16
    from gpuc.compiler.prepare import prepare
    precision = "fp16" if fp16 else "fp32"
    p = prepare(data, dict(precision=precision, disable_passes=PER_OP_DISABLED), warn=False,
                expose_intermediates=True)          # CPU nodes run as host steps, as in a compile
    g, order, n_model = p.graph, p.front.exposed, p.source_tensors     # (LiteRT knows the model's tensors)
    store_fp16(g, p.program)
    bundle = build_bundle(g, p.program, "verify", dict(DEFAULT_OPTIONS, precision=precision), "verify", {})
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
        c = compare(outs[tid], ref)
        rows.append({"op": node.label(), "tensor": g.t(tid).name, "max_rel": c["max_rel"], "pass": _passes(c, tol),
                     "turned_nonfinite": c["turned_nonfinite"]})
    return rows
