"""The vector form of the elementwise kernels (shaders/ew_fused.comp EW_VEC, binary_math.comp VEC): an
invocation computes groups of 4 consecutive output elements along the innermost dim, with one index walk
and one load per input for all of them, as a vec4 (f16vec4 under float16 storage) or, for an input
broadcast along that dim, one scalar.  The elementwise ops themselves are latency bound: one walk
(div/mod per dim) per element, and 2-byte loads under float16 storage, cost more than the arithmetic.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.ops.util import broadcast_strides
from gpuc.compiler.options import current

# Groups of 4 per invocation of a fused chain (one group where the innermost extent is not a multiple of
# 4 * VECS); 0: the scalar form everywhere.  CompileOptions.ew_vectors overrides it (`vectors()`).
VECS = 1


def vectors() -> int:
    """Vectors of 4 per invocation: CompileOptions.ew_vectors, else VECS."""
    v = current().ew_vectors
    return VECS if v is None else v


def vector_form(ins, y_shape, most: int | None = None) -> tuple[int, list] | None:
    """(vectors of 4 per invocation, per input: loaded as vec4 (True) or as one scalar (False)), or None
    where the scalar form must run: vectors() is 0, the output's innermost extent is not a known multiple
    of 4, or an input is neither contiguous along it (stride 1, every stride and its base a multiple of 4:
    whole vec4s) nor broadcast along it (stride 0).  `most`: a cap on the vectors (a kernel that computes
    one)."""
    shape = list(y_shape)
    vecs = vectors() if most is None else min(vectors(), most)
    if vecs < 1 or not shape or not all(isinstance(d, (int, np.integer)) for d in shape) or int(shape[-1]) % 4:
        return None
    vec = []                 # (a binding is a whole tensor: its base is its own 256-byte aligned offset)
    for t in ins:
        st = broadcast_strides(t.shape, shape)
        if st[-1] == 1 and all(s % 4 == 0 for s in st[:-1]):
            vec.append(True)
        elif st[-1] == 0:
            vec.append(False)
        else:
            return None
    return (vecs if int(shape[-1]) % (4 * vecs) == 0 else 1), vec


def binding_strides(in_shape, y_shape, form: tuple[int, list], k: int) -> list:
    """Input k's strides over the vector form's grid (OUT_SHAPE with its innermost extent counting
    invocations), in units of its binding: a vec4 view's in vec4s, its innermost step the invocation's
    vectors; a scalar binding's in elements (0 along the innermost dim)."""
    st = broadcast_strides(in_shape, y_shape) or [0]
    return [s // 4 for s in st[:-1]] + [form[0]] if form[1][k] else st
