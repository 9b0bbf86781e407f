"""Gradients that once came back wrong without an error, each checked against central differences:
arrays written into after they were made by a constructor, constructors with differentiable arguments,
broadcast matrix products, functions told apart by their code object, dtypes kept, builtins over
arrays, closures made in a loop, callables that carry state (an object holding a callable object, a
bound method kept in a variable), closures that write into an object they close over, and objects
written to after they were put into a container or an attribute (or handed in inside an argument)."""
import collections
import dataclasses
import math
import importlib
import sys
import textwrap

import numpy as np
import pytest

from tensorlang import ad
from tensorlang.errors import UnsupportedError
from all_modes import check_modes   # (tests/ad is on the path)

X3 = np.array([0.7, -1.3, 2.1])


def _zeros_write(x):
    y = np.zeros(3)
    y[0] = x[0]
    return np.sum(y * y)


def _zeros_like_write(x):
    y = np.zeros_like(x)
    y[1] = x[0] * x[1]
    return np.sum(y * x)


def _empty_slice_write(x):
    y = np.empty(3)
    y[:] = x * x
    return np.sum(y * x)


def _rnn(x):
    h = np.zeros(4)
    for t in range(1, 4):
        h[t] = np.tanh(0.5 * h[t - 1] + x[t - 1])
    return np.sum(h * h)


def _ones_fancy(x):
    y = np.ones(3)
    y[[0, 0, 1]] += x[:3]
    return np.sum(y * y)


@pytest.mark.parametrize("f", [_zeros_write, _zeros_like_write, _empty_slice_write, _rnn, _ones_fancy])
def test_arrays_made_by_constructors_become_active_when_written(f, check):
    check(f, X3.copy())


def test_constructors_with_differentiable_arguments(check):
    check(lambda a, b: np.sum(np.linspace(a, b, 5) ** 2), 1.0, 2.0)
    check(lambda a, b: np.sum(np.linspace(a, b, 4, endpoint=False) ** 3), X3[:2].copy(), X3[1:].copy())
    check(lambda a: np.sum(np.full(3, a) ** 2), 2.0)
    check(lambda a: np.sum(np.full((2, 3), a) ** 2), X3.copy())
    check(lambda x, a: np.sum(np.full_like(x, a) ** 2 * x), X3.copy(), 2.0)


@pytest.mark.parametrize("sa,sb", [((1, 2, 2), (3, 2, 1)), ((2,), (3, 2, 4)), ((3, 4, 2), (2,)),
                                   ((2, 1, 3, 2), (4, 2, 2)), ((3,), (3,))])
def test_matmul_and_dot_unbroadcast(sa, sb, check):
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=sa), rng.normal(size=sb)
    w = rng.normal(size=np.matmul(a, b).shape)
    check(lambda a, b: np.sum((a @ b) * w), a, b)
    check(lambda a, b: np.sum(np.matmul(a, b) * w), a, b)
    wd = rng.normal(size=np.dot(a, b).shape)
    check(lambda a, b: np.sum(np.dot(a, b) * wd), a, b)


def test_two_lambdas_on_one_line():
    f, g = (lambda x: x * x), (lambda x: 3 * x)
    assert ad.gradient(g, 1.0) == (3.0,)
    assert ad.gradient(f, 1.0) == (2.0,)


