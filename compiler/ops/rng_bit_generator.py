"""STABLEHLO_RNG_BIT_GENERATOR on the GPU (shaders/rng_bits.comp), LiteRT's semantics (tensorflow/lite/
kernels/stablehlo_rng_bit_generator.cc, rng_util.cc): a pure function of its uint64 state input,
state in and state out, so gpuc reproduces it exactly.  DEFAULT / PHILOX: Philox4x32-10 (state of 2 or
3 uint64), THREEFRY: Threefry2x32-20 (state of 2); the output (int32 / uint32 / int64 / uint64, any
shape) filled with the blocks' 32-bit words in order; the new state holds the key and the counter
advanced by the blocks drawn.
"""
from __future__ import annotations

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import NEUTRAL, SHAPE_ONLY, Why, declare, register, rules, template
from gpuc.compiler.ops.math import words

OP = "STABLEHLO_RNG_BIT_GENERATOR"
ENUM = {"DEFAULT": 0, "PHILOX": 1, "THREEFRY": 2}     # the schema's RngAlgorithm
_CODES = {0: 0, 1: 0, 2: 1}            # RngAlgorithm -> the template's ALG (0 Philox, 1 Threefry)
OUT_DTYPES = ("int32", "uint32", "int64", "uint64")
VARIANTS = {
    "rng_bits": (dict(NW=10), {"ALG": [0, 1], "MODE": [0, 1], "S": [2, 3]}, ["out_", "st"],
                 {"out_": "uint32", "st": "uint32"}),
}


def _plan(node, graph):
    if len(node.inputs) != 1 or len(node.outputs) != 2:
        raise ValueError(f"has {len(node.inputs)} inputs and {len(node.outputs)} outputs (LiteRT takes 1 and 2)")
    s, key, y = graph.t(node.inputs[0]), graph.t(node.outputs[0]), graph.t(node.outputs[1])
    a = node.attrs.get("algorithm", 0)
    alg = _CODES.get(ENUM.get(a) if isinstance(a, str) else int(a or 0))
    if alg is None:
        raise ValueError(f"algorithm {a!r} is not DEFAULT, PHILOX or THREEFRY")
    if s.dtype != "uint64" or len(s.shape) != 1 or key.dtype != "uint64" or tuple(key.shape) != tuple(s.shape):
        raise ValueError(f"state {s.name!r} ({s.dtype} {list(s.shape)}) and output key {key.name!r} must be 1-D "
                         "uint64 of one shape (LiteRT's Prepare)")
    n = int(s.shape[0])
    if (alg == 1 and n != 2) or (alg == 0 and n not in (2, 3)):
        raise ValueError(f"a state of {n} uint64 (LiteRT takes 2{' or 3' if alg == 0 else ''} for this algorithm)")
    if y.dtype not in OUT_DTYPES:
        raise ValueError(f"output {y.name!r} is {y.dtype} (LiteRT takes {', '.join(OUT_DTYPES)})")
    return s, key, y, alg, n


@register(OP, check=lambda n, g: _reason(n, g), dtypes=("uint64",) + OUT_DTYPES, inputs=(1, 1), outputs=(2, 2),
          summary="Philox4x32-10 / Threefry2x32-20 exactly as LiteRT (state in, state out)")
def lower_rng_bits(node, graph):
    s, key, y, alg, n = _plan(node, graph)
    nw = y.nbytes // 4
    st = words(graph, s.id)
    ks = [Kernel("rng_bits", [("out_", words(graph, key.id)), ("st", st)], 1, dict(NW=nw, ALG=alg, MODE=1, S=n),
                 node.label() + " (state)")]
    if nw:
        ks.insert(0, Kernel("rng_bits", [("out_", words(graph, y.id)), ("st", st)], nw,
                            dict(NW=nw, ALG=alg, MODE=0, S=n), node.label()))
    return ks


def _reason(node, graph):
    try:
        _plan(node, graph)
    except ValueError as e:
        return str(e)
    return None


def _shape(node, vals, graph, need=None):
    s, key, y, alg, n = _plan(node, graph)
    return [rules.placeholder(key.shape, "uint64"), rules.placeholder(y.shape, y.dtype)]


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
declare(OP, shape=_shape, exact=SHAPE_ONLY, sym_shape=Why("no dynamic-size rule: the output shape is the model's"),
        batch=Why("no batch rule: one state draws the whole output"), pieces=Why("computes values"), fp16=NEUTRAL,
        in_place=False, templates=("rng_bits",), flops=lambda node, graph: graph.t(node.outputs[1]).size * 40,
        cpu=Why("no CPU kernel: the GPU runs every dtype LiteRT takes"))
template("rng_bits", item_major=False, flat=True)
