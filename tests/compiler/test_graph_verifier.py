"""The graph verifier (compiler/passes/verify.py): it catches each broken invariant on a deliberately
broken graph, names the pass, node and field, and passes every pass over small real models."""
from __future__ import annotations

import numpy as np
import pytest

from gpuc.compiler.ir import Graph, Node
from gpuc.compiler.options import DEFAULT
from gpuc.compiler.passes import PIPELINE, run_passes
from gpuc.compiler.passes.verify import GraphInvariantError, problems, verify
from gpuc.compiler.prepare import prepare
from helpers import models
from helpers.attention_models import attention_model


def _graph():
    """y = RELU(ADD(x, b)) with b a constant [3]."""
    g = Graph("g", [], [], [], [])
    x = g.add_tensor("x", (2, 3), "float32")
    b = g.add_const("b", np.ones(3, np.float32))
    a, y = g.add_tensor("a", (2, 3), "float32"), g.add_tensor("y", (2, 3), "float32")
    g.inputs, g.outputs = [x], [y]
    g.nodes = [Node("ADD", [x, b], [a], {"fused_activation_function": 0}, index=0), Node("RELU", [a], [y], index=1)]
    return g


def test_a_sound_graph_has_no_problems():
    assert problems(_graph()) == []


def _broken(how):
    g = _graph()
    how(g)
    found = problems(g)
    assert found, "the verifier missed it"
    return found[0]


@pytest.mark.parametrize("how, says", [
    (lambda g: g.nodes.reverse(), "RELU (operator #1): inputs[0] 'a' has no producer before it"),
    (lambda g: g.nodes[0].inputs.__setitem__(1, 99), "ADD (operator #0): inputs[1] = 99: no such tensor"),
    (lambda g: g.nodes.append(Node("RELU", [0], [3], index=2)), "RELU (operator #2): outputs[0] 'y' is also written"),
    (lambda g: g.nodes.append(g.nodes[1]), "listed twice"),
    (lambda g: g.outputs.append(g.add_tensor("z", (1,), "float32")), "graph.outputs: 'z' is made by no node"),
    (lambda g: g.aliases.__setitem__(3, 2), "outputs[0] 'y' is a view"),
    (lambda g: setattr(g.t(1), "data", np.ones(4, np.float32)), "tensor 1 'b': field data has shape [4]"),
    (lambda g: setattr(g.t(1), "data", np.ones(3, np.int32)), "tensor 1 'b': field data is int32"),
    (lambda g: setattr(g.t(2), "dtype", "float33"), "tensor 2 'a': field dtype 'float33'"),
    (lambda g: setattr(g.t(2), "shape", (2, 4)), "ADD (operator #0): outputs[0] 'a' has shape [2, 4], its shape rule "
                                                 "gives [2, 3]"),
    (lambda g: g.nodes[1].inputs.append(0), "RELU (operator #1): field inputs has 2 (the op declares 1..1)"),
    (lambda g: setattr(g.nodes[0], "fused_into", "x"), "ADD (operator #0): undeclared field(s) ['fused_into']"),
    (lambda g: setattr(g.t(0), "note", 1), "tensor 0: undeclared field(s) ['note']"),
    (lambda g: setattr(g.nodes[0].epilogue, "residual", 42), "ADD (operator #0): epilogue.residual = 42"),
    (lambda g: g.nodes[0].attrs.__setitem__(3, 1), "field attrs must be a dict keyed by strings"),
])
def test_each_broken_invariant_is_caught(how, says):
    assert says in _broken(how)


def test_the_error_names_the_pass():
    g = _graph()
    g.nodes.reverse()
    with pytest.raises(GraphInvariantError, match=r"graph 'g' after pass fuse_activation: RELU \(operator #1\)"):
        verify(g, "fuse_activation")


def test_run_passes_names_the_pass_that_broke_the_graph(monkeypatch):
    def breaks(graph):
        graph.nodes[0].outputs = [99]
    breaks.__name__ = "fuse_layer_norm"                      # (stands in for that pass)
    monkeypatch.setattr("gpuc.compiler.passes.PIPELINE",
                        [breaks if p.__name__ == "fuse_layer_norm" else p for p in PIPELINE])
    with pytest.raises(GraphInvariantError, match="after pass fuse_layer_norm: .*outputs\\[0\\] = 99"):
        run_passes(_graph(), verify=True)
    run_passes(_graph(), disabled=["fuse_layer_norm"], verify=True)


def test_the_models_own_shapes_are_not_a_pass_error():
    g = _graph()
    g.t(2).shape = (2, 4)                          # as imported: the op's check / LiteRT's resize deal with it
    run_passes(g, verify=True)


@pytest.mark.parametrize("name", ["block", "mixed", "ln", "lstm", "hard_swish", "conv_mean_softmax", "attention"])
@pytest.mark.parametrize("opts", [{}, {"precision": "fp16"}, {"max_batch": 3}], ids=["fp32", "fp16", "batch3"])
def test_every_pass_keeps_real_models_sound(name, opts):
    model = {"block": models.block_model, "mixed": models.mixed_model, "ln": models.ln_model,
             "lstm": lambda: models.lstm_model()[0], "hard_swish": models.hard_swish_model,
             "conv_mean_softmax": models.conv_mean_softmax, "attention": lambda: attention_model()[0]}[name]()
    prepare(model, DEFAULT.replace(verify_passes=True, **opts), warn=False)   # raises GraphInvariantError if not


@pytest.mark.parametrize("name", ["mlp_small_f32.tflite", "microwakeword_okay_nabu.tflite", "llm/qwen_tiny_q8_kv128.tflite"])
def test_every_pass_keeps_shared_models_sound(models_dir, name):
    if not (models_dir / name).exists():
        pytest.skip(f"{name} not among the shared models")
    prepare((models_dir / name).read_bytes(), DEFAULT.replace(verify_passes=True), warn=False)
