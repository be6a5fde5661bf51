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

    def item(self, inputs, cast: bool = False, widen: bool = False) -> list:
        """One request's inputs (one array, a list in model order, or a dict by name), each of the
        input's batch-1 shape with or without its leading 1 -> a list of arrays of that shape."""
        items = self.items(inputs, cast, widen)
        if len(items) != 1:
            raise GpucError(f"one item has shape {list(self.inputs[0].shape)}; the request holds {len(items)}")
        return items[0]

    def items(self, inputs, cast: bool = False, widen: bool = False) -> list:
        """A request's inputs, as item(), or each a stack of k items along axis 0 (the input's shape
        with k for its leading 1) -> k items (lists of views of the request's arrays).  cast: python
        values convert where they fit (JSON); widen: a typed array of another dtype converts to the
        input's where every value is kept exactly (np.can_cast 'safe': uint8/float16 -> float32, ...)."""
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
        out, k = [], None
        for s, v in zip(self.inputs, vals):
            a = np.asarray(v)
            if a.shape == s.shape[1:] and a.shape != s.shape:
                a = a.reshape(s.shape)
            if a.ndim != len(s.shape) or a.shape[1:] != s.shape[1:] or a.shape[0] < 1:
                raise GpucError(f"input {s.name!r}: one item has shape {list(s.shape)} (or {list(s.shape[1:])}), "
                                f"k items {['k'] + list(s.shape[1:])}; got {list(a.shape)}")
            if k is not None and a.shape[0] != k:
                raise GpucError(f"inputs disagree on the number of items ({k} and {a.shape[0]} at {s.name!r})")
            k = a.shape[0]
            out.append(a)
        if cast:
            from gpuc.runtime import iospec
            out = iospec.cast_all(self.inputs, out)
        for j, (s, a) in enumerate(zip(self.inputs, out)):
            if a.dtype != s.dtype:
                if not (widen and np.can_cast(a.dtype, s.dtype, "safe")):
                    raise GpucError(f"input {s.name!r} is {s.dtype.name}, the request's is {a.dtype.name}" + (
                        " (not converted: not every value converts exactly)" if widen else
                        " (over HTTP, X-Gpuc-Cast: exact converts a dtype whose values all convert exactly)"))
                out[j] = a.astype(s.dtype)
        return [[a[i:i + 1] for a in out] for i in range(k)]

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
# A POST body is one item, or k items stacked along axis 0 (the answer then stacks the k outputs):
#   .npy / .npz (application/x-npy, application/x-npz)   answer: .npy (one output) / .npz
#   raw bytes (application/octet-stream), one-input models: C-order values of the input's dtype, or
#       of X-Gpuc-Dtype's; k = the body's size / one item's; read in place (np.frombuffer, no copy);
#       X-Gpuc-Shape (optional, "k,224,224,3") is checked.  Answer: .npy.  Without those headers a
#       body starting with the .npy magic, or with an .npz's PK\3\4 and not a whole number of items,
#       is read as .npy/.npz (as application/octet-stream bodies were before raw ones).
#   JSON {"inputs": {name: nested list}} / {"inputs": [...]} / a bare nested list: values cast where
#       they fit.  Answer: JSON {"outputs": {name: nested list}}
# X-Gpuc-Cast: exact -- a typed body (.npy/.npz/raw) of another dtype than the input's converts to it
#   where every value converts exactly (uint8, int8, int16, float16 -> float32; ...); else a 400.
NPY_TYPES = ("application/x-npy", "application/x-npz")
RAW_TYPE = "application/octet-stream"


def _header(headers, name: str) -> str:
    return (headers.get(name) or headers.get(name.lower()) or "").strip() if headers else ""


