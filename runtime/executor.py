"""LoadedModel: a bundle on a device, ready to run.

At load: weights uploaded once into device-local memory (beside pipeline creation), one arena for
every intermediate and I/O tensor, pipelines created through the pipeline cache over a few threads
(runtime/pipelines.py), one descriptor set per dispatch, and the command buffer recorded once.
Per run: copy inputs into mapped staging memory, submit, wait, copy out.

A LoadedModel owns its resources through objects that the run paths (here, runtime/batch.py,
runtime/program.py, runtime/profile.py) use by their methods:
  resources    every Vulkan object the model made, freed by close()      (runtime/resources.py)
  arenas       the arenas (one per batch item) and the weights            (runtime/arenas.py)
  pipelines    pipelines, pipeline and descriptor-set layouts             (runtime/pipelines.py)
  descriptors  one descriptor set per dispatch and batch item             (runtime/descriptors.py)
  recorder     records command buffers: copies, dispatches, barriers      (runtime/recorder.py)
  slots        staging memory, fences, runs in flight, last GPU time      (runtime/slots.py)
  program      host (CPU) steps and control flow, when the bundle has any (runtime/program.py)
"""
from __future__ import annotations

import sys
import threading
import time

import numpy as np

from gpuc.errors import DeviceError, GpucError
from gpuc.runtime import batch as batch_runs
from gpuc.runtime import (commands, dynamic, host_import, iospec, load_checks, output_sizes, program, recorder, repeat,
                          settings, signatures, status, upload)
from gpuc.runtime.arenas import Arenas
from gpuc.runtime.bundle import OFFSET_ALIGN, Bundle
from gpuc.runtime.descriptors import Descriptors
from gpuc.runtime.device import CLOSE_GRACE_S, Device, shared_device
from gpuc.runtime.iospec import IOSpec  # noqa: F401 - re-exported
from gpuc.runtime.outputs import NamedHandle
from gpuc.runtime.overlap import Background
from gpuc.runtime.pipelines import Pipelines
from gpuc.runtime.precision import select_program
from gpuc.runtime.resources import Resources
from gpuc.runtime.slots import RunHandle, Slot, Slots, StagingView, closed_error
from gpuc.runtime.timeouts import parse_timeout


def check_alignment(device) -> None:
    """Tensors are bound at their bundle offsets, multiples of OFFSET_ALIGN: the device must accept them."""
    need = int(device.limits.minStorageBufferOffsetAlignment)
    if need > OFFSET_ALIGN or OFFSET_ALIGN % need:
        raise DeviceError(f"device {device.name!r} needs storage buffer offsets aligned to {need} bytes "
                          f"(minStorageBufferOffsetAlignment), but gpuc bundles align tensors to {OFFSET_ALIGN} "
                          "bytes; this device cannot run them")


