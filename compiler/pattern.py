"""The fusion passes' pattern kit: patterns are data, one matcher, one rewrite driver, and the
predicates every pass shares (a float32 tensor, a scalar constant, a single reader ...).  It sits
beside the IR (it imports only compiler/ir.py), so the fusions that op modules own (ops/rope.py)
use it as the passes under compiler/passes/ do.

A pattern is a tree rooted at the node a rewrite replaces (usually the last node of a chain) and
read backwards through producers:

    Op(ops, *inputs, name=, where=, uses=, commute=, check=)   a node whose op is one of `ops`
    Val(name=, where=)                                         any tensor (a graph input, a constant ...)
    None                                                       any input, absent (-1) included
    Views(pattern, ops)                                        zero or more single-reader nodes of `ops`
                                                               (reshapes ...) in front of `pattern`

`Op` inputs are matched against the node's inputs in order (exactly that many; `prefix=True`: the
first ones, more may follow; none given: the inputs are not looked at); `commute=True` also tries a
binary node's two inputs swapped.  `uses=n`: the node's output is read by exactly n nodes and
is no graph output (nor a variable, unless the Matcher lets variables through).  `where` predicates
take (matcher, node) for Op and (matcher, tensor id) for Val; `check(matcher, match)` runs once the
node's inputs have matched, with the captures so far (a failed check tries the next alternative).
A name captured twice must capture the same node or tensor both times (SUB(x, m) and REDUCE_MAX(x)
share x).  `match` returns a `Match`: the captures by name and every node the pattern covered.

`rewrite(graph, rules)` applies a list of (pattern, fn) pairs over the graph in program (topological)
order: for each node still in the graph, the first rule whose pattern matches there runs
`fn(graph, match)`; a fn that returns False declines (the graph must then be unchanged) and the next
rule is tried.  After each rewrite the readers / producers are recomputed; `repeat=True` sweeps
again until a sweep changes nothing, `restart=True` starts over at the first node after each rewrite.

Op names in patterns are the passes' own (tests/compiler/test_no_op_names.py lists them); this module
names none.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from gpuc.compiler.ir import Graph, Node


class NoMatch(Exception):
    """A pass's own structural walk found no match here (the kit's matcher returns None instead)."""


# --- shared predicates ------------------------------------------------------------------------------
def plain_f32(t, variables: bool = True) -> bool:
    """A float32 tensor without quantization or simulated quantization (variables=False: and no variable)."""
    return t.dtype == "float32" and t.quant is None and t.fake_quant is None and (variables or not t.is_variable)


def scalar(graph: Graph, tid: int, dtype: str | None = None):
    """The value of a constant of one element of a float dtype (`dtype`: only that one), else None."""
    if tid is None or tid < 0:
        return None
    t = graph.t(tid)
    if not t.is_const or np.size(t.data) != 1:
        return None
    a = np.asarray(t.data)
    if a.dtype.kind != "f" or dtype is not None and t.dtype != dtype:
        return None
    return float(a.reshape(-1)[0])


def ints(graph: Graph, tid: int):
    """A constant integer tensor's values as a list, else None."""
    t = graph.t(tid) if tid is not None and tid >= 0 else None
    if t is None or not t.is_const or np.asarray(t.data).dtype.kind not in "iu":
        return None
    return [int(x) for x in np.asarray(t.data).reshape(-1)]


def act_free(node: Node) -> bool:
    """The node has no fused activation."""
    return node.attrs.get("fused_activation_function", 0) in (0, None, "NONE")


# (the same facts as `where` constraints: (matcher, tensor id) for Val, (matcher, node) for Op)
def const(m, tid: int) -> bool:
    """Val constraint: a constant tensor."""
    return m.g.t(tid).is_const


def scalar_const(m, tid: int) -> bool:
    """Val constraint: a float constant of one element."""
    return scalar(m.g, tid) is not None


def f32(m, tid: int) -> bool:
    """Val constraint: plain_f32."""
    return plain_f32(m.g.t(tid))


