"""Before/after of issue 15's work in one process: `before` compiles without fuse_layer_norm and
schedule_dispatches and loads with a barrier between every two dispatches (GPUC_ALL_BARRIERS=1), as
gpuc did; `after` is the default.  Median run() time over interleaved rounds, dispatches, barriers,
and the largest relative difference between the two outputs (barriers_ab.compare_loads).

    python -m benchmarks.archive.issue15_ab MODEL.tflite ... [--runs 200] [--rounds 3] [--json OUT]
"""
from __future__ import annotations

import os

import gpuc
from barriers_ab import args, compare_loads

BEFORE = dict(disable_passes=["fuse_layer_norm", "schedule_dispatches"])


def load(path, before: bool):
    bundle = gpuc.compile(path, **(BEFORE if before else {}))
    os.environ["GPUC_ALL_BARRIERS"] = "1" if before else "0"
    try:
        return gpuc.load(bundle)
    finally:
        os.environ.pop("GPUC_ALL_BARRIERS")


def main():
    compare_loads(args(__doc__), lambda path: {"before": load(path, True), "after": load(path, False)}, "before")


if __name__ == "__main__":
    main()
