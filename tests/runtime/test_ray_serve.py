"""gpuc with Ray (gpuc/serve.py) on a local Ray cluster and the one CPU device (lavapipe): Serve with
2 replicas batches concurrent requests (@serve.batch) into runs of a --max-batch bundle, and every
answer -- from the Python handle and over HTTP (.npy, raw, k-image and JSON bodies) -- equals a direct
run() of that item; Ray Data over a few hundred images equals direct runs.  Skipped without ray[serve,data]."""
import asyncio
import json
import socket
import urllib.error
import urllib.request
import io

import numpy as np
import pytest

pytest.importorskip("vulkan")
ray = pytest.importorskip("ray")
serve = pytest.importorskip("ray.serve")
pytest.importorskip("ray.data")

import gpuc  # noqa: E402
import gpuc.serve as gs  # noqa: E402
from helpers.models import block_model  # noqa: E402

MAX_BATCH = 8


@pytest.fixture(scope="module")
def bundle():
    return gpuc.compile(block_model(), max_batch=MAX_BATCH)


@pytest.fixture(scope="module")
def direct(bundle):
    m = gpuc.load(bundle)
    yield lambda x: m.run(x[None] if x.ndim == 3 else x)[0]
    m.close()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": {"RAY_SERVE_LOG_TO_STDERR": "0"}})
    port = _free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    yield port
    serve.shutdown()
    ray.shutdown()


def images(n, seed):
    return np.random.default_rng(seed).uniform(-1, 1, (n, 6, 6, 4)).astype(np.float32)


def _post(port, body, ctype):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/", data=body, headers={"Content-Type": ctype})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.headers.get("Content-Type"), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read()


def test_serve_two_replicas_batch_concurrent_requests(cluster, bundle, direct):
    app = gs.application(bundle, replicas=2, batch_wait_ms=50)
    handle = serve.run(app, name="gpuc", route_prefix="/")
    xs = images(48, 1)

    async def burst():
        return await asyncio.gather(*[handle.remote(x) for x in xs])
    outs = asyncio.run(burst())
    for i, (x, o) in enumerate(zip(xs, outs)):
        assert list(o) == ["y"] and o["y"].shape == (1, 3)
        np.testing.assert_array_equal(o["y"], direct(x), err_msg=f"request {i}")

    async def burst_of_infos():          # concurrent, so that the router spreads them over both replicas
        return await asyncio.gather(*[handle.info.remote() for _ in range(32)])
    infos = asyncio.run(burst_of_infos())
    for _ in range(8):                   # (a quiet router may send a whole burst to one replica: ask again)
        if len({i["pid"] for i in infos}) == 2:
            break
        infos += asyncio.run(burst_of_infos())
    assert {i["device"] for i in infos} == {gpuc.open_device().describe()["name"]}
    sizes = [b for i in infos for b in i["batch_sizes"]]
    assert max(sizes) > 1 and max(sizes) <= MAX_BATCH, sizes      # requests were batched, within the bundle's max
    assert len({i["pid"] for i in infos}) == 2                      # two replicas answered
    assert all(i["uuid"].startswith("GPU-") for i in infos)

    # HTTP: a .npy body -> a .npy answer; JSON (the leading 1 optional, values cast) -> JSON
    port = cluster
    buf = io.BytesIO()
    np.save(buf, xs[0])
    st, ct, body = _post(port, buf.getvalue(), "application/x-npy")
    assert st == 200 and ct == "application/x-npy"
    np.testing.assert_array_equal(np.load(io.BytesIO(body)), direct(xs[0]))
    st, ct, body = _post(port, json.dumps({"inputs": {"x": xs[1].tolist()}}).encode(), "application/json")
    assert st == 200, body
    np.testing.assert_array_equal(np.asarray(json.loads(body)["outputs"]["y"], np.float32), direct(xs[1]))
    # bad bodies: one clear 400 each, and the replica goes on serving
    for bad, ctype in ((json.dumps({"inputs": [[1.0, 2.0]]}).encode(), "application/json"),
                       (b"not json", "application/json"),
                       (json.dumps({"inputs": {"z": 1}}).encode(), "application/json")):
        st, ct, body = _post(port, bad, ctype)
        assert st == 400 and "error" in json.loads(body), (st, body)
    np.testing.assert_array_equal(handle.predict.remote(xs[2]).result()["y"], direct(xs[2]))
    serve.delete("gpuc")


