"""The fusion passes' pattern kit (compiler/pattern.py) on tiny hand-built graphs: the matcher's
captures and constraints, commutation, repeated names, Views, and the rewrite driver."""
from __future__ import annotations

import numpy as np

from gpuc.compiler.ir import Graph, Node
from gpuc.compiler.pattern import (Matcher, Op, Val, Views, act_free, const, f32, ints, no_act, one_output,
                                   plain_f32, rewrite, scalar, scalar_const)


def _graph():
    """x -> EXP -> e; y = MUL(e, 2.0); z = RESHAPE(y); out = ADD(z, x)."""
    g = Graph("g", [], [], [], [])
    x = g.add_tensor("x", (2, 3), "float32")
    e, y, z, out = (g.add_tensor(n, (2, 3), "float32") for n in "eyzo")
    two = g.add_const("two", np.asarray(2.0, np.float32))
    shape = g.add_const("shape", np.asarray([2, 3], np.int32))
    g.inputs, g.outputs = [x], [out]
    g.nodes = [Node("EXP", [x], [e]), Node("MUL", [two, e], [y]), Node("RESHAPE", [y, shape], [z]),
               Node("ADD", [z, x], [out])]
    return g


def test_captures_nodes_and_tensors_through_commuted_inputs():
    g = _graph()
    pat = Op("MUL", Op("EXP", Val("x"), name="exp", uses=1), Val("c", where=lambda m, t: scalar(m.g, t) is not None),
             name="mul", commute=True)
    m = Matcher(g).match(pat, g.nodes[1])
    assert m is not None and m["exp"] is g.nodes[0] and m["c"] == 5 and m["x"] == 0 and m["mul"] is g.nodes[1]
    assert [n.op for n in m.nodes] == ["MUL", "EXP"]
    no_commute = Op("MUL", Op("EXP", Val()), Val())
    assert Matcher(g).match(no_commute, g.nodes[1]) is None


def test_uses_constraint_and_graph_outputs():
    g = _graph()
    pat = Op("MUL", Val(), Op("EXP", Val(), uses=1))
    assert Matcher(g).match(pat, g.nodes[1]) is not None
    g.outputs.append(g.nodes[0].outputs[0])           # e is now a graph output: no longer single use
    assert Matcher(g).match(pat, g.nodes[1]) is None


def test_a_name_captured_twice_must_be_the_same_tensor():
    g = _graph()
    same_x = Op("ADD", Views(Op("MUL", Val(), Op("EXP", Val("x"))), ("RESHAPE",)), Val("x"))
    m = Matcher(g).match(same_x, g.nodes[3])
    assert m is not None and [n.op for n in m.nodes] == ["ADD", "RESHAPE", "MUL", "EXP"]
    g.nodes[3].inputs[1] = g.nodes[1].outputs[0]      # ADD(z, y): y is not EXP's input
    assert Matcher(g).match(same_x, g.nodes[3]) is None


def test_views_are_optional_and_checks_backtrack():
    g = _graph()
    direct = Op("ADD", Views(Op("RESHAPE", name="r"), ("SQUEEZE",)), Val())
    assert Matcher(g).match(direct, g.nodes[3])["r"] is g.nodes[2]
    seen = []
    pat = Op("ADD", Val("a"), Val("b"), commute=True, check=lambda m, match: seen.append(match["a"]) or match["a"] == 0)
    assert Matcher(g).match(pat, g.nodes[3])["b"] == g.nodes[2].outputs[0]
    assert seen == [g.nodes[2].outputs[0], 0]          # the first order failed its check: the swapped one matched


def test_prefix_and_exact_input_counts():
    g = _graph()
    assert Matcher(g).match(Op("RESHAPE", Val()), g.nodes[2]) is None
    assert Matcher(g).match(Op("RESHAPE", Val(), prefix=True), g.nodes[2]) is not None


def test_rewrite_driver_applies_rules_in_program_order():
    g = _graph()
    order = []

    def fold_scale(graph, match):                     # MUL(c, EXP(x)) -> EXP(x) (a toy rewrite)
        order.append(match["mul"].op)
        match["exp"].outputs = list(match["mul"].outputs)
        graph.nodes.remove(match["mul"])

    rules = [(Op("MUL", Val(), Op("EXP", Val(), name="exp", uses=1), name="mul"), fold_scale),
             (Op("ADD"), lambda graph, match: False)]     # declines: not counted
    assert rewrite(g, rules) == 1
    assert [n.op for n in g.nodes] == ["EXP", "RESHAPE", "ADD"] and order == ["MUL"]
    assert rewrite(g, rules) == 0


def test_repeat_sweeps_until_nothing_changes():
    g = Graph("g", [], [], [], [])
    t = [g.add_tensor(f"t{i}", (4,), "float32") for i in range(5)]
    g.inputs, g.outputs = [t[0]], [t[4]]
    g.nodes = [Node("NEG", [t[i]], [t[i + 1]]) for i in range(4)]

    def merge(graph, match):                          # NEG(NEG(a)) -> a view: one pair per match
        inner, outer = match["inner"], match["outer"]
        outer.op, outer.inputs = "IDENTITY", list(inner.inputs)
        graph.nodes.remove(inner)

    pat = Op("NEG", Op("NEG", Val(), name="inner", uses=1), name="outer")
    assert rewrite(g, [(pat, merge)], repeat=True) == 2
    assert [n.op for n in g.nodes] == ["IDENTITY", "IDENTITY"]


def test_shared_predicates():
    g = _graph()
    assert scalar(g, 5) == 2.0 and scalar(g, 5, "float16") is None and scalar(g, 6) is None and scalar(g, -1) is None
    assert ints(g, 6) == [2, 3] and ints(g, 5) is None
    assert plain_f32(g.t(0)) and not plain_f32(g.t(6))
    g.t(0).is_variable = True
    assert plain_f32(g.t(0)) and not plain_f32(g.t(0), variables=False)
    assert act_free(Node("ADD", [], [], {"fused_activation_function": "NONE"}))
    assert not act_free(Node("ADD", [], [], {"fused_activation_function": 1}))


def test_constraint_predicates_in_patterns():
    g = _graph()
    pat = Op("MUL", Val("c", where=(const, scalar_const)), Val("e", where=f32), name="mul", where=(one_output, no_act))
    assert Matcher(g).match(pat, g.nodes[1])["c"] == 5
    g.nodes[1].attrs["fused_activation_function"] = 1
    assert Matcher(g).match(pat, g.nodes[1]) is None
    assert Matcher(g).match(Op("RESHAPE", Val(), Val(where=scalar_const)), g.nodes[2]) is None    # [2, 3]: int32
