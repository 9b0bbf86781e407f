"""The supported language, construct by construct, checked against central finite differences."""
import math
from collections import namedtuple

import numpy as np
import pytest

from tensorlang import ad
from all_modes import check_modes   # (tests/ad is on the path)


def check(f, *args, fd, rel=1e-5):
    grads = ad.gradient(f, *args)
    for i, (x, g) in enumerate(zip(args, grads)):
        if isinstance(x, float):
            assert g == pytest.approx(fd(f, args, i), rel=rel, abs=1e-6), (i, g)
    return grads


def branches(x, y):
    if x > y:
        z = x * y
    elif x < -1:
        z = x - y
    else:
        z = math.exp(x) + y
    return z * 2 if z > 0 else z / 2


def test_if_elif_else_and_conditional_expressions(fd):
    for args in [(2.0, 1.0), (-3.0, 0.5), (0.5, 0.7), (0.1, -4.0)]:
        check(branches, *args, fd=fd)


def test_and_or_and_chained_comparisons(fd):
    def f(x, y):
        if 0 < x < 2 and (y > 1 or x > 1.5):
            return x * y
        return x + y
    for args in [(1.0, 2.0), (1.0, 0.5), (1.7, 0.5), (3.0, 2.0)]:
        check(f, *args, fd=fd)


def loops(x, n):
    s = 0.0
    i = 0
    while True:
        i += 1
        if i % 2 == 0:
            continue
        for j in range(1, i):
            if j > 3:
                break
            s = s + x ** j / i
        if i > n:
            return s * x
    return -1.0


def test_while_for_break_continue_early_return(fd):
    check(loops, 1.3, 6, fd=fd)
    check(loops, 0.7, 1, fd=fd)


def _derivative_coefficients(p, m):
    if m < 0:
        raise ValueError("m must be positive")   # (a call of a class: the values of unknown kind are active)
    c = p
    for _ in range(m):
        n = len(c) - 1
        c = c[:-1] * np.arange(n, 0, -1)   # (an array made without a derivative, of a new shape each pass)
    return c


def test_a_loop_over_values_that_change_shape_with_arrays_made_without_a_derivative():
    """The gradient added into ``np.arange``'s array (no derivative) is dropped at each pass (it was kept, and added
    to the next pass's array of another shape: a raw broadcasting error)."""
    check_modes(lambda p: np.sum(_derivative_coefficients(p, 2) * p[:3]), np.array([0.3, -0.7, 1.2, 0.5, 0.9]))


def test_for_over_sequences_and_comprehensions(fd):
    def f(x, y):
        vals = [x, y, x * y]
        total = 0.0
        for k, v in enumerate(vals):
            total += k * v
        for a, b in zip(vals, reversed(vals)):
            total += a * b
        squares = {i: v * v for i, v in enumerate(vals)}
        return total + sum(v for v in squares.values()) + sum([v for v in vals if v > 0])
    check(f, 1.5, -0.5, fd=fd)


def _labelled(x, width=40):
    s = np.sum(x ** 2)
    if s < 0:
        raise ValueError(f"negative {s}")   # (not assert: pytest rewrites the asserts of test files)
    label = f"sum {float(s):.3f}|{x[0]!r:>40}|{'q'}{s:.2e}|{len(x)!s}|{s!a:>{width}}"
    return s * len(label) + x[1] * s, label


def test_f_strings_are_text_without_a_derivative():
    """An f-string's text is Python's own (conversions, format specs, nested specs), and it has no derivative."""
    x = np.array([0.3, -0.7, 1.2])
    loss, label = ad.value_and_grad(_labelled, has_aux=True)(x)[0]
    assert (loss, label) == _labelled(x)
    check_modes(lambda x: _labelled(x)[0], x)