def test_a_module_edited_after_import_is_refused(tmp_path, monkeypatch):
    src = tmp_path / "edited_mod.py"
    src.write_text("def f(x):\n    return x * x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("edited_mod")
    src.write_text(textwrap.dedent("""\
        def f(x):
            return x * x * x + 1.0
        """))
    try:
        with pytest.raises(UnsupportedError, match="changed since it was compiled"):
            ad.gradient(mod.f, 2.0)
    finally:
        sys.modules.pop("edited_mod", None)


def test_float32_gradients_stay_float32():
    x = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    for f in (lambda x: np.sum(x * x), lambda x: np.sum(np.sin(x)), lambda x: np.mean(x),
              lambda x: np.sum(x.reshape(3, 1) @ x.reshape(1, 3))):
        g, = ad.gradient(f, x)
        assert g.dtype == np.float32


@pytest.mark.parametrize("f", [lambda x: max(x), lambda x: min(x), lambda x: sum(list(x)),
                               lambda x: sorted(x)[0] * 2 + sorted(x)[2], lambda x: max(x) * min(x),
                               lambda x: sum(v * i for i, v in enumerate(x)), lambda x: list(reversed(x))[0],
                               lambda x: min(x, key=lambda v: (v - 0.5) ** 2) * max(list(x), key=abs)])
def test_builtins_over_arrays(f, check):
    check(f, X3.copy())
    tangent = np.array([1.0, 10.0, 100.0])
    assert ad.jvp(f, (X3.copy(),), (tangent,))[1] == pytest.approx(ad.gradient(f, X3.copy())[0] @ tangent)


def test_a_norm_is_refused_where_it_is_not_differentiable():
    np.testing.assert_allclose(ad.gradient(lambda x: np.linalg.norm(x, 1), X3.copy())[0], np.sign(X3))
    top = np.argmax(np.abs(X3))
    np.testing.assert_allclose(ad.gradient(lambda x: np.linalg.norm(x, np.inf), X3.copy())[0],
                               np.sign(X3) * (np.arange(X3.size) == top))
    with pytest.raises(UnsupportedError, match="np.linalg.norm with a finite nonzero ord"):   # a count
        ad.gradient(lambda x: np.linalg.norm(x, 0), X3.copy())
    np.testing.assert_allclose(ad.gradient(lambda x: np.linalg.norm(x, 2), np.outer(X3, X3))[0],   # rank 1
                               np.outer(X3, X3) / np.sum(X3 ** 2), atol=1e-12)
    with pytest.raises(UnsupportedError, match="singular value"):   # the largest singular value twice
        ad.gradient(lambda x: np.linalg.norm(x, 2), np.diag([2.0, 2.0, 1.0]))


class _Holder:
    def __init__(self, f):
        self.f = f

    def __call__(self, v):
        return self.f(v)

    def scaled(self, v):
        return self.f(v) * 2.0


def _held_twice(x):
    return _Holder(_Holder(lambda dy: dy * x[0] * x[1]))(2)   # an int argument: only the state varies


def _held_twice_float(x):
    return _Holder(_Holder(lambda dy: dy * x[0] * x[1]))(2.0)


def _bound_python_method(x):
    scaled = _Holder(lambda v: v * x[0] * x[2]).scaled
    return scaled(3)


def _bound_array_method(x):
    total = x.sum
    dot = x.dot
    return total() * dot(np.array([1.0, 2.0, 3.0]))


@pytest.mark.parametrize("f", [_held_twice, _held_twice_float, _bound_python_method, _bound_array_method])
def test_callables_that_carry_state(f, check):
    check(f, X3.copy())


def _closure_writes_item(x):
    acc = [0.0]

    def add(v):
        acc[0] = acc[0] + v * v

    for v in x:
        add(v)
    return acc[0] * x[0]


def _closure_appends(x):
    seen = []

    def keep(v):
        seen.append(np.sin(v))

    keep(x[0])
    keep(x[1] * x[2])
    return sum(seen) * seen[0]


class _State:
    def __init__(self, total):
        self.total = total


def _closure_writes_attribute(x):
    state = _State(x[2])

    def add(v):
        state.total = state.total * v

    add(x[0])
    add(x[1])
    return state.total


@pytest.mark.parametrize("f", [_closure_writes_item, _closure_appends, _closure_writes_attribute])
def test_closures_that_write_into_what_they_close_over(f, check):
    check(f, X3.copy())


def _nested_list_written(x):
    m = [[x[0], x[1]], [x[2], x[0]]]
    m[0][1] = m[1][0] * m[0][0]
    return m[0][1] * x[1] + m[1][1]


def _alias_written(x):
    row = [x[0], x[1]]
    m = (row, [x[2]])
    row[1] = x[2] * 5
    return m[0][1] * m[0][0]


def _dict_of_lists_written(x):
    d = {"a": [x[0], x[1]]}
    d["a"][1] = d["a"][0] * x[2]
    return d["a"][1] ** 2


def _attribute_list_written(x):
    s = _State([x[0], x[1]])
    s.total[0] = s.total[1] * x[2]
    return s.total[0] + s.total[1]


@pytest.mark.parametrize("f", [_nested_list_written, _alias_written, _dict_of_lists_written,
                               _attribute_list_written])
def test_objects_written_after_they_were_put_into_a_container(f, check):
    check(f, X3.copy())


def test_objects_an_argument_holds_get_the_gradients_of_their_writes():
    def scale_inner(m):
        m[0][0] = m[0][0] * 2 * m[1]
        return m[0][0] * m[0][1]

    def scale_entry(d):
        d["a"][0] = d["a"][0] * 3
        return d["a"][0]

    assert ad.gradient(scale_inner, [[1.5, 2.0], 3.0]) == ([[12.0, 9.0], 6.0],)
    assert ad.gradient(scale_entry, {"a": [2.0]}) == ({"a": [3.0]},)
    y, back = ad.pullback(scale_inner, [[1.5, 2.0], 3.0])
    assert back(1.0) == ([[12.0, 9.0], 6.0],)

    def scale_attribute(state):
        state.total[0] = state.total[1] * state.scale
        return state.total[0] * state.scale

    state = _State([1.0, 2.0])
    state.scale = 3.0
    g, = ad.gradient(scale_attribute, state)
    assert g.scale == 12.0 and g.total[1] == 9.0 and not g.total[0]


def test_nested_functions_whose_defaults_read_variables_are_refused():
    def default_reads_a_variable(x):
        k = x[0]
        scale = lambda v, k=k: v * k   # noqa: E731
        return scale(x[1])

    with pytest.raises(UnsupportedError, match="default values of a nested function"):
        ad.gradient(default_reads_a_variable, X3.copy())


def test_keyword_arguments_taken_as_kwargs_are_refused():
    point = collections.namedtuple("point", "u v")

    def replaced(x):
        p = point(x[0], x[1])
        return p._replace(u=p.u * 3).u

    with pytest.raises(UnsupportedError, match=r"\*\*kwargs"):
        ad.gradient(replaced, X3.copy())


def test_closures_made_in_a_loop_are_refused():
    def late(x):
        fs = []
        for k in range(1, 4):
            fs.append(lambda v: v * k)
        return fs[0](x)

    def comp(x):
        return [lambda v: v * k for k in range(1, 4)][0](x)

    for f in (late, comp):
        with pytest.raises(UnsupportedError, match="closure over 'k'"):
            ad.gradient(f, 1.0)


def test_power_at_zero():
    assert ad.gradient(lambda x: x ** 0.0, 0.0) == (0.0,)
    np.testing.assert_array_equal(ad.gradient(lambda x: np.sum(x ** 0.0), np.zeros(2))[0], [0.0, 0.0])
    assert ad.gradient(lambda y: np.power(0.0, y), 2.0) == (0.0,)
    with np.errstate(divide="ignore"):   # the partial in the base is infinite there, and not needed
        assert ad.gradient(lambda y: np.power(0.0, y), 0.5) == (0.0,)


def test_powers_of_exponent_at_least_one_at_zero_and_below_it():
    """``a ** b`` for a Python number ``b >= 1`` (``x ** 2``, the common case) takes its partial ``b * a ** (b - 1)``
    directly, with no pole or constant to mask: checked at 0 and at negative bases against the closed form, in
    both arguments (the derivative in the exponent, ``a ** b log a``, is 0 where ``a <= 0``), and at second
    order against differences of the first derivative."""
    x = np.array([-1.5, 0.0, 0.5, 2.0])
    for b in (1, 2, 3, 1.0, 2.0, 2.5):
        with np.errstate(invalid="ignore"):
            want = b * x ** (b - 1)
        g = ad.grad(lambda v: np.sum(v ** b))(x)
        np.testing.assert_array_equal(g, want)
        h = ad.grad(lambda v: np.sum(ad.grad(lambda w: np.sum(w ** b))(v)))(x[2:])
        np.testing.assert_allclose(h, b * (b - 1) * x[2:] ** (b - 2), rtol=1e-12)
    db = ad.grad(lambda e: 2.0 ** e, 0)(2.5)
    assert db == pytest.approx(2.0 ** 2.5 * np.log(2.0), rel=1e-14)
    assert ad.grad(lambda e: 0.0 ** e)(2.0) == 0.0 and ad.grad(lambda a: a ** 1.0)(0.0) == 1.0


def _view_scaled(x):
    y = x * 1.0
    v = y[1:]
    v *= 3
    return np.sum(y * y)


def _reshaped_view(x):
    y = x * 1.0
    v = y.reshape(3, 1)
    v[0, 0] = 5 * x[1]
    return np.sum(y * x)


def _transposed_view(x):
    y = np.outer(x, x)
    v = y.T
    v[0] = x * x
    return np.sum(y * y)


def _chained_slice(x):
    y = x * 1.0
    y[1:][0] = x[0] * 7
    return np.sum(y * y)


def _reversed_view(x):
    y = x * 2.0
    v = y[::-1]
    v[0] = v[1] * x[0]
    v += x
    return np.sum(y ** 2)


def _slice_assign(x):
    y = x * 1.0
    y[:] = x * x
    return np.sum(y * x)


def _read_before_write(x):
    y = x * 1.0
    v = y[1:]
    s = np.sum(v * v)
    y[1] = 4.0 * x[0]
    return s + np.sum(y * y)


def _number_augmented(x):
    s = 0.0
    for v in x:
        s += v * v
        s *= 1.5
    return s


def _list_extended(x):
    out = [x[0]]
    alias = out
    out += [x[1] * 2]
    return alias[0] * alias[1]


def _float32_written(x):
    y = np.zeros(3, dtype=np.float32)
    y[1:] = x[:2]
    v = y[1:]
    v *= 2
    return np.sum(y * y)


@pytest.mark.parametrize("f", [_view_scaled, _reshaped_view, _transposed_view, _chained_slice, _reversed_view,
                               _slice_assign, _read_before_write, _number_augmented, _list_extended])
def test_writes_through_views_and_in_place(f, check):
    check(f, X3.copy())
    x = X3.copy()
    f(x)
    np.testing.assert_array_equal(x, X3)   # the argument itself is not written by these functions


def test_writes_through_a_view_of_a_float32_array():
    g, = ad.gradient(_float32_written, X3.copy())   # y = [0, 2 x0, 2 x1] (float32): 8 x0, 8 x1, 0
    np.testing.assert_allclose(g, [8 * X3[0], 8 * X3[1], 0.0], rtol=1e-6)


def test_numpy_keywords_and_constructors_of_numbers(check):
    check(lambda x: np.sum(np.max(x, axis=None, keepdims=True) * x), X3.copy())
    check(lambda x: np.sum(np.clip(x, a_min=-1.0, a_max=1.0) * x), X3.copy())
    check(lambda x: np.sum(np.transpose(x.reshape(3, 1), axes=(1, 0)) * x), X3.copy())
    check(lambda x: np.sum(x * np.array(3.0)) + np.array(x[0]) * 2.0, X3.copy())
    check(lambda a: np.sum(np.full(3, fill_value=a) ** 2), 2.0)
    check(lambda x: np.sum(x.reshape(3, 1) * np.ones((2, 3, 3))), X3.copy())
    check(lambda a: np.sum([i * 3 for i in a]), X3.copy())
    check(lambda a: np.sum(np.array([[v * v for v in a] for _ in range(2)])), X3.copy())
    check(lambda x: np.sum(np.r_[x, x * x]) + np.sum(np.c_[x, x] ** 2), X3.copy())
    check(lambda x: dict(a=x * x, b=x)["a"], 1.5)


def _out_multiply(x):
    y = np.empty(3)
    np.multiply(x, x, out=y)
    return np.sum(y * x)


def test_out_argument_writes_by_the_box_rules(check):
    check(_out_multiply, X3.copy())


def _helper(x):
    return x * x * x


def _branch_calls(x):
    if x > 0:
        return _helper(x)
    return -_helper(x)


def test_second_order_through_a_branch_that_calls_a_function():
    d2 = ad.gradient(lambda x: ad.gradient(_branch_calls, x)[0], 2.0)[0]
    assert abs(d2 - 12.0) < 1e-12
    d2 = ad.gradient(lambda x: ad.gradient(lambda y: np.cosh(y), x)[0], 0.5)[0]
    assert abs(d2 - np.cosh(0.5)) < 1e-12


def _uses_eval(x):
    return eval("x * x")


def _uses_locals(x):
    return locals()["x"]


@pytest.mark.parametrize("f", [_uses_eval, _uses_locals])
def test_frame_readers_are_refused(f):
    with pytest.raises(UnsupportedError, match="reads the frame"):
        ad.gradient(f, 2.0)


def test_one_component_of_a_compiled_kernels_pair_output():
    import tensorlang as tl
    from tensorlang.codegen import compile as tl_compile
    k = tl_compile(tl.parse("(gen(i:n) x[i] * x[i], sum(i:n) x[i])", x="[n]R"))

    def f(x):
        p = k(x=x)
        return np.sum(p[0] * X3) + 0.0 * x[0]

    def g(x):
        return k(x=x)[1] * 3.0

    np.testing.assert_allclose(ad.gradient(f, X3.copy())[0], 2 * X3 * X3)
    np.testing.assert_allclose(ad.gradient(g, X3.copy())[0], [3.0, 3.0, 3.0])


_FILLS = {
    "select default=": lambda x: np.sum(np.select([x > 1], [x * x], default=x) ** 2),
    "select default by position": lambda x: np.sum(np.select([x > 1], [x * x], x * 3) ** 2),
    "select a scalar default": lambda x: np.sum(np.select([x > 1, x < 0], [x * x, x], default=x[0]) ** 2),
    "pad constant_values=": lambda x: np.sum(np.pad(x, 1, constant_values=x[1]) ** 2),
    "pad a pair of constant values": lambda x: np.sum(np.pad(x, (1, 2), constant_values=(x[0], 2 * x[2])) ** 2),
    "pad constant constant values": lambda x: np.sum(np.pad(x, (1, 2), constant_values=(1.0, 2.0)) ** 2 * x[0]),
}


def _every_order(f, x, v, check):
    """``f``'s gradient, its ``ad.jvp`` along ``v``, and its Hessian-vector product by forward over
    reverse and by reverse over reverse, against central differences of ``f``."""
    from conftest import hvp_by_differences
    check(f, x)
    _, tangent = ad.jvp(f, (x,), (v,))
    np.testing.assert_allclose(tangent, np.sum(ad.gradient(f, x)[0] * v), rtol=1e-9)
    want, = hvp_by_differences(f, [x], [v])
    np.testing.assert_allclose(ad.hvp(f, (x,), (v,))[0], want, rtol=1e-4, atol=1e-5)
    over_reverse = ad.gradient(lambda x: np.sum(ad.gradient(f, x)[0] * v), x)[0]
    np.testing.assert_allclose(over_reverse, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", list(_FILLS))
def test_fill_values_of_layout_functions_get_the_gradient_of_what_they_filled(name, check):
    """``np.select``'s ``default`` and ``np.pad``'s ``constant_values`` put entries into the result: a
    differentiable one gets their gradient (it was dropped, silently), in reverse and forward mode and at
    second order."""
    _every_order(_FILLS[name], np.array([0.3, -0.7, 1.1, 1.4]), np.array([0.5, -1.0, 0.25, 2.0]), check)


_LISTS = {
    "np.sum of a list": lambda x: np.sum([1, x[0] * x[1] * x[2], 3]),
    "np.prod of a list": lambda x: np.prod([2.0, x[0] * x[1], x[2]]),
    "np.var of a list": lambda x: np.var([1.0, x[0] * x[1], x[2]]),
    "np.dot of lists": lambda x: np.dot([1.0, x[0]], [x[1] * x[2], 2.0]),
    "np.concatenate of lists": lambda x: np.sum(np.concatenate([[1.0, 2.0], x * x]) ** 2),
    "np.linalg.norm of a list": lambda x: np.linalg.norm([1.0, x[0] * x[1]]),
    "x.tolist()": lambda x: sum(v * v * w for v, w in zip(x.tolist(), [1, 2, 3])),
    "x.item()": lambda x: x[1:2].item() ** 2 * x[0] + x.reshape(3, 1).item(2, 0) * x.item(1),
    "np.array of a list": lambda x: np.sum(np.array([x[0] * x[1], 2.0, x[2]]) ** 2),
}


@pytest.mark.parametrize("name", list(_LISTS))
def test_lists_holding_constants_in_forward_mode_and_at_second_order(name, check):
    """A NumPy function of a list that holds constants (``np.sum([1, x[0] * x[1]])``) gets the list's
    tangent with zeros for the constants (a raw TypeError in ``ad.jvp`` and ``ad.hvp``); ``x.tolist()``
    and ``x.item()`` are differentiated (they were refused), in reverse and forward mode and at second
    order, against central differences."""
    _every_order(_LISTS[name], np.array([1.5, 2.0, 2.5]), np.array([1.0, -0.5, 2.0]), check)


def _cube(x):
    return x ** 3


def _calls_grad(x):
    return x * ad.grad(lambda y: x * y)(2.0)


def test_third_derivatives_through_a_nested_gradient():
    """A derivative of a function that differentiates a function that calls ``ad.gradient``/``ad.grad``
    is a third derivative through a nested gradient (it named ``*args`` in tensorlang's own code, then was
    refused by name): of the recordings (``tower``).  second(x) = 6 x; _calls_grad(x) = x^2."""
    def second(x):
        return ad.gradient(lambda y: ad.gradient(_cube, y)[0], x)[0]
    assert ad.gradient(second, 0.5)[0] == pytest.approx(6.0, rel=1e-12)
    assert ad.grad(ad.grad(_calls_grad))(0.37) == pytest.approx(2.0, rel=1e-12)
    assert ad.grad(ad.grad(_cube))(0.5) == pytest.approx(3.0)
    assert ad.grad(ad.grad(ad.grad(_cube)))(0.5) == pytest.approx(6.0)


def test_a_keyword_argument_a_rule_does_not_take_is_refused_by_name():
    """``np.nan_to_num(x, nan=a)``: the rule takes no ``nan`` (a raw TypeError from inside the rule)."""
    x = np.array([1.0, np.nan, 2.0])
    with pytest.raises(UnsupportedError, match="nan_to_num without the keyword argument nan"):
        ad.gradient(lambda a: np.sum(np.nan_to_num(x * a, nan=a)), 1.5)
    assert ad.gradient(lambda a: np.sum(np.nan_to_num(a * np.ones(3))), 1.5)[0] == pytest.approx(3.0)


_R = np.random.default_rng(11)
_EINSUM = {
    "ii-> (the trace)": (lambda a: np.einsum("ii->", a) * np.sum(a * a), (_R.standard_normal((3, 3)),)),
    "ii->i (the diagonal)": (lambda a: np.sum(np.einsum("ii->i", a) ** 2), (_R.standard_normal((3, 3)),)),
    "ii, implicit": (lambda a: np.einsum("ii", a) ** 2, (_R.standard_normal((3, 3)),)),
    "iij->j": (lambda t: np.sum(np.einsum("iij->j", t) ** 2), (_R.standard_normal((3, 3, 2)),)),
    "...ij,jk->...ik": (lambda b, c: np.sum(np.einsum("...ij,jk->...ik", b, c) ** 2),
                        (_R.standard_normal((2, 3, 4)), _R.standard_normal((4, 5)))),
    "...ij,jk, implicit": (lambda b, c: np.sum(np.einsum("...ij,jk", b, c) ** 2),
                           (_R.standard_normal((2, 3, 4)), _R.standard_normal((4, 5)))),
    "...i,...i->... broadcast": (lambda a, b: np.sum(np.einsum("...i,...i->...", a, b) ** 2),
                                 (_R.standard_normal((1, 3)), _R.standard_normal((4, 3)))),
    "ij,ij->ij, a length-1 axis": (lambda d, e: np.sum(np.einsum("ij,ij->ij", d, e) ** 2),
                                   (_R.standard_normal((1, 3)), _R.standard_normal((4, 3)))),
}


@pytest.mark.parametrize("name", list(_EINSUM))
def test_einsum_with_ellipsis_repeated_subscripts_and_broadcasting(name, check):
    """``np.einsum`` with ``...``, a letter repeated in one operand and axes of length 1 broadcast (they
    were refused, or a raw ValueError), against central differences; and along a direction, in forward
    mode and at second order in the first operand."""
    f, args = _EINSUM[name]
    check(f, *(a.copy() for a in args))
    if len(args) == 1:
        _every_order(f, args[0].copy(), _R.standard_normal(args[0].shape), check)
    else:
        _every_order(lambda a: f(a, args[1]), args[0].copy(), _R.standard_normal(args[0].shape), check)


class _Params:
    def __init__(self, w):
        self.w = w


def test_forward_over_reverse_through_items_and_fields_of_what_f_closes_over(check):
    """``ad.hvp`` of ``lambda a: f(a, args[1])`` (an item of a tuple, a list, a dict, a field of an object
    that the function reads): the gradient of the container is linear in the item's, and forward mode
    follows it (it raised: no forward rule for the container's gradient)."""
    w = np.array([0.5, -1.0, 2.0])
    held = {"tuple": (None, w), "list": [None, w], "dict": {1: w}, "object": _Params(w)}
    fs = [lambda a: np.sum(np.tanh(a * held["tuple"][1]) ** 2), lambda a: np.sum(np.tanh(a * held["list"][1]) ** 2),
          lambda a: np.sum(np.tanh(a * held["dict"][1]) ** 2), lambda a: np.sum(np.tanh(a * held["object"].w) ** 2)]
    for f in fs:
        _every_order(f, np.array([0.3, 0.2, -0.4]), np.array([1.0, 0.5, -2.0]), check)


def _scaled_tanh(w, x, scale=1.0):
    return np.sum(np.tanh(w * x)) * scale


def test_functools_partial_objects_as_jax_users_write_them(check):
    """``ad.grad(partial(loss, x=data))``, a partial made and called inside f (bound arguments, keywords at
    the call, a closure as its function, a partial of a partial), against central differences; a second
    differentiation through one is its recording's."""
    import functools
    x, w = np.array([0.5, -1.0]), np.array([0.3, 0.2])
    np.testing.assert_allclose(ad.grad(functools.partial(_scaled_tanh, x=x))(w), (1 - np.tanh(w * x) ** 2) * x)
    check(functools.partial(_scaled_tanh, w), x.copy())
    for f in (lambda w: functools.partial(_scaled_tanh, w)(x),
              lambda w: functools.partial(_scaled_tanh, x=w * 2)(w),
              lambda w: functools.partial(_scaled_tanh, w)(x, scale=np.sum(w)),
              lambda w: functools.partial(lambda a, b: np.sum(a * b * w), x)(w),
              lambda w: functools.partial(functools.partial(_scaled_tanh, w), x)()):
        check(f, w.copy())
    def summed_gradient(w):   # (a second differentiation through a partial: the recording's, ``tower``)
        return np.sum(ad.gradient(lambda v: functools.partial(_scaled_tanh, v)(x), w)[0])

    np.testing.assert_allclose(ad.gradient(summed_gradient, w)[0],
                               [(summed_gradient(w + 1e-6 * e) - summed_gradient(w - 1e-6 * e)) / 2e-6
                                for e in np.eye(2)], rtol=1e-6)


_PD = np.array([[4.0, 1.0, 0.5], [0.3, 3.0, -0.2], [-0.6, 0.7, 5.0]])   # not symmetric: NumPy reads a triangle
_SYMMETRIC = {
    "cholesky": lambda a: np.sum(np.linalg.cholesky(a) * _PD),
    "cholesky(upper=True)": lambda a: np.sum(np.linalg.cholesky(a, upper=True) ** 2 * _PD),
    "log det by cholesky": lambda a: 2 * np.sum(np.log(np.diagonal(np.linalg.cholesky(a)))),
    "eigh's eigenvalues": lambda a: np.sum(np.linalg.eigh(a).eigenvalues ** 3),
    "eigh's eigenvectors, squared": lambda a: np.sum(np.linalg.eigh(a)[1] ** 2 * _PD),
    "eigh(UPLO='U')": lambda a: np.sum(np.linalg.eigh(a, UPLO="U")[1] ** 2 * _PD) + np.sum(np.linalg.eigh(a, "U")[0]),
    "eigvalsh": lambda a: np.sum(np.sin(np.linalg.eigvalsh(a))),
}


@pytest.mark.parametrize("name", list(_SYMMETRIC))
def test_symmetric_factorisations_at_every_order(name, check):
    """``np.linalg.cholesky``, ``eigh``, ``eigvalsh`` (they were refused: no rule), of a matrix that is not
    symmetric, as NumPy calls them (one triangle read): against central differences in every mode."""
    _every_order(_SYMMETRIC[name], _PD.copy(), np.array([[0.5, -1.0, 0.2], [0.1, 0.3, -0.4], [1.0, 0.2, 0.6]]), check)


@pytest.mark.parametrize("f, read", [
    (lambda a: np.sum(np.linalg.cholesky(a) * _PD), np.tril),
    (lambda a: np.sum(np.linalg.cholesky(a, upper=True)), np.triu),
    (lambda a: np.sum(np.linalg.eigh(a)[1] ** 2 * _PD), np.tril),
    (lambda a: np.sum(np.linalg.eigh(a, "U")[1] ** 3), np.triu)])
def test_the_triangle_numpy_does_not_read_gets_no_gradient(f, read):
    g = ad.grad(f)(_PD)
    np.testing.assert_array_equal(g - read(g), 0.0)
    assert np.count_nonzero(read(g)) > 3   # the triangle read, off its diagonal too


def test_what_the_symmetric_factorisations_refuse_by_name():
    with pytest.raises(UnsupportedError, match="eigenvectors' derivative is undefined where two eigenvalues are equal"):
        ad.grad(lambda a: np.sum(np.linalg.eigh(a)[1] ** 3))(np.diag([1.0, 2.0, 2.0]))
    np.testing.assert_allclose(ad.grad(lambda a: np.sum(np.linalg.eigvalsh(a)))(np.eye(3)), np.eye(3))
    with pytest.raises(UnsupportedError, match="cholesky of real matrices"):
        ad.grad(lambda a: np.real(np.sum(np.linalg.cholesky(a * (1 + 0j)))))(np.eye(2) * 2.0)


def _scaled(x, *, s=2.0):
    return x * s


def test_numpy_functions_without_derivative_called_with_keywords_and_keyword_only_parameters(check):
    """``np.eye(n, dtype=bool)`` inside f raised a raw TypeError (its keywords were passed by position, the
    keyword-only ones too) in reverse, forward and forward-over-reverse mode; a Python function with
    keyword-only parameters (it was a raw TypeError) is differentiated in every mode (``flat``)."""
    def masked(x):
        return np.sum(np.where(np.eye(3, dtype=bool), x * x, 0.0) + x * np.eye(3, k=1, dtype=float))
    _every_order(masked, np.arange(9.0).reshape(3, 3), np.ones((3, 3)), check)
    _every_order(lambda x: np.sum(np.sin(_scaled(x, s=3.0)) ** 2), np.array([0.3, -0.7]), np.array([1.0, 0.5]), check)


_TALL = np.array([[1.0, 0.3, -0.5], [0.2, -1.4, 0.6], [0.9, 0.1, 2.0], [-0.7, 0.8, 0.4]])
_SVD = {
    "singular values": lambda a: np.sum(np.linalg.svd(a, compute_uv=False) ** 3),
    "svdvals": lambda a: np.sum(np.sin(np.linalg.svdvals(a))),
    "rank-1 approximation": lambda a: np.sum((np.linalg.svd(a, full_matrices=False)[0][:, :1]
                                             * np.linalg.svd(a, full_matrices=False)[1][0]
                                             @ np.linalg.svd(a, full_matrices=False).Vh[:1]) * _TALL),
    "a wide matrix's singular vectors, squared": lambda a: np.sum(np.linalg.svd(a.T, False)[0] ** 2 * _TALL[:3])
    + np.sum(np.linalg.svd(a.T, False)[2] ** 2 * _TALL.T[:3]),
    "pinv, and least squares by it": lambda a: np.sum(np.linalg.pinv(a) * _TALL.T)
    + np.sum((a @ (np.linalg.pinv(a, 1e-8) @ _TALL[:, 0])) ** 2) + np.sum(np.linalg.pinv(a.T, rcond=1e-6) ** 2),
}


@pytest.mark.parametrize("name", list(_SVD))
def test_the_singular_value_decomposition_at_every_order(name, check):
    """``np.linalg.svd`` (reduced, and a square matrix's), ``svdvals`` and ``pinv`` (they were refused: no
    rule) against central differences in every mode."""
    _every_order(_SVD[name], _TALL.copy(), np.cos(np.arange(12.0)).reshape(4, 3), check)


def test_what_the_singular_value_decomposition_refuses_by_name():
    with pytest.raises(UnsupportedError, match="singular vectors' derivative is undefined"):
        ad.grad(lambda a: np.sum(np.linalg.svd(a)[0] ** 3))(np.diag([1.0, 2.0, 2.0]))
    with pytest.raises(UnsupportedError, match="full_matrices=False"):
        ad.grad(lambda a: np.sum(np.linalg.svd(a)[0]))(_TALL)
    with pytest.raises(UnsupportedError, match="hermitian=False"):
        ad.grad(lambda a: np.sum(np.linalg.svd(a, hermitian=True)[1]))(np.eye(2) * 2.0)
    with pytest.raises(UnsupportedError, match="derivative of a singular value is undefined"):
        ad.grad(lambda a: np.linalg.svdvals(a)[0])(np.eye(2))
    np.testing.assert_allclose(ad.grad(lambda a: np.sum(np.linalg.svdvals(a)))(np.eye(2) * 3.0), np.eye(2))
    with pytest.raises(UnsupportedError, match="pseudo-inverse's derivative is undefined where the matrix is rank"):
        ad.grad(lambda a: np.sum(np.linalg.pinv(a)))(np.ones((3, 2)))
    with pytest.raises(UnsupportedError, match="pinv with hermitian=False"):
        ad.grad(lambda a: np.sum(np.linalg.pinv(a, hermitian=True)))(np.eye(2))


def test_cross_has_a_forward_rule_of_its_own():
    """``np.cross`` had only its pullback in forward mode, transposed one output entry at a time (a pullback
    per entry: 150x slower at 200 vectors); it is bilinear, and its tangent is the product rule."""
    from tensorlang.derive.ad.registry import primitive as record
    assert record(np.cross).how("forward") == "its forward rule"
    a, b, ta, tb = (np.cos(np.arange(12.0) * k).reshape(4, 3) for k in (1.0, 2.0, 3.0, 4.0))
    y, t = ad.jvp(np.cross, (a, b), (ta, tb))
    np.testing.assert_allclose(y, np.cross(a, b))
    np.testing.assert_allclose(t, np.cross(ta, b) + np.cross(a, tb), rtol=1e-12)
    y, t = ad.jvp(lambda u: np.cross(u, b.T, axis=0), (a.T,), (ta.T,))
    np.testing.assert_allclose(t, np.cross(ta.T, b.T, axis=0), rtol=1e-12)
    h = 1e-6
    np.testing.assert_allclose(t, (np.cross(a.T + h * ta.T, b.T, axis=0) - np.cross(a.T - h * ta.T, b.T, axis=0)) / (2 * h),
                               rtol=1e-6, atol=1e-9)


def test_forward_mode_inside_a_derivative():
    """A function that calls ``ad.jvp`` or ``ad.hvp``, differentiated by either mode, was refused naming an
    f-string or an import in tensorlang's own code. ``ad.jvp`` of a closure over the variable differentiated is
    now differentiated (``over_forward``): d/dy of the derivative of x^2 y in x at x = 1.5, 3, by both modes;
    ``ad.hvp`` inside a derivative is a third derivative, of the recordings (``tower``): d/dy 2 y = 2."""
    def by_jvp(y):
        return ad.jvp(lambda x: x * x * y, (1.5,), (1.0,))[1]

    def by_hvp(y):
        return ad.hvp(lambda x: x * x * y, (1.5,), (1.0,))[0]
    assert ad.grad(by_jvp)(0.7) == pytest.approx(3.0, rel=1e-14)
    assert ad.jvp(by_jvp, (0.7,), (1.0,))[1] == pytest.approx(3.0, rel=1e-14)
    assert ad.grad(by_hvp)(0.7) == pytest.approx(2.0, rel=1e-14)
    assert ad.jvp(by_hvp, (0.7,), (1.0,))[1] == pytest.approx(2.0, rel=1e-14)
    assert np.isfinite(by_hvp(0.7))


@pytest.mark.parametrize("mode", [None, "reverse"])
def test_a_jacobian_or_a_hessian_made_inside_a_derivative_is_differentiated(mode):
    """``ad.jacobian`` called inside a differentiated function (of a closure over the variable differentiated):
    d/dy sum(diag(2 x y)) = 2 sum(x); the same for ``ad.hessian`` is a third derivative (of the recordings,
    ``tower``): d/dy sum(diag(2 y)) = 4."""
    x = np.array([1.5, 2.0])
    inner = lambda y: np.sum(ad.jacobian(lambda x: x * x * y, mode=mode)(x))   # noqa: E731
    assert ad.grad(inner)(0.7) == pytest.approx(7.0, rel=1e-13)
    assert ad.jvp(inner, (0.7,), (1.0,))[1] == pytest.approx(7.0, rel=1e-13)
    hessian = lambda y: np.sum(ad.hessian(lambda x: np.sum(x * x * y))(x))   # noqa: E731
    assert ad.grad(hessian)(0.7) == pytest.approx(4.0, rel=1e-13)
    assert ad.jvp(hessian, (0.7,), (1.0,))[1] == pytest.approx(4.0, rel=1e-13)


def _fancy_read_then_written(x):
    v = x[[0, 1]]   # a new array (an advanced index), written into below: a box this function made
    v += x[:2]
    y = x * 1.0
    w = y[[2, 0, 2]]
    w *= x[1:]
    y[[2, 0, 2]] = w
    return np.sum(v * v * v) + np.sum(y * y)


def test_an_array_read_by_an_advanced_index_then_written_keeps_its_gradient():
    """``v = x[[0, 1]]; v += ...`` lost the gradient of v's write (reverse, and reverse over reverse) with no
    error: the read was taken to hand out an array the container holds, whose gradient the store keeps for its
    maker, where the read made v. Found by recording generated programs; checked against differences."""
    from conftest import central_difference, hvp_by_differences
    x = np.array([0.3, -0.5, 0.7, 1.1])
    np.testing.assert_allclose(ad.grad(_fancy_read_then_written)(x),
                               central_difference(_fancy_read_then_written, (x,), 0), rtol=1e-7)
    h = ad.hessian(_fancy_read_then_written)(x)
    for i in range(4):
        np.testing.assert_allclose(h[i], hvp_by_differences(_fancy_read_then_written, [x], [np.eye(4)[i]])[0],
                                   rtol=1e-4, atol=1e-6)


def _scalar_read_broadcast(x):
    y = x + 0.5 * x[0]   # an entry of x broadcast over an array, whose entry is read again below
    y = y + x[0] * y[0]
    return np.sum(y * y) + y[1]


def test_the_hessian_through_an_entry_broadcast_over_an_array():
    """The gradient of a number broadcast over an array is the sum of the array's; at second order that
    gradient's tangent can be an indexed cotangent, which was passed on unsummed (a raw ``ValueError`` from
    NumPy in ``ad.hessian``). Found by a campaign of generated array programs in forward over reverse."""
    from conftest import hvp_by_differences
    x = np.array([0.3, -0.5, 0.7, 1.1])
    h = ad.hessian(_scalar_read_broadcast)(x)
    for i in range(4):
        np.testing.assert_allclose(h[i], hvp_by_differences(_scalar_read_broadcast, [x], [np.eye(4)[i]])[0],
                                   rtol=1e-4, atol=1e-5)


def test_a_partial_of_a_power_that_overflows_is_infinite_not_an_overflow_error():
    """Python's float power raises ``OverflowError`` where IEEE's is infinite; the partial of ``a ** b`` met it
    where the function itself is finite (``x ** -1.0`` differentiated to third order at 1e-50, where its second
    derivative's code raises ``x`` to -4; a linear function's third derivative at 1e-200, whose second
    derivative's code multiplies by ``x ** -1``), a raw exception. Found by a campaign of generated programs."""
    with pytest.warns(RuntimeWarning, match="overflow"):   # (x ** -1 at 1e-200 inside, multiplied by 0)
        assert ad.grad(ad.grad(ad.grad(lambda x: x * 0.1)))(1e-200) == 0.0
    assert ad.grad(ad.grad(ad.grad(lambda x: x ** -1.0)))(1e-50) == pytest.approx(-6e200, rel=1e-14)
    with pytest.warns(RuntimeWarning, match="overflow"):   # (NumPy's, where the derivative leaves the floats)
        assert ad.grad(lambda x: x ** -1.0)(1e-200) == -math.inf
    with pytest.warns(RuntimeWarning, match="overflow"):
        assert ad.grad(ad.grad(lambda x: x ** -1.0))(1e-200) == math.inf


def test_attributes_of_numpy_scalars_and_masks_of_bitwise_operators():
    """``(x * c).real`` with ``c`` a NumPy scalar raised a raw TypeError (the attribute's gradient was taken for
    an object's field); a NumPy scalar's ``.real``, ``.imag`` and ``.T`` are a 0-d array's.  A mask made by a
    bitwise operator has no derivative (it had no rule)."""
    c = np.float64(2.0)
    for f, d in ((lambda x: (x * c).real, 2.0), (lambda x: (x * c).imag + x, 1.0), (lambda x: (x * c).T, 2.0)):
        assert ad.grad(f)(0.5) == pytest.approx(d, rel=1e-15)
        assert ad.jvp(f, (0.5,), (1.0,))[1] == pytest.approx(d, rel=1e-15)
        assert ad.grad(ad.grad(lambda x: f(x) * x))(0.5) == pytest.approx(2 * d, rel=1e-15)
    x = np.array([0.5, -2.0, -0.3])
    g = ad.grad(lambda x: np.sum(np.where(np.bitwise_or(x > 0, x < -1), x * x, 0.0)))(x)
    np.testing.assert_array_equal(g, [1.0, -4.0, 0.0])



class _Shape:
    def __init__(self, x):
        self.x = x

    def area(self):
        return self.x * self.x

    @staticmethod
    def unit():
        return 1.0


class _Square(_Shape):
    def __init__(self, x):
        super().__init__(x)             # the zero-argument form
        self.side = 2.0 * x

    def area(self):
        return super().area() * self.side


class _Tile(_Square):
    def __init__(self, x):
        super(_Tile, self).__init__(np.sin(x))   # the two-argument form
        _Shape.__init__(self, self.x + x)        # a base class's function called through the class


class _Plain:
    def __init__(self, x):
        super().__init__()              # object.__init__
        self.x = x


def _inheritance(x):
    return _Square(x).area() + _Tile(x).area() + _Plain(x).x ** 3


def test_methods_reached_through_super_in_every_mode():
    """``super().f(...)``, ``super(C, self).f(...)`` and ``Base.f(self, ...)`` call the base class's function
    with the object (a raw ``RuntimeError``, "__class__ cell not found", before; ``Base.__init__(self, x)`` got
    the class as well in forward mode)."""
    _in_every_mode(_inheritance, 0.7)


def _in_every_mode(f, x, h=1e-5):
    """f's first derivative at x in reverse and forward mode, its second by forward over reverse and reverse over
    reverse, against central differences of f and of its gradient."""
    slope = (f(x + h) - f(x - h)) / (2 * h)
    assert ad.grad(f)(x) == pytest.approx(slope, rel=1e-6)
    assert ad.jvp(f, (x,), (1.0,))[1] == pytest.approx(slope, rel=1e-6)
    g = ad.grad(f)
    curvature = (g(x + h) - g(x - h)) / (2 * h)
    assert ad.hessian(f)(x) == pytest.approx(curvature, rel=1e-5)
    assert ad.grad(g)(x) == pytest.approx(curvature, rel=1e-5)


def test_a_static_method_found_by_super_is_refused_by_name():
    class _Unit(_Shape):
        def unit(self):
            return super().unit() * self.x

    with pytest.raises(UnsupportedError, match=r"super\(\)\.unit finds _Shape\.unit, a staticmethod"):
        ad.grad(lambda x: _Unit(x).unit())(0.7)


def test_math_log_to_a_base_and_dataclasses_replace_in_every_mode():
    """``math.log(x, base)`` (a raw ``TypeError`` before) and ``dataclasses.replace`` (refused in reverse mode,
    a raw ``TypeError`` in forward mode before)."""
    def f(x):
        p = _Point(x, 2.0)
        q = dataclasses.replace(p, y=math.log(x, 2.5) * x)
        return q.x * q.y + math.log(3.0, x + 1.0)

    _in_every_mode(f, 1.3)


@dataclasses.dataclass
class _Point:
    x: float
    y: float


class _Scaled(_Shape):
    def __init__(self, x):
        super().__init__(x)

    @property
    def norm(self):
        return self.x * self.x

    def area(self):
        return super().area() * 3.0


class _Scaled2(_Scaled):
    @property
    def norm(self):
        return super().norm * self.x   # a property of the base class read through super()


def test_a_property_read_through_super_and_math_pow_in_forward_mode():
    """``super().prop`` (a raw ``RuntimeError`` before) and ``ad.jvp`` of ``math.pow(x[0], 0.7)`` (a raw
    ``NameError`` in the forward rule's branch below an exponent of 1)."""
    _in_every_mode(lambda x: _Scaled2(x).norm + _Scaled(x).area(), 0.7)
    _in_every_mode(lambda x: math.pow(np.array([x, 1.0])[0], 0.7), 1.3)


def test_reverse_over_reverse_through_a_reduction_along_an_axis_read_at_an_index():
    """With a box in the store (any object made), ``np.sum(..., axis=0)[0]``: the reduction's pullback repeats its
    cotangent (``np.broadcast_to``), and a gradient added through that repeating view of a box kept one of the
    sums, one taken out of it was handed out at every repeat (a Hessian wrong and not symmetric, with no error)."""
    def f(x):
        _Plain(1.0)
        return np.sin(np.sum(x[:, None] * x, axis=0)[0]) + np.mean(x[:, None] * x * x, axis=1)[1] ** 2

    x = np.array([0.31, -0.52, 0.4])
    g = ad.grad(f)
    want = np.stack([(g(x + 1e-5 * e) - g(x - 1e-5 * e)) / 2e-5 for e in np.eye(3)])
    np.testing.assert_allclose(ad.jacobian(g, mode="reverse")(x), want, atol=1e-6)
    np.testing.assert_allclose(ad.hessian(f)(x), want, atol=1e-6)


def test_reverse_over_reverse_through_a_nested_function_that_writes_into_what_it_captures():
    """A nested function that writes into a dict, list or array it captures, called twice: the transform's second
    reverse differentiation lost the gradient flowing from one call to the next through that object (the
    Hessian-vector product of ``(u0 + u1)^2`` in ``u0`` was 0 for 2, with no error); the entry point now
    differentiates the recording there."""
    def through_a_dict(u):
        state = {"acc": 0.0, "n": 0}

        def step(t):
            state["n"] += 1
            state["acc"] = state["acc"] + t * state["n"]
        step(u[0])
        step(u[1] * u[0])
        return state["acc"] ** 2

    def through_a_list_and_an_array(u):
        seen, total = [], np.zeros(1)

        def step(t):
            seen.append(t)
            total[0] = total[0] + t * len(seen)
        for t in u:
            step(t)
        return total[0] ** 2 + seen[0] * seen[-1]

    u = np.array([0.3, -0.7, 1.2])
    for f in (through_a_dict, through_a_list_and_an_array):
        g = ad.grad(f)
        want = np.stack([(g(u + 1e-5 * e) - g(u - 1e-5 * e)) / 2e-5 for e in np.eye(3)])
        for v in np.eye(3):
            np.testing.assert_allclose(ad.grad(lambda x: np.sum(g(x) * v))(u), want @ v, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(ad.hessian(f)(u), want, rtol=1e-5, atol=1e-6)


def _appended(stack, y):
    stack.append(y * 0.7)
    return stack


def _through_the_returned_list(x, y):
    s = [x]
    s2 = _appended(s, x)
    _appended(s2, x[::-1] * y)
    return np.sum(s[-1] * np.array([1.0, 2.0, 3.0, 4.0]))


def test_a_list_returned_by_the_function_it_was_passed_to_stays_that_list():
    """A call given a list and an array it copies on capture (``runtime.cut``) rebuilt the list it returned to
    rebase views of the copy, so ``s2 = f(s, x)`` was another list than ``s``: the value and the gradient of
    code that went on writing through ``s2`` and reading ``s`` were wrong, with no error (every mode), and reverse
    over reverse of ``f(f([], x), y)`` lost half of its Hessian-vector product."""
    x = np.array([0.3, -1.2, 0.8, 0.5])
    assert ad.value_and_grad(_through_the_returned_list)(x, 0.7)[0] == pytest.approx(_through_the_returned_list(x, 0.7))
    check_modes(_through_the_returned_list, x, 0.7)
    check_modes(lambda x, y: (lambda s: np.sum(s[0] * s[1]))(_appended(_appended([], x), x[::-1] * y)), x, 0.7)


def _replaced_then_written(x, y):
    p = [x * 1.0]
    p[0] = p[0] + y * x
    p[0][0] = p[0][0] * 2
    return np.sum(p[0] ** 2)


def _dict_item_grown_in_place(x, y):
    p = {"w": x * 1.0}
    p["w"] += y * x
    p["w"][0] = p["w"][0] * 2
    return np.sum(p["w"] ** 2)


def _slice_replaced(x, y):
    p = [x * 1.0, x * y, x ** 2]
    r0, r1 = p[0], p[1]
    p[0:2] = [r1 * 2.0]
    p[0][0] = 7.0 * y
    return np.sum(p[0] ** 2) + np.sum(r0 * p[1])


def _replaced_in_a_loop(x, y):
    p = [x * 1.0]
    for k in range(3):
        p[0] = p[0] * y + x
        p[0][k] = p[0][k] ** 2
    return np.sum(p[0])


def _appended_then_written(x, y):
    lst = [x * y]
    lst.append(lst[0])
    lst.append(x * 1.0)
    lst[1][3] = y
    lst[2][0] = lst[0][1] * 2.0
    return sum(np.sum(v * x) for v in lst)


@pytest.mark.parametrize("f", [_replaced_then_written, _dict_item_grown_in_place, _slice_replaced, _replaced_in_a_loop,
                               _appended_then_written])
def test_a_read_of_an_item_a_later_write_replaced(f):
    """The gradient of an item read from a list or dict was added to the item the container held at the end
    (``p[0] = p[0] + v`` then a write into the new ``p[0]``: the old item's gradient went into the new one's box,
    after that box was taken, and was lost, with no error); the pullbacks of the writes now rewind what the
    container holds (``runtime.rewound``).  A slice written with another number of items was a raw IndexError.
    Reverse over reverse through a write into an array stored in an item (by ``x[i] = v`` or ``append``) goes to the
    recording (it lost Hessian-vector product terms with no error)."""
    check_modes(f, np.array([0.3, -1.2, 0.8, 0.5]), 0.7)


def _fill(a, b):
    a[1:5] = b
    return a


def _view_of(a):
    return a[:2]


def test_a_call_that_returns_its_array_argument_at_second_order():
    """Reverse over reverse through a function that writes into its array argument and returns it, or returns a
    view of it that is then written, was wrong with no error: the first goes to the recording, the second is
    refused by name (the recording cannot write through a view); one that returns a view it does not write is
    differentiated."""
    x = np.array([0.3, -1.2, 0.8, 0.5])
    check_modes(lambda x, y: np.sum(_fill(np.zeros(6), x * y) ** 2) * y, x, 0.7)

    def written_view(x, y):
        z = x * y
        v = _view_of(z)
        v[0] = v[0] * 3.0
        return np.sum(z ** 2)
    check_modes(written_view, x, 0.7, twice_reverse=False)
    with pytest.raises(UnsupportedError, match="returned .or a view of it. by the function it was passed to"):
        ad.grad(lambda u: np.sum(ad.grad(written_view)(u, 0.7)))(x)
    check_modes(lambda x, y: np.sum(_view_of(x * y) * 3.0) + np.sum(x ** 3), x, 0.7)


def test_rows_of_a_for_loop_written_at_second_order():
    def rows(x, y):
        m = np.outer(x, x) * y
        for row in m:
            row[0] = row[0] * 2.0
        return np.sum(m ** 2)
    x = np.array([0.3, -1.2, 0.8, 0.5])
    check_modes(rows, x, 0.7, twice_reverse=False)
    with pytest.raises(UnsupportedError, match="iterated over by a for loop"):
        ad.grad(lambda u: np.sum(ad.grad(rows)(u, 0.7)))(x)


def _sorted_by_a_closure(x, y):
    pairs = [(x[i] * y, x[3 - i]) for i in range(4)]
    s = sorted(pairs, key=lambda p: p[0] * y, reverse=True)
    return s[0][0] * s[1][1] + s[-1][0]


def _picked_by_a_closure(x, y):
    items = [x[i] * y for i in range(4)]
    w = [abs(v) for v in items]
    best = max(range(4), key=lambda i: w[i])
    return items[best] * x[best] + min(items, key=lambda v: -v * w[0]) * y


@pytest.mark.parametrize("f", [_sorted_by_a_closure, _picked_by_a_closure])
def test_a_key_closure_that_captures_values_with_tangents(f):
    """In forward mode a ``key`` closure capturing values with tangents was taken as a differentiable keyword:
    ``sorted`` was handed it by position and sorted without it (value and tangent wrong, with no error), ``max``
    and ``min`` refused it; ``key`` only chooses, so its tangent is none of the result's."""
    check_modes(f, np.array([0.3, -1.2, 0.8, 0.5]), 0.7)
