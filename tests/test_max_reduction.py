"""Maxima and minima, ``max(i:n) e`` and ``min(i:n) e`` (docs/language.md, "Maxima and minima"): parsing
beside the scalar ``max(a, b)``, printing, evaluation and compiled kernels against NumPy (ties and empty
ranges included), the derivatives (finite differences away from ties, the tie convention at ties, the
inner-product identity), the stable log-sum-exp and the k-means objective, the errors, and that no rule
for sums ever rewrites a maximum."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.special
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensorlang as tl
from tensorlang.codegen.build import nvcc_path
from tensorlang.nodes import Max, Sum, walk
from tensorlang.rules import all_tables

try:  # tests/ on sys.path (pytest's default for a folder without __init__.py)
    from oracles import differenced_jacobian
    from strategies import SMOOTH_FUNCTIONS, inputs_for, max_programs
except ImportError:  # tests/ as a package
    from tests.oracles import differenced_jacobian
    from tests.strategies import SMOOTH_FUNCTIONS, inputs_for, max_programs

TIES = np.array([1.0, 3.0, 3.0, 2.0])
rng = np.random.default_rng(7)


def vec(src, **decls):
    return tl.parse(src, **({"x": "[n]R"} | decls))


# -- syntax -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("src, value", [
    ("max(i:n) x[i]", 3.0),
    ("min(i:n) x[i]", 1.0),
    ("max(x[0], x[1])", 3.0),                       # the scalar function, still
    ("min(x[0], x[3])", 1.0),
    ("max(i:n) x[i] + 1", 4.0),                     # the body extends as far right as it can
    ("(max(i:n) x[i]) + 1", 4.0),
    ("max(max(i:n) x[i], 10)", 10.0),               # a binder as an argument of the function
    ("min(1.5, max(i:n) x[i])", 1.5),
    ("max(i:n, j:n) x[i] - x[j]", 2.0),             # several bindings, as sum
    ("-max(i:n) -x[i]", 1.0),
    ("max(i:n) -min(j:n) x[i] * x[j]", -1.0),
    ("sum(i:n) max(x[i], 2)", 10.0),
    ("2 * max(i:n) [i != 1] * x[i]", 6.0),          # a binder as the last factor
    ("max(i:n) [i > 3] * x[i]", 0.0),               # a bracket in the body is a value: 0 where false
])
def test_parses_evaluates_and_prints_back(src, value):
    e = vec(src, x="[4]R" if re.search(r"x\[\d", src) else "[n]R")
    assert e(x=TIES) == value
    assert tl.parse(str(e)) == e


def test_the_scalar_functions_and_the_binders_are_told_apart():
    call = vec("max(x[0], x[1])", x="[2]R")
    assert not any(isinstance(n, Max) for n in walk(call))
    binder = vec("max(i:n) x[i]")
    assert isinstance(tl.to_ssa(binder), tl.Expr) and any(isinstance(n, Max) for n in walk(binder))
    assert repr(vec("max(i:n) max(x[i], 0)")) == "<Expr max(i:n) max(x[i], 0)>"
    assert vec("min(i:n) x[i]") == vec("-max(i:n) -x[i]")   # min(i) e is -max(i) -e, printed as min
    assert repr(vec("-max(i:n) -x[i]")) == "<Expr min(i:n) x[i]>"
    # max and min are keywords now: a name max is written in backquotes, and printed so
    e = tl.parse("`max` : R\nx : [n]R\nmax(i:n) x[i] * `max`")
    assert "`max`" in str(e) and tl.parse(str(e)) == e


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(max_programs())
def test_drawn_programs_print_back(e):
    assert tl.parse(str(e)) == e


@pytest.mark.parametrize("src, message", [
    ("max(i:n x[i]", "1:9"),
    ("max(i:n)", "end of the program"),
    ("max(i:n, x[0]) x[i]", "1:11"),
    ("max(x[0])", "max takes 2 argument(s), got 1"),
    ("mxa(i:n) x[i]", "did you mean 'max'?"),
])
def test_syntax_errors_show_line_column_and_caret(src, message):
    with pytest.raises(tl.TensorLangError) as info:
        vec(src)
    text = str(info.value)
    assert message in text and "^" in text and "<string>:1:" in text


@pytest.mark.parametrize("src, where", [("max : R\nmax * 2", "1:5"), ("min : [n]R\nsum(i:n) min[i]", "1:5"),
                                        ("x : R\nlet min = x * x in min * 2", "2:24")])
def test_a_variable_named_max_or_min_is_told_to_take_backquotes(src, where):
    with pytest.raises(tl.ParseError, match="max and min are keywords") as info:
        tl.parse(src)
    assert f"<string>:{where}" in str(info.value) and "`max`" in str(info.value)
    assert tl.parse("`max` : R\n`max` * 2")(max=3.0) == 6.0


def test_type_and_bounds_errors_name_the_place():
    with pytest.raises(tl.TypeCheckError) as info:
        tl.parse("x : [n]R\nmax(i:n) gen(j:n) x[j]")
    assert "the body of max(i) must be a scalar" in str(info.value) and "2:10" in str(info.value)
    with pytest.raises(tl.BoundsError) as info:
        vec("max(i:n) x[i + 1]")
    assert "x[i + 1] may be read at i = " in str(info.value) and "outside [0, n)" in str(info.value)
    with pytest.raises(tl.TypeCheckError):
        vec("max(i:n) (x[i], x[i])")


# -- meaning ---------------------------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(-3, 3), min_size=0, max_size=7))
def test_evaluator_against_numpy(values):
    x = np.array(values, dtype=float)  # small integers: ties are frequent
    assert vec("max(i:n) x[i]")(x=x) == (np.max(x) if len(x) else -np.inf)
    assert vec("min(i:n) x[i]")(x=x) == (np.min(x) if len(x) else np.inf)
    A = np.add.outer(x, x)
    np.testing.assert_array_equal(vec("gen(i:n) max(j:n) A[i, j]", A="[n][n]R")(A=A, x=x),
                                  A.max(axis=1) if len(x) else np.zeros(0))


@pytest.mark.parametrize("n", [0, 1, 4, 17, 1000])
def test_compiled_c_against_numpy(n):
    x = np.round(rng.normal(size=n), 1)  # rounded: ties
    if n == 4:
        x = TIES
    A = np.round(rng.normal(size=(n, 5)), 1)
    programs = {
        "max(i:n) x[i]": np.max(x) if n else -np.inf,
        "min(i:n) x[i]": np.min(x) if n else np.inf,
        "gen(i:n) max(j:m) A[i, j]": A.max(axis=1),
        "gen(j:m) min(i:n) A[i, j] * A[i, j]": (A * A).min(axis=0) if n else np.full(5, np.inf),
        "sum(i:n) max(j:m) [j > 0] * A[i, j]": np.maximum(A[:, 1:].max(axis=1), 0).sum() if n else 0.0,
    }
    for src, want in programs.items():
        e = tl.parse(src, x="[n]R", A="[n][m]R")
        inputs = {k: v for k, v in {"x": x, "A": A}.items() if k in e.free_vars}
        np.testing.assert_allclose(tl.compile(e)(**inputs), want, rtol=1e-13)  # a sum's order may differ
        np.testing.assert_allclose(e(**inputs), want, rtol=1e-13)


def test_nan_propagates_in_the_evaluator_and_the_kernel():
    x = np.array([1.0, np.nan, 2.0])
    e = vec("max(i:n) x[i]")
    assert np.isnan(e(x=x)) and np.isnan(tl.compile(e)(x=x))


def test_a_large_maximum_runs_in_chunks_and_agrees_with_numpy():
    """From 2^21 entries a scalar maximum is cut into chunks on OpenMP's threads, eight lanes each, combined by
    ``tl_fmax`` from ``-INFINITY``: the same maximum, a NaN anywhere still NaN, ties and infinities kept."""
    n = 2 ** 21 + 13   # (chunks and lanes with a remainder)
    peak, least = tl.compile(vec("max(i:n) x[i]")), tl.compile(vec("min(i:n) x[i]"))
    assert "tl_fmax(tl_fmax(" in peak.source   # the lanes' tree
    x = rng.normal(size=n)
    assert peak(x=x) == x.max() and least(x=x) == x.min()
    for at in (0, n // 2, n - 1):   # the first chunk, a middle one, the remainder
        y = x.copy()
        y[at] = np.nan
        assert np.isnan(peak(x=y)) and np.isnan(least(x=y))
        y[at] = 9.0
        assert peak(x=y) == 9.0
    assert peak(x=np.full(n, -np.inf)) == -np.inf and peak(x=np.full(n, 2.5)) == 2.5
    lse = tl.parse(tl.examples.source("logsumexp"))
    np.testing.assert_allclose(tl.compile(lse)(x=x), scipy.special.logsumexp(x), rtol=1e-12)
    g = tl.compile(tl.grad(lse, "x"))(x=x)
    np.testing.assert_allclose(g, scipy.special.softmax(x), rtol=1e-10, atol=1e-300)


def test_a_maximum_along_a_row_runs_in_lanes_and_agrees_with_numpy():
    """A maximum over one loop whose body reads consecutive elements (a row's maximum, k-means' minimum over the
    centroids of one point) keeps eight running maxima in a vectorised loop, combined at the end; a sum over
    such maxima runs its points one by one.  Every row length around the lanes (empty, the remainder only,
    full blocks and a remainder), a NaN in a block and in the remainder, ties and infinities."""
    rows = tl.compile(tl.parse("A : [n][m]R\ngen(i:n) max(j:m) A[i, j]"))
    least = tl.compile(tl.parse("A : [n][m]R\nsum(i:n) min(j:m) A[i, j] * A[i, j] - A[i, j]"))
    assert "#pragma omp simd" in rows.source and "tl_fmax(tl_fmax(" in rows.source
    for m in (0, 1, 7, 8, 9, 16, 100):
        A = rng.normal(size=(6, m))
        want = A.max(axis=1) if m else np.full(6, -np.inf)
        assert np.array_equal(rows(A=A), want)
        if m:
            assert least(A=A) == pytest.approx(np.sum(np.min(A * A - A, axis=1)), rel=1e-14)
            for at in {0, m // 2, m - 1}:   # a block, the middle, the remainder
                B = A.copy()
                B[2, at] = np.nan
                got = rows(A=B)
                assert np.isnan(got[2]) and np.array_equal(np.delete(got, 2), np.delete(want, 2))
                assert np.isnan(least(A=B))
                B[2, at] = np.inf
                assert rows(A=B)[2] == np.inf
    ties = np.tile(np.array([1.0, 3.0, 3.0, 2.0, -np.inf, 3.0, 0.5, 3.0, 1.0]), (3, 1))
    assert np.array_equal(rows(A=ties), np.full(3, 3.0))


def test_cost_is_that_of_a_sum():
    for n in (0, 1, 5):
        assert tl.cost(vec("max(i:n) x[i]"), n=n) == tl.cost(vec("sum(i:n) x[i]"), n=n)
        assert tl.cost(vec("gen(j:n) max(i:n) x[i] * x[j]"), n=n) == tl.cost(vec("gen(j:n) sum(i:n) x[i] * x[j]"), n=n)


# -- no rule for sums applies to a maximum --------------------------------------------------------------


def test_only_the_rules_of_maxima_match_a_maximum():
    node = next(n for n in walk(vec("max(i:n) [i > 0] * 2 * (x[i] + x[i])")) if isinstance(n, Max))
    for table in all_tables():
        for r in table.rules_for(node):
            assert Max in r.kinds, f"{r.name} of {table.name} matches a maximum"


@pytest.mark.parametrize("src", [
    "max(i:n) [i > 0] * x[i]",            # not max over i > 0: the bracket is a value, 0 at i = 0
    "max(i:n) -2 * x[i]",                 # a negative factor does not come out
    "max(i:n) x[i] + x[n - 1 - i]",       # an addition does not split
    "gen(j:n) max(i:n) [i != j] * x[i] * x[j]",
    "sum(j:n) min(i:n) x[i] - x[j]",
])
def test_every_stage_keeps_the_meaning(src):
    e = vec(src)
    for x in (-np.abs(rng.normal(size=5)) - 1, TIES, rng.normal(size=6)):
        want = e(x=x)
        ssa = tl.to_ssa(e)
        assert any(isinstance(n, Max) for n in walk(ssa)) and not any(
            isinstance(n, Sum) and isinstance(n.body, Max) for n in walk(ssa))
        np.testing.assert_allclose(ssa(x=x), want)
        np.testing.assert_allclose(tl.compile(e)(x=x), want)
        np.testing.assert_allclose(tl.normalize.gen_pushout(tl.normalize.pair_elim(tl.normalize.let_lift(e)))(x=x), want)


# -- derivatives ----------------------------------------------------------------------------------------


def central(f, x):
    return differenced_jacobian(f, x).reshape(x.shape)


def test_gradient_against_differences_away_from_ties():
    x = rng.normal(size=6)
    for src in ("max(i:n) x[i] * x[i]", "min(i:n) sin(x[i])", "sum(j:n) max(i:n) [i != j] * x[i] * x[j]"):
        e = vec(src)
        g = tl.grad(e, "x")
        np.testing.assert_allclose(g(x=x), central(lambda v: e(x=v), x), rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(tl.compile(g)(x=x), g(x=x), rtol=1e-12)


def test_the_tie_convention():
    """The cotangent is split equally among the entries equal to the maximum, as JAX's reductions do."""
    assert list(tl.grad(vec("max(i:n) x[i]"), "x")(x=TIES)) == [0, 0.5, 0.5, 0]
    assert list(tl.grad(vec("min(i:n) x[i]"), "x")(x=np.array([2.0, 1, 5, 1, 1]))) == [0, 1 / 3, 0, 1 / 3, 1 / 3]
    assert list(tl.compile(tl.grad(vec("max(i:n) x[i]"), "x"))(x=TIES)) == [0, 0.5, 0.5, 0]
    A = np.array([[1.0, 1.0], [2.0, 0.0]])
    np.testing.assert_array_equal(tl.grad(tl.parse("sum(i:n) max(j:m) A[i, j]", A="[n][m]R"), "A")(A=A),
                                  [[0.5, 0.5], [1.0, 0.0]])
    # the forward derivative is the mean of the maximisers' tangents
    assert tl.derivative(vec("max(i:n) x[i]"), "x")(x=TIES, dx=np.array([9.0, 1, 2, 9])) == 1.5
    assert tl.derivative(vec("max(i:n) x[i]"), "x")(x=np.zeros(0), dx=np.zeros(0)) == 0.0


