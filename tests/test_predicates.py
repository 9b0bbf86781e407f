"""Tests of the predicate module (tensorlang.predicates) and point counting (tensorlang.counting).

Every answer is checked against brute force: a tiny independent evaluator of predicates, run over
small boxes of index values at small sizes.
"""
from __future__ import annotations

import itertools

import islpy as isl
import numpy as np
import pytest
import sympy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tensorlang import predicates as P
from tensorlang.counting import (
    count, count_projection, count_projection_symbolic, count_symbolic, count_symbolic_sum,
)
from tensorlang.errors import UnsupportedError
from tensorlang.nodes import (
    FALSE, TRUE, Affine, Cmp, Exists, IndexVar, RelAtom, RelType, SizeVar, Var, compare, conj, disj,
)

try:  # tests/ on sys.path (pytest's default for a folder without __init__.py)
    import interpreter
except ImportError:  # tests/ as a package
    from tests import interpreter

i, j, k, l = IndexVar("i"), IndexVar("j"), IndexVar("k"), IndexVar("l")
n, m = SizeVar("n"), SizeVar("m")
A = Affine.var
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


def rng(v, lo, hi):
    """``lo <= v < hi``."""
    return conj(compare("<=", lo, v), compare("<", v, hi))


def rel(name, *sizes):
    return Var(name, RelType(tuple(Affine.of([(s, 1)]) if isinstance(s, SizeVar) else Affine.const_(s)
                                   for s in sizes)))


# ------------------------------------------------------------------------------------------------
# brute force


def holds(p, env, rels=None) -> bool:
    """``p`` at the point ``env``; ``rels`` maps a relation's name to its set of index tuples."""
    return interpreter.holds(p, env, lambda atom, args, _: args in rels[atom.rel.name])


def size_grid(names, top=3):
    for values in itertools.product(range(top + 1), repeat=len(names)):
        yield {SizeVar(nm): v for nm, v in zip(names, values)}


def points(dims, lo, hi):
    return itertools.product(range(lo, hi), repeat=len(dims))


def same_truth(p, q, dims, names, lo=-3, hi=6, top=3, rels=None):
    for sizes in size_grid(names, top):
        for pt in points(dims, lo, hi):
            env = {**sizes, **dict(zip(dims, pt))}
            assert holds(p, env, rels) == holds(q, env, rels), (sizes, pt)


def brute_count(p, dims, sizes, box, rels=None):
    env0 = {SizeVar(k_): v for k_, v in sizes.items()}
    return sum(holds(p, {**env0, **dict(zip(dims, pt))}, rels) for pt in itertools.product(*box))


# ------------------------------------------------------------------------------------------------
# random predicates


@st.composite
def affines(draw, dims, sizes):
    terms = [(v, draw(st.integers(-2, 2))) for v in list(dims) + list(sizes)]
    return Affine.of(terms, draw(st.integers(-3, 3)))


@st.composite
def comparisons(draw, dims, sizes):
    op = draw(st.sampled_from(["<", "<=", "=", "!=", ">", ">="]))
    return compare(op, draw(affines(dims, sizes)), draw(affines(dims, sizes)))


def predicates(dims, sizes):
    leaf = comparisons(dims, sizes)
    return st.recursive(
        leaf,
        lambda ch: st.lists(ch, min_size=2, max_size=3).flatmap(
            lambda ps: st.sampled_from([conj(*ps), disj(*ps)])
        ),
        max_leaves=5,
    )


def predicates_with_exists(dims, sizes):
    """Random predicates with ``exists(l: m)`` subterms (the body may use l)."""
    inner = predicates(list(dims) + [l], sizes)
    exists = inner.map(lambda body: Exists(l, A(sizes[-1]), body))
    return st.one_of(predicates(dims, sizes), st.tuples(exists, predicates(dims, sizes)).map(lambda t: conj(*t)))


@st.composite
def problems(draw):
    nd = draw(st.integers(1, 3))
    dims = [i, j, k][:nd]
    sizes = [n, m][: draw(st.integers(1, 2))]
    return dims, sizes, draw(predicates(dims, sizes))


# ------------------------------------------------------------------------------------------------
# to_isl / from_isl


