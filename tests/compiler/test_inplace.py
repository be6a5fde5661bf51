"""In-place execution (passes/inplace.py plan_in_place + memory_plan.py share_in_place): an output takes
its input's bytes when the input dies at that kernel; results are bit-identical and the arena shrinks
where the peak sits on such a kernel."""
import numpy as np
import pytest

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.memory_plan import lower_bound, plan_arena, share_in_place

RNG = np.random.default_rng(3)


def test_share_in_place_takes_only_safe_pairs():
    # 0: a = conv(x); 1: b = exp(a); 2: c = add(b, a2) where a2 stays live; 3: d = gemm(res=c, x=c)
    ks = [Kernel("gemm", [("out_", 1), ("x", 0), ("w", 9)], 1), Kernel("unary_math", [("out_", 2), ("x", 1)], 1),
          Kernel("binary_math", [("out_", 3), ("a", 2), ("b", 5)], 1),
          Kernel("gemm", [("out_", 4), ("x", 3), ("w", 9), ("res", 3)], 1),
          Kernel("binary_math", [("out_", 6), ("a", 5), ("b", 4)], 1)]
    life = {0: (-1, 0), 1: (0, 1), 2: (1, 2), 3: (2, 3), 4: (3, 4), 5: (-1, 4), 6: (4, 5)}
    nbytes = {t: 1024 for t in life}
    dtypes = {t: "float32" for t in life}
    shared = share_in_place(ks, life, nbytes, dtypes, [(2, 1), (3, 2), (4, 3), (3, 5), (6, 5)], keep={0, 5, 6})
    # b over a, c over b (so over a); d may not take c (the gemm also reads c as its A matrix);
    # nothing over the graph input 5
    assert shared == {2: 1, 3: 1}
    assert life[1] == (0, 3) and 2 not in life and 3 not in life
    plan, arena = plan_arena(life, nbytes)
    assert arena <= 3 * 1024 and lower_bound(life, nbytes) <= arena


def test_share_in_place_needs_equal_bytes_and_dtype():
    ks = [Kernel("unary_math", [("out_", 1), ("x", 0)], 1), Kernel("unary_math", [("out_", 2), ("x", 1)], 1)]
    life = {0: (-1, 0), 1: (0, 1), 2: (1, 2)}
    assert share_in_place(ks, dict(life), {0: 64, 1: 64, 2: 64}, {0: "float32", 1: "float16", 2: "float16"},
                          [(1, 0), (2, 1)], keep={0}) == {2: 1}
    assert share_in_place(ks, dict(life), {0: 64, 1: 128, 2: 64}, {0: "float32", 1: "float32", 2: "float32"},
                          [(2, 1)], keep=set()) == {}


pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.runtime.bundle import read_bundle  # noqa: E402
from helpers.builder import ModelBuilder  # noqa: E402
from helpers.litert import run_litert  # noqa: E402


def build(model, **opts):
    b = gpuc.compile(model, cache=False, **opts)
    return b, read_bundle(b).stats


def run(b, xs):
    with gpuc.load(b) as m:
        return [np.array(o) for o in m.run(xs)]


def peak_at_elementwise_model():
    """x -> 1x1 conv widening to 32 channels -> EXP -> NEG -> 1x1 conv narrowing: the peak is at EXP."""
    mb = ModelBuilder()
    x = mb.input("x", [1, 16, 16, 2])
    c = mb.tensor("c", [1, 16, 16, 32])
    mb.op("CONV_2D", [x, mb.const("w1", RNG.uniform(-0.3, 0.3, (32, 1, 1, 2)).astype(np.float32)),
                            mb.const("b1", np.zeros(32, np.float32))], [c],
          padding="VALID", stride_h=1, stride_w=1)
    e = mb.tensor("e", [1, 16, 16, 32])
    mb.op("EXP", [c], [e])
    s = mb.tensor("s", [1, 16, 16, 32])
    mb.op("SIN", [e], [s])
    y = mb.tensor("y", [1, 16, 16, 1])
    mb.op("CONV_2D", [s, mb.const("w2", RNG.uniform(-0.3, 0.3, (1, 1, 1, 32)).astype(np.float32)),
                            mb.const("b2", np.zeros(1, np.float32))], [y],
          padding="VALID", stride_h=1, stride_w=1)
    mb.output(y)
    return mb.finish()


