"""The rule library and the API around it: user rules, checkpoints, hooks, kernels as primitives,
NumPy broadcasting and reductions, and the printed IR and adjoint."""
import math

import numpy as np
import pytest

from tensorlang import ad
from tensorlang.errors import UnsupportedError


def softplus(x):
    return math.log(1 + math.exp(x))


CALLS = []


@ad.rule(softplus)
def softplus_rule(x):
    CALLS.append(x)
    y = softplus(x)
    return y, lambda dy: (dy / (1 + math.exp(-x)),)


def test_user_rule_is_used_wherever_the_function_is_called():
    CALLS.clear()
    g = ad.gradient(lambda x: softplus(2 * x) * 3, 0.5)
    assert g[0] == pytest.approx(6 / (1 + math.exp(-1.0)))
    assert CALLS == [1.0]


def test_checkpoint_recomputes_in_the_adjoint():
    runs = []

    def block(x, w):
        runs.append(x)
        return math.sin(x * w)

    def f(x, w):
        return ad.checkpoint(block, x, w) * 2
    g = ad.gradient(f, 0.3, 1.5)
    assert g == pytest.approx((2 * 1.5 * math.cos(0.45), 2 * 0.3 * math.cos(0.45)))
    assert len(runs) == 2    # the forward run, then the recomputation in the adjoint
    assert ad.checkpoint(block, 0.3, 1.5) == math.sin(0.3 * 1.5)


def _doubled_in_place(x, y):
    x *= 2
    x[0] += y
    return np.sum(x ** 2)


def _energy(x, y):
    return np.sum((2 * x) ** 2) * y


def test_a_checkpointed_function_that_writes_into_its_argument_is_refused_and_writes_after_it_are_followed():
    # (the recomputation started from the written argument: a gradient 13.2 for 5.2, with no error)
    x = np.array([0.3, -1.2, 0.8, 0.5])
    with pytest.raises(UnsupportedError, match="writes into its array arguments"):
        ad.grad(lambda v: ad.checkpoint(_doubled_in_place, v, 0.7))(x.copy())

    def written_after(v):
        c = ad.checkpoint(_energy, v, 0.7)
        v[1] = 5.0
        return c + np.sum(v)
    np.testing.assert_allclose(ad.grad(written_after)(x.copy()), 8 * 0.7 * x + [1.0, 0.0, 1.0, 1.0])


def test_hook_transforms_the_gradient_flowing_through():
    seen = []

    def f(x):
        y = ad.hook(lambda d: (seen.append(d), -d)[1], x * x)
        return 3 * y
    assert ad.gradient(f, 2.0) == (-12.0,)
    assert seen == [3]
    assert ad.hook(abs, 5.0) == 5.0


class FakeKernel:
    """Stands in for a compiled tensorlang Kernel: called with named inputs, and offering its compiled
    adjoint through ``__ad_pullback__`` (built on first use)."""

    def __init__(self):
        self.adjoint_builds = 0
        self._adjoint = None

    def __call__(self, x, w):
        return float(np.dot(x, w))

    def __ad_pullback__(self, x, w):
        if self._adjoint is None:
            self.adjoint_builds += 1
            self._adjoint = lambda dy, x, w: (dy * w, dy * x)
        return self(x, w), lambda dy: self._adjoint(dy, x, w)


def test_kernels_are_primitives_whose_pullback_is_their_adjoint():
    k = FakeKernel()
    x, w = np.array([1.0, 2.0]), np.array([3.0, -1.0])

    def f(x, w):
        return k(x, w) ** 2 + k(x=x * 2, w=w)
    gx, gw = ad.gradient(f, x, w)
    s = float(np.dot(x, w))
    assert np.allclose(gx, 2 * s * w + 2 * w)
    assert np.allclose(gw, 2 * s * x + 2 * x)
    assert k.adjoint_builds == 1


def test_broadcasting_is_undone(fd):
    rng = np.random.default_rng(1)
    A, b, c = rng.normal(size=(3, 4)), rng.normal(size=(4,)), rng.normal(size=(3, 1))

    def f(A, b, c):
        return np.sum((A * b + c) ** 2 / (1.0 + c * c)) + np.sum(A - 2.0)
    g = ad.gradient(f, A, b, c)
    for i in range(3):
        assert g[i].shape == (A, b, c)[i].shape
        assert np.allclose(g[i], fd(f, (A, b, c), i), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("axis, keepdims", [(None, False), (0, False), (1, True), (-1, False)])
def test_reductions_with_axes(fd, axis, keepdims):
    A = np.random.default_rng(2).normal(size=(3, 4))

    def f(A):
        return np.sum(np.sin(np.sum(A, axis=axis, keepdims=keepdims)) + np.mean(A * A, axis=axis, keepdims=keepdims)
                      + np.max(A, axis=axis, keepdims=keepdims))
    assert np.allclose(ad.gradient(f, A)[0], fd(f, (A,), 0), rtol=1e-5, atol=1e-6)


def test_indexing_slicing_and_shape_functions(fd):
    A = np.random.default_rng(3).normal(size=(4, 3))

    def f(A):
        B = A[1:, ::2].T @ A[1:]
        C = np.transpose(A).reshape(2, 6)[:, [0, 3, 3]]
        return np.sum(B * B) + np.sum(np.exp(C)) + A[2, 1] * A[[0, 0], 2].sum() + np.dot(A[0], A[1])
    assert np.allclose(ad.gradient(f, A)[0], fd(f, (A,), 0), rtol=1e-5, atol=1e-6)


def test_builtins_on_lists(fd):
    def f(x, y):
        xs = [x, y, x * y]
        return sum(xs) * max(xs) + min(x, y) ** 2 + abs(x - y) + len(xs) * float(x)
    g = ad.gradient(f, 0.7, -1.2)
    assert g == pytest.approx((fd(f, (0.7, -1.2), 0), fd(f, (0.7, -1.2), 1)), rel=1e-5)


def test_code_ir_and_code_adjoint_print():
    def pw(x, n):
        r = 1
        for _ in range(n):
            r *= x
        return r
    ir = str(ad.code_ir(pw, 2.0, 3))
    assert "φ(" in ir and "goto" in ir and "binop *" in ir
    adj = str(ad.code_adjoint(pw, 2.0, 3))
    assert "def _ad_grad" in adj and "_t.append(" in adj and "_t.pop()" in adj
    # the scalar loop stores numbers on its stack, not closures: no pullback objects are made
    assert "_ad_J" not in adj and "_B" not in adj
    assert str(ad.code_ir(pw)).startswith("pw(x, n)")
