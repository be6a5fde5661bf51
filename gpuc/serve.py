"""Serving and batch inference with Ray: one replica (or Ray Data actor) per GPU, each on its own
Vulkan device (`device="auto"`: the GPU that Ray's CUDA_VISIBLE_DEVICES names, matched by UUID;
runtime/device_select.py).  Ray is an optional dependency: `pip install 'gpuc[serve]'`.  This module
imports without it; what needs Ray says so (ServeMissing).

Ray Serve, from the command line (HTTP on port 8000; .npy / .npz or JSON bodies):

    gpuc serve model.bundle --replicas 2 --max-batch 32 --batch-wait-ms 5

or in a Serve application of one's own, with the deployment class:

    from ray import serve
    from gpuc.serve import GpucDeployment
    app = GpucDeployment.options(num_replicas=2, ray_actor_options={"num_gpus": 1}).bind(
        open("model.bundle", "rb").read(), max_batch=32, batch_wait_ms=5)
    handle = serve.run(app)
    out = handle.remote(image).result()          # {output name: array}; image: one item

`gpuc.serve.application(bundle, replicas=2)` builds that app with GPUs found by Ray.  Each request is
one item (an input of the bundle's batch-1 shape, its leading 1 optional); @serve.batch stacks the
requests that arrive within batch_wait_ms into one run of a --max-batch bundle (1..max_batch items).
GET /info (or handle.info.remote()) tells the replica's device, its UUID and CUDA_VISIBLE_DEVICES.

Ray Data:

    ds.map_batches(GpucPredictor, fn_constructor_kwargs={"bundle": data}, batch_size=32,
                   concurrency=2, num_gpus=1)

or `gpuc.serve.map_batches(ds, bundle, concurrency=2)`, which sizes batches to the bundle's
--max-batch and asks for one GPU per actor where the cluster has GPUs.
"""
from __future__ import annotations

import io
import json
import os

import numpy as np

from gpuc.errors import GpucError
from gpuc.runtime import settings

DEFAULT_WAIT_MS = 5.0


class ServeMissing(GpucError):
    """Ray (Serve / Data) is not installed."""


def _ray():
    try:
        import ray
        return ray
    except ImportError:
        raise ServeMissing("this needs Ray: pip install 'gpuc[serve]' (ray[serve,data])") from None


def _bundle_bytes(bundle) -> bytes:
    """A bundle path or bytes, as bytes (sent to the replicas: no shared filesystem needed)."""
    if isinstance(bundle, (bytes, bytearray, memoryview)):
        return bytes(bundle)
    from gpuc.runtime import read_bundle_file
    return read_bundle_file(bundle)


def bundle_max_batch(bundle) -> int:
    """The --max-batch a bundle (path or bytes) was compiled with, read without a device."""
    from gpuc.runtime.batch import max_batch
    from gpuc.runtime.bundle import read_bundle
    return max_batch(read_bundle(_bundle_bytes(bundle)))


def bundle_inputs(bundle) -> list:
    """[(name, item shape, numpy dtype)] of a bundle's inputs, read without a device."""
    from gpuc.runtime.bundle import read_bundle
    from gpuc.runtime.iospec import item_shape_of
    b = read_bundle(_bundle_bytes(bundle))
    return [(b.tensors[i].name, item_shape_of(b, b.tensors[i]), np.dtype(b.tensors[i].dtype)) for i in b.inputs]


