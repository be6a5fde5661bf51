"""CALL (the schema's old subgraph call, replaced by CALL_ONCE / IF / WHILE): LiteRT 2.3's interpreter
registers no kernel for it (a model with it fails: "Didn't find op for builtin opcode 'CALL'"), so gpuc
refuses it for that reason."""
from gpuc.compiler.ops import refuse

refuse("CALL", reason="LiteRT's interpreter does not run it (no kernel is registered for it)")
