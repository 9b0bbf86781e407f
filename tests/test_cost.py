"""The cost model of Fig. 6: hand-computed cases, the sparsity rules (*) and (**), relations, and
agreement of symbolic, concrete and brute-force costs on generated programs."""
import numpy as np
import pytest
import sympy
from hypothesis import HealthCheck, given, settings

import tensorlang as tl
from tensorlang.cost import cost_terms
from tensorlang.errors import UnsupportedError
from tensorlang.nodes import Const, Guard, sums

from strategies import program_and_inputs

n, m = sympy.symbols("n m", integer=True, nonnegative=True)


def test_sum_of_squares_costs_2n_minus_1():
    e = tl.parse("x : [n]R; sum(i:n) x[i] * x[i]")
    assert tl.cost(e, n=10) == 19
    assert sympy.simplify(tl.cost(e).subs(n, 7) - 13) == 0


def test_convolution_costs_n_2m_minus_1():
    e = tl.parse("x : [n + m - 1]R; c : [m]R; gen(i:n) sum(j:m) x[i + j] * c[j]")
    assert tl.cost(e, n=1000, m=16) == 1000 * 31
    symbolic = tl.cost(e)
    for nv in range(0, 5):
        for mv in range(1, 5):
            assert symbolic.subs({n: nv, m: mv}) == nv * (2 * mv - 1)


def test_addition_counts_only_where_both_guards_hold():
    e = tl.parse("x : [n]R; y : [n]R; gen(i:n) [i < 3] * x[i] + [i >= 2] * y[i]")
    assert tl.cost(e, n=10) == 1


def test_sum_over_one_point_is_free():
    # rule 4.30: a summation over exactly one value costs no addition
    e = tl.parse("x : [n]R; gen(i:n) sum(j:n) [i = j] * x[j]")
    assert tl.cost(e, n=50) == 0


def test_black_boxes_and_lets():
    e = tl.parse("x : [n]R; let y = gen(i:n) exp(x[i]) in sum(i:n) y[i] * 2")
    assert tl.cost(e, n=5) == 5 + (5 + 4)


def test_relation_costs_follow_the_data():
    e = tl.parse("S : rel[n, m]; A : [n][m]R; x : [m]R; gen(i:n) sum(j:m) [S(i, j)] * A[i, j] * x[j]")
    pattern = np.zeros((4, 3), dtype=bool)
    pattern[0, 0] = pattern[0, 2] = pattern[2, 1] = True
    # rows: 2 products + 1 addition, 1 product, and nothing for the empty rows
    assert tl.cost(e, S=pattern) == 4
    with pytest.raises(UnsupportedError):
        tl.cost(e)
    with pytest.raises(tl.TensorLangError, match="S"):
        tl.cost(e, n=4, m=3)


def brute_force_count(term, sizes, relations):
    """#points of a cost term, by evaluating sum(dims) [domain] * 1."""
    counter = sums(term.dims, Guard(term.domain(), Const(1)))
    names = {*counter.sizes, *counter.free_vars}  # a term mentions some of the program's sizes
    return round(tl.evaluate(counter, **{k: v for k, v in {**sizes, **relations}.items() if k in names}))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program_and_inputs(max_size=4))
def test_concrete_cost_is_the_brute_force_count(case):
    expr, inputs = case
    sizes = {k: inputs[k] for k in expr.sizes}
    relations = {k: v for k, v in inputs.items() if isinstance(v, np.ndarray) and v.dtype == bool}
    expected = sum(t.coeff * brute_force_count(t, sizes, relations) for t in cost_terms(expr))
    assert tl.cost(expr, **sizes, **relations) == expected


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program_and_inputs(allow_relations=False, max_size=4))
def test_symbolic_cost_agrees_with_concrete(case):
    expr, inputs = case
    sizes = {k: inputs[k] for k in expr.sizes}
    try:
        symbolic = tl.cost(expr) if expr.sizes else None
    except UnsupportedError:  # strides: no closed form without barvinok (documented)
        return
    if symbolic is not None:
        at = symbolic.subs({sympy.Symbol(k, integer=True, nonnegative=True): v for k, v in sizes.items()})
        assert int(at) == tl.cost(expr, **sizes)
