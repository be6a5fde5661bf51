"""A run's outputs: `Outputs`, a list in model order that also answers by output name (LiteRT's
signature runners return a dict by name; gpuc's run returned a list), and `NamedHandle`, the
run_async handle whose wait() returns them."""
from __future__ import annotations

from gpuc.errors import GpucError


class Outputs(list):
    """The outputs of one run: a list in model order (`out[0]`, unpacking, `len`) that also works
    as a read-only mapping by output name: `out["logits"]`, `out.get(name)`, `name in out`,
    `out.keys()` / `values()` / `items()`, and `dict(out)` or `out.as_dict()` for a plain dict."""

    def __init__(self, values=(), names=()):
        super().__init__(values)
        self._names = tuple(names)
        if len(self._names) != len(self):
            raise GpucError(f"{len(self)} output values for {len(self._names)} output names")

    @property
    def names(self) -> tuple:
        """The output names, in model order."""
        return self._names

    def _index(self, name: str) -> int:
        try:
            return self._names.index(name)
        except ValueError:
            raise KeyError(f"no output named {name!r}; the model's outputs are {list(self._names)}") from None

    def __getitem__(self, key):
        if isinstance(key, str):
            return super().__getitem__(self._index(key))
        return super().__getitem__(key)

    def __contains__(self, key) -> bool:
        if isinstance(key, str):
            return key in self._names
        return super().__contains__(key)

    def get(self, name: str, default=None):
        """The output named `name`, or `default` when there is none."""
        return self[name] if name in self._names else default

    def keys(self) -> list:
        """The output names in model order (so `dict(out)` maps name -> value)."""
        return list(self._names)

    def values(self) -> list:
        """The output values in model order."""
        return list(self)

    def items(self) -> list:
        """(name, value) pairs in model order."""
        return list(zip(self._names, self))

    def as_dict(self) -> dict:
        """A plain dict name -> value, in model order."""
        return dict(self.items())


class NamedHandle:
    """A run_async handle whose wait() returns the run's outputs as `Outputs` (done() and the rest
    are the underlying handle's)."""

    def __init__(self, handle, names):
        self._handle, self._names, self._outs = handle, tuple(names), None

    def wait(self, mode: str = "passive") -> Outputs:
        """Block until the run is over and return its outputs (the same object on every call)."""
        outs = self._handle.wait(mode)
        if self._outs is None or not _same(self._outs, outs):
            self._outs = Outputs(outs, self._names)
        return self._outs

    def __getattr__(self, name):
        return getattr(self._handle, name)


def _same(named: Outputs, outs) -> bool:
    return len(named) == len(outs) and all(a is b for a, b in zip(named, outs))
