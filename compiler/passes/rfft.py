"""rfft_as_matmul: RFFT2D read through COMPLEX_ABS / REAL / IMAG becomes matrix products on the GPU.

tf.signal.stft converts to RFFT2D (complex64 out) -> SQUEEZE -> COMPLEX_ABS.  gpuc keeps no complex
tensors on the GPU; the transform is linear, so its real and imaginary parts are two FULLY_CONNECTED
products of the flattened two innermost axes with constant DFT matrices (cos and -sin, computed in
float64 and rounded once), and COMPLEX_ABS is sqrt(re * re + im * im).  The input's innermost axes
are cropped or zero-padded to fft_length as LiteRT does.  An RFFT2D whose complex output reaches
anything other than those readers (through RESHAPE / SQUEEZE / EXPAND_DIMS), or a graph output,
stays a CPU op.  Results differ from LiteRT's (double-precision FFT, rounded to float) by the fp32
dot products' rounding: about 1e-7 relative to the largest magnitude for fft_length 256.
"""
from __future__ import annotations

import numpy as np

from gpuc.compiler.ir import Graph, Node
from gpuc.compiler.pattern import Op, rewrite
from gpuc.compiler.symbolic import is_sym

VIEWS = ("RESHAPE", "SQUEEZE", "EXPAND_DIMS")
READERS = ("COMPLEX_ABS", "REAL", "IMAG")
MAX_MATRIX = 1 << 23            # elements of each DFT matrix (fft_length 2048 -> 1025 x 2048 = 2.1M)


def dft_matrices(rows: int, cols: int, m: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Real and imaginary parts of RFFT2D over a [rows, cols] input with fft_length [m, n], as
    [m * (n // 2 + 1), rows * cols] matrices (inputs beyond fft_length have zero columns)."""
    bins = n // 2 + 1
    i = np.arange(m).reshape(m, 1, 1, 1)
    k = np.arange(bins).reshape(1, bins, 1, 1)
    p = np.arange(rows).reshape(1, 1, rows, 1)
    q = np.arange(cols).reshape(1, 1, 1, cols)
    phase = 2 * np.pi * (((i * p) % m) / m + ((k * q) % n) / n)
    inside = (p < m) & (q < n)
    re = np.where(inside, np.cos(phase), 0.0).reshape(m * bins, rows * cols)
    im = np.where(inside, -np.sin(phase), 0.0).reshape(m * bins, rows * cols)
    return re.astype(np.float32), im.astype(np.float32)


def _readers(graph: Graph, users: dict, tid: int, views: list, leaves: list) -> bool:
    """Collect the complex tensor's views and COMPLEX_ABS / REAL / IMAG readers; False if anything else reads it."""
    if tid in graph.outputs:
        return False
    for u in users.get(tid, []):
        if u.op in VIEWS and u.inputs[0] == tid and len(u.outputs) == 1:
            views.append(u)
            if not _readers(graph, users, u.outputs[0], views, leaves):
                return False
        elif u.op in READERS and len(u.inputs) == 1 and graph.t(u.outputs[0]).dtype == "float32":
            leaves.append(u)
        else:
            return False
    return True


def _plan(graph: Graph, node: Node, users: dict):
    if len(node.inputs) != 2 or len(node.outputs) != 1 or node.inputs[1] < 0:
        return None
    x, fl, y = graph.t(node.inputs[0]), graph.t(node.inputs[1]), graph.t(node.outputs[0])
    if x.dtype != "float32" or fl.data is None or fl.data.size != 2 or len(x.shape) < 2 \
            or any(is_sym(d) for d in x.shape + y.shape):
        return None
    m, n = (int(v) for v in fl.data.reshape(-1))
    rows, cols = x.shape[-2:]
    if m < 1 or n < 1 or m * (n // 2 + 1) * rows * cols > MAX_MATRIX \
            or tuple(y.shape) != tuple(x.shape[:-2]) + (m, n // 2 + 1):
        return None
    views, leaves = [], []
    if not _readers(graph, users, y.id, views, leaves) or not leaves:
        return None
    return m, n, views, leaves


def rfft_as_matmul(graph: Graph) -> None:
    rewrite(graph, [(Op("RFFT2D", name="rfft"), _lower)])


def _lower(graph: Graph, match):
    """The RFFT2D and its readers (through views) become the products and their reads (module docstring)."""
    node = match["rfft"]
    plan = _plan(graph, node, match.matcher.users)
    if plan is None:
        return False
    m, n, views, leaves = plan
    x, y = graph.t(node.inputs[0]), graph.t(node.outputs[0])
    rows, cols = x.shape[-2:]
    batch = x.size // (rows * cols)
    k = m * (n // 2 + 1)
    w_re, w_im = dft_matrices(rows, cols, m, n)
    new = []
    flat = graph.add_tensor(f"{x.name}/rfft_rows", (batch, rows * cols), "float32")
    new.append(graph.reshape_node(x.id, flat, [batch, rows * cols]))
    parts = {}
    for part, w in (("re", w_re), ("im", w_im)):
        if any(lf.op in ("COMPLEX_ABS", "REAL" if part == "re" else "IMAG") for lf in leaves):
            parts[part] = graph.add_tensor(f"{y.name}/{part}", (batch, k), "float32")
            new.append(Node("FULLY_CONNECTED", [flat, graph.add_const(f"{y.name}/dft_{part}", w), -1],
                            [parts[part]], {"fused_activation_function": 0, "keep_num_dims": False},
                            index=node.index))
    for lf in leaves:
        out = lf.outputs[0]
        if lf.op == "COMPLEX_ABS":
            sq = []
            for part in ("re", "im"):
                sq.append(graph.add_tensor(f"{y.name}/{part}_squared", (batch, k), "float32"))
                new.append(Node("MUL", [parts[part], parts[part]], [sq[-1]], {"fused_activation_function": 0},
                                index=lf.index))
            total = graph.add_tensor(f"{y.name}/abs_squared", (batch, k), "float32")
            new.append(Node("ADD", sq, [total], {"fused_activation_function": 0}, index=lf.index))
            mag = graph.add_tensor(f"{y.name}/abs", (batch, k), "float32")
            new.append(Node("SQRT", [total], [mag], index=lf.index))
            src = mag
        else:
            src = parts["re" if lf.op == "REAL" else "im"]
        new.append(graph.reshape_node(src, out, graph.t(out).shape))
    drop = {id(nd) for nd in [node] + views + leaves}
    pos = next(i for i, nd in enumerate(graph.nodes) if nd is node)
    graph.nodes = [nd for nd in graph.nodes[:pos] if id(nd) not in drop] + new + \
                  [nd for nd in graph.nodes[pos:] if id(nd) not in drop]
