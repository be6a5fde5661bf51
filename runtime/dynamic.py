"""Runs of a bundle with bounded dynamic dims off the batch axis (`--dynamic NAME:AXIS<=MAX`).

The bundle's options hold `dynamic_dims` (compiler/driver.py): `dims` [[input position, axis, MAX,
label]] for the dim variables d0, d1, ...; `grids`, each dispatch's workgroup count (and
`variant_grids`, each kernel variant's) and `shapes`, each input's and output's shape, as small JSON
expression trees over the variables (an int, ["d", k], or [op, a, b] with op + * // % max min).
A run reads its sizes off the inputs' shapes, evaluates the trees, pushes the sizes as push constants
(the kernels compute with them) and dispatches the grids for them; a command buffer is recorded once
per size tuple and slot and cached.  The arena is planned for every MAX, the I/O tensors are packed
row-major for the run's shape, so inputs are copied in and outputs out at their actual sizes.
"""
from __future__ import annotations

import numpy as np

from gpuc.errors import BundleError, GpucError
from gpuc.runtime import casting, iospec
from gpuc.runtime.slots import RunHandle

MAX_GROUPS = 65535
OPS = {"+": lambda a, b: a + b, "*": lambda a, b: a * b, "//": lambda a, b: a // b, "%": lambda a, b: a % b,
       "max": max, "min": min}
CACHE_LIMIT = 64            # command buffers kept per slot (sizes tuples); past it the oldest is re-recorded


def evaluate(tree, sizes) -> int:
    """A shape / grid expression tree at the run's sizes."""
    if isinstance(tree, bool) or not isinstance(tree, (int, list)):
        raise BundleError(f"corrupt bundle: bad size expression {tree!r}")
    if isinstance(tree, int):
        return tree
    if len(tree) == 2 and tree[0] == "d" and isinstance(tree[1], int) and 0 <= tree[1] < len(sizes):
        return int(sizes[tree[1]])
    if len(tree) == 3 and tree[0] in OPS:
        return int(OPS[tree[0]](evaluate(tree[1], sizes), evaluate(tree[2], sizes)))
    raise BundleError(f"corrupt bundle: bad size expression {tree!r}")


