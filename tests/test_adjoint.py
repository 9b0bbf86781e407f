"""The adjoint (Fig. 14-16) and the derivative API: the inner-product identity and finite differences
on generated programs, both theorem ratios, the checked mode of Fig. 17, and the paper's readings."""
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import tensorlang as tl
from tensorlang.nodes import Gen, Sum, walk

from oracles import (
    assert_close, central_difference, checkable_difference, differentiable_inputs, inner, random_like,
)
from strategies import SMOOTH_FUNCTIONS, program_and_inputs, scalar_programs

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def draw_rng(rnd):
    return np.random.default_rng(rnd.randint(0, 2**32))


@settings(max_examples=120, **SETTINGS)
@given(program_and_inputs(black_boxes=SMOOTH_FUNCTIONS, allow_zero=False), st.randoms(use_true_random=False))
def test_inner_product_identity(case, rnd):
    """<dy, D e(dx)> = <D^T e(dy), dx> for random dx, dy, all differentiable inputs at once."""
    expr, inputs = case
    wrt = differentiable_inputs(expr)
    rng = draw_rng(rnd)
    dx = {name: random_like(inputs[name], rng) for name in wrt}
    dy = random_like(tl.evaluate(expr, **inputs), rng)
    forward = tl.evaluate(tl.derivative(expr, wrt), **inputs, **{"d" + k: v for k, v in dx.items()})
    back = tl.evaluate(tl.adjoint(expr, wrt), **inputs, dy=dy)
    grads = [back]
    for _ in wrt[1:]:
        grads = list(grads[:-1]) + list(grads[-1])
    lhs = inner(dy, forward)
    rhs = sum(inner(g, dx[name]) for g, name in zip(grads, wrt))
    assert lhs == pytest.approx(rhs, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("src", [
    "gen(i:m) [i < n] * x[i] + 1",
    "gen(i:m) [i < n] * exp(x[i])",
    "let t0 = (1, 1) in ([0 < n] * x[0] - (1), gen(i:m) let t1 = t0.0 in [i < n] * x[i] + t1)",
])
@pytest.mark.parametrize("n, m", [(2, 1), (3, 5), (4, 4)])
def test_a_statement_over_fewer_points_than_its_operand(src, n, m):
    """``X7 = gen(i0:m) ... X2[i0]`` with ``X2 : [n]R``: the contribution to ``dX2`` stops at ``m``
    (found by an explored draw: the adjoint read ``dy[k0]`` for every ``k0 < n``)."""
    expr = tl.parse(src, x="[n]R")
    rng = np.random.default_rng(n * 10 + m)
    x, dx = rng.standard_normal(n), rng.standard_normal(n)
    dy = random_like(tl.evaluate(expr, x=x, n=n, m=m), rng)
    forward = tl.evaluate(tl.derivative(expr, "x"), x=x, dx=dx, n=n, m=m)
    back = tl.evaluate(tl.adjoint(expr, "x"), x=x, dy=dy, n=n, m=m)
    assert inner(dy, forward) == pytest.approx(inner(back, dx), rel=1e-12, abs=1e-12)


@settings(max_examples=80, **SETTINGS)
@given(program_and_inputs(exprs=scalar_programs(black_boxes=SMOOTH_FUNCTIONS), allow_zero=False),
       st.randoms(use_true_random=False))
def test_grad_matches_finite_differences(case, rnd):
    expr, inputs = case
    wrt = differentiable_inputs(expr)
    name = wrt[rnd.randrange(len(wrt))]
    direction = random_like(inputs[name], draw_rng(rnd))
    fd = checkable_difference(expr, inputs, {name: direction})
    assume(fd is not None)
    g = tl.evaluate(tl.grad(expr, name), **inputs)
    assert inner(g, direction) == pytest.approx(float(fd), rel=1e-4, abs=1e-5)


@settings(max_examples=60, **SETTINGS)
@given(program_and_inputs(max_size=4, allow_zero=False), st.randoms(use_true_random=False))
def test_theorem_ratios_within_4(case, rnd):
    """Theorem 6.1 (forward / primal) and 6.35 ($_IO ratio) at random sizes (relations included)."""
    expr, inputs = case
    wrt = differentiable_inputs(expr)
    cert = tl.certify(expr, wrt, **inputs)
    assert cert.forward_ratio <= 4 and cert.adjoint_ratio <= 4, str(cert)


@settings(max_examples=25, **SETTINGS)
@given(program_and_inputs(max_size=3, allow_zero=False))
def test_checked_mode_never_raises_the_extended_cost(case):
    expr, inputs = case
    sizes = {k: inputs[k] for k in expr.sizes}
    relations = [k for k, t in expr.free_vars.items() if k not in differentiable_inputs(expr)]
    if relations:  # the extended cost of a relation-guarded term needs the data; checked by the rest
        return
    tl.adjoint(expr, differentiable_inputs(expr), check=sizes)


def loops(e):
    return [n for n in walk(e) if isinstance(n, (Gen, Sum))]


def test_adjoint_of_convolution_is_a_correlation():
    conv = tl.parse(open("examples/conv.tl").read())
    a = tl.adjoint(conv, "x")
    sums = [n for n in loops(a) if isinstance(n, Sum)]
    gens = [n for n in loops(a) if isinstance(n, Gen)]
    # a generator over x's index, of one sum (over the kernel's index j): no sum over i is left
    assert len(gens) == 1 and len(sums) == 1 and str(sums[0].size) == "m"
    x, c, dy = np.random.default_rng(0).normal(size=(3, 12))[:, :12]
    c, dy = c[:4], dy[:9]
    np.testing.assert_allclose(tl.evaluate(a, x=x, c=c, dy=dy), np.convolve(dy, c))


def test_trace_and_eye_transpose_into_each_other():
    trace, eye = tl.parse(open("examples/trace.tl").read()), tl.parse(open("examples/eye.tl").read())
    assert tl.adjoint(trace, "A") == tl.parse("A : [n][n]R; dy : R; gen(i:n, j:n) [j = i] * dy")
    assert tl.adjoint(eye, "x") == tl.parse("x : R; dy : [n][n]R; sum(i:n) dy[i, i]")


PATHOLOGICAL = {
    "k traces of diag(x)": "x : [n]R; let A = gen(i:n, j:n) [i = j] * x[i] in "
                           "(sum(k:n) A[k, k]) + (sum(k:n) A[k, k]) + (sum(k:n) A[k, k])",
    "dot(A[:,0], A[0,:]) of diag(x)": open("examples/diag_dot.tl").read(),
    "the sum that skips x[1]": open("examples/skip_x1.tl").read(),
}


@pytest.mark.parametrize("name", list(PATHOLOGICAL))
def test_pathological_gradients_are_linear(name):
    e = tl.parse(PATHOLOGICAL[name])
    g = tl.grad(e, "x")
    small, large = tl.cost(g, n=1000), tl.cost(g, n=2000)
    assert large <= 2.1 * max(small, 1)
    assert tl.certify(e, "x", n=1000).ok
    x = np.random.default_rng(1).normal(size=7)
    fd = np.array([central_difference(e, {"x": x}, {"x": np.eye(7)[k]}) for k in range(7)])
    np.testing.assert_allclose(tl.evaluate(g, x=x, n=7), fd, rtol=1e-6, atol=1e-6)


def test_hessian_of_quadratic_form_is_a_plus_a_transpose():
    q = tl.parse("x : [n]R; A : [n][n]R; sum(i:n, j:n) x[i] * A[i, j] * x[j]")
    H = tl.hessian(q, "x")
    assert H == tl.parse("x : [n]R; A : [n][n]R; gen(i:n, j:n) A[i, j] + A[j, i]")
    assert tl.cost(H, n=200) == 200 * 200
    A = np.random.default_rng(2).normal(size=(5, 5))
    np.testing.assert_allclose(tl.evaluate(H, A=A, x=np.ones(5)), A + A.T)


def test_trace_of_jacobian_of_elementwise_map_is_linear():
    f = tl.parse("x : [n]R; gen(i:n) sin(x[i]) * x[i]")
    J = tl.jacobian(f, "x")
    divergence = tl.simplify(tl.parse("J : [n][n]R; sum(i:n) J[i, i]").substitute(J=J))
    assert tl.cost(divergence, n=2000) <= 2.1 * tl.cost(divergence, n=1000)
    x = np.linspace(-1, 1, 6)
    assert tl.evaluate(divergence, x=x) == pytest.approx(np.sum(np.sin(x) + x * np.cos(x)))


def test_hessian_vector_product_by_derivative_of_grad():
    q = tl.parse("x : [n]R; sum(i:n) exp(x[i]) * x[i]")
    hvp = tl.derivative(tl.grad(q, "x"), "x")
    x, v = np.linspace(-1, 1, 5), np.arange(5.0)
    np.testing.assert_allclose(tl.evaluate(hvp, x=x, dx=v), (2 + x) * np.exp(x) * v)


def test_several_wrt_give_right_nested_pairs():
    e = tl.parse("x : R; y : R; z : R; x * y * z")
    gx, (gy, gz) = tl.evaluate(tl.grad(e, ["x", "y", "z"]), x=2.0, y=3.0, z=5.0)
    assert (gx, gy, gz) == (15.0, 10.0, 6.0)


def test_bad_wrt():
    e = tl.parse("S : rel[n]; x : [n]R; sum(i:n) [S(i)] * x[i]")
    with pytest.raises(tl.TypeCheckError, match="not an input"):
        tl.grad(e, "q")
    with pytest.raises(tl.TypeCheckError, match="relation"):
        tl.grad(e, "S")
    with pytest.raises(tl.TypeCheckError, match="scalar"):
        tl.grad(tl.parse("x : [n]R; gen(i:n) x[i]"), "x")


def test_a_tensor_of_pairs_as_an_input_is_refused():
    # its input statement reads it as a struct of arrays (gen(j) t[j].0), which the adjoint does not take
    with pytest.raises(tl.UnsupportedError, match="tensor of pairs as an input"):
        tl.grad(tl.parse("t : [n](R, R); sum(i:n) t[i].0 * 2"), "t")


def test_grad_keeps_an_input_named_dy():
    # the cotangent takes a fresh name (dy1); only it is set to 1, the program's own dy stays an input
    e = tl.parse("dy : R; x : R; dy * x * x")
    g = tl.grad(e, "x")
    assert "dy" in g.free_vars
    assert tl.evaluate(g, dy=5.0, x=3.0) == 30.0


def test_a_derivation_leaves_no_reference_cycles_of_its_own():
    """What a derivation drops is freed when dropped (no node's memo refers to the node, no recursive
    closure refers to itself): the cycle collector finds almost nothing after the gradient of a 3-layer
    network (before: thousands of objects, among them the adjoint's whole state)."""
    import gc

    e = tl.parse("""x : [n]R
y : [n]R
A : [n][n]R
B : [n][n]R
C : [n][n]R
let h1 = gen(i:n) tanh(sum(j:n) A[i, j] * x[j]) in
let h2 = gen(i:n) tanh(sum(j:n) B[i, j] * h1[j]) in
let h3 = gen(i:n) tanh(sum(j:n) C[i, j] * h2[j]) in
sum(i:n) (h3[i] - y[i]) * (h3[i] - y[i])""")
    wrt = ["A", "B", "C"]
    tl.grad(e, wrt)  # what is made once per process (SymPy's caches, black boxes) made
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        g = tl.grad(e, wrt)
        found = gc.collect()
    finally:
        if enabled:
            gc.enable()
    assert found < 300, found
    assert "C" in g.free_vars


def test_the_passes_pause_the_cycle_collector_and_leave_it_as_they_found_it(monkeypatch):
    """The symbolic calls run with the cycle collector paused (their nodes form no cycles, above) and
    resume it when the last one running returns, also after an error and across threads; a collector
    the user turned off stays off."""
    import gc
    import threading

    import tensorlang.derive.api as derive_api

    e = tl.parse("x : [n]R\nsum(i:n) x[i] * x[i]")
    seen = []
    original = derive_api.adjoint_ssa

    def spy(*args, **kw):
        seen.append(gc.isenabled())
        return original(*args, **kw)

    monkeypatch.setattr(derive_api, "adjoint_ssa", spy)
    import tensorlang.codegen.kernel as kernel

    generate = kernel.generate
    monkeypatch.setattr(kernel, "generate",
                        lambda *args, **kw: (seen.append(gc.isenabled()), generate(*args, **kw))[1])
    enabled = gc.isenabled()
    try:
        gc.enable()
        tl.grad(e, "x")
        assert seen == [False] and gc.isenabled()
        with pytest.raises(tl.TypeCheckError, match="y is not an input"):
            tl.grad(e, "y")
        assert gc.isenabled()
        threads = [threading.Thread(target=tl.grad, args=(e, "x")) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert gc.isenabled() and seen == [False] * 5
        tl.compile(e)  # C generation builds nodes too
        assert gc.isenabled() and seen == [False] * 6
        gc.disable()
        tl.grad(e, "x")
        assert not gc.isenabled()
    finally:
        (gc.enable if enabled else gc.disable)()
