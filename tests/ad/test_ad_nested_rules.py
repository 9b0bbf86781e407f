"""Second differentiation through the calls generated code makes (``J``, ``Jkw``, ``Jm``, rules called
directly): Hessian-vector products against second central differences of the function itself, and a
clear error where a second differentiation is not supported."""
import numpy as np
import pytest

from tensorlang import ad
from tensorlang.errors import UnsupportedError


def _hvp_by_differences(f, args, vs, h=2e-4):
    """``d/dargs <grad f(args), vs>`` from f alone (mixed second central differences)."""
    out = []
    for i, a in enumerate(args):
        g = np.zeros(a.shape)
        for k in np.ndindex(a.shape):
            def at(s, t):
                moved = [x + s * h * v for x, v in zip(args, vs)]
                moved[i] = moved[i].copy()
                moved[i][k] += t * h
                return f(*moved)
            g[k] = (at(1, 1) - at(1, -1) - at(-1, 1) + at(-1, -1)) / (4 * h * h)
        out.append(g)
    return out


def test_hvp_through_keywords_methods_layout_and_einsum():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(2, 3)), rng.normal(size=(3, 2))
    va, vb = rng.normal(size=(2, 3)), rng.normal(size=(3, 2))

    def f(a, b):
        c = np.einsum("ij,jk->ik", a, b)
        s = np.hstack([a, b.T])
        return np.sum(c ** 2) + np.var(s, axis=0, keepdims=True).sum() + s.reshape(-1).std() \
            + np.sum(np.roll(a, 1, axis=1) * a) + a[0, a.argmax() % 3]

    def hvp(a, b):
        ga, gb = ad.gradient(f, a, b)
        return np.sum(ga * va) + np.sum(gb * vb)

    got = ad.gradient(hvp, a, b)
    for g, want in zip(got, _hvp_by_differences(f, [a, b], [va, vb])):
        np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-5)


def test_nested_gradient_through_a_method_rule_with_keywords():
    f = lambda x: np.sum(np.sin(x).var(axis=0, ddof=1) * 3.0)   # noqa: E731
    x = np.array([[0.3, -0.2], [1.1, 0.4], [0.5, 0.9]])
    v = np.array([[1.0, 0.5], [-0.3, 2.0], [0.7, 0.1]])
    got, = ad.gradient(lambda y: np.sum(ad.gradient(f, y)[0] * v), x)
    want, = _hvp_by_differences(f, [x], [v])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_a_callable_object_whose_own_state_is_differentiable():
    class Scale:
        def __init__(self, a):
            self.a = a

        def __call__(self, x):
            return self.a * x

    assert ad.gradient(lambda a: Scale(a)(2), 1.5) == (2.0,)


def test_second_order_through_list_mutation_is_a_clear_error():
    def f(x):
        xs = []
        xs.append(x * x)
        return xs.pop() * x

    assert ad.gradient(f, 2.0) == (12.0,)
    with pytest.raises(UnsupportedError, match="second differentiation through the method list.append"):
        ad.grad(ad.grad(f))(2.0)
