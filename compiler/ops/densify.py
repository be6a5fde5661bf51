"""DENSIFY: LiteRT's kernel takes only a constant sparse tensor (densify.cc: its Prepare demands a
constant input).  The importer expands the sparse constant (compiler/frontend/importer.py) and
constant folding turns the node into that dense constant (compiler/passes/fold.py): no kernel runs.
A DENSIFY of a run-time tensor has no kernel (LiteRT's Prepare refuses it too)."""
from __future__ import annotations

from gpuc.compiler.ops import handled

OP = "DENSIFY"
handled(OP, how="folded at compile time: the importer expands the constant sparse tensor it reads (LiteRT "
                "takes no other input)")
