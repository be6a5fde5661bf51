"""Field-level bundle fuzzing ("deep reseal"): one semantic field of a valid bundle changed, every digest
recomputed (runtime.bundle.write_bundle), then read, loaded and run on the seed's inputs.

    python scripts/fuzz_fields.py --cases 1000 [--seed 0] [--timeout 60]

Each case must end in one of:
  same      it ran to the seed bundle's outputs, bit for bit (the field did not matter, e.g. a label)
  refused   a one-line GpucError before or during the run (counted by the check that refused it)
Anything else is a failure: other outputs ("wrong"), a traceback, a worker crash, or a hang past
--timeout.  Cases run in worker processes; a crash or hang kills only the worker, and the next one
resumes after that case.
"""
from __future__ import annotations

import argparse
import copy
import json
import re
import signal
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
INTERESTING = [0, 1, 2, 3, 4, 255, 256, 4096, 65535, 65536, 2**31 - 1, 2**31, 2**32 - 1]


def seed_models() -> list:
    """(name, .tflite bytes, compile options): a convolution network, the same in fp16 (with its fp32
    fallback section), a dynamic-dims model, a batch-native model, and an index op with run-time checks."""
    sys.path.insert(0, str(ROOT / "tests"))
    from helpers.builder import ModelBuilder
    from helpers.models import conv_mean_softmax
    out = []
    conv = conv_mean_softmax(conv_output=True)
    out.append(("conv", conv, {}))
    out.append(("conv_b4", conv, {"max_batch": 4}))
    out.append(("conv_fp16", conv, {"precision": "fp16"}))
    mb = ModelBuilder()
    x = mb.input("x", [1, 6, 4])
    t = mb.tensor("t", [1, 6, 4])
    mb.op("TANH", [x], [t])
    s = mb.tensor("s", [1, 6, 4])
    mb.op("ADD", [t, mb.const("k", np.linspace(0, 1, 4, dtype=np.float32))], [s])
    mb.output(s)
    out.append(("dynamic", mb.finish(), {"dynamic": ["x:1<=6"]}))
    mb = ModelBuilder()
    x = mb.input("x", [4, 3])
    i = mb.input("i", [2], "int32")
    g = mb.tensor("g", [2, 3])
    mb.op("GATHER", [x, i], [g], axis=0)
    r = mb.tensor("r", [2, 3])
    mb.op("RELU", [g], [r])
    mb.output(r)
    out.append(("gather", mb.finish(), {}))
    return out


def inputs_for(model) -> list:
    rng = np.random.default_rng(1)
    xs = []
    for s in model.inputs:
        if s.dtype.kind in "iu":
            xs.append(rng.integers(0, 2, s.shape).astype(s.dtype))
        else:
            xs.append(rng.uniform(-1, 1, s.shape).astype(s.dtype))
    return xs


# -- mutators: each changes one field of a read Bundle in place (rng: numpy Generator) ----------------
def _pick(rng, seq):
    return seq[int(rng.integers(0, len(seq)))]


