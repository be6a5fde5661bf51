"""`gpuc.Interpreter`: LiteRT's `ai_edge_litert.interpreter.Interpreter`, call for call, on gpuc.

A LiteRT user switches by changing one import.  The model may be a .tflite (compiled behind the
scenes through the compile cache; needs the compiler: the `gpuc` distribution) or a gpuc bundle
(runs with the runtime-only install too).  Tensor details carry LiteRT's keys and, for a .tflite,
LiteRT's values (names, tensor indices, shape signatures, quantization parameters, signature
names).  Only the model's inputs and outputs are tensors here: gpuc keeps no intermediate tensors.

resize_tensor_input: a shape the loaded bundle covers (a --max-batch bundle's batch 1..N, a --dynamic
bundle's bounded dims) reuses it; any other shape of a .tflite recompiles (cached): its -1 dims with
`input_shapes`, a batch on a batch-1 axis 0 with `max_batch`.  A bundle cannot be recompiled: a
shape it does not cover is an InterpreterError naming the input.
"""
from __future__ import annotations

import json
import os

import numpy as np

from gpuc.errors import GpucError

TFLITE_ID = b"TFL3"
MAX_LOADED = 8          # bundles kept loaded per Interpreter (one per set of compile options)


class InterpreterError(GpucError, ValueError):
    """A misuse LiteRT's Interpreter answers with ValueError (unknown index or name, wrong shape or
    dtype, a resize that cannot be served); a GpucError too (exit 2 in the CLI)."""


def is_tflite(data: bytes) -> bool:
    return len(data) >= 8 and data[4:8] == TFLITE_ID


def read_model(model_path=None, model_content=None) -> bytes:
    """The model's bytes from exactly one of model_path / model_content."""
    if (model_path is None) == (model_content is None):
        raise InterpreterError("give exactly one of model_path and model_content")
    if model_content is not None:
        if not isinstance(model_content, (bytes, bytearray, memoryview)):
            raise InterpreterError(f"model_content must be bytes, not {type(model_content).__name__}")
        return bytes(model_content)
    try:
        with open(os.fspath(model_path), "rb") as f:
            return f.read()
    except OSError as e:
        raise GpucError(f"cannot read model {os.fspath(model_path)!r}: {e.strerror}") from None


def details(name, index, shape, shape_signature, dtype, quant) -> dict:
    """One tensor's details with LiteRT's keys, types and key order."""
    from gpuc.runtime.iospec import litert_quantization
    per_tensor, params = litert_quantization(quant)
    return {"name": name, "index": int(index), "shape": np.asarray(shape, np.int32),
            "shape_signature": np.asarray(shape_signature, np.int32), "dtype": np.dtype(dtype).type,
            "quantization": per_tensor, "quantization_parameters": params, "sparsity_parameters": {}}


class Port:
    """One input or output as the user sees it: LiteRT's name / index / signature name, and the
    name it has in the bundle's program."""

    def __init__(self, name, index, shape_signature, quant, bundle_name, sig_name=None):
        self.name, self.index, self.quant = name, int(index), quant
        self.shape_signature = tuple(int(d) for d in shape_signature) if shape_signature is not None else None
        self.bundle_name, self.sig_name = bundle_name, sig_name or name


def _quant(q) -> dict | None:
    if q is None:
        return None
    return {"scale": np.asarray(q.scale, np.float32).tolist(), "zero_point": np.asarray(q.zero_point).tolist(),
            "axis": int(q.axis)}


class Meta:
    """What LiteRT shows of a .tflite (compiler frontend): per subgraph its tensors' names, shape
    signatures and quantization, and the signature defs."""

    def __init__(self, data: bytes):
        from gpuc.compiler.frontend.importer import load_tflite
        m = load_tflite(data)
        self.graphs = m.subgraphs
        self.signatures = list(m.signatures or [])

    def port(self, g: int, tid: int, bundle_name: str, sig_name=None) -> Port:
        t = self.graphs[g].tensors[tid]
        return Port(t.name, tid, t.shape_signature or t.shape, _quant(t.quant), bundle_name, sig_name)


