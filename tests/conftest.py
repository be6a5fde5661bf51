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
