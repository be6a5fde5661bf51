"""Host copies between numpy arrays and mapped staging memory, split over a few threads when large.

A batch of images is tens of MB (32 float32 images of 224 x 224 x 3: 19 MB); one thread copies it into mapped
memory at a few GB/s -- write-combined device memory (a BAR) takes much more from several writers --
which is milliseconds next to a GPU run of the same order.  numpy releases the GIL inside a copy, so
parts of one copy run in parallel: the caller's thread and a shared pool of `copy_threads - 1`
threads copy its parts.  Contiguous copies of one dtype are split into byte
ranges aligned to 4 KiB (whole write-combining lines and pages per writer); any other copy (a strided
source, a cast) into slices along its longest axis, so it needs no temporary.  Copies under
`copy_split_bytes` (default 16 MiB: runtime/settings.py COPY_SPLIT_BYTES) stay on the caller's thread: threads
parked on idle cores wake late, and on the H100 host the split copy lost below ~10 MB.

The parts are handed out as the threads come (GPUC_COPY_CHUNKS parts per thread, default 4): a
worker that wakes late -- a pool thread blocked since the previous run, on a busy or idle-parked CPU,
tens of us to a scheduler slice -- finds the parts taken by the others, and the caller waits only for
parts under way, never for a thread that has not started (its task is cancelled or returns at once).
With 1 part per thread each thread's part is fixed (the earlier behaviour, for A/B).

Settings (runtime/settings.py): GPUC_COPY_THREADS (0: the usable CPU count, at most MAX_THREADS;
1: never split), GPUC_COPY_SPLIT_BYTES (the size from which a copy is split) and GPUC_COPY_CHUNKS,
read into a Copier, which a model's run slots take at load.
"""
from __future__ import annotations

import itertools
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from gpuc.errors import GpucError
from gpuc.runtime import settings

MAX_THREADS = 8                  # the automatic thread count's cap (a setting may ask for more)
LIMIT_THREADS = 64               # a setting's cap
ALIGN = 4096                     # byte ranges of a contiguous copy start at multiples of this
MIN_PART = 256 << 10             # parts handed out as threads come are at least this large (or split / threads):
#                                  a part costs a GIL hand-off (~5-50 us), worth it above ~100 us of copying
PIPELINE_MODES = ("auto", "on", "off")      # upload_pipeline (runtime/upload.py)

_pools: dict = {}               # worker count -> the shared pool of that many threads
_pool_lock = threading.Lock()


def _cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


def threads() -> int:
    """Threads a large copy is split over (the caller's included): the copy_threads setting, else the
    usable CPU count, at most MAX_THREADS."""
    want = settings.current().copy_threads
    return max(1, min(LIMIT_THREADS, want if want > 0 else min(MAX_THREADS, _cores())))


def split_bytes() -> int:
    return settings.current().copy_split_bytes


def _executor(workers: int) -> ThreadPoolExecutor:
    """The shared pool of `workers` threads (one per thread count in use: models loaded under
    different settings each keep theirs; a pool's threads start on demand, up to its size)."""
    with _pool_lock:
        pool = _pools.get(workers)
        if pool is None:
            pool = _pools[workers] = ThreadPoolExecutor(workers, thread_name_prefix=f"gpuc-copy{workers}")
        return pool


