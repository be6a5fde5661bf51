"""The compile-wide scope of symbolic sizes (compiler/symbolic.py): which dim variables one compile has
(their names and hints, the bounds MAX), the guards recorded on them and the op being compiled, per
thread; and the contexts that change how comparisons of size expressions are decided inside them
(`hinted`: at the hint, no guard, for speed-only choices; `structural`: equal only when identical)."""
from __future__ import annotations

import contextlib
import re
import threading
from dataclasses import dataclass, field


@dataclass
class Context:
    """The dim variables of one compile and what was decided on them."""
    names: list = field(default_factory=list)      # variable k's description ("tokens:1")
    hints: list = field(default_factory=list)      # variable k's hint (its bound MAX)
    guards: list = field(default_factory=list)     # (Sym, op name, outcome, site)
    site: str = ""                                 # the op (or pass) being compiled, for messages
    quiet: int = 0                                 # > 0 inside hinted(): no guards
    exact: int = 0                                 # > 0 inside structural(): == only when identical
    skipped: list = field(default_factory=list)    # passes skipped: they needed a fixed size


_TLS = threading.local()        # the compile's Context, per thread (compiles in threads never share one)


def context() -> Context | None:
    return getattr(_TLS, "ctx", None)


@contextlib.contextmanager
def session(names, hints):
    """Dim variables d0.. named `names` with `hints` for the duration (one compile)."""
    old = context()
    _TLS.ctx = Context(list(names), list(hints))
    try:
        yield _TLS.ctx
    finally:
        _TLS.ctx = old


def begin(names, hints) -> Context:
    """Open a compile's dim variables (until end(); compile_bytes brackets a whole compile)."""
    _TLS.ctx = Context(list(names), list(hints))
    return _TLS.ctx


def end() -> None:
    _TLS.ctx = None


def current() -> Context | None:
    return context()


def active() -> bool:
    return context() is not None


@contextlib.contextmanager
def site(label: str):
    """Name the op being compiled in guards and errors."""
    c = context()
    if c is None:
        yield
        return
    old, c.site = c.site, label
    try:
        yield
    finally:
        c.site = old


@contextlib.contextmanager
def structural():
    """Equality tests inside are True only for identical expressions (no guard): for decisions where
    "not equal" is always safe (merging dims of equal strides, a contiguous fast path)."""
    c = context()
    if c is None:
        yield
        return
    c.exact += 1
    try:
        yield
    finally:
        c.exact -= 1


@contextlib.contextmanager
def hinted():
    """Comparisons inside decide at the hint without a guard: for choices that only affect speed."""
    c = context()
    if c is None:
        yield
        return
    c.quiet += 1
    try:
        yield
    finally:
        c.quiet -= 1


def hints() -> list:
    return list(context().hints) if context() is not None else []


def pretty(text: str) -> str:
    """A message with the variables gpuc_dK named as the user did (tokens:1)."""
    names = context().names if context() is not None else []
    return re.sub(r"gpuc_d(\d+)", lambda m: f"[{names[int(m.group(1))]}]" if int(m.group(1)) < len(names)
                  else m.group(0), text)
