"""The bundle's shaders against its dispatch table, device-free (bundle.validate calls `check`).

Each shader module is read structurally (runtime/shader_check.py) and validated as a whole: by
SPIRV-Tools where it is installed, else by walking every instruction.  Both happen once per bundle
per machine: the cache directory keeps, under the bundle's checksum, the interfaces read off its
modules (a later load of the same bundle reads them back, ~1 ms instead of ~15 ms for a small CNN's),
and once per module content per process.  Then every dispatch and
kernel variant must agree with the module it names:
  - the module declares no binding the dispatch does not bind, and a push-constant block no larger
    than the dispatch pushes;
  - the dispatch is one the module was compiled for, with the same tensors at the same offsets, the
    same workgroup counts and item-major unit (the manifest's `uses`);
  - each bound tensor holds at least the bytes the kernel may touch there (`ext`);
  - a binding the kernel may write is in the arena, never the weights;
  - no grid runs more than MAX_INVOCATIONS invocations, nor the bundle more than MAX_BUNDLE_INVOCATIONS;
  - every dispatch a module was compiled for is in the table (a table that lost its last dispatch is refused).
Device limits (grid size, workgroup size, storage-buffer range) are checked at load
(runtime/load_checks.py).
"""
from __future__ import annotations

import json
import os
import threading

import xxhash

from gpuc.errors import BundleError
from gpuc.runtime import shader_check, spirv_tools
from gpuc.runtime.bundle_format import ARENA

MAX_INVOCATIONS = 1 << 32            # one dispatch: invocation indices fit 32 bits
MAX_BUNDLE_INVOCATIONS = 1 << 40     # every dispatch of a run together
NAMES = {"t": "tensors", "off": "offsets", "mem": "memories", "dt": "dtypes", "sh": "shapes", "g": "workgroup counts",
         "item": "item unit", "gt": "workgroup-count tree (gt)"}
_validated = set()                   # xxh3 of module bytes already validated in this process
_lock = threading.Lock()


def _whole_module_error(code: bytes) -> str | None:
    """None where the module is valid as a whole (SPIRV-Tools' validator, else the instruction walk)."""
    key = xxhash.xxh3_128_hexdigest(code)
    with _lock:
        if key in _validated:
            return None
    bad = shader_check.body_ok(code) or spirv_tools.validate(code)
    if bad is None:
        with _lock:
            _validated.add(key)
    return bad


def _marker(checksum: str) -> str | None:
    from gpuc.runtime import cachedir, settings
    if not checksum or settings.current().no_validation_cache:
        return None
    try:
        return os.path.join(cachedir.cache_path("validated"), checksum)
    except OSError:
        return None


def _validate_modules(b) -> None:
    for j, s in enumerate(b.shaders):
        bad = _whole_module_error(s.spirv)
        if bad:
            raise BundleError(f"corrupt bundle: shader {j} ({s.name}) is not valid SPIR-V: "
                              + "; ".join(x.strip() for x in bad.strip().splitlines())[:300])


def _cached(marker: str | None, n: int) -> list | None:
    """The interfaces a marker recorded when this bundle (by checksum) was last validated here."""
    if not marker:
        return None
    try:
        with open(marker, "rb") as f:
            rec = json.loads(f.read())
        faces = [shader_check.Interface(tuple(ls), {int(k): bool(v) for k, v in bd}, int(pb), m, int(sh))
                 for ls, bd, pb, m, sh in rec]
    except (OSError, ValueError, TypeError):
        return None
    return faces if len(faces) == n else None


def _remember(marker: str | None, faces: list) -> None:
    if not marker:
        return
    from gpuc.runtime import cachedir
    rec = [[list(f.local_size), sorted(f.bindings.items()), f.push_bytes, f.manifest, f.shared_bytes] for f in faces]
    try:
        cachedir.atomic_write(marker, json.dumps(rec, separators=(",", ":")).encode(), sync=False)
    except OSError:
        pass


def interfaces(b) -> list:
    """Each shader's shader_check.Interface (read off the modules, or recorded when this bundle was
    validated here before); BundleError naming the shader where one is malformed or does not fit."""
    marker = _marker(b.checksum)
    faces = _cached(marker, len(b.shaders))
    fresh = faces is None
    if fresh:
        faces = []
        for j, s in enumerate(b.shaders):
            try:
                faces.append(shader_check.interface(s.spirv, s.entry))
            except ValueError as e:
                raise BundleError(f"corrupt bundle: shader {j} ({s.name}): {e}") from None
    for j, (s, f) in enumerate(zip(b.shaders, faces)):
        if any(not 0 <= k < s.bindings for k in f.bindings):
            raise BundleError(f"corrupt bundle: shader {j} ({s.name}) declares binding "
                              f"{max(f.bindings)} but the bundle gives it {s.bindings}")
        if f.push_bytes > s.push_bytes:
            raise BundleError(f"corrupt bundle: shader {j} ({s.name}) reads {f.push_bytes} bytes of push constants "
                              f"but the bundle gives it {s.push_bytes}")
        if len(f.manifest["ext"]) != s.bindings:
            raise BundleError(f"corrupt bundle: shader {j} ({s.name}) manifest lists {len(f.manifest['ext'])} "
                              f"bindings, the bundle {s.bindings}")
    if fresh:
        _validate_modules(b)
        _remember(marker, faces)
    return faces


