"""`gpuc.CompiledModel`: LiteRT's `ai_edge_litert.compiled_model.CompiledModel` flow on gpuc.

    model = CompiledModel.from_file("m.tflite", hardware_accel=HardwareAccelerator.GPU)
    inputs, outputs = model.create_input_buffers(0), model.create_output_buffers(0)
    inputs[0].write(x)
    model.run_by_index(0, inputs, outputs)          # or run_by_name(key, {name: buf}, {name: buf})
    y = outputs[0].read(n, np.float32)

Thin over gpuc.Interpreter (gpuc/interpreter.py), which compiles a .tflite through the compile cache
or takes a bundle: a signature index or key names a signature runner (index 0 of a model without
signatures is the model itself).  TensorBuffers are host arrays; the run copies them to the device
and back.  run_by_index_async / run_by_name_async submit and return a RunHandle (wait() fills the
output buffers), as LiteRT's C++ RunAsync does.  hardware_accel is accepted for LiteRT's code:
gpuc always runs on the Vulkan device (CPU alone is refused: that is LiteRT's job).
"""
from __future__ import annotations

import enum

import numpy as np

from gpuc.interpreter import Interpreter, InterpreterError, read_model


class HardwareAccelerator(enum.IntFlag):
    """LiteRT's accelerator flags.  gpuc runs on the GPU (Vulkan) whatever CPU is combined with."""
    CPU = 1
    GPU = 2
    NPU = 4


class TensorBuffer:
    """LiteRT's TensorBuffer over a host numpy array: write(array), read(num_elements, dtype),
    get_tensor_details()."""

    def __init__(self, array: np.ndarray):
        self._array = array

    @classmethod
    def create_from_host_memory(cls, data_array: np.ndarray) -> "TensorBuffer":
        a = np.asarray(data_array)
        if not a.flags.c_contiguous:
            raise InterpreterError("create_from_host_memory: the array must be C-contiguous")
        return cls(a)

    def write(self, data_array) -> None:
        a = np.asarray(data_array)
        if self._array is None:
            raise InterpreterError("write: this TensorBuffer was destroyed")
        if a.dtype != self._array.dtype or a.size != self._array.size:
            raise InterpreterError(f"write: the buffer holds {self._array.size} x {self._array.dtype}, got "
                                   f"{a.size} x {a.dtype}")
        self._array.reshape(-1)[...] = a.reshape(-1)

    def read(self, num_elements: int, output_dtype) -> np.ndarray:
        dt = np.dtype(output_dtype)
        if dt != self._array.dtype or not 0 <= int(num_elements) <= self._array.size:
            raise InterpreterError(f"read: the buffer holds {self._array.size} x {self._array.dtype}, asked for "
                                   f"{num_elements} x {dt}")
        return self._array.reshape(-1)[:int(num_elements)].copy()

    def numpy(self) -> np.ndarray:
        """The buffer's contents in its tensor's shape (a copy)."""
        return self._array.copy()

    def get_tensor_details(self) -> dict:
        return {"dtype": self._array.dtype.name, "shape": list(self._array.shape)}

    def destroy(self) -> None:
        self._array = None

    def _fill(self, value: np.ndarray) -> None:
        if self._array.shape != value.shape:        # an output of a resized run: the buffer follows it
            self._array = np.empty(value.shape, value.dtype)
        self._array[...] = value


class RunHandle:
    """A submitted run (run_by_*_async): wait() waits for it and fills the output buffers."""

    def __init__(self, handle, finish):
        self._handle, self._finish, self._done = handle, finish, False

    def wait(self) -> None:
        if not self._done:
            self._finish(self._handle.wait())
            self._done = True

    def done(self) -> bool:
        """Whether the run has finished on the device (wait() still fills the buffers)."""
        return self._done or self._handle.done()


