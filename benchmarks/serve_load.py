"""Closed-loop load on `gpuc serve` (gpuc/serve.py): N concurrent clients, each sending one request
(one image, .npy body) and waiting for its answer before the next; throughput and p50/p99 latency
for each client count, with 1 replica and with 2 (one per GPU where Ray sees GPUs).

    python -m benchmarks.serve_load MODEL.tflite|BUNDLE [--replicas 1,2] [--clients 1,8,32,128]
        [--seconds 20] [--max-batch 32] [--batch-wait-ms 5] [--via http|handle] [--procs 4] [--json FILE]

A .tflite is compiled with --max-batch.  --via http: POSTs to the Serve proxy (aiohttp clients);
handle: the Python DeploymentHandle.  --procs spreads the clients over that many client processes, so
that the load generator is not the bottleneck.  Each replica's /info (device, UUID,
CUDA_VISIBLE_DEVICES) is printed: on a multi-GPU host each replica should name a different UUID.
"""
import argparse
import asyncio
import io
import json
import multiprocessing as mp
import statistics
import time

import numpy as np



def _client_proc(args):
    """One client process: `n` closed-loop clients until `deadline`; returns latencies (s) of the
    requests that ended after `start`."""
    via, url, body, n, start, deadline = args
    lat = []

    async def http_clients():
        import aiohttp
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
            async def one():
                while time.time() < deadline:
                    t = time.time()
                    async with s.post(url, data=body, headers={"Content-Type": "application/x-npy"}) as r:
                        await r.read()
                        if r.status != 200:
                            raise RuntimeError(f"HTTP {r.status}")
                    if t >= start:
                        lat.append(time.time() - t)
            await asyncio.gather(*[one() for _ in range(n)])

    async def handle_clients():
        import ray
        from ray import serve
        ray.init(address="auto", namespace="serve", log_to_driver=False, configure_logging=False)
        h = serve.get_app_handle("gpuc")
        x = np.load(io.BytesIO(body))

        async def one():
            while time.time() < deadline:
                t = time.time()
                await h.remote(x)
                if t >= start:
                    lat.append(time.time() - t)
        await asyncio.gather(*[one() for _ in range(n)])

    asyncio.run(http_clients() if via == "http" else handle_clients())
    if via != "http":
        import ray
        ray.shutdown()          # before the pool ends this process
    return lat


def load(via, url, body, clients, seconds, warmup, procs):
    procs = max(1, min(procs, clients))
    start = time.time() + 3 + warmup          # the processes' start-up, then the warm-up
    deadline = start + seconds
    split = [clients // procs + (i < clients % procs) for i in range(procs)]
    with mp.get_context("spawn").Pool(procs) as pool:
        lats = pool.map(_client_proc, [(via, url, body, k, start, deadline) for k in split])
    lat = sorted(x for part in lats for x in part)
    if not lat:
        return {"clients": clients, "requests": 0}
    q = statistics.quantiles(lat, n=100) if len(lat) > 1 else [lat[0]] * 99
    return {"clients": clients, "requests": len(lat), "throughput_rps": round(len(lat) / seconds, 1),
            "p50_ms": round(q[49] * 1e3, 2), "p99_ms": round(q[98] * 1e3, 2)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--replicas", default="1,2")
    ap.add_argument("--clients", default="1,8,32,128")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--warmup", type=float, default=3)
    ap.add_argument("--max-batch", type=int, default=32)
    ap.add_argument("--batch-wait-ms", type=float, default=5)
    ap.add_argument("--via", choices=("http", "handle"), default="http")
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()

    import ray
    from ray import serve
    import gpuc
    import gpuc.serve as gs
    data = gpuc.compile(a.model, max_batch=a.max_batch) if a.model.endswith(".tflite") else open(a.model, "rb").read()
    ray.init(configure_logging=False, log_to_driver=False)
    serve.start(http_options={"host": "127.0.0.1", "port": a.port})
    _, shape, dtype = gs.bundle_inputs(data)[0]
    x = np.random.default_rng(0).uniform(-1, 1, shape).astype(dtype)
    buf = io.BytesIO()
    np.save(buf, x)
    body, url = buf.getvalue(), f"http://127.0.0.1:{a.port}/"
    print(f"model {a.model}: input {list(shape)} {dtype}, max batch {gs.bundle_max_batch(data)}; "
          f"Ray sees {ray.cluster_resources().get('GPU', 0):g} GPU(s); clients via {a.via}, {a.procs} process(es)")
    rows = []
    for r in [int(v) for v in a.replicas.split(",")]:
        h = serve.run(gs.application(data, replicas=r, max_batch=a.max_batch, batch_wait_ms=a.batch_wait_ms),
                      name="gpuc", route_prefix="/")

        async def infos():
            return await asyncio.gather(*[h.info.remote() for _ in range(16 * r)])
        seen = {i["pid"]: i for i in asyncio.run(infos())}
        for i in seen.values():
            print(f"  replica pid {i['pid']}: {i['device']} uuid {i['uuid']} pci {i['pci_bus_id']} "
                  f"CUDA_VISIBLE_DEVICES={i['CUDA_VISIBLE_DEVICES']}")
        uuids = [i["uuid"] for i in seen.values()]
        for c in [int(v) for v in a.clients.split(",")]:
            row = {"replicas": r, **load(a.via, url, body, c, a.seconds, a.warmup, a.procs),
                   "replica_uuids": uuids}
            rows.append(row)
            print(f"replicas {r}  clients {c:>4}: {row.get('throughput_rps', 0):>9.1f} req/s  "
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
