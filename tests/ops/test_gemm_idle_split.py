"""fp16 gemms whose tensor-core tiles leave SMs idle (ops/gemm_candidates.py underfilled: a batch-1 transformer FC
of 197 rows): they carry the small-M tile plans as measured candidates and may split K across workgroups
(ops/gemm_dispatch.py, gemm_split.IDLE), except where the workgroup-scope kernel takes them with tiles that
fill the GPU; the split's emulated tensor-core partials give the right sums on lavapipe."""
import numpy as np
import pytest

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import gemm_candidates as cand
from gpuc.compiler.ops import gemm_coopmat as cm
from gpuc.compiler.ops import gemm_split
from gpuc.compiler.prepare import prepare
from helpers.builder import ModelBuilder


def fc_model(M, K, N, seed=0):
    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    x = mb.input("x", [1, M, K])
    h = mb.tensor("h", [1, M, K])
    mb.op("ADD", [x, x], [h])                           # an fp16 activation feeds the FC, as in a network
    y = mb.tensor("y", [1, M, N])
    mb.op("FULLY_CONNECTED", [h, mb.const("w", rng.normal(0, 1 / np.sqrt(K), (N, K)).astype(np.float32)),
                              mb.const("b", rng.normal(0, 0.1, N).astype(np.float32))], [y], keep_num_dims=True)
    mb.output(y)
    return mb.finish(), rng.uniform(-1, 1, (1, M, K)).astype(np.float32)


def gemms(model):
    p = prepare(model, dict(precision="fp16"), warn=False)
    return [k for k in p.program if isinstance(k, Kernel) and k.template == "gemm"]


def test_an_fc_leaving_sms_idle_splits_with_tensor_core_partials(monkeypatch):
    M, K, N = 197, 3072, 768                            # coop_cost's 128 x 128 plan: 12 tiles
    assert cm.worthwhile(M, N, K) and cand.underfilled(M, N, K, 1)
    model, _ = fc_model(M, K, N)
    partial, reduce = gemms(model)
    s = partial.defines["GROUPS"]
    assert s > 1 and reduce.defines["SPLIT_REDUCE"] == s
    assert partial.variants and all(v.name == "coopmat" and v.measured for v in partial.variants)
    monkeypatch.setattr(gemm_split, "IDLE", False)
    [whole] = gemms(model)                              # (off: one dispatch, its plans and the small-M ones)
    names = [(v.name, v.measured) for v in whole.variants]
    assert ("coopmat", False) in names and sum(m for _, m in names) >= 2 + len(cand.small_candidates(M, N, K, 1))


def test_coopmat2_tiles_that_fill_the_gpu_keep_it_whole():
    M, K, N = 197, 768, 3072                            # coopmat2's 64 x 64 tiles: 192 of them
    assert cand.underfilled(M, N, K, 1)
    [whole] = gemms(fc_model(M, K, N)[0])
    assert whole.variants[0].name == "coopmat2" and not whole.variants[0].measured


def test_idle_split_sums_on_the_emulated_tensor_cores(compile_options):
    pytest.importorskip("vulkan")
    import gpuc
    M, K, N = 64, 2048, 1536                            # 24 tiles of 64 x 64, 2^27.6 products
    assert cm.worthwhile(M, N, K) and cand.underfilled(M, N, K, 1)
    compile_options(coopmat_emulate=True)
    model, x = fc_model(M, K, N, seed=3)
    bundle = gpuc.compile(model, cache=False, precision="fp16")
    with gpuc.load(bundle) as m:
        names = [m.bundle.shaders[d.shader].name for d in m.bundle.dispatches]
        out = m.run([x])[0]
    assert names.count("gemm+coopmat") == 1 and len(names) == 3     # ADD, the partials, the reduce
    p = prepare(model, dict(precision="fp16"), warn=False)
    w = next(t for t in p.graph.tensors if t.name == "w").data
    b = next(t for t in p.graph.tensors if t.name == "b").data
    h = (2 * x[0]).astype(np.float16).astype(np.float64)
    ref = h @ w.astype(np.float16).astype(np.float64).T + b
    np.testing.assert_allclose(out[0], ref, rtol=0, atol=2e-2 * np.abs(ref).max())
