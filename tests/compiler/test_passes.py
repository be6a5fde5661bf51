"""IR passes: each does its rewrite, and numerics are identical with any pass disabled."""
import numpy as np
import pytest

import gpuc
from gpuc.compiler.frontend.importer import load_tflite
from gpuc.compiler.passes import pass_names, run_passes
from gpuc.runtime.bundle import read_bundle
from helpers.builder import ModelBuilder
from helpers.data import rnd
from helpers.litert import run_litert
from helpers.models import block_model

pytest.importorskip("vulkan")


def test_pipeline_fuses_and_views():
    graph = load_tflite(block_model()).main
    run_passes(graph)
    ops = [(n.op, n.attrs.get("fused", [])) for n in graph.nodes]
    assert ops == [("CONV_2D", ["RELU6"]), ("CONV_2D", ["ADD"]), ("FULLY_CONNECTED", ["LOGISTIC"])]
    assert len(graph.aliases) == 1


def test_each_pass_can_be_disabled_without_changing_results():
    model = block_model()
    x = rnd((1, 6, 6, 4), 9)
    ref = run_litert(model, [x])[0]
    dispatches = {}
    for disabled in [[], *[[p] for p in pass_names()], pass_names()]:
        bundle = gpuc.compile(model, disable_passes=disabled)
        dispatches[tuple(disabled)] = len(read_bundle(bundle).dispatches)
        with gpuc.load(bundle) as m:
            out = m.run([x])[0]
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
    assert dispatches[()] == 3 and dispatches[tuple(pass_names())] == 7


def test_residual_not_fused_when_conv_output_is_reused():
    mb = ModelBuilder()
    x = mb.input("x", [1, 4, 4, 2])
    c = mb.tensor("c", [1, 4, 4, 2])
    mb.op("CONV_2D", [x, mb.const("w", rnd((2, 1, 1, 2), 1)), mb.const("b", rnd((2,), 2))], [c],
          padding="VALID", stride_h=1, stride_w=1)
    a = mb.tensor("a", [1, 4, 4, 2])
    mb.op("ADD", [c, x], [a])
    mb.output(a)
    mb.output(c)
    graph = load_tflite(mb.finish()).main
    run_passes(graph)
    assert [n.op for n in graph.nodes] == ["CONV_2D", "ADD"]


@pytest.mark.parametrize("items", [1, 3])
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_rank2_fc_added_to_rank3_residual_fuses_as_residual(precision, items):
    """A converter's FC without keep_num_dims ([T, N]) added to a [1, T, N] residual: the same elements in
    the same order, so the ADD becomes the gemm's residual epilogue (not a chain, which keeps the
    workgroup-scope tensor-core kernel out); results as LiteRT's, batched too."""
    mb = ModelBuilder()
    x = mb.input("x", [1, 5, 8])
    r = mb.input("r", [1, 5, 12])
    a = mb.tensor("a", [5, 12])
    mb.op("FULLY_CONNECTED", [x, mb.const("w", rnd((12, 8), 3)), mb.const("b", rnd((12,), 4))], [a],
          keep_num_dims=False)
    y = mb.tensor("y", [1, 5, 12])
    mb.op("ADD", [a, r], [y], fused_activation_function="RELU")
    mb.output(y)
    model = mb.finish()
    graph = load_tflite(model).main
    graph.items = items                  # (batched: the ADD reads the FC's [items * 5, 12] rows through a view)
    run_passes(graph)
    [fc] = graph.nodes
    assert fc.op == "FULLY_CONNECTED" and fc.epilogue.residual is not None and not fc.epilogue.chain
    xs = [rnd((items, 5, 8), 5), rnd((items, 5, 12), 6)]
    refs = [run_litert(model, [xs[0][i:i + 1], xs[1][i:i + 1]])[0] for i in range(items)]
    bundle = gpuc.compile(model, cache=False, precision=precision, max_batch=items)
    assert len(read_bundle(bundle).dispatches) == 1
    with gpuc.load(bundle) as m:
        out = m.run(xs)[0]
    tol = 1e-5 if precision == "fp32" else 1e-2
    np.testing.assert_allclose(out, np.concatenate(refs), rtol=tol, atol=tol * np.abs(np.concatenate(refs)).max())


