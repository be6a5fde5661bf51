"""Compile cache: bundles keyed by xxh3-128 of (model bytes, options, compiler version, and the
sources of the shaders, compiler and bundle writer).

Each entry `<key>.bundle` has a sidecar `<key>.meta`: the xxh64 of its body, then the body, a
`marshal`led dict {key, size, digest (the bundle's trailer digest), stats (the header's, warnings
included)}; it is unmarshalled only once its xxh64 matches, and the cache folder is 0700.  A hit
whose sidecar vouches for the entry costs one hash of the bundle and no flatbuffer parsing;
otherwise the full header check decides (a damaged entry is dropped and recompiled) and the
sidecar is rewritten.  Entries are written atomically, so concurrent compiles never leave a torn
file; the folder is kept under a size cap by least-recently-used eviction.

The sources digest is memoized on disk under `<cache>/sources/<signature>`, the signature being
the path, size, mtime and ctime of every source file, so a process does not read them all.

Imports only os, sys, marshal, xxhash and lean gpuc modules: gpuc/launch.py serves CLI hits from
here without the compiler, click or numpy.  Not even json: on an interpreter whose start-up has not
imported `re` already (a plain venv), json costs ~8 ms, more than all the work of a hit; so the
options enter the key as their canonical repr (CompileOptions.key_text), and sidecars are marshalled.
"""
from __future__ import annotations

import marshal
import os
import stat
import sys

import xxhash

from gpuc.compiler.compile_inputs import BYTES_MODEL_NAME, MODEL_BYTES_TYPES, model_name
from gpuc.compiler.options import CompileOptions, resolve
from gpuc.errors import BundleError
from gpuc.runtime import cachedir, settings
from gpuc.runtime.trailer import TRAILER_BYTES, TRAILER_MAGIC, claimed_digest, digest_ok
from gpuc.version import __version__

SUB = "bundles"
SOURCES_SUB = "sources"
SOURCE_PACKAGES = ("gpuc.shaders", "gpuc.compiler", "gpuc.runtime")
SOURCE_SUFFIXES = (".comp", ".glsl", ".py", ".fbs")
SOURCES_KEPT = 16                  # memo files kept (one per install and source state)
_sources_memo: dict = {}           # roots -> digest, for this process


def enabled(cache: bool = True) -> bool:
    return bool(cache) and not settings.current().no_compile_cache


# --- the key ---------------------------------------------------------------------------------------

def source_roots() -> tuple:
    """The package folders (as importlib.resources would find them), without importlib.resources."""
    for p in SOURCE_PACKAGES:
        __import__(p)
    return tuple(os.path.dirname(sys.modules[p].__file__) for p in SOURCE_PACKAGES)


def _source_files(root: str) -> list:
    files, stack = [], [root]
    while stack:
        with os.scandir(stack.pop()) as it:
            for e in it:
                if e.is_dir() and e.name != "__pycache__":
                    stack.append(e.path)
                elif e.name.endswith(SOURCE_SUFFIXES):
                    files.append(e.path)
    return sorted(files)


def _signature(files: list) -> str:
    h = xxhash.xxh3_128()
    for p in files:
        st = os.stat(p)
        h.update(f"{p}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\n".encode())
    return h.hexdigest()


def _content_digest(per_root: list) -> str:
    h = xxhash.xxh3_128()
    for files in per_root:
        for p in files:
            with open(p, "rb") as f:
                h.update(os.path.basename(p).encode() + b"\0" + f.read())
    return h.hexdigest()


def sources_digest(roots: tuple | None = None) -> str:
    """Digest of everything that decides a bundle's contents: shader templates, compiler code and
    the bundle writer, so any change to them (even without a version bump) misses the cache."""
    roots = source_roots() if roots is None else tuple(roots)
    if roots in _sources_memo:
        return _sources_memo[roots]
    per_root = [_source_files(r) for r in roots]
    files = [p for fs in per_root for p in fs]
    sig = _signature(files)
    memo = os.path.join(cachedir.cache_path(SOURCES_SUB, create=False), sig)
    digest = _read_memo(memo)
    if digest is None:
        digest = _content_digest(per_root)
        if _signature(files) == sig:            # unchanged while read: safe to remember
            _write_memo(memo, digest)
    _sources_memo[roots] = digest
    return digest


