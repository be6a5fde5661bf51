"""A LayerNorm folded into the FULLY_CONNECTED layers that read it (one dispatch fewer per LayerNorm: at batch 1
a dispatch costs a few microseconds whatever its size, and pre-norm transformer blocks and CNN blocks of a
depthwise convolution, LayerNorm and MLP put a LayerNorm before their first FC).

With per-row statistics mu, rs = 1 / sqrt(var + eps) of A's rows (over the K inputs of the FC):
    LN(A) @ W + b = rs * (A @ W' - mu * c) + b',   W' = gamma * W (row k scaled by gamma[k]),
    c[n] = sum_k W'[k, n],  b' = beta @ W + b.
The gemm (shaders/gemm.comp LN_FOLD) sums the A values its K loop stages anyway into mu and rs of its tile's
rows and applies the first term in its epilogue before the bias; everything after (activation, residual,
chain) is unchanged.  W' is rounded to float16 under --precision fp16 before c is summed, so c is the column sums
of the weights the kernel multiplies in either storage.

`fold_layer_norm` (the graph pass, --precision fp16) moves each LAYER_NORM (passes/layer_norm.py) whose output
only FULLY_CONNECTED layers with tensor-core kernels read as their input into them (attrs LN_ATTR);
`folded_fc` lowers such an FC: one gemm with the fold where its sizes are fixed, its rows load as vec4 and
it has tensor-core kernels, else the LayerNorm and the FC as two dispatches, as before the pass.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.ir import Graph, Node
from gpuc.compiler.symbolic import is_sym

LN_ATTR = "ln_fold"
FC_OP, LN_OP = "FULLY_CONNECTED", "LAYER_NORM"


def _fits(graph: Graph, ln: Node, fc: Node, y: int) -> bool:
    from gpuc.compiler.ops import gemm_q8
    if fc.op != FC_OP or not fc.inputs or fc.inputs[0] != y or y in fc.inputs[1:] or y in fc.epilogue.reads():
        return False
    if LN_ATTR in fc.attrs or fc.attrs.get(gemm_q8.ATTR) or len(fc.inputs) < 2 or fc.inputs[1] < 0:
        return False
    w, x = graph.t(fc.inputs[1]), graph.t(ln.inputs[0])
    d = int(ln.attrs["norm_size"])
    if not (w.is_const and np.dtype(w.dtype).kind == "f" and len(w.shape) == 2 and w.shape[1] == d
            and len(x.shape) >= 1 and x.shape[-1] == d and d % 4 == 0 and not any(is_sym(s) for s in x.shape)
            and np.dtype(x.dtype).kind == "f"):
        return False
    return tensor_cores(x.size // d, w.shape[0], d)


def tensor_cores(m: int, n: int, k: int) -> bool:
    """Whether the folded gemm gets the small-M cooperative-matrix candidates (--precision fp16,
    gemm_candidates.small_m: batch-1 transformer FCs): there the fold paid on the H100 (2026-11-27, batch 1:
    a 7x7-depthwise CNN 0.763 -> 0.729 ms, a windowed-attention transformer 0.957 -> 0.923); the plain
    kernel's folded FCs took 2-14 us longer than the LayerNorm dispatch they saved (the CNN at fp32
    1.09 -> 1.18 ms).  Bigger gemms (batch 32, the
    regular tile families and the workgroup-scope kernel, which has no fold) keep the LayerNorm dispatch
    until the fold is measured there."""
    from gpuc.compiler.ops import gemm_candidates
    from gpuc.compiler.options import current
    return gemm_candidates.small_m(m, n, k) or current().coopmat_emulate     # (tests: emulated kernels, any shape)


def fold_layer_norm(graph: Graph) -> None:
    """Move each LAYER_NORM whose output only FULLY_CONNECTED inputs read into those FCs (module docstring);
    under --precision fp16 only, where those FCs get tensor-core kernels (tensor_cores)."""
    if graph.precision != "fp16":
        return
    users = graph.consumers()
    keep = set(graph.outputs) | {t.id for t in graph.tensors if t.is_variable}
    viewed = {graph.storage(v) for v in graph.aliases}
    for ln in [n for n in graph.nodes if n.op == LN_OP]:
        y = ln.outputs[0]
        readers = users.get(y, [])
        if y in keep or y in viewed or not readers or not all(_fits(graph, ln, fc, y) for fc in readers):
            continue
        for fc in readers:
            fc.inputs = [ln.inputs[0]] + list(fc.inputs[1:])
            fc.attrs[LN_ATTR] = dict(eps=float(ln.attrs["eps"]), gamma=ln.inputs[1], beta=ln.inputs[2],
                                     norm_size=int(ln.attrs["norm_size"]), label=ln.label())
        graph.nodes.remove(ln)


def folded_fc(node: Node, graph: Graph, bias, gemm_kernels, lower_fc) -> list:
    """Kernels of FULLY_CONNECTED `node` carrying LN_ATTR: the folded gemm, or LayerNorm + FC where it cannot
    be (gemm_kernels: ops/conv.py's, called with ln=(eps, column sums) and returning None where it cannot;
    lower_fc: ops/conv.py's FC lowering, for the unfolded FC -- passed in, so this module imports no conv)."""
    ln = node.attrs[LN_ATTR]
    w = graph.t(node.inputs[1])
    o, k = w.shape
    x = graph.t(node.inputs[0])
    wk = np.asarray(w.data, np.float32).T                       # [K, N]
    gamma = (np.ones(k, np.float32) if ln["gamma"] < 0
             else np.asarray(graph.t(ln["gamma"]).data, np.float32).reshape(k))
    beta = (np.zeros(k, np.float32) if ln["beta"] < 0
            else np.asarray(graph.t(ln["beta"]).data, np.float32).reshape(k))
    wf = (gamma[:, None].astype(np.float64) * wk).astype(np.float32)
    if graph.precision == "fp16":
        wf = wf.astype(np.float16).astype(np.float32)
    b = beta.astype(np.float64) @ wk.astype(np.float64)
    if bias is not None:
        b = b + np.asarray(graph.t(bias).data, np.float64).reshape(o)
    memo = graph.memo.relayout
    key = (node.inputs[1], f"ln_fold/{ln['gamma']}/{ln['beta']}/{bias}")
    if key not in memo:
        name = graph.t(node.inputs[1]).name
        memo[key] = (graph.add_const(f"{name}/ln_w", wf.T.copy()),
                     graph.add_const(f"{name}/ln_c", wf.astype(np.float64).sum(0).astype(np.float32)),
                     graph.add_const(f"{name}/ln_b", b.astype(np.float32)))
    w_id, c_id, b_id = memo[key]
    ks = gemm_kernels(w_id, wf[None], b_id, (ln["eps"], c_id))
    if ks is not None:
        return ks
    # unfolded: the LayerNorm into a tensor of its own, then the FC on it
    from gpuc.compiler.ops.layer_norm import lower_layer_norm
    t = graph.add_tensor(f"{x.name}/ln", x.shape, "float32")
    ln_node = Node(LN_OP, [node.inputs[0], ln["gamma"], ln["beta"]], [t],
                   dict(eps=ln["eps"], norm_size=ln["norm_size"]), index=node.index)
    fc = Node(node.op, [t] + list(node.inputs[1:]), list(node.outputs), {a: v for a, v in node.attrs.items()
                                                                            if a != LN_ATTR},
              node.version, node.index, node.epilogue)
    return lower_layer_norm(ln_node, graph) + lower_fc(fc, graph)
