"""Mutation and aliasing in functions differentiated by tensorlang.ad, each case checked against central
differences: two names for one list, dict, object or array, writes through views, containers of
containers, globals, objects with Python ``__iadd__``, properties and ``__getattr__``.  A construct the
box rules cannot follow is an ``UnsupportedError``, never a wrong number."""
from collections import Counter, OrderedDict, defaultdict

import numpy as np
import pytest

from tensorlang import ad
from tensorlang.errors import UnsupportedError

X4 = np.array([0.3, -0.7, 1.1, 0.4])
TABLE = [0.0]
SCORES = {"a": 0.0}


# -- module globals written inside f ------------------------------------------------------------------------
def _global_list(x):
    TABLE[0] = x
    return TABLE[0] * x


def _global_dict_alias(x):
    d = SCORES
    d["a"] = x
    return SCORES["a"] * x


def _set_table(v):
    TABLE[0] = v


def _global_written_by_callee(x):
    _set_table(x * x)
    return TABLE[0] * x


@pytest.mark.parametrize("f", [_global_list, _global_dict_alias, _global_written_by_callee])
def test_a_global_container_written_in_f_passes_gradients(check, f):
    check(f, 1.3)


# -- augmented assignment on objects with a Python __iadd__ ----------------------------------------------
class _Bag:
    def __init__(self):
        self.items = []

    def __iadd__(self, v):
        self.items.append(v)
        return self

    def total(self):
        return sum(self.items)


class _Counter:
    def __init__(self):
        self.n = 0.0

    def __iadd__(self, v):
        self.n = self.n + v
        return self.n * 1.0


def test_iadd_of_an_object_calls_its_iadd(check):
    def f(x):
        b = _Bag()
        b += x
        b += x * x
        return b.total()
    check(f, 1.3)


def test_iadd_whose_result_is_unused_still_differentiates_its_writes(check):
    def f(x):
        c = _Counter()
        alias = c
        alias += x
        alias += x * 3
        return c.n * 2
    check(f, 1.3)


# -- dicts and lists of other classes -------------------------------------------------------------------------
def _defaultdict(x):
    d = defaultdict(float)
    d["a"] += x
    d["a"] += x * x
    return d["a"]


def _ordered(x):
    d = OrderedDict()
    d["a"] = x
    e = d
    e["b"] = e["a"] * 3
    return d["b"] * x


def _counter(x):
    c = Counter()
    c["a"] += x
    return c["a"] * 2


def _merge(x):
    d = {"a": x, "b": 1.0} | {"b": x * x}
    return d["a"] * d["b"]


def _merge_in_place(x):
    d = {"a": x}
    alias = d
    d |= {"b": x * 3}
    return alias["a"] * alias["b"]


@pytest.mark.parametrize("f", [_defaultdict, _ordered, _counter, _merge, _merge_in_place])
def test_dict_subclasses_and_merges(check, f):
    check(f, 1.3)


# -- attributes through the class's Python code --------------------------------------------------------------
class _Doubled:
    def __init__(self):
        self._v = 0.0

    @property
    def v(self):
        return self._v

    @v.setter
    def v(self, val):
        self._v = 2 * val


class _Lookup:
    def __init__(self):
        self.data = {"w": 0.0}

    def __getattr__(self, name):
        return self.data[name]


class _Logged:
    def __init__(self):
        self.seen = []

    def __setattr__(self, name, val):
        if name != "seen":
            self.seen.append(val)
        object.__setattr__(self, name, val)


def _property_setter(x):
    p = _Doubled()
    p.v = x
    return p.v * x


def _getattr_fallback(x):
    g = _Lookup()
    g.data["w"] = x
    return g.w * x


def _setattr_override(x):
    o = _Logged()
    o.a = x * x
    return o.seen[0] + o.a


@pytest.mark.parametrize("f", [_property_setter, _getattr_fallback, _setattr_override])
def test_attribute_access_runs_the_classes_python_code(check, f):
    check(f, 1.3)


# -- arrays ----------------------------------------------------------------------------------------------------
def test_a_number_written_into_an_int_array_has_no_gradient():
    def f(x):
        y = np.zeros(3, dtype=int)
        y[0] = x[0] * 10
        return np.sum(y * 1.0) + x[1]
    g, = ad.gradient(f, np.array([0.33, -0.7, 1.1]))
    np.testing.assert_array_equal(g, [0.0, 1.0, 0.0])


def _flat_write(x):
    y = np.zeros(4)
    y.flat[1] = x[0]
    y.flat[2:] = x[2:] * y.flat[1]
    return np.sum(y * x)