class BundleRunner:
    """A bundle loaded on this process's device, running items in runs of up to its max batch.
    The Serve deployment and the Ray Data predictor both hold one; usable without Ray."""

    def __init__(self, bundle, device="auto", timeout_s=None):
        import gpuc
        self.model = gpuc.load(_bundle_bytes(bundle), device=device, timeout_s=timeout_s)
        self.max_batch = self.model.max_batch
        self.inputs = self.model.inputs
        self.outputs = self.model.outputs

    def info(self) -> dict:
        d = self.model.device.describe()
        return {"device": d["name"], "uuid": d["uuid"], "pci_bus_id": d["pci_bus_id"], "index": d["index"],
                "max_batch": self.max_batch, "pid": os.getpid(),
                "CUDA_VISIBLE_DEVICES": dict(settings.current().visible_devices).get("CUDA_VISIBLE_DEVICES")}

    def item(self, inputs, cast: bool = False) -> list:
        """One request's inputs (one array, a list in model order, or a dict by name), each of the
        input's batch-1 shape with or without its leading 1 -> a list of arrays of that shape."""
        if isinstance(inputs, dict):
            unknown = sorted(set(inputs) - {s.name for s in self.inputs})
            if unknown:
                raise GpucError(f"unknown input(s) {unknown}; the model's inputs: {[s.name for s in self.inputs]}")
            missing = [s.name for s in self.inputs if s.name not in inputs]
            if missing:
                raise GpucError(f"missing input(s) {missing}")
            vals = [inputs[s.name] for s in self.inputs]
        elif isinstance(inputs, (list, tuple)) and len(self.inputs) > 1:
            vals = list(inputs)
        else:
            vals = [inputs]
        if len(vals) != len(self.inputs):
            raise GpucError(f"the model takes {len(self.inputs)} input(s), the request has {len(vals)}")
        out = []
        for s, v in zip(self.inputs, vals):
            a = np.asarray(v)
            if a.shape == s.shape[1:] and a.shape != s.shape:
                a = a.reshape(s.shape)
            if a.shape != s.shape:
                raise GpucError(f"input {s.name!r}: one item has shape {list(s.shape)} (or {list(s.shape[1:])}), "
                                f"got {list(a.shape)}")
            out.append(a)
        if cast:
            from gpuc.runtime import iospec
            out = iospec.cast_all(self.inputs, out)
        return out

    def run_items(self, items: list) -> list[dict]:
        """Items (each a list from item()) -> one {output name: array of the output's item shape} each,
        run in stacks of up to max_batch items."""
        results = []
        for lo in range(0, len(items), self.max_batch):
            chunk = items[lo:lo + self.max_batch]
            stacked = [np.concatenate([it[k] for it in chunk]) for k in range(len(self.inputs))]
            outs = self._run(stacked)
            results += [{s.name: o[j:j + 1] for s, o in zip(self.outputs, outs)} for j in range(len(chunk))]
        return results

    def run_columns(self, columns: list) -> list:
        """Inputs stacked along axis 0 (any count n, rows of the item shape less its leading 1) ->
        outputs stacked likewise."""
        n = len(columns[0])
        outs = [[] for _ in self.outputs]
        for lo in range(0, n, self.max_batch):
            part = [np.ascontiguousarray(c[lo:lo + self.max_batch]) for c in columns]
            for k, o in enumerate(self._run(part)):
                outs[k].append(o)
        return [np.concatenate(o) if o else np.zeros((0,) + s.shape[1:], s.dtype) for o, s in zip(outs, self.outputs)]

    def _run(self, stacked: list) -> list:
        if self.max_batch == 1:                           # a batch-1 bundle: one run per item
            runs = [self.model.run([a[j:j + 1] for a in stacked]) for j in range(len(stacked[0]))]
            return [np.concatenate([r[k] for r in runs]) for k in range(len(self.outputs))]
        return list(self.model.run(stacked))


# -- HTTP bodies ------------------------------------------------------------------------------
NPY_TYPES = ("application/x-npy", "application/octet-stream", "application/x-npz")


def decode_body(runner: BundleRunner, body: bytes, content_type: str):
    """A request body -> inputs for runner.item(): .npy (a one-input model) or .npz (inputs by name, or
    arr_0.. in order) bytes; else JSON {"inputs": {name: nested list}} or {"inputs": [..in order..]}
    or a bare nested list (one-input model), cast to the input dtypes where the values fit."""
    ct = (content_type or "").split(";")[0].strip().lower()
    if ct in NPY_TYPES or body[:6] == b"\x93NUMPY" or body[:2] == b"PK":
        try:
            f = np.load(io.BytesIO(body), allow_pickle=False)
        except (ValueError, OSError, EOFError) as e:
            raise GpucError(f"the request body is not a .npy/.npz file: {e}") from None
        if isinstance(f, np.ndarray):
            return f, False
        names = list(f.files)
        if set(names) <= {s.name for s in runner.inputs}:
            return {k: f[k] for k in names}, False
        return [f[k] for k in names], False
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise GpucError(f"the request body is neither .npy/.npz nor JSON: {e}") from None
    if isinstance(doc, dict):
        if "inputs" not in doc:
            raise GpucError('a JSON body is {"inputs": {name: values}} or {"inputs": [values, ...]}')
        doc = doc["inputs"]
        if isinstance(doc, list) and len(runner.inputs) == 1:
            doc = [doc]
        if isinstance(doc, list) and len(doc) == 1:
            doc = doc[0]
    return doc, True


def encode_result(result: dict, as_npy: bool) -> tuple[bytes, str]:
    if as_npy:
        buf = io.BytesIO()
        if len(result) == 1:
            np.save(buf, next(iter(result.values())))
            return buf.getvalue(), "application/x-npy"
        np.savez(buf, **result)
        return buf.getvalue(), "application/x-npz"
    return json.dumps({"outputs": {k: v.tolist() for k, v in result.items()}}).encode(), "application/json"


