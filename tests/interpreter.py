"""A literal, element-by-element interpreter of Fig. 4-5 for the tests: one Python step per element, on
floats and nested lists, no vectorisation and no sharing.

``holds`` decides a predicate at one point (also the brute-force oracle of ``test_predicates``);
``naive_evaluate`` evaluates a program and fails (``Violation``) on an out-of-range access, an
out-of-domain black-box argument or a non-finite value (any sum, product or function value on the way,
not only the result), so it checks the generator's programs and is an oracle for the reference
evaluator (``test_strategies``); the differential fuzzer (``fuzz.py``) asks it whether every value of a
program is finite at given inputs.
"""
from __future__ import annotations

import numpy as np

from tensorlang.functions import lookup
from tensorlang.nodes import (
    FALSE, TRUE, Access, Add, And, Call, Cmp, Const, Declare, Exists, Expr, Gen, Guard, Let, Mul, Or, Pair, PairType,
    Proj, R, RelAtom, SizeVar, Sum, Var,
)

try:  # tests/ on sys.path (pytest's default for a folder without __init__.py)
    from strategies import type_shape
except ImportError:  # tests/ as a package
    from tests.strategies import type_shape


class Violation(AssertionError):
    pass


def holds(p, env, relation) -> bool:
    """Whether ``p`` holds at the point ``env`` (index and size variables to integers); ``relation(atom,
    args, env)`` decides a relation atom at its evaluated arguments."""
    if p is TRUE:
        return True
    if p is FALSE:
        return False
    if isinstance(p, Cmp):
        lhs, rhs = p.lhs.evaluate(env), p.rhs.evaluate(env)
        return {"<": lhs < rhs, "<=": lhs <= rhs, "=": lhs == rhs, "!=": lhs != rhs}[p.op]
    if isinstance(p, And):
        return all(holds(q, env, relation) for q in p.parts)
    if isinstance(p, Or):
        return any(holds(q, env, relation) for q in p.parts)
    if isinstance(p, Exists):
        return any(holds(p.body, {**env, p.var: k}, relation) for k in range(p.size.evaluate(env)))
    if isinstance(p, RelAtom):
        return relation(p, tuple(a.evaluate(env) for a in p.args), env)
    raise TypeError(p)


def naive_evaluate(expr: Expr, inputs: dict):
    """The value of expr (floats, arrays, tuples), one element at a time; raises ``Violation`` on an access
    out of range, a black-box argument out of its domain, or a non-finite result."""
    env = {SizeVar(name): inputs[name] for name in expr.sizes}
    out = _as_numpy(_eval(expr, env, {}, inputs), expr.type, env)
    for leaf in leaves(out):
        if not np.all(np.isfinite(leaf)):
            raise Violation("non-finite result")
    return out


def _finite(value: float) -> float:
    if not np.isfinite(value):
        raise Violation(f"non-finite value {value}")
    return value


def _zero(t, env):
    if t is R:
        return 0.0
    if isinstance(t, PairType):
        return (_zero(t.first, env), _zero(t.second, env))
    return [_zero(t.elem, env) for _ in range(t.size.evaluate(env))]


def _relation(inputs):
    """``holds``'s relation for the inputs: the relation's entry at the arguments, which must be in range."""

    def entry(atom, args, env) -> bool:
        for a, s in zip(args, atom.rel.type.sizes):
            if not 0 <= a < s.evaluate(env):
                raise Violation(f"relation {atom.rel.name} read at {args}, outside its sizes")
        return bool(inputs[atom.rel.name][args])

    return entry


def _eval(e, env, lets, inputs):
    if isinstance(e, Var):
        return lets[e.name] if e.name in lets else inputs[e.name]
    if isinstance(e, Const):
        return _finite(float(e.value))
    if isinstance(e, Add):
        return _finite(_eval(e.left, env, lets, inputs) + _eval(e.right, env, lets, inputs))
    if isinstance(e, Mul):
        return _finite(_eval(e.left, env, lets, inputs) * _eval(e.right, env, lets, inputs))
    if isinstance(e, Call):
        spec = lookup(e.fn)
        args = [float(_eval(a, env, lets, inputs)) for a in e.args]
        for k in spec.positive:
            if not args[k] > 0:
                raise Violation(f"{e.fn} argument {k} is {args[k]}, not positive")
        with np.errstate(all="raise"):
            try:
                out = float(spec.numpy(*args))
            except (FloatingPointError, ZeroDivisionError, OverflowError) as exc:  # Python's floats raise too
                raise Violation(f"{e.fn}{tuple(args)}: {exc}") from None
        return _finite(out)
    if isinstance(e, Pair):
        return (_eval(e.first, env, lets, inputs), _eval(e.second, env, lets, inputs))
    if isinstance(e, Proj):
        return _eval(e.pair, env, lets, inputs)[e.index]
    if isinstance(e, Gen):
        return [_eval(e.body, {**env, e.var: k}, lets, inputs) for k in range(e.size.evaluate(env))]
    if isinstance(e, Sum):
        return _finite(float(sum(_eval(e.body, {**env, e.var: k}, lets, inputs)
                                 for k in range(e.size.evaluate(env)))))
    if isinstance(e, Access):
        t = _eval(e.tensor, env, lets, inputs)
        size = e.tensor.type.size.evaluate(env)
        if len(t) != size:
            raise Violation(f"a tensor of declared size {size} has {len(t)} elements")
        k = e.index.evaluate(env)
        if not 0 <= k < size:
            raise Violation(f"access at {k}, outside [0, {size})")
        return t[k]
    if isinstance(e, Guard):
        if holds(e.pred, env, _relation(inputs)):
            return _eval(e.body, env, lets, inputs)
        return _zero(e.type, env)
    if isinstance(e, Let):
        value = _eval(e.value, env, lets, inputs)
        return _eval(e.body, env, {**lets, e.var.name: value}, inputs)
    if isinstance(e, Declare):  # inputs the body does not read
        return _eval(e.body, env, lets, inputs)
    raise TypeError(e)


def _as_numpy(value, t, env):
    if t is R:
        return float(value)
    if isinstance(t, PairType):
        return (_as_numpy(value[0], t.first, env), _as_numpy(value[1], t.second, env))
    shape = type_shape(t, {v.name: k for v, k in env.items() if isinstance(v, SizeVar)})
    return np.array(value, dtype=np.float64).reshape(shape)


def leaves(value):
    if isinstance(value, tuple):
        for v in value:
            yield from leaves(v)
    else:
        yield np.asarray(value)
