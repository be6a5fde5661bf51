"""Ray Data batch inference with gpuc (gpuc/serve.py GpucPredictor): images/s with 1 GPU and with 2
(one actor per GPU, each on the Vulkan device whose UUID is its CUDA_VISIBLE_DEVICES GPU), over N
images, batches of the bundle's --max-batch.

    python -m benchmarks.ray_data_bench MODEL.tflite|BUNDLE [--gpus 1,2] [--images 20000]
        [--max-batch 32] [--json FILE]

The images are made by a first map_batches stage (copies of 64 random images: a stand-in for
decoding), then GpucPredictor runs them.  Reported: wall images/s (the whole pipeline, actor start-up
included) and steady images/s (from the first batch's end to the last's, as stamped by the actors).
Without GPUs in Ray (lavapipe), --gpus counts actors that share the CPU device.
"""
import argparse
import json
import time

import numpy as np


from gpuc.serve import GpucPredictor


def images(batch, shape, dtype):
    """ids -> images of the model's input row shape (copies of 64 seeded random images; a task, so
    that it holds no CPU of the cluster once done)."""
    base = np.random.default_rng(0).uniform(0, 1, (64,) + tuple(shape)).astype(dtype)
    return {"image": base[batch["id"] % 64], "id": batch["id"]}


class TimedPredictor(GpucPredictor):
    """GpucPredictor whose rows also carry the time their batch ended and the actor's device UUID."""

    def __call__(self, batch):
        out = super().__call__(batch)
        n = len(batch["id"])
        out["t_end"] = np.full(n, time.time())
        out["uuid"] = np.array([self.runner.info()["uuid"]] * n)
        return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--gpus", default="1,2")
    ap.add_argument("--images", type=int, default=20000)
    ap.add_argument("--max-batch", type=int, default=32)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()

    import ray
    import gpuc
    import gpuc.serve as gs
    data = gpuc.compile(a.model, max_batch=a.max_batch) if a.model.endswith(".tflite") else open(a.model, "rb").read()
    mb = gs.bundle_max_batch(data)
    _, shape, dtype = gs.bundle_inputs(data)[0]
    ray.init(configure_logging=False, log_to_driver=False)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    have = ray.cluster_resources().get("GPU", 0)
    print(f"model {a.model}: input {list(shape)} {dtype}, max batch {mb}, {a.images} images; Ray sees {have:g} GPU(s)")
    rows = []
    for g in [int(v) for v in a.gpus.split(",")]:
        ds = ray.data.range(a.images, override_num_blocks=max(8, a.images // (mb * 16)))
        ds = ds.map_batches(images, fn_kwargs={"shape": shape[1:], "dtype": dtype}, batch_size=mb * 16)
        ds = ds.map_batches(TimedPredictor, fn_constructor_kwargs={"bundle": data, "column": "image",
                                                                   "keep_columns": ("id",)},
                            batch_size=mb, batch_format="numpy", concurrency=g,
                            num_gpus=1 if have >= 1 else 0, num_cpus=0 if have >= 1 else 0.5)
        t0 = time.time()
        res = ds.select_columns(["id", "t_end", "uuid"]).to_pandas()
        wall = time.time() - t0
        assert len(res) == a.images and res["id"].nunique() == a.images, "every image once"
        t = np.sort(res["t_end"].to_numpy())
        first = t[0]
        steady_n = int((res["t_end"] > first).sum())
        steady = steady_n / (t[-1] - first) if t[-1] > first else float("nan")
        row = {"gpus": g, "images": a.images, "max_batch": mb, "wall_s": round(wall, 2),
               "wall_images_per_s": round(a.images / wall, 1), "steady_images_per_s": round(steady, 1),
               "actor_uuids": sorted(res["uuid"].unique().tolist())}
        rows.append(row)
        print(f"gpus {g}: {row['wall_images_per_s']:.1f} images/s wall ({wall:.1f} s), "
              f"{row['steady_images_per_s']:.1f} steady; devices {row['actor_uuids']}", flush=True)
    if len(rows) > 1 and rows[0]["gpus"] == 1:
        for r in rows[1:]:
            print(f"{r['gpus']} GPUs / 1: wall {r['wall_images_per_s'] / rows[0]['wall_images_per_s']:.2f}x, "
                  f"steady {r['steady_images_per_s'] / rows[0]['steady_images_per_s']:.2f}x")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    ray.shutdown()


if __name__ == "__main__":
    main()