def no_act(m, node: Node) -> bool:
    """Op constraint: act_free."""
    return act_free(node)


def one_output(m, node: Node) -> bool:
    """Op constraint: the node has exactly one output."""
    return len(node.outputs) == 1


def index_of(nodes: list, node: Node) -> int:
    """Position of `node` (by identity) in `nodes`."""
    return next(i for i, n in enumerate(nodes) if n is node)


def replace_nodes(graph: Graph, at: Node, new: Node | None, gone) -> None:
    """`new` takes `at`'s place (None: `at` goes too) and the nodes in `gone` are removed."""
    if new is not None:
        graph.nodes[index_of(graph.nodes, at)] = new
    drop = {id(n) for n in gone} | ({id(at)} if new is None else set())
    graph.nodes = [n for n in graph.nodes if id(n) not in drop or n is new]


# --- patterns ---------------------------------------------------------------------------------------
def _ops(ops) -> frozenset | None:
    if ops is None:
        return None
    return frozenset([ops] if isinstance(ops, str) else ops)


def _preds(where) -> tuple:
    if where is None:
        return ()
    return tuple(where) if isinstance(where, (tuple, list)) else (where,)


@dataclass(frozen=True, eq=False)
class Val:
    """Any tensor (an input present: id >= 0) meeting every `where(matcher, tid)`."""
    name: str | None = None
    where: tuple = ()

    def __init__(self, name: str | None = None, where=None):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "where", _preds(where))


@dataclass(frozen=True, eq=False)
class Op:
    """A node with op in `ops` (None: any op) whose inputs match `inputs` (none given: not looked at)."""
    ops: frozenset | None
    inputs: tuple | None = None
    name: str | None = None
    where: tuple = ()
    uses: int | None = None
    commute: bool = False
    check: Callable | None = None

    prefix: bool = False

    def __init__(self, ops, *inputs, name=None, where=None, uses=None, commute=False, check=None, prefix=False):
        object.__setattr__(self, "ops", _ops(ops))
        object.__setattr__(self, "inputs", tuple(inputs) if inputs else None)
        object.__setattr__(self, "prefix", prefix)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "where", _preds(where))
        object.__setattr__(self, "uses", uses)
        object.__setattr__(self, "commute", commute)
        object.__setattr__(self, "check", check)


@dataclass(frozen=True, eq=False)
class Views:
    """Zero or more nodes of `ops` read through input 0 between `inner`'s node and the tensor being
    matched, each output (the matched tensor included) read once and no graph output; the nodes go
    into Match.nodes."""
    inner: object
    ops: frozenset = frozenset()

    def __init__(self, inner, ops):
        object.__setattr__(self, "inner", inner)
        object.__setattr__(self, "ops", _ops(ops))


@dataclass
class Match:
    caps: dict = field(default_factory=dict)     # name -> Node (Op) or tensor id (Val)
    nodes: list = field(default_factory=list)    # every node the pattern covered, in match order
    matcher: object = None                       # the Matcher that found it (readers / producers)

    def __getitem__(self, name):
        return self.caps[name]

    def get(self, name, default=None):
        return self.caps.get(name, default)


