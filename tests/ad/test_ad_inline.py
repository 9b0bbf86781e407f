"""Inlined NumPy rules, guarded assumptions on globals and the cached fast path of ``ad.gradient``:
the generated code must give the same gradients as the generic rules (checked against central
differences), and fall back correctly when an assumption stops holding."""
import math
from fractions import Fraction

import numpy as np
import pytest

from tensorlang import TensorLangError
from tensorlang import ad

RNG = np.random.default_rng(7)
A = RNG.normal(size=(3, 4))
K = 2


def _check(f, args, fd, rtol=1e-5, atol=1e-6):
    g = ad.gradient(f, *args)
    for i, a in enumerate(args):
        if isinstance(a, (float, np.ndarray)):
            assert np.allclose(g[i], fd(f, args, i), rtol=rtol, atol=atol), (i, g[i], fd(f, args, i))
    return g


def test_elementwise_and_reductions_are_inlined(fd):
    def f(x):
        a = np.exp(x) + np.log(x) + np.tanh(x) + np.sin(x) * np.cos(x) + np.sqrt(x) + np.square(x)
        b = np.abs(x - 0.5) + np.log1p(x) + np.expm1(x) - np.negative(x) + np.tan(x * 0.3)
        return np.sum(a * b) + np.mean(a) + np.max(b) - np.min(a) + a.sum() + b.max() + (a / b).mean()
    x = RNG.random(7) + 0.2
    src = ad.code_adjoint(f, x).text
    assert "_B" not in src.split("def _ad_pb")[0]          # no rule pullbacks: everything inlined
    assert "aprim" in str(ad.code_ir(f, x))
    _check(f, (x,), fd)


def test_array_arithmetic_broadcasts_and_unbroadcasts(fd):
    def f(x, row, s):
        y = (x * row - s) / (row + 2.0) + x ** 2 * s + 3.0 / (x + 4.0) + (x - row) ** K
        return np.sum(np.tanh(y)) + np.sum(-y) * s
    _check(f, (RNG.normal(size=(3, 4)), RNG.normal(size=4), 0.7), fd)


def test_matmul_and_indexing_on_arrays(fd):
    def f(w, v, M):
        h = np.tanh(M @ w)          # 2-D @ 1-D
        u = w @ v                   # 1-D @ 1-D
        N = M @ np.exp(M.T @ M * 0.1)  # not inlined (.T) but mixed with inlined code
        return np.sum(h) * u + h[1] + np.sum(N)
    _check(f, (RNG.normal(size=4), RNG.normal(size=4), RNG.normal(size=(3, 4))), fd)

    def g(M, N):
        return np.sum(np.exp((M @ N) * 0.1)) + (M @ N)[1, 1] * 0.5 + np.sum((M @ N)[0])
    _check(g, (RNG.normal(size=(3, 4)), RNG.normal(size=(4, 2))), fd)


def test_globals_are_assumed_and_guarded(fd):
    global A, K

    def f(w):
        return np.sum(np.exp(A @ w)) + (A @ w)[K]
    w = RNG.normal(size=4) * 0.1
    src = ad.code_adjoint(f, w).text
    assert "type(A) is" in src and "type(K) is" in src
    g1 = _check(f, (w,), fd)
    old_a, old_k = A, K
    try:
        A, K = np.asarray(old_a), np.int64(old_k)   # a NumPy int: the guard fails, the generic code runs
        assert np.allclose(ad.gradient(f, w)[0], g1[0])
        A, K = old_a * 2, old_k      # same types, new values: read when the gradient runs
        assert np.allclose(ad.gradient(f, w)[0], fd(f, (w,), 0), rtol=1e-5, atol=1e-6)
        y, back = ad.pullback(f, w)
        assert np.allclose(back(1.0)[0], fd(f, (w,), 0), rtol=1e-5, atol=1e-6)
    finally:
        A, K = old_a, old_k


def test_int_and_zero_dimensional_arrays_and_numbers():
    def f(x):
        return np.sum(np.exp(x * 0.1))
    assert np.allclose(ad.gradient(f, np.arange(3))[0], 0.1 * np.exp(0.1 * np.arange(3)))
    assert np.allclose(ad.gradient(f, np.array(2.0))[0], 0.1 * np.exp(0.2))
    assert np.isclose(ad.gradient(lambda x: np.tanh(x) * 2.0, 0.3)[0], 2 * (1 - np.tanh(0.3) ** 2))