def test_unknown_pass_is_a_clear_error():
    from gpuc.errors import GpucError
    with pytest.raises(GpucError, match="unknown pass"):
        gpuc.compile(block_model(), disable_passes=["no_such_pass"])


def test_fold_dequantize_fp16_and_int8_per_channel():
    from gpuc.compiler.passes.fold import fold_constants
    mb = ModelBuilder()
    x = mb.input("x", [1, 4])
    w16 = mb.const("w16", (rnd((3, 4), 1)).astype(np.float16))
    w = mb.tensor("w", [3, 4])
    mb.op("DEQUANTIZE", [w16], [w])
    q = mb.const("q", np.array([[-128, 0, 5], [127, 3, -7]], np.int8), quant=([0.5, 0.25, 2.0], [0, 1, -1], 1))
    b = mb.tensor("b", [2, 3])
    mb.op("DEQUANTIZE", [q], [b])
    y = mb.tensor("y", [1, 3])
    mb.op("FULLY_CONNECTED", [x, w, -1], [y])
    mb.output(y)
    mb.output(b)
    g = load_tflite(mb.finish()).main
    fold_constants(g)
    assert [n.op for n in g.nodes] == ["FULLY_CONNECTED"]
    np.testing.assert_array_equal(g.t(g.nodes[0].inputs[1]).data, rnd((3, 4), 1).astype(np.float16).astype(np.float32))
    np.testing.assert_array_equal(g.t(g.outputs[1]).data, [[-64, -0.25, 12], [63.5, 0.5, -12]])


@pytest.mark.parametrize("inputs,outputs,msg", [
    ([-1], None, "required input 0 is absent"),
    ([], None, "has 0 inputs"),
    ([0, 0], None, "has 2 inputs"),
])
def test_malformed_operators_are_refused_by_the_registry(inputs, outputs, msg):
    from gpuc.errors import UnsupportedError
    mb = ModelBuilder()
    x = mb.input("x", [1, 4])
    y = mb.tensor("y", [1, 4])
    mb.op("SOFTMAX", [x if i == 0 else i for i in inputs] if inputs != [-1] else [-1], [y], beta=1.0)
    mb.output(y)
    with pytest.raises(UnsupportedError, match=msg):
        gpuc.compile(mb.finish(), cache=False)


@pytest.mark.parametrize("op,pads,padding", [
    ("CONV_2D", [[0, 0], [1, 1], [1, 1], [0, 0]], "VALID"),
    ("CONV_2D", [[0, 0], [0, 1], [2, 0], [0, 0]], "VALID"),
    ("DEPTHWISE_CONV_2D", [[0, 0], [1, 2], [0, 1], [0, 0]], "SAME"),
])
def test_pad_folds_into_conv(op, pads, padding):
    mb = ModelBuilder()
    x = mb.input("x", [1, 6, 5, 4])
    ph, pw = 6 + sum(pads[1]), 5 + sum(pads[2])
    p = mb.tensor("p", [1, ph, pw, 4])
    mb.op("PAD", [x, mb.const("pads", np.array(pads, np.int32))], [p])
    oh, ow = (ph - 2, pw - 2) if padding == "VALID" else (ph, pw)
    y = mb.tensor("y", [1, oh, ow, 4])
    if op == "CONV_2D":
        mb.op(op, [p, mb.const("w", rnd((4, 3, 3, 4), 1)), mb.const("b", rnd((4,), 2))], [y],
              padding=padding, stride_h=1, stride_w=1)
    else:
        mb.op(op, [p, mb.const("w", rnd((1, 3, 3, 4), 1)), mb.const("b", rnd((4,), 2))], [y],
              padding=padding, stride_h=1, stride_w=1, depth_multiplier=1)
    mb.output(y)
    model = mb.finish()
    g = load_tflite(model).main
    run_passes(g)
    assert [n.op for n in g.nodes] == [op]
    x0 = rnd((1, 6, 5, 4), 3)
    with gpuc.load(gpuc.compile(model, cache=False)) as m:
        np.testing.assert_allclose(m.run([x0])[0], run_litert(model, [x0])[0], rtol=1e-4, atol=1e-5)