class Program:
    """One runnable view of the model (the top level, or a signature): its ports, the shapes asked
    for, the values set and the outputs of the last invoke."""

    def __init__(self, owner, key, inputs: list[Port], outputs: list[Port]):
        self.owner, self.key = owner, key           # key: the bundle signature it runs (None: the top program)
        self.inputs, self.outputs = inputs, outputs
        self.shapes = None                          # the input shapes asked for (None: the loaded ones)
        self.values, self.results = {}, None

    # -- the loaded program and how ports map onto it ------------------------------------------------
    def model(self, opts=None):
        return self.owner.runner(self.key, opts)

    def _positions(self, specs, ports, side):
        pos = {s.name: i for i, s in enumerate(specs)}
        missing = [p.bundle_name for p in ports if p.bundle_name not in pos]
        if missing or len(ports) != len(specs):
            raise GpucError(f"the bundle's {side} {[s.name for s in specs]} do not match the model's "
                            f"{[p.bundle_name for p in ports]}")
        return [pos[p.bundle_name] for p in ports]

    def current_shapes(self) -> list[tuple]:
        if self.shapes is None:
            m = self.model()
            specs = m.inputs
            self.shapes = [tuple(specs[j].shape) for j in self._positions(specs, self.inputs, "inputs")]
        return self.shapes

    def find(self, index=None, name=None, side="input") -> int:
        ports = self.inputs if side == "input" else self.outputs
        for i, p in enumerate(ports):
            if (index is not None and p.index == index) or (name is not None and p.sig_name == name):
                return i
        what = f"index {index}" if index is not None else f"name {name!r}"
        raise InterpreterError(f"no {side} tensor with {what} (the model's {side}s: "
                               f"{[(p.sig_name, p.index) for p in ports]}; gpuc keeps only inputs and outputs)")

    # -- LiteRT's calls -------------------------------------------------------------------------------
    def resize(self, i: int, shape, strict: bool = False) -> None:
        shape = tuple(int(d) for d in np.asarray(shape).reshape(-1))
        p, shapes = self.inputs[i], list(self.current_shapes())
        sig = p.shape_signature or shapes[i]
        if len(shape) != len(sig) or min(shape, default=1) < 0:
            raise InterpreterError(f"resize_tensor_input: input {p.name!r}: shape {list(shape)} does not fit its "
                                   f"rank {len(sig)} (signature {list(sig)})")
        if strict and any(s >= 0 and d != s for d, s in zip(shape, sig)):
            raise InterpreterError(f"resize_tensor_input: input {p.name!r}: strict resize of {list(shape)} changes "
                                   f"a dimension that is not -1 in its signature {list(sig)}")
        if shape != shapes[i]:
            shapes[i] = shape
            self.shapes = shapes
            self.values.pop(i, None)
            self.results = None

    def allocate(self):
        """The loaded program that runs the shapes asked for (reused where it covers them, else
        recompiled from the .tflite through the compile cache)."""
        shapes = self.current_shapes()
        m = self.model()
        if covers(m, self._positions(m.inputs, self.inputs, "inputs"), shapes):
            return m
        m = self.model(self.owner.options_for(self, shapes))
        if not covers(m, self._positions(m.inputs, self.inputs, "inputs"), shapes):
            raise InterpreterError(f"the bundle compiled for input shapes {[list(s) for s in shapes]} does not "
                                   "take them")
        return m

    def input_shape(self, i: int) -> tuple:
        return self.current_shapes()[i]

    def output_shapes(self) -> list[tuple]:
        if self.results is not None:
            return [tuple(r.shape) for r in self.results]
        m = self.allocate()
        return output_shapes(m, self._positions(m.inputs, self.inputs, "inputs"),
                             self._positions(m.outputs, self.outputs, "outputs"), self.current_shapes())

    def set(self, i: int, value) -> None:
        p, want = self.inputs[i], self.input_shape(i)
        m = self.model()
        dtype = m.inputs[self._positions(m.inputs, self.inputs, "inputs")[i]].dtype
        v = np.asarray(value)
        if v.dtype != dtype:
            raise InterpreterError(f"Cannot set tensor: got value of type {v.dtype} but expected type {dtype} for "
                                   f"input {i}, name: {p.name}")
        if tuple(v.shape) != want:
            raise InterpreterError(f"Cannot set tensor: dimension mismatch: got shape {list(v.shape)} but expected "
                                   f"{list(want)} for input {i}, name: {p.name} (resize_tensor_input first)")
        self.values[i] = np.array(v, copy=True)

    def invoke(self) -> list:
        m = self.allocate()
        pos = self._positions(m.inputs, self.inputs, "inputs")
        feed = [None] * len(pos)
        for i, j in enumerate(pos):
            v = self.values.get(i)
            feed[j] = v if v is not None else np.zeros(self.input_shape(i), m.inputs[j].dtype)
        outs = m.run(feed)
        self.results = [outs[j] for j in self._positions(m.outputs, self.outputs, "outputs")]
        return self.results

    def run_named(self, kwargs: dict) -> dict:
        """A signature runner's call: inputs by signature name, outputs by signature name."""
        names = [p.sig_name for p in self.inputs]
        unknown = [k for k in kwargs if k not in names]
        if unknown or len(kwargs) != len(names):
            raise InterpreterError(f"signature {self.key or 'of the model'}: takes inputs {names}, got "
                                   f"{sorted(kwargs)}")
        for i, n in enumerate(names):
            v = np.asarray(kwargs[n])
            if tuple(v.shape) != self.input_shape(i):
                self.resize(i, v.shape)
        for i, n in enumerate(names):
            self.set(i, kwargs[n])
        outs = self.invoke()
        return {p.sig_name: o for p, o in zip(self.outputs, outs)}

    def port_details(self, side: str) -> list[dict]:
        m = self.model()
        if side == "input":
            ports, shapes = self.inputs, self.current_shapes()
            specs = [m.inputs[j] for j in self._positions(m.inputs, ports, "inputs")]
        else:
            ports, shapes = self.outputs, self.output_shapes()
            specs = [m.outputs[j] for j in self._positions(m.outputs, ports, "outputs")]
        return [details(p.name, p.index, s, p.shape_signature or s, sp.dtype, p.quant if p.quant is not None
                        else sp.quant) for p, s, sp in zip(ports, shapes, specs)]


