"""The gpuc manifest of each shader module (runtime/shader_check.py reads it at load): what the
compiler knows about a kernel that the runtime cannot read off its code.

  ext    per binding, the bytes the kernel may touch: the smallest tensor any dispatch of this module
         binds there (every dispatch's kernel stays inside its tensors, so inside the smallest)
  uses   each dispatch that runs the module (a kernel variant: the dispatch it stands for), as
         {"d": dispatch, "t": its tensor indices, "off", "mem", "dt", "sh": their offsets, memories
         (arena / weights), dtypes and shapes, "g": its workgroup counts, "item": its item-major unit}
         (+ "gt": a --dynamic dispatch's workgroup count as a tree over the dims)
  dmax   kernels over dynamic dims (push constants): the bounds the sizes were compiled for

The runtime refuses a bundle whose dispatch table disagrees with the manifest of a module it names.
"""
from __future__ import annotations

import json

from gpuc.runtime import shader_check


def write(prog, tensors: list, dmax=(), grid_trees=None) -> None:
    """Add each shader's manifest to its SPIR-V (prog: driver.Program; tensors: the bundle's TensorInfo;
    grid_trees: (per dispatch, per variant) workgroup-count trees of a --dynamic bundle)."""
    uses = {}
    trees = grid_trees or ([None] * len(prog.dispatches), [None] * len(prog.variants))
    for j, d in enumerate(prog.dispatches):
        uses.setdefault(d.shader, []).append((j, d.bindings, d.groups, d.item_inner, trees[0][j]))
    for vi, v in enumerate(prog.variants):
        uses.setdefault(v.shader, []).append((v.dispatch, prog.dispatches[v.dispatch].bindings, v.groups,
                                              v.item_inner, trees[1][vi] if vi < len(trees[1]) else None))
    for k, s in enumerate(prog.shaders):
        mine = uses.get(k, [])
        m = {"ext": [min((tensors[b[i]].nbytes for _, b, _, _, _ in mine), default=0) for i in range(s.bindings)],
             "uses": [use(j, b, grid, item, tensors, tree) for j, b, grid, item, tree in mine]}
        if s.push_bytes:
            m["dmax"] = [int(x) for x in dmax]
        s.spirv = shader_check.add_manifest(s.spirv, m)


def use(j: int, bindings, groups, item: int, tensors: list, grid_tree=None) -> dict:
    """One dispatch's entry in `uses` (runtime/bundle_shaders.py builds the same from the bundle);
    "gt": a --dynamic dispatch's workgroup count as a size tree (runtime/dynamic.py)."""
    ts = [tensors[t] for t in bindings]
    out = {"d": int(j), "t": [int(t) for t in bindings], "off": [int(t.offset) for t in ts],
           "mem": [int(t.memory) for t in ts], "dt": [str(t.dtype) for t in ts],
           "sh": [[int(x) for x in t.shape] for t in ts], "g": [int(g) for g in groups], "item": int(item)}
    if grid_tree is not None:
        out["gt"] = json.loads(json.dumps(grid_tree))
    return out


def largest_binding(prog, tensors: list, limit: int) -> int:
    """The bytes of the largest tensor any dispatch binds; UnsupportedError naming the tensor and the
    dispatch where that is over `limit` (options["max_binding_bytes"])."""
    from gpuc.errors import UnsupportedError
    from gpuc.runtime.load_checks import largest_binding as largest   # the same measure load checks
    n, j, slot = largest(prog.dispatches, tensors)
    if n > limit:
        d = prog.dispatches[j]
        raise UnsupportedError(f"{d.label}: tensor {tensors[d.bindings[slot]].name!r} is {n} bytes, over the binding "
                               f"limit of {limit} bytes (max_binding_bytes: the target's "
                               "maxStorageBufferRange); splitting it across bindings is not supported yet")
    return n
