"""Build gpuc's two wheels from this repository into --out (default dist/):

  gpuc          compiler and runtime (pyproject.toml at the root): `pip install gpuc`
  gpuc-runtime  the runtime alone (packaging/gpuc-runtime/pyproject.toml): loads and runs bundles,
                no compiler and no glslang

Each is built with `pip wheel --no-deps` from a staged copy of the files it packages, so the work
tree gets no build/ or *.egg-info, and links in it (a developer's gpuc/compiler -> compiler) are left
out.  Prints the wheels' paths, one a line.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNTIME_DIST = ROOT / "packaging" / "gpuc-runtime"

# what each distribution is built from: (source in the repository, path in the staged project)
SOURCES = {
    "gpuc": [("pyproject.toml", "pyproject.toml"), ("README.md", "README.md"), ("gpuc", "gpuc"),
             ("compiler", "compiler"), ("runtime", "runtime"), ("shaders", "shaders")],
    "gpuc-runtime": [(str(RUNTIME_DIST.relative_to(ROOT) / "pyproject.toml"), "pyproject.toml"),
                     (str(RUNTIME_DIST.relative_to(ROOT) / "README.md"), "README.md"),
                     ("gpuc", "gpuc"), ("runtime", "runtime")],
}


def _ignore(folder, names):
    """No caches, and no links (gpuc/compiler etc. in a developer's tree)."""
    return [n for n in names if n == "__pycache__" or n.endswith(".pyc") or (Path(folder) / n).is_symlink()]


def stage(dist: str, into: Path) -> Path:
    into.mkdir(parents=True)
    for src, dst in SOURCES[dist]:
        s = ROOT / src
        if s.is_dir():
            shutil.copytree(s, into / dst, ignore=_ignore)
        else:
            shutil.copy2(s, into / dst)
    return into


def build(out: Path, dists=("gpuc", "gpuc-runtime")) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    wheels = []
    with tempfile.TemporaryDirectory(prefix="gpuc-wheels-") as tmp:
        for dist in dists:
            project = stage(dist, Path(tmp) / dist)
            built = Path(tmp) / f"{dist}-out"
            r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(built), str(project)],
                               capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"building the {dist} wheel failed:\n{r.stdout}{r.stderr}")
            (whl,) = built.glob("*.whl")
            target = out / whl.name
            shutil.copy2(whl, target)
            wheels.append(target)
    return wheels


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "dist")
    ap.add_argument("--only", choices=sorted(SOURCES), help="build just this distribution")
    a = ap.parse_args()
    for whl in build(a.out.resolve(), [a.only] if a.only else list(SOURCES)):
        print(whl)


if __name__ == "__main__":
    main()
