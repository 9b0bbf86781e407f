"""Calling programs as a user does: a derivative takes its primal's inputs (``tl.evaluate`` and a compiled
kernel accept exactly the same calls), declared inputs are kept whether read or not, a keyword that
names nothing is an error naming the closest name, and errors carry no internal frames."""
import traceback

import numpy as np
import pytest

import tensorlang as tl

RNG = np.random.default_rng(7)


def both(expr, **inputs):
    """The value of ``expr`` through the reference evaluator and through a compiled kernel (equal)."""
    value = tl.evaluate(expr, **inputs)
    compiled = tl.compile(expr)(**inputs)
    for got, want in zip(*((v if isinstance(v, tuple) else (v,)) for v in (compiled, value)), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    return value


def numeric_gradient(f, x, h=1e-6):
    out = np.zeros_like(x)
    for k in range(x.size):
        e = np.zeros_like(x)
        e.flat[k] = h
        out.flat[k] = (f(x + e) - f(x - e)) / (2 * h)
    return out


# -- derivatives take their primal's inputs --------------------------------------------------------------


def test_gradient_that_reads_no_input_is_called_with_the_primal_inputs():
    loss = tl.parse("x : [n]R\nsum(i:n) [i != 1] * x[i]")
    g = tl.grad(loss, "x")
    assert "x : [n]R" in str(g) and g.free_vars == {"x": loss.free_vars["x"]}
    x = RNG.normal(size=5)
    np.testing.assert_array_equal(both(g, x=x), [1, 0, 1, 1, 1])
    assert tl.parse(str(g)) == g  # the printed program round-trips, declarations included


def test_linear_loss_gradient_in_scipy_fun_pattern():
    loss = tl.parse("c : [n]R; A : [m][n]R; b : [m]R; sum(i:m) b[i] * sum(j:n) A[i][j] * c[j]")
    g = tl.grad(loss, "c")
    A, b, c = RNG.normal(size=(4, 3)), RNG.normal(size=4), RNG.normal(size=3)

    def fun(c):  # SciPy calls fun(c) and jac(c) with the same arguments
        return tl.evaluate(loss, c=c, A=A, b=b)

    jac = tl.compile(g)
    np.testing.assert_allclose(jac(c=c, A=A, b=b), A.T @ b, rtol=1e-12)
    np.testing.assert_allclose(tl.evaluate(g, c=c, A=A, b=b), numeric_gradient(fun, c), rtol=1e-6)


def test_hessian_of_quadratic_form_and_of_a_linear_function():
    q = tl.parse("x : [n]R; A : [n][n]R; sum(i:n, j:n) x[i] * A[i, j] * x[j]")
    H = tl.hessian(q, "x")
    A, x = RNG.normal(size=(4, 4)), RNG.normal(size=4)
    np.testing.assert_allclose(both(H, x=x, A=A), A + A.T)
    assert tl.cost(H, x=x, A=A) == tl.cost(H, n=4) == 16  # the unused x costs nothing
    lin = tl.parse("x : [n]R; c : [n]R; sum(i:n) c[i] * x[i]")
    H0 = tl.hessian(lin, "x")
    assert H0.type == H.type
    np.testing.assert_array_equal(both(H0, x=x, c=x), np.zeros((4, 4)))


def test_gradient_in_a_declared_input_that_is_not_read_is_zero():
    e = tl.parse("x : [n]R; y : [m]R; s : R; sum(i:n) x[i] * x[i]")
    assert list(e.free_vars) == ["x", "y", "s"]
    x, y = RNG.normal(size=3), RNG.normal(size=2)
    for wrt, zero in (("y", np.zeros(2)), ("s", 0.0)):
        g = tl.grad(e, wrt)
        np.testing.assert_array_equal(both(g, x=x, y=y, s=1.5), zero)
        assert tl.parse(str(g)) == g
    d = tl.derivative(e, "s")
    assert both(d, x=x, y=y, s=1.5, ds=2.0) == 0.0
    a = tl.adjoint(e, ["x", "y"])
    gx, gy = both(a, x=x, y=y, s=1.5, dy=2.0)
    np.testing.assert_allclose(gx, 4 * x)
    np.testing.assert_array_equal(gy, np.zeros(2))


def test_every_derivative_accepts_exactly_its_primal_inputs():
    conv = tl.parse(open("examples/conv.tl").read())
    x, c = RNG.normal(size=7), RNG.normal(size=3)
    inputs = dict(x=x, c=c)
    dy = RNG.normal(size=5)
    derived = {
        "derivative": (tl.derivative(conv, "c"), dict(inputs, dc=RNG.normal(size=3))),
        "adjoint": (tl.adjoint(conv, "c"), dict(inputs, dy=dy)),
        "jacobian": (tl.jacobian(conv, "c"), inputs),
    }
    for name, (d, call) in derived.items():
        assert set(d.free_vars) == set(call), name
        both(d, **call)
    # the Jacobian of a convolution in c reads x only; it is still called with c
    np.testing.assert_allclose(tl.evaluate(derived["jacobian"][0], **inputs)[1], x[1:4])


def test_unread_inputs_are_arguments_that_fix_sizes():
    e = tl.parse("x : [n]R; y : [n + 2]R; sum(i:n) x[i]")
    k = tl.compile(e)
    assert "y" in k.input_names
    assert k(x=np.ones(3), y=np.ones(5)) == 3.0
    with pytest.raises(tl.ShapeError, match="y"):  # its shape is checked against the sizes
        k(x=np.ones(3), y=np.ones(4))
    with pytest.raises(tl.ShapeError, match="y"):
        tl.evaluate(e, x=np.ones(3), y=np.ones(4))
    assert tl.cost(e, n=10) == tl.cost(tl.parse("x : [n]R; sum(i:n) x[i]"), n=10)


def test_passes_keep_the_declarations():
    e = tl.parse("x : [n]R; y : R; sum(i:n) x[i]")
    for out in (tl.to_ssa(e), tl.normalize.let_lift(e), tl.simplify(e), e.substitute(x="gen(i:n) 2")):
        assert "y" in out.free_vars
        assert tl.parse(str(out)) == out
    assert tl.evaluate(tl.to_ssa(e), x=np.ones(4), y=1.0) == 4.0


# -- names that name nothing -----------------------------------------------------------------------------


def test_a_misspelt_keyword_is_an_error_naming_the_closest_name_everywhere():
    loss = tl.parse("x : [n]R; c : [m]R; sum(i:n, j:m) x[i] * c[j]")
    x, c = np.ones(3), np.ones(2)
    calls = {
        "evaluate": lambda **kw: tl.evaluate(loss, **kw),
        "cost": lambda **kw: tl.cost(loss, **kw),
        "certify": lambda **kw: tl.certify(loss, "x", **kw),
        "kernel": tl.compile(loss),
    }
    for name, call in calls.items():
        with pytest.raises(tl.TensorLangError, match="'N'.*did you mean 'n'"):
            call(x=x, c=c, N=3)
        with pytest.raises(tl.TensorLangError, match="'xs'.*did you mean 'x'"):
            call(xs=x, c=c, m=2, n=3)


def test_a_name_bound_nowhere_in_an_index_is_reported_as_a_size():
    with pytest.raises(tl.BoundsError, match="jj is bound nowhere, so it is taken as a size variable here; "
                                             "did you mean 'j'"):
        tl.parse("x : [n + m - 1]R; c : [m]R; gen(i:n) sum(j:m) x[i + j] * c[jj]")


def test_a_kernel_called_positionally_names_its_inputs():
    k = tl.compile(tl.parse("x : [n]R; c : [n]R; sum(i:n) x[i] * c[i]"))
    with pytest.raises(tl.TensorLangError, match=r"by name.*kernel\(x=\.\.\., c=\.\.\.\)"):
        k(np.ones(3), np.ones(3))


def test_wrt_given_an_array_says_what_wrt_is():
    loss = tl.parse("x : [n]R; sum(i:n) x[i] * x[i]")
    with pytest.raises(tl.TypeCheckError, match='wrt is a name or an input variable.*did you mean "x"'):
        tl.grad(loss, np.ones(3))
    with pytest.raises(tl.TypeCheckError, match="did you mean 'x'"):
        tl.grad(loss, "X")


def test_public_calls_raise_without_internal_frames():
    try:
        tl.parse("x : [n]R; sum(i:n) x[i + 1]")
    except tl.BoundsError as err:
        frames = traceback.extract_tb(err.__traceback__)
        shown = "".join(traceback.format_exception(err))
    files = [f.filename for f in frames]
    assert files[0] == __file__ and len(files) == 2, files  # the caller, then the public entry point
    assert "checker.py" not in shown and "During handling" not in shown


def test_a_call_prepared_from_the_shapes_of_an_earlier_one_is_checked_as_the_first():
    """Plain arrays of known shapes skip the checks they passed before; every other call is checked: a new
    shape, a wrong one, a size that disagrees, read-only, strided, int and float32 inputs, lists."""
    k = tl.compile(tl.parse("x : [n]R\ny : [n]R\ngen(i:n) x[i] * y[i]"))
    rng = np.random.default_rng(0)
    for n in (3, 5, 3):
        x, y = rng.normal(size=n), rng.normal(size=n)
        for _ in range(2):
            np.testing.assert_array_equal(k(x=x, y=y), x * y)
    with pytest.raises(tl.ShapeError, match="input y has shape \\(4,\\)"):
        k(x=np.ones(3), y=np.ones(4))
    frozen = np.arange(3.0)
    frozen.flags.writeable = False
    strided = np.arange(6.0)[::2]
    np.testing.assert_array_equal(k(x=frozen, y=strided), frozen * strided)
    np.testing.assert_array_equal(k(x=[1, 2, 3], y=np.arange(3, dtype=np.float32)), [0.0, 2.0, 6.0])
    with pytest.raises(tl.TensorLangError, match="unknown input|z"):
        k(x=np.ones(3), y=np.ones(3), z=np.ones(3))
    s = tl.compile(tl.parse("x : [n]R\nsum(i:n) x[i]"))
    assert s(x=np.ones(4)) == 4.0 and s(x=np.ones(4)) == 4.0 and s(x=np.ones(0)) == 0.0


def test_a_float_scalar_input_takes_the_prepared_call_and_anything_else_is_checked():
    """A Python or NumPy float for a scalar input of a float64 kernel is read as it is on the prepared call
    (the ODE solver's step length); an int, a bool, a float for an array input, a float of a float32 kernel
    and a 0-d array of another dtype take the full checks, with their answers or errors."""
    k = tl.compile(tl.parse("x : [n]R\nh : R\ngen(i:n) h * x[i]"))
    x = np.arange(4.0)
    for h in (0.5, np.float64(-2.0), 0.5, float("inf")):
        assert k._runner.plain({"x": x, "h": h})[0] == ((), (4,))   # (in the order of the arguments)
        np.testing.assert_array_equal(k(x=x, h=h), h * x)
    for h in (3, True, np.array(2.0, dtype=np.float32), np.float32(1.5), [2.0]):
        assert k._runner.plain({"x": x, "h": h}) is None
    np.testing.assert_array_equal(k(x=x, h=3), 3 * x)
    np.testing.assert_array_equal(k(x=x, h=np.float32(1.5)), 1.5 * x)
    with pytest.raises(tl.ShapeError, match="input h must be a real scalar of type R, got shape \\(1,\\)"):
        k(x=x, h=[2.0])
    with pytest.raises(tl.ShapeError, match="input x has shape \\(\\)"):
        k(x=2.0, h=1.0)
    k32 = tl.compile(tl.parse("x : [n]R\nh : R\ngen(i:n) h * x[i]"), dtype="float32")
    assert k32._runner.plain({"x": x.astype(np.float32), "h": 0.5}) is None
    with pytest.raises(tl.TensorLangError, match="beyond the range"):
        k32(x=x.astype(np.float32), h=1e300)


def test_pair_inputs_and_nested_results_take_the_prepared_call_and_its_checks():
    """A kernel whose input is a pair of arrays, and whose value nests pairs of arrays and scalars, gives
    on the prepared call (same shapes again) what NumPy gives, and every call that is not plain (a list
    for a pair, a pair of three, another shape, a read-only array) is checked as the first one was."""
    k = tl.compile(tl.parse("p : ([n]R, [n]R)\nw : [n]R\n"
                            "(gen(i:n) p.0[i] * w[i], (sum(i:n) p.1[i], gen(i:n) p.0[i] + p.1[i]))"))
    rng = np.random.default_rng(1)
    for n in (4, 4, 6, 4):
        a, b, w = rng.normal(size=(3, n))
        got = k(p=(a, b), w=w)
        assert isinstance(got, tuple) and isinstance(got[1], tuple) and isinstance(got[1][0], float)
        np.testing.assert_allclose(got[0], a * w)
        np.testing.assert_allclose(got[1][0], b.sum())
        np.testing.assert_allclose(got[1][1], a + b)
    with pytest.raises(tl.ShapeError, match="input p.1 has shape \\(5,\\)"):
        k(p=(np.ones(4), np.ones(5)), w=np.ones(4))
    with pytest.raises(tl.ShapeError, match="pair type"):
        k(p=(np.ones(4), np.ones(4), np.ones(4)), w=np.ones(4))
    frozen = np.arange(4.0)
    frozen.flags.writeable = False
    np.testing.assert_allclose(k(p=[frozen, frozen], w=np.ones(4))[1][1], 2 * frozen)
    np.testing.assert_allclose(k(p=(frozen, frozen), w=frozen)[0], frozen * frozen)
