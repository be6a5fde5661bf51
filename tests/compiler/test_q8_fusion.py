"""fuse_q8_gemv (compiler/ops/q8_fusion.py): an odml.rms_norm composite read only by int8-weight FCs is
normalized inside their gemm_q8 prologue (no RMS_NORM dispatch), and litert-torch's MLP gate / up FCs
with silu(gate) * up are one gemm_q8 dispatch (GLU).  Checked against LiteRT's default CPU path (XNNPACK's
dynamic-range FC, which quantizes each normalized row as gemm_q8 does) and against gpuc without the pass;
forms it must not take (the norm read elsewhere, up read elsewhere) keep their dispatches and still match."""
from __future__ import annotations

import numpy as np
import pytest
from flatbuffers import flexbuffers

from helpers.builder import ModelBuilder, with_subgraphs
from helpers.litert import run_litert
from helpers.q8_layers import q8_fc, silu_gate

pytest.importorskip("vulkan")

import gpuc  # noqa: E402
from gpuc.runtime.bundle import read_bundle  # noqa: E402

D, F, Q = 48, 40, 24          # hidden, MLP width, qkv width
RNG = np.random.default_rng(7)


def _q8(n, k):
    w = RNG.normal(0, k ** -0.5, (n, k)).astype(np.float32)
    s = (np.abs(w).max(1) / 127).astype(np.float32)
    return np.clip(np.round(w / s[:, None]), -127, 127).astype(np.int8), (s, 0, 0)


def _rms_sub(m) -> ModelBuilder:
    sb = ModelBuilder()
    x, w = sb.input("x", [1, m, D]), sb.input("w", [D])
    names = iter(range(100))

    def op(o, ins, shape, **kw):
        y = sb.tensor(f"s{next(names)}", shape)
        sb.op(o, ins, [y], **kw)
        return y
    ms = op("MEAN", [op("MUL", [x, x], [1, m, D]), sb.const("ax", np.array([-1], np.int32))], [1, m, 1],
            keep_dims=True)
    r = op("RSQRT", [op("ADD", [ms, sb.const("e", np.array([1e-6], np.float32))], [1, m, 1])], [1, m, 1])
    sb.output(op("MUL", [op("MUL", [x, r], [1, m, D]), w], [1, m, D]))
    return sb


def model(m=1, norm_out=False, up_out=False, up_bias=False) -> bytes:
    """h -> RMS_NORM -> qkv FC (bias) and, through a second norm, gate / up FCs -> silu(gate) * up.
    norm_out: the second norm's output is a model output too; up_out: so is up's."""
    mb = ModelBuilder()
    names = iter(range(100))

    def t(shape):
        return mb.tensor(f"t{next(names)}", shape)

    def op(o, ins, shape, **kw):
        y = t(shape)
        mb.op(o, ins, [y], **kw)
        return y

    def norm(x, k):
        y = t([1, m, D])
        mb.operators.append({"opcode_index": mb.opcode("STABLEHLO_COMPOSITE"), "inputs": np.int32([x, wn[k]]),
                             "outputs": np.int32([y]),
                             "builtin_options2": ("StableHLOCompositeOptions", {
                                 "name": "odml.rms_norm", "decomposition_subgraph_index": 1,
                                 "composite_attributes": np.frombuffer(flexbuffers.Dumps({}), np.uint8)})})
        return y

    def fc(x, n, bias=False):
        q, quant = _q8(n, D)
        b = mb.const(f"b{next(names)}", RNG.normal(0, 0.1, n).astype(np.float32)) if bias else -1
        return op("FULLY_CONNECTED", [x, mb.const(f"w{next(names)}", q, quant=quant), b], [1, m, n],
                  keep_num_dims=True)
    h = mb.input("h", [1, m, D])
    wn = [mb.const(f"wn{k}", (1 + 0.1 * RNG.standard_normal(D)).astype(np.float32)) for k in range(2)]
    qkv = fc(norm(h, 0), Q, bias=True)
    x = norm(op("ADD", [h, h], [1, m, D]), 1)
    gate, up = fc(x, F), fc(x, F, bias=up_bias)
    y = op("MUL", [op("MUL", [gate, op("LOGISTIC", [gate], [1, m, F])], [1, m, F]), up], [1, m, F])
    for o in [qkv, y] + ([x] if norm_out else []) + ([up] if up_out else []):
        mb.output(o)
    return with_subgraphs(mb, _rms_sub(m))


def _run(bundle, xs):
    with gpuc.load(bundle) as mod:
        return mod.run(xs)


def _labels(bundle) -> list[str]:
    return [d.label for d in read_bundle(bundle).dispatches]


