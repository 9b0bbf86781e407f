"""Well-formedness beyond types: every index variable is bound, and the static bounds proof.

An access ``e[a]`` with ``e : [s]T`` is in range when, at every point at which it is evaluated (under
its enclosing loop ranges and Iverson guards, and the let-bindings it is evaluated in), ``0 <= a < s``.
The proof is an isl implication; where it fails, isl gives a concrete offending point for the message.
Relation atoms in guards count as the bounds they imply (an over-approximation, so the proof is sound).
"""
from __future__ import annotations

from .errors import BoundsError, TypeCheckError
from .nodes import (
    TRUE, Access, Affine, Exists, Expr, Gen, Guard, IndexVar, Let, Max, Pred, Sum, TensorType, box, compare, conj,
    disj, type_size_vars, walk,
)
from .spelling import did_you_mean
from .traversal import free_index_vars, free_vars


def check(expr: Expr) -> Expr:
    """Check ``expr`` and return it; raises ``TypeCheckError`` or ``BoundsError``."""
    free = free_index_vars(expr)
    if free:
        raise TypeCheckError(f"index variable(s) {', '.join(v.name for v in free)} used but not bound")
    try:
        expr.memo("checked", lambda: _check_bounds(expr, (), (), TRUE, set()) or True)
    except BoundsError as err:
        hint = _stray_size_hint(expr, err)
        if not hint:
            raise
        new = BoundsError(f"{err.message}; {hint}")
        new.node = err.node
        raise new from None
    return expr


def _stray_size_hint(expr: Expr, err: BoundsError) -> str:
    """Where the failed access reads a name bound nowhere (``c[jj]`` under ``sum(j:m)``), which is a size
    variable only because it appears in an index: say so, and name the closest index in scope."""
    sized = set()  # sizes that a type or a range gives a meaning to
    for v in free_vars(expr):
        sized.update(type_size_vars(v.type))
    for n in walk(expr):
        if isinstance(n, (Gen, Sum, Max, Exists)):
            sized.update(n.size.size_vars)
        elif isinstance(n, Let):
            sized.update(type_size_vars(n.var.type))
    for s in err.node.index.size_vars:
        if s not in sized:
            guess = did_you_mean(s.name, err.scope)
            return f"{s.name} is bound nowhere, so it is taken as a size variable here{guess}"
    return ""


def _check_bounds(e, dims: tuple, ids: tuple, pred: Pred, seen: set) -> None:
    """``ids`` are the ids of the loop variables of ``dims``: the key of a visit, hashed in C."""
    key = (id(e), ids, id(pred))
    if key in seen or not isinstance(e, Expr):
        return
    seen.add(key)
    if isinstance(e, Access):
        _prove_in_range(e, dims, pred)
        _check_bounds(e.tensor, dims, ids, pred, seen)
    elif isinstance(e, (Gen, Sum, Max)):
        _check_bounds(e.body, dims + ((e.var, e.size),), ids + (id(e.var),), pred, seen)
    elif isinstance(e, Guard):
        _check_bounds(e.body, dims, ids, conj(pred, e.pred), seen)
    else:
        for child in e.children:
            for c in child if isinstance(child, tuple) else (child,):
                _check_bounds(c, dims, ids, pred, seen)


def _prove_in_range(e: Access, dims: tuple, pred: Pred) -> None:
    from .predicates import implies, sample_point

    size = e.tensor.type.size
    assert isinstance(e.tensor.type, TensorType)
    in_range = box([(e.index, size)])
    where, variables = _relevant(dims, pred, e.index)
    if implies(where, in_range, variables):
        return
    variables = tuple(v for v, _ in dims)
    where = conj(box(dims), pred)
    bad = conj(where, disj(compare("<", e.index, 0), compare(">=", e.index, size)))
    point = sample_point(bad, variables)
    err = _bounds_error(e, size, point)
    err.scope = [v.name for v in variables]  # the index variables in scope, innermost last
    raise err


def _relevant(dims: tuple, pred: Pred, index: Affine) -> tuple[Pred, tuple]:
    """Where the access is evaluated, with every loop that neither the guards nor the index mention
    projected out exactly: ``exists(v) 0 <= v < s`` is ``0 < s``.  The proof then grows with the
    variables the access involves, not with the nesting depth."""
    mentioned = {id(v) for v in free_index_vars(pred) + index.index_vars}
    kept = [(v, s) for v, s in dims if id(v) in mentioned]
    nonempty = dict.fromkeys(s for v, s in dims if id(v) not in mentioned)
    where = conj(pred, box(kept), *(compare("<", 0, s) for s in nonempty))
    return where, tuple(v for v, _ in kept)


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
