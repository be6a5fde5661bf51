"""Issue 19 check: every shared float model with one NaN, then one +Inf, then one -Inf in a real input,
against both LiteRT CPU interpreters (XNNPACK and the plain builtin kernels).

    python -m benchmarks.nonfinite_models [--models-dir DIR] [--precision fp32|fp16] [--json OUT] [NAME ...]
        [--save-refs DIR | --refs DIR]

LiteRT's outputs do not depend on the machine: --save-refs writes them (one .npz per model and
special value) and --refs reads them back, so a machine without LiteRT (the H100) can be checked.

Per output it counts: `missed`, elements non-finite in both LiteRT interpreters but finite in gpuc;
`extra`, finite in both but non-finite in gpuc; and `far`, finite everywhere but off by more than
the tolerance (1e-3 of max|ref| for fp32, 2e-2 for fp16) from both.  Exit status 1 when any is non-zero.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

import gpuc

FLOAT_MODELS = ["mlp_small_f32", "mobilenet_v2_224_f32", "unet_small_128_f32", "mp_hand_landmark_lite",
                "mp_selfie_segmentation", "text_conv1d_lstm_tfkeras_f32", "attention/hf_mobilevit_small",
                "attention/timm_efficientformerv2_s0"]
SPECIALS = {"nan": np.nan, "posinf": np.inf, "neginf": -np.inf}


def default_models_dir() -> Path:
    here = Path(__file__).resolve().parents[1]
    for p in (here.parent / "shared" / "models", here / "shared" / "models"):
        if p.is_dir():
            return p
    return Path("models")


def litert(model: bytes, feeds, builtin: bool):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    kw = {"experimental_op_resolver_type": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES} if builtin else {}
    try:
        it = Interpreter(model_content=model, **kw)
        it.allocate_tensors()
    except (RuntimeError, ValueError):
        return None                             # e.g. builtin kernels without the model's custom op
    for d, x in zip(it.get_input_details(), feeds):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [np.array(it.get_tensor(d["index"])) for d in it.get_output_details()]


def inputs_for(m, models_dir: Path, name: str, value: float):
    feeds = []
    for i, spec in enumerate(m.inputs):
        ref = (models_dir / name).parent / "ref" / f"{Path(name).name}.in{i}.npy"
        x = np.load(ref) if ref.exists() else np.random.default_rng(i).uniform(-1, 1, spec.shape).astype(spec.dtype)
        x = np.array(x, copy=True)
        if i == 0 and x.dtype.kind == "f":
            x.reshape(-1)[x.size // 2 + 7] = value          # one special value, mid-image
        feeds.append(x)
    return feeds


def references(data: bytes, feeds, name: str, special: str, save, load) -> list:
    """Both interpreters' outputs (those that can run the model), run here or read from `load`."""
    key = f"{name.replace('/', '__')}.{special}.npz"
    if load:
        z = np.load(load / key)
        return [[z[f"{i}_{k}"] for k in range(int(z[f"{i}_n"]))] for i in range(int(z["n"]))]
    refs = [r for r in (litert(data, feeds, False), litert(data, feeds, True)) if r is not None]
    if save:
        arrays = {f"{i}_{k}": o for i, r in enumerate(refs) for k, o in enumerate(r)}
        arrays.update({f"{i}_n": np.int64(len(r)) for i, r in enumerate(refs)}, n=np.int64(len(refs)))
        save.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(save / key, **arrays)
    return refs


def compare(out, refs, tol: float) -> dict:
    fin = [np.isfinite(r) for r in refs]
    both_nf = np.logical_and.reduce([~f for f in fin])
    both_f = np.logical_and.reduce(fin)
    fg = np.isfinite(out)
    far = np.ones(out.shape, bool)
    for r, f in zip(refs, fin):
        scale = max(float(np.abs(r[f]).max(initial=0.0)), 1e-30)
        with np.errstate(invalid="ignore"):
            far &= ~(np.abs(out.astype(np.float64) - r) <= tol * scale)
    return {"litert_nonfinite": [int((~f).sum()) for f in fin], "gpuc_nonfinite": int((~fg).sum()),
            "missed": int((both_nf & fg).sum()), "extra": int((both_f & ~fg).sum()),
            "far": int((both_f & fg & far).sum()), "size": int(out.size)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("names", nargs="*")
    ap.add_argument("--models-dir", type=Path, default=None)
    ap.add_argument("--precision", choices=["fp32", "fp16"], default="fp32")
    ap.add_argument("--json", type=Path)
    refs_arg = ap.add_mutually_exclusive_group()
    refs_arg.add_argument("--save-refs", type=Path, help="also write LiteRT's outputs here")
    refs_arg.add_argument("--refs", type=Path, help="read LiteRT's outputs from here instead of running it")
    a = ap.parse_args()
    models_dir = a.models_dir or default_models_dir()
    tol = 1e-3 if a.precision == "fp32" else 2e-2
    rows, bad = [], 0
    for name in a.names or FLOAT_MODELS:
        path = models_dir / f"{name}.tflite"
        data = path.read_bytes()
        m = gpuc.load(gpuc.compile(path, precision=a.precision))
        for special, value in SPECIALS.items():
            feeds = inputs_for(m, models_dir, name, value)
            refs = references(data, feeds, name, special, a.save_refs, a.refs)
            outs = m.run([x.copy() for x in feeds])
            for k, o in enumerate(outs):
                row = dict(model=name, special=special, output=k, **compare(o, [r[k] for r in refs], tol))
                bad += row["missed"] + row["extra"] + row["far"]
                rows.append(row)
                print(f"{name:38s} {special:6s} out{k}: LiteRT non-finite {row['litert_nonfinite']}, gpuc "
                      f"{row['gpuc_nonfinite']} of {row['size']}; missed {row['missed']} extra {row['extra']} "
                      f"far {row['far']}", flush=True)
        m.close()
    print(f"{a.precision}: {'all outputs like LiteRT' if not bad else f'{bad} elements unlike LiteRT'}")
    if a.json:
        a.json.write_text(json.dumps({"precision": a.precision, "rows": rows}, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
