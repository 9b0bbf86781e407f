"""The total (forward) derivative of Fig. 13, rules 6.1-6.13.

``forward(expr, sigma)`` is D[expr | sigma]: ``sigma`` maps each differentiated input to its
differential variable.  Zeros stay symbolic (``None`` while deriving): a constant, an input outside
sigma, and everything built only from them has no derivative term at all, so no zero is ever added,
multiplied or stored.  On Tensor SSA input the result costs at most 4x the input (Theorem 6.1).
"""
from __future__ import annotations

from typing import Mapping

from tensorlang.functions import jvp
from tensorlang.nodes import (
    Access, Add, Call, Const, Expr, Gen, Guard, Let, Mul, Pair, Proj, Sum, Var, zero,
)
from tensorlang.substitute import fresh_var
from tensorlang.traversal import free_vars


def forward(expr: Expr, sigma: Mapping[Var, Var], trace=None) -> Expr:
    """D[expr | sigma] as an expression (the zero of expr's type where nothing depends on sigma).

    ``trace``: optional; a list that receives the name of the rule applied at each node (``"6.5
    product"``...), once per node and sigma (shared subterms are derived once), or a
    ``collections.Counter`` that counts them.  ``proofs/specs_derive.py`` uses it; off, it costs nothing."""
    derivative = Forward(expr, trace).d(expr, dict(sigma))
    return zero(expr.type) if derivative is None else derivative


RULE_NAMES = {  # the rule each node kind is derived by (Fig. 13); Var: 6.1 or 6.2 by sigma
    Const: "6.3 constant", Add: "6.4 addition", Mul: "6.5 product", Call: "6.6 black box", Pair: "6.7 pair",
    Proj: "6.8 projection", Gen: "6.9 generator", Sum: "6.10 sum", Access: "6.11 access", Guard: "6.12 bracket",
    Let: "6.13 let",
}
FORWARD_RULES = ("6.1 variable", "6.2 variable not in sigma") + tuple(RULE_NAMES.values())


class Forward:
    """One derivation: a memo of D[e | sigma] per node and the relevant part of sigma."""

    def __init__(self, root: Expr, trace=None):
        self.root = root
        self.memo: dict = {}
        self.trace = trace
        self.rules = {
            Var: self.var, Const: self.const, Add: self.add, Mul: self.mul, Call: self.call,
            Pair: self.pair, Proj: self.proj, Gen: self.gen, Sum: self.sum, Access: self.access,
            Guard: self.guard, Let: self.let,
        }

    def d(self, e: Expr, sigma: dict) -> Expr | None:
        key = (id(e), tuple(id(sigma.get(v)) for v in free_vars(e)))
        if key not in self.memo:
            self.memo[key] = self.rules[type(e)](e, sigma)
            if self.trace is not None:
                self._note(e, sigma)
        return self.memo[key]

    def _note(self, e: Expr, sigma) -> None:
        name = RULE_NAMES[type(e)] if not isinstance(e, Var) else ("6.1 variable" if e in sigma else "6.2 variable not in sigma")
        if isinstance(self.trace, dict):  # a Counter
            self.trace[name] = self.trace.get(name, 0) + 1
        else:
            self.trace.append(name)

    def var(self, e: Var, sigma):  # 6.1, 6.2
        return sigma.get(e)

    def const(self, e: Const, sigma):  # 6.3
        return None

    def add(self, e: Add, sigma):  # 6.4
        return _plus(self.d(e.left, sigma), self.d(e.right, sigma))

    def mul(self, e: Mul, sigma):  # 6.5 (Leibniz)
        dl, dr = self.d(e.left, sigma), self.d(e.right, sigma)
        return _plus(None if dl is None else Mul(dl, e.right), None if dr is None else Mul(e.left, dr))

    def call(self, e: Call, sigma):  # 6.6
        return jvp(e.fn, e.args, [self.d(a, sigma) for a in e.args])

    def pair(self, e: Pair, sigma):  # 6.7
        d0, d1 = self.d(e.first, sigma), self.d(e.second, sigma)
        if d0 is None and d1 is None:
            return None
        return Pair(zero(e.first.type) if d0 is None else d0, zero(e.second.type) if d1 is None else d1)

    def proj(self, e: Proj, sigma):  # 6.8
        d = self.d(e.pair, sigma)
        if d is None:
            return None
        return d.first if isinstance(d, Pair) and e.index == 0 else (
            d.second if isinstance(d, Pair) else Proj(e.index, d))

    def gen(self, e: Gen, sigma):  # 6.9
        d = self.d(e.body, sigma)
        return None if d is None else Gen(e.var, e.size, d)

    def sum(self, e: Sum, sigma):  # 6.10
        d = self.d(e.body, sigma)
        return None if d is None else Sum(e.var, e.size, d)

    def access(self, e: Access, sigma):  # 6.11
        d = self.d(e.tensor, sigma)
        return None if d is None else Access(d, e.index)

    def guard(self, e: Guard, sigma):  # 6.12
        d = self.d(e.body, sigma)
        return None if d is None else Guard(e.pred, d)

    def let(self, e: Let, sigma):  # 6.13
        dvalue = self.d(e.value, sigma)
        if dvalue is None:
            inner = {k: v for k, v in sigma.items() if k is not e.var}
            body = self.d(e.body, inner)
            return None if body is None else Let(e.var, e.value, body)
        dvar = fresh_var("d" + e.var.name, e.var.type, avoid=[self.root, *sigma.values()])
        body = self.d(e.body, {**sigma, e.var: dvar})
        if body is None:
            return None
        if dvar not in free_vars(body):
            return Let(e.var, e.value, body) if e.var in free_vars(body) else body
        return Let(e.var, e.value, Let(dvar, dvalue, body))


def _plus(a: Expr | None, b: Expr | None) -> Expr | None:
    if a is None:
        return b
    if b is None:
        return a
    return Add(a, b)