@pytest.mark.parametrize("m,norm_out,up_out,up_bias,fused", [
    (1, False, False, True, (0, 1)),          # decode: both norms folded, gate / up one dispatch
    (3, False, False, False, (0, 1)),         # several rows
    (70, False, False, True, (0, 1)),         # prefill: rows quantized once, 64 x 64 output tiles
    (1, True, True, False, (1, 0)),           # the norm and up read elsewhere: kept
])
def test_matches_litert(m, norm_out, up_out, up_bias, fused):
    data = model(m, norm_out, up_out, up_bias)
    h = (RNG.normal(0, 1, (1, m, D)) + RNG.normal(0, 1, (1, m, 1))).astype(np.float32)
    bundle = gpuc.compile(data)
    labels = _labels(bundle)
    norms = sum("RMS_NORM" in s for s in labels)
    fcs = sum("FULLY_CONNECTED" in s and "rows quantized" not in s for s in labels)
    assert sum("rows quantized" in s for s in labels) == (fcs if m >= 16 else 0)     # (prefill: quantized once)
    assert norms == fused[0] and fcs == (2 if fused[1] else 3), labels
    got = _run(bundle, [h])
    ref = run_litert(data, [h], default=True)
    plain = _run(gpuc.compile(data, disable_passes=["fuse_q8_gemv"]), [h])
    for g, r, p in zip(got, ref, plain):
        scale = np.abs(r).max()
        assert np.abs(g - r).max() <= 1e-5 * scale        # the same integers: float rounding only
        assert np.abs(g - p).max() <= 1e-5 * scale


def _one_row_model(k, n, glu):
    """x [1, k] -> FC (bias) or, glu, silu(FC(x, Wg)) * FC(x, Wu) (one gemm_q8 GLU dispatch)."""
    mb = ModelBuilder()
    x = mb.input("x", [1, k])

    def fc(name, bias):
        q, (scales, _, _) = _q8(n, k)
        return q8_fc(mb, x, name, q, scales, RNG.normal(0, 1, n).astype(np.float32) if bias else None)
    y = fc("g", True)
    if glu:
        y = silu_gate(mb, y, fc("u", False), n)
    mb.output(y)
    return mb.finish()


