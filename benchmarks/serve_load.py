"""Closed-loop load on `gpuc serve` (gpuc/serve.py): N concurrent clients, each sending one request
(one image, .npy body) and waiting for its answer before the next; throughput and p50/p99 latency
for each client count, with 1 replica and with 2 (one per GPU where Ray sees GPUs).

    python -m benchmarks.serve_load MODEL.tflite|BUNDLE [--replicas 1,2] [--clients 1,8,32,128]
        [--seconds 20] [--max-batch 32] [--batch-wait-ms 5] [--via http|handle|trivial] [--procs 4]
        [--body npy|raw] [--items K] [--body-dtype uint8] [--dry-run] [--inline-kb 1024] [--json FILE]

A .tflite is compiled with --max-batch.  --via http: POSTs to the Serve proxy (aiohttp clients);
handle: the Python DeploymentHandle.  --procs spreads the clients over that many client processes, so
that the load generator is not the bottleneck.  Each replica's /info (device, UUID,
CUDA_VISIBLE_DEVICES) is printed: on a multi-GPU host each replica should name a different UUID.

--body raw: application/octet-stream bodies (read in place by the replica) instead of .npy; --items K:
K images per request (a stacked .npy / raw body; throughput is then also given in items/s);
--body-dtype: the body's dtype (X-Gpuc-Dtype, X-Gpuc-Cast: exact), e.g. uint8 for a float32 input;
--direct-ingress: RAY_SERVE_ENABLE_DIRECT_INGRESS=1 (Ray Serve 2.5x): each replica serves HTTP on its
own port and the clients spread over them (no proxy hop); --dry-run: replicas answer zeros without running the model (the serving path alone); --via trivial:
the same clients against a bare aiohttp server that reads the body and answers 12 bytes (the load
generator's own ceiling); --inline-kb: Ray's max_direct_call_object_size (objects up to it travel
inline in the RPC instead of through the object store: the request body the replica fetches from the
proxy is one), set before Ray starts (a local cluster only).
"""
import argparse
import asyncio
import io
import json
import multiprocessing as mp
import os
import statistics
import time

import numpy as np



def _client_proc(args):
    """One client process: `n` closed-loop clients until `deadline`; returns latencies (s) of the
    requests that ended after `start`."""
    via, url, body, headers, n, first, start, deadline = args
    lat = []

    async def http_clients():
        import aiohttp
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
            urls = [url] if isinstance(url, str) else list(url)

            async def one(u):
                while time.time() < deadline:
                    t = time.time()
                    async with s.post(u, data=body, headers=headers) as r:
                        await r.read()
                        if r.status != 200:
                            raise RuntimeError(f"HTTP {r.status}")
                    if t >= start:
                        lat.append(time.time() - t)
            await asyncio.gather(*[one(urls[(first + i) % len(urls)]) for i in range(n)])

    async def handle_clients():
        import ray
        from ray import serve
        ray.init(address="auto", namespace="serve", log_to_driver=False, configure_logging=False)
        h = serve.get_app_handle("gpuc")
        x = np.load(io.BytesIO(body))

        call = h.predict_many if x.ndim == 4 and len(x) > 1 else h

        async def one():
            while time.time() < deadline:
                t = time.time()
                await call.remote(x)
                if t >= start:
                    lat.append(time.time() - t)
        await asyncio.gather(*[one() for _ in range(n)])

    asyncio.run(handle_clients() if via == "handle" else http_clients())
    if via == "handle":
        import ray
        ray.shutdown()          # before the pool ends this process
    return lat


