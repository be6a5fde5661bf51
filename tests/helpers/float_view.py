"""keep_float_view(mb, x): an extra model output through an op that has no native int8 form (LOG_SOFTMAX on
LiteRT's fixed int8 grid, 16/256 and 127), which keeps a full-integer model on the float program with simulated
quantization (passes/quant.py native_int8 needs every op touching an int8 activation to have an int8 form).
The tests of the float view share it: when that op gets an int8 form, only this helper changes."""
from __future__ import annotations

SIDE_OP = "LOG_SOFTMAX"


def keep_float_view(mb, x: int, shape) -> int:
    """A LOG_SOFTMAX of int8 tensor x (of `shape`) as a model output (tensor `float_view_side`)."""
    y = mb.tensor("float_view_side", list(shape), "int8", quant=(16.0 / 256, 127))
    mb.op(SIDE_OP, [x], [y])
    mb.output(y)
    return y
