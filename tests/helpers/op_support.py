"""What the op registry says about one node of a test model (independent of CPU fallback)."""
from __future__ import annotations


def gpu_reason(model: bytes, op_index: int = 0) -> str | None:
    """None if the registry runs operator `op_index` on the GPU, else its reason (after the IR passes,
    as the compiler checks it)."""
    from gpuc.compiler import ops
    from gpuc.compiler.frontend.importer import load_tflite
    from gpuc.compiler.passes import run_passes
    graph = load_tflite(model).main
    run_passes(graph)
    node = next(n for n in graph.nodes if n.index == op_index)
    return ops.unsupported_reason(node, graph)