def _byte_ranges(nbytes: int, n: int, min_bytes: int = ALIGN) -> list:
    step = max(-(-nbytes // n), min_bytes)
    step = -(-step // ALIGN) * ALIGN
    return [(i, min(i + step, nbytes)) for i in range(0, nbytes, step)]


def _lazy_parts(dst: np.ndarray, src: np.ndarray, n: int, min_bytes: int = ALIGN):
    """(count, part): `count` parts (at most n, none under min_bytes where it can be helped), part(i)
    the i-th (dst part, src part); their assignments together make dst[...] = src.  A part is sliced
    when asked for (by the thread that copies it, off the caller's path)."""
    if (dst.flags.c_contiguous and src.flags.c_contiguous and dst.dtype == src.dtype
            and dst.dtype.kind in "biufc"):
        d, s = dst.reshape(-1).view(np.uint8), src.reshape(-1).view(np.uint8)
        ranges = _byte_ranges(dst.nbytes, n, min_bytes)
        return len(ranges), lambda i: (d[ranges[i][0]:ranges[i][1]], s[ranges[i][0]:ranges[i][1]])
    axis = int(np.argmax(dst.shape))
    size = dst.shape[axis]
    row = max(1, dst.nbytes // max(size, 1))
    step = max(-(-size // min(n, size)), min(size, -(-min_bytes // row)))
    cut = (slice(None),) * axis
    return -(-size // step), lambda i: (dst[cut + (slice(i * step, (i + 1) * step),)],
                                        src[cut + (slice(i * step, (i + 1) * step),)])


def _parts(dst: np.ndarray, src: np.ndarray, n: int, min_bytes: int = ALIGN) -> list:
    """[(dst part, src part)] of _lazy_parts, sliced now."""
    count, part = _lazy_parts(dst, src, n, min_bytes)
    return [part(i) for i in range(count)]


def _assign(pair) -> None:
    pair[0][...] = pair[1]


class _Shared:
    """Parts of one copy handed out to whichever thread asks next (next() is atomic under the GIL).
    The last part to finish sets `done`; the first error is kept."""

    __slots__ = ("count", "part", "next", "left", "lock", "done", "error")

    def __init__(self, count: int, part):
        self.count, self.part, self.next, self.left = count, part, itertools.count().__next__, count
        self.lock, self.done, self.error = threading.Lock(), threading.Event(), None

    def work(self) -> None:
        """Copy parts until none is left (a thread that comes late copies nothing)."""
        count, part = self.count, self.part
        while True:
            i = self.next()
            if i >= count:
                return
            try:
                _assign(part(i))
            except BaseException as e:          # noqa: BLE001 - raised by the caller once every part is over
                self.error = self.error or e
            finally:
                with self.lock:
                    self.left -= 1
                    if self.left == 0:
                        self.done.set()


class Copier:
    """A copy policy (threads, split size, parts per thread) taken from the settings once: a model's slots
    keep one from load on (reading the settings costs tens of us, more than a small copy)."""

    __slots__ = ("threads", "split", "upload_chunk", "upload_pipeline", "chunks")

    def __init__(self, threads_: int = 1, split: int = settings.COPY_SPLIT_BYTES, upload_chunk: int = 0, upload_pipeline: str = "auto",
                 chunks: int = 4):
        self.threads, self.split = max(1, int(threads_)), max(1, int(split))
        self.upload_chunk = max(0, int(upload_chunk))       # runtime/upload.py's chunk size (0: off)
        self.upload_pipeline = upload_pipeline              # runtime/upload.py: auto, on or off
        self.chunks = max(1, int(chunks))                   # parts per thread, handed out as threads come

    @classmethod
    def current(cls) -> "Copier":
        s = settings.current()
        if s.upload_pipeline not in PIPELINE_MODES:
            raise GpucError(f"GPUC_UPLOAD_PIPELINE={s.upload_pipeline!r} is not one of {', '.join(PIPELINE_MODES)}")
        return cls(threads(), split_bytes(), s.upload_chunk_bytes, s.upload_pipeline, s.copy_chunks)

    def copy_into(self, dst: np.ndarray, src) -> None:
        """dst[...] = src (src cast and broadcast as numpy assigns), in parallel parts when large.
        Returns once every part is written, also when one fails (its error is raised then)."""
        n = self.threads
        if n == 1 or dst.nbytes < self.split or dst.ndim == 0 or np.shape(src) != dst.shape or dst.size < n:
            dst[...] = src
            return
        if self.chunks > 1:
            self._shared_copy(dst, src, n)
            return
        parts = _parts(dst, np.asarray(src), n)
        if len(parts) == 1:
            _assign(parts[0])
            return
        futures = [_executor(n - 1).submit(_assign, p) for p in parts[1:]]
        error = None
        try:
            _assign(parts[0])
        except Exception as e:            # noqa: BLE001 - raised once the other parts are over
            error = e
        finish(futures, error)

    def _shared_copy(self, dst: np.ndarray, src, n: int) -> None:
        """copy_into over n threads (this one included), its parts handed out as the threads come."""
        count, part = _lazy_parts(dst, np.asarray(src), n * self.chunks, min_bytes=min(MIN_PART, self.split // n))
        if count == 1:
            _assign(part(0))
            return
        job = _Shared(count, part)
        pool = _executor(n - 1)
        futures = [pool.submit(job.work) for _ in range(min(n - 1, count - 1))]
        try:
            job.work()
            job.done.wait()                     # the parts the other threads took
        except KeyboardInterrupt:
            # a part this thread took may be left unfinished: wait for the threads instead (those not
            # started are cancelled; the started ones copy what is left), then raise
            for f in futures:
                f.cancel()
            finish(futures)
            raise
        for f in futures:
            f.cancel()                          # a thread not started yet: nothing of this copy is left to it
        if job.error is not None:
            raise job.error

    def start(self, dst: np.ndarray, src) -> list:
        """Begin dst[...] = src on the pool's threads only (split over them when large), leaving the
        caller free (runtime/upload.py submits meanwhile); returns the parts' futures, for finish().
        With one copy thread, or a copy under the split size: done here, and [] returned."""
        n = self.threads - 1
        if n < 1 or dst.nbytes < self.split or dst.ndim == 0 or np.shape(src) != dst.shape or dst.size < n:
            dst[...] = src
            return []
        pool = _executor(n)
        return [pool.submit(_assign, p) for p in _parts(dst, np.asarray(src), n)]

    def copy_out(self, src: np.ndarray) -> np.ndarray:
        """A new array holding src, copied in parallel parts when large."""
        out = np.empty(src.shape, src.dtype)
        self.copy_into(out, src)
        return out


def finish(futures: list, error: BaseException | None = None) -> None:
    """Wait until every future is over -- a KeyboardInterrupt meanwhile is held back, as a part may
    still write into memory its caller is about to reuse or free -- then raise the interrupt, `error`
    or the first part's error."""
    interrupted = None
    for f in futures:
        while True:
            try:
                e = f.exception()
                break
            except KeyboardInterrupt as k:
                interrupted = k
        error = error or e
    if interrupted is not None:
        raise interrupted
    if error is not None:
        raise error


def copy_into(dst: np.ndarray, src) -> None:
    """Copier.current().copy_into: dst[...] = src under the settings in force now."""
    Copier.current().copy_into(dst, src)


def copy_out(src: np.ndarray) -> np.ndarray:
    """Copier.current().copy_out: a new array holding src, under the settings in force now."""
    return Copier.current().copy_out(src)
