"""Writes into what a call returned, after the call: the call's pullback may read its result (``np.exp``'s
and ``np.tanh``'s do, ``eigh``'s reads its eigenvalues), and a primitive that returns several arrays (a rule,
a compiled kernel) cannot take the gradients code after it left in the box store for them.  Each gradient
is checked against central differences of the same function, or of the same computation written without
the write; a second derivative through such a write is refused by name."""
import types

import numpy as np
import pytest

import tensorlang as tl
from tensorlang import ad
from tensorlang.errors import UnsupportedError

X = np.array([0.3, -0.2, 0.7])


def _exp_then_zeroed(x):
    y = np.exp(x)
    s = np.sum(y * y)
    y *= 0.0
    return s


def _tanh_then_entry_written(x):
    y = np.tanh(x)
    s = np.sum(y)
    y[0] = 5.0
    return s + np.sum(y)


def _made(x):
    return np.exp(x)


def _callee_result_written(x):
    y = _made(x)
    s = np.sum(y * y)
    y += 1.0
    return s


def _in_a_loop(x):
    total = 0.0
    for k in range(3):
        y = np.exp(x * (k + 1.0))
        total = total + np.sum(y * y)
        y[k] = 0.0
    return total


def _eigenvalues_scaled(x):
    A = np.outer(x, x) + np.diag([1.0, 2.0, 4.0])
    w, V = np.linalg.eigh(A)
    s = np.sum(w ** 3) + np.sum(V[0] * V[0] * w)
    w *= 3.0
    return s + np.sum(w)


@pytest.mark.parametrize("f", [_exp_then_zeroed, _tanh_then_entry_written, _callee_result_written, _in_a_loop,
                               _eigenvalues_scaled])
def test_the_pullback_of_a_call_sees_the_result_it_made(check, f):
    check(f, X.copy(), rtol=1e-6, atol=1e-7)
    jac = ad.jacobian(f, mode="reverse")(X.copy())
    step = 1e-6
    numeric = np.array([(f(X + step * e) - f(X - step * e)) / (2 * step) for e in np.eye(3)])
    np.testing.assert_allclose(jac, numeric, rtol=1e-6, atol=1e-7)


def test_the_argument_a_call_returns_itself_is_written_as_without_differentiation():
    """``np.asarray(x)`` is ``x``: a write into it writes the caller's array, with or without ``ad.grad``."""
    def f(x):
        y = np.asarray(x)
        s = np.sum(np.sin(y))
        y *= 2.0
        return s + np.sum(x)

    x = X.copy()
    g = ad.grad(f)(x)
    np.testing.assert_allclose(x, 2 * X)
    np.testing.assert_allclose(g, np.cos(X) + 2.0, rtol=1e-12)


SOURCE = """
def step(h, x):
    y = PAIR(h=h, x=x)
    h *= 0.0
    return y

def loss(x):
    h1, h2 = x + 0.0, x + 0.0
    for t in range(3):
        h1, c1 = step(h1, x)
        h2, c2 = step(h2, h1)
    return np.sum(h2) + np.sum(c2)
"""


def _pair_numpy(h, x):
    return h * x + 0.5 * h, x * x


def _loss_numpy(x):
    h1 = h2 = x
    for _ in range(3):
        h1, c1 = _pair_numpy(h1, x)
        h2, c2 = _pair_numpy(h2, h1)
    return np.sum(h2) + np.sum(c2)


@pytest.mark.parametrize("how", ["kernel", "rule"])
def test_arrays_a_primitive_returned_in_a_tuple_and_code_after_it_wrote(how):
    """The results of a compiled kernel with a pair output (and of a registered rule returning a tuple),
    written into by the next step of a loop: their gradients reach the primitive's pullback."""
    m = types.ModuleType("written_pair")
    m.np = np
    if how == "kernel":
        m.PAIR = tl.compile(tl.parse("h : [n]R\nx : [n]R\n(gen(i:n) h[i] * x[i] + 0.5 * h[i], gen(i:n) x[i] * x[i])"))
    else:
        def pair(h, x):
            return _pair_numpy(h, x)

        @ad.rule(pair)
        def _(h, x):
            def back(dy):
                a, b = (np.zeros_like(h) if d is None else d for d in dy)
                return a * (x + 0.5), a * h + 2 * x * b
            return pair(h, x), back
        m.PAIR = pair
    ad.define(SOURCE, m.__dict__)
    assert m.loss(X.copy()) == pytest.approx(_loss_numpy(X), rel=1e-14)
    step = 1e-6
    numeric = np.array([(_loss_numpy(X + step * e) - _loss_numpy(X - step * e)) / (2 * step) for e in np.eye(3)])
    np.testing.assert_allclose(ad.grad(m.loss)(X.copy()), numeric, rtol=1e-6, atol=1e-7)
    # second order: forward over reverse is refused by name; reverse over reverse through the rule and through
    # the kernel (its adjoint's compiled adjoint) is right against second differences
    hessian = np.array([ad.grad(lambda x, i=i: ad.grad(m.loss)(x)[i])(X.copy()) for i in range(3)])
    if how == "kernel":   # (a compiled kernel cannot run on the stand-ins of the recording that would follow it)
        with pytest.raises(UnsupportedError):
            ad.hessian(m.loss)(X.copy())
    else:   # (forward over reverse refuses the rule's write; of the gradient's recording, ``tower``)
        np.testing.assert_allclose(ad.hessian(m.loss)(X.copy()), hessian, rtol=1e-10, atol=1e-12)
    def loss_at(i, j, si, sj, h=1e-4):
        return _loss_numpy(X + si * h * np.eye(3)[i] + sj * h * np.eye(3)[j])

    by_differences = np.array([[(loss_at(i, j, 1, 1) - loss_at(i, j, 1, -1) - loss_at(i, j, -1, 1)
                                 + loss_at(i, j, -1, -1)) / 4e-8 for j in range(3)] for i in range(3)])
    np.testing.assert_allclose(hessian, by_differences, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("second", [lambda f: ad.hessian(f)(X.copy()),
                                    lambda f: ad.grad(lambda x: np.sum(ad.grad(f)(x)))(X.copy()),
                                    lambda f: ad.hvp(f, (X.copy(),), (np.ones(3),))])
def test_a_second_derivative_through_a_written_result_is_refused_by_name(second):
    with pytest.raises(UnsupportedError, match="writes into an array a call returned, after the call"):
        second(_exp_then_zeroed)
