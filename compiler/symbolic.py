"""Symbolic sizes for bounded dynamic dims (issue 16, build 2: `--dynamic NAME:AXIS<=MAX` off the batch axis).

A `Sym` is an integer expression over dim variables d0, d1, ... (one per dynamic (input, axis)), kept in
a canonical form: a polynomial (monomial -> integer coefficient) whose factors are variables or opaque
atoms (floor division, modulo, max, min of two expressions).  Arithmetic with ints and Syms builds
expressions, and an expression that turns out constant is a plain int again (T - T is 0).  Shapes of
the IR carry Syms where they depend on a dynamic size; lowerings then compute their defines with the
same arithmetic, so a define such as a MEAN's count or an LSTM's step count is the run's value.

Every variable has a *hint*, its bound MAX (the arena is planned for it).  A comparison or truth test
of a non-constant expression is decided at the hint and recorded as a *guard* (the expression, the
outcome and the site: the op being compiled); compiler/guards.py `check_guards` then evaluates every guard at every size
1..MAX and refuses the compile, naming the site, where the decision would differ.  Decisions that only
affect speed (tile plans, one workgroup per row or not) run inside `hinted()`, which records none.

Anything that needs a plain number (`int()`, `range()`, numpy's int64) from a non-constant expression
raises `SymbolicSize`, an UnsupportedError: the op cannot take a size known only at run time, and the
compile says so rather than silently specialize at the hint.

The runtime never imports this module: `tree()` writes an expression as a small JSON tree that
runtime/dynamic.py evaluates; `glsl()` writes it over the push-constant block codegen emits.
"""
from __future__ import annotations

import operator

import numpy as np

from gpuc.compiler.glsl_literal import literal
from gpuc.compiler.sym_scope import context, hints, pretty
from gpuc.errors import UnsupportedError


class SymbolicSize(UnsupportedError):
    """A size known only at run time reached code that needs a fixed number."""


# --- the expression type ---------------------------------------------------------------------------

def _key(x):
    return repr(x)


def _mono(*atoms) -> tuple:
    return tuple(sorted(atoms, key=_key))


