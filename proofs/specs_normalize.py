"""The normalisation passes' obligations (section 5): rules 5.1-5.34 and the SSA fix-ups."""
from __future__ import annotations

from hypothesis import strategies as st

from tensorlang.nodes import Affine, Gen, Guard, IndexVar, Let, Pair, Proj, Sum, Var, compare
from tensorlang.normalize import (
    GEN_PUSHOUT, LET_LIFT, PAIR_ELIM, PAIR_OUTPUT, SSA, SSA_FINISH, SSA_NAMES, SSA_OUTPUT, gen_pushout, let_lift,
    pair_elim,
)
from tensorlang.normalize import normal_forms as nf
from tensorlang.rules import run_pass
from tests.strategies import N, max_programs, nested_let_programs, programs

from .registry import PassSpec, register


@st.composite
def _pair_outputs(draw):
    """Outputs that pair elimination must take apart: ``[p] * (e0, e1)``, a tensor of pairs
    ``gen(i:n) (e0, e1)`` (never made by ``programs``), and a pair read out of one."""
    poly = draw(st.booleans())
    a = draw(programs(max_depth=2, scalar_output=True, allow_relations=False, allow_black_boxes=not poly))
    b = draw(programs(max_depth=2, scalar_output=True, allow_relations=False, allow_black_boxes=not poly))
    i = IndexVar("i")
    how = draw(st.integers(0, 2))
    if how == 0:
        return Guard(compare("<", 1, N), Pair(a, b))
    tensor = Gen(i, N, Pair(a, b))
    if how == 1:
        return tensor
    return Guard(compare("<", 0, N), tensor[N - 1])

@st.composite
def _projected_lets(draw):
    """``(let t = a in (b, t)).1``: a let right under a projection (5.5)."""
    a = draw(programs(max_depth=2, allow_relations=False))
    b = draw(programs(max_depth=1, scalar_output=True, allow_relations=False))
    t = Var("t_proj", a.type)
    return Proj(1, Let(t, a, Pair(b, t)))


def _small_polynomials(draw):
    """Two scalar programs of depth 1 without relations or black boxes."""
    return tuple(draw(programs(max_depth=1, scalar_output=True, allow_relations=False, allow_black_boxes=False))
                 for _ in range(2))


@st.composite
def _projections(draw):
    """Polynomial programs small enough for the symbolic check with a projection right above a bracket
    (5.16), a generator (5.12) or another tensor of pairs (5.14)."""
    a, b = _small_polynomials(draw)
    pairs = Gen(IndexVar("i"), N, Pair(a, b))
    how = draw(st.integers(0, 2))
    if how == 0:
        return Proj(1, Guard(compare("<", 1, N), Pair(a, b)))
    if how == 1:
        return Guard(compare("<", 0, N), Proj(0, pairs[N - 1]))
    return Guard(compare("<", 0, N), Proj(1, Guard(compare("<", 1, N), pairs)[N - 1]))


@st.composite
def _copies(draw):
    """``let t = gen(i:n) (a, b) in let u = gen(k:n) t[k] in sum(k:n) u[k].0 * b``: a statement that copies
    another (5.26), polynomial and small enough for the symbolic check."""
    a, b = _small_polynomials(draw)
    pairs = Gen(IndexVar("i"), N, Pair(a, b))
    k = IndexVar("k")
    t, u = Var("t_copied", pairs.type), Var("u_copy", pairs.type)
    return Let(t, pairs, Let(u, Gen(k, N, t[Affine.var(k)]), Sum(k, N, Proj(0, u[Affine.var(k)]) * b)))


_SOURCES = (
    ("programs", programs(), 4),
    ("nested lets", nested_let_programs(), 3),
    ("polynomial", programs(allow_black_boxes=False), 2),
    ("pair outputs", _pair_outputs(), 1),
    ("projected lets", _projected_lets(), 1),
    ("projections", _projections(), 1),
    ("copies", _copies(), 1),
    ("maxima", max_programs(), 1),
)


def _lifted(e):
    return let_lift(e)


def _eliminated(e):
    return pair_elim(let_lift(e))


def _pushed(e):
    return gen_pushout(pair_elim(let_lift(e)))


def _pushed_but_523(e):
    """Generators pushed out except through brackets (5.23 left out), so that 5.27 has work to do."""
    return run_pass(pair_elim(let_lift(e)), (GEN_PUSHOUT.without("5.23"),))


register(PassSpec(
    "let_lift", (LET_LIFT,), lambda e, t: run_pass(e, (LET_LIFT,), t),
    prepare=lambda e: e, why_not=nf.why_not_let_lifted, sources=_SOURCES,
    doc="Fig. 7, rules 5.1-5.10",
))

register(PassSpec(
    "pair_elim", (PAIR_OUTPUT, PAIR_ELIM), lambda e, t: run_pass(e, (PAIR_OUTPUT, PAIR_ELIM), t),
    prepare=_lifted, why_not=nf.why_not_pair_eliminated, sources=_SOURCES,
    doc="Fig. 8, rules 5.11-5.20",
))

register(PassSpec(
    "gen_pushout", (GEN_PUSHOUT,), lambda e, t: run_pass(e, (GEN_PUSHOUT,), t),
    prepare=_eliminated, why_not=nf.why_not_gen_pushed_out, sources=_SOURCES,
    doc="Fig. 9, rules 5.21-5.24",
))

register(PassSpec(
    "tensor_ssa", (SSA_OUTPUT, SSA, SSA_FINISH, SSA_NAMES),
    lambda e, t: run_pass(e, (SSA_OUTPUT, SSA, SSA_FINISH, SSA_NAMES), t),
    prepare=_pushed, why_not=nf.why_not_tensor_ssa, sources=_SOURCES,
    doc="Fig. 10-12, rules 5.25-5.34 and the fix-ups",
))

register(PassSpec(
    "tensor_ssa (5.23 left out before it)", (SSA_OUTPUT, SSA, SSA_FINISH, SSA_NAMES),
    lambda e, t: run_pass(e, (SSA_OUTPUT, SSA, SSA_FINISH, SSA_NAMES), t),
    prepare=_pushed_but_523, why_not=nf.why_not_tensor_ssa, sources=_SOURCES[:2],
    doc="brackets over generators reach 5.27",
))
