"""Pair elimination (section 5.2, Fig. 8, rules 5.11-5.20): struct of arrays for every intermediate.

Precondition: let-lifted.  Postcondition (``normal_forms.is_pair_eliminated``)::

    Le ::= let x = e in Le | Oe        every let-bound x of a type without pairs
    Oe ::= (Oe, Oe) | e                 pairs built only at the output
    Ie ::= Ie.0 | Ie.1 | Ie[a] | x      projections only on inputs (x free)

**Typed rules.**  Our nodes are typed, and several of Fig. 8's right sides are only typed "up to the
isomorphism ``[n](T0 x T1) = [n]T0 x [n]T1``" (the paper says so): ``pi0 (gen e)`` or ``pi0 (e[a])``
with ``e : [n](T0 x T1)`` have no type here.  Where the paper projects a tensor of pairs, we write the
projection *under* the tensor levels, ``pi0 e := gen(j) pi0 (e[j])`` for ``e : [n](T0 x T1)``, and
push it in structurally with the same equations (``push`` below):

* 5.12 ``pi_k ((gen(i) e)[a])  ->  (gen(i) pi_k e)[a]``: Fig. 8's ``pi_k (gen e) = gen (pi_k e)``, which
  in a typed program only occurs under an access;
* 5.14 ``pi_k (e[a])  ->  (pi_k e)[a]`` for e not a generator or an input: the projection of the tensor
  ``e`` pushed through its brackets (5.16), generators (5.12), accesses (5.14) and pair constructors
  (5.11) at once;
* 5.18-5.20 splits ``let x : [n..](T0 x T1) = e0`` into ``x0 = pi0 e0`` and ``x1 = pi1 e0`` (each
  pushed in fully, so that no costly term is computed twice, the paper's cost argument for this rule
  made into one step) and replaces x by ``gen(j..) (x0[j..], x1[j..])`` (5.13 and 5.15 read backwards:
  the struct of arrays seen as an array of structs, at cost 0); the projections that meet it reduce
  by 5.12 and 5.11.

**Inputs and outputs of pair type keep working**: inputs are only projected (a tensor-of-pairs input
``x : [n](R x R)`` is read as ``x[a].0``, an input expression); an output of a type with a pair under
a tensor is first bound to a variable (the root rule "5.13 split the output"), which 5.18 splits and
replaces by the constructor ``gen(j) (out0[j], out1[j])``.
"""
from __future__ import annotations

from tensorlang.nodes import (
    Access, Gen, Guard, IndexVar, Let, Pair, PairType, Proj, build_lets, gens, has_pair, let_chain, tensor,
    tensor_dims,
)
from tensorlang.rules import RuleTable, register_table, rule, run_pass
from tensorlang.substitute import substitute_vars

from ._util import is_path

__all__ = ["PAIR_ELIM", "PAIR_OUTPUT", "pair_elim", "push", "is_output_constructor"]


def push(k: int, e, d: int):
    """``pi_k`` applied ``d`` tensor levels inside ``e`` (``e : [n1]..[nd](T0 x T1)``), pushed in through
    brackets (5.16), generators (5.12), accesses (5.14), projections and pair constructors (5.11).  A
    path (an input or variable under projections and accesses) stays, projected under fresh generator
    indices: ``gen(j..) pi_k (x[j..])``.  ``None`` where a ``let`` is in the way (not let-lifted)."""
    if isinstance(e, Guard):
        inner = push(k, e.body, d)
        return None if inner is None else Guard(e.pred, inner)
    if is_path(e):
        return _project_path(k, e, d)
    if isinstance(e, Access):
        inner = push(k, e.tensor, d + 1)
        return None if inner is None else Access(inner, e.index)
    if d == 0 and isinstance(e, Pair):
        return e.first if k == 0 else e.second
    if d > 0 and isinstance(e, Gen):
        inner = push(k, e.body, d - 1)
        return None if inner is None else Gen(e.var, e.size, inner)
    if isinstance(e, Proj):
        inner = push(e.index, e.pair, d)
        return None if inner is None else push(k, inner, d)
    return None


def _project_path(k: int, e, d: int):
    if d == 0:
        return Proj(k, e)
    sizes, _ = tensor_dims(e.type)
    dims = [(IndexVar("j"), s) for s in sizes[:d]]
    return gens(dims, Proj(k, e[tuple(v for v, _ in dims)]))


def _pair_levels(t):
    """``(sizes, pair)`` when ``t = [n1]..[nd](T0 x T1)``, else None."""
    sizes, inner = tensor_dims(t)
    return (sizes, inner) if isinstance(inner, PairType) else None


@rule("5.11 project pair", Proj)
def proj_pair(e, ctx):
    """``pi_k (e0, e1)  ->  e_k``.  Cost: drops the other component (4.27)."""
    if isinstance(e.pair, Pair):
        return e.pair.first if e.index == 0 else e.pair.second
    return None


@rule("5.12 project gen", Proj)
def proj_gen(e, ctx):
    """``pi_k ((gen(i:n) e)[a])  ->  (gen(i:n) pi_k e)[a]``: Fig. 8's ``pi_k gen e = gen pi_k e``, typed."""
    t = e.pair
    if isinstance(t, Access) and isinstance(t.tensor, Gen):
        g = t.tensor
        return Access(Gen(g.var, g.size, Proj(e.index, g.body)), t.index)
    return None


@rule("5.14 project access", Proj, equations=("5.14", "5.12", "5.16"))
def proj_access(e, ctx):
    """``pi_k (e[a])  ->  (pi_k e)[a]`` with ``pi_k e`` pushed into the tensor of pairs e (``push``), for e
    neither a generator (5.12) nor a path (an input expression, which stays)."""
    t = e.pair
    if not isinstance(t, Access) or isinstance(t.tensor, Gen) or is_path(t):
        return None
    inner = push(e.index, t.tensor, 1)
    return None if inner is None else Access(inner, t.index)


