"""Guards on symbolic sizes (compiler/symbolic.py): every decision a compile took at the bound of its
dynamic dims is checked at every size 1..MAX (`check_guards`), and two size expressions can be compared
over every size (`same_everywhere`)."""
from __future__ import annotations

import numpy as np

from gpuc.compiler.sym_scope import Context, context, pretty
from gpuc.compiler.symbolic import Sym, evaluate
from gpuc.errors import UnsupportedError


class GuardFailed(UnsupportedError):
    """A decision taken at the bound would differ at some size (check_guards)."""


def _envs(hints, full_limit: int = 1 << 20) -> list:
    """Size grids to check over: the cross product of 1..MAX of every variable when it has at most
    `full_limit` points, else each variable alone with the others at their bounds."""
    total = int(np.prod(list(hints), dtype=np.int64))
    if total <= full_limit:
        grids = np.meshgrid(*[np.arange(1, h + 1, dtype=np.int64) for h in hints], indexing="ij")
        return [[g.reshape(-1) for g in grids]]
    envs = []
    for k in range(len(hints)):
        env = [np.full(hints[k], h, np.int64) for h in hints]
        env[k] = np.arange(1, hints[k] + 1, dtype=np.int64)
        envs.append(env)
    return envs


def same_everywhere(a, b) -> bool:
    """Whether two size expressions agree at every size (see _envs): e.g. two ways of halving twice."""
    d = a - b
    if not isinstance(d, Sym):
        return d == 0
    c = context()
    if c is None:
        return False
    with np.errstate(all="ignore"):
        return all(not np.any(np.asarray(evaluate(d, env))) for env in _envs(c.hints))


def check_guards(ctx: Context, full_limit: int = 1 << 20, first: int = 0) -> None:
    """Every recorded decision must come out the same at every size 1..MAX of every variable (the cross
    product when it has at most `full_limit` points, else each variable alone with the others at their
    hints); else the compile is refused, naming the op whose decision depends on the size."""
    n = len(ctx.hints)
    if not n or not ctx.guards:
        return
    envs = _envs(ctx.hints, full_limit)
    fns = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal, "==": np.equal,
           "!=": np.not_equal}
    seen = set()
    for expr, op, outcome, where in ctx.guards[first:]:
        key = (expr._frozen, op, outcome)         # (not the Sym: comparing Syms would record guards)
        if key in seen:
            continue
        seen.add(key)
        for env in envs:
            with np.errstate(all="ignore"):
                got = fns[op](np.asarray(evaluate(expr, env)) + np.zeros_like(env[0]), 0)
            bad = np.nonzero(got != outcome)[0]
            if bad.size:
                at = ", ".join(f"{ctx.names[k]}={int(env[k][bad[0]])}" for k in range(n))
                raise GuardFailed(pretty(f"--dynamic: {where or 'the program'} decides on {expr} {op} 0 "
                                       f"({outcome} at the bound) but that differs at {at}: one program "
                                       "cannot serve every size (compile for fixed sizes with --input-shape)"))
