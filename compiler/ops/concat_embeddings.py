"""CONCAT_EMBEDDINGS: LiteRT 2.3's interpreter registers no kernel for it (a model with it fails:
"Didn't find op for builtin opcode 'CONCAT_EMBEDDINGS'"), so gpuc refuses it for that reason."""
from __future__ import annotations

from gpuc.compiler.ops import refuse

refuse("CONCAT_EMBEDDINGS", reason="LiteRT's interpreter does not run it (no kernel is registered for it)")
