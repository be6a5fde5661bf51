"""The cooperative-matrix gemm's register epilogue (gemm.comp cm_epilogue, CM_DIRECT): full 16x16 tiles
get bias, activation, residual and a fused chain as matrix operations, each operand loaded as a matrix
(ops/epi_chain.py tile_access says how a chain input is read), and go straight to the output; edge tiles
and operands that are not a row, column or element of a matrix keep the staged epilogue.  On lavapipe the
variant runs emulated (GPUC_TEST_COOPMAT_EMULATE): its loads index the operands exactly as the real
matrix loads would (row-major with a row stride, stride 0 for a row vector, a column vector, one element),
so the offsets and strides the compiler chose are checked against LiteRT and against the staged path."""
from __future__ import annotations

import numpy as np
import pytest

import gpuc
from gpuc.compiler import normalize_options, options
from gpuc.compiler.driver import prepare_batched
from gpuc.compiler.ir import GPU
from gpuc.compiler.ops import gemm_coopmat as cm
from gpuc.compiler.ops.epi_chain import tile_access
from gpuc.compiler.ops.util import broadcast_strides
from helpers.builder import ModelBuilder
from helpers.litert import run_litert
from helpers.precision import compile_coopmat_emulated

TOL16 = 2e-2
RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def _small_tiles(monkeypatch, compile_options):
    """32 x 32 tiles of two subgroups (emulated variants of the bigger plans compile slowly on lavapipe);
    chains in the register epilogue too (coopmat_reg_chain: off by default for speed, not for correctness)."""
    monkeypatch.setattr(cm, "plan_coopmat", lambda M, N, K, G=1, lim=cm.WG_SMEM: cm.CoopPlan(2, 1, 1, 2, 32, 2))
    compile_options(coopmat_reg_chain=True)


def _index(in_shape, out_shape, ldc):
    """The element of the input each output element reads, as rows of ldc (numpy broadcasting)."""
    st = broadcast_strides(tuple(in_shape), tuple(out_shape))
    idx = np.zeros(out_shape, np.int64)
    for d, (n, s) in enumerate(zip(out_shape, st)):
        shape = [1] * len(out_shape)
        shape[d] = n
        idx = idx + (np.arange(n) * s).reshape(shape)
    return idx.reshape(-1, ldc)


def _shapes(rng):
    out = [int(rng.choice([1, 2, 3, 4, 6, 8])) for _ in range(int(rng.integers(1, 5)))]
    ins = [d if rng.random() < 0.6 else 1 for d in out][int(rng.integers(0, len(out))):]
    rows = int(np.prod(out))
    ldcs = [d for d in range(1, rows + 1) if rows % d == 0]
    return ins, out, int(rng.choice(ldcs))


def test_tile_access_is_the_broadcast_index():
    """On 400 random (input, output, row length) triples: where tile_access names a form, every element's
    index is that form's; where it names none, no row stride, column vector or single element fits."""
    rng = np.random.default_rng(0)
    named = 0
    for _ in range(400):
        ins, out, ldc = _shapes(rng)
        idx = _index(ins, out, ldc)
        m, c = np.arange(idx.shape[0])[:, None], np.arange(ldc)[None, :]
        acc = tile_access(ins, out, ldc)
        if acc is None:
            assert not any(np.array_equal(idx, m * sr + c) for sr in range(idx.size + 1))
            assert not np.array_equal(idx, m + 0 * c) and idx.any()
            continue
        named += 1
        kind, sr = acc
        want = {0: m * sr + c, 1: m + 0 * c, 2: 0 * (m + c)}[kind]
        assert np.array_equal(idx, want), (ins, out, ldc, acc)
    assert named > 100


def test_direct_store_rule(compile_options):
    d = dict(GM=64, GN=64, GK=64, GROUPS=1, LDC=64, HAS_BIAS=1, ACT=3, RESIDUAL=1, EPI_CHAIN=0, FQ=0)
    assert cm.direct_store(d)
    assert cm.direct_store(dict(d, CM_EMULATE=1))
    assert not cm.direct_store(dict(d, FQ=1))                            # fake-quant keeps the staged path
    assert not cm.direct_store(dict(d, EPI_CHAIN=1))                     # a chain input not read as a matrix
    assert cm.direct_store(dict(d, EPI_CHAIN=1, EPI_TILE=1))
    compile_options(coopmat_reg_chain=False)
    assert not cm.direct_store(dict(d, EPI_CHAIN=1, EPI_TILE=1))
    assert not cm.direct_store(dict(d, LDC=60))                          # rows not 16-byte aligned as float16
    assert not cm.direct_store(dict(d, GROUPS=2, GN=20, LDC=40))


