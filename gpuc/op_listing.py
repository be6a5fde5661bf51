"""`gpuc ops`: every builtin of the TFLite schema, and every custom op gpuc knows, with its status.

A status is "GPU" (a GPU kernel runs it; dtypes it does not take go to the CPU where a CPU kernel
exists), "CPU" (only runtime/cpu_ops.py's numpy kernel runs it) or "refused" (with the reason).  It
is read off the op registry (compiler/ops/__init__.py: REGISTRY, FACTS, REFUSED, HANDLED), the CPU
kernels (runtime/cpu_ops.py) and the program structure the compiler lowers itself (control flow,
resource variables); nothing here names an op.  scripts/gen_op_table.py writes its markdown table
from `listing()`.
"""
from __future__ import annotations

GPU, CPU, REFUSED = "GPU", "CPU", "refused"
NOT_YET = "no GPU or CPU kernel in gpuc yet"


def _structure() -> dict:
    """Program-structure ops the compiler lowers itself -> what becomes of them."""
    from gpuc.compiler.control_flow import CONTROL_OPS
    from gpuc.compiler.passes.variables import VAR_OPS
    out = {op: "control flow: its subgraphs run on the GPU between jumps; the host reads the condition"
           for op in CONTROL_OPS}
    out.update({op: "resource variables: persistent device tensors (an init subgraph is evaluated at compile time)"
                for op in VAR_OPS})
    return out


def _entry(op: str, structure: dict, seen=()) -> dict:
    from gpuc.compiler import ops
    from gpuc.runtime.cpu_ops import CPU_OPS
    d = ops.FACTS.get(op)
    cpu = d.cpu if d is not None and isinstance(d.cpu, str) else (op if op in CPU_OPS else None)
    if op in ops.REGISTRY:
        r = ops.REGISTRY[op]
        return {"op": op, "status": GPU, "dtypes": sorted(r.dtypes), "cpu_fallback": cpu is not None,
                "note": r.summary}
    if cpu is not None:
        return {"op": op, "status": CPU, "note": CPU_OPS[cpu].summary if cpu in CPU_OPS else ""}
    if op in ops.HANDLED and op not in seen:
        how, runs_as, dtypes = ops.HANDLED[op]
        if runs_as is None:
            return {"op": op, "status": GPU, "note": how}
        e = dict(_entry(runs_as, structure, seen + (op,)), op=op)
        if dtypes and "dtypes" in e:
            e["dtypes"] = sorted(set(e["dtypes"]) & set(dtypes))
        e["note"] = how if e["status"] != REFUSED else e.get("reason", "")
        return e
    if op in structure:
        return {"op": op, "status": GPU, "note": structure[op]}
    return {"op": op, "status": REFUSED, "reason": ops.REFUSED.get(op, NOT_YET)}


def listing() -> dict:
    """{"builtins": [...], "custom": [...], "counts": {status: n}} (builtins in schema order)."""
    from gpuc.compiler import ops
    from gpuc.compiler.frontend.tflite_schema import ENUMS
    from gpuc.runtime.cpu_ops import CPU_OPS
    structure = _structure()
    names = sorted(ENUMS["BuiltinOperator"], key=lambda n: ENUMS["BuiltinOperator"][n])
    builtins = [_entry(n, structure) for n in names]
    custom_names = sorted({n for n in list(ops.FACTS) + list(CPU_OPS) + list(ops.REFUSED) if n.startswith("CUSTOM:")})
    custom = [_entry(n, structure) for n in custom_names]
    counts = {s: sum(e["status"] == s for e in builtins) for s in (GPU, CPU, REFUSED)}
    return {"builtins": builtins, "custom": custom, "counts": counts}


def lines(data: dict) -> list[str]:
    """The plain-text listing of `listing()`."""
    out = []
    for title, rows in (("builtins", data["builtins"]), ("custom ops", data["custom"])):
        out.append(f"{title}:")
        for e in rows:
            detail = ",".join(e.get("dtypes", [])) if e["status"] == GPU else ""
            text = e.get("reason") or e.get("note") or ""
            out.append(f"  {e['op']:<34} {e['status']:<8} {detail:<28} {text}".rstrip())
    c = data["counts"]
    out.append(f"{len(data['builtins'])} builtins: {c[GPU]} GPU, {c[CPU]} CPU, {c[REFUSED]} refused")
    return out


def markdown(data: dict) -> str:
    """The op table as markdown (scripts/gen_op_table.py)."""
    def cell(s: str) -> str:
        return str(s).replace("|", "\\|").replace("\n", " ")
    rows = ["| op | status | dtypes (GPU) | note / reason |", "|---|---|---|---|"]
    for e in data["builtins"] + data["custom"]:
        dt = ", ".join(e.get("dtypes", [])) if e["status"] == GPU else ""
        if e["status"] == GPU and e.get("cpu_fallback"):
            dt += " (others: CPU)"
        rows.append(f"| {e['op']} | {e['status']} | {cell(dt)} | {cell(e.get('reason') or e.get('note') or '')} |")
    c = data["counts"]
    head = (f"{len(data['builtins'])} builtins of the schema: {c[GPU]} on the GPU, {c[CPU]} on the CPU only, "
            f"{c[REFUSED]} refused (with the reason); {len(data['custom'])} custom ops.")
    return head + "\n\n" + "\n".join(rows) + "\n"