@rule("5.16 project guard", Proj)
def proj_guard(e, ctx):
    """``pi_k ([p] * e)  ->  [p] * pi_k e``."""
    if isinstance(e.pair, Guard):
        g = e.pair
        return Guard(g.pred, Proj(e.index, g.body))
    return None


@rule("5.17 guard pair", Guard)
def guard_pair(e, ctx):
    """``[p] * (e0, e1)  ->  ([p] * e0, [p] * e1)``; a pair-typed input under the bracket is taken apart
    first, ``[p] * x -> ([p] * x.0, [p] * x.1)`` (cost 0 either way)."""
    if isinstance(e.body, Pair):
        return Pair(Guard(e.pred, e.body.first), Guard(e.pred, e.body.second))
    if isinstance(e.body.type, PairType) and is_path(e.body):
        return Pair(Guard(e.pred, Proj(0, e.body)), Guard(e.pred, Proj(1, e.body)))
    return None


def _constructor(x0, x1, sizes):
    """``gen(j..) (x0[j..], x1[j..])``: the pair of tensors seen as a tensor of pairs (cost 0)."""
    dims = [(IndexVar("j"), s) for s in sizes]
    idx = tuple(v for v, _ in dims)
    return gens(dims, Pair(x0[idx], x1[idx]))


def _split_type(sizes, elem):
    return tensor(sizes, elem.first), tensor(sizes, elem.second)


@rule("5.18 split pair let", Let, equations=("5.18", "5.19", "5.20", "5.13", "5.15"))
def split_let(e, ctx):
    """``let x : [n..](T0 x T1) = e0 in e1  ->  let x0 : [n..]T0 = pi0 e0 in let x1 : [n..]T1 = pi1 e0 in
    [x -> (x0, x1)] e1`` (5.18-5.20), where ``pi_k e0`` is pushed in fully (``push``) and ``(x0, x1)`` at a
    tensor type is the constructor ``gen(j..) (x0[j..], x1[j..])``.  Cost: the two pushed values split
    e0's work between them at its pair constructors; variables and constructors cost nothing."""
    levels = _pair_levels(e.var.type)
    if levels is None:
        return None
    sizes, elem = levels
    d = len(sizes)
    v0, v1 = push(0, e.value, d), push(1, e.value, d)
    if v0 is None or v1 is None:
        return None
    t0, t1 = _split_type(sizes, elem)
    x0 = ctx.fresh_var(e.var.name + "_0", t0)
    x1 = ctx.fresh_var(e.var.name + "_1", t1)
    body = substitute_vars(e.body, {e.var: _constructor(x0, x1, sizes)})
    return Let(x0, v0, Let(x1, v1, body))


def is_output_constructor(e, dims=()) -> bool:
    """``gen(j..) (leaf, leaf)`` nested: pairs under generators whose leaves are paths accessed at exactly
    the generator indices (``out0[j]``), or pair-free at top level."""
    if isinstance(e, Gen):
        return is_output_constructor(e.body, dims + (e.var,))
    if isinstance(e, Pair):
        return is_output_constructor(e.first, dims) and is_output_constructor(e.second, dims)
    if not dims:
        return not has_pair(e.type) or is_path(e)
    idx = []
    while isinstance(e, Access) and len(idx) < len(dims):
        idx.append(e.index)
        e = e.tensor
    idx.reverse()
    return (is_path(e) and not has_pair(e.type) and len(idx) == len(dims)
            and all(a.terms == ((v, 1),) and a.const == 0 for a, v in zip(idx, dims)))


def _output_ok(e) -> bool:
    """Pairs of outputs, inputs, pair-free values and constructors are outputs pair elimination keeps."""
    if isinstance(e, Pair):
        return _output_ok(e.first) and _output_ok(e.second)
    if isinstance(e, Guard) and isinstance(e.type, PairType) and (isinstance(e.body, Pair) or is_path(e.body)):
        return _output_ok(e.body)  # 5.17 takes it apart
    return not has_pair(e.type) or is_path(e) or is_output_constructor(e)


@rule("5.13 split the output", (), root=True, equations=("5.13",))
def split_output(e, ctx):
    """An output of a pair type that is not built by pairs, such as ``gen(i) (e0, e1)`` or ``t[a]`` with
    ``t : [n](R x R)``, is bound to a variable, ``let out = .. in out``, which 5.18 splits and replaces by
    ``(out0, out1)``, or ``gen(j) (out0[j], out1[j])`` under a tensor: 5.13 for outputs, with the
    output's type kept.  Cost 0."""
    bindings, out = let_chain(e)
    if _output_ok(out):
        return None
    var = ctx.fresh_var("out", out.type)
    return build_lets(bindings, Let(var, out, var))


PAIR_OUTPUT = register_table(RuleTable(
    "pair-elim outputs", [split_output],
    doc="Bind an output with a pair under a tensor to a variable, for 5.18 to split.",
))

PAIR_ELIM = register_table(RuleTable(
    "pair-elim",
    [proj_pair, proj_gen, proj_access, proj_guard, guard_pair, split_let],
    doc="Fig. 8: struct of arrays for every intermediate; pairs only at inputs and the output.",
))

PASS = (PAIR_OUTPUT, PAIR_ELIM)


def pair_elim(expr, trace=None):
    """``tl.normalize.pair_elim``: every intermediate in struct-of-arrays form, projections only on inputs,
    pairs only built at the output (Fig. 8).  Expects a let-lifted program."""
    return run_pass(expr, PASS, trace)
