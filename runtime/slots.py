"""Run slots: up to N runs of a model in flight, each with its own staging memory, fence and
command buffers (Slot); Slots hands them out, submits and waits, and keeps the GPU time of the last
completed run; RunHandle is what run_async returns.

Closing (Slots.shut, from LoadedModel.close): no slot is handed out any more, and shut waits until
no thread works with one -- a slot marked busy without a handle is being filled, submitted or run
in place; a thread inside RunHandle.wait / done waits on a fence -- then waits for the runs that were
submitted and never waited for (within the timeout) and cancels their handles.  Every later use
raises GpucError("model is closed").  input_view / output_view hand out StagingView arrays, which
check the closed flag; the memory behind them stays mapped until the last view is gone
(runtime/resources.py Mapped), so even a plain array taken from one never touches freed memory."""
from __future__ import annotations

import threading
import time

import numpy as np
import vulkan as vk

from gpuc.errors import GpucError, GpuTimeoutError, RunError
from gpuc.runtime import commands, hostcopy, iospec
from gpuc.runtime.device import MemoryKind
from gpuc.runtime.timeouts import run_timeout_error

_SRC, _DST = vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT, vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
# A passive wait blocks until this long before the run's expected end (the shortest submit-to-done time
# of the same work so far), then spins briefly (Device.wait spin_at): a blocked thread wakes ~50-100 us
# after the fence signals on the H100 (benchmarks/run_overhead.py), a spinning one at once.
SPIN_LEAD_S = 200e-6
CLOSED = "model is closed"


def closed_error() -> GpucError:
    return GpucError(CLOSED)