def _int(rng, old: int) -> int:
    choices = [v for v in INTERESTING + [old + 1, old - 1, old * 2, old // 2, old + 256, old - 256] if v != old and v >= 0]
    return _pick(rng, choices)


def m_tensor_shape(b, rng):
    t = _pick(rng, b.tensors)
    if not t.shape:
        return False
    k = int(rng.integers(0, len(t.shape)))
    shape = list(t.shape)
    shape[k] = max(0, _pick(rng, [shape[k] - 1, shape[k] + 1, 1, shape[k] * 2, 0]))
    t.shape = tuple(shape)
    if rng.random() < 0.7:             # keep nbytes consistent (else the size check refuses it)
        t.nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(t.dtype).itemsize
    return True


def m_tensor_dtype(b, rng):
    t = _pick(rng, b.tensors)
    t.dtype = _pick(rng, [d for d in ("float32", "float16", "int32", "uint8", "int8", "uint32", "bool", "int64")
                          if d != t.dtype])
    if rng.random() < 0.7:
        t.nbytes = int(np.prod(t.shape, dtype=np.int64)) * np.dtype(t.dtype).itemsize
    return True


def m_tensor_offset(b, rng):
    t = _pick(rng, b.tensors)
    t.offset = _pick(rng, [max(0, t.offset - 256), t.offset + 256, 0, _pick(rng, b.tensors).offset])
    return True


def m_tensor_memory(b, rng):
    t = _pick(rng, b.tensors)
    t.memory = 1 - t.memory if rng.random() < 0.9 else 7
    return True


def m_tensor_nbytes(b, rng):
    t = _pick(rng, b.tensors)
    t.nbytes = _int(rng, t.nbytes)
    return True


def m_tensor_quant(b, rng):
    t = _pick(rng, b.tensors)
    t.quant = {"scale": [float(rng.uniform(0.01, 2))], "zero_point": [int(rng.integers(-5, 5))], "axis": 0} \
        if t.quant is None or rng.random() < 0.5 else None
    return True


def m_io(b, rng):
    lst = b.inputs if rng.random() < 0.5 else b.outputs
    if not lst:
        return False
    k = int(rng.integers(0, len(lst)))
    how = int(rng.integers(0, 3))
    if how == 0:
        lst[k] = int(rng.integers(0, len(b.tensors)))
    elif how == 1 and len(lst) > 1:
        lst[0], lst[-1] = lst[-1], lst[0]
    else:
        del lst[k]
    return True


def m_spirv_word(b, rng):
    s = _pick(rng, b.shaders)
    w = np.frombuffer(s.spirv, np.uint32).copy()
    where = int(rng.integers(0, 6))
    if where == 0:
        w[3] = _pick(rng, [0, 0xFFFFFFFF, int(w[3]) * 16, int(w[3]) + 1])       # id bound
    elif where == 1:
        w[int(rng.integers(0, 5))] ^= np.uint32(1 << int(rng.integers(0, 32)))   # header
    else:
        k = int(rng.integers(5, len(w)))
        w[k] = np.uint32(_pick(rng, INTERESTING) & 0xFFFFFFFF) if rng.random() < 0.5 else \
            w[k] ^ np.uint32(1 << int(rng.integers(0, 32)))
    s.spirv = w.tobytes()
    return True


def m_spirv_cut(b, rng):
    s = _pick(rng, b.shaders)
    n = len(s.spirv) // 4
    k = int(rng.integers(1, n))
    s.spirv = s.spirv[:4 * k] if rng.random() < 0.5 else s.spirv[:4 * k] + s.spirv[4 * k + 4:]
    return True


def m_spirv_swap(b, rng):
    if len(b.shaders) < 2:
        return False
    i, j = rng.choice(len(b.shaders), 2, replace=False)
    b.shaders[i].spirv, b.shaders[j].spirv = b.shaders[j].spirv, b.shaders[i].spirv
    return True


def m_shader_fields(b, rng):
    s = _pick(rng, b.shaders)
    f = _pick(rng, ["bindings", "push_bytes", "entry", "name"])
    if f == "entry":
        s.entry = _pick(rng, ["", "mian", "main\x00x"])
    elif f == "name":
        s.name = "renamed"
    else:
        setattr(s, f, max(0, getattr(s, f) + _pick(rng, [-4, -1, 1, 4])))
    return True


def m_dispatch(b, rng):
    if not b.dispatches:
        return False
    d = _pick(rng, b.dispatches)
    f = _pick(rng, ["shader", "binding", "push", "groups", "item_inner", "label", "flops", "drop"])
    if f == "shader":
        d.shader = int(rng.integers(0, len(b.shaders) + 1))
    elif f == "binding" and d.bindings:
        d.bindings[int(rng.integers(0, len(d.bindings)))] = int(rng.integers(0, len(b.tensors)))
    elif f == "push":
        d.push_constants = bytes(rng.integers(0, 256, len(d.push_constants) or 4).astype(np.uint8))
    elif f == "groups":
        g = list(d.groups)
        k = int(rng.integers(0, 3))
        g[k] = max(1, min(65535, _int(rng, g[k])))
        d.groups = tuple(g)
    elif f == "item_inner":
        d.item_inner = _pick(rng, [0, 1, 2, 64, d.item_inner + 1])
    elif f == "label":
        d.label = "relabelled"
    elif f == "flops":
        d.flops = _int(rng, d.flops)
    elif f == "drop":
        del b.dispatches[int(rng.integers(0, len(b.dispatches)))]
    return True


def m_arena_weights(b, rng):
    if rng.random() < 0.5:
        b.arena_bytes = _int(rng, b.arena_bytes)
    else:
        n = len(b.weights)
        b.weights = np.resize(b.weights, max(0, _pick(rng, [n - 256, n + 256, 0, n // 2]))).astype(np.uint8)
    return True


def m_steps(b, rng):
    if not b.steps:
        return False
    s = _pick(rng, b.steps)
    f = _pick(rng, ["kind", "first", "count", "target", "inputs", "outputs", "op"])
    if f in ("inputs", "outputs"):
        lst = getattr(s, f)
        if lst:
            lst[int(rng.integers(0, len(lst)))] = int(rng.integers(-1, len(b.tensors)))
    elif f == "op":
        s.op = "TANH" if s.op != "TANH" else "RELU"
    else:
        setattr(s, f, max(0, getattr(s, f) + _pick(rng, [-1, 1, 2])))
    return True


def m_variants(b, rng):
    if not b.variants:
        return False
    v = _pick(rng, b.variants)
    f = _pick(rng, ["dispatch", "shader", "groups", "requires"])
    if f == "requires":
        v.requires = {}
    elif f == "groups":
        v.groups = (v.groups[0] + 1, v.groups[1], v.groups[2])
    else:
        setattr(v, f, getattr(v, f) + 1)
    return True


def _tree_lie(tree, rng):
    if isinstance(tree, int):
        return _pick(rng, [tree + 1, tree * 2, 0, 65536])
    return ["*", tree, _pick(rng, [2, 65536])]


def m_options(b, rng):
    o = b.options
    if "dynamic_dims" in o and rng.random() < 0.8:
        dd = o["dynamic_dims"]
        f = _pick(rng, ["dims", "grids", "shapes"])
        if f == "dims":
            d = _pick(rng, dd["dims"])
            k = int(rng.integers(0, 3))
            d[k] = _int(rng, d[k])
        elif f == "grids":
            k = int(rng.integers(0, len(dd["grids"])))
            dd["grids"][k] = _tree_lie(dd["grids"][k], rng)
        else:
            key = _pick(rng, sorted(dd["shapes"]))
            k = int(rng.integers(0, len(dd["shapes"][key])))
            dd["shapes"][key][k] = _tree_lie(dd["shapes"][key][k], rng)
    elif o.get("batch_native") and rng.random() < 0.7:
        o["max_batch"] = _pick(rng, [1, 2, 3, 8, 64, 65536])
    else:
        k = _pick(rng, ["batch_native", "max_batch", "precision"])
        o[k] = _pick(rng, [True, 2, 8, "fp16", None])
    return True


def m_checks(b, rng):
    if not b.checks:
        return False
    c = _pick(rng, b.checks)
    f = _pick(rng, ["status", "word", "bounds"])
    if f == "bounds":
        c.bounds = [max(0, x + _pick(rng, [-1, 1, 100])) for x in c.bounds]
    else:
        setattr(c, f, getattr(c, f) + _pick(rng, [-1, 1, 4]))
    return True


def m_state_init(b, rng):
    if not b.state_init:
        b.state_init = [(int(rng.integers(0, len(b.tensors))), int(rng.integers(0, len(b.tensors))))]
    else:
        b.state_init = b.state_init[1:]
    return True


def reseal_sections(data: bytes, **fields) -> bytes:
    """A format 4 bundle with header section fields (bundle.SECTION_FIELDS) changed and every digest
    recomputed: the new flatbuffer in place of the old one, the bytes after it (padding, sections) where
    they were; flatbuffer_bytes is the new flatbuffer's own length unless given."""
    import flatbuffers
    from gpuc.runtime import bundle as B, flatbuf
    head = B.read_header(data)
    body = bytes(head["body"])
    sections = {k: int(head[k] or 0) for k in B.SECTION_FIELDS}
    room = min([o for o in (sections["weights_offset"], sections["fallback_offset"]) if o] or [len(body)])
    sections.update(fields)
    ver, stats, cv, fp = head["format_version"], head["stats"], head["compiler_version"], head["fingerprint"]
    for _ in range(2):
        vals = tuple(sections[k] for k in B.SECTION_FIELDS)
        ob = flatbuffers.Builder(1024)
        ob.Finish(flatbuf.write(ob, B.BUNDLE_SCHEMA, "Bundle", {
            "magic": head["magic"], "format_version": ver, "compiler_version": cv, "fingerprint": fp,
            "checksum": B.checksum(head["payload"], cv, fp, ver, stats, vals),
            "payload": np.frombuffer(bytes(head["payload"]), np.uint8), "stats": stats,
            **dict(zip(B.SECTION_FIELDS, vals))}), file_identifier=B.FILE_ID)
        fb = bytes(ob.Output())
        if "flatbuffer_bytes" not in fields:
            sections["flatbuffer_bytes"] = len(fb)
    if len(fb) > room:
        raise ValueError("the resealed header does not fit before the first section")
    return B.with_trailer(fb + body[len(fb):])


def m_sections(data: bytes, rng):
    """Byte level (the writer places the sections itself): one section field of the header changed."""
    from gpuc.runtime import bundle as B
    head = B.read_header(data)
    f = _pick(rng, list(B.SECTION_FIELDS))
    old = int(head[f] or 0)
    new = _pick(rng, [_int(rng, old), old + B.SECTION_ALIGN, old - B.SECTION_ALIGN, old + 8, 2**64 - 256,
                      int(head["flatbuffer_bytes"] or 0), len(data)])
    return reseal_sections(data, **{f: new}) if 0 <= new < 2**64 and new != old else None


MUTATORS = [m_tensor_shape, m_tensor_dtype, m_tensor_offset, m_tensor_memory, m_tensor_nbytes, m_tensor_quant,
            m_io, m_spirv_word, m_spirv_cut, m_spirv_swap, m_shader_fields, m_dispatch, m_arena_weights, m_steps,
            m_variants, m_options, m_checks, m_state_init, m_sections]
BYTE_MUTATORS = (m_sections,)


def mutate(data: bytes, rng):
    """(the resealed bundle, the mutator's name), or (None, name) where it did not apply."""
    from gpuc.runtime import bundle as B
    base = B.read_bundle(data)
    base.fallback = bytes(base.fallback)          # (a view of the file's section: copied, as deepcopy needs)
    for _ in range(20):                 # a mutator that has nothing to change here: another one
        fn = _pick(rng, MUTATORS)
        if fn in BYTE_MUTATORS:
            try:
                case = fn(data, rng)
            except ValueError:
                case = None
            if case is not None:
                return case, fn.__name__
            continue
        b = copy.deepcopy(base)
        if not fn(b, rng):
            continue
        try:
            return B.write_bundle(b), fn.__name__
        except Exception:            # noqa: BLE001 - a value the format cannot hold (e.g. a negative uint)
            continue
    return None, "none applied"


def check_key(msg: str) -> str:
    """A short name for the check that refused a case."""
    m = msg.replace("corrupt bundle: ", "")
    for pat, key in [(r"header field|flatbuffer|format 4 payload", "sections"),
                     (r"does not match its kernel", "manifest: dispatch vs kernel"), (r"may touch", "manifest: extent"),
                     (r"not in the arena", "manifest: written binding"), (r"not valid SPIR-V", "SPIRV-Tools / walk"),
                     (r"id bound|SPIR-V|entry point|OpFunctionEnd|overruns|manifest|local size|storage buffer|"
                      r"push constants|declares binding|physical pointers|version word|magic|no function|reserved|"
                      r"past the bound|bad binding/push sizes",
                      "shader structure"), (r"bad bindings|missing shader|push constants do not|was compiled for dispatch", "dispatch table"), (r"dynamic_dims", "dynamic dims"),
                     (r"refused by the driver", "driver"), (r"program step", "program steps"),
                     (r"variant", "variants"), (r"lies outside|size does not match|offset .* multiple|dtype|"
                                                r"memory kind", "tensor table"),
                     (r"input|output", "inputs/outputs"), (r"state_init", "state"), (r"check|status", "run-time checks"),
                     (r"maxStorageBufferRange|maxComputeWorkGroup", "device limits"), (r"workgroup", "grid")]:
        if re.search(pat, m):
            return key
    return "other: " + m[:60]


def worker(seed: int, start: int, count: int, timeout: int) -> None:
    import gpuc
    from gpuc.errors import GpucError
    seeds = []
    for name, model, opts in seed_models():
        data = gpuc.compile(model, **opts)
        with gpuc.load(data) as m:
            xs = inputs_for(m)
            seeds.append((name, data, xs, m.run(xs)))

    def on_alarm(*_):
        raise TimeoutError

    signal.signal(signal.SIGALRM, on_alarm)
    for i in range(start, start + count):
        rng = np.random.default_rng([seed, i])
        name, data, xs, want = seeds[i % len(seeds)]
        case, how = mutate(data, rng)
        print(f"START {i}", flush=True)
        if case is None:
            print(f"END {i} skip {how}", flush=True)
            continue
        signal.alarm(timeout)
        try:
            with gpuc.load(case, timeout_s=timeout / 2) as m:
                got = m.run(xs)
            same = len(got) == len(want) and all(g.dtype == w.dtype and g.shape == w.shape and
                                                 np.array_equal(g, w, equal_nan=True) for g, w in zip(got, want))
            res = "same" if same else f"FAIL wrong outputs ({name}, {how})"
        except GpucError as e:
            msg = str(e)
            res = f"refused {check_key(msg)}" if msg and "\n" not in msg else \
                f"FAIL bad message ({name}, {how}): {msg[:200]!r}"
        except TimeoutError:
            res = f"FAIL hang ({name}, {how})"
        except Exception as e:  # noqa: BLE001
            res = f"FAIL {type(e).__name__} ({name}, {how}): {str(e)[:200]}"
        finally:
            signal.alarm(0)
        print(f"END {i} {res}", flush=True)


def fuzz(cases: int, seed: int, timeout: int, chunk: int = 250, log=None) -> dict:
    sys.path.insert(0, str(ROOT / "scripts"))
    from fuzz_workers import run_chunked
    refused, same, skipped = {}, 0, 0
    results, failures = run_chunked(__file__, [seed, timeout], cases, chunk, timeout * (chunk + 4) + 600, log)
    for idx, res in results:
        if res.startswith("FAIL"):
            failures.append((idx, res))
        elif res == "same":
            same += 1
        elif res.startswith("skip"):
            skipped += 1
        else:
            key = res.split(" ", 1)[1]
            refused[key] = refused.get(key, 0) + 1
    return {"cases": cases, "same": same, "refused": dict(sorted(refused.items(), key=lambda kv: -kv[1])),
            "refused_total": sum(refused.values()), "skipped": skipped, "failures": sorted(failures)}


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(*map(int, sys.argv[2:6]))
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=int, default=60)
    a = ap.parse_args()
    t0 = time.time()
    r = fuzz(a.cases, a.seed, a.timeout, log=lambda s: print(s, file=sys.stderr, flush=True))
    r["seconds"] = round(time.time() - t0, 1)
    print(json.dumps(r, indent=1))
    return 1 if r["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
