"""The statements of a Tensor SSA program: one class per form of Fig. 10, and the one classifier.

A right-hand side ``let X = E`` is one of::

    E ::= pi..pi x                                       Input
        | gen(i..) c                                     Constant
        | gen(i..) ([p0] * X0[i..] + [p1] * X1[i..])     Addition
        | gen(i..) [p] * f(X0[i..], ...)                 Map
        | gen(g..) sum(s..) [p] * X0[j0..] * X1[j1..]    BinaryContraction
        | gen(g..) sum(s..) [p] * X0[j..]                UnaryContraction
        | gen(g..) [p] * max(r..) X0[g.., r..]           MaxReduction

(both contractions are ``Contraction``s; a tensor of pairs is input as ``gen(j..) pi..(x[j..])``), where
every X is a let-bound variable (not an input) read down to a scalar at index variables: those of the
generators, and of the sums in a contraction.

``classify(var, value, inputs)`` is the statement ``let var = value`` as an instance of its form's class,
or None when ``value`` is in none of them; ``statements(program)`` is a let-chain program as its list of
statements.  The translation to Tensor SSA (``tensor_ssa``), the normal-form check (``normal_forms``)
and the adjoint (``derive/adjoint``) all classify right-hand sides here; the structural tests that the
translation shares with the classifier (``ssa_access``, ``exact_access``, ``input_form`` ...) are here
too.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from tensorlang.errors import UnsupportedError
from tensorlang.nodes import (
    Access, Add, Affine, Call, Const, Expr, IndexVar, Max, Mul, Pred, Proj, R, Var, conj, gens, let_chain,
    strip_gens, strip_guards, strip_maxes, strip_sums,
)
from tensorlang.traversal import free_vars

from ._util import is_path

__all__ = [
    "Operand", "Statement", "Input", "Constant", "Addition", "Map", "Contraction", "BinaryContraction",
    "UnaryContraction", "MaxReduction", "classify", "statements", "read", "bare", "ssa_access", "exact_access",
    "input_form",
    "is_input_statement", "contraction_body",
]


# --------------------------------------------------------------------------------------------------
# the statement classes


@dataclass(frozen=True)
class Operand:
    """``X[idx]``: an SSA variable read at index variables (``idx`` is empty for a scalar)."""

    var: Var
    idx: tuple[IndexVar, ...]

    def read(self, mapping: Mapping[IndexVar, object] | None = None) -> Expr:
        """``X[idx]``, each index variable replaced by its image under ``mapping`` where it has one."""
        return read(self.var, self.idx if mapping is None else [mapping.get(v, v) for v in self.idx])


@dataclass(frozen=True, kw_only=True)
class Statement:
    """``let var = value`` with ``value`` in one of the forms of Fig. 10 (``var`` is None for a right-hand
    side classified on its own): ``dims`` are its generator dimensions ``(index variable, size)``,
    ``operands`` the SSA variables it reads (none for an input or a constant)."""

    var: Var | None
    value: Expr
    dims: tuple
    operands: tuple[Operand, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Input(Statement):
    """``pi..pi x``: the input ``base`` under the projections ``path`` (the one applied to x first).  A tensor
    of pairs is read as a struct of arrays, ``gen(j..) pi..(x[j..])``: then ``dims`` is not empty."""

    base: Var
    path: tuple[int, ...]


@dataclass(frozen=True, kw_only=True)
class Constant(Statement):
    """``gen(i..) c``."""


@dataclass(frozen=True, kw_only=True)
class Addition(Statement):
    """``gen(i..) ([p0] * X0[i..] + [p1] * X1[i..])``: ``term_preds`` are the brackets on the terms."""

    term_preds: tuple[Pred, ...]


@dataclass(frozen=True, kw_only=True)
class Map(Statement):
    """``gen(i..) [pred] * fn(X0[i..], ...)``: the black box ``fn`` applied pointwise."""

    pred: Pred
    fn: str


@dataclass(frozen=True, kw_only=True)
class Contraction(Statement):
    """``gen(g..) sum(summed..) [pred] * X0[j0..] (* X1[j1..])``: every index a generator or summation
    variable."""

    pred: Pred
    summed: tuple


@dataclass(frozen=True, kw_only=True)
class BinaryContraction(Contraction):
    """A contraction of two operands."""


@dataclass(frozen=True, kw_only=True)
class UnaryContraction(Contraction):
    """A contraction of one operand (a sum, or with no sums a guarded copy)."""


@dataclass(frozen=True, kw_only=True)
class MaxReduction(Statement):
    """``gen(g..) [pred] * max(reduced..) X0[g.., reduced..]``: the maximum of the operand over its last
    dimensions (``min`` is ``-max -``, a map and a contraction around it); the operand is read at exactly
    the generator then the reduced variables."""

    pred: Pred
    reduced: tuple


# --------------------------------------------------------------------------------------------------
# the classifier


def classify(var: Var | None, value: Expr, inputs) -> Statement | None:
    """``let var = value`` as a statement of its Fig. 10 form, or None if ``value`` is in none of them
    (``inputs``: the program's input variables)."""
    if is_input_statement(value, inputs):
        return _input(var, value)
    dims, body = strip_gens(value)
    if isinstance(body, Const):
        return Constant(var=var, value=value, dims=dims)
    if isinstance(body, Add):
        terms = [_strip_guards(t) for t in (body.left, body.right)]
        if not all(exact_access(t, inputs, dims) for _, t in terms):
            return None
        return Addition(var=var, value=value, dims=dims, operands=_operands([t for _, t in terms], inputs),
                        term_preds=tuple(p for p, _ in terms))
    preds, head = strip_guards(body)
    if isinstance(head, Call):
        if len(preds) > 1 or not all(exact_access(a, inputs, dims) for a in head.args):
            return None
        return Map(var=var, value=value, dims=dims, operands=_operands(head.args, inputs), pred=conj(*preds),
                   fn=head.fn)
    if isinstance(head, Max):
        reduced, operand = strip_maxes(head)
        if len(preds) > 1 or not exact_access(operand, inputs, dims + reduced):
            return None
        return MaxReduction(var=var, value=value, dims=dims, operands=_operands([operand], inputs),
                            pred=conj(*preds), reduced=reduced)
    summed, e = strip_sums(body)
    preds, head = strip_guards(e)
    allowed = [v for v, _ in dims] + [v for v, _ in summed]
    if len(preds) > 1 or not contraction_body(head, inputs, allowed):
        return None
    factors = (head.left, head.right) if isinstance(head, Mul) else (head,)
    form = BinaryContraction if len(factors) == 2 else UnaryContraction
    return form(var=var, value=value, dims=dims, operands=_operands(factors, inputs), pred=conj(*preds),
                summed=summed)


def statements(program: Expr) -> list[Statement]:
    """The let chain of a Tensor SSA program as its statements, first to last; a right-hand side in
    none of the forms is an ``UnsupportedError``."""
    inputs = frozenset(free_vars(program))
    bindings, _ = let_chain(program)
    out = []
    for var, value in bindings:
        stmt = classify(var, value, inputs)
        if stmt is None:
            raise UnsupportedError(f"not a Tensor SSA right-hand side: {var.name} = {value!r}")
        out.append(stmt)
    return out


def _input(var, value) -> Input:
    dims, e = strip_gens(value)
    path = []
    while isinstance(e, (Proj, Access)):
        if isinstance(e, Proj):
            path.append(e.index)
            e = e.pair
        else:
            e = e.tensor
    return Input(var=var, value=value, dims=dims, base=e, path=tuple(reversed(path)))


def _operands(accesses, inputs) -> tuple[Operand, ...]:
    return tuple(Operand(*ssa_access(a, inputs)) for a in accesses)


def _strip_guards(e: Expr):
    """The stacked brackets on ``e`` as one predicate, and what they guard."""
    preds, body = strip_guards(e)
    return conj(*preds), body


# --------------------------------------------------------------------------------------------------
# the structural tests


def read(e: Expr, indices) -> Expr:
    """``e[a0][a1]...``: ``e`` read at ``indices`` (affine forms or index variables)."""
    for a in indices:
        e = Access(e, a if isinstance(a, Affine) else Affine.var(a))
    return e


def bare(a: Affine):
    """The index variable ``a`` is, or None."""
    if a.const == 0 and len(a.terms) == 1 and a.terms[0][1] == 1 and isinstance(a.terms[0][0], IndexVar):
        return a.terms[0][0]
    return None


def ssa_access(e, inputs, allowed=None):
    """``X[j..]`` with X a let-bound variable (not an input), indexed down to a scalar at bare index
    variables (among ``allowed`` if given): ``(X, (j..))``, or None."""
    if e.type is not R:
        return None
    idx = []
    while isinstance(e, Access):
        v = bare(e.index)
        if v is None or (allowed is not None and not any(v is w for w in allowed)):
            return None
        idx.append(v)
        e = e.tensor
    if not isinstance(e, Var) or e in inputs:
        return None
    idx.reverse()
    return e, tuple(idx)


def exact_access(e, inputs, dims) -> bool:
    """``X[i0, i1, ..]`` at exactly the generator indices ``dims``, in order."""
    found = ssa_access(e, inputs)
    return found is not None and len(found[1]) == len(dims) and all(a is v for a, (v, _) in zip(found[1], dims))


def contraction_body(b, inputs, allowed) -> bool:
    """``X0[j0..] * X1[j1..]`` or ``X0[j..]``, every index among ``allowed``."""
    if isinstance(b, Mul):
        return ssa_access(b.left, inputs, allowed) is not None and ssa_access(b.right, inputs, allowed) is not None
    return ssa_access(b, inputs, allowed) is not None


def input_form(path, inputs):
    """For a path over an input, ``(E, inner, outer)``: the input statement E (its projections, with the
    accesses taken inside a projection turned into generators, struct of arrays) and the indices at
    which the path reads it.  None if the path is not over an input."""
    ops = []
    e = path
    while isinstance(e, (Proj, Access)):
        ops.append(e)
        e = e.pair if isinstance(e, Proj) else e.tensor
    if not isinstance(e, Var) or e not in inputs:
        return None
    ops.reverse()  # innermost first
    last_proj = max((k for k, op in enumerate(ops) if isinstance(op, Proj)), default=-1)
    inner, dims, node = [], [], e
    for op in ops[:last_proj + 1]:
        if isinstance(op, Proj):
            node = Proj(op.index, node)
        else:
            j = IndexVar("j")
            dims.append((j, node.type.size))
            inner.append(op.index)
            node = Access(node, Affine.var(j))
    outer = [op.index for op in ops[last_proj + 1:]]
    return gens(dims, node), tuple(inner), tuple(outer)


def is_input_statement(v, inputs) -> bool:
    """``v`` is the input form ``pi..pi x`` (or ``gen(j..) pi..(x[j..])``)."""
    dims, body = strip_gens(v)
    if not is_path(body):
        return False
    form = input_form(body, inputs)
    if form is None:
        return False
    E, inner, outer = form
    if outer or len(inner) != len(dims):
        return False
    if not dims:
        return E is v
    return E == v