ROUND_TRIPS = [
    TRUE,
    FALSE,
    rng(i, 0, n),
    conj(rng(i, 0, n), rng(j, 0, m), compare("<=", j, i)),
    disj(compare("<", i, 3), compare(">=", i, A(n) - 2)),
    compare("!=", i, j),
    conj(rng(i, 0, n), compare("=", A(j), A(i) * 2 + 1)),
    conj(rng(i, 0, n), rng(j, 0, m), compare("=", k, A(i) - A(j) + A(m) - 1)),
    conj(rng(i, 0, n), Exists(l, A(n), compare("=", i, A(l) * 2))),  # a stride
    conj(rng(i, 0, n), Exists(l, A(n), conj(compare("<=", A(l) * 3, i), compare("<=", i, A(l) * 3 + 1)))),
    conj(rng(i, 0, n), rng(j, 0, n), Exists(l, A(n), compare("=", A(i) + A(j), A(l) * 2))),
    Exists(l, A(m), conj(compare("=", i, l), rng(j, 0, n))),
]


@pytest.mark.parametrize("pred", ROUND_TRIPS)
def test_round_trip(pred):
    dims = [i, j, k]
    s = P.to_isl(pred, dims, [n, m])
    back = P.from_isl(s, dims)
    assert P.to_isl(back, dims, [n, m]).is_equal(s)
    same_truth(pred, back, dims, ["n", "m"], lo=-1, hi=5, top=2)
    assert P.from_isl(s, dims) == back  # deterministic


def test_from_isl_stride_uses_exists():
    back = P.from_isl(P.to_isl(ROUND_TRIPS[8], [i]), [i])
    assert isinstance(back, Exists) or any(isinstance(q, Exists) for q in getattr(back, "parts", ()))
    same_truth(ROUND_TRIPS[8], back, [i], ["n"], lo=-2, hi=9, top=7)


DIV_SETS = [
    "[n] -> { [i, j] : n mod 2 = 0 and 0 <= i < n and j = 0 }",
    "[n, m] -> { [i, j] : 0 <= i < n and 0 <= j < m and (i + j + n) mod 3 = 0 and (i + floor((i + j + n)/3)) mod 2 = 1 }",
    "[n] -> { [i, j] : 0 <= i < n and 0 <= j < n and 2*floor(i/2) + 3*floor(j/3) = i + j - 1 }",
    "[n] -> { [i, j] : i mod 2 = 0 and j mod 2 = 1 and 0 <= i < n and 0 <= j < n }",
    "[n] -> { [i, j] : (i + j) mod 2 = 0 and i >= -5 and j >= -5 and i + j <= n }",
    "[n] -> { [i, j] : (i - n) mod 2 = 0 and -10 <= i <= 10 and j = 0 }",
]


@pytest.mark.parametrize("text", DIV_SETS)
def test_from_isl_divisions(text):
    s = isl.Set(text)  # parsed only to get sets with divisions; dims are matched by position
    back = P.from_isl(s, [i, j])
    assert P.to_isl(back, [i, j], P.param_names(s)).is_equal(s & P.param_context(s.get_space()))


def test_from_isl_unbounded_division():
    with pytest.raises(UnsupportedError):
        P.from_isl(isl.Set("{ [i] : i mod 2 = 0 and i >= 5 }"), [i])


def test_from_isl_readable_forms():
    p = conj(rng(i, 0, n), compare("=", k, A(i) + A(j)), compare("<=", j, i))
    back = P.from_isl(P.to_isl(p, [i, j, k]), [i, j, k])
    parts = set(back.parts)
    assert compare("<=", 0, i) in parts and compare("<", i, n) in parts
    assert compare("=", k, A(i) + A(j)) in parts and compare("<=", j, i) in parts


def test_disequalities_read_back():
    box = conj(rng(i, 0, n), rng(j, 0, n))
    assert P.simplify(compare("!=", i, 1), [i, j], box) == compare("!=", i, 1)
    assert P.simplify(conj(box, compare("!=", i, j)), [i, j], box) in (compare("!=", i, j), compare("!=", j, i))
    back = P.from_isl(P.to_isl(conj(box, compare("!=", i, j)), [i, j]), [i, j])
    assert set(back.parts) >= {compare("<=", 0, i), compare("<", j, n)}
    assert any(isinstance(q, Cmp) and q.op == "!=" for q in back.parts)