def _raw_array(runner: BundleRunner, body, headers) -> np.ndarray:
    if len(runner.inputs) != 1:
        raise GpucError(f"a raw body serves one-input models; this one takes {len(runner.inputs)} "
                        f"({[s.name for s in runner.inputs]}): send .npz")
    s = runner.inputs[0]
    name = _header(headers, "X-Gpuc-Dtype")
    try:
        dt = np.dtype(name) if name else s.dtype
    except TypeError:
        raise GpucError(f"X-Gpuc-Dtype: {name!r} is not a dtype") from None
    if dt.hasobject or dt.itemsize == 0:
        raise GpucError(f"X-Gpuc-Dtype: {name!r} is not a numeric dtype")
    item = int(np.prod(s.shape[1:], dtype=np.int64)) * dt.itemsize
    if not body or len(body) % item:
        raise GpucError(f"input {s.name!r}: a raw body holds k items of {list(s.shape[1:])} {dt.name} "
                        f"({item} bytes each); got {len(body)} bytes")
    a = np.frombuffer(body, dt).reshape((len(body) // item,) + tuple(s.shape[1:]))
    shape = _header(headers, "X-Gpuc-Shape")
    if shape:
        try:
            want = tuple(int(v) for v in shape.replace("x", ",").split(",") if v.strip())
        except ValueError:
            raise GpucError(f"X-Gpuc-Shape: {shape!r} is not a shape (k,h,w,c)") from None
        if want not in (a.shape, a.shape[1:]) or (want == a.shape[1:] and len(a) != 1):
            raise GpucError(f"X-Gpuc-Shape {list(want)} does not match the raw body ({len(body)} bytes: "
                            f"{list(a.shape)} {dt.name})")
    return a


def _odd_size(runner: BundleRunner, body) -> bool:
    """Not a whole number of raw items: an application/octet-stream body starting PK is then an .npz
    (before raw bodies, clients sent .npy/.npz under application/octet-stream)."""
    if len(runner.inputs) != 1:
        return True
    s = runner.inputs[0]
    return len(body) % (int(np.prod(s.shape[1:], dtype=np.int64)) * s.dtype.itemsize) != 0


def decode_body(runner: BundleRunner, body: bytes, headers) -> tuple[list, bool]:
    """A request body and its headers (a mapping; or the content type alone) -> (items for the
    replica: lists of arrays in model order, the answer as .npy/.npz (else JSON))."""
    if isinstance(headers, str):
        headers = {"content-type": headers}
    ct = _header(headers, "Content-Type").split(";")[0].strip().lower()
    widen = _header(headers, "X-Gpuc-Cast").lower() == "exact"
    if _header(headers, "X-Gpuc-Cast") and not widen:
        raise GpucError(f"X-Gpuc-Cast: {_header(headers, 'X-Gpuc-Cast')!r}; the one cast is 'exact'")
    declared = _header(headers, "X-Gpuc-Dtype") or _header(headers, "X-Gpuc-Shape")
    if ct == RAW_TYPE and (declared or body[:6] != b"\x93NUMPY" and not (body[:4] == b"PK\x03\x04"
                                                                       and _odd_size(runner, body))):
        return runner.items(_raw_array(runner, body, headers), widen=widen), True
    if body[:6] == b"\x93NUMPY" or body[:2] == b"PK" or ct in NPY_TYPES or ct == RAW_TYPE:
        try:
            f = np.load(io.BytesIO(body), allow_pickle=False)
        except (ValueError, OSError, EOFError) as e:
            raise GpucError(f"the request body is not a .npy/.npz file: {e}") from None
        if isinstance(f, np.ndarray):
            return runner.items(f, widen=widen), True
        names = list(f.files)
        if set(names) <= {s.name for s in runner.inputs}:
            return runner.items({k: f[k] for k in names}, widen=widen), True
        return runner.items([f[k] for k in names], widen=widen), True
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise GpucError(f"the request body is neither .npy/.npz, raw ({RAW_TYPE}) nor JSON: {e}") from None
    if isinstance(doc, dict):
        if "inputs" not in doc:
            raise GpucError('a JSON body is {"inputs": {name: values}} or {"inputs": [values, ...]}')
        doc = doc["inputs"]
        if isinstance(doc, list) and len(runner.inputs) == 1:
            doc = [doc]
        if isinstance(doc, list) and len(doc) == 1:
            doc = doc[0]
    return [runner.item(doc, cast=True)], False


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
                 device="auto", timeout_s=None, dry_run: bool = False):
        self.runner = BundleRunner(bundle, device=device, timeout_s=timeout_s)
        n = self.runner.max_batch if max_batch is None else int(max_batch)
        if n < 1:
            raise GpucError(f"max_batch must be 1 or more, not {max_batch}")
        self._batched.set_max_batch_size(n)
        self._batched.set_batch_wait_timeout_s(float(batch_wait_ms) / 1e3)
        self.batches = []                  # sizes of the last batches run (info(): how requests were batched)
        self.dry_run = bool(dry_run)       # answer zeros without running the model: the serving path alone

    async def _batched_impl(self, items: list) -> list:
        import asyncio
        self.batches = (self.batches + [len(items)])[-1000:]
        if self.dry_run:
            return [{s.name: np.zeros(s.shape, s.dtype) for s in self.runner.outputs} for _ in items]
        return await asyncio.to_thread(self.runner.run_items, items)     # the event loop takes requests meanwhile

    def info(self) -> dict:
        return {**self.runner.info(), "batch_sizes": list(self.batches), "dry_run": self.dry_run}

    async def predict(self, inputs, cast: bool = False) -> dict:
        """One item -> {output name: array}; from a Python handle: handle.predict.remote(x)."""
        return await self._batched(self.runner.item(inputs, cast))

    async def predict_many(self, inputs, cast: bool = False) -> dict:
        """k items stacked along axis 0 (or one item) -> {output name: the k outputs stacked}; each
        item joins the dynamic batches on its own: handle.predict_many.remote(x)."""
        return await self._stacked(self.runner.items(inputs, cast))

    async def _stacked(self, items: list) -> dict:
        import asyncio
        outs = await asyncio.gather(*[self._batched(it) for it in items])
        return {s.name: np.concatenate([o[s.name] for o in outs]) for s in self.runner.outputs}

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
            items, as_npy = decode_body(self.runner, body, request.headers)
            result = await self._stacked(items)
        except GpucError as e:
            return JSONResponse({"error": str(e).splitlines()[0]}, status_code=400)
        data, ct = encode_result(result, as_npy)
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
                num_gpus=None, device="auto", timeout_s=None, dry_run: bool = False):
    """The Serve application (bound GpucDeployment) for `bundle` (path or bytes): `replicas` replicas of
    num_gpus each (default: 1 where Ray sees GPUs, else 0).  Start it with ray.serve.run(app).  dry_run:
    the replicas answer zeros without running the model (to measure the serving path alone)."""
    if int(replicas) < 1:
        raise GpucError(f"replicas must be 1 or more, not {replicas}")
    data = _bundle_bytes(bundle)
    mb = bundle_max_batch(data)
    if max_batch is not None and int(max_batch) > mb:
        raise GpucError(f"--max-batch {max_batch}: the bundle runs at most {mb} item(s) at once; compile it "
                        f"with --max-batch {max_batch}")
    return _deployment().options(num_replicas=int(replicas),
                                 ray_actor_options={"num_gpus": gpus_per_replica(num_gpus)}).bind(
        data, max_batch=max_batch, batch_wait_ms=batch_wait_ms, device=device, timeout_s=timeout_s, dry_run=dry_run)


