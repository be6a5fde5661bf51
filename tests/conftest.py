import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

# the tests' compile and pipeline caches live in a folder of their own, removed at exit: ~/.cache/gpuc
# is left as it was (a GPUC_CACHE_DIR already set, e.g. by CI to keep a warm cache, is used as given);
# set here, at import, so every gpuc subprocess the tests start inherits it
if not os.environ.get("GPUC_CACHE_DIR"):
    os.environ["GPUC_CACHE_DIR"] = tempfile.mkdtemp(prefix="gpuc-test-cache-")
    atexit.register(shutil.rmtree, os.environ["GPUC_CACHE_DIR"], True)
# every compile in the tests checks the graph between passes (compiler/passes/verify.py)
os.environ.setdefault("GPUC_VERIFY_PASSES", "1")

from helpers import cache_guard
from helpers.repo import shared_models_dir

_user_cache = cache_guard.start()          # ~/.cache/gpuc as the session found it (helpers/cache_guard.py)


def pytest_sessionfinish(session):
    cache_guard.finish(session, _user_cache)


@pytest.fixture(scope="session")
def models_dir() -> Path:
    d = shared_models_dir()
    if d is None:
        pytest.skip("shared models not found (set GPUC_SHARED_MODELS)")
    return d


@pytest.fixture(autouse=True)
def no_validation_messages():
    """With GPUC_VALIDATION=1 every validation-layer warning or error fails the test that caused it."""
    from gpuc.runtime import validation
    if not validation.enabled():
        yield
        return
    start = len(validation.MESSAGES)
    yield
    new = validation.MESSAGES[start:]
    assert not new, f"{len(new)} Vulkan validation message(s):\n" + "\n".join(new[:5])


@pytest.fixture
def compile_options():
    """compile_options(dw_plan=..., split_k=...): CompileOptions fields in force for the rest of the
    test (gpuc.compiler.options.using; compiles inside it carry them, in their cache key too)."""
    from gpuc.compiler import options
    entered = []

    def set_(**fields):
        u = options.using(options.current().replace(**fields))
        u.__enter__()
        entered.append(u)
    yield set_
    while entered:
        entered.pop().__exit__(None, None, None)


@pytest.fixture(scope="session")
def gpu():
    """One Vulkan device for every op test module (helpers/runner.py: GpuRunner)."""
    pytest.importorskip("vulkan")
    from helpers.runner import GpuRunner
    r = GpuRunner()
    yield r
    r.close()