class StagingView(np.ndarray):
    """A numpy view of a model's mapped staging memory (input_view / output_view) that raises
    GpucError("model is closed") when used after its model closed: indexing, assignment, ufuncs,
    numpy functions, repr (np.asarray(view) or view.view(np.ndarray) give a plain array, unchecked).  Views of it inherit the check; copies (their own memory) do not.
    The check is for the caller's sake; memory safety does not rest on it (see the module's doc)."""

    _model_gate = None               # an object with a `closed` attribute (the model's Slots)

    @classmethod
    def of(cls, array: np.ndarray, gate) -> "StagingView":
        v = array.view(cls)
        v._model_gate = gate
        return v

    def __array_finalize__(self, obj):
        self._model_gate = None if self.flags.owndata else getattr(obj, "_model_gate", None)

    def _check(self):
        g = self._model_gate
        if g is not None and g.closed:
            raise closed_error()

    def __getitem__(self, key):
        self._check()
        return super().__getitem__(key)

    def __setitem__(self, key, value):
        self._check()
        super().__setitem__(key, value)

    def __array__(self, *args, **kwargs):
        self._check()
        return super().__array__(*args, **kwargs)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        self._check()
        plain = tuple(x.view(np.ndarray) if isinstance(x, StagingView) else x for x in inputs)
        if "out" in kwargs:
            kwargs["out"] = tuple(x.view(np.ndarray) if isinstance(x, StagingView) else x for x in kwargs["out"])
        return getattr(ufunc, method)(*plain, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        self._check()
        return super().__array_function__(func, types, args, kwargs)

    def __repr__(self):
        self._check()
        return super().__repr__()

    def __str__(self):
        self._check()
        return super().__str__()

    def tobytes(self, *args, **kwargs):
        self._check()
        return super().tobytes(*args, **kwargs)

    def fill(self, value):
        self._check()
        super().fill(value)


class Slot:
    """One in-flight run's staging buffers (staging_bytes: input and output sizes, iospec.layout) with
    numpy views of them (in_views/out_views: one batch item; in_rows/out_rows: all `items` items
    along axis 0), its fence, timestamp pool (or None) and command buffers."""

    def __init__(self, res, inputs, outputs, staging_bytes: tuple, items: int = 1, timestamps: bool = False):
        self._res = res
        self.in_buf, in_map = res.mapped(staging_bytes[0], _SRC, MemoryKind.UPLOAD)    # numpy uint8 arrays
        self.out_buf, out_map = res.mapped(staging_bytes[1], _DST, MemoryKind.HOST)
        self.in_views, self.out_views = iospec.views(in_map, inputs), iospec.views(out_map, outputs)
        self.in_rows, self.out_rows = iospec.views(in_map, inputs, items), iospec.views(out_map, outputs, items)
        self.pool = res.query_pool(2) if timestamps else None
        self.fence = res.fence()
        self.cmd = None               # a whole batch-1 run (LoadedModel records it)
        self.cmds = {}                # batch size -> a whole run of that many items (runtime/batch.py)
        self.pre = self.post = None   # copies in / out of device-tensor runs (runtime/batch.py)
        self.bodies = {}              # batch size -> the dispatches only (runtime/batch.py)
        self.repeats = {}             # k -> k runs in one command buffer (runtime/repeat.py)
        self.repeat_out = None        # their output staging (runtime/repeat.py RepeatStaging)
        self._cmd_pool = None
        self.busy, self.seq, self.handle = False, 0, None
        self.late = False             # its last run timed out and may still execute (Slots.wait)
        self.status = None            # the run's status words (runtime/status.py), checked by Slots.wait
        self.submitted = None         # (time.perf_counter() at submit, the work's key) of the run in flight
        self.handle_done = threading.Event()
        self.handle_done.set()
        self.copier = hostcopy.Copier.current()     # copy threads and split size, read once at load
        self.in_bytes = staging_bytes[0]
        self.upload = None            # pipelined uploads' landing buffer and command buffers (runtime/upload.py)

    def command_pool(self):
        """The slot's own command pool, made on first use with the pre/post command buffers (a pool is
        externally synchronised, and a slot serves one run at a time)."""
        if self._cmd_pool is None:
            pool = self._res.command_pool()
            self.pre, self.post = self._res.command_buffer(pool), self._res.command_buffer(pool)
            self._cmd_pool = pool
        return self._cmd_pool

    def write_inputs(self, arrays, items: int | None = None) -> None:
        """Write each input into staging: one item (items None), or the first `items` items stacked
        along axis 0 (a --max-batch bundle).  A None array is skipped (a device-tensor input)."""
        views = self.in_views if items is None else [r[:items] for r in self.in_rows]
        for view, a in zip(views, arrays):
            if a is not None:
                self.copier.copy_into(view, a)

    def read_outputs(self) -> list:
        return [self.copier.copy_out(v) for v in self.out_views]

    def free(self) -> None:
        """No run holds the slot any more."""
        self.handle = None
        self.busy = False
        self.handle_done.set()

    def drop_views(self) -> None:
        """Let go of the staging views (the model closed): the memory is freed once no view is left."""
        self.in_views = self.out_views = self.in_rows = self.out_rows = None
        self.repeat_out = None


def _label(slot: Slot, cmd):
    """What a command buffer of `slot` runs, alike in every slot: the whole run ("cmd", or ("cmds", b)
    for b items); else (buffers re-recorded per run, pipelined uploads' own) the buffer's id."""
    if cmd is slot.cmd:
        return "cmd"
    for b, c in slot.cmds.items():
        if c is cmd:
            return ("cmds", b)
    for b, c in slot.bodies.items():
        if c is cmd:
            return ("body", b)
    for k, c in slot.repeats.items():
        if c is cmd:
            return ("repeat", k)
    return id(cmd)


class Slots:
    """A model's slots: which run holds each, submission order, and the GPU time of the last
    completed run (read lazily from its timestamp queries: a run pays no read-back unless asked)."""

    def __init__(self, device, slots: list, timeout_s: float | None = None):
        self.device = device
        self.timeout_s = device.default_timeout_s() if timeout_s is None else timeout_s   # per wait
        self._slots = slots
        self._lock = threading.Lock()
        self._seq = 0
        self._open = True
        self._inside = 0             # threads inside RunHandle.wait / done (shut waits for them)
        self._last_gpu_ms = None     # GPU time of the last completed run
        self._took = {}              # submitted work (Slots._key) -> shortest submit-to-done s
        self._timed = None           # the slot whose timestamps hold it, until read

    def __len__(self):
        return len(self._slots)

    def __iter__(self):
        return iter(self._slots)

    def __getitem__(self, i) -> Slot:
        return self._slots[i]

    @property
    def closed(self) -> bool:
        return not self._open

    def check_open(self) -> None:
        if not self._open:
            raise closed_error()

    def enter(self) -> None:
        """A thread starts waiting on (or polling) a run's fence: raises once the model is closed."""
        with self._lock:
            if not self._open:
                raise closed_error()
            self._inside += 1

    def leave(self) -> None:
        with self._lock:
            self._inside -= 1

    def shut(self, timeout_s: float | None) -> bool:
        """Close: no slot is handed out any more; wait (at most timeout_s, None: no limit) until no
        thread works with a slot or waits in a handle; then wait for the runs submitted and never
        waited for, and cancel their handles (wait() raises "model is closed").  False when a
        thread was still busy at the limit (nothing may be freed then)."""
        with self._lock:
            self._open = False
        end = None if timeout_s is None else time.perf_counter() + timeout_s
        while True:
            with self._lock:
                if not self._inside and not any(sl.busy and sl.handle is None for sl in self._slots):
                    break
            if end is not None and time.perf_counter() > end:
                return False
            time.sleep(0.002)
        for sl in self._slots:
            h = sl.handle
            if h is not None:
                h.cancel()
        for sl in self._slots:
            sl.drop_views()
        self._timed = None
        return True

    def acquire(self) -> Slot:
        """A free slot, marked busy: the oldest run is completed first when every slot has one.  Of the
        free slots the least recently submitted: back-to-back runs take turns, so a submit does not
        reset the timestamps of the run just completed (read back at once otherwise, to keep
        last_gpu_ms: ~0.1 ms a run on lavapipe) -- and the previous run's slot is left to its reader."""
        while True:
            with self._lock:
                self.check_open()
                free = None
                for sl in self._slots:
                    if not sl.busy and (free is None or sl.seq < free.seq):
                        free = sl
                if free is not None:
                    free.busy = True
                    return self._settled(free)
                oldest = min(self._slots, key=lambda sl: sl.seq)
            h = oldest.handle
            if h is not None:
                try:
                    h.wait()                 # completes it: its outputs stay with its handle
                except RunError:             # (and its failed check: runtime/status.py)
                    pass
            else:                            # being submitted (its handle comes next), or run in place
                oldest.handle_done.wait(0.005)

    def take(self, i: int) -> Slot:
        """Slot i, marked busy (run_in_place); an error if a run holds it."""
        with self._lock:
            self.check_open()
            sl = self._slots[i]
            if sl.busy:
                raise GpucError(f"slot {i} has a run in flight; wait for it first")
            sl.busy = True
        return self._settled(sl)

    def _settled(self, slot: Slot) -> Slot:
        """`slot` (marked busy), once a run of it that timed out is over (GpuTimeoutError again if not)."""
        if slot.late:
            try:
                self.wait(slot)
            except BaseException:
                slot.busy = False
                raise
        return slot

    def reserve_all(self) -> None:
        """Wait for the runs in flight (their outputs stay with their handles), then mark every slot
        busy: no run starts until release_all()."""
        while True:
            with self._lock:
                self.check_open()
                busy = [sl for sl in self._slots if sl.busy]
                if not busy:
                    for sl in self._slots:
                        sl.busy = True
                    break
            h = busy[0].handle
            if h is not None:
                h.wait()
            else:                               # being submitted, or a run_in_place: poll
                busy[0].handle_done.wait(0.001)
        try:
            for sl in self._slots:
                if sl.late:
                    self.wait(sl)
        except BaseException:
            self.release_all()
            raise

    def release_all(self) -> None:
        for sl in self._slots:
            sl.busy = False

    def submit(self, slot: Slot, cmds=None) -> None:
        """Submit slot.cmd, or `cmds` (a list runs in order), signalling the slot's fence."""
        if self._timed is slot:              # its timestamps are about to be reset: keep the last run's time
            self.last_gpu_ms
        with self._lock:
            self._seq += 1
            slot.seq = self._seq
            slot.handle_done.clear()
        work = slot.cmd if cmds is None else cmds
        self.device.submit(work, slot.fence)
        slot.submitted = (time.perf_counter(), self._key(slot, (work,) if cmds is None else cmds))

    @staticmethod
    def _key(slot: Slot, cmds) -> tuple:
        """The estimate's key of a submission: the same work recorded in another slot has the same key
        (runs take turns over the slots: each one's first run still finds an estimate).  Found anew per
        submit: a cached command buffer may be recorded again for other sizes (runtime/dynamic.py)."""
        return tuple(_label(slot, c) for c in cmds)

    def wait(self, slot: Slot, mode: str = "passive", deadline: float | None = None) -> None:
        """Wait for the run in `slot` (at most timeout_s, and not past `deadline`, a time.perf_counter()
        value: then GpuTimeoutError).  A wait that fails leaves the slot `late`: whoever takes it next
        waits for that run first."""
        t0, work = slot.submitted or (None, None)
        est = self._took.get(work)
        spin_at = t0 + est - SPIN_LEAD_S if est is not None else None
        timeout_s = self.timeout_s
        if deadline is not None:
            timeout_s = min(timeout_s, max(0.0, deadline - time.perf_counter()))
        try:
            self.device.wait(slot.fence, active=(mode == "active"), timeout_s=timeout_s, spin_at=spin_at)
        except GpuTimeoutError:
            slot.late = True
            if timeout_s < self.timeout_s:      # the run's deadline (runtime/program.py), not this wait's
                raise run_timeout_error(self.timeout_s) from None
            raise
        except BaseException:           # interrupted (Ctrl-C), device lost: the run may go on
            slot.late = True
            raise
        slot.late = False
        if t0 is not None:              # the shortest submit-to-seen time of this work so far
            took = time.perf_counter() - t0
            self._took[work] = took if est is None else min(est, took)
        slot.submitted = None
        if slot.status is not None:     # a kernel's run-time check failed (runtime/status.py): RunError
            slot.status.check()

    def completed(self, slot: Slot) -> None:
        """The run in `slot` has completed: its timestamps (if any) hold the last GPU time."""
        if slot.pool is not None:
            self._timed = slot

    @property
    def last_gpu_ms(self):
        sl = self._timed
        if sl is not None:
            self.enter()                     # the query pool is freed with the model
            try:
                if self._timed is sl:
                    self._timed = None
                    self._last_gpu_ms = commands.read_ms(self.device, sl.pool, 2)[-1]
            finally:
                self.leave()
        return self._last_gpu_ms

    @last_gpu_ms.setter
    def last_gpu_ms(self, value):
        self._timed, self._last_gpu_ms = None, value


class RunHandle:
    """Returned by run_async: done() polls, wait() blocks and returns the outputs (once).  A wait
    that times out (GpuTimeoutError) leaves the run in flight with its handle: wait() may be called
    again, and a run that needs its slot waits for it.  Once the model is closed, wait() and done()
    of a run not waited for before raise GpucError("model is closed") (close() cancelled it); a
    run already completed keeps its outputs.
    collect() gives the outputs (default: a copy of the slot's output staging) and cleanup() runs
    once the run is over, whatever happened (runtime/batch.py: device tensors)."""

    def __init__(self, slots: Slots, slot: Slot, collect=None, cleanup=None):
        self._slots, self._slot, self._outs = slots, slot, None
        self._collect, self._cleanup = collect, cleanup
        self.device_outputs = None              # keep_on_device: the DeviceTensors, before the run completes
        self._error = None                      # a failed run-time check (RunError): every wait raises it
        self._lock = threading.Lock()           # one thread completes the run; others get its outputs
        self._cancelled = False                 # the model closed before the run was waited for

    @classmethod
    def completed(cls, outputs) -> "RunHandle":
        """A handle of a run that is already over (synchronous runs: runtime/program.py)."""
        h = cls(None, None)
        h._outs = outputs
        return h

    def done(self) -> bool:
        if self._outs is not None or self._error is not None:
            return True
        if self._cancelled:
            raise closed_error()
        self._slots.enter()
        try:
            return vk.vkGetFenceStatus(self._slots.device.device, self._slot.fence) == vk.VK_SUCCESS
        finally:
            self._slots.leave()

    def wait(self, mode: str = "passive"):
        with self._lock:
            if self._outs is not None:
                return self._outs
            if self._error is not None:
                raise self._error
            if self._cancelled:
                raise closed_error()
            self._slots.enter()
            try:
                return self._complete(mode)
            finally:
                self._slots.leave()

    def cancel(self) -> None:
        """The model closes (Slots.shut): wait for the GPU to finish the run (at most the timeout;
        past it the run is `late` and Resources.close settles it), release what it used, and make
        wait() raise "model is closed"."""
        with self._lock:
            if self._outs is not None or self._cancelled:
                return
            self._cancelled = True
            sl = self._slot
            try:
                self._slots.wait(sl)
            except Exception:  # noqa: BLE001 - timed out or lost: nothing is freed under it (settle)
                pass
            finally:
                if self._cleanup:
                    self._cleanup()
                sl.free()

    def _complete(self, mode):
        if self._outs is None:
            sl = self._slot
            try:
                self._slots.wait(sl, mode)
            except GpuTimeoutError:
                raise                       # still in flight: the slot, its inputs and outputs stay with it
            except BaseException as e:
                if self._cleanup:
                    self._cleanup()
                sl.free()
                if isinstance(e, RunError):
                    self._error = e
                raise
            try:
                self._outs = self._collect() if self._collect else sl.read_outputs()
                self._slots.completed(sl)
            finally:
                if self._cleanup:
                    self._cleanup()
                sl.free()
        return self._outs
