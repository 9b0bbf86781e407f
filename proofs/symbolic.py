"""A literal interpreter of Fig. 4-5 over SymPy values: the inputs' entries are symbols, so a program
without black boxes evaluates to polynomials, and two programs mean the same when their expanded
polynomials agree.  ``proofs/`` uses it for the symbolic obligation of polynomial rules."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import sympy

from tensorlang.nodes import (
    Access, Add, And, Call, Cmp, Const, Exists, FalsePred, Gen, Guard, IndexVar, Let, Mul, Or, Pair,
    PairType, Proj, RelAtom, RelType, Sum, TensorType, TruePred, Var, walk,
)
from tensorlang.traversal import free_index_vars, free_vars

__all__ = ["symbolic_inputs", "symbolic_value", "same_polynomials", "is_polynomial"]


def is_polynomial(expr) -> bool:
    """No black box: the program's value is a polynomial of its inputs' entries."""
    return not any(isinstance(n, Call) for n in walk(expr))


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
        if isinstance(e, Const):
            v = e.value
            return sympy.Rational(Fraction(v)) if not isinstance(v, int) else sympy.Integer(v)
        if isinstance(e, Var):
            return env[e]
        if isinstance(e, Add):
            return self.expr(e.left, env) + self.expr(e.right, env)
        if isinstance(e, Mul):
            return self.expr(e.left, env) * self.expr(e.right, env)
        if isinstance(e, Call):
            from tensorlang.functions import lookup

            spec = lookup(e.fn)
            f = getattr(spec, "sympy", None)
            args = [self.expr(a, env) for a in e.args]
            if f is None:
                return sympy.Function(e.fn)(*args)
            return f(*args)
        if isinstance(e, Pair):
            return (self.expr(e.first, env), self.expr(e.second, env))
        if isinstance(e, Proj):
            return self.expr(e.pair, env)[e.index]
        if isinstance(e, Gen):
            return [self.expr(e.body, {**env, e.var: k}) for k in range(_size(e.size, self.sizes))]
        if isinstance(e, Sum):
            total = sympy.Integer(0)
            for k in range(_size(e.size, self.sizes)):
                total += self.expr(e.body, {**env, e.var: k})
            return total
        if isinstance(e, Access):
            value = self.expr(e.tensor, env)
            k = self.index(e.index, env)
            return _at(value, k)
        if isinstance(e, Guard):
            return self.expr(e.body, env) if self.pred(e.pred, env) else _zero(e.type, self.sizes)
        if isinstance(e, Let):
            return self.expr(e.body, {**env, e.var: self.expr(e.value, env)})
        raise TypeError(type(e).__name__)

    def pred(self, p, env) -> bool:
        if isinstance(p, TruePred):
            return True
        if isinstance(p, FalsePred):
            return False
        if isinstance(p, Cmp):
            a, b = self.index(p.lhs, env), self.index(p.rhs, env)
            return {"<": a < b, "<=": a <= b, "=": a == b, "!=": a != b}[p.op]
        if isinstance(p, And):
            return all(self.pred(q, env) for q in p.parts)
        if isinstance(p, Or):
            return any(self.pred(q, env) for q in p.parts)
        if isinstance(p, Exists):
            return any(self.pred(p.body, {**env, p.var: k}) for k in range(_size(p.size, self.sizes)))
        if isinstance(p, RelAtom):
            table = env[p.rel]
            idx = tuple(self.index(a, env) for a in p.args)
            return all(0 <= i < s for i, s in zip(idx, table.shape)) and bool(table[idx])
        raise TypeError(type(p).__name__)


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