@pytest.mark.parametrize("sms,words,min_tpr,glu", [
    (132, 8, 32, False),          # the H100 plan: few channels a workgroup, one batch
    (2, 8, 32, False),            # a small GPU: several channels a slot, batches loaded one ahead
    (2, 8, 4, True),              # a short row: 4 invocations a channel (sums through shared atomics), GLU
])
def test_one_row_plans(monkeypatch, sms, words, min_tpr, glu):
    """gemm_q8's one-row (FLAT) path over a long row (several weight words an invocation) under
    workgroup plans of several shapes (_flat_plan): the same integers as LiteRT's hybrid FC."""
    from gpuc.compiler.ops import gemm_q8
    monkeypatch.setattr(gemm_q8, "GPU_SMS", sms)
    monkeypatch.setattr(gemm_q8, "FLAT_WORDS", words)
    monkeypatch.setattr(gemm_q8, "MIN_TPR", min_tpr)
    k, n = (128, 400) if glu else (4200, 40)
    local, tpr, rn, hb = gemm_q8._flat_plan(n, -(-k // 16), 2 if glu else 1)
    assert rn // (local // tpr) > hb if not glu and sms == 2 else True     # several batches a slot
    assert tpr < 8 if min_tpr < 8 else True
    data = _one_row_model(k, n, glu)
    xv = RNG.normal(0, 1, (1, k)).astype(np.float32)
    bundle = gpuc.compile(data, cache=False)          # (the cache key has no planning constants)
    assert sum("FULLY_CONNECTED" in s for s in _labels(bundle)) == 1
    (got,), (ref,) = _run(bundle, [xv]), run_litert(data, [xv], default=True)
    assert np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max()


def _residual_model(k, n):
    """x [1, k] -> FC (bias, RELU) + r: the one-row path with a residual epilogue."""
    mb = ModelBuilder()
    x, r = mb.input("x", [1, k]), mb.input("r", [1, n])
    q, quant = _q8(n, k)
    y, z = mb.tensor("y", [1, n]), mb.tensor("z", [1, n])
    mb.op("FULLY_CONNECTED", [x, mb.const("w", q, quant=quant), mb.const("b", RNG.normal(0, 1, n).astype(np.float32))],
          [y], fused_activation_function="RELU")
    mb.op("ADD", [y, r], [z])
    mb.output(z)
    return mb.finish()


def _epilogue_cases(k, n) -> list:
    """(model, inputs) of the one-row path's epilogues: an RMS prologue, GLU and bias (model), and a
    bias, RELU and residual over a [1, k] row (_residual_model)."""
    return [(model(1, up_bias=True), [(RNG.normal(0, 1, (1, 1, D)) + 0.5).astype(np.float32)]),
            (_residual_model(k, n), [RNG.normal(0, 1, (1, k)).astype(np.float32),
                                     RNG.normal(0, 1, (1, n)).astype(np.float32)])]


def _same_bits_and_litert(monkeypatch, cases, constants):
    """Each (model, inputs) of `cases` compiled with each of the two sets of gemm_q8 planning `constants`
    gives bit-identical outputs, which match LiteRT's default CPU path."""
    from gpuc.compiler.ops import gemm_q8
    for data, xs in cases:
        outs = []
        for c in constants:
            for name, value in c.items():
                monkeypatch.setattr(gemm_q8, name, value)
            outs.append(_run(gpuc.compile(data, cache=False), xs))      # (the cache key has no planning constants)
        for a, b, r in zip(*outs, run_litert(data, xs, default=True)):
            np.testing.assert_array_equal(b, a)
            assert np.abs(b - r).max() <= 1e-5 * np.abs(r).max()


@pytest.mark.parametrize("plan", [None, (64, 32, 128, 4)])     # (the planner's; more channels than invocations)
def test_one_row_load_order_is_exact(monkeypatch, plan):
    """The one-row path's load orders (FLAT_XFIRST: the row before the weights; FLAT_EPF: the epilogue's
    operands before phase 1) give bit-identical results to the old order, with an RMS prologue, GLU,
    bias and a residual, and with a workgroup of fewer invocations than channels (two each)."""
    from gpuc.compiler.ops import gemm_q8
    if plan:
        monkeypatch.setattr(gemm_q8, "_flat_plan", lambda n, kq, per, row_bytes=None: plan)
    _same_bits_and_litert(monkeypatch, _epilogue_cases(72, 200), [dict(FLAT_XFIRST=o, FLAT_EPF=o) for o in (0, 1)])


def test_short_row_plan_is_exact(monkeypatch):
    """_flat_plan's short-row plan (a channel's whole row in one batch: one subgroup a channel, small
    workgroups) on a 4-SM device: picked for these shapes, the same bits as the general plan
    (SHORT_LOCAL 0) and LiteRT's results, with an RMS prologue, GLU, bias and a residual."""
    from gpuc.compiler.ops import gemm_q8
    monkeypatch.setattr(gemm_q8, "GPU_SMS", 4)
    assert gemm_q8._flat_plan(40, 4, 1) == (128, 32, 4, 1) and gemm_q8._flat_plan(40, 3, 2) == (128, 32, 4, 1)
    assert gemm_q8._flat_plan(24, 3, 1) == (64, 32, 2, 1)
    _same_bits_and_litert(monkeypatch, _epilogue_cases(64, 40), [dict(SHORT_LOCAL=128), dict(SHORT_LOCAL=0)])


def test_row_plan_candidate_is_exact(monkeypatch):
    """A long one-row FC (896 x 4864, bias, RELU, residual) carries _flat_plan's FLAT_ROW_BYTES_ALT plan as a
    measured candidate (`q8_row_plan`: more workgroups, fewer channels each) with its own grid; chosen (as a
    measurement would choose it), it gives the planner's kernel's bits, which match LiteRT's default CPU path."""
    from gpuc.compiler.ops import gemm_q8
    from gpuc.runtime import tuning
    k, n = 4864, 896
    assert gemm_q8._flat_plan(n, k // 16, 1) != gemm_q8._flat_plan(n, k // 16, 1, gemm_q8.FLAT_ROW_BYTES_ALT)
    data = _residual_model(k, n)
    xs = [RNG.normal(0, 1, (1, k)).astype(np.float32), RNG.normal(0, 1, (1, n)).astype(np.float32)]
    bundle = gpuc.compile(data, cache=False)
    b = read_bundle(bundle)
    (vi, v), = [(i, v) for i, v in enumerate(b.variants) if v.name == "q8_row_plan"]
    assert v.measured and v.groups != b.dispatches[v.dispatch].groups
    outs = []
    for chosen in (False, True):
        monkeypatch.setattr(tuning, "choose", lambda *a, **k: {v.dispatch: vi} if chosen else None)
        with gpuc.load(bundle) as mod:
            assert (mod.bundle.dispatches[v.dispatch].groups == v.groups) == chosen
            outs.append(mod.run(xs))
    ref = run_litert(data, xs, default=True)
    for a, f, r in zip(*outs, ref):
        np.testing.assert_array_equal(f, a)
        assert np.abs(a - r).max() <= 1e-5 * np.abs(r).max()