@pytest.mark.parametrize("x", [TIES, rng.normal(size=5), np.zeros(3)])
def test_inner_product_identity_between_tangent_and_adjoint(x):
    e = vec("gen(j:n) max(i:n) [i != j] * x[i] * x[j]")
    dx, dy = rng.normal(size=x.shape), rng.normal(size=x.shape)
    forward = tl.derivative(e, "x")(x=x, dx=dx)
    adjoint = tl.adjoint(e, "x")(x=x, dy=dy)
    assert np.dot(dy, forward) == pytest.approx(np.dot(adjoint, dx), rel=1e-12, abs=1e-12)


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(max_programs(black_boxes=SMOOTH_FUNCTIONS).flatmap(
    lambda e: st.tuples(st.just(e), inputs_for(e, allow_zero=False))))
def test_drawn_adjoints_satisfy_the_inner_product_identity(item):
    e, inputs = item
    inputs = {k: v for k, v in inputs.items() if k in e.free_vars or k in e.sizes}
    x = tl.Var("x", e.free_vars["x"]) if "x" in e.free_vars else None
    wrt = "x" if x is not None else "A"
    value = e(**inputs)
    dy = np.asarray(rng.normal(size=np.shape(value)))
    dx = rng.normal(size=np.shape(inputs[wrt]))
    d = tl.derivative(e, wrt)
    forward = d(**inputs, **{next(n for n in d.free_vars if n.startswith("d")): dx})
    adjoint = tl.adjoint(e, wrt)(**inputs, dy=dy if np.ndim(value) else float(dy))
    assert np.sum(dy * forward) == pytest.approx(np.sum(adjoint * dx), rel=1e-8, abs=1e-8)


