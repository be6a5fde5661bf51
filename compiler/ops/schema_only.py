"""Builtin codes of the schema that are not ops a model computes with: refused with what they are
(`gpuc ops` lists every builtin; compiler/ops/__init__.py refuse / handled)."""
from __future__ import annotations

from gpuc.compiler.ops import handled, refuse

refuse("DELEGATE", reason="a delegate's placeholder node, not an op: the delegate that wrote it runs the ops it "
                          "replaced (convert the model without that delegate)")
refuse("PLACEHOLDER_FOR_GREATER_OP_CODES", reason="not an op: the schema's marker for op codes above 127")
handled("CUSTOM", how="custom ops are listed by their custom code (CUSTOM:<code>)")
