"""A literal, element-by-element interpreter of Fig. 4-5: the slow second oracle for the evaluator.

It follows the rules one by one on Python floats and nested lists, with no vectorisation and no
sharing, so that the vectorised evaluator can be checked against the paper's semantics itself.
"""
from __future__ import annotations

import numpy as np

from tensorlang.functions import lookup
from tensorlang.inputs import bind
from tensorlang.nodes import (
    Access, Add, And, Call, Cmp, Const, Exists, FalsePred, Gen, Guard, IndexVar, Let, Mul, Or, Pair,
    PairType, Proj, RelAtom, Sum, TensorType, TruePred, Var,
)


def interpret(expr, **inputs):
    binding = bind(expr, inputs)
    env = {v: _to_nested(val) for v, val in binding.values.items()}
    return _from_nested(_eval(expr, env, binding), expr.type, binding)


def _to_nested(v):
    if isinstance(v, tuple):
        return tuple(_to_nested(w) for w in v)
    if isinstance(v, np.ndarray) and v.dtype == bool:
        return v
    if isinstance(v, np.ndarray):
        return v.tolist() if v.ndim else float(v)
    return v


def _soa(t, value):
    """Nested lists of pairs (array of structs) back to the evaluator's struct of arrays."""
    if isinstance(t, PairType):
        return (_soa(t.first, value[0]), _soa(t.second, value[1]))
    if isinstance(t, TensorType):
        parts = [_soa(t.elem, v) for v in value]
        return _stack(t.elem, parts)
    return value


def _stack(elem, parts):
    if isinstance(elem, PairType):
        return (_stack(elem.first, [p[0] for p in parts]), _stack(elem.second, [p[1] for p in parts]))
    return list(parts)


def _from_nested(v, t, binding):
    v = _soa(t, v)
    return _arrays(v)


def _arrays(v):
    if isinstance(v, tuple):
        return tuple(_arrays(w) for w in v)
    if isinstance(v, list):
        return np.array(v, dtype=float)
    return float(v)


def _zero(t, binding):
    if isinstance(t, PairType):
        return (_zero(t.first, binding), _zero(t.second, binding))
    if isinstance(t, TensorType):
        return [_zero(t.elem, binding) for _ in range(binding.size(t.size))]
    return 0.0


def _index(a, env, binding):
    return a.const + sum(c * (env[v] if isinstance(v, IndexVar) else binding.sizes[v.name]) for v, c in a.terms)


def _access_value(value, k, t):
    """value[k] for a value of tensor type t; struct-of-arrays inputs are indexed componentwise."""
    if isinstance(value, tuple):
        return (_access_value(value[0], k, None), _access_value(value[1], k, None))
    return value[k]


def _eval(e, env, b):
    if isinstance(e, Const):
        return float(e.value)
    if isinstance(e, Var):
        return env[e]
    if isinstance(e, Add):
        return _eval(e.left, env, b) + _eval(e.right, env, b)
    if isinstance(e, Mul):
        return _eval(e.left, env, b) * _eval(e.right, env, b)
    if isinstance(e, Call):
        with np.errstate(all="ignore"):
            return float(lookup(e.fn).numpy(*[np.float64(_eval(a, env, b)) for a in e.args]))
    if isinstance(e, Pair):
        return (_eval(e.first, env, b), _eval(e.second, env, b))
    if isinstance(e, Proj):
        return _eval(e.pair, env, b)[e.index]
    if isinstance(e, Gen):
        return [_eval(e.body, {**env, e.var: k}, b) for k in range(b.size(e.size))]
    if isinstance(e, Sum):
        total = 0.0
        for k in range(b.size(e.size)):
            total += _eval(e.body, {**env, e.var: k}, b)
        return total
    if isinstance(e, Access):
        k = _index(e.index, env, b)
        value = _eval(e.tensor, env, b)
        assert 0 <= k < b.size(e.tensor.type.size), f"out of range access {e!r} at {k}"
        return _access_value(value, k, e.tensor.type)
    if isinstance(e, Guard):
        return _eval(e.body, env, b) if _pred(e.pred, env, b) else _zero(e.type, b)
    if isinstance(e, Let):
        return _eval(e.body, {**env, e.var: _eval(e.value, env, b)}, b)
    raise TypeError(type(e))


def _pred(p, env, b):
    if isinstance(p, TruePred):
        return True
    if isinstance(p, FalsePred):
        return False
    if isinstance(p, Cmp):
        l, r = _index(p.lhs, env, b), _index(p.rhs, env, b)
        return {"<": l < r, "<=": l <= r, "=": l == r, "!=": l != r}[p.op]
    if isinstance(p, And):
        return all(_pred(q, env, b) for q in p.parts)
    if isinstance(p, Or):
        return any(_pred(q, env, b) for q in p.parts)
    if isinstance(p, Exists):
        return any(_pred(p.body, {**env, p.var: k}, b) for k in range(b.size(p.size)))
    if isinstance(p, RelAtom):
        table = env[p.rel]
        idx = tuple(_index(a, env, b) for a in p.args)
        return all(0 <= i < s for i, s in zip(idx, table.shape)) and bool(table[idx])
    raise TypeError(type(p))
