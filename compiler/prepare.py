"""The compile front half, written once: import -> resource variables -> passes -> GPU/CPU placement
-> clustering -> lowering.  `gpuc compile` (driver.py), `gpuc inspect` and `gpuc verify` call
`prepare`; the WHILE / IF subgraphs lowering meets go through `prepare_graph`, the same steps on
one graph, once each (`Lowering.subgraph`, called by control_flow.py).

The result is a lowered program: kernels (GPU dispatches), host steps (CPU nodes), labels and jumps
in program order, over the main graph's tensors.  The back half (driver.build_bundle) plans memory,
packs weights and emits shaders and steps.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from gpuc import progress
from gpuc.compiler import ops, partition, sym_scope, symbolic
from gpuc.compiler.compile_inputs import DEFAULT_OPTIONS, MODEL_BYTES_TYPES
from gpuc.compiler.guards import check_guards
from gpuc.compiler import dynamic as dyn
from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.control_flow import CONTROL_OPS, check_subgraph, lower_control
from gpuc.compiler.frontend.importer import load_tflite
from gpuc.compiler.ir import Graph, Model, Node
from gpuc.compiler.ops import fact
from gpuc.compiler.ops.math import words
from gpuc.compiler.ops.shape import copy_kernel
from gpuc.compiler.options import CompileOptions, current, using
from gpuc.compiler.passes import run_passes
from gpuc.compiler.passes.quant import apply_fake_quant
from gpuc.compiler.passes.variables import resolve_variables
from gpuc.compiler.shapes import dynamic_items, specialize
from gpuc.errors import GpucError, UnsupportedError


@dataclass
class Front:
    """One graph after `prepare_graph`."""
    cpu: dict                   # id(node) -> why the GPU cannot run it, for the nodes placed on the CPU
    warnings: list              # one line per CPU node (kept in the bundle's stats)
    ops: int                    # nodes after resolving variables, before the passes
    exposed: list = field(default_factory=list)     # expose_intermediates: (node, tensor), program order


def prepare_graph(model: Model, graph: Graph, disabled=(), *, warn: bool = True,
                  expose_intermediates: bool = False) -> Front:
    """Variables, passes, placement and clustering of `graph` (one of `model`'s), in place.  Raises
    UnsupportedError naming the nodes neither the GPU nor the CPU can run."""
    sub = "" if graph is model.main else f" of subgraph {graph.name!r}"
    resolve_variables(model, graph)          # resource variables -> persistent tensors; CALL_ONCE evaluated
    ops.set_output_shapes(graph)             # outputs an op sizes itself when it runs (detection post-processing)
    n_ops = len(graph.nodes)
    run_passes(graph, disabled)
    exposed = []
    if expose_intermediates:                 # every node output becomes a graph output (gpuc verify --per-op)
        exposed = [(n, o) for n in graph.nodes for o in n.outputs if o not in graph.inputs]
        graph.outputs = list(dict.fromkeys(graph.outputs + [o for _, o in exposed]))
    placed = partition.place(graph, warn=warn, where=sub)     # no GPU kernel -> numpy CPU kernel (warned)
    if placed.bad:
        where = f"subgraph {graph.name!r}: " if sub else ""
        raise UnsupportedError(where + partition.unsupported_message(placed.bad))
    partition.cluster(graph, placed.cpu)     # as few CPU segments as the dependencies allow
    return Front(placed.cpu, placed.warnings, n_ops, exposed)


def estimate_flops(node: Node, graph: Graph) -> int:
    """The op's flops fact (multiply-adds count 2; elementwise work 1 per output element); one per
    output element for an op without one."""
    rule = fact(node.op, "flops")
    return rule(node, graph) if callable(rule) else graph.t(node.outputs[0]).size


def output_copies(graph: Graph) -> list[Kernel]:
    """Graph outputs that are constants or graph inputs get their own arena copy."""
    kernels = []
    for pos, tid in enumerate(graph.outputs):
        t = graph.t(tid)
        if t.is_const or tid in graph.inputs:
            new = graph.add_tensor(t.name, t.shape, t.dtype, quant=t.quant)
            graph.outputs[pos] = new
            src, dst = words(graph, tid), words(graph, new)       # 1-byte dtypes move as whole words
            n = graph.t(src).size
            kernels.append(copy_kernel(src, dst, [n], [1], [1], label=f"output copy of {t.name}"))
    return kernels


class Lowering:
    """The lowering of one model: the WHILE / IF subgraphs met (prepared once each), the nesting
    depth, the CPU-fallback warnings of subgraph nodes, and how many nodes became GPU kernels."""
    MAX_DEPTH = 32

    def __init__(self, model: Model | None, disabled=(), warn: bool = True):
        self.model, self.disabled, self.warn = model, tuple(disabled), warn
        self.prepared: dict[int, tuple[Graph, dict] | None] = {}    # subgraph index -> (graph, its CPU nodes)
        self.depth = 0
        self.warnings: list[str] = []
        self.gpu_nodes = 0

    def subgraph(self, gi: int) -> tuple[Graph, dict]:
        """Subgraph gi through prepare_graph (once): (graph, its CPU placement)."""
        if gi not in self.prepared:
            g = self.model.subgraphs[gi]
            check_subgraph(g)
            self.prepared[gi] = None                     # recursion guard
            front = prepare_graph(self.model, g, self.disabled, warn=self.warn)
            self.warnings += front.warnings
            self.prepared[gi] = (g, front.cpu)
        if self.prepared[gi] is None:
            raise UnsupportedError(f"subgraph {self.model.subgraphs[gi].name!r} calls itself (recursive control flow)")
        return self.prepared[gi]

    def lower(self, graph: Graph, nodes, cpu: dict) -> list:
        """Program items of `nodes` (of `graph`) in order: nodes in `cpu` become host steps, WHILE /
        IF inline their subgraphs between jumps (control_flow.py), the others their kernels."""
        broken = current().break_op          # test hook (CompileOptions.break_op): miscompile one op on purpose
        self.gpu_nodes += sum(1 for n in nodes if id(n) not in cpu and n.op not in CONTROL_OPS)
        items = []
        for n in nodes:
            if id(n) in cpu:
                items.append(partition.host_op(n, graph))
                continue
            if n.op in CONTROL_OPS:
                if self.model is None:
                    raise UnsupportedError(f"{n.label()}: control flow needs the whole model")
                self.depth += 1
                if self.depth > self.MAX_DEPTH:
                    raise UnsupportedError(f"{n.label()}: control flow nests more than {self.MAX_DEPTH} deep")
                try:
                    items += lower_control(n, graph, self)
                finally:
                    self.depth -= 1
                continue
            with sym_scope.site(n.label()):
                try:
                    ks = apply_fake_quant(n, graph, ops.lower(n, graph))
                except symbolic.SymbolicSize as e:
                    if current().dynamic_debug:
                        raise
                    from gpuc.compiler.sym_shapes import dynamic_tensor
                    raise UnsupportedError(f"--dynamic: {n.label()} (input {dynamic_tensor(n, graph)}) cannot take "
                                           f"a size known only at run time yet: {e}") from None
            if ks:
                ks[0].flops = symbolic.hint(estimate_flops(n, graph))   # (a dynamic size: at its bound)
            if broken and (n.op == broken or broken in n.attrs.get("fused", ())):   # (also inside a fused node)
                for k in ks:
                    k.defines["GPUC_TEST_BROKEN"] = 1
            items += ks
        return items


def lower_graph(graph: Graph, cpu: dict | None = None, lowering: Lowering | None = None) -> list:
    """The program of a prepared graph: its nodes' items, then copies for outputs that are constants
    or inputs.  Without `lowering` the graph may hold no WHILE / IF."""
    return (lowering or Lowering(None)).lower(graph, graph.nodes, cpu or {}) + output_copies(graph)


@dataclass
class Prepared:
    model: Model
    graph: Graph                # the main graph, lowered: program tensors are its tensors
    front: Front                # its CPU placement, warnings, exposed intermediates
    program: list               # Kernels, HostOps, Labels and Jumps in program order (compiler/ir.py)
    lowering: Lowering          # the subgraphs WHILE / IF called, their warnings
    source_tensors: int         # tensors the model itself has (passes and lowering add more after them)

    def stats(self) -> dict:
        """The bundle's front-half stats: ops, gpu_nodes, warnings (when any)."""
        warnings = self.front.warnings + self.lowering.warnings
        batch = ({"batch": "native"} if self.graph.items > 1 else
                 {"batch": "replicated", "batch_refusal": self.graph.batch_refusal} if self.graph.batch_refusal else {})
        return {"ops": self.front.ops, "gpu_nodes": self.lowering.gpu_nodes, **batch,
                **({"warnings": warnings} if warnings else {})}


def prepare(source, options: dict | None = None, *, warn: bool = True, expose_intermediates: bool = False) -> Prepared:
    """.tflite bytes (or an imported Model, e.g. one a test edited) -> the lowered program of its main
    graph.  options: precision and disable_passes as in compile (gpuc.compiler.normalize_options);
    warn: print each CPU-fallback warning; expose_intermediates: every node output becomes a graph output.
    A CompileOptions is used whole (in force while preparing); with a dict the rest is current()'s."""
    if isinstance(options, CompileOptions):
        with using(options):
            return prepare(source, options.bundle_options(), warn=warn, expose_intermediates=expose_intermediates)
    opts = dict(DEFAULT_OPTIONS, **(options or {}))
    progress.stage("importing the model")
    model = load_tflite(bytes(source)) if isinstance(source, MODEL_BYTES_TYPES) else source
    graph = model.main
    specialize(graph, opts.get("input_shapes"))   # -1 dims take concrete shapes; shapes downstream recomputed
    graph.precision = opts["precision"]
    batch_specs, dim_specs = dyn.split(graph, opts.get("dynamic"))
    if dim_specs:                            # --dynamic off the batch axis: symbolic sizes (compiler/dynamic.py)
        if batch_specs or int(opts.get("max_batch", 1)) > 1:
            raise UnsupportedError("--dynamic on the batch axis (or --max-batch) together with another dynamic "
                                   "axis is not supported yet")
        names, hints, dims = dyn.setup(graph, dim_specs)
        ctx = sym_scope.begin(names, hints)
        dyn.propagate_symbolic(graph, dims)
        graph.dynamic_dims = [(graph.t(t).name, a) for t, a in dims]
    n_tensors = len(graph.tensors)
    dynamic = dynamic_items(graph, batch_specs)     # --dynamic on the batch axis: its bound
    if dynamic > 1 and opts.get("max_batch", 1) not in (1, dynamic):
        raise GpucError(f"--dynamic bounds the batch by {dynamic}, --max-batch by {opts['max_batch']}: give one")
    graph.items = max(int(opts.get("max_batch", 1)), dynamic)    # passes/batching.py: one program for the items
    if graph.items > 1 and "batch_native" in opts["disable_passes"]:
        if dynamic > 1:
            raise GpucError("--dynamic needs the batch_native pass (it is disabled)")
        graph.items = 1                      # --max-batch replicates the batch-1 program per item
    progress.stage(f"running passes ({len(graph.nodes)} ops)")
    front = prepare_graph(model, graph, opts["disable_passes"], warn=warn, expose_intermediates=expose_intermediates)
    if dynamic > 1 and graph.batch_refusal:
        raise UnsupportedError(f"--dynamic {', '.join(opts['dynamic'])}: {graph.batch_refusal}")
    if dim_specs and front.cpu:
        n = next(n for n in graph.nodes if id(n) in front.cpu)
        raise UnsupportedError(f"--dynamic: {n.label()} would run on the CPU ({front.cpu[id(n)]}); a dynamic "
                               "dim needs every op on the GPU")
    progress.stage("lowering")
    lowering = Lowering(model, opts["disable_passes"], warn)
    program = lower_graph(graph, front.cpu, lowering)
    if dim_specs:
        check_guards(ctx)                    # every decision made at the bound holds at every size
    return Prepared(model, graph, front, program, lowering, n_tensors)