def ingress_urls(app_name: str = "gpuc", host: str | None = None) -> list[str]:
    """The HTTP addresses serving `app_name`: with Ray Serve's direct ingress
    (RAY_SERVE_ENABLE_DIRECT_INGRESS=1 where Ray starts: each replica runs its own HTTP server, on a
    port from 30000, and no proxy stands between client and replica) one per replica; else the
    proxies'.  host: the address to name (default: each node's IP; a server bound to 127.0.0.1, as
    serve.start(http_options={"host": "127.0.0.1"}) binds it, needs "127.0.0.1").  [] where this Ray
    does not tell (an internal Serve call: Ray 2.5x and later)."""
    ray = _ray()
    try:
        from ray.serve.context import _get_global_client
        groups = ray.get(_get_global_client()._controller.get_target_groups.remote(app_name), timeout=30)
    except Exception:               # noqa: BLE001 -- an older Ray without target groups
        return []
    return sorted({f"http://{host or t.ip}:{t.port}/" for g in groups
                   if str(getattr(g.protocol, "value", g.protocol)).lower() == "http" for t in g.targets})


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
                  echo=print, block: bool = True, direct_ingress: bool = False):
    """`gpuc serve`: a .tflite (compiled here with --max-batch) or a bundle, served by `replicas`
    replicas over HTTP until Ctrl-C.  address: a Ray cluster's (default RAY_ADDRESS, else a local one).
    direct_ingress: each replica serves HTTP itself on its own port (Ray Serve's direct ingress, no
    proxy hop: the one Serve proxy of a node is what caps HTTP throughput); takes effect on a local
    cluster started here (a `ray start` cluster needs RAY_SERVE_ENABLE_DIRECT_INGRESS=1 where it starts)."""
    if direct_ingress:
        from gpuc.runtime import settings
        settings.export("RAY_SERVE_ENABLE_DIRECT_INGRESS", "1")
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
         "(POST .npy/.npz, raw or JSON; GET /info; Ctrl-C stops)")
    if direct_ingress:
        urls = ingress_urls("gpuc", host if host not in ("0.0.0.0", "::") else None)
        echo(f"direct ingress: each replica at its own address, spread the clients over them: {' '.join(urls)}"
             if urls else "direct ingress: this Ray did not name the replicas' addresses (ports from 30000)")
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
