"""The total (forward) derivative of Fig. 13, rules 6.1-6.13.

``forward(expr, sigma)`` is D[expr | sigma]: ``sigma`` maps each differentiated input to its
differential variable.  Zeros stay symbolic (``None`` while deriving): a constant, an input outside
sigma, and everything built only from them has no derivative term at all, so no zero is ever added,
multiplied or stored.  On Tensor SSA input the result costs at most 4x the input (Theorem 6.1).

The rules are the table ``FORWARD`` (one named ``Rule`` per construct, the equation in its docstring);
``Forward`` derives each node once per relevant sigma by the rule for its kind.  ``proofs/`` reads the
same table.
"""
from __future__ import annotations

from typing import Mapping

from tensorlang.functions import jvp
from tensorlang.nodes import (
    R, Access, Add, Call, Const, Expr, Gen, Guard, Let, Max, Mul, Pair, Proj, Sum, Var, compare, zero,
)
from tensorlang.rules import RuleTable, rule
from tensorlang.substitute import fresh_var
from tensorlang.traversal import free_vars


def forward(expr: Expr, sigma: Mapping[Var, Var], trace=None) -> Expr:
    """D[expr | sigma] as an expression (the zero of expr's type where nothing depends on sigma).

    ``trace``: optional; a list that receives the name of the rule applied at each node (``"6.5
    product"``...), once per node and sigma (shared subterms are derived once), or a
    ``collections.Counter`` that counts them.  ``proofs/specs_derive.py`` uses it; off, it costs nothing."""
    derivative = Forward(expr, trace).d(expr, dict(sigma))
    return zero(expr.type) if derivative is None else derivative


class At:
    """What a forward rule sees besides its node: the derivation (``d`` of a child under the same
    sigma, or another) and sigma, the differentials of the variables in scope."""

    __slots__ = ("derivation", "sigma")

    def __init__(self, derivation: "Forward", sigma: dict):
        self.derivation, self.sigma = derivation, sigma

    def d(self, e: Expr, sigma: dict | None = None) -> Expr | None:
        return self.derivation.d(e, self.sigma if sigma is None else sigma)


# the rules of Fig. 13: ``None`` is the symbolic zero -----------------------------------------------


@rule("6.1 variable", Var)
def variable(e: Var, at: At):
    """D[x | sigma] = sigma(x) for x in sigma."""
    return at.sigma.get(e)


@rule("6.2 variable not in sigma", Var)
def variable_not_in_sigma(e: Var, at: At):
    """D[x | sigma] = 0 for x not in sigma."""
    return None


@rule("6.3 constant", Const)
def constant(e: Const, at: At):
    """D[c] = 0."""
    return None


@rule("6.4 addition", Add)
def addition(e: Add, at: At):
    """D[e1 + e2] = D[e1] + D[e2]."""
    return _plus(at.d(e.left), at.d(e.right))


@rule("6.5 product", Mul)
def product(e: Mul, at: At):
    """D[e1 * e2] = D[e1] * e2 + e1 * D[e2] (Leibniz)."""
    dl, dr = at.d(e.left), at.d(e.right)
    return _plus(None if dl is None else Mul(dl, e.right), None if dr is None else Mul(e.left, dr))


@rule("6.6 black box", Call)
def black_box(e: Call, at: At):
    """D[f(e1, ...)] = sum_k f_k(e1, ...) * D[ek]: the partial derivatives are data (``functions.jvp``)."""
    return jvp(e.fn, e.args, [at.d(a) for a in e.args])


@rule("6.7 pair", Pair)
def pair(e: Pair, at: At):
    """D[(e1, e2)] = (D[e1], D[e2])."""
    d0, d1 = at.d(e.first), at.d(e.second)
    if d0 is None and d1 is None:
        return None
    return Pair(zero(e.first.type) if d0 is None else d0, zero(e.second.type) if d1 is None else d1)


@rule("6.8 projection", Proj)
def projection(e: Proj, at: At):
    """D[e.k] = D[e].k."""
    d = at.d(e.pair)
    if d is None:
        return None
    return d.first if isinstance(d, Pair) and e.index == 0 else (
        d.second if isinstance(d, Pair) else Proj(e.index, d))