def test_dims_by_position_even_with_equal_names():
    a, b = IndexVar("x"), IndexVar("x")
    p = conj(rng(a, 0, n), rng(b, 0, 2), compare("<", b, a))
    s = P.to_isl(p, [a, b])
    assert P.count(p, [a, b], {"n": 4}) == 5
    assert P.to_isl(P.from_isl(s, [a, b]), [a, b]).is_equal(s)


def test_free_variable_not_in_dims():
    with pytest.raises(ValueError):
        P.to_isl(compare("<", i, j), [i])


def test_relation_over_approximation():
    R = rel("R", n, m)
    p = conj(RelAtom(R, (A(i), A(j) - 1)), compare("<", i, 3))
    assert not P.is_exact(p) and P.is_exact(compare("<", i, 3))
    expected = conj(rng(i, 0, n), rng(A(j) - 1, 0, m), compare("<", i, 3))
    assert P.to_isl(p, [i, j]).is_equal(P.to_isl(expected, [i, j]))


@SETTINGS
@given(st.integers(1, 2), st.data())
def test_round_trip_random_exists(nd, data):
    dims, sizes = [i, j][:nd], [n, m]
    pred = data.draw(predicates_with_exists(dims, sizes))
    s = P.to_isl(pred, dims, sizes)
    back = P.from_isl(s, dims)
    assert P.to_isl(back, dims, sizes).is_equal(s)
    same_truth(pred, back, dims, ["n", "m"], lo=-2, hi=4, top=2)


@SETTINGS
@given(problems())
def test_round_trip_random(problem):
    dims, sizes, pred = problem
    s = P.to_isl(pred, dims, sizes)
    back = P.from_isl(s, dims)
    assert P.to_isl(back, dims, sizes).is_equal(s)
    same_truth(pred, back, dims, [v.name for v in sizes], lo=-3, hi=5, top=2)


# ------------------------------------------------------------------------------------------------
# emptiness, implication, simplification


def test_emptiness():
    assert P.is_empty(conj(compare("<", i, 0), compare(">=", i, 0)), [i])
    assert P.is_empty(conj(rng(i, 0, n), compare("<", n, 0)), [i])  # sizes are non-negative
    assert not P.is_empty(rng(i, 0, n), [i])
    assert P.is_empty(compare("<", i, 3), [i], context=compare(">", i, 5))
    assert P.is_satisfiable(rng(i, 0, n), [i])
    R = rel("R", n)
    assert P.is_empty(conj(RelAtom(R, (A(i),)), compare("<", i, 0)), [i])
    assert not P.is_empty(RelAtom(R, (A(i),)), [i])


def test_implies():
    box = conj(rng(i, 0, n), rng(j, 0, m))
    assert P.implies(box, compare("<", A(i) - A(j), n), [i, j])
    assert not P.implies(box, compare("<", i, m), [i, j])
    R, S = rel("R", n, m), rel("S", n, m)
    r = RelAtom(R, (A(i), A(j)))
    assert P.implies(conj(r, compare("<", i, 2)), r, [i, j])
    assert P.implies(r, rng(j, 0, m), [i, j])  # the bounds a relation implies
    assert not P.implies(box, r, [i, j])
    assert not P.implies(RelAtom(S, (A(i), A(j))), r, [i, j])
    assert P.implies(conj(r, box), disj(r, RelAtom(S, (A(i), A(j)))), [i, j])


def test_implies_an_exists_by_a_witness():
    """``R(i, k)`` implies ``exists(l:n) R(l, k)`` (the witness l = i), under the bounds of the exists."""
    R = rel("R", n, m)
    ex = Exists(l, A(n), RelAtom(R, (A(l), A(k))))
    assert P.implies(RelAtom(R, (A(i), A(k))), ex, [i, k])
    shifted = Exists(l, A(n), RelAtom(R, (A(l) + 1, A(k))))  # the witness l = i, which may be -1 ...
    assert not P.implies(RelAtom(R, (A(i) + 1, A(k))), shifted, [i, k])
    assert P.implies(conj(RelAtom(R, (A(i) + 1, A(k))), compare("<=", 0, i)), shifted, [i, k])  # ... or not
    assert not P.implies(RelAtom(R, (A(k), A(i))), ex, [i, k])  # the arguments swapped: no witness
    assert not P.implies(RelAtom(S := rel("S", n, m), (A(i), A(k))), ex, [i, k])  # another relation
    short = Exists(l, A(n) - 1, RelAtom(R, (A(l), A(k))))  # l < n - 1: the witness i may be n - 1
    assert not P.implies(RelAtom(R, (A(i), A(k))), short, [i, k])
    assert P.implies(conj(RelAtom(R, (A(i), A(k))), compare("<", A(i) + 1, n)), short, [i, k])
    nested = Exists(l, A(n), Exists(j, A(m), conj(RelAtom(R, (A(l), A(j))), compare("=", j, k))))
    assert P.implies(RelAtom(R, (A(i), A(k))), nested, [i, k])
    assert not P.implies(RelAtom(S, (A(i), A(k))), nested, [i, k])