def test_http_raw_batched_and_cast_bodies(cluster, bundle, direct):
    """Raw (application/octet-stream) bodies read in place, k images per request (.npy stack or raw),
    an explicit exact cast (X-Gpuc-Cast: exact) of uint8 bodies, the old .npy under octet-stream: each
    answer equals a direct run() of its items; bad ones are one clear 400."""
    handle = serve.run(gs.application(bundle, replicas=1, batch_wait_ms=20), name="gpuc", route_prefix="/")
    port = cluster
    xs = images(6, 3)
    raw = "application/octet-stream"

    def npy(a):
        buf = io.BytesIO()
        np.save(buf, a)
        return buf.getvalue()

    def post(body, ctype, **headers):
        req = urllib.request.Request(f"http://127.0.0.1:{port}/", data=body,
                                     headers={"Content-Type": ctype, **{k.replace("_", "-"): v for k, v in headers.items()}})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, np.load(io.BytesIO(r.read()))
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())["error"]

    ref = direct(xs)                                                     # (6, 3): one run of the 6 items
    for body, ctype, hdr, want in (
            (xs[0].tobytes(), raw, {}, ref[:1]),                          # raw, one item
            (xs[1:6].tobytes(), raw, {"X_Gpuc_Shape": "5,6,6,4"}, ref[1:6]),   # raw, 5 items
            (npy(xs[:3]), "application/x-npy", {}, ref[:3]),               # a .npy stack of 3
            (npy(xs[2]), raw, {}, ref[2:3])):                              # .npy under octet-stream, as before
        st, got = post(body, ctype, **hdr)
        assert st == 200, got
        np.testing.assert_array_equal(got, want)
    u8 = np.random.default_rng(4).integers(0, 256, (4, 6, 6, 4), dtype=np.uint8)
    want = direct(u8.astype(np.float32))
    st, got = post(u8.tobytes(), raw, X_Gpuc_Dtype="uint8", X_Gpuc_Cast="exact")
    assert st == 200, got
    np.testing.assert_array_equal(got, want)
    st, got = post(npy(u8), "application/x-npy", X_Gpuc_Cast="exact")
    assert st == 200, got
    np.testing.assert_array_equal(got, want)
    for body, ctype, hdr, msg in (
            (u8.tobytes(), raw, {"X_Gpuc_Dtype": "uint8"}, "X-Gpuc-Cast"),      # no cast asked for
            (npy(xs[:2].astype(np.float64)), "application/x-npy", {"X_Gpuc_Cast": "exact"}, "exactly"),
            (xs[0].tobytes()[:-4], raw, {}, "bytes each"),                      # not a whole item
            (xs[:2].tobytes(), raw, {"X_Gpuc_Shape": "3,6,6,4"}, "X-Gpuc-Shape"),
            (xs[0].tobytes(), raw, {"X_Gpuc_Dtype": "float99"}, "not a dtype"),
            (npy(xs[:2]), "application/x-npy", {"X_Gpuc_Cast": "unsafe"}, "exact"),
            (npy(np.zeros((2, 6, 6), np.float32)), "application/x-npy", {}, "'x'")):
        st, err = post(body, ctype, **hdr)
        assert st == 400 and msg in err, (st, err)
    np.testing.assert_array_equal(handle.predict_many.remote(xs[:4]).result()["y"], ref[:4])
    serve.delete("gpuc")


def test_ray_data_map_batches_equals_direct_runs(cluster, bundle, direct):
    xs = images(300, 2)
    ds = ray.data.from_items([{"image": x, "i": i} for i, x in enumerate(xs)])
    out = gs.map_batches(ds, bundle, concurrency=2, column="image", keep_columns=("i",)).take_all()
    assert len(out) == len(xs)
    got = {int(r["i"]): r["y"] for r in out}
    ref = np.concatenate([direct(xs[lo:lo + MAX_BATCH]) for lo in range(0, len(xs), MAX_BATCH)])
    np.testing.assert_array_equal(np.stack([got[i] for i in range(len(xs))]), ref)


def test_bad_arguments_are_one_clear_error(cluster, bundle):
    with pytest.raises(gpuc.errors.GpucError, match="at most 8"):
        gs.application(bundle, replicas=1, max_batch=32)
    with pytest.raises(gpuc.errors.GpucError, match="replicas"):
        gs.application(bundle, replicas=0)