@pytest.mark.parametrize("n", [7, 1000, 3000])
def test_compiled_derivatives_compare_the_stored_entries(n):
    """The derivatives compare each entry with the maximum (``equal``): a kernel must compare the values it
    reduced, not a recomputation (a vectorised ``exp`` rounds differently), or no entry would be the
    maximum and the gradient would be NaN."""
    x = rng.normal(size=n)
    for src in ("max(i:n) exp(x[i])", "max(i:n) sin(x[i]) * exp(x[i])", "sum(j:n) max(i:n) exp(x[i] * x[j])"):
        g = tl.grad(vec(src), "x")
        got = tl.compile(g)(x=x)
        assert np.isfinite(got).all()
        np.testing.assert_allclose(got, g(x=x), rtol=1e-9, atol=1e-12)


def test_certified_adjoint_within_the_bound():
    for src in ("max(i:n) x[i]", "gen(j:n) min(i:n) x[i] * x[j]"):
        cert = tl.certify(vec(src), "x", n=50)
        assert cert.adjoint_ratio <= 4
    tl.adjoint(vec("sum(j:n) max(i:n) [i != j] * x[i] * x[j]"), "x", check={"n": 5})  # Fig. 17 never rises


# -- the programs this is for ----------------------------------------------------------------------------


def test_stable_logsumexp_and_its_gradient():
    e = tl.parse(tl.examples.source("logsumexp"))
    k, g = tl.compile(e), tl.grad(e, "x")
    kg = tl.compile(g)
    for x in (1000 + rng.normal(size=8), np.array([1000.0, 1000.0, 999.0]), -1000 + rng.normal(size=5), TIES):
        want = scipy.special.logsumexp(x)
        assert e(x=x) == pytest.approx(want, rel=1e-14) and k(x=x) == pytest.approx(want, rel=1e-14)
        np.testing.assert_allclose(g(x=x), scipy.special.softmax(x), rtol=1e-12)
        np.testing.assert_allclose(kg(x=x), scipy.special.softmax(x), rtol=1e-12)
    assert tl.certify(e, "x", n=100).ok
    s = scipy.special.softmax(TIES)
    np.testing.assert_allclose(tl.hessian(e, "x")(x=TIES), np.diag(s) - np.outer(s, s), atol=1e-15)