def test_a_recursive_closure_that_reads_a_dict_in_every_mode():
    """The gradient of a recursive closure is folded over its levels (``runtime.fold``); reverse over reverse
    reaches it through the recording (it was refused, naming a line of tensorlang's own code)."""
    def f(x):
        memo = {}

        def fib(n):
            if n in memo:
                return memo[n]
            r = x[0] if n == 0 else x[1] if n == 1 else fib(n - 1) * 0.5 + fib(n - 2) * x[2]
            memo[n] = r
            return r
        return fib(6)
    check_modes(f, np.array([0.3, -0.7, 1.2]))


def _unpacked(u):
    a, *middle, b = u
    *init, last = list(u)
    first, *rest = (u[0], u[1] ** 2, u[2])
    s = 0.0
    for c, *pair in [(u[0], u[1], u[2]), (u[3], u[0], u[1])]:
        s = s + c * pair[0] * pair[1]
    return a * b + sum(middle) ** 2 + last * np.prod(np.array(init)) + first * rest[0] + rest[-1] ** 3 + s


def test_starred_assignment_in_every_mode():
    """``a, *middle, b = u`` (also in a loop's target): the starred name is a list of the items between."""
    check_modes(_unpacked, np.array([0.3, -0.7, 1.2, 0.5]))


class _Pair:
    def __init__(self, a, b):
        self.a, self.b = a, b

    def __abs__(self):
        return np.sqrt(self.a ** 2 + self.b ** 2)

    def __len__(self):
        return 2

    def __getitem__(self, i):   # (any index: NumPy would read the object as an endless sequence)
        return self.a if i == 0 else self.b


def test_abs_of_an_object_is_its_classs_abs():
    """``abs(obj)`` calls the class's ``__abs__``, differentiated as any method (its derivative was taken as
    ``sign(obj)``, which NumPy tried to read as an array: memory ran out)."""
    check_modes(lambda u: abs(_Pair(u[0] * u[2], u[1])) * u[0], np.array([0.3, -0.7, 1.2]))


def helper(a, b=2.0):
    return a * b + math.sin(a)


def test_calls_defaults_keywords_and_higher_order_functions(fd):
    def f(x, y):
        return helper(x) + helper(x, b=y) + sum(map(lambda t: t * y, [x, x * x]))
    check(f, 0.3, 1.7, fd=fd)

    def apply_twice(g, x):
        return g(g(x))
    check(lambda x, y: apply_twice(lambda t: t * y + 1.0, x), 0.5, 2.0, fd=fd)


def test_nested_def_with_recursion(fd):
    def f(x):
        def fact_pow(k):
            if k == 0:
                return 1.0
            return x * fact_pow(k - 1) * k
        return fact_pow(4)
    assert ad.gradient(f, 1.5)[0] == pytest.approx(24 * 4 * 1.5 ** 3)


def test_structures_mirror_their_values():
    Pair = namedtuple("Pair", "a b")
    g = ad.gradient(lambda t, d, p: t[0] * d["k"] + p.a * p.b, (2.0, 3.0), {"k": 5.0, "s": "label"}, Pair(1.0, 4.0))
    assert g[0] == (5.0, None)
    assert g[1] == {"k": 2.0}
    assert g[2] == Pair(4.0, 1.0)


class Layer:
    def __init__(self, w, b):
        self.w = w
        self.b = b

    def __call__(self, x):
        return math.tanh(self.w * x + self.b)


def test_objects_get_namespace_gradients(fd):
    def f(layer, x):
        return layer(x) ** 2
    layer = Layer(0.5, -0.2)
    g_layer, g_x = ad.gradient(f, layer, 1.3)
    h = 1e-6
    assert g_layer.w == pytest.approx((f(Layer(0.5 + h, -0.2), 1.3) - f(Layer(0.5 - h, -0.2), 1.3)) / (2 * h), rel=1e-5)
    assert g_layer.b == pytest.approx((f(Layer(0.5, -0.2 + h), 1.3) - f(Layer(0.5, -0.2 - h), 1.3)) / (2 * h), rel=1e-5)
    assert g_x == pytest.approx(fd(f, (layer, 1.3), 1), rel=1e-5)


