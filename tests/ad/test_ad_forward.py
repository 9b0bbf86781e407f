"""Forward mode (``ad.jvp``) against reverse mode (the inner-product identity <J v, w> = <v, J^T w>) and
central finite differences: Hypothesis-generated programs of every construct the generator draws, and
programs over data structures, closures, recursion, mutation and NumPy."""
import dataclasses
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tensorlang import ad
from tensorlang.errors import ShapeError

from test_ad_generated import Program, _kinked, compile_program


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.floats(-1.5, 1.5), st.floats(-1.5, 1.5), st.floats(-1, 1), st.floats(-1, 1))
def test_generated_programs_jvp_matches_reverse_and_differences(data, x, y, vx, vy):
    src = Program(data).source()
    f = compile_program(src)
    value, tangent = ad.jvp(f, (x, y), (vx, vy))
    assert value == f(x, y), src
    gx, gy = ad.gradient(f, x, y)
    assert abs(tangent - (gx * vx + gy * vy)) <= 1e-9 * (1 + abs(tangent)), src
    h = 1e-6
    num = (f(x + h * vx, y + h * vy) - f(x - h * vx, y - h * vy)) / (2 * h)
    if abs(num) < 1e4:
        assert abs(tangent - num) <= 1e-4 * (1 + abs(num)) or _kinked(f, x, y), src


def _directions(args, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal(np.shape(a)) if isinstance(a, np.ndarray) else float(rng.standard_normal())
                 for a in args)


def _check(f, *args):
    """jvp's value is f's; its tangent is <grad, v> (reverse mode) and the central difference along v."""
    v = _directions(args)
    y, t = ad.jvp(f, args, v)
    assert np.allclose(y, f(*args))
    g = ad.gradient(f, *args)
    assert np.isclose(t, sum(float(np.sum(gi * vi)) for gi, vi in zip(g, v)), rtol=1e-10, atol=1e-12)
    h = 1e-6
    up = f(*(a + h * d for a, d in zip(args, v)))
    down = f(*(a - h * d for a, d in zip(args, v)))
    assert np.isclose(t, (up - down) / (2 * h), rtol=1e-5, atol=1e-6)


@dataclasses.dataclass
class Point:
    a: float
    b: float


class Accumulator:
    def __init__(self, s):
        self.s = s

    def add(self, v):
        self.s = self.s + v * v


def structures(x, y):
    p = Point(x, y)
    d = {"u": p.a * 2, "v": p.b}
    acc = Accumulator(0.0)
    for k in d:
        acc.add(d[k])
    scale = lambda u: u * x  # noqa: E731
    lst = []
    for i in range(3):
        lst.append(scale(i + y))
    q = lst.pop()
    pair = (q, lst)
    return acc.s + sum(pair[1]) + pair[0] + max(x, y) + abs(x - 3 * y)


def _rec(x, n):
    if n == 0:
        return x
    return math.sin(_rec(x, n - 1)) * x


def recursion(x, y):
    k = 0
    while True:
        k += 1
        if k > 2:
            break
    return _rec(x, 3) + _rec(y, k)


def arrays(w, x):
    h = np.maximum(w * x ** 2, 0.1).reshape(3, 1)
    return float(np.sum(h.T @ h)) + np.mean(np.exp(w)) + x.max() + np.dot(w, x)


def written_in_place(w, x):
    z = np.zeros(3)
    for i in range(3):
        z[i] = w[i] * x[i] ** 2
    return np.sum(z * z)


def mlp(W1, W2, x):
    h = np.tanh(W1 @ x + 0.5)
    out = W2 @ h
    return np.log(np.sum(np.exp(out))) + 0.1 * np.sum(W1 * W1)


def numpy_breadth(a, b):
    m = np.stack([a, b])
    c = np.concatenate([a, b * 2.0])
    s = np.where(a > 0, a, b) * np.clip(b, -0.5, 0.5)
    t = np.sum(m, axis=0) + np.mean(m, axis=1).sum()
    return float(np.sum(c ** 2) + np.sum(s) + np.sum(np.sin(t)) + np.linalg.norm(a) + np.outer(a, b).sum())


@pytest.mark.parametrize("f, args", [
    (structures, (0.7, -0.3)),
    (recursion, (0.7, -0.3)),
    (arrays, (np.array([0.5, -1.0, 2.0]), np.array([1.0, 2.0, -0.5]))),
    (mlp, (np.random.default_rng(1).standard_normal((4, 3)), np.random.default_rng(2).standard_normal((2, 4)),
           np.array([0.3, -0.2, 0.9]))),
    (numpy_breadth, (np.array([0.4, -1.2, 0.8]), np.array([0.3, 0.1, -2.0]))),
])
def test_jvp_matches_reverse_and_differences(f, args):
    _check(f, *args)


