"""RANDOM_UNIFORM, RANDOM_STANDARD_NORMAL, MULTINOMIAL: refused, with why.

LiteRT's kernels (random_ops.cc) draw from a Philox-4x32-10 generator seeded with the op's (seed,
seed2) at Prepare, whose counter then advances across invocations (each invoke continues the stream;
MULTINOMIAL also skips batch * round4(num_samples) * 512 draws per invoke), so reproducing them needs
per-node generator state kept across runs, which gpuc's programs do not have yet.  Seeds (0, 0) take a
seed from /dev/urandom: no output can be reproduced.  RANDOM_UNIFORM's float (the 23 mantissa bits of
each draw) is bit-exact on any device; RANDOM_STANDARD_NORMAL's Box-Muller uses glibc's logf and
sincosf, and MULTINOMIAL double-precision exp and a CDF search, which a GPU does not round as they do.
"""
from __future__ import annotations

from gpuc.compiler.ops import refuse

refuse("RANDOM_UNIFORM", "RANDOM_STANDARD_NORMAL", "MULTINOMIAL",
       reason="not implemented yet: LiteRT's seeded Philox stream continues across invocations (per-node state "
              "gpuc programs lack); seeds (0, 0) are drawn from /dev/urandom and cannot be reproduced")