def test_objects_built_and_mutated_inside(fd):
    def f(w, x):
        layer = Layer(w, 0.0)
        layer.b = layer.w * 2
        layer.w = layer.w + x
        return layer(x)
    check(f, 0.4, 0.9, fd=fd)


def test_list_mutation_by_box_rules(fd):
    def f(x, y):
        acc = []
        for i in range(3):
            acc.append(x * i + y)
        acc[1] = acc[1] * acc[2]
        acc.insert(0, y * y)
        last = acc.pop()
        acc.extend([last, x])
        return sum(acc) + acc[0] * acc[-1]
    check(f, 0.7, 1.3, fd=fd)


def push(lst, v):
    lst.append(v * v)


def test_mutation_inside_a_callee(fd):
    def f(x):
        lst = [x]
        push(lst, x)
        push(lst, 3.0 * x)
        return lst[0] + lst[1] + lst[2]
    check(f, 1.1, fd=fd)


def test_dict_mutation(fd):
    def f(x):
        d = {"a": x}
        d["b"] = d["a"] * x
        d["a"] = 3.0
        d.update({"c": x * x * x})
        return d["a"] * d["b"] + d.get("c", 0.0) + d.get("zz", 1.0)
    check(f, 1.4, fd=fd)


def test_arrays_mutated_in_place_are_copied_on_capture(fd):
    def f(x):
        a = np.array([1.0, 2.0, 3.0]) * x
        b = a * a               # the pullback of * keeps a; a is written below
        a[0] = x * 10.0
        return np.sum(b) + np.sum(a)
    check(f, 0.8, fd=fd)


def test_numpy_functions(fd):
    rng = np.random.default_rng(0)
    W, b, x = rng.normal(size=(3, 4)), rng.normal(size=3), rng.normal(size=4)

    def f(W, b, x):
        h = np.tanh(W @ x + b)
        z = np.maximum(h, 0.1 * h)
        s = np.concatenate([z, z[:2] * 2.0])
        m = np.stack([s, s ** 2]).T.reshape(-1)
        return np.log(np.sum(np.exp(m))) + np.mean(W, axis=0).dot(x) + np.max(W, axis=1).sum() + np.where(x > 0, x, -x).sum()
    g = ad.gradient(f, W, b, x)
    for i in range(3):
        assert np.allclose(g[i], fd(f, (W, b, x), i), rtol=1e-5, atol=1e-6)


def test_int_string_and_none_arguments_get_none():
    def f(x, n, s, z):
        return x * n if s == "times" and z is None else x
    assert ad.gradient(f, 2.0, 3, "times", None) == (3.0, None, None, None)


def test_unused_float_argument_gets_zero_of_its_type():
    from fractions import Fraction
    assert ad.gradient(lambda x, y: x * 2, 1.0, 5.0) == (2.0, 0.0)
    assert ad.gradient(lambda x, y: x * 2, Fraction(1), Fraction(2))[1] == Fraction(0)


def test_pullback_with_vector_output_and_repeated_calls():
    y, back = ad.pullback(lambda x: [x * 2.0, x * x], 3.0)
    assert y == [6.0, 9.0]
    assert back([1.0, 0.0]) == (2.0,)
    assert back([0.0, 1.0]) == (6.0,)


def _walrus_in_comprehensions(x, y):
    total = 0.0
    if (s := np.sum(x * y)) > 0:
        total = s ** 2
    kept = [u for v in x if (u := v * y) > 0]
    return total + sum(t for v in x if (t := v * y) > -0.5) + t * 2 + sum(kept) * u + \
        sum([(z := v + y) ** 2 for v in x]) * z


def test_assignment_expressions_in_comprehensions_bind_in_the_function():
    # (the name a comprehension's := binds was "the undefined name" when read after it)
    check_modes(_walrus_in_comprehensions, np.array([0.3, -1.2, 0.8, 0.5]), 0.7)
