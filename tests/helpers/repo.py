"""The repository around the tests: its root, the shared models, the README's examples."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def shared_models_dir() -> Path | None:
    """GPUC_SHARED_MODELS, else shared/models beside the checkout, else inside it."""
    env = os.environ.get("GPUC_SHARED_MODELS")
    for p in ([Path(env)] if env else []) + [ROOT.parent / "shared" / "models", ROOT / "shared" / "models"]:
        if (p / "manifest.json").is_file():
            return p
    return None


def run_readme_block(marker, models_dir, tmp_path):
    """Run the README's ```python block after `<!-- marker -->` where ../shared/models resolves."""
    text = (ROOT / "README.md").read_text()
    code = re.search(rf"<!-- {marker} -->\s*```python\n(.*?)```", text, re.S).group(1)
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "shared").symlink_to(models_dir.parent)
    return subprocess.run([sys.executable, "-c", code], cwd=work, capture_output=True, text=True)