def test_a_write_through_the_flat_iterator_of_a_strided_view():
    """``v.flat[1] = x[0]`` for a strided view ``v`` of ``y``: a write into ``v`` at the place the flat index names,
    so into ``y`` (it was refused); its gradient and tangent against central differences."""
    def f(x):
        y = np.zeros(8)
        v = y[::2]
        v.flat[1] = x[0]
        return np.sum(y[::2] * x)
    want = np.array([(f(X4 + 1e-6 * e) - f(X4 - 1e-6 * e)) / 2e-6 for e in np.eye(4)])
    np.testing.assert_allclose(ad.gradient(f, X4)[0], want, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(ad.jvp(f, (X4,), (np.ones(4),))[1], np.sum(want), rtol=1e-6)


def _asarray_alias(x):
    y = x * 1.0
    z = np.asarray(y)
    z[0] = 5 * x[1]
    return np.sum(y * y)


def _atleast_alias(x):
    y = x * 1.0
    z = np.atleast_1d(y)
    z[0] = 5 * x[1]
    return np.sum(y * y)


def _flip_view(x):
    y = x * 1.0
    np.flip(y)[0] = x[0] * 7
    return np.sum(y * y)


def _split_views(x):
    y = x * 1.0
    a, b = np.split(y, 2)
    b[0] = a[1] * x[3]
    return np.sum(y * y)


@pytest.mark.parametrize("f", [_asarray_alias, _atleast_alias, _flip_view, _split_views, _flat_write])
def test_writes_through_numpy_functions_that_return_views(check, f):
    check(f, X4)


# -- arrays written in place and passed to calls (copy on capture) -------------------------------------------
def _head(a):
    return a[:2]


def _fill(out, v):
    out[0] = v


def _square(a):
    return a * a


def _written_then_filled(x):
    y = x * 1.0
    y[3] = x[0] * 2
    _fill(y, x[1] * 5)
    return np.sum(y * y)


def _kept_then_filled(x):
    y = x * 1.0
    s = _square(y)
    _fill(y, 3 * x[2])
    return np.sum(s * y)


def _kept_then_filled_in_a_loop(x):
    y = x * 1.0
    t = 0.0
    for i in range(3):
        s = np.sin(y)
        _fill(y, s[i + 1] * x[i])
        t = t + np.sum(s * y)
    return t


def _kept_then_written_through_a_view(x):
    y = x * 1.0
    s = _square(y)
    z = np.asarray(y)
    z[1] = 3 * x[2]
    return np.sum(s * y)


@pytest.mark.parametrize("f", [_written_then_filled, _kept_then_filled, _kept_then_filled_in_a_loop,
                               _kept_then_written_through_a_view])
def test_arrays_written_before_or_after_a_call(check, f):
    check(f, X4)


def _viewed_then_written(x):
    y = x * 1.0
    v = _head(y)
    y[0] = 5 * x[1]
    return np.sum(v * v)


def _written_viewed_and_written_through_the_view(x):
    y = x * 1.0
    y[3] = x[0] * 2
    v = _head(y)
    v[0] = x[1] * 5
    return np.sum(y * y)


def _filled_twice(x):
    y = x * 1.0
    _fill(y, y[1] * x[0])
    _fill(y, y[0] * x[1])
    return np.sum(y * y)


@pytest.mark.parametrize("f", [_viewed_then_written, _written_viewed_and_written_through_the_view, _filled_twice])
def test_calls_that_return_views_or_write_arrays_written_after_them(check, f):
    check(f, X4)


# -- functions reached through a class --------------------------------------------------------------------------
class _Scaled:
    def __init__(self, v):
        self.v = v

    def scaled(self, a):
        return self.v * a

    @classmethod
    def make(cls, v):
        return cls(v * 2)

    @staticmethod
    def square(v):
        return v * v


def _through_the_class(x):
    k = _Scaled(x)
    return _Scaled.scaled(k, x * 3) + _Scaled.make(x).v * x + _Scaled.square(x) + k.square(x)


def test_methods_called_through_the_class(check):
    check(_through_the_class, 1.3)


# -- containers holding objects that are written ------------------------------------------------------------
class _Total:
    def __init__(self):
        self.tot = 0.0

    def add_square(self, v):
        self.tot = self.tot + v * v
        return self.tot


def _bound_method_in_a_dict(x):
    a = _Total()
    ops = {"add": a.add_square}
    ops["add"](x[0])
    ops["add"](x[1])
    return a.tot


def _arrays_in_a_list_written_after_a_read(x):
    ws = [x * 1.0, x * 2.0]
    ws[0][1] = 3.0
    s = np.stack(ws)
    ws[1][0] = 0.0
    return np.sum(s * s)


def _slice_of_a_list_written(x):
    lst = [x[0], x[1], x[2]]
    r = lst[::-1]
    r[0] = r[1] * 5
    return sum(lst) + r[0]


class _Plain:
    pass


def _builtin_getattr_and_setattr(x):
    o = _Plain()
    o.a = x[0] * 2
    setattr(o, "b", x[1] * x[2])
    return getattr(o, "a") * x[1] + getattr(o, "b") + getattr(o, "c", x[3]) * 3


@pytest.mark.parametrize("f", [_bound_method_in_a_dict, _arrays_in_a_list_written_after_a_read,
                               _slice_of_a_list_written, _builtin_getattr_and_setattr])
def test_objects_held_by_containers(check, f):
    check(f, X4)


def test_writes_through_dunder_dict_are_refused():
    def f(x):
        o = _Plain()
        o.a = 1.0
        o.__dict__["a"] = x[0]
        return o.a * x[1]
    with pytest.raises(UnsupportedError, match="__dict__"):
        ad.gradient(f, X4)


# -- forward mode: augmented assignments write in place ----------------------------------------------------------
def _iadd_through_an_alias(x):
    y = x * 1.0
    z = y
    z += x
    return np.sum(y * y)


def _imul_through_a_slice_view(x):
    y = x * 1.0
    w = y[:]
    w *= x
    return np.sum(y * y)


def _iadd_of_list_elements(x):
    ws = [x.copy(), x * 2]
    for w in ws:
        w *= x[0]
    return np.sum(ws[0] * ws[1])


def _iadd_of_an_object(x):
    b = _Bag()
    b += x[0]
    b += x[1] * x[2]
    return b.total()


@pytest.mark.parametrize("f", [_iadd_through_an_alias, _imul_through_a_slice_view, _iadd_of_list_elements,
                               _iadd_of_an_object])
def test_jvp_of_augmented_assignments_in_place(f):
    v = np.array([0.5, -1.0, 0.25, 2.0])
    v0 = v.copy()
    y, t = ad.jvp(f, (X4.copy(),), (v,))
    np.testing.assert_array_equal(v, v0)
    h = 1e-6
    want = (f(X4 + h * v) - f(X4 - h * v)) / (2 * h)
    np.testing.assert_allclose(y, f(X4.copy()))
    np.testing.assert_allclose(t, want, rtol=1e-6, atol=1e-8)


def _jvp_and_difference(f, x, v, h=1e-6):
    return ad.jvp(f, (x,), (v,))[1], (f(x + h * v) - f(x - h * v)) / (2 * h)


@pytest.mark.parametrize("f", [_merge, _merge_in_place, _property_setter, _getattr_fallback])
def test_jvp_through_merges_setters_and_getattr(f):
    got, want = _jvp_and_difference(f, 1.3, 0.7)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("f", [_defaultdict, _counter])
def test_jvp_through_dict_subclasses_is_refused(f):
    with pytest.raises(UnsupportedError, match="no forward rule"):
        ad.jvp(f, (1.3,), (0.7,))


# -- an array stored in a container or an attribute, then written ---------------------------------------------
def _stored_in_a_list(x):
    y = x * 1.0
    lst = [0.0, 0.0]
    lst[0] = y
    y[1] = x[2] * 5
    return np.sum(lst[0] * x)


def _stored_in_an_attribute(x):
    y = x * 1.0
    h = _Plain()
    h.a = y
    y[1] = x[2] * 5
    return np.sum(h.a * x)


def _appended_then_written(x):
    ys = [x * 1.0]
    ys.append(ys[-1])
    ys[1][0] = x[1] * 4
    return np.sum(ys[0] * x)


@pytest.mark.parametrize("f", [_stored_in_a_list, _stored_in_an_attribute, _appended_then_written])
def test_an_array_stored_and_then_written_is_the_same_array(check, f):
    check(f, X4)


# -- an array a box-free helper returned, written by its caller ---------------------------------------------
def _doubled(x):
    return x * 2.0


def _doubled_and_tripled(x):
    return (x * 2.0, x * 3.0)


def _returned_then_written(x):
    a = _doubled(x)
    a[0] = a[1] * 5.0
    return np.sum(a * x)


def _returned_then_overwritten(x):
    a = _doubled(x)
    a[0] = 5.0
    return np.sum(a * x)


def _returned_in_a_tuple_then_written(x):
    a, b = _doubled_and_tripled(x)
    a[0] = a[1] * 5.0
    return np.sum(a * b)


@pytest.mark.parametrize("f", [_returned_then_written, _returned_then_overwritten, _returned_in_a_tuple_then_written])
def test_an_array_a_box_free_helper_returned_written_by_the_caller(check, f):
    # (the helper's pullback put the gradient it was given back into the store and read its local: lost)
    check(f, X4)


def _square_into(y, x):
    y += x * x


@pytest.mark.parametrize("view", [lambda x: x, lambda x: x[:], lambda x: x[::-1], lambda x: x.reshape(3)])
def test_a_function_that_writes_one_parameter_with_another_that_aliases_it(view):
    """``w(y, x)`` writing ``y += x * x``, called with ``y`` being ``x`` or a view of it: the product's pullback
    reads the values ``x`` had before the write (it read them after, and the gradient was wrong with no
    error).  Checked against central differences."""
    def f(x):
        y = view(x)
        _square_into(y, x)
        return np.sum(y * x) + np.sum(x * x)

    x = np.array([1.0, 2.0, 3.0])
    want = [(f(x + e) - f(x - e)) / 2e-6 for e in np.eye(3) * 1e-6]
    np.testing.assert_allclose(ad.grad(f)(x.copy()), want, rtol=1e-6)
