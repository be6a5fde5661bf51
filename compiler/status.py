"""Run-time checks: kernels that meet an input LiteRT's invoke refuses (an index out of range) report it
into a small uint32 status tensor, and the run then fails naming the op (runtime/status.py).

A lowering declares a check on its own kernel (`index_check`: the op decides, not the engine): the
kernel binds the status tensor read-write as `status` and gets the defines CHECK=1, CHECK_WORD (its
first word in a row), STATUS_ROW (words per row) and ITEMS / ITEM_OUT (a batch-native program keeps one
row per batch item: output element e reports into row e / ITEM_OUT, so a run of b items copies back
exactly the rows of the items it computed).  Each check owns WORDS words of a row:

    count (atomicAdd: elements that met a bad value), then, written by the invocation whose atomicAdd
    saw 0: the value's low and high 32 bits, and its position (the index component: GATHER_ND's k).

`finish(graph, program)` (compiler/driver.py, after lowering) sizes the status tensor, completes the
defines, and puts a zeroing dispatch first in the program; the bundle records each check (bundle.fbs
Check: the op, its operator index, the checked tensor's name, the bounds).  A program without checks
is left exactly as it was: no tensor, no dispatch, no copy.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from gpuc.compiler import symbolic
from gpuc.compiler.codegen.kernel import Kernel

WORDS = 4
STATUS_NAME = "gpuc:status"
BINDING = "status"


@dataclass
class Check:
    op: str
    operator: int
    tensor: str                 # name of the checked tensor (the indices)
    bounds: list                # the value at position k is valid when 0 <= value < bounds[k]
    word: int                   # first word of the check in each row of the status tensor
    kernels: list = field(default_factory=list)


def _status(graph) -> int:
    """The graph's status tensor (its shape is set by finish)."""
    if graph.status is None:
        graph.status = graph.add_tensor(STATUS_NAME, [1, WORDS], "uint32")
    return graph.status


def index_check(graph, node, kernel: Kernel, tensor: int, bounds: list) -> Kernel:
    """`kernel` (of `node`) reports values of `tensor` outside [0, bounds[k]) into the status words,
    as LiteRT's invoke fails on them.  The template reads CHECK / CHECK_WORD / STATUS_ROW / ITEMS /
    ITEM_OUT (shaders/gather.comp's gpuc_report).  Returns the kernel."""
    bounds = [-1 if symbolic.is_sym(b) else int(b) for b in bounds]       # -1: a size known at run time
    c = Check(node.op, node.index, graph.t(tensor).name, bounds, WORDS * len(graph.checks), [kernel])
    graph.checks.append(c)
    kernel.bindings.append((BINDING, _status(graph)))
    kernel.rw = tuple(kernel.rw) + (BINDING,)
    out = kernel.bindings[0][1]
    items = graph.items if graph.items > 1 and not {out, graph.storage(out)} & set(graph.unbatched) else 1
    n = kernel.defines.get("N", kernel.invocations)      # the elements the template numbers (packed: N)
    if items > 1 and n % items:
        raise ValueError(f"{kernel.label}: {n} elements do not split into {items} batch items")
    kernel.defines.update(CHECK=1, CHECK_WORD=c.word, ITEMS=items, ITEM_OUT=n // items if items > 1 else 0)
    return kernel


def split(graph, kernel: Kernel, kernels: list) -> list:
    """`kernels` (copies of `kernel`, e.g. its chunks: compiler/ops/step_chunks.py) run in its place: a check on
    `kernel` covers them (finish completes their defines).  Returns `kernels`."""
    for c in graph.checks:
        if any(k is kernel for k in c.kernels):
            c.kernels = [k for k in c.kernels if k is not kernel] + [k for k in kernels if k is not kernel]
    return kernels


def finish(graph, program: list) -> tuple[list, int | None]:
    """(program, status tensor or None): with checks, the status tensor sized [rows, words], the
    checking kernels' row length set, and a zeroing dispatch first."""
    if not graph.checks:
        return program, None
    sid = graph.status
    rows = graph.items if graph.items > 1 else 1
    words = WORDS * len(graph.checks)
    graph.t(sid).shape = (rows, words)
    for c in graph.checks:
        for k in c.kernels:
            k.defines["STATUS_ROW"] = words
    fill = Kernel("fill", [("out_", sid)], rows * words, dict(RUNTIME_VALUE=0, ELEM=4, I64=0, VALUE_BITS=0, HI_BITS=0),
                  "zero the status words")
    return [fill] + list(program), sid


def bundle_checks(graph, index: dict) -> list:
    """The bundle's Check records (runtime/bundle.py) for the graph's checks; index: tensor -> bundle index."""
    from gpuc.runtime import bundle as B
    if not graph.checks:
        return []
    return [B.Check(index[graph.status], c.word, c.op, c.operator, c.tensor, list(c.bounds)) for c in graph.checks]