class LoadedModel:
    def __init__(self, bundle: Bundle, device=None, slots: int = 2, timeout_s=None, arenas=None):
        self._shared_arenas = arenas         # a signature runner: its model's arenas (runtime/signatures.py)
        self._runners = {}                   # signature name -> runner, made on first use
        self.bundle = bundle
        self._timeout = parse_timeout(timeout_s, "timeout_s")     # None: the device's default
        self.n_slots = max(1, int(slots))
        self.resources = self.arenas = self.pipelines = self.descriptors = self.recorder = None
        self.slots = self.program = self.imports = None
        self._own_device = False     # no Device given: the process's shared one (runtime/device.py shared)
        self.device = device if isinstance(device, Device) else shared_device(device)
        self.load_info = {"steps_ms": {}}     # pipeline_cache status; steps_ms: where the load's time went
        self._t_mark = time.perf_counter()
        self._close_lock = threading.RLock()     # held while loading and closing: close() waits for a load
        self._closed = False
        with self._close_lock:
            try:
                self.device.adopt(self)             # Device.close() closes this model first
                self.bundle = select_program(bundle, self.device, self.load_info, type(self))      # fp16 bundle on a device without fp16: fp32
                load_checks.check(self.bundle, self.device)           # grids, sizes and ranges within its limits
                self._setup()
            except BaseException:
                self.close()
                raise

    # -- public ------------------------------------------------------------------------------
    @property
    def inputs(self) -> list[IOSpec]:
        return self._inputs

    @property
    def outputs(self) -> list[IOSpec]:
        return self._outputs

    def run(self, inputs, wait: str = "passive", keep_on_device: bool = False, cast: bool = False):
        """Run once. `inputs`: list in model order, a dict name -> array, or one array; an input may
        also be a DeviceTensor of this device, and with a max-batch bundle hold 1..max_batch items
        along axis 0.  wait="passive" blocks until shortly before the run's expected end (the shortest
        time the same work took so far), then spins at most 0.5 ms (runtime/slots.py SPIN_LEAD_S);
        wait="active" spins on the fence throughout (one busy CPU core).  keep_on_device=True returns
        DeviceTensors instead of arrays.  An array must have its input's dtype (as LiteRT's set_tensor
        demands); cast=True converts the values that fit and refuses the rest (runtime/casting.py).
        Returns the outputs as `Outputs` (runtime/outputs.py): a list in model order that also
        answers by output name (`out["logits"]`, `out.as_dict()`, `dict(out)`)."""
        # synchronous: the GPU may read large inputs from the caller's memory (runtime/host_import.py)
        return self._handle(inputs, keep_on_device, cast, borrow=True).wait(wait)

    def run_async(self, inputs, keep_on_device: bool = False, cast: bool = False) -> RunHandle:
        """Submit a run and return at once.  Up to `slots` runs are in flight, each with its own
        staging buffers (the GPU executes them in order; the CPU fills/reads the others meanwhile).
        The handle's wait() returns the outputs as run() does (`Outputs`, by position and by name)."""
        return self._handle(inputs, keep_on_device, cast)

    def _handle(self, inputs, keep_on_device: bool, cast: bool, borrow: bool = False) -> NamedHandle:
        """run_async's handle; borrow: see _submit."""
        if cast:                                          # checked conversion to the input dtypes
            inputs = iospec.cast_all(self._inputs, inputs)
        h = output_sizes.wrap(self, inputs, keep_on_device, lambda: self._submit(inputs, keep_on_device, borrow))
        return NamedHandle(h, [s.name for s in self._outputs])

    def run_repeated_async(self, k: int) -> RunHandle:
        """A model without inputs (its state feeds each run, e.g. decode_greedy): k runs back to back in
        one command buffer and one submission, a barrier between them (runtime/repeat.py).  The handle's
        wait() returns a list of k `Outputs`, run by run; last_gpu_ms then covers the k runs."""
        return repeat.run_async(self, k)

    def _submit(self, inputs, keep_on_device: bool, borrow: bool = False) -> RunHandle:
        """Submit a run.  borrow: the caller waits for it before it returns (run()), so the GPU may
        read large input arrays in place (runtime/host_import.py) instead of their copies in staging."""
        if self.program is not None:                      # host (CPU) steps / control flow: synchronous
            return program.run_async(self, inputs, keep_on_device)
        if self.dims is not None:                         # --dynamic off the batch axis: sizes per run
            return dynamic.run_async(self, inputs, keep_on_device)
        if keep_on_device or self.max_batch > 1 or iospec.has_device_tensors(inputs):
            return batch_runs.run_async(self, inputs, keep_on_device, borrow)
        arrays, _ = iospec.normalize(self._inputs, inputs)
        slots = self.slots
        spans = self.imports.spans(arrays) if borrow else None
        slot = slots.acquire()
        try:
            if spans:
                upload.submit_imported(self, slot, arrays, spans, 1)
            else:
                slot.write_inputs(arrays)
                slots.submit(slot)
        except BaseException:
            slot.free()
            if spans:
                self.imports.release(spans)
            raise
        slot.handle = RunHandle(slots, slot, cleanup=(lambda: self.imports.release(spans, slot.late)) if spans else None)
        return slot.handle

    @property
    def timeout_s(self) -> float:
        """Seconds a run may take on the GPU before it fails with GpuTimeoutError (math.inf: no
        limit).  Set at load (gpuc.load(..., timeout_s=...), else GPUC_GPU_TIMEOUT_S, else 60 s on a
        GPU and no limit on a CPU implementation such as lavapipe); may be changed (0: no limit)."""
        return self.slots.timeout_s

    @timeout_s.setter
    def timeout_s(self, value):
        t = parse_timeout(value, "timeout_s")
        self._check_open()
        self.slots.timeout_s = self.device.default_timeout_s() if t is None else t

    @property
    def last_gpu_ms(self):
        """GPU time (ms) of the last completed run, from its timestamp queries; None if unknown.
        Read lazily: a run pays no query read-back unless this is asked for."""
        return self.slots.last_gpu_ms

    @last_gpu_ms.setter
    def last_gpu_ms(self, value):
        self.slots.last_gpu_ms = value

    @property
    def signatures(self) -> list[str]:
        """A multi-signature bundle's signature keys, this model's own first ([]: one program)."""
        return signatures.names(self)

    def signature(self, name: str) -> "LoadedModel":
        """The runner of signature `name` (run, run_async, inputs, outputs ... as this model's), sharing
        this model's weights and arena, so state such as a KV cache carries across signatures."""
        return signatures.runner(self, name)

    def generate(self, prompt_ids, max_new_tokens: int, sampler=None, stop_ids=(), device_greedy: bool = True):
        """LLM bundles (prefill_N / decode signatures): a generator of new token ids, streamed as they
        are made (runtime/generate.py; sampler: generate.Sampler, default greedy, run on the device)."""
        from gpuc.runtime.generate import generate
        return generate(self, prompt_ids, max_new_tokens, sampler, stop_ids, device_greedy)

    @property
    def has_state(self) -> bool:
        """True when the model keeps variable tensors (e.g. LSTM state) across runs."""
        return bool(self.bundle.state_init)

    def reset_state(self) -> None:
        """Restore every variable tensor (e.g. LSTM state) to its initial value.  Waits for the runs
        in flight first (their outputs stay with their handles)."""
        self._check_open()
        self.slots.reserve_all()                # no run starts during the copy
        try:
            self.arenas.init_state()
        finally:
            self.slots.release_all()

    def set_state(self, name: str, value) -> None:
        """Write state (variable) tensor `name` from the host, in every arena, after the runs already
        submitted and before any later one (the state region is shared by a bundle's signatures; the
        device-greedy loop of runtime/decode_loop.py seeds its token and position this way)."""
        self._check_open()
        b = self.bundle
        states = {b.tensors[dst].name: b.tensors[dst] for dst, _ in b.state_init}
        t = states.get(name)
        if t is None:
            raise GpucError(f"set_state: no state tensor {name!r} (state: {', '.join(sorted(states)) or 'none'})")
        arr = np.asarray(value)
        if arr.dtype.name != t.dtype or arr.size != int(np.prod(t.shape, dtype=np.int64)):
            raise GpucError(f"set_state: {name!r} is {t.dtype}{list(t.shape)}; got {arr.dtype.name}{list(arr.shape)}")
        raw = np.ascontiguousarray(arr).tobytes()
        if len(raw) % 4 or len(raw) > 65536:
            raise GpucError(f"set_state: {name!r} has {len(raw)} bytes (a multiple of 4, at most 65536, written inline)")
        self.slots.reserve_all()                # no run of this runner starts during the write
        try:
            self.arenas.write_state(t.offset, raw)
        finally:
            self.slots.release_all()

    def input_view(self, i: int = 0, slot: int = 0, batch: int | None = None):
        """numpy array backed by the mapped input staging memory of `slot` (write it, then run_in_place);
        with a --max-batch bundle and `batch` b: the first b items, stacked along axis 0."""
        self._check_open()
        return StagingView.of(self._rows(self.slots[slot].in_rows, self.slots[slot].in_views, i, batch), self.slots)

    def output_view(self, i: int = 0, slot: int = 0, batch: int | None = None):
        """numpy array backed by the mapped output staging memory (valid after run_in_place)."""
        self._check_open()
        return StagingView.of(self._rows(self.slots[slot].out_rows, self.slots[slot].out_views, i, batch), self.slots)

    def _rows(self, rows, views, i, batch):
        return views[i] if batch is None else rows[i][:self._batch(batch)]

    def _batch(self, batch) -> int:
        """`batch` as an item count of this bundle (1..max_batch)."""
        if not 1 <= int(batch) <= self.max_batch:
            raise GpucError(f"batch {batch} is outside 1..{self.max_batch} (the bundle's --max-batch)")
        return int(batch)

    def run_in_place(self, slot: int = 0, wait: str = "passive", batch: int | None = None) -> None:
        """Run on whatever input_view(..., slot) holds; results land in output_view(..., slot).  With a
        --max-batch bundle, `batch` b runs the first b items of input_view(..., batch=b)."""
        self._check_open()
        b = 1 if batch is None else self._batch(batch)
        if b > 1 and self.program is not None:
            raise GpucError("run_in_place of a batch needs a bundle without host (CPU) steps")
        sl = self.slots.take(slot)
        try:
            if self.program is not None:
                self.program.run(sl, wait)
            else:
                self.slots.submit(sl, [batch_runs.batch_command(self, sl, b)] if b > 1 else None)
                self.slots.wait(sl, wait)
        finally:
            sl.free()

    def _check_open(self):
        if self.slots is None or self._closed:
            raise closed_error()
        self.slots.check_open()

    def close(self):
        """Close the model: no run starts any more (they raise GpucError("model is closed")); the runs
        in flight finish (waited for, at most their timeout) or are cancelled (their handles raise);
        then every Vulkan object is freed.  Safe from several threads at once and while other
        threads run; later calls do nothing."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
            if self.slots is not None and not self.slots.shut(self._drain_limit()):
                print("gpuc: warning: a run still works with the model at close(); its Vulkan objects are left "
                      "to the process's exit", file=sys.stderr)
                return                      # nothing is freed under a thread that still uses it
            signatures.close_runners(self)
            if self.program is not None:
                self.program.release()
            if self.resources is not None:
                self.resources.close()
            if self.device is not None:
                self.device.disown(self)
            if self._own_device and self.device is not None:
                self.device.close()

    def _drain_limit(self):
        """How long close() waits for the threads in a run (None: as long as they take): a thread
        waits at most for another run, then its own, each within the timeout."""
        t = self.slots.timeout_s
        return None if t == float("inf") else 2 * t + CLOSE_GRACE_S

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # -- setup -------------------------------------------------------------------------------
    def _setup(self):
        b, d = self.bundle, self.device
        check_alignment(d)
        self.resources = res = Resources(d)
        self.max_batch = batch_runs.max_batch(b)         # > 1: batch-native, or one arena per item (runtime/batch.py)
        self.dims = dynamic.Dims.of(b)                   # dynamic dims (runtime/dynamic.py), or None
        self._inputs, in_bytes = iospec.layout(b, b.inputs, self.max_batch)
        copied, out_bytes = iospec.layout(b, b.outputs + status.tensors(b), self.max_batch)   # + status words
        self._outputs = copied[:len(b.outputs)]
        self.arenas = self._shared_arenas or Arenas(res, b, batch_runs.arena_count(b))
        self.timestamps = commands.timestamps_supported(d)
        st = settings.current()
        self.imports = host_import.Imports(d, st.host_import, st.host_import_bytes)   # freed at close, GPU idle
        res.keep(lambda _dev, imports, _alloc: imports.close(), self.imports)
        self.slots = Slots(d, [status.attach(Slot(res, self._inputs, copied, (in_bytes, out_bytes), self.max_batch,
                                                  self.timestamps), b, len(b.outputs))
                               for _ in range(self.n_slots)], self._timeout)
        self._mark("buffers")
        # the weight upload (a host copy, then a GPU copy) runs beside pipeline creation and recording
        upload = Background(self.arenas.upload if self._shared_arenas is None else (lambda: None), name="gpuc-upload")
        try:
            self.pipelines = Pipelines(res, b, self.load_info)
            self._mark("pipelines")
            self.descriptors = Descriptors(res, b, self.pipelines, self.arenas)
            self._mark("descriptors")
            self.recorder = recorder.Recorder(res, b, self.arenas, self.pipelines, self.descriptors,
                                              self._inputs, copied)
            for sl in self.slots:
                sl.cmd = self.recorder.record(sl, sl.pool)
            self._mark("record")
        finally:
            failed = upload.error()             # the upload is over before anything is freed
        if failed is not None:
            raise failed
        self._mark("upload_wait")
        self.program = program.Program(self) if program.needs_program(b) else None

    def _mark(self, step: str) -> None:
        """load_info["steps_ms"][step] = ms since the previous mark (the load's timeline, for gpuc bench)."""
        now = time.perf_counter()
        self.load_info["steps_ms"][step] = round((now - self._t_mark) * 1e3, 3)
        self._t_mark = now
