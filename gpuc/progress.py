"""Progress of long work: the stages of a compile, the shaders it compiles, the runs of bench and
verify.  The work reports through `stage` and `counter`, which do nothing unless a caller turned a
reporter on with `reporting(...)`: the CLI does, on a terminal only (`terminal()`), so library
calls, pipes and --json output see nothing.  Importing this module imports nothing else (the
launcher's fast path stays lean); click is imported by `terminal()`.
"""
from __future__ import annotations

import sys
from contextlib import contextmanager

_current = None            # the active reporter (None: off)


class _Null:
    def advance(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def active() -> bool:
    """True while a reporter is on (the work may then show more, e.g. a subprocess's own bar)."""
    return _current is not None


def stage(label: str) -> None:
    """A stage of the work starts (it ends where the next one starts, or the work ends)."""
    if _current is not None:
        _current.stage(label)


def counter(label: str, total: int):
    """A stage of `total` steps: a context manager whose advance(n=1) counts them."""
    if _current is None or total <= 0:
        return _Null()
    return _current.counter(label, total)


@contextmanager
def reporting(reporter):
    """Report to `reporter` (None: nothing) within the block."""
    global _current
    previous, _current = _current, reporter
    try:
        yield reporter
    finally:
        _current = previous
        if reporter is not None:
            reporter.close()


def wanted(stream=None) -> bool:
    """True when `stream` (default stderr) is a terminal: progress is shown there only."""
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):            # no stream, or a closed one
        return False


class Terminal:
    """Stages as lines and counted stages as click progress bars, on stderr."""

    def __init__(self, file=None):
        import click
        self._click = click
        self.file = sys.stderr if file is None else file
        self._bar = None

    def stage(self, label: str) -> None:
        self._end_bar()
        self._click.echo(f"{label}...", file=self.file)

    def counter(self, label: str, total: int):
        self._end_bar()
        bar = self._click.progressbar(length=total, label=label, file=self.file, show_pos=True, show_eta=False,
                                      width=24)
        bar.__enter__()                   # shows 0 of N at once: the first step may take a while
        self._bar = bar
        return _Counted(self, bar)

    def _end_bar(self) -> None:
        if self._bar is not None:
            bar, self._bar = self._bar, None
            bar.__exit__(None, None, None)

    def close(self) -> None:
        self._end_bar()


class _Counted:
    def __init__(self, owner: Terminal, bar):
        self._owner, self._bar = owner, bar

    def advance(self, n: int = 1) -> None:
        self._bar.update(n)

    def close(self) -> None:
        if self._owner._bar is self._bar:
            self._owner._end_bar()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def terminal(enabled: bool = True):
    """A Terminal reporter where stderr is a terminal and `enabled`, else None (for `reporting`)."""
    return Terminal() if enabled and wanted() else None
