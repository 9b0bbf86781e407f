"""The examples of the papers (../shared/papers/000-003): each must give the published numbers."""
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pytest

from tensorlang import ad


def pow_loop(x, n):
    r = 1
    for _ in range(n):
        r *= x
    return r


def pow_while(x, n):
    r = 1
    while n > 0:
        n -= 1
        r *= x
    return r


def test_pow_loop_gives_12_and_none():
    assert ad.gradient(pow_loop, 2.0, 3) == (12.0, None)
    assert ad.gradient(pow_while, 2.0, 3) == (12.0, None)


def test_pow_loop_with_zero_iterations():
    assert ad.gradient(pow_loop, 2.0, 0) == (0.0, None)


def test_cos_sin():
    def foo(x):
        a = math.sin(x)
        return math.cos(a)
    (g,) = ad.gradient(foo, 1.0)
    assert g == pytest.approx(-math.sin(math.sin(1.0)) * math.cos(1.0))


def leaky_relu(x):
    if x > 0:
        return x
    else:
        return 0.01 * x


def test_leaky_relu_both_branches():
    assert ad.gradient(leaky_relu, 3.0) == (1.0,)
    assert ad.gradient(leaky_relu, -3.0) == (0.01,)


def make_scaler(a):
    return lambda x: x * a


def test_closure_gradient_of_captured_variable():
    f = make_scaler(3.0)
    assert ad.gradient(f, 2.0) == (3.0,)
    y, back = ad.pullback(f, 2.0)
    assert y == 6.0 and back(1.0) == (3.0,)
    assert back.closure_gradient.a == 2.0           # Zygote: ((a = 2,), 3)
    # a closure passed as an argument gets a gradient with the structure of its captured variables
    g_f, g_x = ad.gradient(lambda f, x: f(x), f, 2.0)
    assert g_f.a == 2.0 and g_x == 3.0


def rpow(x, n):
    if n == 0:
        return 1.0
    return x * rpow(x, n - 1)


def test_recursive_power():
    assert ad.gradient(rpow, 2.0, 3) == (12.0, None)
    assert ad.gradient(rpow, 1.5, 5) == (pytest.approx(5 * 1.5 ** 4), None)


def test_fraction_in_fraction_out():
    g = ad.gradient(lambda x: x ** 2 + 3 * x + 1, Fraction(1, 3))
    assert g == (Fraction(11, 3),) and type(g[0]) is Fraction


def test_second_derivative_by_nesting():
    def d(x):
        return ad.gradient(lambda y: y ** 3, x)[0]
    assert ad.gradient(d, 2.0) == (12.0,)

    def dsin(x):
        return ad.gradient(math.sin, x)[0]
    assert ad.gradient(dsin, 0.5)[0] == pytest.approx(-math.sin(0.5))


def test_second_derivative_through_a_loop_and_a_closure():
    def inner(x):
        return ad.gradient(lambda y: pow_loop(y * x, 3), 1.0)[0]   # 3 x^3 at y = 1
    assert ad.gradient(inner, 2.0)[0] == pytest.approx(9 * 2.0 ** 2)


@dataclass
class Point:
    x: float
    y: float

    def __add__(self, other):
        return Point(self.x + other.x, self.y + other.y)

    def __sub__(self, other):
        return Point(self.x - other.x, self.y - other.y)

    def __mul__(self, k):
        return Point(self.x * k, self.y * k)


def distance(p1, p2):
    d = p1 - p2
    return np.linalg.norm([d.x, d.y])


def test_point_distance_fit_converges():
    """003_*.txt: fit p = p1 * k1 + p2 * k2 by gradient descent on the distance; the article's run
    ends at (0.33427804653861276, 0.4996408206795386), the solution is (1/3, 1/2)."""
    p1, p2, p = Point(2, 3.0), Point(-2.0, 0), Point(-1 / 3, 1.0)
    k1, k2 = 0.1, 0.1
    for _ in range(1000):
        d1, d2 = ad.gradient(lambda a, b: distance(p1 * a + p2 * b, p), k1, k2)
        k1 -= 1e-3 * d1
        k2 -= 1e-3 * d2
    assert (k1, k2) == pytest.approx((1 / 3, 1 / 2), abs=2e-3)
    assert (k1, k2) == pytest.approx((0.33427804653861276, 0.4996408206795386), rel=1e-9)


def test_dataclass_gradient_has_the_same_type():
    g, = ad.gradient(lambda p: p.x * p.x + 3 * p.y, Point(2.0, 5.0))
    assert g == Point(4.0, 3.0)
