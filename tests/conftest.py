import os
from pathlib import Path

import pytest


def shared_models_dir() -> Path | None:
    env = os.environ.get("GPUC_SHARED_MODELS")
    for p in ([Path(env)] if env else []) + [Path(__file__).resolve().parents[2] / "shared" / "models",
                                            Path(__file__).resolve().parents[1] / "shared" / "models"]:
        if (p / "manifest.json").is_file():
            return p
    return None


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


@pytest.fixture(scope="session")
def gpu():
    """One Vulkan device for every op test module (tests/test_ops.py: GpuRunner)."""
    pytest.importorskip("vulkan")
    from test_ops import GpuRunner
    r = GpuRunner()
    yield r
    r.close()
