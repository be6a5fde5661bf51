"""LSH_PROJECTION: refused, with why.  LiteRT hashes each (seed, input row bytes) with farmhash's
Fingerprint64 (lsh_projection.cc) and takes the sign of the hash; gpuc has no Fingerprint64 kernel."""
from __future__ import annotations

from gpuc.compiler.ops import refuse

refuse("LSH_PROJECTION", reason="not implemented: LiteRT hashes each input row's bytes with farmhash Fingerprint64, "
                                "which gpuc has no kernel for")
