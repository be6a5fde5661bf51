"""ADD_N: rewritten as the model is imported into a chain of ADD nodes, ((x0 + x1) + x2) + ..., LiteRT's
order: its kernel sums each element from x0 on, input by input (checked bit for bit, -0.0 included, by
tests/ops/test_add_n.py), and passes/ew_fusion.py makes the chain one dispatch.  LiteRT's Prepare demands at
least 2 inputs of one shape and dtype, its Eval float32 or int32 (int32 sums wrap, as ADD's); a node of any
other form is refused for that reason."""
from __future__ import annotations

from gpuc.compiler import ir
from gpuc.compiler.ops import REFUSAL_ATTR, lowered_at_import

OP = "ADD_N"
DTYPES = ("float32", "int32")


def _form(g: ir.Graph, node: ir.Node) -> str | None:
    """None when the node has LiteRT's ADD_N form, else what is wrong."""
    if len(node.inputs) < 2 or len(node.outputs) != 1 or min(node.inputs) < 0:
        return f"has {len(node.inputs)} inputs and {len(node.outputs)} outputs (expected at least 2 and 1)"
    x0, y = g.t(node.inputs[0]), g.t(node.outputs[0])
    if x0.dtype not in DTYPES:
        return f"sums {x0.dtype} (LiteRT's kernel takes float32 and int32)"
    for i in node.inputs[1:]:
        t = g.t(i)
        if t.dtype != x0.dtype or tuple(t.shape) != tuple(x0.shape):
            return f"input {t.name!r} is {t.dtype}{list(t.shape)}, the first {x0.dtype}{list(x0.shape)}"
    if y.dtype != x0.dtype or tuple(y.shape) != tuple(x0.shape):
        return f"output {y.name!r} is {y.dtype}{list(y.shape)}, the inputs {x0.dtype}{list(x0.shape)}"
    return None


@lowered_at_import(OP, how="lowered at import to a chain of ADD in LiteRT's order, ((x0 + x1) + x2) ...",
                   runs_as="ADD", dtypes=DTYPES)
def lower(g: ir.Graph, node: ir.Node) -> list[ir.Node]:
    bad = _form(g, node)
    if bad:
        node.attrs[REFUSAL_ATTR] = f"{bad}; LiteRT refuses it"
        return [node]
    y = g.t(node.outputs[0])
    acc, nodes = node.inputs[0], []
    for j, x in enumerate(node.inputs[1:], 1):
        out = node.outputs[0] if j == len(node.inputs) - 1 else g.add_tensor(f"{y.name}/add_n{j}", y.shape, y.dtype)
        nodes.append(ir.Node("ADD", [acc, x], [out], {}, 1, node.index))
        acc = out
    return nodes
