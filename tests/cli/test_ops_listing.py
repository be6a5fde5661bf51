"""`gpuc ops` lists every builtin of the schema and the custom ops gpuc knows, each GPU / CPU / refused
with a reason (gpuc/op_listing.py), and scripts/gen_op_table.py renders it as a markdown table."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gpuc.compiler import ops
from gpuc.compiler.frontend.tflite_schema import ENUMS
from gpuc.op_listing import CPU, GPU, REFUSED, listing

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args) -> str:
    r = subprocess.run([sys.executable, "-m", "gpuc", "ops", *args], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_json_lists_every_builtin_with_a_status():
    d = json.loads(_cli("--json"))
    names = [e["op"] for e in d["builtins"]]
    assert sorted(names) == sorted(ENUMS["BuiltinOperator"]) and len(names) >= 210
    for e in d["builtins"] + d["custom"]:
        assert e["status"] in (GPU, CPU, REFUSED), e
        if e["status"] == REFUSED:
            assert e["reason"].strip(), e
        if e["status"] == GPU and e["op"] in ops.REGISTRY:
            assert e["dtypes"] == sorted(ops.REGISTRY[e["op"]].dtypes)
    assert sum(d["counts"].values()) == len(names)
    assert d["counts"] == {s: sum(e["status"] == s for e in d["builtins"]) for s in (GPU, CPU, REFUSED)}
    assert {e["op"] for e in d["custom"]} == {n for n in ops.REGISTRY if n.startswith("CUSTOM:")} | \
        {e["op"] for e in d["custom"] if e["status"] != GPU}


def test_statuses_follow_the_registry():
    by = {e["op"]: e for e in listing()["builtins"]}
    assert by["CONV_2D"]["status"] == GPU
    assert by["RFFT2D"]["status"] == CPU                     # a numpy kernel only
    assert by["ADD_N"]["status"] == GPU and "chain of ADD" in by["ADD_N"]["note"]     # (lowered at import)
    assert by["STABLEHLO_TANH"] == {"op": "STABLEHLO_TANH", "status": REFUSED,
                                    "reason": "LiteRT's interpreter does not run it"}
    assert by["STABLEHLO_ADD"]["status"] == GPU and "lowered at import to ADD" in by["STABLEHLO_ADD"]["note"]
    assert {"bool", "int32"} <= set(by["STABLEHLO_AND"]["dtypes"])   # bool lowered, integers: own kernel
    assert by["DELEGATE"]["status"] == REFUSED and "delegate" in by["DELEGATE"]["reason"]
    for op, e in by.items():
        if op in ops.REFUSED and op not in ops.REGISTRY:
            assert e["status"] == REFUSED and e["reason"] == ops.REFUSED[op]


def test_text_listing_ends_with_the_counts():
    out = _cli().splitlines()
    c = listing()["counts"]
    assert any(line.strip().startswith("STABLEHLO_TANH") and "refused" in line for line in out)
    assert f"{len(ENUMS['BuiltinOperator'])} builtins: {c[GPU]} GPU, {c[CPU]} CPU, {c[REFUSED]} refused" in out


def test_op_table_is_generated_not_kept():
    """scripts/gen_op_table.py renders a row for every builtin and custom op from the registry; README.md
    keeps no copy of it (one that adding an op would have to edit, and that goes stale)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gen_op_table
    finally:
        sys.path.pop(0)
    table = gen_op_table.render()
    data = listing()
    for e in data["builtins"] + data["custom"]:
        assert f"| {e['op']} | {e['status']} |" in table, e["op"]
    readme = (ROOT / "README.md").read_text()
    assert "| op | status |" not in readme and "scripts/gen_op_table.py" in readme