@rule("6.9 generator", Gen)
def generator(e: Gen, at: At):
    """D[gen(i:n) e] = gen(i:n) D[e]."""
    d = at.d(e.body)
    return None if d is None else Gen(e.var, e.size, d)


@rule("6.10 sum", Sum)
def summation(e: Sum, at: At):
    """D[sum(i:n) e] = sum(i:n) D[e]."""
    d = at.d(e.body)
    return None if d is None else Sum(e.var, e.size, d)


@rule("M3 max", Max)
def maximum(e: Max, at: At):
    """D[max(i:n) e] = [0 < n] * let m = max(i:n) e in (sum(i:n) equal(e, m) * D[e]) * recip(sum(i:n) equal(e, m)):
    the mean of the tangents of the maximising entries (ties share equally, as the adjoint splits the
    cotangent: the two stay transposes), 0 over an empty range.  It costs about 6 units per point of
    the range where the maximum costs 1: the maximum again, and two sums of comparisons."""
    d = at.d(e.body)
    if d is None:
        return None
    m = fresh_var("m", R, avoid=[at.derivation.root, *at.sigma.values()])
    hit = Call("equal", (e.body, m))
    mean = Mul(Sum(e.var, e.size, Mul(hit, d)), Call("recip", (Sum(e.var, e.size, hit),)))
    return Guard(compare("<", 0, e.size), Let(m, e, mean))


@rule("6.11 access", Access)
def access(e: Access, at: At):
    """D[e[a]] = D[e][a]."""
    d = at.d(e.tensor)
    return None if d is None else Access(d, e.index)


@rule("6.12 bracket", Guard)
def bracket(e: Guard, at: At):
    """D[[p] * e] = [p] * D[e]."""
    d = at.d(e.body)
    return None if d is None else Guard(e.pred, d)


@rule("6.13 let", Let)
def let(e: Let, at: At):
    """D[let x = e1 in e2] = let x = e1 in let dx = D[e1] in D[e2 | sigma, x -> dx]; when D[e1] is zero,
    x leaves sigma instead (and when dx or x is not used, its let is dropped)."""
    dvalue = at.d(e.value)
    sigma = at.sigma
    if dvalue is None:
        inner = {k: v for k, v in sigma.items() if k is not e.var}
        body = at.d(e.body, inner)
        return None if body is None else Let(e.var, e.value, body)
    dvar = fresh_var("d" + e.var.name, e.var.type, avoid=[at.derivation.root, *sigma.values()])
    body = at.d(e.body, {**sigma, e.var: dvar})
    if body is None:
        return None
    if dvar not in free_vars(body):
        return Let(e.var, e.value, body) if e.var in free_vars(body) else body
    return Let(e.var, e.value, Let(dvar, dvalue, body))


FORWARD = RuleTable("forward", [
    variable, variable_not_in_sigma, constant, addition, product, black_box, pair, projection, generator,
    summation, maximum, access, bracket, let,
], doc="Fig. 13: the forward derivative, one rule per construct (and M3 for a maximum)")
FORWARD_RULES = tuple(r.name for r in FORWARD)


class Forward:
    """One derivation: a memo of D[e | sigma] per node and the relevant part of sigma.  Each node is
    derived by the first rule of ``FORWARD`` for its kind (a variable: 6.1 when sigma has it, else 6.2)."""

    def __init__(self, root: Expr, trace=None):
        self.root = root
        self.memo: dict = {}
        self.trace = trace

    def d(self, e: Expr, sigma: dict) -> Expr | None:
        key = (id(e), tuple(id(sigma.get(v)) for v in free_vars(e)))
        if key not in self.memo:
            found = self.rule_for(e, sigma)
            self.memo[key] = found.fn(e, At(self, sigma))
            if self.trace is not None:
                self._note(found.name)
        return self.memo[key]

    @staticmethod
    def rule_for(e: Expr, sigma: dict):
        if isinstance(e, Var):
            return variable if e in sigma else variable_not_in_sigma
        return FORWARD.rules_for(e)[0]

    def _note(self, name: str) -> None:
        if isinstance(self.trace, dict):  # a Counter
            self.trace[name] = self.trace.get(name, 0) + 1
        else:
            self.trace.append(name)


def _plus(a: Expr | None, b: Expr | None) -> Expr | None:
    if a is None:
        return b
    if b is None:
        return a
    return Add(a, b)