# -- Ray Serve --------------------------------------------------------------------------------
class _Replica:
    """The Serve replica (wrapped by serve.deployment on first use of GpucDeployment)."""

    def __init__(self, bundle, max_batch: int | None = None, batch_wait_ms: float = DEFAULT_WAIT_MS,
                 device="auto", timeout_s=None):
        self.runner = BundleRunner(bundle, device=device, timeout_s=timeout_s)
        n = self.runner.max_batch if max_batch is None else int(max_batch)
        if n < 1:
            raise GpucError(f"max_batch must be 1 or more, not {max_batch}")
        self._batched.set_max_batch_size(n)
        self._batched.set_batch_wait_timeout_s(float(batch_wait_ms) / 1e3)
        self.batches = []                  # sizes of the last batches run (info(): how requests were batched)

    async def _batched_impl(self, items: list) -> list:
        import asyncio
        self.batches = (self.batches + [len(items)])[-1000:]
        return await asyncio.to_thread(self.runner.run_items, items)     # the event loop takes requests meanwhile

    def info(self) -> dict:
        return {**self.runner.info(), "batch_sizes": list(self.batches)}

    async def predict(self, inputs, cast: bool = False) -> dict:
        """One item -> {output name: array}; from a Python handle: handle.predict.remote(x)."""
        return await self._batched(self.runner.item(inputs, cast))

    async def __call__(self, request):
        if not hasattr(request, "body"):              # a Python handle: handle.remote(inputs)
            return await self.predict(request)
        from starlette.responses import JSONResponse, Response
        if request.method == "GET":
            return JSONResponse(self.info() if request.url.path.rstrip("/").endswith("info") else
                                {"inputs": [[s.name, list(s.shape), s.dtype.name] for s in self.runner.inputs],
                                 "outputs": [[s.name, list(s.shape), s.dtype.name] for s in self.runner.outputs]})
        body = await request.body()
        try:
            inputs, cast = decode_body(self.runner, body, request.headers.get("content-type", ""))
            result = await self.predict(inputs, cast)
        except GpucError as e:
            return JSONResponse({"error": str(e).splitlines()[0]}, status_code=400)
        data, ct = encode_result(result, not cast)
        return Response(data, media_type=ct)


_DEPLOYMENT = None
_BUILDING = []          # while serve.deployment pickles the class: no module attribute lookup of it


def _deployment():
    """GpucDeployment: _Replica as a Serve deployment with @serve.batch (made on first use)."""
    global _DEPLOYMENT
    if _DEPLOYMENT is None:
        _ray()
        from ray import serve

        class GpucDeployment(_Replica):
            __doc__ = _Replica.__doc__

            @serve.batch(max_batch_size=32, batch_wait_timeout_s=DEFAULT_WAIT_MS / 1e3)
            async def _batched(self, items: list) -> list:
                return await self._batched_impl(items)

        _BUILDING.append(1)
        try:
            _DEPLOYMENT = serve.deployment(name="gpuc", max_ongoing_requests=1024)(GpucDeployment)
        finally:
            _BUILDING.pop()
    return _DEPLOYMENT


def __getattr__(name):
    if name == "GpucDeployment" and not _BUILDING:
        return _deployment()
    if name == "GpucPredictor":
        return GpucPredictor
    raise AttributeError(name)


def gpus_per_replica(num_gpus=None) -> float:
    """1 where the Ray cluster has GPUs (one replica per GPU), else 0 (replicas share the CPU device)."""
    if num_gpus is not None:
        return float(num_gpus)
    ray = _ray()
    return 1.0 if ray.cluster_resources().get("GPU", 0) >= 1 else 0.0


def application(bundle, replicas: int = 1, max_batch: int | None = None, batch_wait_ms: float = DEFAULT_WAIT_MS,
                num_gpus=None, device="auto", timeout_s=None):
    """The Serve application (bound GpucDeployment) for `bundle` (path or bytes): `replicas` replicas of
    num_gpus each (default: 1 where Ray sees GPUs, else 0).  Start it with ray.serve.run(app)."""
    if int(replicas) < 1:
        raise GpucError(f"replicas must be 1 or more, not {replicas}")
    data = _bundle_bytes(bundle)
    mb = bundle_max_batch(data)
    if max_batch is not None and int(max_batch) > mb:
        raise GpucError(f"--max-batch {max_batch}: the bundle runs at most {mb} item(s) at once; compile it "
                        f"with --max-batch {max_batch}")
    return _deployment().options(num_replicas=int(replicas),
                                 ray_actor_options={"num_gpus": gpus_per_replica(num_gpus)}).bind(
        data, max_batch=max_batch, batch_wait_ms=batch_wait_ms, device=device, timeout_s=timeout_s)