def fc_model(tail: str, rows=(2, 24), ci=16, co=32):
    """x + x, then FULLY_CONNECTED with bias over [*rows, ci] -> [*rows, co], then `tail`: gelu (the FC's fused chain),
    layer_scale (* a per-channel constant, + a runtime residual: ConvNeXt's block end), row (+ a runtime
    [*rows, 1] tensor: a column vector), scalar (* a runtime [1] tensor), mixed (+ a runtime [1, rows[1],
    co] tensor: repeats over the first axis, not a row stride: the staged path), residual (+ runtime)."""
    mb = ModelBuilder()
    shape = list(rows) + [co]
    x = mb.input("x", list(rows) + [ci])
    x2 = mb.tensor("x2", list(rows) + [ci])            # (an internal tensor: stored as float16, as the variant
    mb.op("ADD", [x, x], [x2])                         # needs its A operand)
    a = mb.tensor("a", shape)
    w = mb.const("w", RNG.normal(0, 0.3, (co, ci)).astype(np.float32))
    mb.op("FULLY_CONNECTED", [x2, w, mb.const("b", RNG.normal(0, 0.2, co).astype(np.float32))], [a],
          keep_num_dims=True)
    xs = [RNG.uniform(-1, 1, list(rows) + [ci]).astype(np.float32)]
    n = [0]

    def op(kind, ins):
        n[0] += 1
        t = mb.tensor(f"t{n[0]}", shape)
        mb.op(kind, ins, [t])
        return t

    def runtime(name, s):
        xs.append(RNG.uniform(-1, 1, s).astype(np.float32))
        return mb.input(name, s)

    if tail == "gelu":
        y = op("GELU", [a])
    elif tail == "layer_scale":
        y = op("ADD", [op("MUL", [a, mb.const("gamma", RNG.uniform(0.5, 1.5, co).astype(np.float32))]),
                       runtime("r", shape)])
    elif tail == "row":
        y = op("ADD", [op("GELU", [a]), runtime("r", list(rows) + [1])])
    elif tail == "scalar":
        y = op("MUL", [op("GELU", [a]), runtime("s", [1])])
    elif tail == "mixed":
        y = op("ADD", [a, runtime("r", [1, rows[1], co])])
    else:
        y = op("ADD", [a, runtime("r", shape)])
    mb.output(y)
    return mb.finish(), xs


def _variant_defines(model, monkeypatch):
    with options.using(options.current().replace(coopmat_emulate=True)):
        p = prepare_batched(model, normalize_options({"precision": "fp16"}))
        (k,) = [k for k in p.program if k.kind == GPU and k.template == "gemm"]
        return k.variants[0].make(k).defines


def _run(gpu, data, xs):
    with gpuc.load(data, device=gpu.device) as lm:
        assert lm.bundle.stats["variants_used"] == {"coopmat": 1}
        return lm.run(xs)[0]


@pytest.mark.parametrize("tail,direct,chain", [("gelu", 1, ()), ("layer_scale", 1, ((0, 0), (0, 32))),
                                               ("row", 1, ((1, 0),)), ("scalar", 1, ((2, 0),)),
                                               ("mixed", 0, None), ("residual", 1, None)])
def test_register_epilogue_matches_staged_and_litert(gpu, monkeypatch, compile_options, tail, direct, chain):
    """Each tail takes the register epilogue where its operands allow (`direct`), reading each chain input
    in the named form; the outputs equal the staged epilogue's bit for bit and LiteRT's within fp16."""
    model, xs = fc_model(tail)
    d = _variant_defines(model, monkeypatch)
    assert d["CM_DIRECT"] == direct
    if chain is not None:
        assert tuple((d[f"EPI_CM{k}"], d[f"EPI_SR{k}"]) for k in range(1, d["EPI_NIN"])) == chain
    monkeypatch.setenv("GPUC_VARIANTS", "coopmat=force")
    out = _run(gpu, compile_coopmat_emulated(model), xs)
    ref = run_litert(model, xs)[0]
    assert np.isfinite(out).all()
    assert float(np.abs(out - ref).max()) <= TOL16 * float(np.abs(ref).max())
    compile_options(coopmat_direct=False)                       # every tile staged: the same numbers
    assert np.array_equal(_run(gpu, compile_coopmat_emulated(model), xs), out)


def test_edge_tiles_keep_the_staged_epilogue(gpu, monkeypatch, compile_options):
    """M = 2 x 21 rows and N = 40: tiles across either edge are staged, the rest direct; one result."""
    model, xs = fc_model("layer_scale", rows=(2, 21), co=40)
    assert _variant_defines(model, monkeypatch)["CM_DIRECT"] == 1
    monkeypatch.setenv("GPUC_VARIANTS", "coopmat=force")
    out = _run(gpu, compile_coopmat_emulated(model), xs)
    ref = run_litert(model, xs)[0]
    assert float(np.abs(out - ref).max()) <= TOL16 * float(np.abs(ref).max())
    compile_options(coopmat_direct=False)
    assert np.array_equal(_run(gpu, compile_coopmat_emulated(model), xs), out)
