"""Well-formedness beyond types: every index variable is bound, and the static bounds proof.

An access ``e[a]`` with ``e : [s]T`` is in range when, at every point at which it is evaluated (under
its enclosing loop ranges and Iverson guards, and the let-bindings it is evaluated in), ``0 <= a < s``.
The proof is an isl implication; where it fails, isl gives a concrete offending point for the message.
Relation atoms in guards count as the bounds they imply (an over-approximation, so the proof is sound).
"""
from __future__ import annotations

from .errors import BoundsError, TypeCheckError
from .nodes import (
    TRUE, Access, Affine, Expr, Gen, Guard, IndexVar, Pred, Sum, TensorType, box, compare, conj, disj,
)
from .traversal import free_index_vars


def check(expr: Expr) -> Expr:
    """Check ``expr`` and return it; raises ``TypeCheckError`` or ``BoundsError``."""
    free = free_index_vars(expr)
    if free:
        raise TypeCheckError(f"index variable(s) {', '.join(v.name for v in free)} used but not bound")
    expr.memo("checked", lambda: _check_bounds(expr, (), TRUE, set()) or True)
    return expr


def _check_bounds(e, dims: tuple, pred: Pred, seen: set) -> None:
    key = (id(e), tuple(id(v) for v, _ in dims), id(pred))
    if key in seen or not isinstance(e, Expr):
        return
    seen.add(key)
    if isinstance(e, Access):
        _prove_in_range(e, dims, pred)
        _check_bounds(e.tensor, dims, pred, seen)
    elif isinstance(e, (Gen, Sum)):
        _check_bounds(e.body, dims + ((e.var, e.size),), pred, seen)
    elif isinstance(e, Guard):
        _check_bounds(e.body, dims, conj(pred, e.pred), seen)
    else:
        for child in e.children:
            for c in child if isinstance(child, tuple) else (child,):
                _check_bounds(c, dims, pred, seen)


def _prove_in_range(e: Access, dims: tuple, pred: Pred) -> None:
    from .predicates import implies, sample_point

    size = e.tensor.type.size
    assert isinstance(e.tensor.type, TensorType)
    variables = tuple(v for v, _ in dims)
    where = conj(box(dims), pred)
    in_range = box([(e.index, size)])
    if implies(where, in_range, variables):
        return
    bad = conj(where, disj(compare("<", e.index, 0), compare(">=", e.index, size)))
    point = sample_point(bad, variables)
    raise _bounds_error(e, size, point)


def _bounds_error(e: Access, size: Affine, point: dict | None) -> BoundsError:
    from .printer import affine_str, expr_str

    if point:
        at = ", ".join(f"{k.name} = {v}" for k, v in point.items() if isinstance(k, IndexVar))
        sizes = ", ".join(f"{k.name} = {v}" for k, v in point.items() if not isinstance(k, IndexVar))
        where = f" at {at}" if at else ""
        where += f" with {sizes}" if sizes else ""
    else:
        where = ""
    err = BoundsError(f"{expr_str(e)} may be read{where}, outside [0, {affine_str(size)})")
    err.node = e
    return err
