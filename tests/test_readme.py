"""The README's Python example runs as written (from a directory where ../shared/models resolves)."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_readme_example_runs(models_dir, tmp_path):
    pytest.importorskip("vulkan")
    text = (ROOT / "README.md").read_text()
    code = re.search(r"<!-- readme-example -->\s*```python\n(.*?)```", text, re.S).group(1)
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "shared").symlink_to(models_dir.parent)
    r = subprocess.run([sys.executable, "-c", code], cwd=work, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "(1, 10) float32" in r.stdout
