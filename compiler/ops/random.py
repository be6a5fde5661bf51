"""RANDOM_UNIFORM, RANDOM_STANDARD_NORMAL, MULTINOMIAL on the GPU (shaders/random.comp), with LiteRT's
generator (tensorflow/lite/kernels/random_ops.cc over TF's Philox4x32-10).

LiteRT seeds a node's Philox generator at Prepare from its (seed, seed2) options (their low 32 bits,
sign-extended, as LiteRT's option parser keeps them): key = seed's two 32-bit halves, counter = (0, 0,
seed2's halves).  Each invoke continues the stream: a uniform or normal
output of n elements takes ceil(n / 4) blocks (4 words each, the unused words of the last one dropped);
MULTINOMIAL draws its samples from a copy of the generator (two words a sample, in row-major order,
across rows) and then skips batch * round4(num_samples) * 512 blocks (int32 arithmetic, as LiteRT).
gpuc keeps that generator as per-node state: a persistent 6-word variable tensor (the 128-bit counter
and the key) that a one-invocation kernel advances after the node's draw, so run k of a bundle gives
LiteRT's invoke k; `reset_state()` (like LiteRT's re-Prepare on allocate_tensors) restarts the stream.

Values: RANDOM_UNIFORM is bit-exact (a word's 23 low bits as the mantissa of [1, 2), minus 1).
RANDOM_STANDARD_NORMAL is Box-Muller as TF (u1 = max(uniform, 1e-7), v = float(2 pi u2) with pi in
double, sqrt(-2 log u1) * (sin v, cos v)); LiteRT evaluates log / sin / cos with glibc's logf and
sincosf, which are not correctly rounded everywhere (0.7% of the 2^23 possible u1 give a logf 1 ulp off
the correctly rounded one, 1.3% of v a sinf / cosf 1 ulp off).  The GPU's own log / sin / cos are far
less accurate (Vulkan allows 2^-11 absolute error for sin), so gpuc computes them in float-float
(shaders/ff_math.glsl) and rounds once: the correctly rounded values.  The result equals LiteRT's where
glibc rounds correctly and is within 2 ulp where it does not.  MULTINOMIAL's CDF (double in LiteRT:
exp of logit - max finite logit, summed in order) is float-float here (~48 bits): an index differs from
LiteRT's only when a draw falls within ~2^-44 (relative) of a CDF step.
Seeds (0, 0): LiteRT draws a seed from /dev/urandom at each Prepare; gpuc draws one from os.urandom when
it compiles the node (a bundle, and the compile cache's copy of it, then repeats its own stream after
reset_state()).  Measured on lavapipe: 65,536 normals equal the correctly rounded Box-Muller exactly;
against LiteRT ~1.4% of them differ, by at most 2 ulp.  --max-batch refuses these ops (batch fact NoBatch):
a replicated program would give each item slot its own copy of the generator, so the items of one run
would draw identical numbers, which no LiteRT run does.
"""
from __future__ import annotations

import os

import numpy as np

from gpuc.compiler.codegen.kernel import Kernel
from gpuc.compiler.ops import NEUTRAL, SHAPE_ONLY, NoBatch, Why, declare, register, rules, template
from gpuc.compiler.ops.math import words
from gpuc.compiler.ops.util import checked

UNIFORM, NORMAL, MULTI = "RANDOM_UNIFORM", "RANDOM_STANDARD_NORMAL", "MULTINOMIAL"
MULTI_OUT = ("int32", "int64")
_B = ["out_", "st", "logits", "cdf"]
_W = {"st": "uint32", "cdf": "uint32"}
_D = dict(N=10, C=5, NS=2, I64=0, ADV_LO=0, ADV_HI=0)
VARIANTS = {
    "random:draw": (_D, {"MODE": [0, 1]}, _B, _W),
    "random:advance": (dict(_D, MODE=2, ADV_LO=3), {}, _B, dict(_W, out_="uint32"), lambda d: dict(rw=("out_",))),
    "random:cdf": (dict(_D, MODE=3), {}, _B, dict(_W, out_="uint32")),
    "random:sample": (dict(_D, MODE=4), {}, _B, dict(_W, out_="int32")),
    "random:sample64": (dict(_D, MODE=4, I64=1), {}, _B, dict(_W, out_="uint32")),
}


def _shape_input(node, graph):
    s = graph.t(node.inputs[0])
    if s.dtype != "int32" or len(s.shape) != 1:
        raise ValueError(f"shape input {s.name!r} is {s.dtype} {list(s.shape)} (LiteRT takes a 1-D int32 tensor)")
    if not s.is_const:
        raise ValueError(f"shape input {s.name!r} is known only at run time (gpuc sizes the output when it "
                         "compiles: give a constant, or a shape the compiler can fold)")
    dims = [int(d) for d in np.asarray(s.data).reshape(-1)]
    if any(d < 0 for d in dims):
        raise ValueError(f"shape input {s.name!r} has a negative dimension {dims}")
    return dims


def _multi_plan(node, graph):
    lg, ns_t = graph.t(node.inputs[0]), graph.t(node.inputs[1])
    if lg.dtype != "float32" or len(lg.shape) != 2:
        raise ValueError(f"logits {lg.name!r} are {lg.dtype} {list(lg.shape)} (LiteRT takes 2-D float32)")
    if lg.shape[1] < 1:
        raise ValueError(f"logits {lg.name!r} have no classes (LiteRT needs num_classes > 0)")
    if ns_t.dtype != "int32" or len(ns_t.shape) != 0:
        raise ValueError(f"num_samples {ns_t.name!r} is {ns_t.dtype} {list(ns_t.shape)} (LiteRT takes an int32 "
                         "scalar)")
    if not ns_t.is_const:
        raise ValueError(f"num_samples {ns_t.name!r} is known only at run time (gpuc sizes the output when it "
                         "compiles: give a constant)")
    ns = int(np.asarray(ns_t.data).reshape(-1)[0])
    if ns < 0:
        raise ValueError(f"num_samples is {ns} (LiteRT needs >= 0)")
    return int(lg.shape[0]), int(lg.shape[1]), ns


