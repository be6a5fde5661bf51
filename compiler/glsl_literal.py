"""A number as GLSL source text: what codegen/glsl.py writes into defines and constant arrays, and what
compiler/symbolic.py's float expressions (FExpr.glsl) write for their constants.  It sits beside the IR,
below codegen, so the IR core (symbolic.py) needs nothing from codegen."""
from __future__ import annotations

import numpy as np


def literal(v) -> str:
    """v as a GLSL literal: bools as 1 / 0, ints as written, floats at float32 precision (always with a
    '.' or exponent; infinities and NaN as divisions, which glslang folds, also in constant arrays)."""
    if isinstance(v, (bool, np.bool_)):
        return "1" if v else "0"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        f = float(np.float32(v))
        if np.isnan(f):             # (a model's NaN attribute, e.g. a softmax beta: LiteRT computes with it)
            return "(0.0/0.0)"
        if np.isinf(f):
            return "(1.0/0.0)" if f > 0 else "(-1.0/0.0)"
        s = "%.9g" % f
        return s if any(c in s for c in ".en") else s + ".0"
    return str(v)
