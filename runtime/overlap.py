"""Load-time work run beside the caller: the driver's device open while the bundle is parsed, the
weight upload while pipelines are created, pipeline creation split over threads.

The `vulkan` binding (cffi) releases the GIL inside every driver call, so a driver call in one
thread overlaps Python work or another driver call in the next.  GPUC_LOAD_THREADS=0 runs all of it
inline, in order (for debugging, or to measure what the overlap buys).
"""
from __future__ import annotations

import os
import threading

from gpuc.runtime import settings


def enabled() -> bool:
    return settings.current().load_threads


_RUNNING: set = set()          # jobs still in their thread (finish_all waits for them at exit)


def finish_all() -> None:
    """Wait for every job still running (the runtime calls it at exit, before closing devices: a
    daemon thread must not be killed inside a driver call, e.g. a prewarm's vkCreateDevice)."""
    for job in list(_RUNNING):
        try:
            job.finish()
        except KeyboardInterrupt:
            pass


class Background:
    """fn(*args) in a daemon thread (inline when threads are off); result() joins and re-raises."""

    def __init__(self, fn, *args, name: str = "gpuc-load"):
        self._result, self._error, self._thread = None, None, None
        if enabled():
            self._thread = threading.Thread(target=self._run, args=(fn, args), name=name, daemon=True)
            self._thread.start()
        else:
            self._run(fn, args)

    def _run(self, fn, args):
        _RUNNING.add(self)
        try:
            self._result = fn(*args)
        except BaseException as e:          # noqa: BLE001 - handed to the caller in result()
            self._error = e
        finally:
            _RUNNING.discard(self)

    def result(self):
        self.finish()
        if self._error is not None:
            raise self._error
        return self._result

    def finish(self) -> None:
        """Wait until the work is over, whatever happens meanwhile: a KeyboardInterrupt during the
        wait is held back and re-raised once the thread is done, so no caller ever frees what a
        still-running driver call uses."""
        interrupted = None
        while self._thread is not None and self._thread.is_alive():
            try:
                self._thread.join()
            except KeyboardInterrupt as e:
                interrupted = e
        if interrupted is not None:
            raise interrupted

    def error(self) -> BaseException | None:
        """finish(), then the work's exception (None when it succeeded) without raising it."""
        self.finish()
        return self._error


def threads_for(n_items: int) -> int:
    """How many threads to split `n_items` driver calls over: GPUC_PIPELINE_THREADS, else the CPU
    count (at most 8), never more than the items; 1 when threads are off."""
    if not enabled() or n_items <= 1:
        return 1
    want = settings.current().pipeline_threads
    if want <= 0:
        want = min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
    return max(1, min(want, n_items))