class Matcher:
    """Readers and producers of one graph state, and the matcher over it.  variables=False: a variable
    tensor counts as read by nothing else (only graph outputs are kept by `uses` / `single_use`)."""

    def __init__(self, graph: Graph, variables: bool = True):
        self.g = graph
        self.users = graph.consumers()
        self.prod = graph.producers()
        self.keep = set(graph.outputs) | ({t.id for t in graph.tensors if t.is_variable} if variables else set())
        self.live = {id(n) for n in graph.nodes}

    def readers(self, tid: int) -> list:
        return self.users.get(tid, [])

    def uses(self, tid: int, n: int = 1) -> bool:
        """Exactly `n` node reads of `tid` (a node reading it twice counts twice), which is kept by nothing else."""
        return tid not in self.keep and len(self.users.get(tid, [])) == n

    def single_use(self, tid: int) -> bool:
        return self.uses(tid, 1)

    def only(self, tid: int, n: int = 1) -> list:
        """The `n` readers of `tid`, or raise NoMatch (see `uses`)."""
        if not self.uses(tid, n):
            raise NoMatch
        return self.users[tid]

    def match(self, pat, node: Node) -> Match | None:
        """Match `pat` (an Op) rooted at `node`."""
        m = Match(matcher=self)
        return m if self._node(pat, node, m) else None

    def match_tensor(self, pat, tid: int) -> Match | None:
        m = Match(matcher=self)
        return m if self._tensor(pat, tid, m) else None

    # (each step restores `m` when it fails, so alternatives start clean)
    def _capture(self, name, value, m: Match) -> bool | None:
        if name is None:
            return None
        if name in m.caps:
            old = m.caps[name]
            return old is value if isinstance(value, Node) else old == value
        m.caps[name] = value
        return None

    def _tensor(self, pat, tid: int, m: Match) -> bool:
        if pat is None:
            return True
        if tid is None or tid < 0:
            return False
        if isinstance(pat, Val):
            if not all(w(self, tid) for w in pat.where):
                return False
            same = self._capture(pat.name, tid, m)
            return same is not False
        if isinstance(pat, Views):
            saved = (dict(m.caps), len(m.nodes))
            views, cur = [], tid
            while True:
                p = self.prod.get(cur)
                if p is None or p.op not in pat.ops or not p.inputs or p.inputs[0] < 0 or len(p.outputs) != 1 \
                        or not self.single_use(cur):
                    break
                views.append(p)
                cur = p.inputs[0]
            m.nodes.extend(views)
            if self._tensor(pat.inner, cur, m):
                return True
            m.caps, m.nodes[:] = saved[0], m.nodes[:saved[1]]
            return False
        p = self.prod.get(tid)
        return p is not None and (pat.uses is None or self.uses(tid, pat.uses)) and self._node(pat, p, m)

    def _node(self, pat: Op, node: Node, m: Match) -> bool:
        if pat.ops is not None and node.op not in pat.ops:
            return False
        # arity first: a `where` predicate may read the inputs the pattern names (a malformed model's node
        # may have fewer)
        if pat.inputs is not None and len(node.inputs) != len(pat.inputs) \
                and not (pat.prefix and len(node.inputs) > len(pat.inputs)):
            return False
        if not all(w(self, node) for w in pat.where):
            return False
        orders = [list(node.inputs)]
        if pat.inputs is not None:
            if pat.commute and len(node.inputs) == 2:
                orders.append(list(node.inputs[::-1]))
        for ins in orders:
            caps, n = dict(m.caps), len(m.nodes)
            same = self._capture(pat.name, node, m)
            if same is True:
                return True                      # (matched already where the name was first captured)
            if same is not False:
                m.nodes.append(node)
                if (pat.inputs is None or all(self._tensor(p, t, m) for p, t in zip(pat.inputs, ins))) \
                        and (pat.check is None or pat.check(self, m)):
                    return True
            m.caps, m.nodes[:] = caps, m.nodes[:n]
        return False


# --- the driver ------------------------------------------------------------------------------------
def rewrite(graph: Graph, rules, repeat: bool = False, variables: bool = True, restart: bool = False) -> int:
    """Apply `rules` [(pattern, fn(graph, match) -> None | False)] over the graph in program order
    (module docstring); restart=True: after each rewrite start again at the first node (until a sweep
    changes nothing).  Returns how many rewrites ran."""
    count = 0
    while True:
        m, changed = Matcher(graph, variables), False
        for node in list(graph.nodes):
            if id(node) not in m.live:
                continue                         # removed by an earlier rewrite of this sweep
            for pat, fn in rules:
                got = m.match(pat, node)
                if got is not None and fn(graph, got) is not False:
                    count, changed = count + 1, True
                    m = Matcher(graph, variables)
                    break
            if changed and restart:
                break
        if not ((repeat or restart) and changed):
            return count