def test_inlined_arrays_in_loops_and_branches(fd):
    def f(x, n):
        acc = np.zeros(3)
        for i in range(n):
            if i % 2:
                acc = acc + np.sin(x) * i
            else:
                acc = acc - x ** 2
        return np.sum(acc)
    _check(f, (RNG.normal(size=3), 5), fd)


def test_array_mutation_disables_inlining_and_stays_correct(fd):
    def f(x):
        y = np.exp(x)
        z = y * 1.0
        z[0] = 0.0
        return np.sum(z * y)
    x = RNG.normal(size=3)
    assert "aprim" not in str(ad.code_ir(f, x))
    _check(f, (x,), fd)


def test_fast_path_keeps_types_and_respecialises():
    def sq(x):
        return x ** 2 + 3 * x + 1
    assert ad.gradient(sq, Fraction(1, 3)) == (Fraction(11, 3),)
    assert ad.gradient(sq, 2.0) == (7.0,)
    assert ad.gradient(sq, Fraction(1, 3)) == (Fraction(11, 3),)
    assert ad.gradient(sq, 2) == (None,)
    assert np.allclose(ad.gradient(lambda x: np.sum(sq(x)), np.array([1.0, 2.0]))[0], [5.0, 7.0])
    with pytest.raises(TensorLangError, match=r"real scalar.*shape \(2,\)"):  # not the gradient of a sum
        ad.gradient(sq, np.array([1.0, 2.0]))
    assert ad.gradient(lambda x, y: math.sin(x) * y, 0.5, 2.0) == (2.0 * math.cos(0.5), math.sin(0.5))


def test_box_free_entry_ignores_an_outer_store():
    def inner(x):
        return math.sin(x) * x

    def outer(x):
        lst = [x]
        lst.append(x * 2.0)
        return ad.gradient(inner, lst[1])[0] + sum(lst)
    ad.gradient(inner, 1.0)     # cached
    assert np.isclose(outer(0.5), math.cos(1.0) * 1.0 + math.sin(1.0) + 1.5)


def test_a_state_made_by_np_zeros_is_an_array_to_the_inlined_rules(fd):
    """``np.zeros(n)``, ``np.ones(n)``, ``np.empty(n)`` called with a shape alone make float arrays, so a loop whose
    state starts as one (an RNN's, an accumulator's) keeps the inlined array rules; with a dtype, or in a function
    that writes, the state stays of unknown kind and takes the generic rules."""
    def rnn(x, W):
        h, acc = np.zeros(3), np.ones(3)   # (a display assigned to names: no tuple in between)
        for _ in range(4):
            h = np.tanh(W @ h + x)
            acc = acc * 0.5 + h
        return np.sum(h * acc)

    def typed(x, W):
        h = np.zeros(3, dtype=np.float64)
        for _ in range(2):
            h = np.tanh(W @ h + x)
        return np.sum(h * h)

    def written(x, W):
        h = np.zeros(3)
        h[0] = x[1]
        for _ in range(2):
            h = np.tanh(W @ h + x)
        return np.sum(h * h)

    x, W = RNG.normal(size=3), RNG.normal(size=(3, 3)) * 0.5
    assert "_B" not in ad.code_adjoint(rnn, x, W).text.split("def _ad_pb")[0]   # (no rule pullbacks: inlined)
    assert "_B" in ad.code_adjoint(typed, x, W).text.split("def _ad_pb")[0]
    for f in (rnn, typed, written):
        _check(f, (x, W), fd)
        H = ad.hessian(f)(x, W)
        col = (ad.grad(f)(x + 1e-5 * np.eye(3)[0], W) - ad.grad(f)(x - 1e-5 * np.eye(3)[0], W)) / 2e-5
        np.testing.assert_allclose(H[:, 0], col, rtol=1e-4, atol=1e-6)


def test_a_display_assigned_to_as_many_targets_is_separate_assignments(fd):
    """``a, b = x, y`` evaluates the values, then assigns each (no tuple in between, so each keeps its kind);
    a swap, a swap of items and a list display are right against central differences."""
    def f(x):
        a, b = x * 2.0, np.sin(x)
        a, b = b, a * b
        y = x.copy()
        y[0], y[1] = y[1], y[0] * 3.0
        [c, d] = [a + y, b]
        return np.sum(c * d) + np.sum(y ** 2)

    x = RNG.normal(size=3)
    _check(f, (x,), fd)
    H = ad.hessian(f)(x)
    col = (ad.grad(f)(x + 1e-5 * np.eye(3)[0]) - ad.grad(f)(x - 1e-5 * np.eye(3)[0])) / 2e-5
    np.testing.assert_allclose(H[:, 0], col, rtol=1e-4, atol=1e-6)