def test_simplify_drops_a_literal_the_rest_of_its_pair_implies():
    R = rel("R", n, m)
    r = RelAtom(R, (A(i), A(k)))
    ex = Exists(l, A(n), RelAtom(R, (A(l), A(k))))
    box = conj(rng(i, 0, n), rng(k, 0, m))
    assert P.simplify(conj(ex, r), [i, k], box) == r
    assert P.simplify(ex, [i, k], conj(box, r)) is TRUE
    assert P.simplify(conj(ex, RelAtom(R, (A(k), A(i)))), [i, k], box) == conj(ex, RelAtom(R, (A(k), A(i))))


def test_simplify_cases():
    box = conj(rng(i, 0, n), rng(j, 0, m))
    assert P.simplify(compare("<", i, A(n) + 2), [i, j], box) is TRUE
    assert P.simplify(compare("<", i, 0), [i, j], box) is FALSE
    assert P.simplify(conj(compare("<=", 0, i), compare("<", i, 3)), [i, j], box) == compare("<", i, 3)
    R = rel("R", n, m)
    r = RelAtom(R, (A(i), A(j)))
    assert P.simplify(conj(r, compare("<", i, n)), [i, j], box) == r
    assert P.simplify(conj(r, compare("<", i, 2)), [i, j], box) == conj(compare("<", i, 2), r)


@SETTINGS
@given(problems(), st.data())
def test_simplify_random(problem, data):
    dims, sizes, pred = problem
    ctx = data.draw(predicates(dims, sizes))
    out = P.simplify(pred, dims, ctx)
    if P.implies(ctx, pred, dims):
        assert out is TRUE  # (an empty context implies everything)
    elif P.is_empty(pred, dims, ctx):
        assert out is FALSE
    same_truth(conj(out, ctx), conj(pred, ctx), dims, [v.name for v in sizes], lo=-3, hi=4, top=2)


# ------------------------------------------------------------------------------------------------
# projection and unique solutions


def test_project():
    p = conj(rng(i, 0, n), rng(j, 0, m), compare("=", k, A(i) - A(j)))
    out = P.project(p, i, [i, j, k])
    same_truth(out, Exists(l, A(n), conj(rng(j, 0, m), compare("=", k, A(l) - A(j)))), [j, k], ["n", "m"])
    stride = P.project(conj(rng(j, 0, n), compare("=", i, A(j) * 2)), j, [i, j])
    same_truth(stride, Exists(l, A(n), compare("=", i, A(l) * 2)), [i], ["n"], lo=-2, hi=9, top=4)
    R = rel("R", n, m)
    with_rel = conj(rng(i, 0, n), RelAtom(R, (A(i), A(j))))
    out = P.project(with_rel, j, [i, j])
    for sizes in size_grid(["n", "m"], 3):
        same_rels = {"R": {(a, b) for a, b in [(0, 1), (2, 0)] if a < sizes[n] and b < sizes[m]}}
        for a in range(-1, 5):
            env = {**sizes, i: a}
            want = any(holds(with_rel, {**env, j: b}, same_rels) for b in range(-2, 6))
            assert holds(out, env, same_rels) == want