def test_jvp_through_writes_into_a_fresh_array():
    _check(written_in_place, np.array([0.5, -1.0, 2.0]), np.array([1.0, 2.0, -0.5]))


def test_jvp_of_structured_output_mirrors_it():
    def f(x, y):
        return {"s": x * y, "l": [x, np.sin(y)]}, Point(x + y, 2.0)
    y, t = ad.jvp(f, (1.0, 2.0), (1.0, 0.0))
    assert t[0]["s"] == 2.0 and t[0]["l"] == [1.0, 0.0] and t[1] == Point(1.0, None)


def test_jvp_arguments_are_checked():
    with pytest.raises(ShapeError, match=r"tangents\[0\] has shape \(2,\), its primal \(3,\)"):
        ad.jvp(np.sum, (np.ones(3),), (np.ones(2),))
    with pytest.raises(ad_error()):
        ad.jvp(lambda x: x, (1.0, 2.0), (1.0,))


def ad_error():
    from tensorlang.errors import TensorLangError
    return TensorLangError


W = np.array([[0.5, -1.0, 0.25], [1.5, 0.2, -0.3], [0.1, 0.4, 0.9]])


def array_expr(draw, depth=0):
    """An expression over the arrays ``a`` and ``b`` (shape (3,)) from the NumPy rules, as source text."""
    kind = draw(st.integers(0, 12 if depth < 3 else 0))
    if kind == 0:
        return draw(st.sampled_from(["a", "b", "(a * 0.5)", "(b - 0.25)"]))
    x, y = array_expr(draw, depth + 1), array_expr(draw, depth + 1)
    return [None, f"({x} + {y})", f"({x} * {y})", f"({x} / (1.0 + {y} * {y}))", f"np.sin({x})",
            f"np.tanh({x})", f"np.exp(-{x} * {x})", f"(W @ {x})", f"np.maximum({x}, 0.1)",
            f"np.where({x} > 0.2, {x}, {y})", f"np.concatenate([{x}[1:], {y}[:1]])",
            f"np.sum({x}.reshape(3, 1) * {y}, axis=0)", f"np.mean(np.stack([{x}, {y}]), axis=0)"][kind]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_generated_numpy_programs_jvp_matches_reverse_and_differences(data):
    expr = array_expr(data.draw)
    src = f"def f(a, b):\n    return np.sum({expr} ** 2) + np.linalg.norm(a - b + 4.0)\n"
    f = compile_program(src)
    f.__globals__["W"] = W
    a = np.array(data.draw(st.lists(st.floats(-1.5, 1.5), min_size=3, max_size=3)))
    b = np.array(data.draw(st.lists(st.floats(-1.5, 1.5), min_size=3, max_size=3)))
    va, vb = _directions((a, b), seed=data.draw(st.integers(0, 99)))
    y, t = ad.jvp(f, (a, b), (va, vb))
    assert y == f(a, b), src
    ga, gb = ad.gradient(f, a, b)
    assert np.isclose(t, ga @ va + gb @ vb, rtol=1e-9, atol=1e-9), src
    h = 1e-6
    num = (f(a + h * va, b + h * vb) - f(a - h * va, b - h * vb)) / (2 * h)
    kink = (f(a + 1e-4 * va, b + 1e-4 * vb) - f(a, b)) / 1e-4 - (f(a, b) - f(a - 1e-4 * va, b - 1e-4 * vb)) / 1e-4
    if abs(num) < 1e4 and abs(kink) < 1e-2 * (1 + abs(num)):   # no branch of where/maximum between
        assert np.isclose(t, num, rtol=1e-5, atol=1e-5), src


def softsign(x):
    return x / (1 + abs(x))


def test_user_rules_in_forward_mode():
    calls = []

    @ad.jvp_rule(softsign)
    def _(primals, tangents):
        calls.append(1)
        x, = primals
        return softsign(x), None if tangents[0] is None else tangents[0] / (1 + abs(x)) ** 2

    def f(x):
        return softsign(x) * 3.0
    assert ad.jvp(f, (0.5,), (2.0,)) == (1.0, pytest.approx(6.0 / 2.25)) and calls


def hardtanh(x):
    return min(max(x, -1.0), 1.0)


@ad.rule(hardtanh)
def _hardtanh(x):
    return hardtanh(x), lambda dy: (dy if -1.0 < x < 1.0 else 0.0,)


def test_a_pullback_only_rule_is_transposed_in_forward_mode():
    # no forward rule: J v from the pullback (exact for real outputs)
    assert ad.jvp(lambda x: hardtanh(x) * 2.0, (0.25,), (1.5,)) == (0.5, 3.0)
    assert ad.jvp(lambda x: hardtanh(x) * 2.0, (3.0,), (1.5,)) == (2.0, 0.0)
