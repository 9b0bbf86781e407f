"""A literal interpreter of Fig. 4-5 over SymPy values: the inputs' entries are symbols, so a program
without black boxes evaluates to polynomials, and two programs mean the same when their expanded
polynomials agree.  ``proofs/`` uses it for the symbolic obligation of polynomial rules."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import sympy

from tensorlang.dispatch import dispatch
from tensorlang.nodes import (
    Access, Add, And, Call, Cmp, Const, Exists, FalsePred, Gen, Guard, IndexVar, Let, Max, Mul, Or, Pair,
    PairType, Proj, RelAtom, RelType, Sum, TensorType, TruePred, Var, walk,
)
from tensorlang.traversal import free_index_vars, free_vars

__all__ = ["symbolic_inputs", "symbolic_value", "same_polynomials", "is_polynomial"]


def is_polynomial(expr) -> bool:
    """No black box and no maximum: the program's value is a polynomial of its inputs' entries."""
    return not any(isinstance(n, (Call, Max)) for n in walk(expr))


def _size(a, sizes) -> int:
    return int(a.const + sum(c * sizes[v.name] for v, c in a.terms))


def _symbols(name: str, t, sizes):
    if isinstance(t, PairType):
        return (_symbols(name + "_0", t.first, sizes), _symbols(name + "_1", t.second, sizes))
    if isinstance(t, TensorType):
        return [_symbols(f"{name}_{k}", t.elem, sizes) for k in range(_size(t.size, sizes))]
    return sympy.Symbol(name)


def symbolic_inputs(expr, sizes: dict, relations: dict | None = None) -> dict:
    """One symbol per input entry (``x_0_1``), relations as given (boolean arrays), by variable."""
    out = {}
    for v in free_vars(expr):
        if isinstance(v.type, RelType):
            out[v] = np.asarray((relations or {})[v.name], dtype=bool)
        else:
            out[v] = _symbols(v.name, v.type, sizes)
    return out


def _zero(t, sizes):
    if isinstance(t, PairType):
        return (_zero(t.first, sizes), _zero(t.second, sizes))
    if isinstance(t, TensorType):
        return [_zero(t.elem, sizes) for _ in range(_size(t.size, sizes))]
    return sympy.Integer(0)


class _Interp:
    """The interpreter, one method ``_sym_<Class>`` per kind of node."""

    def __init__(self, sizes):
        self.sizes = sizes
        self.memo: dict = {}

    def index(self, a, env) -> int:
        return int(a.const + sum(c * (env[v] if isinstance(v, IndexVar) else self.sizes[v.name]) for v, c in a.terms))

    def expr(self, e, env):
        key = (id(e),) + tuple(env[v] for v in free_index_vars(e)) + tuple(
            id(env[v]) for v in free_vars(e) if v in env)
        found = self.memo.get(key)
        if found is not None:
            return found[0]
        out = self._expr(e, env)
        self.memo[key] = (out, e)
        return out

    def _expr(self, e, env):
        return dispatch(self, "_sym_", e, env)

    def _sym_Const(self, e: Const, env):
        v = e.value
        return sympy.Rational(Fraction(v)) if not isinstance(v, int) else sympy.Integer(v)

    def _sym_Var(self, e: Var, env):
        return env[e]

    def _sym_Add(self, e: Add, env):
        return self.expr(e.left, env) + self.expr(e.right, env)

    def _sym_Mul(self, e: Mul, env):
        return self.expr(e.left, env) * self.expr(e.right, env)

    def _sym_Call(self, e: Call, env):
        """A black box as an uninterpreted function (polynomial rules are checked on programs without)."""
        return sympy.Function(e.fn)(*[self.expr(a, env) for a in e.args])

    def _sym_Pair(self, e: Pair, env):
        return (self.expr(e.first, env), self.expr(e.second, env))

    def _sym_Proj(self, e: Proj, env):
        return self.expr(e.pair, env)[e.index]

    def _sym_Gen(self, e: Gen, env):
        return [self.expr(e.body, {**env, e.var: k}) for k in range(_size(e.size, self.sizes))]

    def _sym_Sum(self, e: Sum, env):
        total = sympy.Integer(0)
        for k in range(_size(e.size, self.sizes)):
            total += self.expr(e.body, {**env, e.var: k})
        return total

    def _sym_Access(self, e: Access, env):
        return _at(self.expr(e.tensor, env), self.index(e.index, env))

    def _sym_Guard(self, e: Guard, env):
        return self.expr(e.body, env) if self.pred(e.pred, env) else _zero(e.type, self.sizes)

    def _sym_Let(self, e: Let, env):
        return self.expr(e.body, {**env, e.var: self.expr(e.value, env)})

    def pred(self, p, env) -> bool:
        return dispatch(self, "_sym_", p, env)

    def _sym_TruePred(self, p: TruePred, env) -> bool:
        return True

    def _sym_FalsePred(self, p: FalsePred, env) -> bool:
        return False

    def _sym_Cmp(self, p: Cmp, env) -> bool:
        a, b = self.index(p.lhs, env), self.index(p.rhs, env)
        return {"<": a < b, "<=": a <= b, "=": a == b, "!=": a != b}[p.op]

    def _sym_And(self, p: And, env) -> bool:
        return all(self.pred(q, env) for q in p.parts)

    def _sym_Or(self, p: Or, env) -> bool:
        return any(self.pred(q, env) for q in p.parts)

    def _sym_Exists(self, p: Exists, env) -> bool:
        return any(self.pred(p.body, {**env, p.var: k}) for k in range(_size(p.size, self.sizes)))

    def _sym_RelAtom(self, p: RelAtom, env) -> bool:
        table = env[p.rel]
        idx = tuple(self.index(a, env) for a in p.args)
        return all(0 <= i < s for i, s in zip(idx, table.shape)) and bool(table[idx])


def _at(value, k):
    if isinstance(value, tuple):  # a tensor of pairs held as a pair of tensors
        return (_at(value[0], k), _at(value[1], k))
    return value[k]


def symbolic_value(expr, sizes: dict, inputs: dict):
    """The value of ``expr`` with SymPy entries: nested lists (tensors) and tuples (pairs)."""
    env = dict(inputs)
    return _Interp(sizes).expr(expr, env)


def _flatten(v, out):
    if isinstance(v, (list, tuple)):
        for w in v:
            _flatten(w, out)
    else:
        out.append(v)
    return out


def same_polynomials(a, b) -> bool:
    """Entry by entry, ``expand(a - b) == 0``."""
    fa, fb = _flatten(a, []), _flatten(b, [])
    if len(fa) != len(fb):
        return False
    return all(sympy.expand(x - y) == 0 for x, y in zip(fa, fb))