def test_solve_unique_cases():
    dims = [i, j, k]
    box = conj(rng(i, 0, n), rng(j, 0, m))
    (guard, sol), = P.solve_unique(conj(box, compare("=", i, A(k) + A(j))), i, dims)
    assert sol is A(k) + A(j)
    same_truth(guard, conj(rng(j, 0, m), rng(A(k) + A(j), 0, n)), [j, k], ["n", "m"])
    assert P.solve_unique(compare("=", A(i) * 2, k), i, dims) is None  # needs floor(k/2)
    assert P.solve_unique(compare(">=", i, k), i, dims) is None  # many solutions
    assert P.solve_unique(disj(compare("=", i, k), compare("=", i, j)), i, dims) is None
    two = P.solve_unique(conj(rng(i, 0, n), disj(compare("=", i, k), compare("=", i, A(k) + A(n)))), i, dims)
    assert len(two) == 2
    assert {sol for _, sol in two} == {A(k), A(k) + A(n)}
    for guard, sol in two:
        for sizes in size_grid(["n"], 4):
            for kk in range(-5, 6):
                env = {**sizes, k: kk}
                if holds(guard, env):
                    assert 0 <= sol.evaluate(env) < sizes[n]
    assert P.solve_unique(FALSE, i, dims) == []
    assert P.solve_unique(compare(">=", i, k), i, dims, context=FALSE) == []
    # unique under the context only
    assert P.solve_unique(disj(compare("=", i, k), compare("=", i, A(k) + 5)), i, dims, compare("<", k, 0)) is None
    one = P.solve_unique(conj(compare("=", A(i) + A(j), k)), i, dims, context=rng(j, 0, n))
    assert [sol for _, sol in one] == [A(k) - A(j)]


def test_solve_unique_many():
    dims = [i, j, k]
    p = conj(rng(i, 0, n), rng(j, 0, n), compare("=", i, A(k) + 1), compare("=", j, k))
    (guard, sol), = P.solve_unique_many(p, [i, j], dims)
    assert sol == {i: A(k) + 1, j: A(k)}
    same_truth(guard, conj(rng(k, 0, n), compare("<", A(k) + 1, n)), [k], ["n"])
    with_ctx = P.solve_unique_many(p, [i, j], dims, context=rng(k, 0, A(n) - 1))
    assert with_ctx[0][0] is TRUE


def test_solve_unique_with_relation():
    R = rel("R", n, n)
    p = conj(compare("=", i, A(k) + 1), RelAtom(R, (A(i), A(j))))
    (guard, sol), = P.solve_unique(p, i, [i, j, k])
    assert sol is A(k) + 1
    for sizes in size_grid(["n"], 3):
        rels = {"R": {(a, b) for a, b in [(1, 0), (2, 2)] if max(a, b) < sizes[n]}}
        for jj, kk in points([j, k], -1, 4):
            env = {**sizes, j: jj, k: kk}
            assert holds(guard, env, rels) == holds(p, {**env, i: kk + 1}, rels)


# ------------------------------------------------------------------------------------------------
# witnesses


def test_sample_point():
    p = conj(rng(i, 0, n), compare("<", A(i) - 1, 0))
    pt = P.sample_point(p, [i])
    assert pt == {i: 0, n: 1}
    assert P.sample_point(conj(rng(i, 0, n), compare("<", i, 0)), [i]) is None
    pt = P.sample_point(compare(">=", i, A(n) + A(m) + 3), [i], context=compare(">", m, 2))
    assert pt[m] == 3 and pt[n] == 0 and pt[i] == 6
    pt = P.sample_point(compare("<", i, n), [i])  # unbounded below: still a point
    assert pt[i] < pt[n]


@SETTINGS
@given(problems())
def test_sample_point_random(problem):
    dims, sizes, pred = problem
    pt = P.sample_point(pred, dims)
    if pt is None:
        assert P.is_empty(pred, dims)
    else:
        env = {**{s: 0 for s in sizes}, **pt}
        assert holds(pred, env)
        assert all(v >= 0 for key, v in pt.items() if isinstance(key, SizeVar))


# ------------------------------------------------------------------------------------------------
# counting


@SETTINGS
@given(problems(), st.data())
def test_count_random(problem, data):
    dims, sizes, pred = problem
    values = {s.name: data.draw(st.integers(0, 4)) for s in sizes}
    bound = conj(*(rng(d, -1, A(sizes[t % len(sizes)]) + 2) for t, d in enumerate(dims)))
    p = conj(pred, bound)
    box = [range(-1, values[sizes[t % len(sizes)].name] + 2) for t in range(len(dims))]
    assert count(p, dims, values) == brute_count(p, dims, values, box)