def covers(m, pos, shapes) -> bool:
    """Whether the loaded program `m` runs these input shapes (inputs at bundle positions `pos`)."""
    specs = [m.inputs[j] for j in pos]
    if all(tuple(s.shape) == tuple(sh) for s, sh in zip(specs, shapes)):
        return True
    if m.max_batch > 1:
        bs = {sh[0] for sh in shapes if sh}
        return len(bs) == 1 and 1 <= next(iter(bs)) <= m.max_batch and all(
            len(sh) == len(s.shape) and tuple(sh[1:]) == tuple(s.shape[1:]) for s, sh in zip(specs, shapes))
    if m.dims is not None:
        return _dynamic_sizes(m, pos, shapes) is not None
    return False


def _dynamic_sizes(m, pos, shapes):
    arrays = [None] * len(pos)
    for i, j in enumerate(pos):          # shape-only stand-ins: sizes_of reads .ndim and .shape
        arrays[j] = np.broadcast_to(np.zeros((), m.inputs[j].dtype), shapes[i])
    try:
        return m.dims.sizes_of(m.inputs, arrays)
    except GpucError:
        return None


def output_shapes(m, pos, out_pos, shapes) -> list[tuple]:
    specs = [m.outputs[j] for j in out_pos]
    if m.max_batch > 1 and shapes and shapes[0]:
        return [(shapes[0][0],) + tuple(s.shape[1:]) for s in specs]
    if m.dims is not None:
        sizes = _dynamic_sizes(m, pos, shapes)
        if sizes is not None:
            return [m.dims.shape(s.tensor, sizes) for s in specs]
    return [tuple(s.shape) for s in specs]


class SignatureRunner:
    """LiteRT's SignatureRunner: `runner(**inputs)` -> {output name: array}, by the signature's names."""

    def __init__(self, program: Program):
        self._p = program

    def __call__(self, **kwargs) -> dict:
        return self._p.run_named(kwargs)

    def get_input_details(self) -> dict:
        return {p.sig_name: d for p, d in zip(self._p.inputs, self._p.port_details("input"))}

    def get_output_details(self) -> dict:
        return {p.sig_name: d for p, d in zip(self._p.outputs, self._p.port_details("output"))}

    def resize_input(self, name: str, new_shape) -> None:
        self._p.resize(self._p.find(name=name), new_shape)

    def allocate_tensors(self) -> None:
        self._p.allocate()


