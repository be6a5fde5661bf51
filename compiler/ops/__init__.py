"""The op registry: every fact of every op, declared once, in the op's own module.

`gpuc inspect`, the compiler's unsupported-op error, lowering and every engine that treats ops
differently read it: shape propagation (compiler/shapes.py), dynamic dims (compiler/dynamic.py),
batching (passes/batching.py), movement folding (passes/movement_pieces.py), fp16 storage
(passes/precision.py), in-place (passes/inplace.py), the cost model (prepare.estimate_flops) and the
CPU fallback (runtime/cpu_ops.py, keyed by the name `cpu` gives).  Those engines never name an op.

An op module registers its GPU lowering with `@register(NAME, ..., **facts)` on the lowering function
(a lowering takes (node, graph) and returns codegen Kernels; `check(node, graph)` returns None when the
node is supported, else a short reason), and may state more facts per name with `declare(NAME, **facts)`;
`declare` alone makes an op with facts but no GPU kernel (SHAPE, RANGE: the CPU runs it).  Every fact in
FACT_FIELDS must be given: a value, or `Why("...")` where the op has none, saying why.
`missing_facts` lists what an op leaves out (tests/compiler/test_registry_complete.py).  The templates
an op emits declare theirs with `template(NAME, ...)` (TEMPLATES, read by codegen/kernel.py and
memory_plan.py).
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Callable

from gpuc.compiler.ir import Graph, Node
from gpuc.compiler.symbolic import SymbolicSize


ANY_COUNT = 1 << 20           # inputs/outputs of ops TFLite sets no count limit for (CONCATENATION, PACK ...)
LITERT_REJECTS = "LiteRT's kernel rejects"   # starts the reason for a dtype in OpDef.rejects (no CPU fallback)
REFUSAL_ATTR = "gpuc_refused"        # a node attribute: why the importer could not lower this node (its reason)


class Why:
    """A fact an op does not have, with the reason (e.g. Why("data-dependent output size"))."""
    __slots__ = ("reason",)

    def __init__(self, reason: str):
        if not str(reason).strip():
            raise ValueError("Why needs a reason")
        self.reason = str(reason)

    def __repr__(self):
        return f"Why({self.reason!r})"

    def __bool__(self):
        return False


MISSING = Why("not declared")     # the default of every fact: missing_facts reports it


class NoBatch(Why):
    """A `batch` fact for an op that --max-batch cannot run at all, batch-native or replicated per item (a
    random op's stream continues across runs, so items of one run cannot draw from copies of it): the
    compile fails with the reason (passes/batching.py stateful_refusal)."""
    __slots__ = ()

# fp16 classes (passes/precision.py)
UNSAFE, BOUNDED, NEUTRAL = "unsafe", "bounded", "neutral"
# exact: when `shape` gives LiteRT's exact values on constant inputs (shapes.exact, constant folding)
# (FROM_SHAPES: its values follow from its inputs' shapes alone, e.g. SHAPE)
ALWAYS, INTEGER, SHAPE_ONLY, FROM_SHAPES = "always", "integer", "shape-only", "from-shapes"

# The facts every op declares.  Fields and what the engine that reads them expects:
FACT_FIELDS = {
    "lower": "(node, graph) -> [Kernel]: the GPU lowering (Why: the op has no GPU kernel)",
    "check": "(node, graph) -> None | reason: attribute checks beyond dtype and arity",
    "shape": "(node, vals, graph, need_values) -> [arrays] | None: the static shape rule on numpy values "
             "(compiler/ops/shape_rules.py has the shared ones)",
    "exact": "ALWAYS / INTEGER / SHAPE_ONLY / FROM_SHAPES: when `shape` computes LiteRT's values on constants",
    "sym_shape": "'same' | 'broadcast' | 'reduce' | (node, graph, values) -> [shapes]: the rule on "
                 "symbolic (--dynamic) shapes (compiler/dynamic.py)",
    "batch": "a passes/batching.py FAMILIES key (or (key, *params)): how --max-batch runs it",
    "pieces": "a passes/movement_pieces.py PULL key: how movement folding reads its output's pieces",
    "fp16": "UNSAFE / BOUNDED / NEUTRAL: its output range under fp16 storage (passes/precision.py)",
    "in_place": "True when out[i] is computed from each input's element i only (passes/inplace.py)",
    "templates": "the shader templates its lowering emits (each declared with template())",
    "flops": "(node, graph) -> int: the cost model's work estimate (prepare.estimate_flops)",
    "cpu": "the name of its runtime/cpu_ops.py kernel (the runtime runs that where the GPU refuses)",
}
# Facts only some ops have; an op that leaves one out lacks the ability it names (no Why needed):
OPTIONAL_FACTS = {
    "sym_value": "BY_SHAPE_RULE | (node, vals, graph) -> object array | None: its value on sizes known only at "
                 "run time (--dynamic shape arithmetic, compiler/dynamic.py; vals: object arrays of ints and Syms; "
                 "None: not for these inputs).  Left out: the op refuses to compute with a dynamic size as data",
    "updates_in_place": "True: its output is input 0 with a part rewritten, and its kernel writes just that part "
                        "where the output lives in input 0's bytes (a signature threading a tensor through it "
                        "keeps that tensor as state: compiler/signatures.py)",
}
BY_SHAPE_RULE = "by-shape-rule"     # sym_value: its `shape` rule computes the value on object arrays (data movement)


@dataclass
class OpDef:
    name: str
    lower: object = MISSING
    check: object = MISSING
    dtypes: frozenset = frozenset({"float32"})   # dtypes of non-constant tensors this lowering handles
    max_version: int = 99
    summary: str = ""
    inputs: tuple = (1, 99)          # allowed number of inputs (min, max); ANY_COUNT: as many as TFLite allows
    outputs: tuple = (1, 1)          # allowed number of outputs
    optional: tuple = ()             # input positions that may be -1 (absent)
    rejects: frozenset = frozenset()  # dtypes LiteRT's builtin kernel refuses for this op: an error, not the CPU
    shapes: Callable | None = None   # (node, graph) -> output shapes the op sets itself (LiteRT's Prepare resizes them)
    quantized_io: bool = False       # takes quantized int8 / uint8 tensors itself (QUANTIZE, DEQUANTIZE)
    shape: object = MISSING
    exact: object = MISSING
    sym_shape: object = MISSING
    batch: object = MISSING
    pieces: object = MISSING
    fp16: object = MISSING
    in_place: object = MISSING
    templates: object = MISSING
    flops: object = MISSING
    cpu: object = MISSING
    sym_value: object = None         # OPTIONAL_FACTS
    updates_in_place: object = None  # OPTIONAL_FACTS

    @property
    def gpu(self) -> bool:
        return callable(self.lower)


REGISTRY: dict[str, OpDef] = {}      # ops with a GPU lowering
FACTS: dict[str, OpDef] = {}         # every op with declared facts (REGISTRY's and host-only ones)
REFUSED: dict[str, str] = {}         # ops gpuc refuses outright -> why (refuse(); neither GPU nor CPU runs them)
COMPOSITES: dict[str, Callable] = {}  # STABLEHLO_COMPOSITE name -> (node, graph, decomposition) -> [Node] | None
#                                      (compiler/frontend/composite.py: a fused op instead of the inlined decomposition)
HANDLED: dict[str, tuple] = {}       # ops the compiler turns into others -> (how, the op they run as, dtypes)
IMPORT_LOWERINGS: dict[str, Callable] = {}   # op -> (graph, node) -> [Node]: rewritten at import (lower_at_import)


def fuses(composite: str):
    """Decorate `fn(node, graph, decomposition) -> [Node] | None`: the fused op(s) computing a
    STABLEHLO_COMPOSITE of that name, or None where `fn` does not recognize this form (then its
    decomposition is inlined)."""
    def deco(fn):
        COMPOSITES[composite] = fn
        return fn
    return deco


def refuse(*names, reason: str) -> None:
    """gpuc refuses `names` outright, for `reason` (e.g. "LiteRT's interpreter does not run it"): the
    unsupported-op error and `gpuc ops` give it."""
    if not str(reason).strip():
        raise ValueError("refuse needs a reason")
    for n in names:
        REFUSED[n] = str(reason)


def handled(*names, how: str, runs_as: str | None = None, dtypes: tuple = ()) -> None:
    """`names` never reach a kernel: the importer or the compiler turns them into other ops or program
    structure (`how` says what: inlined, lowered to ..., control flow; `runs_as`: the op whose kernel then
    runs it, whose status `gpuc ops` gives it; `dtypes`: the ones it is lowered in, where fewer than that op's)."""
    for n in names:
        HANDLED[n] = (str(how), runs_as, tuple(dtypes))


def lowered_at_import(name: str, *, how: str, runs_as: str, dtypes: tuple = ()):
    """Decorate `fn(graph, node) -> [Node]`: `name` is rewritten into other ops as the model is imported
    (lower_at_import; a node it cannot rewrite comes back as it is, with its reason in attrs[REFUSAL_ATTR]).
    `how`, `runs_as`, `dtypes`: as handled() takes them (what `gpuc ops` says of it)."""
    def deco(fn):
        IMPORT_LOWERINGS[name] = fn
        handled(name, how=how, runs_as=runs_as, dtypes=dtypes)
        return fn
    return deco


def lower_at_import(model) -> None:
    """Every node with an import lowering (lowered_at_import) replaced by its ops, in every subgraph."""
    for g in model.subgraphs:
        if any(n.op in IMPORT_LOWERINGS for n in g.nodes):
            g.nodes = [m for n in g.nodes for m in (IMPORT_LOWERINGS[n.op](g, n) if n.op in IMPORT_LOWERINGS else [n])]


def register(*names, check=None, dtypes=("float32",), max_version=99, summary="", inputs=(1, 99), outputs=(1, 1),
             optional=(), rejects=(), shapes=None, quantized_io=False, **facts):
    """Register a GPU lowering for `names` (the decorated function), with the facts shared by them."""
    _known(facts)

    def deco(fn):
        for n in names:
            old = FACTS.get(n)
            d = OpDef(n, fn, check if check is not None else Why("dtype and arity checks suffice"),
                      frozenset(dtypes), max_version, summary, tuple(inputs), tuple(outputs),
                      tuple(optional), frozenset(rejects), shapes, quantized_io)
            if old is not None:              # (declare() ran first)
                for f in (*FACT_FIELDS, *OPTIONAL_FACTS):
                    if f not in ("lower", "check") and getattr(old, f) is not MISSING and getattr(old, f) is not None:
                        setattr(d, f, getattr(old, f))
            for f, v in facts.items():
                setattr(d, f, v)
            REGISTRY[n] = FACTS[n] = d
        return fn
    return deco


def declare(*names, **facts):
    """More facts of `names` (registered or not: an op without a GPU kernel gets an OpDef whose
    lower is Why(...) and is not in REGISTRY)."""
    _known(facts)
    for n in names:
        d = FACTS.get(n)
        if d is None:
            d = FACTS[n] = OpDef(n)
        for f, v in facts.items():
            if f in ("lower", "check") and n in REGISTRY:
                raise TypeError(f"declare({n!r}, {f}=...): its @register gives its {f}")
            setattr(d, f, v)


def _known(facts):
    bad = sorted(set(facts) - set(FACT_FIELDS) - set(OPTIONAL_FACTS))
    if bad:
        raise TypeError(f"unknown op facts {bad} (known: {sorted(FACT_FIELDS) + sorted(OPTIONAL_FACTS)})")


def fact(op: str, field: str, default=None):
    """Op `op`'s fact `field`, or `default` where it has none (not declared, or a Why)."""
    d = FACTS.get(op)
    v = MISSING if d is None else getattr(d, field)
    return default if isinstance(v, Why) else v


def missing_facts(d: OpDef) -> list[str]:
    """The facts `d` leaves undeclared (a Why with its reason counts as declared)."""
    return [f for f in FACT_FIELDS if getattr(d, f) is MISSING]


@dataclass
class Template:
    """The facts of one shader template (shaders/NAME.comp) that engines read; its 16-bit storage
    support is the `// @storage16` mark in the shader itself (codegen/glsl.supports_storage16) and
    its variants sit in the VARIANTS dict of the op module that declares it."""
    name: str
    item_major: bool          # invocation (or workgroup) i computes output element (row) i in flat order,
    #                           reading only its item's values: a grid prefix computes an item prefix
    flat: bool                # invocations are independent (no shared memory, barrier, subgroup, workgroup
    #                           index): the workgroup size is free (codegen/kernel.py FLAT_LOCAL_X)
    in_place: object          # bindings that may alias the output (None: any input of the output's shape;
    #                           (): none) (memory_plan.share_in_place)


TEMPLATES: dict[str, Template] = {}


def template(name: str, *, item_major: bool, flat: bool, in_place=()) -> None:
    TEMPLATES[name] = Template(name, item_major, flat, in_place)


def _arity_reason(node: Node, d: OpDef) -> str | None:
    ni, no = len(node.inputs), len(node.outputs)
    if not d.inputs[0] <= ni <= d.inputs[1]:
        return f"has {ni} inputs (expected {d.inputs[0]}..{d.inputs[1]})"
    if not d.outputs[0] <= no <= d.outputs[1]:
        return f"has {no} outputs (expected {d.outputs[0]}..{d.outputs[1]})"
    absent = [i for i, t in enumerate(node.inputs) if t < 0 and i not in d.optional]
    if absent or any(t < 0 for t in node.outputs):
        return f"required input {absent[0]} is absent" if absent else "an output is absent"
    return None


def unsupported_reason(node: Node, graph: Graph) -> str | None:
    """None if gpuc can run `node` on the GPU, else why not."""
    d = REGISTRY.get(node.op)
    if d is None:
        return node.attrs.get(REFUSAL_ATTR) or REFUSED.get(node.op) or "op not implemented"
    if node.version > d.max_version:
        return f"version {node.version} not supported (max {d.max_version})"
    bad = _arity_reason(node, d)
    if bad:
        return bad
    for tid in list(node.inputs) + list(node.outputs):
        if tid < 0:
            continue
        t = graph.t(tid)
        if not t.is_const and t.dtype in d.rejects:
            return f"{LITERT_REJECTS} {t.dtype} tensors ({t.name!r}; it takes {', '.join(sorted(d.dtypes))})"
        if not t.is_const and t.dtype not in d.dtypes:
            return f"tensor {t.name!r} has dtype {t.dtype} (supported: {', '.join(sorted(d.dtypes))})"
        if t.quant is not None and t.dtype in ("int8", "uint8", "int16") and not t.is_const \
                and not (d.quantized_io and t.dtype in ("int8", "uint8")):
            return f"quantized tensor {t.name!r} ({t.dtype}) not supported yet"
    if not callable(d.check):
        return None
    try:
        return d.check(node, graph)
    except (ValueError, IndexError, KeyError, TypeError, ZeroDivisionError) as e:
        return f"malformed operator ({type(e).__name__}: {e})"
    except SymbolicSize as e:          # (--dynamic: the op needs a fixed size; prepare refuses it, naming it)
        return str(e)


def set_output_shapes(graph: Graph) -> None:
    """Give the outputs of ops with an OpDef.shapes rule the shapes the op sets when it runs (the model
    may leave them unknown, e.g. TFLite_Detection_PostProcess's); a rule that fails leaves them (the
    op's check then says why)."""
    for n in graph.nodes:
        d = REGISTRY.get(n.op)
        if d is None or d.shapes is None or len(n.outputs) < d.outputs[0]:
            continue
        try:
            shapes = d.shapes(n, graph)
        except (ValueError, IndexError, KeyError, TypeError):
            continue
        for o, s in zip(n.outputs, shapes):
            if o >= 0:
                graph.t(o).shape = tuple(int(x) for x in s)


def lower(node: Node, graph: Graph):
    return REGISTRY[node.op].lower(node, graph)


def _load_all():
    """Import every module of this package: each registers its ops (and shader VARIANTS)."""
    for m in pkgutil.iter_modules(__path__):
        if m.name != "util":
            importlib.import_module(f"{__name__}.{m.name}")


_load_all()