def test_count_with_exists_and_projection():
    p = conj(rng(i, 0, n), rng(j, 0, m), compare("<=", A(i) + A(j), 4))
    for nv, mv in itertools.product(range(5), range(5)):
        sizes = {"n": nv, "m": mv}
        want = len({a for a in range(nv) for b in range(mv) if a + b <= 4})
        assert count_projection(p, [j], [i, j], sizes) == want
        assert count(Exists(l, A(m), conj(rng(i, 0, n), compare("<=", A(i) + A(l), 4))), [i], sizes) == want
        assert count_projection(p, [i, j], [i, j], sizes) == (1 if want else 0)


def test_count_needs_every_size():
    with pytest.raises(ValueError):
        count(rng(i, 0, n), [i], {})
    with pytest.raises(ValueError):
        count(compare(">=", i, 0), [i], {})  # infinite


def test_count_large():
    assert count(rng(i, 0, n), [i], {"n": 10**6}) == 10**6
    tri = conj(rng(i, 0, n), rng(j, 0, n), compare("<=", j, i))
    assert count(tri, [i, j], {"n": 2000}) == 2000 * 2001 // 2
    diag = conj(rng(i, 0, n), rng(j, 0, n), compare("=", i, j))
    assert count(diag, [i, j], {"n": 10**6}) == 10**6
    box = conj(rng(i, 0, n), rng(j, 0, n), rng(k, 0, n))
    assert count(box, [i, j, k], {"n": 10**4}) == 10**12  # through the symbolic count


SYMBOLIC = [
    (conj(rng(i, 0, n), rng(j, 0, m)), [i, j], lambda: n_ * m_),
    (conj(rng(i, 0, n), rng(j, 0, n), compare("<=", j, i)), [i, j], lambda: n_ * (n_ + 1) / 2),
    (conj(rng(i, 0, n), rng(j, 0, n), compare("=", i, j)), [i, j], lambda: n_),
    (conj(compare("<=", 0, i), compare("<", i, n), compare("<", i, m)), [i], lambda: sympy.Min(n_, m_)),
    (conj(rng(j, 0, m), rng(i, 0, n), compare("<=", 0, A(i) - A(j))), [j, i], None),
    (conj(rng(k, 0, A(n) + A(m) - 1), rng(i, 0, n), rng(j, 0, m), compare("=", k, A(i) - A(j) + A(m) - 1)),
     [k, i, j], lambda: n_ * m_),
    (disj(conj(rng(i, 0, n), rng(j, 0, 3)), conj(rng(i, 0, 2), rng(j, 0, m))), [i, j], None),
    (conj(rng(i, 0, n), rng(j, 0, m), disj(compare("<", i, j), compare(">", A(i), A(j) + 1))), [i, j], None),
    (conj(rng(i, 0, n), rng(j, 0, i), rng(k, 0, j)), [i, j, k], None),
    (conj(rng(i, 0, n), Exists(l, A(m), compare("=", i, l))), [i], lambda: sympy.Min(n_, m_)),
    (conj(rng(i, 2, n), compare("<", i, A(m) - 1)), [i], None),
    (compare("<", m, n), [], None),
    (conj(compare("=", m, 0), rng(i, 0, n), rng(j, 0, n)), [i, j], None),
    (conj(compare("=", n, A(m) + 1), rng(i, 0, n), rng(j, 0, i)), [i, j], None),
    (conj(rng(i, 0, n), rng(j, 0, m), compare("<=", A(i) + A(j), A(n) - 2)), [i, j], None),
]
n_, m_ = sympy.Symbol("n", integer=True, nonnegative=True), sympy.Symbol("m", integer=True, nonnegative=True)


@pytest.mark.parametrize("case", range(len(SYMBOLIC)))
def test_count_symbolic(case):
    pred, dims, expected = SYMBOLIC[case]
    expr = count_symbolic(pred, dims)
    assert expr.free_symbols <= {n_, m_}
    if expected is not None:
        assert sympy.simplify(expr - expected()) == 0
    for nv, mv in itertools.product(range(7), repeat=2):
        want = count(pred, dims, {"n": nv, "m": mv})
        assert int(expr.subs({n_: nv, m_: mv})) == want, (nv, mv)


