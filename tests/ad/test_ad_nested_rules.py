"""Second differentiation through the calls generated code makes (``J``, ``Jkw``, ``Jm``, rules called
directly): Hessian-vector products against second central differences of the function itself, and a
clear error where a second differentiation is not supported."""
import numpy as np
import pytest

from tensorlang import ad
from conftest import hvp_by_differences as _hvp_by_differences   # tests/ad is on the path (rootdir conftest)


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


def test_second_order_through_list_mutation():   # (more in test_ad_second_mutation.py)
    def f(x):
        xs = []
        xs.append(x * x)
        return xs.pop() * x

    assert ad.gradient(f, 2.0) == (12.0,)
    assert ad.grad(ad.grad(f))(2.0) == pytest.approx(12.0)


# -- forward over reverse (ad.hvp, ad.hessian) through the same calls ------------------------------------------------
def _helper(x, scale=1.0, power=2):
    return scale * x ** power


class _Model:
    def __init__(self, k):
        self.k = k

    def energy(self, x, power=2):
        return np.sum(self.k * x ** power)


_MODEL = _Model(1.5)

FORWARD_OVER_REVERSE = {
    "roll with axis": lambda a, b: np.sum(np.roll(a, 1, axis=0) * a) + np.sum(np.roll(b, -1, axis=1) * b ** 2),
    "roll flat": lambda a, b: np.sum(np.roll(a, 2) * a ** 2) + np.sum(np.roll(b, 1) * a.T),
    "einsum, two operands": lambda a, b: np.sum(np.einsum("ij,jk->ik", a, b) ** 2),
    "einsum, three operands": lambda a, b: np.sum(np.einsum("ij,jk,kl->il", a, b, a) ** 2),
    "var and std with keywords": lambda a, b: np.sum(np.var(a, axis=0, ddof=1) ** 2)
    + np.sum(np.std(b, axis=1, keepdims=True) * b) + np.sum(np.sin(a).var(axis=1, ddof=1) * 3.0),
    "reshape, transpose, hstack": lambda a, b: np.sum(np.reshape(a, (3, 2)) @ np.transpose(b, axes=(1, 0)) ** 2)
    + np.sum(np.hstack([a, b.T]) ** 3),
    "a Python function and a method with keywords": lambda a, b: np.sum(_helper(a, power=3, scale=2.0))
    + _MODEL.energy(b, power=3) * np.sum(a),
    "clip with differentiable bounds": lambda a, b: np.sum(np.clip(a, a_min=-0.5, a_max=b.T ** 2) * a),
}


@pytest.mark.parametrize("name", list(FORWARD_OVER_REVERSE))
def test_hvp_forward_over_reverse_through_rules(name):
    f = FORWARD_OVER_REVERSE[name]
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(2, 3)), rng.normal(size=(3, 2))
    va, vb = rng.normal(size=(2, 3)), rng.normal(size=(3, 2))
    got = ad.hvp(f, (a, b), (va, vb))
    for g, want in zip(got, _hvp_by_differences(f, [a, b], [va, vb])):
        np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["roll with axis", "einsum, three operands", "var and std with keywords",
                                  "reshape, transpose, hstack"])
def test_hessian_forward_over_reverse_through_rules(name):
    f = FORWARD_OVER_REVERSE[name]
    b = np.random.default_rng(2).normal(size=(3, 2))
    g = lambda a: f(a, b)   # noqa: E731
    a = np.random.default_rng(3).normal(size=(2, 3))
    got = ad.hessian(g)(a)
    want = np.stack([_hvp_by_differences(g, [a], [e.reshape(a.shape)])[0] for e in np.eye(a.size)])
    np.testing.assert_allclose(np.reshape(got, (a.size, a.size)), want.reshape(a.size, a.size), rtol=1e-4, atol=1e-5)


def test_forward_over_reverse_refusal_names_the_function_called():
    def softsign(x):
        return x / (1 + np.abs(x))

    @ad.rule(softsign)
    def _(x):
        def back(dy):
            with np.errstate(all="ignore"):   # (a 'with' statement: outside what forward mode transforms)
                return (dy / (1 + np.abs(x)) ** 2,)
        return softsign(x), back

    def f(x):
        return np.sum(softsign(x * x) * x)

    x = np.array([0.3, -1.2, 0.5])
    np.testing.assert_allclose(ad.gradient(f, x)[0], [(f(x + 1e-6 * e) - f(x - 1e-6 * e)) / 2e-6 for e in np.eye(3)],
                               rtol=1e-6)
    # forward over reverse refuses the rule's code (BeyondOrder: "through softsign is not supported: its rule is
    # outside what forward mode differentiates"); the gradient's recording is differentiated instead (``tower``)
    np.testing.assert_allclose(ad.hvp(f, (x,), (x,))[0], _hvp_by_differences(f, [x], [x])[0], rtol=1e-5, atol=1e-7)


def test_clip_bounds_get_their_gradient_and_tangent():
    x = np.array([0.1, -0.9, 1.4, 0.6])
    lo, hi = np.array([0.0, -0.5, 0.0, 0.8]), np.array([1.0, 1.0, 1.2, 0.9])
    # x = 0.1 inside, -0.9 below lo, 1.4 above hi, 0.6 below lo
    assert [g.tolist() for g in ad.gradient(lambda x, lo, hi: np.sum(np.clip(x, a_min=lo, a_max=hi)), x, lo, hi)] \
        == [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 1.0], [0.0, 0.0, 1.0, 0.0]]
    t = np.array([1.0, 2.0, 3.0, 4.0])
    assert ad.jvp(lambda lo: np.clip(x, lo, hi), (lo,), (t,))[1].tolist() == [0.0, 2.0, 0.0, 4.0]
