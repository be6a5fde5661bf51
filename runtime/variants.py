"""Alternative kernels chosen at load by device capability.

Two granularities share one requirement vocabulary (runtime/capabilities.py):
- whole program: an fp16 bundle embeds its fp32 program as `fallback`, for devices without 16-bit
  storage (runtime/precision.py; the tensors differ, so the whole program does);
- per dispatch: `Bundle.variants` (bundle.Variant) offer a hardware path of one dispatch -- the
  cooperative-matrix gemm of `--precision fp16`, subgroup-arithmetic reductions -- with the same
  bindings and results within floating-point rounding.  `resolve` turns a bundle with variants into
  a plain one for a device: the first variant per dispatch whose `requires` the device meets
  replaces that dispatch's shader and workgroup counts; shaders no dispatch uses are dropped (their
  SPIR-V may declare capabilities this device lacks, so no pipeline is ever made from them).

GPUC_VARIANTS overrides the choice, per variant name or for all: "off" (plain kernels only),
"force" (a variant the device cannot run is a DeviceError naming what it lacks), "auto" (default);
e.g. GPUC_VARIANTS=coopmat=off,subgroup=force or GPUC_VARIANTS=off.
"""
from __future__ import annotations

import dataclasses

from gpuc.errors import DeviceError
from gpuc.runtime import settings
from gpuc.runtime.capabilities import missing

MODES = ("auto", "off", "force")


def modes(spec: str | None = None) -> dict:
    """GPUC_VARIANTS (or `spec`) -> {name or "*": mode}."""
    spec = settings.current().variants if spec is None else spec
    out = {}
    for part in (spec or "").replace(" ", "").split(","):
        if not part:
            continue
        name, _, mode = part.rpartition("=")
        if mode not in MODES:
            raise DeviceError(f"GPUC_VARIANTS: {part!r}: mode must be one of {', '.join(MODES)}")
        out[name or "*"] = mode
    return out


def mode_of(given: dict, name: str) -> str:
    """The mode `given` (what `modes` returns) sets for variants called `name`."""
    return given.get(name, given.get("*", "auto"))


def resolve(bundle, device, spec: str | None = None, choice: dict | None = None):
    """`bundle` with every dispatch's variant chosen for `device` (a new Bundle without variants).
    `choice` (runtime/tuning.py): {dispatch: position in bundle.variants, or None: its plain kernel},
    measured on this device; a dispatch it names takes that, the others the first variant met that is
    not `measured` (a candidate the compiler's cost model did not pick runs only where measured)."""
    if not bundle.variants:
        return bundle
    given = modes(spec)
    dispatches = list(bundle.dispatches)
    chosen, unmet = {}, {}
    for vi, v in enumerate(bundle.variants):
        mode = mode_of(given, v.name)
        if mode == "off" or v.dispatch in chosen:
            continue
        if (choice[v.dispatch] != vi) if choice is not None and v.dispatch in choice else v.measured:
            continue
        why = missing(v.requires, device)
        if why is None:
            d = dispatches[v.dispatch]
            dispatches[v.dispatch] = dataclasses.replace(d, shader=v.shader, groups=tuple(v.groups),
                                                         item_inner=v.item_inner)
            chosen[v.dispatch] = v.name
        elif mode == "force":                    # an error unless a later variant of that name fits
            unmet.setdefault((v.dispatch, v.name), why)
    for (i, name), why in unmet.items():
        if chosen.get(i) != name:
            raise DeviceError(f"GPUC_VARIANTS forces the {name!r} kernels, but device {device.name!r} has {why} "
                              f"(dispatch {i}: {bundle.dispatches[i].label})")
    options = bundle.options
    if "dynamic_dims" in options and chosen:          # --dynamic: the chosen variants' grids
        dyn = dict(options["dynamic_dims"])
        grids, vgrids = list(dyn["grids"]), dyn.get("variant_grids") or []
        for vi, v in enumerate(bundle.variants):
            if chosen.get(v.dispatch) == v.name and vi < len(vgrids) and dispatches[v.dispatch].shader == v.shader:
                grids[v.dispatch] = vgrids[vi]
        options = dict(options, dynamic_dims=dict(dyn, grids=grids))
    used = sorted({d.shader for d in dispatches})
    new_index = {old: i for i, old in enumerate(used)}
    dispatches = [dataclasses.replace(d, shader=new_index[d.shader]) for d in dispatches]
    stats = dict(bundle.stats, variants_used={n: list(chosen.values()).count(n) for n in sorted(set(chosen.values()))})
    faces = bundle.interfaces
    return dataclasses.replace(bundle, shaders=[bundle.shaders[i] for i in used], dispatches=dispatches,
                               variants=[], stats=stats, options=options,
                               interfaces=[faces[i] for i in used] if faces else [])
