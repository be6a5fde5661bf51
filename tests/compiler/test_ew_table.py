"""compiler/ew_table.py: every elementwise op has a row, every row decides every fact, and the
facts check out against the GLSL, the registry and the lists derived from the table."""
import dataclasses
import re
from importlib import resources

import pytest

import gpuc
from gpuc.compiler import ew_table
from gpuc.compiler.ew_table import ACT, ACT_FINITE, ACT_NONE, TABLE, Ew
from gpuc.compiler.ops import REGISTRY
from gpuc.compiler.ops import math as ew_ops
from gpuc.errors import UnsupportedError
from gpuc.runtime import cpu_ops
from gpuc.runtime.bundle import read_bundle
from helpers.builder import ModelBuilder

GLSL = "\n".join(resources.files("gpuc.shaders").joinpath(f).read_text() for f in ("common.glsl", "ew_math.glsl"))
# elementwise ops of the CPU kernels (runtime/cpu_ops.py) that are not table rows, and where they live
NOT_IN_TABLE = {**{op: "compare.py (-> bool)" for op in ("EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER",
                                                          "GREATER_EQUAL", "LOGICAL_AND", "LOGICAL_OR",
                                                          "LOGICAL_NOT")},
                "ZEROS_LIKE": "CPU only", "ONES_LIKE": "CPU only"}


def test_every_field_is_a_decision():
    """No fact has a default: a row that leaves one out does not construct."""
    for f in dataclasses.fields(Ew):
        assert f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING, f.name
    with pytest.raises(TypeError):
        Ew("X", 1, False, "ew_x", (), ("float32",), None, (), False, False, True, "neutral")      # no `fusible`


@pytest.mark.parametrize("op", list(TABLE))
def test_row_facts(op):
    r = TABLE[op]
    assert r.name == op and r.arity in (1, 2)
    assert isinstance(r.broadcast, bool) and (not r.broadcast or r.arity == 2)
    assert r.dtypes and set(r.dtypes) <= {"float32", "int32"}
    assert all(isinstance(n, str) and t in (float, bool) for n, t in r.params)
    assert r.fp16 in (ew_table.UNSAFE, ew_table.BOUNDED, ew_table.NEUTRAL)
    for fact in (r.fused_act, r.act_host, r.in_place, r.fusible):
        assert isinstance(fact, bool)
    assert (r.act is None) == (r.act_dtypes == ()), "act_dtypes: exactly when the op is an activation"
    assert r.act is None or r.arity == 1 and r.act not in (ACT_NONE, ACT_FINITE)
    assert not r.act_host or r.fused_act, "an activation host applies a fused activation"
    assert not r.fusible or "float32" in r.dtypes, "FUSED_ELEMENTWISE computes in float32"


_BUILTIN = re.compile(r"(?<![\w.])(exp|log|log2|tanh|pow|sin|cos|tan|atan|asin|acos|sinh|cosh)\s*\(")


def _calls_transcendental(src: str, name: str, seen: set) -> bool:
    """Whether GLSL function `name` (every overload in src) calls a transcendental builtin, itself or
    through the ew_ functions it calls."""
    if name in seen:
        return False
    seen.add(name)
    for m in re.finditer(r"\n\w+ " + name + r"\([^)]*\)\s*\{", src):
        i, depth = m.end(), 1
        while depth:
            depth += {"{": 1, "}": -1}.get(src[i], 0)
            i += 1
        body = src[m.end():i]
        if _BUILTIN.search(body) or any(_calls_transcendental(src, h, seen)
                                        for h in set(re.findall(r"\b(ew_\w+)\s*\(", body)) - {name}):
            return True
    return False


@pytest.mark.parametrize("op", list(TABLE))
def test_costly_is_what_its_formula_calls(op):
    src = "".join((resources.files("gpuc.shaders") / f).read_text() for f in ("common.glsl", "ew_math.glsl"))
    assert TABLE[op].costly == _calls_transcendental(src, TABLE[op].glsl, set())