def test_kmeans_value_and_gradient_in_the_centres():
    e = tl.parse(tl.examples.source("kmeans"))
    x, c = rng.normal(size=(20, 3)), rng.normal(size=(4, 3))

    def objective(c):
        return ((x[:, None, :] - c[None, :, :]) ** 2).sum(axis=2).min(axis=1).sum()

    assert e(x=x, c=c) == pytest.approx(objective(c), rel=1e-13)
    assert tl.compile(e)(x=x, c=c) == pytest.approx(objective(c), rel=1e-13)
    g = tl.grad(e, "c")
    nearest = ((x[:, None, :] - c[None, :, :]) ** 2).sum(axis=2).argmin(axis=1)
    want = np.array([-2 * (x[nearest == k] - c[k]).sum(axis=0) for k in range(len(c))])
    np.testing.assert_allclose(g(x=x, c=c), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(tl.compile(g)(x=x, c=c), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g(x=x, c=c), central(objective, c), rtol=1e-6, atol=1e-6)
    assert tl.certify(e, "c", n=20, m=3, B=4).adjoint_ratio <= 4


# -- other targets ---------------------------------------------------------------------------------------


def test_cuda_text_is_generated_and_compiles_where_nvcc_is():
    e = tl.parse(tl.examples.source("logsumexp"))
    for program in (e, tl.grad(e, "x"), tl.parse(tl.examples.source("kmeans"))):
        if nvcc_path() is None:
            from tensorlang.codegen.kernel import generate

            src, _ = generate(program, target="cuda")
        else:
            src = tl.compile(program, target="cuda").source  # compiled by nvcc
        assert "__global__" in src and "tl_fmax" in src and "INFINITY" in src


def test_dask_blocks_agree():
    da = pytest.importorskip("dask.array")
    A = rng.normal(size=(40, 9))
    for src in ("gen(i:n) max(j:m) A[i, j]", "sum(i:n) min(j:m) A[i, j] * A[i, j]", "gen(j:m) max(i:n) A[i, j]"):
        e = tl.parse(src, A="[n][m]R")
        got = tl.compile(e)(A=da.from_array(A, chunks=(7, 9))).compute()
        np.testing.assert_allclose(got, e(A=A))
        g = tl.grad(e, "A") if e.type is tl.R else tl.adjoint(e, "A")
        extra = {} if e.type is tl.R else {"dy": np.ones(e(A=A).shape)}
        got = tl.compile(g)(A=da.from_array(A, chunks=(7, 9)), **extra).compute()
        np.testing.assert_allclose(got, g(A=A, **extra))


def test_same_normal_form_in_every_process():
    script = textwrap.dedent("""
        import tensorlang as tl
        from tensorlang.codegen.kernel import generate
        for name in ("logsumexp", "kmeans"):
            e = tl.parse(tl.examples.source(name))
            print(tl.to_ssa(e), tl.grad(e, list(e.free_vars)[-1]), generate(e, "c")[0])
    """)
    outs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                           env=dict(os.environ, PYTHONHASHSEED=seed)) for seed in ("1", "777")]
    assert outs[0].returncode == 0, outs[0].stderr
    assert outs[0].stdout == outs[1].stdout


