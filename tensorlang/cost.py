"""The work cost model of Fig. 6 (4.22-4.34), exactly, as a signed sum of point counts.

Every rule of Fig. 6 charges one unit per point of some iteration domain: a multiplication or a black
box (4.25, 4.26) at every point of its enclosing loops and guards; an addition (4.24 *) only where the
guards immediately under both operands hold; a summation (4.30 **) one addition per point where its
predicate holds, less one per outer point where any does.  So the cost of a program is
``sum(coeff * #domain)`` over ``CostTerm``s, each domain a box of loop ranges cut by a predicate, and
the predicate module counts them: concretely at given sizes (relations included), or symbolically in
the size variables where all predicates are affine.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import sympy

from .declarations import body_of
from .dispatch import dispatch
from .errors import TypeCheckError, UnsupportedError
from .nodes import (
    TRUE, Access, Add, Affine, Call, Const, Exists, Expr, Gen, Guard, IndexVar, Let, Max, Mul, Pair, PairType, Pred,
    Proj, RelType, Sum, TensorType, Type, Var, box, compare, conj, strip_guards, sum_chain,
)
from .traversal import free_vars


@dataclass(frozen=True)
class CostTerm:
    """``coeff`` units at every point of ``dims`` (each ``(var, size)``) where ``pred`` holds.

    ``rule`` names the rule of Fig. 6 that charged it."""

    coeff: int
    dims: tuple[tuple[IndexVar, Affine], ...]
    pred: Pred
    rule: str

    @property
    def variables(self) -> tuple[IndexVar, ...]:
        return tuple(v for v, _ in self.dims)

    def domain(self) -> Pred:
        """The predicate over ``variables`` whose points are charged: loop ranges and guards."""
        return conj(box(self.dims), self.pred)


class _Context:
    """The loops and guards around a subexpression."""

    __slots__ = ("dims", "pred")

    def __init__(self, dims=(), pred: Pred = TRUE):
        self.dims, self.pred = dims, pred

    def loop(self, var: IndexVar, size: Affine) -> "_Context":
        return _Context(self.dims + ((var, size),), self.pred)

    def where(self, p: Pred) -> "_Context":
        return _Context(self.dims, conj(self.pred, p))


def cost_terms(expr: Expr) -> list[CostTerm]:
    """The signed point counts whose total is the cost of ``expr`` (memoised on the node)."""

    def compute():
        charges = _Charges()
        charges.charge(body_of(expr), _Context())
        return _merge(charges.terms)

    return expr.memo("cost_terms", compute)


def _merge(terms: list[CostTerm]) -> tuple[CostTerm, ...]:
    merged: dict[tuple, CostTerm] = {}
    for t in terms:
        key = (tuple(id(v) for v, _ in t.dims), tuple(s for _, s in t.dims), t.pred, t.rule)
        old = merged.get(key)
        merged[key] = t if old is None else CostTerm(old.coeff + t.coeff, t.dims, t.pred, t.rule)
    return tuple(t for t in merged.values() if t.coeff != 0)


def _stacked_guard(e: Expr) -> Pred:
    """The predicate immediately around an operand: the conjunction of the brackets stacked on it."""
    return conj(*strip_guards(e)[0])


class _Charges:
    """The terms the rules of Fig. 6 charge for a program, one method ``_cost_<Class>`` per kind of node."""

    def __init__(self):
        self.terms: list[CostTerm] = []

    def charge(self, e: Expr, ctx: _Context) -> None:
        dispatch(self, "_cost_", e, ctx)

    def _cost_Var(self, e: Var | Const, ctx: _Context) -> None:  # 4.22, 4.23
        return

    _cost_Const = _cost_Var

    def _cost_Add(self, e: Add, ctx: _Context) -> None:  # 4.24 (*)
        both = conj(ctx.pred, _stacked_guard(e.left), _stacked_guard(e.right))
        self.terms.append(CostTerm(1, ctx.dims, both, "4.24"))
        self.charge(e.left, ctx)
        self.charge(e.right, ctx)

    def _cost_Mul(self, e: Mul, ctx: _Context) -> None:  # 4.25
        self.terms.append(CostTerm(1, ctx.dims, ctx.pred, "4.25"))
        self.charge(e.left, ctx)
        self.charge(e.right, ctx)

    def _cost_Call(self, e: Call, ctx: _Context) -> None:  # 4.26
        self.terms.append(CostTerm(1, ctx.dims, ctx.pred, "4.26"))
        for a in e.args:
            self.charge(a, ctx)

    def _cost_Pair(self, e: Pair, ctx: _Context) -> None:  # 4.27
        self.charge(e.first, ctx)
        self.charge(e.second, ctx)

    def _cost_Proj(self, e: Proj, ctx: _Context) -> None:  # 4.28
        self.charge(e.pair, ctx)

    def _cost_Gen(self, e: Gen, ctx: _Context) -> None:  # 4.29
        self.charge(e.body, ctx.loop(e.var, e.size))

    def _cost_Sum(self, e: Sum, ctx: _Context) -> None:  # 4.30 (**): consecutive sums and the brackets between them, jointly
        bound, brackets, body = sum_chain(e)
        inner = _Context(ctx.dims + bound, conj(ctx.pred, *brackets))
        self.terms.append(CostTerm(1, inner.dims, inner.pred, "4.30"))
        self.charge(body, inner)
        local = conj(box(bound), inner.pred)
        for v, s in reversed(bound):
            local = Exists(v, s, local)
        self.terms.append(CostTerm(-1, ctx.dims, conj(ctx.pred, local), "4.30"))

    def _cost_Max(self, e: Max, ctx: _Context) -> None:  # as 4.30: one comparison per point of the range
        inner = ctx.loop(e.var, e.size)
        self.terms.append(CostTerm(1, inner.dims, inner.pred, "max"))
        self.charge(e.body, inner)
        self.terms.append(CostTerm(-1, ctx.dims, conj(ctx.pred, compare("<", 0, e.size)), "max"))

    def _cost_Access(self, e: Access, ctx: _Context) -> None:  # 4.31
        self.charge(e.tensor, ctx)

    def _cost_Let(self, e: Let, ctx: _Context) -> None:  # 4.32
        self.charge(e.value, ctx)
        self.charge(e.body, ctx)

    def _cost_Guard(self, e: Guard, ctx: _Context) -> None:  # 4.33, 4.34
        self.charge(e.body, ctx.where(e.pred))

    def _cost_Node(self, e, ctx: _Context) -> None:
        raise UnsupportedError(f"no cost rule for {type(e).__name__}")


# ------------------------------------------------------------------------------------------------
# totals


def cost(expr: Expr, **sizes_or_inputs):
    """``tl.cost``: the exact cost as an int at the given sizes (or inputs, from which sizes and relations
    are taken), or, with no sizes, a SymPy expression in the size variables."""
    if not sizes_or_inputs and expr.sizes:
        return symbolic_cost(expr)
    sizes, relations = sizes_and_relations(expr, sizes_or_inputs)
    return concrete_cost(expr, sizes, relations)


def concrete_cost(expr: Expr, sizes: Mapping[str, int], relations: Mapping[str, object] | None = None) -> int:
    from .predicates import count

    total = 0
    for t in cost_terms(expr):
        total += t.coeff * count(t.domain(), t.variables, dict(sizes), relations or {})
    return total


def symbolic_cost(expr: Expr) -> sympy.Expr:
    """The cost as a polynomial (piecewise where needed) in the size variables; all predicates affine."""
    from .predicates import count_symbolic_sum

    if any(isinstance(v.type, RelType) for v in free_vars(expr)):
        raise UnsupportedError("the cost of a program over data relations or index arrays depends on the data: "
                               "pass them")
    return count_symbolic_sum([(t.coeff, t.domain(), t.variables) for t in cost_terms(expr)])


def sizes_and_relations(expr: Expr, given: Mapping[str, object]):
    """``(sizes, relations)`` of ``expr`` bound from ``given`` (sizes by name, or inputs whose shapes give
    them); relations are needed, since the cost depends on their data."""
    from .inputs import bind

    binding = bind(expr, given, need_values=False)
    relations = {v.name: val for v, val in binding.values.items() if isinstance(v.type, RelType)}
    needed = [v.name for v in free_vars(expr) if isinstance(v.type, RelType) and v.name not in relations]
    if needed:
        raise TypeCheckError(f"the cost depends on the data of relation(s) {', '.join(needed)}: pass them")
    return binding.sizes, relations


def type_size(t: Type, sizes: dict) -> int:
    """$(T) of Fig. 17: the number of scalars in a value of type T."""
    return _Scalars(sizes).count(t)


class _Scalars:
    """$(T) of Fig. 17 at given sizes, one method ``_scalars_<Class>`` per kind of type."""

    def __init__(self, sizes: dict):
        self.sizes = sizes

    def count(self, t: Type) -> int:
        return dispatch(self, "_scalars_", t)

    def _scalars_PairType(self, t: PairType) -> int:
        return self.count(t.first) + self.count(t.second)

    def _scalars_TensorType(self, t: TensorType) -> int:
        return t.size.evaluate({v: self.sizes[v.name] for v in t.size.size_vars}) * self.count(t.elem)

    def _scalars_RelType(self, t: RelType) -> int:
        return 0

    def _scalars_Type(self, t: Type) -> int:
        return 1


def ratio(a: int, b: int) -> float:
    """``a / b``, with ``0 / 0 = 0`` and ``a / 0 = inf``: the ratios of Theorems 6.1 and 6.35."""
    if b == 0:
        return 0.0 if a == 0 else math.inf
    return a / b
