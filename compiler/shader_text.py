"""The shader templates' source text (shaders/NAME.comp, its `// @include NAME.glsl` lines expanded)
and what a template's text says about it: whether it reads and writes every binding through LD/ST,
so any float binding may be stored as float16 (the `// @storage16` mark).  Below codegen: the passes
that choose fp16 storage (passes/precision.py, passes/ew_fusion.py) ask here, codegen/glsl.py renders."""
from __future__ import annotations

from functools import lru_cache
from importlib import resources

STORAGE16_MARK = "// @storage16"       # a template carrying this line reads/writes every binding via LD/ST
INCLUDE_MARK = "// @include "          # a template line "// @include NAME.glsl" is replaced by that file


@lru_cache(maxsize=None)
def template_source(name: str) -> str:
    text = resources.files("gpuc.shaders").joinpath(name).read_text()
    return "\n".join(template_source(ln[len(INCLUDE_MARK):].strip()) if ln.startswith(INCLUDE_MARK) else ln
                     for ln in text.split("\n"))


@lru_cache(maxsize=None)
def supports_storage16(template: str) -> bool:
    """True when `template` accesses its bindings only through LD/ST (common.glsl), so any float
    binding may be stored as float16 (loads widen to float, arithmetic stays fp32, stores narrow)."""
    try:
        return STORAGE16_MARK in template_source(template + ".comp")
    except OSError:              # not a shader (e.g. a host step of the program): its tensors stay fp32
        return False