def load(via, url, body, headers, clients, seconds, warmup, procs, items=1):
    procs = max(1, min(procs, clients))
    start = time.time() + 3 + warmup          # the processes' start-up, then the warm-up
    deadline = start + seconds
    split = [clients // procs + (i < clients % procs) for i in range(procs)]
    with mp.get_context("spawn").Pool(procs) as pool:
        lats = pool.map(_client_proc, [(via, url, body, headers, k, sum(split[:i]), start, deadline)
                                       for i, k in enumerate(split)])
    lat = sorted(x for part in lats for x in part)
    if not lat:
        return {"clients": clients, "requests": 0}
    q = statistics.quantiles(lat, n=100) if len(lat) > 1 else [lat[0]] * 99
    return {"clients": clients, "requests": len(lat), "throughput_rps": round(len(lat) / seconds, 1),
            "items_per_s": round(len(lat) * items / seconds, 1),
            "p50_ms": round(q[49] * 1e3, 2), "p99_ms": round(q[98] * 1e3, 2)}


def _trivial_server(port):
    """A bare aiohttp server: reads the body, answers 12 bytes (the clients' own ceiling)."""
    from aiohttp import web

    async def post(request):
        await request.read()
        return web.Response(body=b"\x00" * 12, content_type="application/octet-stream")
    app = web.Application(client_max_size=1 << 30)
    app.router.add_post("/", post)
    web.run_app(app, host="127.0.0.1", port=port, print=None)


def request_body(shape, dtype, kind, items, body_dtype=None):
    """(body, headers) of one request: `items` random images (a stacked array when items > 1)."""
    item = tuple(shape)
    x = np.random.default_rng(0).uniform(-1, 1, ((items,) + item[1:]) if items > 1 else item)
    bd = np.dtype(body_dtype) if body_dtype else np.dtype(dtype)
    x = (x * 100 + 100).astype(bd) if bd.kind in "ui" else x.astype(bd)
    headers = {"X-Gpuc-Cast": "exact"} if bd != np.dtype(dtype) else {}
    if kind == "raw":
        return x.tobytes(), {"Content-Type": "application/octet-stream", "X-Gpuc-Dtype": bd.name, **headers}
    buf = io.BytesIO()
    np.save(buf, x)
    return buf.getvalue(), {"Content-Type": "application/x-npy", **headers}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--replicas", default="1,2")
    ap.add_argument("--clients", default="1,8,32,128")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--warmup", type=float, default=3)
    ap.add_argument("--max-batch", type=int, default=32)
    ap.add_argument("--batch-wait-ms", type=float, default=5)
    ap.add_argument("--via", choices=("http", "handle", "trivial"), default="http")
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--body", choices=("npy", "raw"), default="npy")
    ap.add_argument("--items", type=int, default=1)
    ap.add_argument("--body-dtype", default=None)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--inline-kb", type=int, default=None)
    ap.add_argument("--direct-ingress", action="store_true")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()

    import gpuc
    import gpuc.serve as gs
    data = gpuc.compile(a.model, max_batch=a.max_batch) if a.model.endswith(".tflite") else open(a.model, "rb").read()
    _, shape, dtype = gs.bundle_inputs(data)[0]
    body, headers = request_body(shape, dtype, a.body, a.items, a.body_dtype)
    url = f"http://127.0.0.1:{a.port}/"
    if a.via == "trivial":
        srv = mp.get_context("spawn").Process(target=_trivial_server, args=(a.port,), daemon=True)
        srv.start()
        time.sleep(2)
        for c in [int(v) for v in a.clients.split(",")]:
            row = load("http", url, body, headers, c, a.seconds, a.warmup, a.procs, a.items)
            print(f"trivial server  clients {c:>4}: {row.get('throughput_rps', 0):>9.1f} req/s  "
                  f"p50 {row.get('p50_ms', float('nan')):8.2f} ms  p99 {row.get('p99_ms', float('nan')):8.2f} ms",
                  flush=True)
        srv.terminate()
        return
    if a.inline_kb is not None:           # read by the raylet and workers a local ray.init starts
        os.environ["RAY_max_direct_call_object_size"] = str(a.inline_kb * 1024)
    if a.direct_ingress:                  # each replica serves HTTP itself (no proxy); read where Ray starts
        os.environ["RAY_SERVE_ENABLE_DIRECT_INGRESS"] = "1"
    import ray
    from ray import serve
    ray.init(configure_logging=False, log_to_driver=False)
    serve.start(http_options={"host": "127.0.0.1", "port": a.port})
    print(f"model {a.model}: input {list(shape)} {dtype}, max batch {gs.bundle_max_batch(data)}; "
          f"Ray sees {ray.cluster_resources().get('GPU', 0):g} GPU(s); clients via {a.via}, {a.procs} process(es); "
          f"{a.body} body of {a.items} item(s), {len(body)} bytes{', dry run' if a.dry_run else ''}"
          + (f"; inline objects up to {a.inline_kb} KB" if a.inline_kb is not None else ""))
    rows = []
    for r in [int(v) for v in a.replicas.split(",")]:
        h = serve.run(gs.application(data, replicas=r, max_batch=a.max_batch, batch_wait_ms=a.batch_wait_ms,
                                     dry_run=a.dry_run),
                      name="gpuc", route_prefix="/")

        async def infos():
            return await asyncio.gather(*[h.info.remote() for _ in range(16 * r)])
        seen = {i["pid"]: i for i in asyncio.run(infos())}
        for i in seen.values():
            print(f"  replica pid {i['pid']}: {i['device']} uuid {i['uuid']} pci {i['pci_bus_id']} "
                  f"CUDA_VISIBLE_DEVICES={i['CUDA_VISIBLE_DEVICES']}")
        uuids = [i["uuid"] for i in seen.values()]
        urls = gs.ingress_urls("gpuc", "127.0.0.1") if a.direct_ingress else url
        if a.direct_ingress:
            print(f"  direct ingress: clients spread over {urls}")
            if len(urls) != r:
                raise SystemExit(f"direct ingress: {len(urls)} replica address(es) for {r} replica(s)")
        for c in [int(v) for v in a.clients.split(",")]:
            row = {"replicas": r, **load(a.via, urls, body, headers, c, a.seconds, a.warmup, a.procs, a.items),
                   "replica_uuids": uuids, "body": a.body, "items_per_request": a.items}
            rows.append(row)
            print(f"replicas {r}  clients {c:>4}: {row.get('throughput_rps', 0):>9.1f} req/s "
                  f"{row.get('items_per_s', 0):>9.1f} items/s  "
                  f"p50 {row.get('p50_ms', float('nan')):8.2f} ms  p99 {row.get('p99_ms', float('nan')):8.2f} ms",
                  flush=True)
        serve.delete("gpuc")
    by = {(x["replicas"], x["clients"]): x.get("throughput_rps", 0) for x in rows}
    for c in [int(v) for v in a.clients.split(",")]:
        if by.get((1, c)) and (2, c) in by:
            print(f"clients {c:>4}: 2 replicas / 1 = {by[(2, c)] / by[(1, c)]:.2f}x")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    serve.shutdown()
    ray.shutdown()


if __name__ == "__main__":
    main()