def test_count_symbolic_prints_polynomials():
    conv = conj(rng(i, 0, n), rng(j, 0, m))
    expr = 2 * count_symbolic(conv, [i, j]) - count_symbolic(rng(i, 0, n), [i])
    assert sympy.factor(expr) == n_ * (2 * m_ - 1)
    assert count_symbolic(conv, [i, j]) is count_symbolic(conv, [i, j])  # cached


def test_count_symbolic_sum():
    box = conj(rng(i, 0, n), rng(j, 0, m))
    # the convolution's cost: n*m multiplications, n*m - #[exists j] additions
    conv = count_symbolic_sum([(1, box, [i, j]), (1, box, [i, j]), (-1, box, [i, j], [j])])
    assert conv == sympy.Piecewise((n_ * (2 * m_ - 1), m_ >= 1), (0, True))
    trace = count_symbolic_sum([(1, rng(i, 0, n), [i]), (-1, rng(i, 0, n), [i], [i])])
    assert trace == sympy.Max(0, n_ - 1)
    skip = conj(rng(i, 0, n), compare("!=", i, 1))
    terms = [(2, skip, [i]), (-1, skip, [i], [i]), (1, box, [j, i])]
    total = count_symbolic_sum(terms)
    for nv, mv in itertools.product(range(7), repeat=2):
        sizes = {"n": nv, "m": mv}
        want = sum(c * (count_projection(p, t[0], d, sizes) if t else count(p, d, sizes))
                   for c, p, d, *t in terms)
        assert int(total.subs({n_: nv, m_: mv})) == want


def test_count_symbolic_unsupported():
    with pytest.raises(UnsupportedError):
        count_symbolic(conj(rng(i, 0, n), Exists(l, A(n), compare("=", i, A(l) * 2))), [i])
    with pytest.raises(UnsupportedError):
        count_symbolic(RelAtom(rel("R", n), (A(i),)), [i])
    with pytest.raises(UnsupportedError):
        count_symbolic(compare(">=", i, 0), [i])


def test_count_projection_symbolic():
    p = conj(rng(i, 0, n), rng(j, 0, m), compare("=", i, j))
    expr = count_projection_symbolic(p, [j], [i, j])
    assert sympy.simplify(expr - sympy.Min(n_, m_)) == 0


# ------------------------------------------------------------------------------------------------
# counting with relations


def random_relation(shape, density, seed):
    r = np.random.default_rng(seed)
    return r.random(shape) < density


def tuples(arr):
    return {tuple(int(x) for x in t) for t in np.argwhere(arr)}


@pytest.mark.parametrize("seed", range(4))
def test_count_relations(seed):
    R, S = rel("R", n, m), rel("S", m)
    nv, mv = 5 + seed, 4 + seed
    data = {"R": random_relation((nv, mv), 0.3, seed), "S": random_relation((mv,), 0.5, seed + 10)}
    rels = {"R": tuples(data["R"]), "S": tuples(data["S"])}
    sizes = {"n": nv, "m": mv}
    cases = [
        (conj(rng(i, 0, n), rng(j, 0, m), RelAtom(R, (A(i), A(j)))), [i, j]),
        (conj(rng(i, 0, n), rng(j, 0, m), RelAtom(R, (A(i), A(j))), compare("<=", j, i)), [i, j]),
        (conj(rng(i, 0, n), rng(j, 0, n), RelAtom(R, (A(i), A(j) - 1))), [i, j]),
        (disj(RelAtom(R, (A(i), A(j))), conj(rng(i, 0, 2), rng(j, 0, 3))), [i, j]),
        (conj(rng(i, 0, n), rng(j, 0, m), rng(k, 0, 3), RelAtom(R, (A(i), A(j))), RelAtom(S, (A(j),))),
         [i, j, k]),
        (conj(rng(i, 0, n), Exists(l, A(m), conj(RelAtom(R, (A(i), A(l))), RelAtom(S, (A(l),))))), [i]),
        (conj(rng(i, 0, n), rng(j, 0, m), disj(RelAtom(R, (A(i), A(j))), RelAtom(S, (A(j),)))), [i, j]),
    ]
    for pred, dims in cases:
        box = [range(-1, max(nv, mv) + 2)] * len(dims)
        assert count(pred, dims, sizes, data) == brute_count(pred, dims, sizes, box, rels), pred
    pred = cases[0][0]
    want = len({a for a, b in rels["R"]})
    assert count_projection(pred, [j], [i, j], sizes, data) == want
    as_list = {"R": sorted(rels["R"]), "S": sorted(rels["S"])}
    assert count(pred, [i, j], sizes, as_list) == len(rels["R"])


