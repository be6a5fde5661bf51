"""The tests leave the user's own gpuc cache (~/.cache/gpuc, where gpuc writes without
GPUC_CACHE_DIR) as it was: they use a temporary GPUC_CACHE_DIR (conftest.py).  conftest.py snapshots
that folder (each file's size and mtime) when the session starts and compares at its end.  A change
is reported on the terminal; with GPUC_TEST_CACHE_GUARD=1 (make test sets it) it fails the session.
Plain pytest runs only report it: on a shared machine other gpuc processes may write there meanwhile."""
from __future__ import annotations

import os


def user_cache_root() -> str:
    """Where gpuc caches without GPUC_CACHE_DIR (runtime/cachedir.py cache_root)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gpuc")


def snapshot(root: str) -> dict:
    """{path: (size, mtime_ns)} of every file under root ({} when there is no such folder)."""
    files = {}
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            try:
                st = os.stat(p)
            except OSError:                 # removed meanwhile
                continue
            files[p] = (st.st_size, st.st_mtime_ns)
    return files


def changed(before: dict, after: dict) -> list:
    """Paths added, removed or modified between two snapshots."""
    return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))


def start():
    """The session's starting state (None in an xdist worker: the controller checks for all)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return None
    root = user_cache_root()
    return root, snapshot(root)


def finish(session, state) -> None:
    """Report (and under GPUC_TEST_CACHE_GUARD=1 fail the session on) a change of the user's cache."""
    if state is None:
        return
    root, before = state
    paths = changed(before, snapshot(root))
    if not paths:
        return
    msg = (f"gpuc cache guard: the test session changed {len(paths)} file(s) of {root}, which tests must "
           f"leave alone (they use their own GPUC_CACHE_DIR): {', '.join(paths[:5])}")
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(msg, red=True)
    if os.environ.get("GPUC_TEST_CACHE_GUARD") == "1":
        session.exitstatus = 1              # pytest.ExitCode.TESTS_FAILED
