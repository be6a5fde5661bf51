"""The README's Python example runs as written, from a folder outside the repository."""
import pytest

from helpers.repo import require_demo_packages, run_readme_block


def test_readme_example_runs(tmp_path):
    pytest.importorskip("vulkan")
    require_demo_packages()
    r = run_readme_block("readme-example", tmp_path)
    assert r.returncode == 0, r.stderr
    assert "(1, 896, 16) (1, 896, 1) float32" in r.stdout
