"""Kernel spec: what one lowering produces for one dispatch, before GLSL is rendered.

A kernel names a template in `shaders/`, the #defines/constant arrays that specialise it, and
its bindings as (glsl_name, tensor_id) pairs.  Binding 0 is the output (written); the rest are
read.  `invocations` is the number of logical threads; codegen turns it into a workgroup grid of
`local_x`-wide 1-D workgroups (a template that works per workgroup sets invocations to
workgroups * local_x).  `vec4` names bindings declared as 4-vectors of their scalar type (vec4 for
float32) instead of scalars: the tensor's offset is 256-byte aligned, so whole-vec4 loads/stores
are valid when the template only indexes the first size/4 elements.  `rw` names bindings the
template both reads and writes (declared without readonly/writeonly: e.g. LSTM state updated in place).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from gpuc.compiler.ir import GPU
from gpuc.compiler.sym_scope import hinted

LOCAL_X = 64
MAX_GROUPS = 65535
# Each template's facts are its template() declaration in compiler/ops/ (TEMPLATES):
# item_major: its invocation i (or workgroup i, for a row per workgroup) computes output element (row)
# i in flat order, reading only what that element's item holds: a prefix of its grid computes a
# prefix of the items (batch-native runs of fewer items than max_batch, runtime/batch.py).
# flat: its invocations are independent (no shared memory, barrier, subgroup or workgroup index:
# one output element or word each), so its workgroup size is free.  Those default to FLAT_LOCAL_X wide
# workgroups once the grid has at least FLAT_MIN_INVOCATIONS (a workgroup per SM of the largest GPUs we
# time): on the H100 at batch 32, 256 wide ran copy_nd 3.2x, binary_math 2.9x and gather_copy 1.5x faster
# than 64 wide (benchmarks/archive/local_size_ab.py on a windowed-attention transformer and two CNNs; 512: no
# better).
FLAT_LOCAL_X = 256
FLAT_MIN_INVOCATIONS = 132 * FLAT_LOCAL_X


def flat_local_x(invocations) -> int:
    """The workgroup size of independent invocations (a flat template's, or such a form of another template):
    FLAT_LOCAL_X once the grid has FLAT_MIN_INVOCATIONS, else LOCAL_X."""
    with hinted():                       # (speed only: a grid of dynamic size decides at its bound)
        return FLAT_LOCAL_X if invocations >= FLAT_MIN_INVOCATIONS else LOCAL_X


def _template(name: str, what: str) -> bool:
    """A fact of template `name` (False for a template nothing declared)."""
    from gpuc.compiler.ops import TEMPLATES        # (the op modules declare them; they import this module)
    t = TEMPLATES.get(name)
    return bool(t is not None and getattr(t, what))


def flat_templates() -> list[str]:
    from gpuc.compiler.ops import TEMPLATES
    return sorted(n for n, t in TEMPLATES.items() if t.flat)


@dataclass
class Kernel:
    template: str
    bindings: list                       # [(name, tensor_id)], first is the output
    invocations: int
    defines: dict = field(default_factory=dict)
    label: str = ""
    local_x: int = LOCAL_X
    vec4: tuple = ()                     # binding names declared as vec4 / ivec4 / uvec4 arrays
    rw: tuple = ()                       # binding names declared read-write (no memory qualifier)
    coherent: tuple = ()                 # binding names declared coherent (read after other workgroups wrote them)
    variants: list = field(default_factory=list)   # KernelVariant: hardware paths chosen at load by the runtime
    flops: int = 0                       # the node's estimated work, on its first kernel (profiles)
    resolve: object = None               # (graph, arena offsets, view) -> Kernel: finished after memory planning (ops/gather_copy.py)
    # batch-native programs: k > 0 when workgroups [0, j*k) compute exactly the first items' outputs for
    # every j (flat index item-major, in units of k); None: 1 for an item_major template, else 0
    item_inner: int | None = None
    kind: ClassVar[str] = GPU            # a program item (compiler/ir.py)

    def __post_init__(self):
        if self.local_x == LOCAL_X and _template(self.template, "flat"):
            self.local_x = flat_local_x(self.invocations)

    def item_unit(self) -> int:
        """Dispatch.item_inner for this kernel (0: a b-item run still dispatches the whole grid)."""
        if self.item_inner is not None:
            return self.item_inner
        return 1 if _template(self.template, "item_major") else 0

    def groups(self) -> tuple[int, int, int]:
        g = max(1, -(-self.invocations // self.local_x))
        gx = min(g, MAX_GROUPS)
        gy = -(-g // gx)
        if gy > MAX_GROUPS:
            raise ValueError(f"{self.label}: {self.invocations} invocations exceed the dispatch grid")
        return gx, gy, 1


@dataclass
class KernelVariant:
    """Another kernel for the same dispatch (same bindings, same results within fp rounding) that a
    device meeting `requires` (runtime/capabilities.py) runs instead, e.g. the cooperative-matrix gemm.
    `make(kernel)` derives it from the final plain kernel (after every pass edited its defines), when
    the bundle is built, or returns None where that kernel has no such form; `f16_bindings`: it exists
    only where these bindings are stored as float16.  `measured`: a candidate the cost model did not
    pick: the runtime takes it only where a measurement on the device finds it faster (runtime/tuning.py)."""
    name: str
    requires: dict
    make: object                         # Kernel -> Kernel
    f16_bindings: tuple = ()
    measured: bool = False
