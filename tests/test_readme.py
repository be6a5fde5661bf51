"""The README's Python example runs as written (from a directory where ../shared/models resolves)."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_readme_block(marker, models_dir, tmp_path):
    """Run the README's ```python block after `<!-- marker -->` where ../shared/models resolves."""
    text = (ROOT / "README.md").read_text()
    code = re.search(rf"<!-- {marker} -->\s*```python\n(.*?)```", text, re.S).group(1)
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "shared").symlink_to(models_dir.parent)
    return subprocess.run([sys.executable, "-c", code], cwd=work, capture_output=True, text=True)


def test_readme_example_runs(models_dir, tmp_path):
    pytest.importorskip("vulkan")
    r = run_readme_block("readme-example", models_dir, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "(1, 10) float32" in r.stdout
