"""compiler/symbolic.py: canonical size expressions, their evaluation in numpy, in the runtime's tree form
and in GLSL, guards, and the refusal to specialize silently."""
import numpy as np
import pytest

from gpuc.compiler import guards as G
from gpuc.compiler import sym_scope as C
from gpuc.compiler import symbolic as S
from gpuc.compiler.codegen.glsl import glsl_header
from gpuc.runtime.dynamic import evaluate as run_eval


@pytest.fixture
def ctx():
    with C.session(["t:1", "x:2"], [40, 9]) as c:
        yield c


def test_canonical_arithmetic(ctx):
    t, x = S.var(0), S.var(1)
    assert t - t == 0 and isinstance(t - t, int)
    assert (t * 4 + x) * 2 - 8 * t == 2 * x
    assert (t * t) // t == t and (6 * t) // 3 == 2 * t and (6 * t) % 3 == 0
    assert hash(t * x + 1) == hash(1 + x * t)
    assert S.hint(t * x + 1) == 361
    assert not ctx.guards                     # structural answers record no guard


def test_every_form_agrees_with_python(ctx):
    t, x = S.var(0), S.var(1)
    exprs = [t * 3 + x, (t - 3) // 2 + 1, S.ceil_div(t, 4) * x, t % 5 + (x * t) // 7, S.smax(1, t - 8),
             S.smin(t, x) * 2, -((-t) // 2)]
    for a in range(1, 41, 3):
        for b in range(1, 10):
            env = [a, b]
            for e in exprs:
                want = S.evaluate(e, env)
                assert run_eval(S.tree(e), env) == want          # the runtime's JSON tree
                assert S.evaluate(e, [np.array([a]), np.array([b])])[0] == want    # vectorized (guards)


def test_glsl_text_of_floor_division():
    with C.session(["t:1"], [8]):
        e = (S.var(0) - 3) // 2
        assert "gpuc_fdiv" in S.glsl(e) and "gpuc_d0" in S.glsl(e)
        assert "gpuc_pc.d[0]" in glsl_header(1)


def test_guards_hold_or_refuse(ctx):
    t = S.var(0)
    with C.site("OP_A (operator #3)"):
        assert (t >= 1) is True and (t < 41) is True
    G.check_guards(ctx)                                     # true at every size 1..40
    with C.site("OP_B (operator #4)"):
        assert (t > 8) is True                              # at the bound, not at 1..8
    with pytest.raises(S.UnsupportedError, match=r"OP_B \(operator #4\) decides on .* differs at t:1=1"):
        G.check_guards(ctx)


def test_speed_only_decisions_and_size_one(ctx):
    t = S.var(0)
    with C.hinted():
        assert t >= 32                                      # decided at the bound, no guard
    assert (t == 1) is False and (t != 1) is True          # a dynamic dim is never taken as 1
    assert not ctx.guards


def test_no_silent_specialization(ctx):
    t = S.var(0)
    with C.site("GATHER (operator #0)"):
        with pytest.raises(S.SymbolicSize, match=r"GATHER \(operator #0\): needs a fixed integer.*\[t:1\]"):
            int(t * 2)
        with pytest.raises(S.SymbolicSize):
            range(t)
        with pytest.raises(S.SymbolicSize):
            np.prod([t, 2], dtype=np.int64)


def test_same_size_reached_two_ways(ctx):
    t = S.var(0)
    c = S.ceil_div(t, 2)
    assert G.same_everywhere(S.ceil_div(t, 2), (t - 1) // 2 + 1)        # SAME vs padded VALID halving
    assert not G.same_everywhere(S.ceil_div(c, 2), (c - 2) // 2 + 1)    # differ where ceil(t/2) is odd
