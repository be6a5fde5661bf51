"""Split-K across workgroups (ops/gemm_split.py, gemm.comp SPLIT_REDUCE): a gemm forced to S partial
dispatches plus a reduce gives LiteRT's results with every epilogue (bias, fused activation, residual,
fused chain), in fp32 and --precision fp16, in batch-native bundles at every batch size; shapes it
cannot express (K not a multiple of 8 S, convolution channels not in multiples of 4 S, runtime weights)
stay one dispatch.  Implicit-GEMM convolutions: tests/ops/test_gemm_split_conv.py."""
from __future__ import annotations

import numpy as np
import pytest

import gpuc
from gpuc.compiler.ops import gemm_split
from gpuc.runtime.bundle import read_bundle
from helpers.builder import ModelBuilder
from helpers.litert import run_litert
from helpers.runner import assert_batch_prefixes, assert_rel_close, run_uncached

RNG = np.random.default_rng(11)


@pytest.fixture
def force(compile_options):
    def set_(s):
        compile_options(split_k=s)
    return set_


def fc_model(M=6, N=20, K=512, tail="none", act="NONE"):
    mb = ModelBuilder()
    x = mb.input("x", [M, K])
    y = mb.tensor("y", [M, N])
    mb.op("FULLY_CONNECTED", [x, mb.const("w", RNG.normal(0, 0.2, (N, K)).astype(np.float32)),
                              mb.const("b", RNG.normal(0, 0.2, N).astype(np.float32))], [y],
          fused_activation_function=act)
    xs = [RNG.uniform(-1, 1, (M, K)).astype(np.float32)]
    if tail == "residual":
        r = mb.input("r", [M, N])
        xs.append(RNG.uniform(-1, 1, (M, N)).astype(np.float32))
        z = mb.tensor("z", [M, N])
        mb.op("ADD", [y, r], [z])
        y = z
    elif tail == "gelu":
        z = mb.tensor("z", [M, N])
        mb.op("GELU", [y], [z])
        y = z
    mb.output(y)
    return mb.finish(), xs


def run(model, xs, **opts):
    """(the first output, how many dispatches the bundle has)."""
    out, b = run_uncached(model, xs, **opts)
    return out, len(b.dispatches)


@pytest.mark.parametrize("s", [2, 4, 8])
@pytest.mark.parametrize("tail,act", [("none", "NONE"), ("none", "RELU6"), ("residual", "RELU"), ("gelu", "NONE")])
def test_split_matches_litert(force, s, tail, act):
    model, xs = fc_model(tail=tail, act=act)
    force(s)
    out, n = run(model, xs)
    assert n == 2                                  # partials + reduce (residual and GELU in the reduce)
    assert_rel_close(out, run_litert(model, xs)[0])
    force(1)
    one, n1 = run(model, xs)
    assert n1 == 1
    assert_rel_close(out, one)


def test_split_fp16(force):
    model, xs = fc_model(M=9, N=24, K=256, tail="residual")
    force(4)
    out, n = run(model, xs, precision="fp16")
    assert n == 2
    assert_rel_close(out, run_litert(model, xs)[0], rel=2e-2)


def test_split_batch_native(force):
    """--max-batch 4: each batch b in 1..4 runs the prefix of both dispatches and gives the items' rows."""
    mb = ModelBuilder()
    x = mb.input("x", [1, 5, 256])
    y = mb.tensor("y", [1, 5, 12])
    mb.op("FULLY_CONNECTED", [x, mb.const("w", RNG.normal(0, 0.2, (12, 256)).astype(np.float32)),
                              mb.const("b", RNG.normal(0, 0.2, 12).astype(np.float32))], [y], keep_num_dims=True)
    mb.output(y)
    model = mb.finish()
    force(4)
    data = gpuc.compile(model, cache=False, max_batch=4)
    assert len(read_bundle(data).dispatches) == 2
    assert_batch_prefixes(data, model, RNG.uniform(-1, 1, (4, 1, 5, 256)).astype(np.float32), (1, 3, 4))


def test_split_only_where_groups_express_it(force):
    force(4)
    model, xs = fc_model(K=300)                    # 300 is not a multiple of 8 * 4
    assert run(model, xs)[1] == 1
    mb = ModelBuilder()                            # a 3x3 convolution whose 36 channels split 4 ways are not
    x = mb.input("x", [1, 6, 6, 36])               # multiples of 4 (vec4 gather; K = 324 would split)
    y = mb.tensor("y", [1, 6, 6, 8])
    mb.op("CONV_2D", [x, mb.const("w", RNG.normal(0, 0.2, (8, 3, 3, 36)).astype(np.float32)),
                      mb.const("b", np.zeros(8, np.float32))], [y], padding="SAME", stride_h=1, stride_w=1)
    mb.output(y)
    assert len(read_bundle(gpuc.compile(mb.finish(), cache=False)).dispatches) == 1
    mb = ModelBuilder()                            # runtime weights (B_T)
    a = mb.input("a", [4, 64])
    w = mb.input("w", [8, 64])
    y = mb.tensor("y", [4, 8])
    mb.op("FULLY_CONNECTED", [a, w, -1], [y])
    mb.output(y)
    assert len(read_bundle(gpuc.compile(mb.finish(), cache=False)).dispatches) == 1


def test_model_splits_only_for_a_clear_gain():
    """The planner's own pick: a big-tile gemm (plenty of workgroups) stays one dispatch."""
    from gpuc.compiler.ops.gemm_plan import gemm_cost, plan_gemm
    s, _ = gemm_split.split_of(4096, 512, 512, lambda m, n, k, g: plan_gemm(m, n, k, g, True, True, False),
                               lambda q, m, n, k, g: gemm_cost(q, m, n, k, g, True, True, False))
    assert s == 1