class Sym:
    """An integer polynomial over dim variables and opaque atoms (see the module doc)."""
    __slots__ = ("terms", "_frozen")

    def __init__(self, terms: dict):
        self.terms = {m: c for m, c in terms.items() if c}
        self._frozen = tuple(sorted(self.terms.items(), key=_key))

    # construction
    @staticmethod
    def make(terms: dict):
        s = Sym(terms)
        if not s.terms:
            return 0
        if list(s.terms) == [()]:
            return s.terms[()]
        return s

    @staticmethod
    def of(v):
        if isinstance(v, Sym):
            return v
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"not an integer: {v!r}")
        return Sym({(): int(v)})

    # arithmetic
    def __add__(self, o):
        if not isinstance(o, (Sym, int, np.integer)):
            return NotImplemented
        t = dict(self.terms)
        for m, c in Sym.of(o).terms.items():
            t[m] = t.get(m, 0) + c
        return Sym.make(t)

    __radd__ = __add__

    def __neg__(self):
        return Sym.make({m: -c for m, c in self.terms.items()})

    def __pos__(self):
        return self

    def __sub__(self, o):
        if not isinstance(o, (Sym, int, np.integer)):
            return NotImplemented
        return self + (-Sym.of(o))

    def __rsub__(self, o):
        if not isinstance(o, (Sym, int, np.integer)):
            return NotImplemented
        return Sym.of(o) + (-self)

    def __mul__(self, o):
        if isinstance(o, (float, np.floating)):
            return FExpr("*", FExpr.of(self), FExpr.of(o))
        if not isinstance(o, (Sym, int, np.integer)):
            return NotImplemented
        t: dict = {}
        for m1, c1 in self.terms.items():
            for m2, c2 in Sym.of(o).terms.items():
                m = _mono(*m1, *m2)
                t[m] = t.get(m, 0) + c1 * c2
        return Sym.make(t)

    __rmul__ = __mul__

    def __floordiv__(self, o):
        if not isinstance(o, (Sym, int, np.integer)):
            return NotImplemented
        if isinstance(o, (int, np.integer)):
            o = int(o)
            if o == 0:
                raise ZeroDivisionError("integer division by zero")
            if o == 1:
                return self
            if all(c % o == 0 for c in self.terms.values()):
                return Sym.make({m: c // o for m, c in self.terms.items()})
        q = self._exact(o)
        if q is not None:
            return q
        return Sym.make({(("//", self._frozen, Sym.of(o)._frozen),): 1})

    def _exact(self, o):
        """self / o when o is one monomial dividing every term exactly (T*T // T is T), else None."""
        if not isinstance(o, Sym) or len(o.terms) != 1:
            return None
        (m2, c2), = o.terms.items()
        if c2 <= 0:
            return None
        out = {}
        for m, c in self.terms.items():
            rest = list(m)
            for a in m2:
                if a not in rest:
                    return None
                rest.remove(a)
            if c % c2:
                return None
            out[_mono(*rest)] = out.get(_mono(*rest), 0) + c // c2
        return Sym.make(out)

    def __rfloordiv__(self, o):
        if not isinstance(o, (Sym, int, np.integer)):
            return NotImplemented
        return Sym.of(o) // self

    def __mod__(self, o):
        if not isinstance(o, (Sym, int, np.integer)):
            return NotImplemented
        if isinstance(o, (int, np.integer)):
            o = int(o)
            if o == 1 or all(c % o == 0 for c in self.terms.values()):
                return 0
        elif self._exact(o) is not None:
            return 0
        return Sym.make({(("%", self._frozen, Sym.of(o)._frozen),): 1})

    def __rmod__(self, o):
        if not isinstance(o, (Sym, int, np.integer)):
            return NotImplemented
        return Sym.of(o) % self

    def __truediv__(self, o):
        return FExpr("/", FExpr.of(self), FExpr.of(o))

    def __rtruediv__(self, o):
        return FExpr("/", FExpr.of(o), FExpr.of(self))

    # comparisons: decided at the hint, recorded as guards
    def _decide(self, o, name, fn):
        d = self - o
        if not isinstance(d, Sym):
            return fn(d, 0)
        c = context()
        if c is not None and c.exact and name in ("==", "!="):
            return name == "!="                 # (not identical: unequal, see structural())
        if isinstance(o, (int, np.integer)) and o == 1:
            # "is this dim 1?": a dynamic size is never taken as 1 (never a broadcast, never a degenerate
            # dim dropped), with no guard - compiler/dynamic.py refuses every broadcast of a dynamic dim
            # against a fixed one, so the general program is right at size 1 too
            return bool(fn(2, 1))
        out = bool(fn(evaluate(d, hints()), 0))
        c = context()
        if c is not None and not c.quiet:
            c.guards.append((d, name, out, c.site))
        return out

    def __lt__(self, o):
        return self._decide(o, "<", operator.lt) if isinstance(o, (Sym, int, np.integer)) else NotImplemented

    def __le__(self, o):
        return self._decide(o, "<=", operator.le) if isinstance(o, (Sym, int, np.integer)) else NotImplemented

    def __gt__(self, o):
        return self._decide(o, ">", operator.gt) if isinstance(o, (Sym, int, np.integer)) else NotImplemented

    def __ge__(self, o):
        return self._decide(o, ">=", operator.ge) if isinstance(o, (Sym, int, np.integer)) else NotImplemented

    def __eq__(self, o):
        if not isinstance(o, (Sym, int, np.integer)) or isinstance(o, (bool, np.bool_)):
            return False
        return self._decide(o, "==", operator.eq)

    def __ne__(self, o):
        if not isinstance(o, (Sym, int, np.integer)) or isinstance(o, (bool, np.bool_)):
            return True
        return self._decide(o, "!=", operator.ne)

    def __bool__(self):
        return self._decide(0, "!=", operator.ne)

    def __hash__(self):
        return hash(self._frozen)

    # no silent specialization
    def _fixed(self, what):
        where = f"{context().site}: " if context() is not None and context().site else ""
        raise SymbolicSize(pretty(f"{where}needs a fixed {what} but {self} depends on a dynamic dim "
                                  f"(known only at run time)"))

    def __index__(self):
        self._fixed("integer")

    def __int__(self):
        self._fixed("integer")

    def __float__(self):
        self._fixed("number")

    def __repr__(self):
        return _show(self)

    __str__ = __repr__

    def __format__(self, spec):
        return str(self)

    def __deepcopy__(self, memo):
        return self

    def __copy__(self):
        return self

    def __reduce__(self):
        return (Sym, (self.terms,))


def var(k: int) -> Sym:
    return Sym({(("d", k),): 1})


def dim(v):
    """int(v), or v itself where it is a dynamic size."""
    return v if isinstance(v, Sym) else int(v)


def is_sym(v) -> bool:
    return isinstance(v, (Sym, FExpr))


def ceil_div(a, b):
    return -((-a) // b)


def smax(a, b):
    """max(a, b) as an expression (no guard)."""
    if not is_sym(a) and not is_sym(b):
        return max(a, b)
    d = a - b
    if not isinstance(d, Sym):
        return a if d >= 0 else b
    return Sym.make({(("max", Sym.of(a)._frozen, Sym.of(b)._frozen),): 1})


def smin(a, b):
    if not is_sym(a) and not is_sym(b):
        return min(a, b)
    d = a - b
    if not isinstance(d, Sym):
        return a if d <= 0 else b
    return Sym.make({(("min", Sym.of(a)._frozen, Sym.of(b)._frozen),): 1})


def prod(values, start=1):
    """The product of ints and Syms (a Sym where any factor is one)."""
    out = start
    for v in values:
        out = out * v
    return out


def hint(v):
    """v at the hints (an int for an int or a Sym): capacities (the arena is planned for MAX)."""
    if isinstance(v, Sym):
        return int(evaluate(v, hints()))
    if isinstance(v, (list, tuple)):
        return type(v)(hint(x) for x in v)
    return v


def variables(v) -> set:
    """The dim variables v depends on."""
    out = set()

    def walk(frozen):
        for m, _ in frozen:
            for a in m:
                if a[0] == "d":
                    out.add(a[1])
                else:
                    walk(a[1])
                    walk(a[2])
    if isinstance(v, Sym):
        walk(v._frozen)
    elif isinstance(v, FExpr):
        for a in v.args:
            out |= variables(a)
    return out


# --- evaluation, GLSL, the runtime's tree -------------------------------------------------------------

def _atom_eval(a, env):
    if a[0] == "d":
        return env[a[1]]
    x, y = _frozen_eval(a[1], env), _frozen_eval(a[2], env)
    if a[0] == "//":
        return x // y
    if a[0] == "%":
        return x % y
    if a[0] == "max":
        return np.maximum(x, y) if isinstance(x, np.ndarray) or isinstance(y, np.ndarray) else max(x, y)
    return np.minimum(x, y) if isinstance(x, np.ndarray) or isinstance(y, np.ndarray) else min(x, y)


def _frozen_eval(frozen, env):
    total = 0
    for m, c in frozen:
        v = c
        for a in m:
            v = v * _atom_eval(a, env)
        total = total + v
    return total


def evaluate(v, env):
    """v with variable k = env[k] (ints, or numpy int64 arrays for many sizes at once)."""
    if isinstance(v, Sym):
        return _frozen_eval(v._frozen, env)
    if isinstance(v, FExpr):
        return v.evaluate(env)
    return v


def _atom_text(a, fmt) -> str:
    if a[0] == "d":
        return fmt["d"](a[1])
    x, y = _frozen_text(a[1], fmt), _frozen_text(a[2], fmt)
    return fmt[a[0]](x, y)


def _frozen_text(frozen, fmt) -> str:
    parts = []
    for m, c in frozen:
        fs = [_atom_text(a, fmt) for a in m]
        if not fs:
            parts.append(str(c))
        else:
            parts.append("*".join(([str(c)] if c != 1 else []) + fs))
    return "(" + " + ".join(parts) + ")" if len(parts) > 1 else (parts[0] if parts else "0")


# str(Sym) is its GLSL text (lowerings that build index expressions as strings then just work): the
# variables are gpuc_d0.. (codegen/glsl.py defines them over the push-constant block); `pretty` names
# them for messages
_GLSL = {"d": lambda k: f"gpuc_d{k}", "//": lambda x, y: f"gpuc_fdiv({x}, {y})",
         "%": lambda x, y: f"gpuc_fmod({x}, {y})", "max": lambda x, y: f"max({x}, {y})",
         "min": lambda x, y: f"min({x}, {y})"}


def _show(v) -> str:
    text = _frozen_text(v._frozen, _GLSL)
    return text if text.isidentifier() or text.startswith("(") else f"({text})"


def glsl(v) -> str:
    """A GLSL int expression (or float for an FExpr) over the push-constant block gpuc_pc."""
    if isinstance(v, FExpr):
        return v.glsl()
    if isinstance(v, Sym):
        return _show(v)
    return str(int(v))


def tree(v):
    """v as the runtime's JSON tree: an int, ["d", k], or [op, a, b] with op + * // % max min."""
    if not isinstance(v, Sym):
        return int(v)

    def atom(a):
        if a[0] == "d":
            return ["d", a[1]]
        return [a[0], ftree(a[1]), ftree(a[2])]

    def ftree(frozen):
        total = None
        for m, c in frozen:
            t = c
            for a in m:
                t = atom(a) if t == 1 else ["*", t, atom(a)]
            total = t if total is None else ["+", total, t]
        return 0 if total is None else total
    return ftree(v._frozen)


class FExpr:
    """A float expression over Syms (e.g. 1.0 / count): rendered into GLSL, never compared."""
    __slots__ = ("op", "args")

    def __init__(self, op, *args):
        self.op, self.args = op, args

    @staticmethod
    def of(v):
        if isinstance(v, (FExpr, Sym)):
            return v if isinstance(v, FExpr) else FExpr("i", v)
        return FExpr("c", float(v))

    def _bin(self, op, o, swap=False):
        if not isinstance(o, (FExpr, Sym, int, float, np.integer, np.floating)):
            return NotImplemented
        a, b = FExpr.of(self), FExpr.of(o)
        return FExpr(op, b, a) if swap else FExpr(op, a, b)

    def __add__(self, o):
        return self._bin("+", o)

    def __radd__(self, o):
        return self._bin("+", o, True)

    def __sub__(self, o):
        return self._bin("-", o)

    def __rsub__(self, o):
        return self._bin("-", o, True)

    def __mul__(self, o):
        return self._bin("*", o)

    def __rmul__(self, o):
        return self._bin("*", o, True)

    def __truediv__(self, o):
        return self._bin("/", o)

    def __rtruediv__(self, o):
        return self._bin("/", o, True)

    def __neg__(self):
        return FExpr("-", FExpr("c", 0.0), self)

    def _fixed(self, *a):
        where = f"{context().site}: " if context() is not None and context().site else ""
        raise SymbolicSize(pretty(f"{where}needs a fixed number but {self.glsl()} depends on a dynamic dim"))

    __float__ = __int__ = __index__ = __bool__ = _fixed
    __lt__ = __le__ = __gt__ = __ge__ = _fixed

    def __deepcopy__(self, memo):
        return self

    def glsl(self) -> str:
        if self.op == "c":
            return literal(self.args[0])
        if self.op == "i":
            return f"float({glsl(self.args[0])})"
        return f"({self.args[0].glsl()} {self.op} {self.args[1].glsl()})"

    def evaluate(self, env):
        if self.op == "c":
            return self.args[0]
        if self.op == "i":
            return float(evaluate(self.args[0], env))
        a, b = self.args[0].evaluate(env), self.args[1].evaluate(env)
        return {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}[self.op](a, b)

    def __repr__(self):
        return self.glsl()
