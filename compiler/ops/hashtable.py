"""The HASHTABLE family and the string builtins: refused, each with its reason.

HASHTABLE / HASHTABLE_IMPORT / HASHTABLE_FIND / HASHTABLE_SIZE keep a table in a resource that lives
across invocations and is keyed, in the models that use them (vocabulary lookups), by strings; gpuc
has no string tensors and no host-side resource state.  SKIP_GRAM turns a string into n-gram strings.
"""
from __future__ import annotations

from gpuc.compiler.ops import refuse

refuse("HASHTABLE", "HASHTABLE_FIND", "HASHTABLE_IMPORT", "HASHTABLE_SIZE",
       reason="a hash table in a resource kept across invocations, keyed by strings or int64 (vocabulary "
              "lookups): gpuc has no string tensors and no host-side resource state")
refuse("SKIP_GRAM", reason="a string op (a sentence to its skip-gram strings): gpuc has no string tensors")
