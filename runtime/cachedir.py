"""The gpuc cache directory (compiled bundles and Vulkan pipeline caches), shared by compiler and
runtime: location, atomic writes, and least-recently-used eviction under a size cap.

Location: $GPUC_CACHE_DIR, else $XDG_CACHE_HOME/gpuc, else ~/.cache/gpuc; created 0700.
An entry `NAME.ext` may have a sidecar `NAME.meta` (compiler/cache.py): it is not an entry of its
own, and goes with its entry when that is evicted or cleared.

Imports only `os` and runtime/settings.py (pathlib lazily, for the Path-returning helpers), so that the compile cache's
fast path (gpuc/launch.py) stays cheap.
"""
from __future__ import annotations

import os

from gpuc.runtime import settings

DEFAULT_MAX_BYTES = 2 << 30
SIDECAR = ".meta"


def cache_root() -> str:
    s = settings.current()
    return s.cache_dir or os.path.join(s.xdg_cache_home or os.path.join(os.path.expanduser("~"), ".cache"), "gpuc")


def cache_path(sub: str = "", create: bool = True) -> str:
    """The cache folder `sub` as a string; `create`: make it (and the 0700 root) when missing."""
    root = cache_root()
    d = os.path.join(root, sub) if sub else root
    if create and not os.path.isdir(d):
        if not os.path.isdir(root):
            os.makedirs(root, mode=0o700, exist_ok=True)
            os.chmod(root, 0o700)
        os.makedirs(d, mode=0o700, exist_ok=True)
    return d


def cache_dir(sub: str = ""):
    """The cache folder `sub` as a pathlib.Path, created when missing."""
    from pathlib import Path
    return Path(cache_path(sub))


def max_bytes() -> int:
    return settings.current().cache_max_bytes


def sidecar_of(path) -> str:
    return os.path.splitext(os.fspath(path))[0] + SIDECAR


def atomic_write(path, data, sync: bool = True, private: bool = True) -> None:
    """Write to a temp file in the same directory, fsync (`sync`), then rename: readers never see a
    torn file.  Temp files end in `.tmp` (skipped by `entries`).  `private`: mode 0600 (the cache's
    own entries); else the mode a new file gets, 0666 less the umask (a bundle the user asked for).
    `data`: bytes, or an open binary file to copy from (streamed in 1 MiB pieces: a big bundle is never
    held whole)."""
    path = os.fspath(path)
    tmp, fd = _open_tmp(path, private)
    try:
        with open(fd, "wb") as f:
            if hasattr(data, "readinto"):
                import shutil
                shutil.copyfileobj(data, f, 1 << 20)
            else:
                f.write(data)
            f.flush()
            if sync:
                os.fsync(f.fileno())
        if private:
            os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        _unlink(tmp)
        raise


def copy_out(src, dst, data=None) -> None:
    """Put the contents of cache entry `src` (`data`, when the caller has them) at `dst`, a file of
    the user's, atomically and with the mode a new file gets (0666 less the umask): a reflink where
    the file system shares blocks (btrfs, XFS), else a copy.  Never a hard link: the user's file and
    the cache's entry stay independent (writing one cannot change the other; eviction cannot touch
    it)."""
    src, dst = os.fspath(src), os.fspath(dst)
    try:
        with open(src, "rb") as f:
            if _reflink_to(f.fileno(), dst):
                return
            if data is None:
                atomic_write(dst, f, private=False)          # streamed: a big bundle is never held whole
                return
    except OSError:
        if data is None:
            raise
    atomic_write(dst, data, private=False)


FICLONE = 0x40049409         # linux/fs.h: share the source file's blocks (copy on write)


def _reflink_to(src_fd: int, dst: str) -> bool:
    """Reflink the open file `src_fd` to `dst` atomically; False (nothing left behind) where the
    file system or platform cannot."""
    try:
        import fcntl
    except ImportError:
        return False
    try:
        tmp, fd = _open_tmp(dst, private=False)
    except OSError:
        return False
    try:
        fcntl.ioctl(fd, FICLONE, src_fd)
        os.close(fd)
        fd = -1
        os.replace(tmp, dst)
        return True
    except OSError:
        return False
    finally:
        if fd >= 0:
            os.close(fd)
        _unlink(tmp)


def _open_tmp(path: str, private: bool):
    """A new temp file beside `path`: (its name, an fd open for writing); mode 0600 when `private`,
    else 0666 less the umask (os.open applies it)."""
    tmp = f"{path}.{os.getpid()}.{os.urandom(6).hex()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0),
                 0o600 if private else 0o666)
    return tmp, fd


def touch(path) -> None:
    """Mark an entry as recently used (mtime drives LRU eviction)."""
    try:
        os.utime(path)
    except OSError:
        pass


def _unlink(path) -> bool:
    try:
        os.unlink(path)
        return True
    except OSError:
        return False


def remove(path) -> bool:
    """Remove an entry and its sidecar; True when the entry itself was removed."""
    _unlink(sidecar_of(path))
    return _unlink(path)


def entries(sub: str):
    """[(path, size, mtime)] of finished entries (temp files and sidecars skipped), oldest first."""
    from pathlib import Path
    out = []
    with os.scandir(cache_path(sub)) as it:
        for e in it:
            if e.name.endswith((".tmp", SIDECAR)):
                continue
            try:
                if not e.is_file():
                    continue
                st = e.stat()
            except OSError:
                continue
            out.append((Path(e.path), st.st_size, st.st_mtime))
    return sorted(out, key=lambda e: e[2])


def clear(sub: str) -> int:
    """Remove every finished entry of `sub` with its sidecar, and stray sidecars; returns the
    number of entries removed."""
    n = sum(remove(p) for p, _, _ in entries(sub))
    with os.scandir(cache_path(sub)) as it:
        for e in it:
            if e.name.endswith(SIDECAR):
                _unlink(e.path)
    return n


def evict(sub: str, limit: int | None = None) -> int:
    """Remove least-recently-used entries until the folder is under `limit` bytes; returns count removed."""
    limit = max_bytes() if limit is None else limit
    ents = entries(sub)
    total = sum(s for _, s, _ in ents)
    removed = 0
    for p, s, _ in ents:
        if total <= limit:
            break
        if remove(p):
            total -= s
            removed += 1
    return removed