# -- Ray Data ---------------------------------------------------------------------------------
class GpucPredictor:
    """A callable class for ds.map_batches: numpy batches {column: (n, ...)} -> {output name: (n, ...)}.
    The model's inputs are read from the columns of their names; a one-input model also from
    `column` (default: the batch's only column).  Runs of up to the bundle's max batch."""

    def __init__(self, bundle, device="auto", column: str | None = None, keep_columns=()):
        self.runner = BundleRunner(bundle, device=device)
        self.column, self.keep = column, tuple(keep_columns)

    def __call__(self, batch: dict) -> dict:
        names = [s.name for s in self.runner.inputs]
        if all(n in batch for n in names):
            cols = [batch[n] for n in names]
        elif len(names) == 1 and (self.column in batch or (self.column is None and len(batch) == 1)):
            cols = [batch[self.column] if self.column is not None else next(iter(batch.values()))]
        else:
            raise GpucError(f"the batch has columns {sorted(batch)}; the model's inputs are {names}"
                            + ("" if len(names) > 1 else " (or give column=)"))
        cols = [np.stack(list(c)) if c.dtype == object else np.asarray(c) for c in cols]
        for s, c in zip(self.runner.inputs, cols):
            if tuple(c.shape[1:]) != s.shape[1:] or c.dtype != s.dtype:
                raise GpucError(f"input {s.name!r}: rows of shape {list(s.shape[1:])} {s.dtype.name}, got "
                                f"{list(c.shape[1:])} {c.dtype.name}")
        outs = self.runner.run_columns(cols)
        res = {s.name: o for s, o in zip(self.runner.outputs, outs)}
        res.update({k: batch[k] for k in self.keep})
        return res


def map_batches(ds, bundle, concurrency: int = 1, num_gpus=None, column=None, keep_columns=(), device="auto"):
    """ds.map_batches with GpucPredictor: `concurrency` actors (one per GPU where Ray sees GPUs) and
    batches of the bundle's --max-batch."""
    data = _bundle_bytes(bundle)
    return ds.map_batches(GpucPredictor, fn_constructor_kwargs={"bundle": data, "device": device, "column": column,
                                                                "keep_columns": tuple(keep_columns)},
                          batch_size=bundle_max_batch(data), batch_format="numpy", concurrency=int(concurrency),
                          num_gpus=gpus_per_replica(num_gpus))


# -- gpuc serve -------------------------------------------------------------------------------
def serve_forever(model, replicas: int = 1, max_batch: int | None = None, batch_wait_ms: float = DEFAULT_WAIT_MS,
                  host: str = "127.0.0.1", port: int = 8000, address: str | None = None, num_gpus=None,
                  echo=print, block: bool = True):
    """`gpuc serve`: a .tflite (compiled here with --max-batch) or a bundle, served by `replicas`
    replicas over HTTP until Ctrl-C.  address: a Ray cluster's (default RAY_ADDRESS, else a local one)."""
    ray = _ray()
    from ray import serve
    path = os.fspath(model)
    if path.endswith(".tflite"):
        import gpuc
        gpuc.require_compiler("gpuc serve MODEL.tflite")
        data = gpuc.compile(path, max_batch=max_batch or 1)
    else:
        data = _bundle_bytes(path)
    if not ray.is_initialized():
        ray.init(address=address or settings.current().ray_address, configure_logging=False)
    serve.start(http_options={"host": host, "port": int(port)})
    app = application(data, replicas=replicas, max_batch=max_batch, batch_wait_ms=batch_wait_ms, num_gpus=num_gpus)
    handle = serve.run(app, name="gpuc", route_prefix="/")
    echo(f"serving {path}: {replicas} replica(s), batches of up to {max_batch or bundle_max_batch(data)} "
         f"within {batch_wait_ms:g} ms, {gpus_per_replica(num_gpus):g} GPU each, at http://{host}:{port}/ "
         "(POST .npy/.npz or JSON; GET /info; Ctrl-C stops)")
    if not block:
        return handle
    import signal
    import time

    def stop(*_):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, stop)          # kill PID stops it as Ctrl-C does (Serve shut down, Ray too)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        serve.shutdown()
        ray.shutdown()