@pytest.mark.parametrize("op", list(TABLE))
def test_glsl_function_per_dtype(op):
    """The row's function exists in ew_math.glsl / common.glsl for every dtype it computes in (and
    every dtype its activation clamps), with its operands and parameters."""
    r = TABLE[op]
    for dt in set(r.dtypes) | set(r.act_dtypes):
        ty = "float" if dt == "float32" else "int"
        args = [ty] * r.arity + ["bool" if t is bool else "float" for _, t in r.params]
        sig = rf"\b{ty} {r.glsl}\(" + r",\s*".join(rf"{a} \w+" for a in args) + r"\)"
        assert re.search(sig, GLSL), f"{op}: no `{ty} {r.glsl}({', '.join(args)})` in common.glsl / ew_math.glsl"


def test_registry_and_table_agree():
    """The table's ops are registered with math.py's lowering and their dtypes; no other op is."""
    lowered = {op for op, d in REGISTRY.items() if d.lower is ew_ops.lower}
    assert lowered == set(TABLE)
    for op, r in TABLE.items():
        assert REGISTRY[op].dtypes == frozenset(r.dtypes) and REGISTRY[op].inputs == (r.arity, r.arity)


def test_cpu_elementwise_ops_are_rows_or_placed():
    """An elementwise op the CPU kernels know is a row, or listed here with where it lives."""
    for op in list(cpu_ops.UNARY) + list(cpu_ops.BINARY):
        assert op in TABLE or op in NOT_IN_TABLE, f"{op}: elementwise without a row in compiler/ew_table.py"


def test_activation_codes():
    """One numbering: unique codes; TFLite's RELU RELU_N1_TO_1 RELU6 TANH keep their enum values, and
    runtime/cpu_ops.py (which cannot import the compiler) applies codes 1-5 to CPU nodes' epilogues."""
    assert ACT == {"RELU": 1, "RELU_N1_TO_1": 2, "RELU6": 3, "TANH": 4, "LOGISTIC": 5, "HARD_SWISH": 6}
    assert len(set(ew_table.ACTS)) == len(ew_table.ACTS) == len(ACT) + 2
    cases = ew_table.act_glsl()
    for op, code in ACT.items():
        assert f"if (code == {code}) return {TABLE[op].glsl}(v);" in cases
    assert f"if (code == {ACT_FINITE}) return gpuc_finite(v);" in cases


def test_derived_lists():
    from gpuc.compiler.ops.ew_fused import OPS
    from gpuc.compiler.ops import FACTS
    from gpuc.compiler.passes import fusion
    assert OPS == {op for op, r in TABLE.items() if r.fusible} | {"CAST"}
    for op, r in TABLE.items():                      # the registry's in-place fact is the row's (kernel ops
        assert (FACTS[op].in_place is True) == bool(r.in_place), op    # outside the table declare their own)
    assert FACTS["FUSED_ELEMENTWISE"].in_place is True
    assert fusion.ACT_OPS == ACT
    assert {op for op, r in TABLE.items() if r.act_host} <= fusion.ACT_HOSTS
    for op, r in TABLE.items():                      # (the registry's fp16 fact is the row's)
        assert FACTS[op].fp16 == r.fp16
    compiled = {(e.split("(")[0], "int32" if sw.get("IS_INT") == [1] else "float32")
                for _, sw, *_ in ew_ops.VARIANTS.values() for e in sw.get("EW_EXPR", [])}
    for r in TABLE.values():                 # `make shaders` compiles each op in each of its dtypes
        assert {(r.glsl, dt) for dt in r.dtypes} <= compiled, r.name


OTHER_DTYPES = ("int8", "int16", "uint8", "uint16", "uint32", "float16")


@pytest.mark.parametrize("op", list(TABLE))
def test_dtypes_off_the_gpu(op):
    """A dtype outside the row's runs on the CPU (with a warning) or is a clear UnsupportedError naming
    it: never a GPU kernel computing in the wrong type."""
    r = TABLE[op]
    for dt in OTHER_DTYPES:
        mb = ModelBuilder()
        xs = [mb.input(f"x{k}", (2, 3), dt) for k in range(r.arity)]
        y = mb.tensor("y", (2, 3), dt)
        mb.op(op, xs, [y])
        mb.output(y)
        try:
            b = gpuc.compile(mb.finish(), cache=False)
        except UnsupportedError as e:
            assert dt in str(e) and op in str(e), str(e)
            continue
        assert read_bundle(b).stats["cpu_nodes"] == 1, f"{op} {dt}: not on the CPU"