@pytest.mark.parametrize("fuse", [True, False])
def test_in_place_lowers_the_arena_and_keeps_results(fuse):
    model = peak_at_elementwise_model()
    xs = [RNG.uniform(-1, 1, (1, 16, 16, 2)).astype(np.float32)]
    extra = ["fuse_gemm_epilogue"] + ([] if fuse else ["fuse_elementwise"])     # (the conv would absorb the chain)
    b_on, s_on = build(model, disable_passes=extra)
    b_off, s_off = build(model, disable_passes=extra + ["plan_in_place"])
    assert s_on["in_place"] >= 1 and s_off["in_place"] == 0
    big = 16 * 16 * 32 * 4
    assert s_off["arena_bytes"] >= 2 * big and s_on["arena_bytes"] <= big + 4096 < s_off["arena_bytes"] * 0.6
    on, off = run(b_on, xs), run(b_off, xs)
    np.testing.assert_array_equal(on[0], off[0])
    np.testing.assert_allclose(on[0], run_litert(model, xs)[0], rtol=1e-4, atol=1e-5)


def test_residual_epilogue_writes_over_its_residual():
    mb = ModelBuilder()
    x = mb.input("x", [1, 6, 6, 4])
    r = mb.tensor("r", [1, 6, 6, 4])
    mb.op("ABS", [x], [r])
    c = mb.tensor("c", [1, 6, 6, 4])
    mb.op("CONV_2D", [r, mb.const("w", RNG.uniform(-1, 1, (4, 3, 3, 4)).astype(np.float32)),
                           mb.const("b", np.zeros(4, np.float32))], [c],
          padding="SAME", stride_h=1, stride_w=1)
    d = mb.tensor("d", [1, 6, 6, 4])
    mb.op("DEPTHWISE_CONV_2D", [c, mb.const("wd", RNG.uniform(-1, 1, (1, 3, 3, 4)).astype(np.float32)),
                               mb.const("bd", np.zeros(4, np.float32))], [d],
          padding="SAME", stride_h=1, stride_w=1, depth_multiplier=1)
    a = mb.tensor("a", [1, 6, 6, 4])
    mb.op("ADD", [d, r], [a])            # fused into the depthwise epilogue; r dies there
    y = mb.tensor("y", [1, 6, 6, 4])
    mb.op("NEG", [a], [y])
    mb.output(y)
    model = mb.finish()
    xs = [RNG.uniform(-1, 1, (1, 6, 6, 4)).astype(np.float32)]
    keep = ["fuse_gemm_epilogue"]        # (the depthwise would absorb the NEG and write the graph output)
    b_on, s_on = build(model, disable_passes=keep)
    b_off, _ = build(model, disable_passes=keep + ["plan_in_place"])
    assert s_on["in_place"] >= 1
    np.testing.assert_array_equal(run(b_on, xs)[0], run(b_off, xs)[0])
    np.testing.assert_allclose(run(b_on, xs)[0], run_litert(model, xs)[0], rtol=1e-4, atol=1e-5)


def test_fp16_in_place_keeps_results():
    import os
    if os.environ.get("GPUC_DISABLE_FP16"):
        pytest.skip("fp16 storage disabled")
    model = peak_at_elementwise_model()
    xs = [RNG.uniform(-1, 1, (1, 16, 16, 2)).astype(np.float32)]
    keep = ["fuse_gemm_epilogue"]        # (the conv would absorb the chain)
    b_on, s_on = build(model, precision="fp16", disable_passes=keep)
    b_off, s_off = build(model, precision="fp16", disable_passes=keep + ["plan_in_place"])
    assert s_on["in_place"] >= 1 and s_on["arena_bytes"] < s_off["arena_bytes"]
    np.testing.assert_array_equal(run(b_on, xs)[0], run(b_off, xs)[0])