def test_the_forward_derivative_of_a_minimums_adjoint_carries_no_comparison_tangents():
    """The Hessian of k-means' cost along a direction (``tl.derivative`` of its gradient): the comparisons
    with the minimum have zero partials, so the derivative compares nothing again (no ``equal_jvp``, one
    minimum in the program) and is the assignment's split times the tangents: against central differences
    of the compiled gradient, away from ties."""
    cost = tl.parse("p : [n][d]R\nc : [k][d]R\nsum(i:n) min(j:k) sum(a:d) (p[i, a] - c[j, a]) * (p[i, a] - c[j, a])")
    gradient = tl.grad(cost, "c")
    hvp = tl.derivative(gradient, ["c"])
    assert "equal_jvp" not in str(hvp) and str(hvp).count("max(") == 1, hvp
    rng = np.random.default_rng(4)
    p, c, dc = rng.normal(size=(40, 3)), rng.normal(size=(6, 3)), rng.normal(size=(6, 3))
    g = tl.compile(gradient)
    h = 1e-6
    fd = (g(p=p, c=c + h * dc) - g(p=p, c=c - h * dc)) / (2 * h)
    np.testing.assert_allclose(tl.compile(hvp)(p=p, c=c, dc=dc), fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(tl.evaluate(hvp, p=p, c=c, dc=dc), fd, rtol=1e-6, atol=1e-8)
