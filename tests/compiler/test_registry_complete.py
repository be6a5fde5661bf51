"""The op registry (compiler/ops/__init__.py) is complete: every op declares every fact (or a Why with
its reason), each fact is one the engine that reads it understands, the CPU kernels it names exist in
runtime/cpu_ops.py (and every CPU kernel belongs to an op), and every (op, dtype) the GPU claims has a
test that compares it against LiteRT."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuc.compiler import ops, sym_shapes
from gpuc.compiler.ops import (ALWAYS, BOUNDED, FACT_FIELDS, FACTS, FROM_SHAPES, INTEGER, NEUTRAL, REGISTRY,
                               SHAPE_ONLY, TEMPLATES, UNSAFE, OpDef, Why, missing_facts)
from gpuc.compiler.passes import batching
from gpuc.runtime.cpu_ops import CPU_OPS

ROOT = Path(__file__).resolve().parents[2]
# ops other sessions are adding right now, on the compatibility path (facts defaulting to "no rule"):
# each entry says why it is not complete yet; the list only shrinks
IN_PROGRESS: dict[str, str] = {}
SHADERS_IN_PROGRESS: dict[str, str] = {}
# ops the fusion passes make (no model contains them): their LiteRT checks are the fusion tests'
INTERNAL = {"FUSED_ELEMENTWISE": "tests/compiler/test_ew_fusion.py", "FUSED_REDUCE": "tests/compiler/test_ew_fusion.py",
            "GATHER_COPY": "tests/compiler/test_movement_fold.py", "ATTENTION": "tests/compiler/test_attention_fusion.py",
            "LAYER_NORM": "tests/compiler/test_layer_norm.py", "RMS_NORM": "tests/compiler/test_composite.py",
            "SDPA_DECODE": "tests/compiler/test_sdpa_decode.py"}
PULL_KINDS = {"reshape", "transpose", "slice", "reverse", "strided_slice", "split", "split_v", "unpack",
              "broadcast_to", "concatenation", "pack", "pad", "tile", "gather"}


def test_every_op_declares_every_fact():
    missing = {op: missing_facts(d) for op, d in FACTS.items() if missing_facts(d) and op not in IN_PROGRESS}
    assert not missing, f"ops leaving facts undeclared (give a value or Why('reason')): {missing}"


def test_an_incomplete_op_is_rejected():
    """A deliberately incomplete op (no flops, no cpu) in a temporary registry fails the check, naming
    the facts it forgot; an unknown fact name is refused at declaration."""
    full = dict(FACTS["ABS"].__dict__)
    fake = OpDef(**{**full, "name": "FAKE_UNARY", "flops": ops.MISSING, "cpu": ops.MISSING})
    temp = {"FAKE_UNARY": fake, "ABS": FACTS["ABS"]}
    bad = {op: missing_facts(d) for op, d in temp.items() if missing_facts(d)}
    assert bad == {"FAKE_UNARY": ["flops", "cpu"]}
    with pytest.raises(TypeError, match="unknown op facts.*flop"):
        ops.declare("FAKE_UNARY", flop=None)
    assert "FAKE_UNARY" not in FACTS
    with pytest.raises(ValueError):
        Why("")


def _ok(value, accepted) -> bool:
    return isinstance(value, Why) or accepted(value)


@pytest.mark.parametrize("op", sorted(set(FACTS) - set(IN_PROGRESS)))
def test_facts_are_understood(op):
    d = FACTS[op]
    assert _ok(d.lower, callable) and _ok(d.check, callable)
    assert (op in REGISTRY) == callable(d.lower)
    assert _ok(d.shape, callable), "shape: a rule (node, vals, graph, need) or Why"
    assert _ok(d.exact, lambda v: v in (ALWAYS, INTEGER, SHAPE_ONLY, FROM_SHAPES))
    assert _ok(d.sym_shape, lambda v: callable(v) or v in sym_shapes.FAMILIES)
    assert _ok(d.batch, lambda v: batching.rule_for(op) is not None)
    assert _ok(d.pieces, lambda v: v in PULL_KINDS)
    assert d.fp16 in (UNSAFE, BOUNDED, NEUTRAL)
    assert d.in_place in (True, False)
    assert _ok(d.flops, callable)
    assert _ok(d.templates, lambda v: isinstance(v, tuple) and v and all(t in TEMPLATES for t in v)), \
        f"templates {d.templates} must be declared with template()"
    assert _ok(d.cpu, lambda v: v in CPU_OPS), f"its CPU kernel {d.cpu!r} is not in runtime/cpu_ops.py"
    assert callable(d.lower) or not isinstance(d.cpu, Why), "an op without a GPU kernel needs a CPU kernel"


def test_cpu_kernels_belong_to_ops():
    """runtime/cpu_ops.py cannot import the compiler: its kernels are keyed by name, and each is the
    `cpu` fact of an op (a kernel no op names would never run)."""
    named = {d.cpu for d in FACTS.values() if isinstance(d.cpu, str)}
    assert set(CPU_OPS) - named == set(), "CPU kernels no op names"


def test_every_shader_has_template_facts():
    shaders = {p.stem for p in (ROOT / "shaders").iterdir() if p.suffix in (".comp", ".spvasm")}
    used = {t for d in FACTS.values() if isinstance(d.templates, tuple) for t in d.templates}
    undeclared = shaders - set(TEMPLATES) - set(SHADERS_IN_PROGRESS)
    assert not undeclared, f"shaders without template() facts: {sorted(undeclared)}"
    assert used <= set(TEMPLATES)


# ---- a LiteRT-checked test for every (op, dtype) the GPU claims --------------------------------------

def _test_texts() -> dict[str, str]:
    out = {}
    for sub in ("ops", "compiler", "runtime", "helpers", "cli"):
        for p in sorted((ROOT / "tests" / sub).glob("*.py")):
            out[str(p.relative_to(ROOT))] = p.read_text()
    return out


TEXTS = _test_texts()
LITERT = re.compile(r"run_litert|litert|LiteRT")


def _covering(op: str) -> list[str]:
    """Test files that name `op` and compare against LiteRT (helpers count where a test imports them)."""
    lit = re.compile(rf"[\"']{re.escape(op.removeprefix('CUSTOM:'))}[\"']")
    return [f for f, t in TEXTS.items() if lit.search(t) and (LITERT.search(t) or f.startswith("tests/helpers"))]


@pytest.mark.parametrize("op", sorted(set(REGISTRY) - set(IN_PROGRESS)))
def test_every_claimed_dtype_has_a_litert_test(op):
    if op in INTERNAL:
        assert LITERT.search(TEXTS[INTERNAL[op]]), f"{INTERNAL[op]} does not compare {op} against LiteRT"
        return
    files = _covering(op)
    assert files, f"no test names {op!r} and compares it against LiteRT"
    for dt in sorted(REGISTRY[op].dtypes - {"float32"}):
        assert any(re.search(rf"[\"']{dt}[\"']|np\.{dt}\b", TEXTS[f]) for f in files), \
            f"{op} claims {dt}: none of {files} tests that dtype"
