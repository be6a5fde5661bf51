"""Compile cache: bundles keyed by xxh3-128 of (model bytes, options, compiler version, and the
sources of the shaders, compiler and bundle writer).

A hit returns the cached bundle after checking its header and checksum; a damaged entry is
dropped and recompiled.  Entries are written atomically, so concurrent compiles never leave a torn
file; the folder is kept under a size cap by least-recently-used eviction.
"""
from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

import xxhash

from gpuc import __version__
from gpuc.errors import BundleError
from gpuc.runtime import cachedir
from gpuc.runtime.bundle import read_header

SUB = "bundles"


@lru_cache(maxsize=1)
def sources_digest() -> str:
    """Digest of everything that decides a bundle's contents: shader templates, compiler code and
    the bundle writer, so any change to them (even without a version bump) misses the cache."""
    h = xxhash.xxh3_128()
    roots = [resources.files("gpuc.shaders"), resources.files("gpuc.compiler"), resources.files("gpuc.runtime")]
    for root in roots:
        stack = [root]
        files = []
        while stack:
            d = stack.pop()
            for p in d.iterdir():
                if p.is_dir() and p.name != "__pycache__":
                    stack.append(p)
                elif p.name.endswith((".comp", ".glsl", ".py", ".fbs")):
                    files.append(p)
        for p in sorted(files, key=lambda p: str(p)):
            h.update(str(p.name).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def cache_key(model_bytes: bytes, options: dict) -> str:
    h = xxhash.xxh3_128()
    h.update(model_bytes)
    h.update(json.dumps(options, sort_keys=True).encode())
    h.update(__version__.encode())
    h.update(sources_digest().encode())
    return h.hexdigest()


def entry_path(key: str):
    return cachedir.cache_dir(SUB) / f"{key}.bundle"


def lookup(key: str) -> bytes | None:
    path = entry_path(key)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    try:
        read_header(data)
    except BundleError:
        try:
            path.unlink()
        except OSError:
            pass
        return None
    cachedir.touch(path)
    return data


def store(key: str, data: bytes) -> None:
    try:
        cachedir.atomic_write(cachedir.cache_dir(SUB) / f"{key}.bundle", data)
        cachedir.evict(SUB)
    except OSError:
        pass          # a read-only or full cache must never fail a compile


def list_entries():
    return [{"key": p.stem, "bytes": s, "last_used": m} for p, s, m in cachedir.entries(SUB)]


def clear() -> int:
    n = 0
    for sub in (SUB, "pipelines"):
        for p, _, _ in cachedir.entries(sub):
            try:
                p.unlink()
                n += 1
            except OSError:
                pass
    return n
