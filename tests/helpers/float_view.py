"""keep_float_view(mb, x): an extra model output through an op that has no native int8 form (REDUCE_PROD over the
last axis), which keeps a full-integer model on the float program with simulated quantization (passes/quant.py
native_int8 needs every op touching an int8 activation to have an int8 form).  The tests of the float view share
it: when that op gets an int8 form, only this helper changes."""
from __future__ import annotations

import numpy as np

SIDE_OP = "REDUCE_PROD"


def keep_float_view(mb, x: int, shape) -> int:
    """A REDUCE_PROD of int8 tensor x (of `shape`) over its last axis, kept, as a model output (tensor
    `float_view_side`)."""
    y = mb.tensor("float_view_side", list(shape[:-1]) + [1], "int8", quant=(0.5, 0))
    mb.op(SIDE_OP, [x, mb.const("float_view_axis", np.array([-1], np.int32))], [y], keep_dims=True)
    mb.output(y)
    return y
