"""Layers point one way (issue 27, build item 5), checked on the package's import graph.

The graph is read from the source, not from an import: every `import` / `from ... import` in
compiler/, runtime/ and gpuc/ (those inside functions too), resolved through pyproject.toml's
package-dir mapping, which makes the three top-level folders one package `gpuc` (`gpuc.compiler.x`
is compiler/x.py).  Generic import-graph tools (grimp, import-linter) find a package's modules by
walking its one folder, so they see gpuc/ alone; this reader follows the mapping, and checks that it
resolves every gpuc import to a file.  `python tests/compiler/test_layers.py` prints what it found.

Contracts:
- the compiler core (the IR, symbolic sizes, shape propagation, dynamic dims, the passes) imports no
  code generator (gpuc.compiler.codegen);
- the runtime imports nothing of the compiler (a run-only install lacks it; tests/runtime/test_isolation.py
  checks the same at run time);
- no import cycle: each listed exception names its modules and why;
- no private name (`_x`) is imported across modules (`from m import _x`, or `m._x` on an imported module).
"""
from __future__ import annotations

import ast
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CORE = ("gpuc.compiler.ir", "gpuc.compiler.symbolic", "gpuc.compiler.sym_scope", "gpuc.compiler.glsl_literal",
        "gpuc.compiler.shapes", "gpuc.compiler.sym_shapes", "gpuc.compiler.dynamic", "gpuc.compiler.guards",
        "gpuc.compiler.passes")         # (a package: every module under it)
CODEGEN = "gpuc.compiler.codegen"
# core module -> why it may import codegen (the list only shrinks)
CORE_CODEGEN_EXCEPTIONS = {
    "gpuc.compiler.passes.quant": "apply_fake_quant runs on a node's lowering: it appends requantizing "
                                  "codegen Kernels (a lowering step that sits with the quantization pass)",
}
# import cycles allowed for now: the modules of each, and why (the list only shrinks)
CYCLE_EXCEPTIONS: list[tuple[frozenset, str]] = []
# (importing module, module, private name) -> why (the list only shrinks)
PRIVATE_EXCEPTIONS: dict[tuple, str] = {}


@dataclass
class Graph:
    files: dict = field(default_factory=dict)       # module -> its file
    edges: dict = field(default_factory=dict)       # module -> {module it imports: first line}
    private: list = field(default_factory=list)     # (module, imported module, name, line)
    unresolved: list = field(default_factory=list)  # (module, import text, line): no such gpuc module


