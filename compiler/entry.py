"""A model's compile, bytes to bundle bytes (gpuc.compiler.compile calls `compile_bytes`): one program
(driver.py), or one per SignatureDef in one bundle (signatures.py); an fp16 bundle carries the fp32
program of the same model as its fallback.  It sits above driver.py and signatures.py, which the
latter builds on.
"""
from __future__ import annotations

from gpuc import progress
from gpuc.compiler import signatures, sym_scope
from gpuc.compiler.driver import build_bundle, fingerprint, prepare_batched
from gpuc.compiler.passes.precision import store_fp16
from gpuc.errors import UnsupportedError
from gpuc.runtime import bundle as B


def compile_bytes(data: bytes, name: str, opts: dict) -> bytes:
    """Compile .tflite bytes with normalized options (see gpuc.compiler.normalize_options)."""
    if opts["precision"] not in ("fp32", "fp16"):
        raise UnsupportedError(f"precision {opts['precision']!r} not supported (fp32 or fp16)")
    fp = fingerprint(data, opts)
    if signatures.signature_count(data) > 1:     # every SignatureDef in one bundle (compiler/signatures.py)
        out, n16 = signatures.compile_signatures(data, name, opts, fp)
        return attach_fallback(out, data, name, opts) if n16 else out
    try:
        p = prepare_batched(data, opts)
        stats = p.stats()                        # warnings are printed again when the compile cache answers
        n16 = store_fp16(p.graph, p.program)     # --precision fp16: tensors stored as float16
        if n16:
            stats["fp16_tensors"] = n16
        out = build_bundle(p.graph, p.program, name, opts, fp, stats)
    finally:
        sym_scope.end()                          # (--dynamic: the compile's dim variables)
    return attach_fallback(out, data, name, opts) if n16 else out


def attach_fallback(bundle_bytes: bytes, data: bytes, name: str, opts: dict) -> bytes:
    """Embed the fp32 program of the same model in an fp16 bundle: a device without 16-bit storage
    buffers loads that one instead (one warning).  The fallback is a complete, separately verified
    bundle, so the runtime needs no conversion code and runs exactly what `--precision fp32` runs."""
    progress.stage("the fp32 fallback")
    fallback = compile_bytes(data, name, dict(opts, precision="fp32"))
    b = B.read_bundle(bundle_bytes)
    b.fallback = fallback
    return B.write_bundle(b)
