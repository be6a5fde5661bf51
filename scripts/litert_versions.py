"""Write compiler/ops/litert_versions.py: the operator versions LiteRT's interpreter resolves, found by
loading a one-op model per builtin op and version 0..16 (resolution fails with "Didn't find op for builtin
opcode"; any later failure means the version resolved).

    python scripts/litert_versions.py [--check]      (--check: exit 1 if the written table differs)
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
OUT = ROOT / "compiler" / "ops" / "litert_versions.py"
SKIP = ("CUSTOM", "DELEGATE", "PLACEHOLDER_FOR_GREATER_OP_CODES")
HEAD = '''"""The operator versions LiteRT's interpreter runs: builtin op -> (lowest, highest) version its builtin op
resolver registers (LiteRT 2.3; the default resolver, XNNPACK's, resolves the same).  An operator code with a
version outside its range makes LiteRT refuse the model as it loads ("Didn't find op for builtin opcode"), and
the importer refuses it the same way (compiler/frontend/importer.py).  Ops LiteRT has no kernel for (most
StableHLO ops, CALL, CONCAT_EMBEDDINGS) are not listed: gpuc's own lowerings take their versions.

Written by scripts/litert_versions.py (one one-op model per op and version); do not edit.
"""
from __future__ import annotations

'''


def resolved(op: str, version: int) -> bool:
    from helpers.builder import ModelBuilder
    from helpers.litert import make_interpreter
    mb = ModelBuilder()
    x = mb.input("x", [1], "float32")
    y = mb.tensor("y", [1], "float32")
    mb.op(op, [x], [y], version=version)
    mb.output(y)
    try:
        make_interpreter(mb.finish())
    except Exception as e:  # noqa: BLE001
        return "Didn't find op" not in str(e)
    return True


def table() -> dict[str, tuple[int, int]]:
    from helpers.builder import ENUMS
    out = {}
    for op in sorted(ENUMS["BuiltinOperator"]):
        if op in SKIP:
            continue
        ok = [v for v in range(0, 17) if resolved(op, v)]
        if ok:
            if ok != list(range(ok[0], ok[-1] + 1)):
                raise SystemExit(f"{op}: versions {ok} are not one range")
            out[op] = (ok[0], ok[-1])
    return out


def source(t: dict) -> str:
    lines, cur = [], "   "
    for op, (lo, hi) in t.items():
        item = f' "{op}": ({lo}, {hi}),'
        if len(cur) + len(item) > 116:
            lines.append(cur)
            cur = "   "
        cur += item
    lines.append(cur)
    return HEAD + "VERSIONS: dict[str, tuple[int, int]] = {\n" + "\n".join(lines) + "\n}\n"


def main() -> int:
    text = source(table())
    if "--check" in sys.argv:
        same = OUT.exists() and OUT.read_text() == text
        print("litert_versions.py is current" if same else "litert_versions.py differs from LiteRT's resolver")
        return 0 if same else 1
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
