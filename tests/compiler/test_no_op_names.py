"""No op-name string literal outside compiler/ops/ and runtime/cpu_ops.py (issue 27): the engines ask
the registry (compiler/ops/__init__.py) for an op's facts instead of naming it.  Every file that still
names ops is listed below with the names it may use and why; the list may only shrink (a new name in
a listed file, or a new file naming ops, fails here)."""
from __future__ import annotations

import re
from pathlib import Path

from gpuc.compiler.ew_table import TABLE as EW_TABLE
from gpuc.compiler.frontend.tflite_schema import ENUMS
from gpuc.compiler.ops import FACTS

ROOT = Path(__file__).resolve().parents[2]
OWNERS = ("compiler/ops/", "runtime/cpu_ops.py", "compiler/frontend/tflite_schema.py")

_PATTERNS = "a fusion pass matches a pattern of named ops and writes the op it fuses them into (issue 27 " \
            "item 4: patterns as data in one kit)"
EXCEPTIONS = {
    # file: (the op names it may use, the reason)
    "compiler/ew_table.py": (set(EW_TABLE),       # its rows' names (a new row needs no edit here)
                             "the elementwise ops' table of facts (compiler/ops/math.py registers its rows; it sits "
                             "beside the IR because codegen/glsl.py reads it too)"),
    "compiler/frontend/importer.py": ({"CUSTOM", "PLACEHOLDER_FOR_GREATER_OP_CODES"},
                                      "the flatbuffer's op-code encoding, not ops"),
    "compiler/frontend/composite.py": ({"STABLEHLO_COMPOSITE"}, "the importer inlines this wrapper op"),
    "compiler/control_flow.py": ({"IF", "WHILE"}, "control flow is the program structure, not a kernel op"),
    "compiler/passes/variables.py": ({"ASSIGN_VARIABLE", "CALL_ONCE", "IF", "READ_VARIABLE", "VAR_HANDLE", "WHILE"},
                                     "resource variables and control flow are program structure"),
    "compiler/ir.py": ({"RESHAPE"}, "Graph.reshape_node builds a RESHAPE (the view every pass makes)"),
    "compiler/passes/fold.py": ({"ADD", "CAST", "DENSIFY", "DEQUANTIZE", "EQUAL", "EXPAND_DIMS", "FILL", "GREATER",
                                 "GREATER_EQUAL", "LESS", "LESS_EQUAL", "MUL", "NOT_EQUAL", "RANGE", "RESHAPE",
                                 "SELECT", "SELECT_V2", "SHAPE", "SQUEEZE", "SUB", "TRANSPOSE", "ZEROS_LIKE"},
                                "constant-folding rewrites of named patterns (" + _PATTERNS + ")"),
    "compiler/passes/movement_fold.py": ({"GATHER_COPY"}, "writes the op it folds movement chains into"),
    "runtime/cpu_movement.py": ({"ASSIGN_VARIABLE", "BROADCAST_TO", "CONCATENATION", "EXPAND_DIMS", "FILL", "GATHER",
                                 "GATHER_ND", "PACK", "PAD", "PADV2", "RANGE", "READ_VARIABLE", "RESHAPE",
                                 "REVERSE_V2", "SHAPE", "SLICE", "SPLIT", "SPLIT_V", "SQUEEZE", "STRIDED_SLICE",
                                 "TILE", "TRANSPOSE", "UNPACK"},
                                "the data-movement CPU kernels, registered by name into cpu_ops.CPU_OPS"),
    **{f"compiler/passes/{m}.py": (names, _PATTERNS) for m, names in {
        "attention": {"ADD", "ATTENTION", "SOFTMAX", "SUB"},
        "attention_match": {"ADD", "BATCH_MATMUL", "DIV", "MUL", "SUB"},
        "attention_operands": {"BROADCAST_TO", "DIV", "EXPAND_DIMS", "MUL", "RESHAPE", "SLICE", "SPLIT", "SPLIT_V",
                               "SQUEEZE", "STRIDED_SLICE", "TILE", "TRANSPOSE", "UNPACK"},
        "ew_fusion": {"CAST", "FUSED_ELEMENTWISE", "FUSED_REDUCE", "MEAN", "PRELU", "REDUCE_MAX", "REDUCE_MIN",
                      "REDUCE_PROD", "SUM"},
        "fusion": {"ADD", "AVERAGE_POOL_2D", "CONV_2D", "DEPTHWISE_CONV_2D", "EXPAND_DIMS", "FULLY_CONNECTED",
                   "MAX_POOL_2D", "PAD", "PADV2", "RESHAPE", "SQUEEZE", "TRANSPOSE_CONV"},
        "gemm_epilogue": {"BATCH_MATMUL", "CAST", "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"},
        "layer_norm": {"ADD", "DIV", "EXPAND_DIMS", "LAYER_NORM", "MEAN", "MUL", "NEG", "POW", "RESHAPE", "RSQRT",
                       "SQRT", "SQUARE", "SQUARED_DIFFERENCE", "SQUEEZE", "SUB"},
        "quant": {"BITCAST", "CAST", "CONV_2D", "DEPTHWISE_CONV_2D", "DEQUANTIZE", "FULLY_CONNECTED", "LSH_PROJECTION",
                  "QUANTIZE"},
        "rfft": {"ADD", "COMPLEX_ABS", "EXPAND_DIMS", "FULLY_CONNECTED", "IMAG", "MUL", "REAL", "RESHAPE", "RFFT2D",
                 "SQRT", "SQUEEZE"},
        "softmax_chain": {"DIV", "EXP", "EXPAND_DIMS", "MAXIMUM", "MUL", "REDUCE_MAX", "RESHAPE", "SOFTMAX",
                          "SQUEEZE", "SUB", "SUM"},
        "transpose_pairs": {"ADD", "BATCH_MATMUL", "DIV", "MAXIMUM", "MINIMUM", "MUL", "RESHAPE",
                            "SQUARED_DIFFERENCE", "SUB", "TRANSPOSE"},
    }.items()},
}


def _op_names() -> set:
    return set(ENUMS["BuiltinOperator"]) | set(FACTS)


def _named(text: str, names: set) -> set:
    return {m.group(1) for m in re.finditer(r"[\"']([A-Z][A-Z0-9_:]+)[\"']", text) if m.group(1) in names}


def test_engines_name_no_ops():
    names, found = _op_names(), {}
    for top in ("compiler", "runtime", "gpuc"):
        for p in sorted((ROOT / top).rglob("*.py")):
            rel = p.relative_to(ROOT).as_posix()
            if rel.startswith(OWNERS):
                continue
            used = _named(p.read_text(), names)
            allowed = EXCEPTIONS.get(rel, (set(), ""))[0]
            if used - allowed:
                found[rel] = sorted(used - allowed)
    assert not found, f"op names outside compiler/ops/ (ask the registry for the op's facts instead): {found}"


def test_exceptions_are_still_needed():
    """An exception whose file no longer names an op it lists is stale: shrink the list."""
    names = _op_names()
    stale = {f: sorted(allowed - _named((ROOT / f).read_text(), names))
             for f, (allowed, why) in EXCEPTIONS.items() if (ROOT / f).exists()}
    assert not {f: s for f, s in stale.items() if s}
    assert all(why for _, why in EXCEPTIONS.values())


def test_the_check_sees_a_literal():
    assert _named('if node.op == "STRIDED_SLICE":', _op_names()) == {"STRIDED_SLICE"}
