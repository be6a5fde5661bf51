"""IR passes: small named functions over a Graph, run in PIPELINE order.

Each pass takes the graph and mutates it in place.  `gpuc compile --disable-pass NAME` skips one.
"""
from __future__ import annotations

from gpuc.compiler.ir import Graph
from gpuc.compiler.passes.attention import fuse_attention
from gpuc.compiler.passes.batching import batch_items
from gpuc.compiler.passes.softmax_chain import fuse_softmax_chain
from gpuc.compiler.passes.verify import model_problems, verify as check_graph
from gpuc.compiler.passes.transpose_pairs import compose_transposes, sink_transposes, transpose_into_matmul
from gpuc.compiler.passes.ew_fusion import fuse_elementwise, fuse_reduce_prologue
from gpuc.compiler.passes.fold import fold_constants
from gpuc.compiler.passes.gemm_epilogue import fuse_gemm_epilogue
from gpuc.compiler.passes.fusion import fold_pad, fold_pad_pool, fuse_activation, fuse_add_epilogue, reshape_as_view
from gpuc.compiler.passes.inplace import plan_in_place
from gpuc.compiler.passes.layer_norm import fuse_layer_norm
from gpuc.compiler.ops.ln_fold import fold_layer_norm
from gpuc.compiler.passes.movement_fold import fold_movement
from gpuc.compiler.ops.channel_pad import pad_conv_channels
from gpuc.compiler.passes.precision import plan_fp16_storage
from gpuc.compiler.passes.quant import simulate_quantization
from gpuc.compiler.passes.rfft import rfft_as_matmul
from gpuc.compiler.ops.kv_write import fold_update_slices
from gpuc.compiler.ops.q8_fusion import fuse_q8_gemv
from gpuc.compiler.ops.rope import fuse_rope
from gpuc.errors import GpucError


def eliminate_dead_nodes(graph: Graph) -> None:
    """Drop nodes none of whose outputs reach a graph output or a variable (persistent state)."""
    live = set(graph.outputs) | {t.id for t in graph.tensors if t.is_variable}
    keep = []
    for n in reversed(graph.nodes):
        if any(o in live for o in n.outputs):
            keep.append(n)
            live.update(i for i in list(n.inputs) + n.epilogue.reads() if i >= 0)
    graph.nodes = keep[::-1]


def batch_native(graph: Graph) -> None:
    """--max-batch N: every dispatch computes the N items (passes/batching.py); when the graph cannot be
    rewritten, graph.batch_refusal says why and the runtime replicates the batch-1 program per item."""
    if graph.items > 1:
        graph.batch_refusal = batch_items(graph, graph.items)
        if graph.batch_refusal is not None:
            graph.items = 1


PIPELINE = [fold_constants, rfft_as_matmul, batch_native, simulate_quantization, eliminate_dead_nodes, fuse_layer_norm,
            fuse_softmax_chain, fuse_attention, fuse_rope,
            fold_update_slices, fuse_q8_gemv, sink_transposes, compose_transposes,
            transpose_into_matmul, pad_conv_channels, fold_movement, reshape_as_view, fold_pad, fuse_add_epilogue,
            fuse_activation, fold_layer_norm, plan_fp16_storage, fold_pad_pool, fuse_elementwise, fuse_reduce_prologue,
            fuse_gemm_epilogue, plan_in_place]


# steps over the lowered program rather than the graph, skippable by the same --disable-pass
PROGRAM_PASSES = ["schedule_dispatches"]      # compiler/schedule.py, applied by driver.build_bundle


def pass_names() -> list[str]:
    return [p.__name__ for p in PIPELINE] + PROGRAM_PASSES


def run_passes(graph: Graph, disabled=(), verify: bool | None = None) -> None:
    """Run PIPELINE but the `disabled` passes.  verify: check the graph (passes/verify.py) before the
    first pass and after each, naming the pass that broke it (None: the verify_passes compile option)."""
    unknown = set(disabled) - set(pass_names())
    if unknown:
        raise GpucError(f"unknown pass(es) {sorted(unknown)}; passes are: {', '.join(pass_names())}")
    if verify is None:
        from gpuc.compiler.options import current
        verify = current().verify_passes
    if verify:
        known, sound = model_problems(graph), set()
        check_graph(graph, "(none: the graph as imported)", known, sound)
    for p in PIPELINE:
        if p.__name__ not in disabled:
            if graph.dynamic_dims:
                _run_dynamic(p, graph)
            else:
                p(graph)
            if verify:
                check_graph(graph, p.__name__, known, sound)


def _run_dynamic(p, graph: Graph) -> None:
    """--dynamic: a pass that needs a fixed size somewhere (compiler/symbolic.py SymbolicSize), or whose
    decisions would differ at some size (a failed guard), is skipped, the graph as it was before it (the
    passes only make the program faster); the stats name it."""
    import copy
    from gpuc.compiler import sym_scope, symbolic
    from gpuc.compiler.guards import GuardFailed, check_guards
    ctx = sym_scope.current()
    saved, guards = copy.deepcopy(graph.__dict__), len(ctx.guards)
    try:
        with sym_scope.site(f"pass {p.__name__}"):  # (the message names it)
            p(graph)
        check_guards(ctx, first=guards)   # its decisions hold at every size, or it is undone
    except (symbolic.SymbolicSize, GuardFailed) as e:
        from gpuc.compiler.options import current
        if current().dynamic_debug == 2:
            raise
        graph.__dict__.clear()
        graph.__dict__.update(saved)
        del ctx.guards[guards:]
        ctx.skipped.append(str(e))