class Dims:
    """A bundle's dynamic dims (None from `of` when it has none)."""

    def __init__(self, bundle):
        d = bundle.options["dynamic_dims"]
        try:
            self.dims = [(int(i), int(a), int(m), str(label)) for i, a, m, label in d["dims"]]
            self.grids = list(d["grids"])
            self.shapes = {int(k): list(v) for k, v in d["shapes"].items()}
        except (KeyError, TypeError, ValueError) as e:
            raise BundleError(f"corrupt bundle: bad dynamic_dims ({e})") from None
        if len(self.grids) != len(bundle.dispatches) or not self.dims:
            raise BundleError("corrupt bundle: dynamic_dims does not match its dispatches")
        self.maxes = tuple(m for _, _, m, _ in self.dims)
        self._bundle, self._checked = bundle, set()
        for j, f in enumerate(bundle.interfaces):     # kernels compiled for other bounds would overrun
            if "dmax" in f.manifest and tuple(f.manifest["dmax"]) != self.maxes:
                raise BundleError(f"corrupt bundle: dynamic_dims bounds {list(self.maxes)} differ from shader {j}'s "
                                  f"({f.manifest['dmax']})")
        for pos, axis, mx, label in self.dims:
            if not 0 <= pos < len(bundle.inputs) or not 0 <= axis < len(bundle.tensors[bundle.inputs[pos]].shape):
                raise BundleError(f"corrupt bundle: dynamic dim {label!r} names input {pos} axis {axis}")
        if set(self.shapes) - set(bundle.inputs) - set(bundle.outputs):
            raise BundleError("corrupt bundle: dynamic_dims gives shapes of tensors that are not inputs or outputs")
        self.check(self.maxes)

    @staticmethod
    def of(bundle):
        return Dims(bundle) if "dynamic_dims" in bundle.options else None

    def check(self, sizes) -> None:
        """Every I/O shape and grid at `sizes` within what was allocated and compiled (at the bounds):
        the copies and dispatches recorded for them stay inside the arena, the staging memory and the
        kernels' grids.  Checked once per sizes tuple."""
        if sizes in self._checked:
            return
        b = self._bundle
        for t, tree in self.shapes.items():
            shape = [evaluate(x, sizes) for x in tree]
            n = int(np.prod(shape, dtype=np.int64)) * np.dtype(b.tensors[t].dtype).itemsize
            if len(shape) != len(b.tensors[t].shape) or min(shape, default=1) < 0 or n > b.tensors[t].nbytes:
                raise BundleError(f"corrupt bundle: dynamic_dims gives tensor {t} ({b.tensors[t].name!r}) shape "
                                  f"{shape} at sizes {list(sizes)}, larger than its {b.tensors[t].nbytes} bytes")
        for i, d in enumerate(b.dispatches):
            gx, gy, _ = self.groups(i, sizes)
            if gx > d.groups[0] or gx * gy > d.groups[0] * d.groups[1]:
                raise BundleError(f"corrupt bundle: dynamic_dims gives dispatch {i} ({d.label}) {gx * gy} "
                                  f"workgroups at sizes {list(sizes)}, more than its {d.groups[0] * d.groups[1]}")
        self._checked.add(tuple(sizes))

    def push(self, sizes) -> bytes:
        return np.asarray(sizes, np.int32).tobytes()

    def groups(self, i: int, sizes) -> tuple:
        g = max(1, evaluate(self.grids[i], sizes))
        gx = min(g, MAX_GROUPS)
        return gx, -(-g // gx), 1

    def shape(self, tensor: int, sizes) -> tuple:
        return tuple(evaluate(t, sizes) for t in self.shapes[tensor])

    def nbytes(self, bundle, tensor: int, sizes) -> int:
        t = bundle.tensors[tensor]
        if tensor not in self.shapes:
            return t.nbytes
        return int(np.prod(self.shape(tensor, sizes), dtype=np.int64)) * np.dtype(t.dtype).itemsize

    def sizes_of(self, specs, arrays) -> tuple:
        """The run's sizes, read off the inputs (each checked against its bound and the fixed dims)."""
        sizes = []
        for pos, axis, mx, label in self.dims:
            a = arrays[pos]
            if a.ndim != len(specs[pos].shape):
                raise GpucError(f"input {specs[pos].name!r}: expected rank {len(specs[pos].shape)}, got shape "
                                f"{list(a.shape)}")
            n = int(a.shape[axis])
            if not 1 <= n <= mx:
                raise GpucError(f"input {specs[pos].name!r}: size {n} on axis {axis} is outside 1..{mx} (the "
                                f"bundle was compiled with --dynamic {label}<={mx})")
            sizes.append(n)
        sizes = tuple(sizes)
        self.check(sizes)
        for s, a in zip(specs, arrays):
            want = self.shape(s.tensor, sizes)
            if tuple(a.shape) != want:
                raise GpucError(f"input {s.name!r}: expected shape {list(want)} for the dynamic sizes "
                                f"{dict(zip([d[3] for d in self.dims], sizes))}, got {list(a.shape)}")
        return sizes


def normalize(model, inputs) -> tuple[list, tuple]:
    """(arrays in model order, of each input's dtype (runtime/casting.py); the run's sizes)."""
    vals = iospec.ordered(model.inputs, inputs)
    if iospec.has_device_tensors(vals):
        raise GpucError("device-tensor inputs are not supported yet for bundles with dynamic dims (--dynamic)")
    out = [casting.convert(i, s.name, v, s.dtype) for i, (s, v) in enumerate(zip(model.inputs, vals))]
    return out, model.dims.sizes_of(model.inputs, out)


def command(model, slot, sizes):
    """The slot's cached whole-run command buffer for these sizes (the bound's is slot.cmd)."""
    if sizes == model.dims.maxes:
        return slot.cmd
    if sizes not in slot.cmds:
        old = None
        if len(slot.cmds) >= CACHE_LIMIT:          # the oldest is recorded again (the slot is ours: idle)
            old = slot.cmds.pop(next(iter(slot.cmds)))
        slot.cmds[sizes] = model.recorder.record(slot, slot.pool, sizes=sizes, cmd_pool=slot.command_pool(),
                                                 reuse=old)
    return slot.cmds[sizes]


def _flat(view, shape):
    return view.reshape(-1)[:int(np.prod(shape, dtype=np.int64))].reshape(shape)


def run_async(model, inputs, keep_on_device=False):
    """LoadedModel.run_async for a bundle with dynamic dims."""
    if keep_on_device:
        raise GpucError("keep_on_device is not supported yet for bundles with dynamic dims (--dynamic)")
    arrays, sizes = normalize(model, inputs)
    slots = model.slots
    slots.check_open()
    slot = slots.acquire()
    try:
        for view, a in zip(slot.in_views, arrays):
            slot.copier.copy_into(_flat(view, a.shape), a)
        slots.submit(slot, [command(model, slot, sizes)])
    except BaseException:
        slot.free()
        raise
    shapes = [model.dims.shape(s.tensor, sizes) for s in model.outputs]

    def collect():
        return [slot.copier.copy_out(_flat(view, shape)) for view, shape in zip(slot.out_views, shapes)]
    slot.handle = RunHandle(slots, slot, collect)
    return slot.handle