def _modules() -> dict:
    """Module name -> file, for every .py file the package-dir mapping puts in the package."""
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    files = {}
    for pkg, folder in sorted(mapping.items(), key=lambda kv: -kv[0].count(".")):   # the most specific first
        for f in sorted((ROOT / folder).rglob("*.py")):
            parts = list(f.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            files.setdefault(".".join([pkg, *parts]), f)
    return files


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str | None:
    if not node.level:
        return node.module
    base = module.split(".")[: len(module.split(".")) - (0 if is_package else 1)]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def build() -> Graph:
    g = Graph(files=_modules())
    for mod, f in g.files.items():
        tree = ast.parse(f.read_text(), str(f))
        is_package = f.name == "__init__.py"
        edges = g.edges.setdefault(mod, {})
        aliases = {}                         # local name -> the gpuc module it stands for

        def edge(target, line):
            if target != mod:
                edges.setdefault(target, line)

        for n in ast.walk(tree):
            if isinstance(n, ast.Import):
                for a in n.names:
                    if a.name.split(".")[0] != "gpuc":
                        continue
                    if a.name not in g.files:
                        g.unresolved.append((mod, a.name, n.lineno))
                        continue
                    edge(a.name, n.lineno)
                    if a.asname:
                        aliases[a.asname] = a.name
            elif isinstance(n, ast.ImportFrom):
                src = _absolute(mod, is_package, n)
                if not src or src.split(".")[0] != "gpuc":
                    continue
                if src not in g.files:
                    g.unresolved.append((mod, src, n.lineno))
                    continue
                for a in n.names:
                    sub = f"{src}.{a.name}"
                    if sub in g.files:                      # a module of a package
                        edge(sub, n.lineno)
                        aliases[a.asname or a.name] = sub
                        continue
                    edge(src, n.lineno)
                    if a.name.startswith("_") and not a.name.startswith("__"):
                        g.private.append((mod, src, a.name, n.lineno))
        for n in ast.walk(tree):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in aliases \
                    and n.attr.startswith("_") and not n.attr.startswith("__"):
                g.private.append((mod, aliases[n.value.id], n.attr, n.lineno))
    return g


def cycles(g: Graph) -> list[set]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in g.edges:
        if root in index:
            continue
        work = [(root, iter(sorted(g.edges.get(root, ()))))]
        index[root] = low[root] = counter[0]; counter[0] += 1
        stack.append(root); on.add(root)
        while work:
            v, it = work[-1]
            w = next((w for w in it if w in g.files), None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]; counter[0] += 1
                    stack.append(w); on.add(w)
                    work.append((w, iter(sorted(g.edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                scc = set()
                while True:
                    w = stack.pop(); on.discard(w); scc.add(w)
                    if w == v:
                        break
                if len(scc) > 1:
                    out.append(scc)
    return out


def _in(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


GRAPH = build()


def test_the_reader_follows_the_mapping():
    """Every gpuc import resolves to a file through the package-dir mapping, and the graph holds the
    edges a reader expects (a relative import included)."""
    assert not GRAPH.unresolved, f"gpuc imports that name no module: {GRAPH.unresolved}"
    assert GRAPH.files["gpuc.compiler.ir"] == ROOT / "compiler" / "ir.py"
    assert GRAPH.files["gpuc.runtime.device"] == ROOT / "runtime" / "device.py"
    assert "gpuc.compiler.symbolic" in GRAPH.edges["gpuc.compiler.ir"]
    assert "gpuc.runtime.bundle_format" in GRAPH.edges["gpuc.runtime.bundle"]
    node = ast.parse("from ..runtime import bundle").body[0]
    assert _absolute("gpuc.compiler.ir", False, node) == "gpuc.runtime"


def test_core_imports_no_codegen():
    bad = {(m, t): line for m, ts in GRAPH.edges.items() if any(_in(m, c) for c in CORE)
           and m not in CORE_CODEGEN_EXCEPTIONS for t, line in ts.items() if _in(t, CODEGEN)}
    assert not bad, f"the compiler core imports codegen (module, codegen module): line: {bad}"
    assert all(any(_in(t, CODEGEN) for t in GRAPH.edges.get(m, ())) for m in CORE_CODEGEN_EXCEPTIONS), \
        "a stale exception: that module no longer imports codegen"


def test_runtime_imports_no_compiler():
    bad = {(m, t): line for m, ts in GRAPH.edges.items() if _in(m, "gpuc.runtime")
           for t, line in ts.items() if _in(t, "gpuc.compiler")}
    assert not bad, f"the runtime imports the compiler: {bad}"


def test_no_import_cycles():
    found = cycles(GRAPH)
    unexplained = [sorted(c) for c in found if not any(c <= allowed for allowed, _ in CYCLE_EXCEPTIONS)]
    assert not unexplained, "import cycles: " + "; ".join(" <-> ".join(c) for c in unexplained)
    assert all(any(c & allowed for c in found) for allowed, _ in CYCLE_EXCEPTIONS), "a stale cycle exception"


def test_no_private_names_across_modules():
    bad = [p for p in GRAPH.private if p[:3] not in PRIVATE_EXCEPTIONS]
    assert not bad, f"private names imported across modules (module, from, name, line): {bad}"


def test_the_checks_can_fail():
    g = Graph(files={"gpuc.a": None, "gpuc.b": None, "gpuc.c": None},
              edges={"gpuc.a": {"gpuc.b": 1}, "gpuc.b": {"gpuc.c": 1}, "gpuc.c": {"gpuc.a": 1}})
    assert cycles(g) == [{"gpuc.a", "gpuc.b", "gpuc.c"}]
    g.edges["gpuc.c"] = {}
    assert cycles(g) == []


if __name__ == "__main__":        # a summary of the graph: python tests/compiler/test_layers.py
    n_edges = sum(len(e) for e in GRAPH.edges.values())
    print(f"{len(GRAPH.files)} modules, {n_edges} import edges, {len(GRAPH.unresolved)} unresolved")
    for c in cycles(GRAPH):
        print("cycle:", " ".join(sorted(c)))
    for p in GRAPH.private:
        print("private import:", *p)
    for m in sys.argv[1:]:
        print(m, "imports", sorted(GRAPH.edges.get(m, ())))


def test_tests_never_import_each_other():
    """A test module imports helpers (tests/helpers), never another test module: each runs alone, on
    any xdist worker, in any order."""
    import re
    tests = Path(__file__).resolve().parents[1]
    bad = []
    for f in sorted(tests.rglob("test_*.py")):
        text = f.read_text(encoding="utf-8")
        if re.search(r"^\s*(from\s+[\w.]*\btest_\w+\s+import|import\s+[\w.]*\btest_\w+)", text, re.M) \
                or re.search(r"spec_from_file_location\([^)]*test_\w+\.py", text):
            bad.append(str(f.relative_to(tests)))
    assert not bad, f"test modules importing other test modules (move what they share to tests/helpers): {bad}"