@st.composite
def relation_problems(draw):
    nd = draw(st.integers(1, 2))
    dims = [i, j][:nd]
    R, S = rel("R", n, m), rel("S", m)

    def args(count_):
        return st.tuples(*[st.builds(lambda a, b, c: Affine.of([(dims[0], a), (dims[-1], b)], c),
                                     st.integers(-1, 1), st.integers(-1, 1), st.integers(-1, 1))] * count_)

    atoms = st.one_of(
        args(2).map(lambda a: RelAtom(R, a)),
        args(1).map(lambda a: RelAtom(S, a)),
        args(1).map(lambda a: Exists(l, A(m), conj(RelAtom(R, (a[0], A(l))), RelAtom(S, (A(l),))))),
    )
    leaf = st.one_of(atoms, comparisons(dims, [n, m]))
    pred = draw(st.recursive(leaf, lambda ch: st.lists(ch, min_size=2, max_size=3).flatmap(
        lambda ps: st.sampled_from([conj(*ps), disj(*ps)])), max_leaves=5))
    return dims, pred


@SETTINGS
@given(relation_problems(), st.integers(0, 4), st.integers(0, 4), st.integers(0, 2**31))
def test_count_relations_random(problem, nv, mv, seed):
    dims, pred = problem
    data = {"R": random_relation((nv, mv), 0.4, seed), "S": random_relation((mv,), 0.5, seed + 1)}
    rels = {"R": tuples(data["R"]), "S": tuples(data["S"])}
    sizes = {"n": nv, "m": mv}
    p = conj(pred, *(rng(d, -1, max(nv, mv) + 2) for d in dims))
    box = [range(-1, max(nv, mv) + 2)] * len(dims)
    assert count(p, dims, sizes, data) == brute_count(p, dims, sizes, box, rels)
    if len(dims) == 2:
        env0 = {n: nv, m: mv}
        want = len({a for a, b in itertools.product(*box) if holds(p, {**env0, i: a, j: b}, rels)})
        assert count_projection(p, [j], dims, sizes, data) == want


def test_exists_over_relations_by_join(monkeypatch):
    import tensorlang.counting as counting

    monkeypatch.setattr(counting, "EXISTS_LOOP_LIMIT", 0)  # always join instead of looping
    test_count_relations(1)


def test_count_relation_large_and_sparse():
    R = rel("R", n, n)
    nv = 10**6
    rows = np.arange(0, nv, 7)
    sparse_tuples = list(zip(rows.tolist(), ((rows * 3) % nv).tolist()))
    pred = conj(rng(i, 0, n), rng(j, 0, n), RelAtom(R, (A(i), A(j))), compare("<", j, i))
    want = sum(1 for a, b in sparse_tuples if b < a)
    assert count(pred, [i, j], {"n": nv}, {"R": sparse_tuples}) == want
    rows = conj(rng(i, 0, n), Exists(l, A(n), conj(RelAtom(R, (A(i), A(l))), compare("<", l, i))))
    assert count(rows, [i], {"n": nv}, {"R": sparse_tuples}) == want  # rule 4.30's #[exists j. p]
    assert count_projection(pred, [j], [i, j], {"n": nv}, {"R": sparse_tuples}) == want


def test_injective_reads_each_element_at_most_once():
    i, j = IndexVar("i"), IndexVar("j")
    n, m = SizeVar("n"), SizeVar("m")
    loops = ((i, Affine.var(n)), (j, Affine.var(m)))
    ai, aj = Affine.var(i), Affine.var(j)
    assert P.injective((ai, aj), loops)
    assert P.injective((aj, ai + 2 * aj), loops)
    assert not P.injective((ai,), loops)  # every j reads x[i] again
    assert not P.injective((ai + aj,), loops)
    assert P.injective((ai + aj,), loops, compare("=", j, 0))  # the bracket leaves one j
    assert P.injective((2 * ai,), loops[:1])  # a stride: still one point per element
    assert P.injective((), ())