def _out_shape(node, graph):
    if node.op == MULTI:
        b, _, ns = _multi_plan(node, graph)
        return [b, ns]
    return _shape_input(node, graph)


@checked
def _check(node, graph):
    shape = _out_shape(node, graph)
    y = graph.t(node.outputs[0])
    want = MULTI_OUT if node.op == MULTI else ("float32",)
    if y.dtype not in want:
        raise ValueError(f"output {y.name!r} is {y.dtype} (LiteRT's kernel writes {' or '.join(want)})")
    if list(y.shape) != shape:
        raise ValueError(f"output {y.name!r} has shape {list(y.shape)}, the op gives {shape}")
    return None


def _seeds(node) -> tuple[int, int]:
    # LiteRT's option parser keeps the low 32 bits of each (int64) seed, sign-extended
    seed, seed2 = (int(np.array([int(node.attrs.get(k, 0) or 0) & 0xFFFFFFFF], np.uint32).view(np.int32)[0])
                   for k in ("seed", "seed2"))
    if seed == 0 and seed2 == 0:           # LiteRT: a non-deterministic seed; gpuc: one per compile
        seed, seed2 = (int.from_bytes(os.urandom(8), "little") for _ in range(2))
    return seed & (2 ** 64 - 1), seed2 & (2 ** 64 - 1)


def _state(node, graph) -> int:
    """The node's generator: a persistent variable tensor [counter (4 words), key (2 words)]."""
    seed, seed2 = _seeds(node)
    m = 0xFFFFFFFF
    st = graph.add_tensor(f"{node.label()}/philox", (6,), "uint32")
    t = graph.t(st)
    t.is_variable = True
    t.initial = np.array([0, 0, seed2 & m, seed2 >> 32, seed & m, seed >> 32], np.uint32)
    return st


def _advance(st: int, blocks: int, label: str) -> Kernel:
    blocks &= 2 ** 64 - 1
    return Kernel("random", [("out_", st)], 1, dict(MODE=2, N=1, C=1, NS=1, I64=0, ADV_LO=blocks & 0xFFFFFFFF,
                                                    ADV_HI=blocks >> 32), label + " (state)", rw=("out_",))


@register(UNIFORM, NORMAL, check=_check, dtypes=("int32", "float32"), inputs=(1, 1),
          shapes=lambda n, g: [_shape_input(n, g)],
          summary="LiteRT's seeded Philox4x32-10 stream, continued across runs; uniform bit-exact, normal "
                  "correctly rounded (LiteRT's glibc logf / sincosf: within 2 ulp)")
def lower_random(node, graph):
    y = graph.t(node.outputs[0])
    st = _state(node, graph)
    n = y.size
    blocks = -(-n // 4)
    if not n:
        return []
    mode = 0 if node.op == UNIFORM else 1
    defines = dict(MODE=mode, N=n, C=1, NS=1, I64=0, ADV_LO=0, ADV_HI=0)
    return [Kernel("random", [("out_", words(graph, y.id)), ("st", st)], blocks, defines, node.label()),
            _advance(st, blocks, node.label())]


@register(MULTI, check=_check, dtypes=("float32", "int32", "int64"), inputs=(2, 2),
          shapes=lambda n, g: [list(_multi_plan(n, g)[::2])],
          summary="LiteRT's seeded Philox4x32-10 stream, continued across runs; float-float CDF (LiteRT: double)")
def lower_multinomial(node, graph):
    b, c, ns = _multi_plan(node, graph)
    y = graph.t(node.outputs[0])
    st = _state(node, graph)
    skip = int(np.array([b * ((ns + 3) // 4 * 4) * 512], np.int64).astype(np.int32)[0])   # (LiteRT: int)
    ks = []
    if b * ns:
        cdf = graph.add_tensor(f"{node.label()}/cdf", (b * c * 2,), "uint32")
        common = dict(N=b * ns, C=c, NS=ns, I64=int(y.dtype == "int64"), ADV_LO=0, ADV_HI=0)
        ks += [Kernel("random", [("out_", cdf), ("logits", node.inputs[0])], b, dict(common, MODE=3),
                      node.label() + " (cdf)"),
               Kernel("random", [("out_", words(graph, y.id)), ("st", st), ("cdf", cdf)], b * ns,
                      dict(common, MODE=4), node.label())]
    return ks + [_advance(st, skip, node.label())] if skip else ks


def _shape(node, vals, graph, need=None):
    y = graph.t(node.outputs[0])
    return [rules.placeholder(_out_shape(node, graph), y.dtype)]


# --- facts (compiler/ops/__init__.py FACT_FIELDS) ---------------------------------------------------
declare(UNIFORM, NORMAL, MULTI, shape=_shape, exact=SHAPE_ONLY,
        sym_shape=Why("no dynamic-size rule: the output size is a value"),
        batch=NoBatch("a random op's seeded stream is per-node state that continues across invokes: the items of "
                      "one run would each draw from their own copy of it (identical numbers), which matches no "
                      "LiteRT run; compile it for batch 1 and run the items one by one"),
        pieces=Why("computes values"), fp16=NEUTRAL, in_place=False, templates=("random",),
        flops=lambda node, graph: graph.t(node.outputs[0]).size * 60,
        cpu=Why("no CPU kernel: the GPU runs every dtype LiteRT takes"))
template("random", item_major=False, flat=True)