class CompiledModel:
    """A model compiled for the GPU: LiteRT's CompiledModel calls (see the module's docstring)."""

    def __init__(self, interpreter: Interpreter):
        self._it = interpreter

    @classmethod
    def from_file(cls, model_path, hardware_accel=None, environment=None, options=None, **gpuc_options):
        """A .tflite (compiled through the compile cache) or a gpuc bundle.  gpuc_options: device,
        compile_options, timeout_s (gpuc.Interpreter's)."""
        return cls.from_buffer(read_model(model_path=model_path), hardware_accel, environment, options, **gpuc_options)

    @classmethod
    def from_buffer(cls, model_data, hardware_accel=None, environment=None, options=None, **gpuc_options):
        if hardware_accel is not None and not int(hardware_accel) & int(HardwareAccelerator.GPU):
            raise InterpreterError(f"hardware_accel={HardwareAccelerator(int(hardware_accel))!r}: gpuc runs models "
                                   "on the GPU; ask for HardwareAccelerator.GPU (LiteRT runs the CPU)")
        return cls(Interpreter(model_content=read_model(model_content=model_data), **gpuc_options))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        self._it.close()

    # -- signatures --------------------------------------------------------------------------------
    def _keys(self) -> list:
        return list(self._it.get_signature_list()) or [None]

    def _program(self, signature):
        keys = self._keys()
        if isinstance(signature, (int, np.integer)) and not isinstance(signature, bool):
            if not 0 <= signature < len(keys):
                raise InterpreterError(f"signature index {signature} is out of range ({len(keys)} signature(s))")
            key = keys[signature]
        else:
            key = signature
            if key not in keys:
                raise InterpreterError(f"Unknown signature: {key!r} (signatures: {[k for k in keys if k]})")
        return self._it._top if key is None else self._it.get_signature_runner(key)._p

    def get_signature_list(self) -> dict:
        """{key: {"inputs": [names], "outputs": [names]}} in tensor-index order (a model without
        signatures: one, keyed "")."""
        out = {}
        for i, key in enumerate(self._keys()):
            d = self.get_signature_by_index(i)
            out[d["key"]] = {"inputs": d["inputs"], "outputs": d["outputs"]}
        return out

    def get_num_signatures(self) -> int:
        return len(self._keys())

    def get_signature_index(self, key: str) -> int:
        keys = self._keys()
        return keys.index(key) if key in keys else -1

    def get_signature_by_index(self, index: int) -> dict:
        p = self._program(index)
        return {"key": self._keys()[index] or "", "inputs": [q.sig_name for q in _by_index(p.inputs)],
                "outputs": [q.sig_name for q in _by_index(p.outputs)]}

    def get_input_tensor_details(self, signature_key) -> dict:
        return self._details(self._program(signature_key), "input")

    def get_output_tensor_details(self, signature_key) -> dict:
        return self._details(self._program(signature_key), "output")

    @staticmethod
    def _details(p, side) -> dict:
        ports = p.inputs if side == "input" else p.outputs
        full = dict(zip([q.sig_name for q in ports], p.port_details(side)))
        return {q.sig_name: {"name": full[q.sig_name]["name"], "index": full[q.sig_name]["index"],
                             "dtype": np.dtype(full[q.sig_name]["dtype"]).name,
                             "shape": full[q.sig_name]["shape"].tolist()} for q in _by_index(ports)}

    def is_fully_accelerated(self) -> bool:
        """True when every step of the bundle runs on the GPU (no CPU fallback steps)."""
        m = self._it.runner(None)
        return m.program is None

    # -- buffers ---------------------------------------------------------------------------------------
    def _buffers(self, signature, side) -> list[TensorBuffer]:
        p = self._program(signature)
        ports = p.inputs if side == "input" else p.outputs
        d = dict(zip([q.sig_name for q in ports], p.port_details(side)))
        return [TensorBuffer(np.zeros(d[q.sig_name]["shape"], d[q.sig_name]["dtype"])) for q in _by_index(ports)]

    def create_input_buffers(self, signature_index: int = 0) -> list[TensorBuffer]:
        return self._buffers(signature_index, "input")

    def create_output_buffers(self, signature_index: int = 0) -> list[TensorBuffer]:
        return self._buffers(signature_index, "output")

    def _buffer_by_name(self, signature_key, name, side) -> TensorBuffer:
        p = self._program(signature_key)
        ports = _by_index(p.inputs if side == "input" else p.outputs)
        names = [q.sig_name for q in ports]
        if name not in names:
            raise InterpreterError(f"Unknown {side} {name!r} for signature {signature_key!r} ({side}s: {names})")
        return self._buffers(signature_key, side)[names.index(name)]

    def create_input_buffer_by_name(self, signature_key, input_name) -> TensorBuffer:
        return self._buffer_by_name(signature_key, input_name, "input")

    def create_output_buffer_by_name(self, signature_key, output_name) -> TensorBuffer:
        return self._buffer_by_name(signature_key, output_name, "output")

    def get_input_buffer_requirements(self, input_index: int, signature_index: int = 0) -> dict:
        b = self.create_input_buffers(signature_index)[input_index]._array
        return {"buffer_size": int(b.nbytes), "supported_types": ["host"]}

    def get_output_buffer_requirements(self, output_index: int, signature_index: int = 0) -> dict:
        b = self.create_output_buffers(signature_index)[output_index]._array
        return {"buffer_size": int(b.nbytes), "supported_types": ["host"]}

    # -- resize ---------------------------------------------------------------------------------------
    def resize_input_tensor(self, input_index: int, dims, signature_index: int = 0, strict: bool = True) -> None:
        p = self._program(signature_index)
        port = _by_index(p.inputs)[input_index]
        p.resize(p.inputs.index(port), dims, strict)
        p.allocate()

    def resize_input_tensor_by_name(self, signature_key, input_name, dims, strict: bool = True) -> None:
        p = self._program(signature_key)
        p.resize(p.find(name=input_name), dims, strict)
        p.allocate()

    # -- runs -----------------------------------------------------------------------------------------------
    def run_by_index(self, signature_index, input_buffers, output_buffers) -> None:
        self.run_by_index_async(signature_index, input_buffers, output_buffers).wait()

    def run_by_name(self, signature_key, input_map: dict, output_map: dict) -> None:
        self.run_by_name_async(signature_key, input_map, output_map).wait()

    def run_by_index_async(self, signature_index, input_buffers, output_buffers) -> RunHandle:
        p = self._program(signature_index)
        ins, outs = _by_index(p.inputs), _by_index(p.outputs)
        if len(input_buffers) != len(ins) or len(output_buffers) != len(outs):
            raise InterpreterError(f"signature {signature_index}: takes {len(ins)} input and {len(outs)} output "
                                   f"buffers, got {len(input_buffers)} and {len(output_buffers)}")
        return self._submit(p, dict(zip([q.sig_name for q in ins], input_buffers)),
                            dict(zip([q.sig_name for q in outs], output_buffers)))

    def run_by_name_async(self, signature_key, input_map: dict, output_map: dict) -> RunHandle:
        p = self._program(signature_key)
        for side, ports, given in (("input", p.inputs, input_map), ("output", p.outputs, output_map)):
            names = sorted(q.sig_name for q in ports)
            if sorted(given) != names:
                raise InterpreterError(f"signature {signature_key!r}: {side} names {names}, got {sorted(given)}")
        return self._submit(p, input_map, output_map)

    @staticmethod
    def _submit(p, input_map, output_map) -> RunHandle:
        for i, q in enumerate(p.inputs):
            a = input_map[q.sig_name]._array
            if a is None:
                raise InterpreterError(f"input {q.sig_name!r}: its TensorBuffer was destroyed")
            if tuple(a.shape) != p.input_shape(i):
                p.resize(i, a.shape)
            p.set(i, a)
        m = p.allocate()
        pos = p._positions(m.inputs, p.inputs, "inputs")
        feed = [None] * len(pos)
        for i, j in enumerate(pos):
            feed[j] = p.values[i]
        out_pos = p._positions(m.outputs, p.outputs, "outputs")

        def finish(outs):
            p.results = [outs[j] for j in out_pos]
            for q, r in zip(p.outputs, p.results):
                output_map[q.sig_name]._fill(r)
        return RunHandle(m.run_async(feed), finish)


def _by_index(ports) -> list:
    """Ports in tensor-index order (LiteRT's CompiledModel lists a signature's tensors so)."""
    return sorted(ports, key=lambda q: q.index)
