"""Gradients computed at the same time in several threads are independent: many workers differentiate
functions that build lists, dicts and objects and write into arrays, in reverse mode, forward mode, at
second order and nested, with a compiled kernel inside, and every result is checked against a closed form
(or central differences of the plain function).  The threads switch often (a short switch interval), so
that two differentiations interleave inside one another's loops."""
import contextvars
import math
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import tensorlang as tl
from tensorlang import ad
from tensorlang.codegen import compile as tl_compile

CALLS = 96
WORKERS = 8


@pytest.fixture(autouse=True)
def switch_often():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(old)


def all_right(check, calls=CALLS, workers=WORKERS):
    """Run ``check(k)`` for k < calls on a pool of ``workers`` threads; the calls whose result was wrong."""
    with ThreadPoolExecutor(workers) as ex:
        results = list(ex.map(check, range(calls)))
    return [k for k, ok in enumerate(results) if not ok]


def point(k, n):
    return np.random.default_rng(k).uniform(-1.0, 1.0, n)


# -- the functions differentiated ---------------------------------------------------------------------------
def squares_list(x):
    acc = []
    for i in range(len(x)):
        acc.append(x[i] * x[i])
    return sum(acc)


def cubes_dict(x):
    d = {}
    for i in range(len(x)):
        d[i] = x[i] ** 3
    total = 0.0
    for i in range(len(x)):
        total = total + d[i]
    return total


class Accumulator:
    def __init__(self):
        self.total = 0.0
        self.count = 0

    def add(self, v):
        self.total = self.total + v
        self.count = self.count + 1


def sines_object(x):
    a = Accumulator()
    for i in range(len(x)):
        a.add(math.sin(x[i]))
    return a.total * 2.0


def squares_written(x):
    y = np.zeros(len(x))
    for i in range(len(x)):
        y[i] = x[i] ** 2
    return np.sum(y * x)   # sum of x_i^3


def mixed_structures(x):
    rows = [x[0] * x[1]]
    rows.append(x[1] * x[2])
    table = {"a": rows[0], "b": rows[1]}
    a = Accumulator()
    a.add(table["a"] * table["b"])
    return a.total + rows[0]   # x0 x1^2 x2 + x0 x1


def mixed_gradient(x):
    x0, x1, x2 = x[0], x[1], x[2]
    g = np.zeros(len(x))
    g[:3] = [x1 * x1 * x2 + x1, 2 * x0 * x1 * x2 + x0, x0 * x1 * x1]
    return g


REVERSE = [(squares_list, lambda x: 2 * x), (cubes_dict, lambda x: 3 * x ** 2),
           (sines_object, lambda x: 2 * np.cos(x)), (squares_written, lambda x: 3 * x ** 2),
           (mixed_structures, mixed_gradient)]


# -- reverse mode ---------------------------------------------------------------------------------------------------
def test_the_issue_reproduction_is_right_in_every_thread():
    x = np.arange(300.0)
    wrong = all_right(lambda _: (lambda g: g is not None and np.allclose(g, 2 * x))(ad.grad(squares_list)(x)),
                      calls=80, workers=4)
    assert wrong == []


def test_reverse_mode_of_structures_and_writes_in_many_threads():
    def check(k):
        f, grad = REVERSE[k % len(REVERSE)]
        x = point(k, 3 + k % 7 * 20)
        g = ad.grad(f)(x)
        return g is not None and np.allclose(g, grad(x), rtol=1e-12, atol=1e-12)
    assert all_right(check) == []


def test_value_and_grad_and_pullbacks_called_in_other_threads():
    pairs = []

    def make(k):
        x = point(k, 50)
        y, back = ad.pullback(squares_written, x)
        pairs.append((k, x, y, back))
    all_right(make, calls=24)

    def check(i):   # each pullback called in a thread that did not make it, while others run
        k, x, y, back = pairs[(i * 7) % len(pairs)]
        g, = back(2.0)
        v, g2 = ad.value_and_grad(cubes_dict)(x)
        return y == pytest.approx(np.sum(x ** 3)) and np.allclose(g, 6 * x ** 2) \
            and v == pytest.approx(np.sum(x ** 3)) and np.allclose(g2, 3 * x ** 2)
    assert all_right(check, calls=72) == []