def _read_memo(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            text = f.read(64).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text if len(text) == 32 and all(c in "0123456789abcdef" for c in text) else None


def _write_memo(path: str, digest: str) -> None:
    try:
        folder = cachedir.cache_path(SOURCES_SUB)
        cachedir.atomic_write(path, digest.encode() + b"\n", sync=False)
        names = [e for e in os.scandir(folder) if not e.name.endswith(".tmp")]
        for e in sorted(names, key=lambda e: e.stat().st_mtime_ns)[:-SOURCES_KEPT]:
            os.unlink(e.path)
    except OSError:
        pass


def _finish_key(h, model_bytes: int, name: str, options: CompileOptions) -> str:
    """Every field after the model goes in with its length first: no two (model, name, options)
    triples share a key by moving bytes from one field into the next.  The options enter whole
    (CompileOptions.key_text: every field, the compile-time environment switches included)."""
    for field in (name, options.key_text(), __version__, sources_digest()):
        b = field.encode()
        h.update(len(b).to_bytes(8, "little") + b)
    h.update(model_bytes.to_bytes(8, "little"))
    return h.hexdigest()


def cache_key(model, name: str, options: CompileOptions) -> str:
    """xxh3-128 of model bytes + name, options, version, sources (each length-prefixed)."""
    h = xxhash.xxh3_128()
    with memoryview(model) as m:
        h.update(m)
        return _finish_key(h, m.nbytes, name, options)


CHUNK = 1 << 20


def hash_stream(h, f, limit: int | None = None) -> int:
    """Feed file `f` (up to `limit` bytes) to hasher `h` in 1 MiB reads into one buffer: no copy of
    the whole file, and, unlike a memory map, a file truncated meanwhile is an error, not a SIGBUS.
    Returns the bytes hashed."""
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    done = 0
    while limit is None or done < limit:
        n = f.readinto(view if limit is None else view[:min(CHUNK, limit - done)])
        if not n:
            break
        h.update(view[:n])
        done += n
    return done


def regular_file(path) -> bool:
    """A path to a regular file (hashed as it is read, then read again to compile); False for a pipe,
    FIFO or device, which can be read once only.  True when it cannot be stat'ed (open reports why)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return True


def model_key(model, options: CompileOptions, name: str | None = None) -> str:
    """cache_key of a model given as bytes (named `name`, default BYTES_MODEL_NAME) or as the path
    of a regular file (hashed as it is read); OSError when unreadable."""
    if isinstance(model, MODEL_BYTES_TYPES):
        return cache_key(model, name or BYTES_MODEL_NAME, options)
    h = xxhash.xxh3_128()
    with open(os.fspath(model), "rb") as f:
        n = hash_stream(h, f)
    return _finish_key(h, n, model_name(model), options)


# --- entries and sidecars --------------------------------------------------------------------------

def entry_file(key: str, create: bool = True) -> str:
    return os.path.join(cachedir.cache_path(SUB, create), f"{key}.bundle")


def seal(meta: dict) -> bytes:
    body = marshal.dumps(meta)
    return xxhash.xxh64_digest(body) + body


def unseal(raw: bytes) -> dict | None:
    """The dict `seal` wrote, or None when the bytes are not exactly that."""
    body = raw[8:]
    if len(raw) < 9 or xxhash.xxh64_digest(body) != raw[:8]:
        return None
    try:
        meta = marshal.loads(body)
    except (ValueError, EOFError, TypeError):
        return None
    return meta if type(meta) is dict else None


def write_meta(key: str, data, stats: dict) -> None:
    """The sidecar of entry `key` (contents `data`, checked), or nothing when it cannot be written."""
    try:
        meta = {"key": key, "size": len(data), "digest": claimed_digest(data), "stats": stats}
        cachedir.atomic_write(cachedir.sidecar_of(entry_file(key)), seal(meta), sync=False)
    except OSError:
        pass


def read_meta(key: str) -> dict | None:
    """The sidecar of entry `key` when it is intact and names that key, else None."""
    try:
        with open(cachedir.sidecar_of(entry_file(key, create=False)), "rb") as f:
            raw = f.read(1 << 20)
    except OSError:
        return None
    meta = unseal(raw)
    ok = (meta is not None and meta.get("key") == key and type(meta.get("size")) is int
          and type(meta.get("digest")) is bytes and len(meta["digest"]) == 16 and type(meta.get("stats")) is dict)
    return meta if ok else None


def vouches(meta: dict, data) -> bool:
    """The sidecar describes exactly this file: same size and trailer digest, and the digest holds."""
    return len(data) == meta["size"] and claimed_digest(data) == meta["digest"] and digest_ok(data)


def file_vouched(path: str, meta: dict) -> bool:
    """The file at `path` is exactly what sidecar `meta` describes: its size, its trailer's digest,
    and that digest holds (one streamed hash of the file)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        body = size - TRAILER_BYTES
        if size != meta["size"] or body < 8:
            return False
        h = xxhash.xxh3_128()
        if hash_stream(h, f, body) != body:
            return False
        tail = f.read(TRAILER_BYTES)
    return tail[:8] == TRAILER_MAGIC and tail[8:] == meta["digest"] == h.digest()


def probe(key: str) -> dict | None:
    """The sidecar of entry `key` when it vouches for the entry (one streamed hash of the file, no
    parsing); touches the entry.  None: absent, or anything doubtful (`lookup` decides)."""
    meta = read_meta(key)
    if meta is None:
        return None
    path = entry_file(key, create=False)
    try:
        if not file_vouched(path, meta):
            return None
    except OSError:
        return None
    cachedir.touch(path)
    return meta


def _full_check(data) -> dict | None:
    """The header stats of a bundle that passes the runtime's header check, else None."""
    from gpuc.runtime.bundle import header_stats      # (lazy: the flatbuffer reader, only when a sidecar fails)
    try:
        return header_stats(data)
    except BundleError:
        return None


def lookup(key: str) -> tuple[bytes, dict] | None:
    """(bundle, stats) of entry `key`, checked once: by its sidecar and one hash, else by the full
    header check (which then rewrites the sidecar).  A damaged entry is dropped: None."""
    path = entry_file(key, create=False)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    meta = read_meta(key)
    if meta is not None and vouches(meta, data):
        stats = meta["stats"]
    else:
        stats = _full_check(data)
        if stats is None:
            cachedir.remove(path)
            return None
        write_meta(key, data, stats)
    cachedir.touch(path)
    return data, stats


def store(key: str, data: bytes, stats: dict) -> None:
    try:
        cachedir.atomic_write(entry_file(key), data)
        write_meta(key, data, stats)
        cachedir.evict(SUB)
    except OSError:
        pass          # a read-only or full cache must never fail a compile


def repeat_warnings(stats: dict) -> None:
    """A cache hit repeats the compiler's warnings (kept in the bundle's stats)."""
    for w in stats.get("warnings", []):
        print(f"gpuc: warning: {w}", file=sys.stderr)


def serve(model: str, output: str, options: dict) -> dict | None:
    """Write `output` from the cache without the compiler, click or the flatbuffer reader: the
    sidecar (with `size` and `stats`) when done, None (nothing written) when not vouched for.
    options: keyword options of gpuc.compiler.compile (the environment's compile switches apply)."""
    opts = resolve(**options)
    if not regular_file(model):          # a pipe: hashing it here would leave nothing to compile
        return None
    try:
        meta = probe(model_key(model, opts))
        if meta is not None:
            cachedir.copy_out(entry_file(meta["key"], create=False), output)
    except OSError:
        return None
    return meta


# --- listing and clearing --------------------------------------------------------------------------

def list_entries():
    return [{"key": p.stem, "bytes": s, "last_used": m} for p, s, m in cachedir.entries(SUB)]


def clear() -> int:
    n = cachedir.clear(SUB) + cachedir.clear("pipelines")
    cachedir.clear(SOURCES_SUB)
    return n
