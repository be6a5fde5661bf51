"""The CLI's array files: `--input` of run / verify / profile, and `--output` of run.

--input, repeatable, one of:
  PATH.npy            one input, in model order
  NAME=PATH.npy       one input by name (every --input then by name)
  PATH.npz            every input, alone: keys are the model's input names, or arr_0, arr_1, ... in
                      model order (what np.savez writes for arrays given without names)
  a generated tensor  1x224x224x3xf32=0, NAME=zeros / ones / random, ... (gpuc/generated_inputs.py;
                      callers make them with generated_inputs.resolve once the model's inputs are known)
The arrays are returned in model order or as a dict name -> array; the run matches them to the model
(runtime/iospec.py ordered: unknown and missing names are refused, naming the model's inputs) and
checks their dtypes as strictly as LiteRT (runtime/casting.py; `--cast` converts values that fit).

--output: `.npz` (every output, keyed by output name) or `.npy` (a model with one output).  Its folder
is created, and everything that can be checked is checked, before the run starts (output_plan).
"""
from __future__ import annotations

import os
import re
import tempfile
import zipfile

import numpy as np

from gpuc import generated_inputs
from gpuc.errors import GpucError

_POSITIONAL_KEY = re.compile(r"arr_(\d+)")
_READ_ERRORS = (OSError, ValueError, EOFError, zipfile.BadZipFile)


def _load(path: str, what: str):
    """np.load of `path` (no pickles): an array, or {key: array} for an .npz archive."""
    try:
        with open(path, "rb") as f:
            magic = f.read(6)
        if magic != b"\x93NUMPY" and not magic.startswith(b"PK"):
            raise ValueError("it is neither (no .npy or .npz header)")
        a = np.load(path, allow_pickle=False)
        if not hasattr(a, "files"):
            return a
        with a:                                              # an NpzFile: read every array now
            return {k: a[k] for k in a.files}
    except _READ_ERRORS as e:
        raise GpucError(f"{what}: cannot read {path!r} as .npy or .npz: {e}") from None


def read_inputs(args, names=()):
    """The arrays of the --input arguments `args`: a list in model order, or a dict name -> array.
    `names`: the model's input names where known (an argument NAME=PATH is by name when NAME is one
    of them, or when no file is named by the whole argument)."""
    names = list(names)
    by_name, ordered = {}, []
    for arg in args:
        gen = None if os.path.exists(str(arg)) else generated_inputs.parse(arg)   # zeros, 1x4xf32=0 ...
        if gen is not None:
            if gen[0] is None:
                ordered.append(gen[1])
            elif gen[0] in by_name:
                raise GpucError(f"input {gen[0]!r} given twice (--input {gen[0]}=...)")
            else:
                by_name[gen[0]] = gen[1]
            continue
        name, sep, path = str(arg).partition("=")
        if sep and (name in names or not os.path.exists(arg)):
            if name in by_name:
                raise GpucError(f"input {name!r} given twice (--input {name}=...)")
            by_name[name] = path
        else:
            ordered.append(str(arg))
    if ordered and by_name:
        raise GpucError("give inputs either all in model order or all as NAME=path")
    if by_name:
        out = {}
        for n, p in by_name.items():
            a = p if isinstance(p, generated_inputs.Generated) else _load(p, f"input {n!r}")
            if isinstance(a, dict):
                raise GpucError(f"input {n!r}: {p!r} is an .npz archive; give it alone as --input {p} "
                                "(its keys: input names, or arr_0.. in model order)")
            out[n] = a
        return out
    arrays = [p if isinstance(p, generated_inputs.Generated) else _load(p, f"--input #{i}")
              for i, p in enumerate(ordered)]
    archives = [p for p, a in zip(ordered, arrays) if isinstance(a, dict)]
    if not archives:
        return arrays
    if len(arrays) > 1:
        raise GpucError(f"{archives[0]!r} is an .npz archive holding every input: give it as the only --input")
    return _archive_inputs(ordered[0], arrays[0], names)