def _check_use(b, what: str, f, j: int, bindings, groups, item_inner, tree=None) -> int:
    """Dispatch j (or a variant of it) against its shader's interface; its invocation count.
    tree: a --dynamic bundle's workgroup-count tree for it (options dynamic_dims)."""
    m = f.manifest
    ts = [b.tensors[t] for t in bindings]
    use = {"d": j, "t": list(bindings), "off": [t.offset for t in ts], "mem": [t.memory for t in ts],
           "dt": [t.dtype for t in ts], "sh": [list(t.shape) for t in ts], "g": list(groups), "item": item_inner}
    if tree is not None:
        use["gt"] = tree
    if use not in m["uses"]:
        mine = [u for u in m["uses"] if u["d"] == j]
        diff = ", ".join(f"{NAMES[k]} {use.get(k)} (its kernel's: {mine[0].get(k)})" for k in NAMES
                         if mine and use.get(k) != mine[0].get(k))
        raise BundleError(f"corrupt bundle: {what} does not match its kernel: " + (
            diff or f"the kernel was not compiled for dispatch {j} (it runs {sorted(u['d'] for u in m['uses'])[:8]})"))
    for slot, ti in enumerate(bindings):
        t = b.tensors[ti]
        if t.nbytes < m["ext"][slot]:
            raise BundleError(f"corrupt bundle: {what} binding {slot} is tensor {ti} ({t.name!r}, {t.nbytes} "
                              f"bytes) but its kernel may touch {m['ext'][slot]} bytes")
        if f.bindings.get(slot) and t.memory != ARENA:
            raise BundleError(f"corrupt bundle: {what} writes binding {slot}, tensor {ti} ({t.name!r}), "
                              "which is not in the arena")
    n = groups[0] * groups[1] * groups[2] * f.invocations
    if n > MAX_INVOCATIONS:
        raise BundleError(f"corrupt bundle: {what} runs {n} invocations (more than {MAX_INVOCATIONS})")
    return n


def _grid_trees(b) -> tuple:
    """A --dynamic bundle's workgroup-count trees (per dispatch, per variant; None elsewhere)."""
    dd = b.options.get("dynamic_dims")
    if dd is None:
        return [None] * len(b.dispatches), [None] * len(b.variants)
    try:
        grids, vgrids = list(dd["grids"]), list(dd.get("variant_grids") or [])
    except (TypeError, KeyError, AttributeError):
        raise BundleError("corrupt bundle: bad dynamic_dims grids") from None
    if len(grids) != len(b.dispatches):
        raise BundleError("corrupt bundle: dynamic_dims does not match its dispatches")
    return grids, vgrids + [None] * (len(b.variants) - len(vgrids))


def check(b) -> list:
    """Validate the modules and every use of them; returns the interfaces (kept on the bundle)."""
    faces = interfaces(b)
    grids, vgrids = _grid_trees(b)
    total = 0
    for j, d in enumerate(b.dispatches):
        total += _check_use(b, f"dispatch {j} ({d.label})", faces[d.shader], j, d.bindings, d.groups, d.item_inner,
                            grids[j])
    for j, v in enumerate(b.variants):
        d = b.dispatches[v.dispatch]
        _check_use(b, f"variant {j} ({v.name}) of dispatch {v.dispatch}", faces[v.shader], v.dispatch, d.bindings,
                   v.groups, v.item_inner, vgrids[j])
    if total > MAX_BUNDLE_INVOCATIONS:
        raise BundleError(f"corrupt bundle: its dispatches run {total} invocations (more than "
                          f"{MAX_BUNDLE_INVOCATIONS})")
    _check_dispatches_present(b, faces)
    return faces


def _check_dispatches_present(b, faces) -> None:
    """Every dispatch a module was compiled for is in the table: a table that lost a dispatch -- its last one,
    whose loss shifts no other's index -- is refused rather than run without it.  (A module only a dropped
    kernel variant used may stay: the dispatch still runs its own kernel.)"""
    nd = len(b.dispatches)
    for k, (s, f) in enumerate(zip(b.shaders, faces)):
        for u in f.manifest["uses"]:
            j = u.get("d") if isinstance(u, dict) else None
            if not isinstance(j, int) or not 0 <= j < nd:
                raise BundleError(f"corrupt bundle: shader {k} ({s.name}) was compiled for dispatch {j}, which the "
                                  f"bundle does not have (it has {nd})")
