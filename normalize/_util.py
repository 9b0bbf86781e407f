"""Small structural helpers shared by the four passes (no rules here)."""
from __future__ import annotations

from tensorlang.nodes import (
    TRUE, Access, Affine, Expr, Gen, Guard, IndexVar, Let, PairType, Proj, RelType, Sum, TensorType, Type,
    Var, conj,
)
from tensorlang.traversal import free_vars


def strip_guards(e: Expr) -> tuple[tuple, Expr]:
    """``[p0] * [p1] * ... * body`` as ``((p0, p1, ...), body)``."""
    preds = []
    while isinstance(e, Guard):
        preds.append(e.pred)
        e = e.body
    return tuple(preds), e


def wrap_guards(preds, body: Expr) -> Expr:
    """The inverse of ``strip_guards`` (``true`` brackets dropped)."""
    for p in reversed(tuple(preds)):
        if p is not TRUE:
            body = Guard(p, body)
    return body


def guard(p, body: Expr) -> Expr:
    return body if p is TRUE else Guard(p, body)


def strip_gens(e: Expr) -> tuple[tuple, Expr]:
    """``gen(i0:s0) gen(i1:s1) ... body`` as ``(((i0, s0), (i1, s1), ...), body)``."""
    dims = []
    while isinstance(e, Gen):
        dims.append((e.var, e.size))
        e = e.body
    return tuple(dims), e


def gens(dims, body: Expr) -> Expr:
    for v, s in reversed(tuple(dims)):
        body = Gen(v, s, body)
    return body


def sums(dims, body: Expr) -> Expr:
    for v, s in reversed(tuple(dims)):
        body = Sum(v, s, body)
    return body


def access(e: Expr, indices) -> Expr:
    for a in indices:
        e = Access(e, a if isinstance(a, Affine) else Affine.var(a))
    return e


def tensor_depth(t: Type) -> tuple[tuple, Type]:
    """The leading tensor sizes of a type and the type under them."""
    sizes = []
    while isinstance(t, TensorType):
        sizes.append(t.size)
        t = t.elem
    return tuple(sizes), t


def has_pair(t: Type) -> bool:
    if isinstance(t, PairType):
        return True
    if isinstance(t, TensorType):
        return has_pair(t.elem)
    return False


def is_path(e: Expr) -> bool:
    """A variable under projections and accesses only (``x``, ``x.0``, ``x[i].1[j]``): cost 0."""
    while isinstance(e, (Proj, Access)):
        e = e.pair if isinstance(e, Proj) else e.tensor
    return isinstance(e, Var)


def path_base(e: Expr) -> Var | None:
    while isinstance(e, (Proj, Access)):
        e = e.pair if isinstance(e, Proj) else e.tensor
    return e if isinstance(e, Var) else None


def let_chain(e: Expr) -> tuple[list, Expr]:
    """``let x0 = e0 in let x1 = e1 in ... out`` as ``([(x0, e0), (x1, e1), ...], out)``."""
    out = []
    while isinstance(e, Let):
        out.append((e.var, e.value))
        e = e.body
    return out, e


def build_lets(bindings, body: Expr) -> Expr:
    for var, value in reversed(list(bindings)):
        body = Let(var, value, body)
    return body


def fresh_indices(sizes, name: str = "j") -> tuple:
    return tuple((IndexVar(name), s) for s in sizes)


def value_inputs(e: Expr) -> tuple[Var, ...]:
    """The free variables of ``e`` that are values (not relations)."""
    return tuple(v for v in free_vars(e) if not isinstance(v.type, RelType))


def conj_all(preds) -> object:
    return conj(*preds) if preds else TRUE
