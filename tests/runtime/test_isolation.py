"""The runtime must not import the compiler (nor glslang): a run-only machine lacks them."""
import subprocess
import sys

from helpers.repo import ROOT


def test_runtime_imports_no_compiler():
    code = ("import sys, gpuc, gpuc.runtime, gpuc.runtime.bundle, gpuc.runtime.executor, gpuc.runtime.device\n"
            "bad = [m for m in sys.modules if m.startswith('gpuc.compiler') or 'glslang' in m]\n"
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_runtime_sources_do_not_import_compiler():
    import re
    files = list((ROOT / "runtime").glob("*.py"))
    assert files
    for p in files:
        assert not re.search(r"^\s*(from|import)\s+(gpuc\.)?compiler", p.read_text(), re.M), p