def _archive_inputs(path, z: dict, names):
    """An .npz's arrays: by input name, or (keys arr_0, arr_1, ... that are not input names) in model order."""
    if not z:
        raise GpucError(f"--input {path!r}: the .npz archive holds no arrays")
    keys = list(z)
    positional = [_POSITIONAL_KEY.fullmatch(k) for k in keys]
    if all(positional) and not any(k in names for k in keys):
        order = sorted(int(m.group(1)) for m in positional)
        if order != list(range(len(order))):
            raise GpucError(f"--input {path!r}: keys {sorted(keys)} are not arr_0 .. arr_{len(keys) - 1} "
                            "(arrays in model order, as np.savez names them)")
        return [z[f"arr_{i}"] for i in range(len(keys))]
    if names:
        unknown = [k for k in keys if k not in names]
        missing = [n for n in names if n not in z]
        if unknown or missing:
            what = "; ".join(x for x in (f"unknown key(s) {unknown}" if unknown else "",
                                         f"missing input(s) {missing}" if missing else "") if x)
            raise GpucError(f"--input {path!r}: {what}; the model's inputs are {names} (keys: input names, "
                            "or arr_0.. in model order)")
    return dict(z)


class OutputPlan:
    """Where and how `gpuc run` saves its outputs, checked before the run (see output_plan)."""

    def __init__(self, path: str):
        self.path = path
        self.ext = os.path.splitext(path)[1].lower()
        self.folder = os.path.dirname(os.path.abspath(path))

    def check_count(self, n_outputs: int) -> None:
        if self.ext == ".npy" and n_outputs != 1:
            raise GpucError(f"--output {self.path!r}: an .npy file holds one array and the model has "
                            f"{n_outputs} outputs; name an .npz to save them all")

    def write(self, names, arrays) -> None:
        """Write atomically: a temporary file in the same folder, renamed over the destination."""
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".gpuc-output-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                if self.ext == ".npy":
                    np.save(f, arrays[0])
                else:
                    keys = list(dict.fromkeys(names))
                    if len(keys) != len(names):
                        keys = [f"{n}:{i}" for i, n in enumerate(names)]
                    np.savez(f, **dict(zip(keys, arrays)))
            os.chmod(tmp, 0o666 & ~_umask())
            os.replace(tmp, self.path)
        except OSError as e:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise GpucError(f"--output {self.path!r}: cannot write it: {e}") from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def output_plan(path: str | None) -> OutputPlan | None:
    """--output `path` checked and its folder created: .npz or .npy, not a folder, in a folder that
    exists (made here) and is writable.  None for no --output."""
    if not path:
        return None
    plan = OutputPlan(str(path))
    if plan.ext not in (".npz", ".npy"):
        raise GpucError(f"--output {plan.path!r}: name an .npz (every output, by name) or an .npy "
                        "(a model with one output)")
    if os.path.isdir(plan.path):
        raise GpucError(f"--output {plan.path!r} is a folder; name a file in it")
    blocker = next((p for p in _ancestors(plan.folder) if os.path.exists(p) and not os.path.isdir(p)), None)
    if blocker:
        raise GpucError(f"--output {plan.path!r}: cannot create its folder {plan.folder!r}: {blocker!r} is a file")
    try:
        os.makedirs(plan.folder, exist_ok=True)
    except OSError as e:
        raise GpucError(f"--output {plan.path!r}: cannot create its folder {plan.folder!r}: "
                        f"{e.strerror or e}") from None
    if not os.access(plan.folder, os.W_OK | os.X_OK):
        raise GpucError(f"--output {plan.path!r}: its folder {plan.folder!r} is not writable")
    return plan


def _ancestors(folder: str):
    """`folder` and the folders above it, nearest first."""
    while True:
        yield folder
        up = os.path.dirname(folder)
        if up == folder:
            return
        folder = up
