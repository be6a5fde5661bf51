"""The README's Python example runs as written (from a directory where ../shared/models resolves)."""
import pytest

from helpers.repo import run_readme_block


def test_readme_example_runs(models_dir, tmp_path):
    pytest.importorskip("vulkan")
    r = run_readme_block("readme-example", models_dir, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "(1, 10) float32" in r.stdout
