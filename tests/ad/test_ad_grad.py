"""``ad.grad(f, argnums)`` (JAX style): the returned function gives the gradient in argument ``argnums``
(a tuple of them for a tuple), what ``ad.gradient`` gives, on the papers' examples and through the
straight-line fast path of the all-argument gradient function it picks from (checked against central
differences), which falls back to ``ad.gradient`` for other argument types."""
import math
from fractions import Fraction

import pytest

from tensorlang import ad
from tensorlang.derive.ad.api import gradients
from tensorlang.errors import TypeCheckError

from test_ad_papers import leaky_relu, make_scaler, pow_loop, pow_while, rpow


def _fd(f, args, i, h=1e-6):
    up = list(args)
    dn = list(args)
    up[i] += h
    dn[i] -= h
    return (f(*up) - f(*dn)) / (2 * h)


def _same(f, *args):
    floats = tuple(i for i, a in enumerate(args) if type(a) is not int)   # (an int is not differentiated)
    g = ad.grad(f, argnums=floats)
    first = g(*args)
    again = g(*args)          # after the first call: the installed code
    assert first == again == tuple(ad.gradient(f, *args)[i] for i in floats)
    assert ad.gradient(f, *args) == gradients(f)(*args)
    assert ad.grad(f)(*args) == first[0]
    return g


def test_grad_matches_gradient_on_the_paper_examples():
    _same(pow_loop, 2.0, 3)
    _same(pow_while, 2.0, 3)
    _same(pow_loop, 2.0, 0)
    _same(rpow, 1.5, 5)
    _same(leaky_relu, 3.0)
    _same(leaky_relu, -3.0)
    assert ad.grad(pow_loop)(2.0, 3) == 12.0
    with pytest.raises(TypeCheckError, match=r"argument 1 \(n\) is an int"):   # as in JAX
        ad.grad(pow_loop, argnums=(0, 1))(2.0, 3)
    with pytest.raises(TypeCheckError, match=r"argument 1 \(n\) is an int"):
        ad.grad(pow_loop, argnums=1)(2.0, 3)


def test_grad_of_a_closure():
    f = make_scaler(3.0)
    g = _same(f, 2.0)
    assert g(2.0) == (3.0,)
    assert ad.grad(lambda f, x: f(x), argnums=1)(f, 2.0) == 3.0


def test_grad_fraction_in_fraction_out():
    g = ad.grad(lambda x: x ** 2 + 3 * x + 1)
    r = g(Fraction(1, 3))
    assert r == Fraction(11, 3) and type(r) is Fraction
    assert g(Fraction(1, 3)) == r
    # the straight-line code made for floats hands other types over to ad.gradient
    h = ad.grad(lambda x: x ** 2 + 3 * x + 1)
    assert h(2.0) == 7.0
    assert h(Fraction(1, 3)) == r and type(h(Fraction(1, 3))) is Fraction
    assert ad.gradient(lambda x: x ** 2, 3) == (None,)   # Zygote's form; ad.grad refuses an int, as JAX does
    with pytest.raises(TypeCheckError, match=r"argument 0 \(x\) is an int"):
        h(3)


def sincos(x):
    return math.sin(math.cos(x))


def mixed(x, y, n):
    a = x * y + 2 * x
    b = -a / y - math.exp(x) ** n + abs(x) + min(x, 2) + math.tanh(y) * math.sqrt(x)
    return b * b % 7.0 + math.atan2(x, y) - math.log(y) + x ** y


def lin(x):
    return 2 * x


def ident(x, y):
    return x


def test_straight_line_path_is_taken_and_matches_finite_differences():
    for f, args in [(sincos, (1.0,)), (sincos, (-0.3,)), (mixed, (1.5, 2.0, 2)), (mixed, (0.7, 1.3, 3)),
                    (lin, (1.0,)), (ident, (2.0, 3.0))]:
        g = gradients(f)
        assert g(*args) == ad.gradient(f, *args)
        assert g.__ad_source__ is not None and "while" not in g.__ad_source__   # the straight-line code
        got = g(*args)
        assert got == ad.gradient(f, *args)
        for i, a in enumerate(args):
            if type(a) is float:
                assert got[i] == pytest.approx(_fd(f, args, i), rel=1e-5, abs=1e-6)
                assert type(got[i]) is float
            else:
                assert got[i] is None
    assert ad.grad(ident, argnums=(0, 1))(2.0, 3.0) == (1.0, 0.0)
    assert ad.grad(lin)(1.0) == 2.0 and type(ad.grad(lin)(1.0)) is float


def test_straight_line_branches_and_loops_use_the_general_code():
    g = gradients(leaky_relu)
    g(1.0)
    assert g.__ad_source__ is None
    assert g(-2.0) == (0.01,)
    assert ad.grad(leaky_relu)(-2.0) == 0.01


def test_grad_errors_like_gradient():
    g = ad.grad(sincos)
    assert (g(0.5),) == ad.gradient(sincos, 0.5)
    with pytest.raises(TypeError):
        g()
    h = ad.grad(lambda x: math.log(x))
    with pytest.raises(ValueError):
        h(-1.0)
    assert h(2.0) == 0.5
    with pytest.raises(ValueError):
        h(-1.0)


def test_grad_in_public_api():
    assert "grad" in ad.__all__ and ad.grad(sincos).__wrapped__ is sincos


def test_the_straight_line_gradient_of_a_power_below_one_runs_on_every_call():
    """``ad.grad(lambda x: x ** x)`` at ``x < 1``: the straight-line code installed after the first call named the
    runtime's helpers of a power's partials (``_ad_times``, ``_ad_powd``) without having them, so the second call
    raised a raw ``NameError``."""
    def f(x):
        return x ** x

    def g(a, b):
        return a ** b + b ** a

    for x in (0.7, 0.2, 1.5):
        gf = ad.grad(f)
        for _ in range(3):
            assert gf(x) == pytest.approx(x ** x * (math.log(x) + 1), rel=1e-12)
    gg = ad.grad(g, argnums=(0, 1))
    for _ in range(3):
        da, db = gg(0.4, 0.3)
        assert da == pytest.approx(_fd(g, (0.4, 0.3), 0), rel=1e-6) and db == pytest.approx(_fd(g, (0.4, 0.3), 1), rel=1e-6)