class Interpreter:
    """LiteRT's Interpreter on gpuc: model_path or model_content (.tflite or bundle), then
    allocate_tensors, get_input_details / get_output_details, set_tensor, invoke, get_tensor,
    resize_tensor_input, get_signature_list / get_signature_runner.

    LiteRT's CPU options (experimental_delegates, num_threads, op resolver ...) are accepted and
    ignored: gpuc runs on the Vulkan device.  gpuc's own: device (index, name substring or Device),
    compile_options (gpuc.compile's keywords, e.g. precision="fp16", dynamic=[...], max_batch=N),
    timeout_s (see gpuc.load)."""

    def __init__(self, model_path=None, model_content=None, experimental_delegates=None, num_threads=None,
                 experimental_op_resolver_type=None, experimental_preserve_all_tensors=False,
                 experimental_disable_delegate_clustering=False,
                 experimental_default_delegate_latest_features=False, *, device=None, compile_options=None,
                 timeout_s=None):
        self._data = read_model(model_path, model_content)
        self._tflite = is_tflite(self._data)
        self._opts = dict(compile_options or {})
        if self._opts and not self._tflite:
            raise InterpreterError("compile_options need a .tflite model; this is a compiled bundle")
        self._device, self._timeout = device, timeout_s
        self._loaded = {}                    # compile options (json) -> LoadedModel, most recent last
        self._current = None                 # the key of the loaded model calls use now
        self._meta = None
        if self._tflite:
            from gpuc import require_compiler
            require_compiler("gpuc.Interpreter with a .tflite model")
            self._meta = Meta(self._data)
        self._use(self._opts)
        self._top = self._program(None)
        self._runners = {}

    # -- loading -----------------------------------------------------------------------------------------
    def _use(self, opts: dict):
        key = json.dumps(opts, sort_keys=True, default=str)
        m = self._loaded.pop(key, None)
        if m is None:
            import gpuc
            bundle = gpuc.compile(self._data, **opts) if self._tflite else self._data
            m = gpuc.load(bundle, device=self._device, timeout_s=self._timeout)
            while len(self._loaded) >= MAX_LOADED:
                self._loaded.pop(next(iter(self._loaded))).close()
        self._loaded[key] = m
        self._current = key
        return m

    def runner(self, key, opts=None):
        """The loaded program for bundle signature `key` (None: the top one), after switching to the
        bundle compiled with `opts` when given."""
        m = self._use(opts) if opts is not None else self._loaded[self._current]
        return m if key is None or key == m.bundle.signature else m.signature(key)

    def options_for(self, program: Program, shapes) -> dict:
        """Compile options for a .tflite that give `program` these input shapes."""
        if not self._tflite:
            raise InterpreterError(f"input shapes {[list(s) for s in shapes]} are outside what this bundle covers "
                                   "(a fixed shape, or its --max-batch / --dynamic bounds); give the .tflite to "
                                   "recompile, or compile the bundle with --max-batch / --dynamic")
        if len(self._meta.signatures) > 1:
            raise InterpreterError("resizing the inputs of a multi-signature model is not supported (its "
                                   "signatures are compiled at their own shapes)")
        ports, opts = program.inputs, dict(self._opts)
        g0 = self._meta.graphs[0]
        base = [tuple(g0.tensors[p.index].shape) for p in ports]
        changed = [(p, b, s) for p, b, s in zip(ports, base, shapes) if tuple(s) != b]
        if all(sd == d or sg < 0 for p, b, s in changed for d, sd, sg in zip(b, s, p.shape_signature or b)):
            opts["input_shapes"] = {p.bundle_name: list(s) for p, b, s in changed}
        elif len({s[0] for _, _, s in changed}) == 1 and all(
                b and b[0] == 1 and tuple(s[1:]) == b[1:] for _, b, s in changed) \
                and all(s and s[0] == changed[0][2][0] for s in shapes):
            opts["max_batch"] = int(changed[0][2][0])
        else:
            p, b, s = changed[0]
            raise InterpreterError(f"resize of input {p.name!r} to {list(s)}: gpuc compiles for fixed shapes and "
                                   f"can change only the -1 dims of its signature {list(p.shape_signature or b)} "
                                   "or the batch (axis 0) of a batch-1 model")
        return opts

    def _program(self, key) -> Program:
        """The Program for LiteRT's top level (key None: subgraph 0) or signature `key`."""
        m = self._loaded[self._current]
        sigs = set(m.signatures)                    # a multi-signature bundle's keys (its I/O named by them)
        if self._meta is None:                      # a bundle: its own names and tensor indices
            lm = self.runner(key)
            mk = [Port(s.name, s.tensor, _shape_signature(lm, s), s.quant, s.name) for s in lm.inputs]
            return Program(self, key, mk, [Port(s.name, s.tensor, None, s.quant, s.name) for s in lm.outputs])
        if key is None:
            g = 0
            sig = next((s for s in self._meta.signatures if s["subgraph"] == 0), None)
            run_key = sig["key"] if sig is not None and sig["key"] in sigs else None
            graph = self._meta.graphs[0]

            def bname(side, tid):
                if run_key is None:
                    return graph.tensors[tid].name
                return {v: k for k, v in sig[side].items()}[tid]
            ins = [self._meta.port(g, t, bname("inputs", t)) for t in graph.inputs]
            outs = [self._meta.port(g, t, bname("outputs", t)) for t in graph.outputs]
            return Program(self, run_key, ins, outs)
        sig = next(s for s in self._meta.signatures if s["key"] == key)
        g, graph = sig["subgraph"], self._meta.graphs[sig["subgraph"]]
        run_key = key if key in sigs else None

        def port(side, name, tid):
            return self._meta.port(g, tid, name if run_key else graph.tensors[tid].name, name)
        ins = sorted((port("inputs", n, t) for n, t in sig["inputs"].items()), key=lambda p: p.sig_name)
        outs = sorted((port("outputs", n, t) for n, t in sig["outputs"].items()), key=lambda p: p.sig_name)
        return Program(self, run_key, ins, outs)

    # -- LiteRT's Interpreter API --------------------------------------------------------------------
    def allocate_tensors(self) -> None:
        self._top.allocate()

    def get_input_details(self) -> list[dict]:
        return self._top.port_details("input")

    def get_output_details(self) -> list[dict]:
        return self._top.port_details("output")

    def get_tensor_details(self, subgraph_index=0) -> list[dict]:
        """The inputs' and outputs' details (gpuc keeps no other tensors)."""
        return self.get_input_details() + self.get_output_details()

    def set_tensor(self, tensor_index, value) -> None:
        self._top.set(self._top.find(index=int(tensor_index)), value)

    def resize_tensor_input(self, input_index, tensor_size, strict=False) -> None:
        self._top.resize(self._top.find(index=int(input_index)), tensor_size, strict)

    def invoke(self) -> None:
        self._top.invoke()

    def get_tensor(self, tensor_index, subgraph_index=0) -> np.ndarray:
        """A copy of an output of the last invoke, or of an input's value set."""
        return np.array(self._tensor(int(tensor_index)), copy=True)

    def tensor(self, tensor_index):
        """LiteRT's tensor(): a function returning the tensor's current array (no copy)."""
        return lambda: self._tensor(int(tensor_index))

    def _tensor(self, index: int) -> np.ndarray:
        p = self._top
        if any(q.index == index for q in p.outputs):
            if p.results is None:
                raise InterpreterError(f"tensor {index} is an output: call invoke() before get_tensor")
            return p.results[p.find(index=index, side="output")]
        i = p.find(index=index)
        v = p.values.get(i)
        if v is None:
            m = p.model()
            v = np.zeros(p.input_shape(i), m.inputs[p._positions(m.inputs, p.inputs, "inputs")[i]].dtype)
        return v

    def get_signature_list(self) -> dict:
        """{signature key: {"inputs": [names], "outputs": [names]}} ({} for a model without signatures)."""
        if self._meta is not None:
            return {s["key"]: {"inputs": sorted(s["inputs"]), "outputs": sorted(s["outputs"])}
                    for s in self._meta.signatures}
        m = self._loaded[self._current]
        return {k: {"inputs": sorted(s.name for s in r.inputs), "outputs": sorted(s.name for s in r.outputs)}
                for k in m.signatures for r in [m.signature(k)]}

    def get_signature_runner(self, signature_key=None) -> SignatureRunner:
        keys = list(self.get_signature_list())
        if signature_key is None:
            if len(keys) != 1:
                raise InterpreterError(f"signature_key is None and the model has {len(keys)} signatures; None is "
                                       "only allowed when the model has 1 signature")
            signature_key = keys[0]
        if signature_key not in keys:
            raise InterpreterError(f"Invalid signature_key provided: {signature_key!r} (signatures: {keys})")
        if signature_key not in self._runners:
            self._runners[signature_key] = self._program(signature_key)
        return SignatureRunner(self._runners[signature_key])

    def reset_all_variables(self) -> None:
        for m in self._loaded.values():
            m.reset_state()

    def close(self) -> None:
        """Release the loaded bundles (LiteRT frees on garbage collection; gpuc frees then too)."""
        for m in self._loaded.values():
            m.close()
        self._loaded.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _shape_signature(m, spec) -> tuple:
    """A bundle input's shape with -1 where the bundle takes other sizes (batch of a --max-batch
    bundle, --dynamic dims)."""
    sig = list(spec.shape)
    if m.max_batch > 1 and sig:
        sig[0] = -1
    if m.dims is not None:
        j = [s.name for s in m.inputs].index(spec.name)
        for pos, axis, _, _ in m.dims.dims:
            if pos == j:
                sig[axis] = -1
    return tuple(sig)
