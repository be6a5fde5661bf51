"""The gpuc manifest of each shader module (runtime/shader_check.py reads it at load): what the
compiler knows about a kernel that the runtime cannot read off its code.

  ext    per binding, the bytes the kernel may touch: the smallest tensor any dispatch of this module
         binds there (every dispatch's kernel stays inside its tensors, so inside the smallest)
  uses   each dispatch that runs the module (a kernel variant: the dispatch it stands for), as
         {"d": dispatch, "t": its tensor indices, "off", "mem", "dt", "sh": their offsets, memories
         (arena / weights), dtypes and shapes, "g": its workgroup counts, "item": its item-major unit}
  dmax   kernels over dynamic dims (push constants): the bounds the sizes were compiled for

The runtime refuses a bundle whose dispatch table disagrees with the manifest of a module it names.
"""
from __future__ import annotations

from gpuc.runtime import shader_check


def write(prog, tensors: list, dmax=()) -> None:
    """Add each shader's manifest to its SPIR-V (prog: driver.Program; tensors: the bundle's TensorInfo)."""
    uses = {}
    for j, d in enumerate(prog.dispatches):
        uses.setdefault(d.shader, []).append((j, d.bindings, d.groups, d.item_inner))
    for v in prog.variants:
        uses.setdefault(v.shader, []).append((v.dispatch, prog.dispatches[v.dispatch].bindings, v.groups,
                                              v.item_inner))
    for k, s in enumerate(prog.shaders):
        mine = uses.get(k, [])
        m = {"ext": [min((tensors[b[i]].nbytes for _, b, _, _ in mine), default=0) for i in range(s.bindings)],
             "uses": [use(j, b, grid, item, tensors) for j, b, grid, item in mine]}
        if s.push_bytes:
            m["dmax"] = [int(x) for x in dmax]
        s.spirv = shader_check.add_manifest(s.spirv, m)


def use(j: int, bindings, groups, item: int, tensors: list) -> dict:
    """One dispatch's entry in `uses` (runtime/bundle_shaders.py builds the same from the bundle)."""
    ts = [tensors[t] for t in bindings]
    return {"d": int(j), "t": [int(t) for t in bindings], "off": [int(t.offset) for t in ts],
            "mem": [int(t.memory) for t in ts], "dt": [str(t.dtype) for t in ts],
            "sh": [[int(x) for x in t.shape] for t in ts], "g": [int(g) for g in groups], "item": int(item)}


def largest_binding(prog, tensors: list, limit: int) -> int:
    """The bytes of the largest tensor any dispatch binds; UnsupportedError naming the tensor and the
    dispatch where that is over `limit` (options["max_binding_bytes"])."""
    from gpuc.errors import UnsupportedError
    best = 0
    for d in prog.dispatches:
        for ti in d.bindings:
            n = tensors[ti].nbytes
            if n > limit:
                raise UnsupportedError(f"{d.label}: tensor {tensors[ti].name!r} is {n} bytes, over the binding "
                                       f"limit of {limit} bytes (max_binding_bytes: the target's "
                                       "maxStorageBufferRange); splitting it across bindings is not supported yet")
            best = max(best, n)
    return best
