"""Native int8 BATCH_MATMUL ("INT8_BATCH_MATMUL": compiler/ops/int8_matmul.py): bit for bit LiteRT's builtin
kernel (BUILTIN_WITHOUT_DEFAULT_DELEGATES) on random grids: adj_x / adj_y, broadcast batch dims (either side all
ones, both broadcast, ranks 2-4), nonzero RHS zero points, constant operands, every byte pair (K = 1), and
attention's int8 chain (scores, SOFTMAX, P.V)."""
import numpy as np
import pytest

pytest.importorskip("vulkan")

from helpers.builder import ModelBuilder  # noqa: E402
from helpers.int8_exact import exact as _exact, int_dot_mode, ops_after_passes as _ops, qin as _qin  # noqa: E402

I8 = "int8"


def _grid(rng, lo=0.002, hi=0.1):
    return float(np.exp(rng.uniform(np.log(lo), np.log(hi)))), int(rng.integers(-128, 128))


def _bmm(mb, a, b, ash, bsh, qo, adj_x=False, adj_y=False, name="y"):
    m = ash[-1] if adj_x else ash[-2]
    n = bsh[-2] if adj_y else bsh[-1]
    batch = list(np.broadcast_shapes(tuple(ash[:-2]), tuple(bsh[:-2])))
    y = mb.tensor(name, batch + [m, n], I8, quant=qo)
    mb.op("BATCH_MATMUL", [a, b], [y], version=4, adj_x=adj_x, adj_y=adj_y)
    return y


CASES = [   # (lhs shape, rhs shape, adj_x, adj_y, constant rhs)
    ([2, 5, 7], [2, 7, 6], False, False, False),
    ([2, 7, 5], [2, 7, 6], True, False, False),
    ([2, 5, 7], [2, 6, 7], False, True, False),
    ([3, 7, 5], [3, 6, 7], True, True, False),
    ([2, 3, 4, 9], [9, 5], False, False, False),            # rank-2 RHS: one for every batch
    ([4, 9], [2, 3, 9, 5], False, False, False),            # rank-2 LHS against a batch
    ([2, 1, 3, 8], [1, 3, 8, 5], False, False, False),      # both broadcast
    ([1, 2, 3, 8], [3, 1, 5, 8], False, True, False),
    ([2, 6, 8], [8, 4], False, False, True),                 # constant RHS
    ([2, 8, 6], [2, 4, 8], True, True, True),
    ([1, 1, 16], [1, 16, 33], False, False, False),          # a row
    # K % 4 == 0: whole words (and N % 4 == 0: 4 output columns an invocation)
    ([3, 4, 12], [12, 8], False, False, False),
    ([2, 3, 5, 12], [2, 1, 8, 12], False, True, False),
    ([2, 12, 5], [2, 12, 16], True, False, True),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}x{c[1]}-{int(c[2])}{int(c[3])}{'c' if c[4] else ''}")
def test_batch_matmul_bit_exact(gpu, case):
    ash, bsh, adj_x, adj_y, const_b = case
    rng = np.random.default_rng(abs(hash(str(case))) % 2**32)
    qa, qb = _grid(rng), _grid(rng)
    qo = _grid(rng, 0.01, 0.5)
    mb = ModelBuilder()
    a = mb.input("a", ash, I8, quant=qa)
    feeds = [_qin(rng, ash)]
    if const_b:
        b = mb.const("b", _qin(rng, bsh), quant=qb)
    else:
        b = mb.input("b", bsh, I8, quant=qb)
        feeds.append(_qin(rng, bsh))
    mb.output(_bmm(mb, a, b, ash, bsh, qo, adj_x, adj_y))
    _exact(gpu, mb.finish(), feeds, "INT8_BATCH_MATMUL")


@pytest.mark.parametrize("adj_x", [False, True])
def test_batch_matmul_constant_lhs_bit_exact(gpu, adj_x):
    """A constant int8 LHS (adj_x: transposed at compile time) against an activation RHS broadcast over its batch."""
    rng = np.random.default_rng(3)
    ash = [2, 8, 5] if adj_x else [2, 5, 8]
    mb = ModelBuilder()
    a = mb.const("a", _qin(rng, ash), quant=(0.03, 7))
    b = mb.input("b", [8, 6], I8, quant=(0.05, -3))
    mb.output(_bmm(mb, a, b, ash, [8, 6], (0.2, 4), adj_x=adj_x))
    _exact(gpu, mb.finish(), [_qin(rng, (8, 6))], "INT8_BATCH_MATMUL")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_batch_matmul_every_byte_pair_bit_exact(gpu, seed):
    """K = 1: [256, 1] x [1, 256] gives every product of an LHS byte and an RHS byte (seed 3: grids on which
    LiteRT's float scale product and the double one give different outputs)."""
    rng = np.random.default_rng(seed)
    qa, qb, qo = _grid(rng, 0.001, 0.1), _grid(rng, 0.001, 0.1), _grid(rng, 0.0001, 0.5)
    if seed == 3:
        qa, qb, qo = (0.0450033, -77), (0.0520367, 122), (0.2606309, 102)
    mb = ModelBuilder()
    a = mb.input("a", [256, 1], I8, quant=qa)
    b = mb.input("b", [1, 256], I8, quant=qb)
    mb.output(_bmm(mb, a, b, [256, 1], [1, 256], qo))
    every = np.arange(-128, 128, dtype=np.int8)
    _exact(gpu, mb.finish(), [every.reshape(256, 1), every.reshape(1, 256)], "INT8_BATCH_MATMUL")


def test_int8_attention_chain_stays_int8(gpu):
    """Q.K^T (adj_y), SOFTMAX, P.V on int8 activations: the whole model int8."""
    rng = np.random.default_rng(11)
    h, t, d = 2, 6, 8
    mb = ModelBuilder()
    q = mb.input("q", [h, t, d], I8, quant=(0.05, 3))
    k = mb.input("k", [h, t, d], I8, quant=(0.04, -7))
    v = mb.input("v", [h, t, d], I8, quant=(0.03, 0))
    s = _bmm(mb, q, k, [h, t, d], [h, t, d], (0.2, -10), adj_y=True, name="s")
    p = mb.tensor("p", [h, t, t], I8, quant=(1 / 256, -128))
    mb.op("SOFTMAX", [s], [p], beta=1.0)
    mb.output(_bmm(mb, p, v, [h, t, t], [h, t, d], (0.02, 2)))
    model = mb.finish()
    assert {"INT8_BATCH_MATMUL", "INT8_SOFTMAX"} <= set(_ops(model))
    _exact(gpu, model, [_qin(rng, (h, t, d)) for _ in range(3)], "INT8_BATCH_MATMUL")


@pytest.mark.parametrize("case", [-4, -3], ids=["vec4", "oc4"])
@pytest.mark.parametrize("mode", ["off", "force"])
def test_batch_matmul_dot_product_variant_and_plain_kernel_agree(gpu, monkeypatch, mode, case):
    """The `int_dot` variant (packed OpSDot) and the plain int32 word loop give LiteRT's bits."""
    int_dot_mode(gpu, monkeypatch, mode)
    test_batch_matmul_bit_exact(gpu, CASES[case])
