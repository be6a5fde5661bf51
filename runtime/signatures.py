"""Signature runners of a multi-signature bundle (compiler/signatures.py): `model.signature(name)`.

The loaded model runs the bundle's first signature; each other signature is a LoadedModel of its
nested program that shares the model's arenas: the same weights buffer (uploaded once) and the same
arena, whose state region (an LLM's KV cache) every signature reads and writes in place.  A runner
is made on first use and closed with the model.  Runs of every runner go to the device's one queue
in submission order, and each recorded run starts with a barrier on the arena, as two runs of one
model do.  reset_state() of any runner resets the state of all (each signature's state_init covers
every state slot)."""
from __future__ import annotations

from gpuc.errors import GpucError


def names(model) -> list[str]:
    """The bundle's signature keys, the model's own first ([] for a bundle of one program)."""
    b = model.bundle
    return [b.signature] + [s.signature for s in b.signatures] if b.signatures or b.signature else []


def runner(model, name: str):
    """The runner of signature `name` (the model itself for its own signature; another of the model's
    kind, LoadedModel, on the same device and arenas for each other one)."""
    model._check_open()
    keys = names(model)
    if name not in keys:
        raise SignatureError(f"no signature {name!r} in this bundle (signatures: {', '.join(keys) or 'none'})")
    if name == model.bundle.signature:
        return model
    with model._close_lock:
        model._check_open()
        r = model._runners.get(name)
        if r is None:
            sub = next(s for s in model.bundle.signatures if s.signature == name)
            r = type(model)(sub, device=model.device, timeout_s=model.timeout_s, arenas=model.arenas)
            model._runners[name] = r
    return r


def close_runners(model) -> None:
    for r in list(getattr(model, "_runners", {}).values()):
        r.close()


class SignatureError(GpucError):
    """An unknown signature name."""
