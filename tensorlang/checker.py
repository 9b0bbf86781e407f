"""Well-formedness beyond types: every index variable is bound, and the static bounds proof.

An access ``e[a]`` with ``e : [s]T`` is in range when, at every point at which it is evaluated (under
its enclosing loop ranges and Iverson guards, and the let-bindings it is evaluated in), ``0 <= a < s``.
The proof is an isl implication; where it fails, isl gives a concrete offending point for the message.
Relation atoms in guards count as the bounds they imply (an over-approximation, so the proof is sound).
An atom ``g(a, c)`` of an index array ``g : [p]index[n]`` (a read ``x[g[a]]``, see the parser) reads ``g[a]``:
``0 <= a < p`` is proved as for an access, under the guards around the bracket that holds it.
"""
from __future__ import annotations

from .errors import BoundsError, TypeCheckError
from .nodes import (
    TRUE, Access, Affine, Exists, Expr, Gen, Guard, IndexMapType, IndexVar, Let, Max, Pred, RelAtom, Sum, TensorType,
    box, compare, conj, disj, type_size_vars, walk,
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
    read = err.node.args[0] if isinstance(err.node, RelAtom) else err.node.index
    for s in read.size_vars:
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
        _prove_index_reads(e.pred, dims, pred)
        _check_bounds(e.body, dims, ids, conj(pred, e.pred), seen)
    else:
        for child in e.children:
            for c in child if isinstance(child, tuple) else (child,):
                _check_bounds(c, dims, ids, pred, seen)


def _prove_in_range(e: Access, dims: tuple, pred: Pred) -> None:
    assert isinstance(e.tensor.type, TensorType)
    _prove_index(e, e.index, e.tensor.type.size, dims, pred)


def _prove_index_reads(p: Pred, dims: tuple, pred: Pred) -> None:
    """Prove the reads ``g[a]`` of index arrays that the atoms ``g(a, c)`` of ``p`` make (those whose ``a``
    uses only the loops around: one under ``exists`` is a membership test, false out of range)."""
    bound = {id(v) for v, _ in dims}
    for atom in walk(p):
        if isinstance(atom, RelAtom) and isinstance(atom.rel.type, IndexMapType):
            read, written = atom.args
            if all(id(v) in bound for v in read.index_vars):  # the loop of c = g[a] plays no part in a
                around = tuple((v, s) for v, s in dims if v not in written.index_vars)
                _prove_index(atom, read, atom.rel.type.length, around, pred)


def _prove_index(node, index: Affine, size: Affine, dims: tuple, pred: Pred) -> None:
    """Prove ``0 <= index < size`` wherever ``node`` (an access or an index array's atom) is evaluated."""
    from .predicates import implies, sample_point

    in_range = box([(index, size)])
    where, variables = _relevant(dims, pred, index)
    if implies(where, in_range, variables):
        return
    variables = tuple(v for v, _ in dims)
    where = conj(box(dims), pred)
    bad = conj(where, disj(compare("<", index, 0), compare(">=", index, size)))
    point = sample_point(bad, variables)
    err = _bounds_error(node, size, point, _gathered(pred))
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


def _gathered(pred: Pred) -> str:
    """What the index variables of reads through index arrays around a failed access stand for (``x[g[i]]``
    is read as ``x[g_0]`` under ``[g(i, g_0)]``): ``"; g_0 stands for g[i]"``, or nothing."""
    from .printer import affine_str

    said = [f"{atom.args[1]} stands for {atom.rel.name}[{affine_str(atom.args[0])}]" for atom in walk(pred)
            if isinstance(atom, RelAtom) and isinstance(atom.rel.type, IndexMapType)]
    return "; " + ", ".join(said) if said else ""


def _bounds_error(e: Access | RelAtom, size: Affine, point: dict | None, note: str = "") -> BoundsError:
    from .printer import affine_str, expr_str

    if point:
        at = ", ".join(f"{k.name} = {v}" for k, v in point.items() if isinstance(k, IndexVar))
        sizes = ", ".join(f"{k.name} = {v}" for k, v in point.items() if not isinstance(k, IndexVar))
        where = f" at {at}" if at else ""
        where += f" with {sizes}" if sizes else ""
    else:
        where = ""
    read = f"{e.rel.name}[{affine_str(e.args[0])}]" if isinstance(e, RelAtom) else expr_str(e)
    err = BoundsError(f"{read} may be read{where}, outside [0, {affine_str(size)}){note}")
    err.node = e
    return err
