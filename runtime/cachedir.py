"""The gpuc cache directory (compiled bundles and Vulkan pipeline caches), shared by compiler and
runtime: location, atomic writes, and least-recently-used eviction under a size cap.

Location: $GPUC_CACHE_DIR, else $XDG_CACHE_HOME/gpuc, else ~/.cache/gpuc; created 0700.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

DEFAULT_MAX_BYTES = 2 << 30


def cache_dir(sub: str = "") -> Path:
    base = os.environ.get("GPUC_CACHE_DIR")
    if not base:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        base = os.path.join(xdg, "gpuc")
    root = Path(base)
    if not root.is_dir():
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(root, 0o700)
    d = root / sub if sub else root
    d.mkdir(exist_ok=True, mode=0o700)
    return d


def max_bytes() -> int:
    try:
        return int(os.environ.get("GPUC_CACHE_MAX_BYTES", DEFAULT_MAX_BYTES))
    except ValueError:
        return DEFAULT_MAX_BYTES


def atomic_write(path: Path, data: bytes) -> None:
    """Write to a temp file in the same directory, fsync, then rename: readers never see a torn file."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def link_or_copy(src: Path, dst, data: bytes) -> None:
    """Put `data` (the contents of cache entry `src`) at `dst` atomically: a hard link when the
    file system allows it (no copy), else an atomic write."""
    dst = Path(dst)
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
    try:
        os.link(src, tmp)
        os.replace(tmp, dst)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        atomic_write(dst, data)


def touch(path: Path) -> None:
    """Mark an entry as recently used (mtime drives LRU eviction)."""
    try:
        os.utime(path)
    except OSError:
        pass


def entries(sub: str):
    """[(path, size, mtime)] of finished entries (temp files skipped), oldest first."""
    out = []
    for p in cache_dir(sub).iterdir():
        if p.name.endswith(".tmp") or not p.is_file():
            continue
        try:
            st = p.stat()
        except OSError:
            continue
        out.append((p, st.st_size, st.st_mtime))
    return sorted(out, key=lambda e: e[2])


def evict(sub: str, limit: int | None = None) -> int:
    """Remove least-recently-used entries until the folder is under `limit` bytes; returns count removed."""
    limit = max_bytes() if limit is None else limit
    ents = entries(sub)
    total = sum(s for _, s, _ in ents)
    removed = 0
    for p, s, _ in ents:
        if total <= limit:
            break
        try:
            p.unlink()
            total -= s
            removed += 1
        except OSError:
            pass
    return removed