def test_one_pullback_called_from_many_threads_at_once():
    x = point(5, 40)
    y, back = ad.pullback(squares_list, x)
    _, back_written = ad.pullback(squares_written, x)

    def check(k):
        g, = back(float(k))
        h, = back_written(float(k))
        return np.allclose(g, 2 * k * x) and np.allclose(h, 3 * k * x ** 2)
    assert y == pytest.approx(np.sum(x * x)) and all_right(check) == []


# -- forward mode and second order -------------------------------------------------------------------------------
def test_forward_mode_of_structures_and_writes_in_many_threads():
    def check(k):
        f, grad = REVERSE[k % len(REVERSE)]
        x = point(k, 3 + k % 5 * 10)
        v = point(k + 1000, len(x))
        y, t = ad.jvp(f, (x,), (v,))
        return y == pytest.approx(f(x), rel=1e-12) and t == pytest.approx(grad(x) @ v, rel=1e-10, abs=1e-12)
    assert all_right(check) == []


def cubes_hessian_vector(x, v):
    return 6 * x * v


def test_hessian_vector_products_and_hessians_in_many_threads():
    def check(k):
        x = point(k, 4 + k % 3)
        v = point(k + 1000, len(x))
        if k % 2:
            hv, = ad.hvp(cubes_dict, (x,), (v,))
            return np.allclose(hv, cubes_hessian_vector(x, v), rtol=1e-10)
        h = ad.hessian(squares_written)(x)
        return np.allclose(h, np.diag(6 * x), rtol=1e-10, atol=1e-12)
    assert all_right(check, calls=48) == []


def inner(x):
    parts = [x * x]
    parts.append(x)
    return parts[0] * parts[1]   # x^3


def outer(x):
    return ad.grad(inner)(x) * x   # 3 x^3


def test_nested_gradients_in_many_threads():
    def check(k):
        x = 0.1 + k / 10.0
        return ad.grad(outer)(x) == pytest.approx(9 * x * x, rel=1e-12) \
            and ad.grad(ad.grad(inner))(x) == pytest.approx(6 * x, rel=1e-12)
    assert all_right(check) == []


# -- a compiled kernel inside the differentiated function ----------------------------------------------------------
@pytest.fixture(scope="module")
def conv():
    e = tl.parse((Path(__file__).resolve().parent.parent.parent / "examples" / "deconv_loss.tl").read_text())
    return tl_compile(e)


def test_a_kernel_called_in_differentiated_functions_of_many_threads(conv):
    rng = np.random.default_rng(0)
    n, m = 40, 4
    x, z = rng.standard_normal(n + m - 1), rng.standard_normal(n)

    def loss(c):
        parts = []
        parts.append(conv(x=x, c=c, z=z))
        parts.append(np.sum(c * c))
        return parts[0] + parts[1]

    def closed_form(c):   # sum_i (f_i - z_i)^2 + |c|^2 with f_i = sum_j x[i + j] c[j]
        f = np.array([x[i:i + m] @ c for i in range(n)])
        return np.array([2 * (f - z) @ x[j:j + n] for j in range(m)]) + 2 * c

    ad.gradient(loss, np.ones(m))   # builds the adjoint kernel once, before threads share it

    def check(k):
        c = point(k, m)
        return np.allclose(ad.grad(loss)(c), closed_form(c), rtol=1e-10)
    assert all_right(check) == []


# -- contexts -----------------------------------------------------------------------------------------------------
def test_a_gradient_runs_in_a_copied_context():
    x = point(0, 30)
    ctx = contextvars.copy_context()
    assert np.allclose(ctx.run(ad.grad(squares_written), x), 3 * x ** 2)
    assert np.allclose(ctx.run(lambda: ad.grad(outer)(0.5)), 9 * 0.25)
