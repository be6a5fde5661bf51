"""Fuzz the compiler with mutated models, the bundle reader with bit flips, bundles with one semantic field
changed and resealed (scripts/fuzz_fields.py), and the lifecycle from several threads (scripts/fuzz_lifecycle.py).

    python scripts/fuzz.py --cases 10000 [--seed 0] [--timeout 20] [--mode models,flips,fields,lifecycle]
        [--field-cases 1000] [--lifecycle-cases 200]

Every model case must end in success or a one-line GpucError (exit 2 in the CLI): an uncaught
exception, a crash of the worker process, or a hang past --timeout counts as a failure.  Every
bundle bit flip must be refused by read_bundle (before any Vulkan call).  Cases run in worker
processes (a crash kills only its worker; the next worker resumes after the crashing case).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
INTERESTING = [0, 1, 0xFF, 0x7F, 0x80, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFF, 4, 8, 16, 127]


def seeds() -> list[bytes]:
    sys.path.insert(0, str(ROOT / "tests"))
    from helpers.models import conv_mean_softmax
    out = [conv_mean_softmax(ramp=False)]
    shared = Path(os.environ.get("GPUC_SHARED_MODELS", ROOT.parent / "shared" / "models"))
    for name in ("mlp_small_f32", "microwakeword_okay_nabu", "text_conv1d_lstm_tfkeras_f32", "unet_small_128_f32"):
        p = shared / f"{name}.tflite"
        if p.exists():
            out.append(p.read_bytes())
    return out


def mutate(data: bytes, rng) -> bytes:
    kind = int(rng.integers(0, 4))
    b = bytearray(data)
    if kind == 0:
        return bytes(b[: int(rng.integers(0, len(b)))])
    if kind == 1:
        for _ in range(int(rng.integers(1, 4))):
            pos = int(rng.integers(0, len(b)))
            b[pos] ^= 1 << int(rng.integers(0, 8))
    elif kind == 2:
        for _ in range(int(rng.integers(1, 16))):
            b[int(rng.integers(0, len(b)))] = int(rng.integers(0, 256))
    else:                                     # overwrite an aligned 32-bit field with an interesting value
        for _ in range(int(rng.integers(1, 4))):
            pos = int(rng.integers(0, max(1, len(b) // 4))) * 4
            v = INTERESTING[int(rng.integers(0, len(INTERESTING)))]
            b[pos:pos + 4] = int(v & 0xFFFFFFFF).to_bytes(4, "little")[: len(b) - pos]
    return bytes(b)


def worker(seed: int, start: int, count: int, timeout: int) -> None:
    from gpuc.compiler import compile_model
    from gpuc.errors import GpucError
    resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))
    base = seeds()

    def on_alarm(*_):
        raise TimeoutError

    signal.signal(signal.SIGALRM, on_alarm)
    for i in range(start, start + count):
        rng = np.random.default_rng([seed, i])
        case = mutate(base[i % len(base)], rng)
        print(f"START {i}", flush=True)
        signal.alarm(timeout)
        try:
            compile_model(case, cache=False)
            res = "ok"
        except GpucError as e:
            res = "reject" if "\n" not in str(e) and str(e) else f"FAIL multi-line message: {str(e)[:200]!r}"
        except TimeoutError:
            res = "FAIL hang"
        except Exception as e:  # noqa: BLE001
            res = f"FAIL {type(e).__name__}: {str(e)[:200]}"
        finally:
            signal.alarm(0)
        print(f"END {i} {res}", flush=True)


def fuzz_models(cases: int, seed: int, timeout: int, chunk: int = 500) -> dict:
    from fuzz_workers import run_chunked
    counts = {"ok": 0, "reject": 0}
    results, failures = run_chunked(__file__, [seed, timeout], cases, chunk)
    for idx, res in results:
        if res.startswith("FAIL"):
            failures.append((idx, res))
        else:
            counts[res] += 1
    return {"cases": cases, **counts, "failures": sorted(failures)}


def fuzz_bundle(flips: int, seed: int) -> dict:
    from gpuc.compiler import compile_model
    from gpuc.errors import BundleError
    from gpuc.runtime.bundle import read_bundle
    data = compile_model(seeds()[0], cache=False)
    rng = np.random.default_rng(seed)
    accepted = 0
    for _ in range(flips):
        b = bytearray(data)
        b[int(rng.integers(0, len(b)))] ^= 1 << int(rng.integers(0, 8))
        try:
            read_bundle(bytes(b))
            accepted += 1
        except BundleError:
            pass
    return {"flips": flips, "accepted": accepted}


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        seed, start, count, timeout = map(int, sys.argv[2:6])
        worker(seed, start, count, timeout)
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=10000)
    ap.add_argument("--flips", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=int, default=20)
    ap.add_argument("--mode", default="models,flips,fields,lifecycle", help="comma-separated subset")
    ap.add_argument("--field-cases", type=int, default=1000, help="resealed one-field bundle cases (fields)")
    ap.add_argument("--lifecycle-cases", type=int, default=200,
                    help="cases of threads running while another closes the model, and as many closing the device")
    a = ap.parse_args()
    modes = set(a.mode.split(","))
    t0 = time.time()
    report, failed = {}, False
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    if "models" in modes:
        models = fuzz_models(a.cases, a.seed, a.timeout)
        report["models"] = {k: v for k, v in models.items() if k != "failures"}
        report["failures"] = models["failures"][:20]
        failed |= bool(models["failures"])
    if "flips" in modes:
        report["bundle_flips"] = fuzz_bundle(a.flips, a.seed)
        failed |= bool(report["bundle_flips"]["accepted"])
    sys.path.insert(0, str(ROOT / "scripts"))
    if "fields" in modes:
        import fuzz_fields
        r = fuzz_fields.fuzz(a.field_cases, a.seed, max(a.timeout, 60), log=log)
        r["failures"] = r["failures"][:20]
        report["fields"] = r
        failed |= bool(r["failures"])
    if "lifecycle" in modes:
        import fuzz_lifecycle
        for target in ("model", "device"):
            r = fuzz_lifecycle.run(a.lifecycle_cases, a.seed, log=log, threads=8, target=target)
            report[f"lifecycle_{target}"] = r
            failed |= bool(r.get("failures"))
    report["seconds"] = round(time.time() - t0, 1)
    print(json.dumps(report, indent=1, default=str))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
