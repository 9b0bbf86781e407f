"""Forward mode (``ad.jvp``, and ``ad.hessian``/``ad.hvp``, forward over reverse) through writes into views:
a view's tangent is the same view of its base's tangent, whichever call made the view (``.T``, slices,
``np.asarray``, ``np.atleast_1d``, ``np.flip``, ``np.transpose``, ``reshape``), so a write through it reaches
the base's tangent as it reaches the base.  Checked against central differences of ``f`` along the tangent,
and Hessian-vector products against second differences of ``f``; what forward mode cannot follow is refused
with ``UnsupportedError``."""
import collections

import numpy as np
import pytest

from tensorlang import ad
from tensorlang.errors import UnsupportedError

from conftest import hvp_by_differences   # tests/ad is on the path (rootdir conftest)

X = np.array([0.3, -0.7, 1.1])
V = np.array([0.5, 0.2, -0.9])
NT = collections.namedtuple("NT", "a b")


def _transpose_attr(x):
    y = np.zeros((2, 2))
    y.T[0, 1] = x[0] * x[1]
    return np.sum(y * y) + y[1, 0] * x[2]


def _asarray(x):
    y = x * 1.0
    z = np.asarray(y)
    z[0] = x[1] ** 2
    return np.sum(y * y)


def _atleast_1d(x):
    y = np.zeros(3)
    z = np.atleast_1d(y)
    z[1] = x[0] * x[2]
    return np.sum(y ** 2) + y[1] * x[1]


def _flip(x):
    y = x * 2.0
    z = np.flip(y)
    z[0] = x[0] ** 3
    return np.sum(y * x)


def _flip_of_zeros(x):
    y = np.zeros(3)
    z = np.flip(y)
    z[0] = x[1] ** 2
    return np.sum(y * x)


def _np_transpose(x):
    y = np.zeros((2, 2))
    z = np.transpose(y)
    z[0, 1] = np.sin(x[0])
    return np.sum(y * y) + y[1, 0] * x[1]


def _total(a):
    return np.sum(a)


def _asarray_after_a_call(x):
    y = x * 1.0
    s = _total(y)
    t = y * 2
    z = np.asarray(y)
    z[2] = x[0] * s
    return np.sum(y * y) + np.sum(t)


def _asarray_after_a_reduction(x):
    y = np.zeros(3)
    z = np.asarray(y)
    s = np.sum(z)
    z[1] = x[0] * x[1]
    return np.sum(y * x) + s


def _views_of_views(x):
    y = x * 1.0
    z = y.T
    z[1] = x[0] ** 2
    w = np.flip(y)
    w[0] = w[0] * x[1]
    return np.sum(y ** 2)


def _flip_of_a_slice(x):
    y = np.zeros(4)
    z = np.flip(y[1:])
    z[0] = x[1] ** 2
    return np.sum(y ** 2) + y[3] * x[0]


def _row_of_zeros(x):
    y = np.zeros((2, 2))
    r = y[0]
    r[1] = x[0] * x[1]
    return np.sum(y * y) + y[0, 1] * x[2]


def _column_slice(x):
    y = np.outer(x, x)
    r = y[:, 0]
    r[:] = np.sin(x)
    return np.sum(y * y)


def _transposed_slice(x):
    y = np.zeros((3, 3))
    w = y[1:].T
    w[0, 1] = x[0] * x[1]
    return np.sum(y * x) + y[2, 0]


def _reshaped(x):
    y = np.outer(x, x)
    z = y.reshape(9)
    z[4] = x[0] ** 3
    return np.sum(y * y)


def _slices_in_a_loop(x):
    y = np.zeros(3)
    for i in range(3):
        r = y[i:i + 1]
        r[0] = x[i] * x[i]
    return np.sum(y * x)


def _view_made_before_the_write(x):
    y = np.zeros((2, 2))
    z = y.T
    y[0, 1] = x[0] * x[2]
    return z[1, 0] * x[1] + np.sum(z)


def _write_into(a, v):
    a[0] = v


def _view_passed_to_a_writer(x):
    y = x * 1.0
    _write_into(y[1:], x[0] * x[2])
    return np.sum(y * y)


def _view_in_a_list(x):
    y = np.zeros((2, 3))
    views = [y[1]]
    views[0][2] = x[0] * x[1]
    return np.sum(y * y) + y[1, 2]


def _iadd_into_a_reversed_view(x):
    y = x.copy()
    z = y[::-1]
    z += x ** 2
    return np.sum(y * y)


def _add_at(x):
    y = np.zeros(3)
    np.add.at(y, np.array([0, 0, 2]), x * x)
    return np.sum(y * x)


def _subtract_at_a_view(x):
    y = x * 1.0
    np.subtract.at(y[1:], np.array([1, 1]), x[:2] ** 2)
    return np.sum(y * y)


def _namedtuple_replace(x):
    n = NT(x[0], x[1])
    m = n._replace(a=x[2] ** 2)
    return m.a * m.b


WRITES_THROUGH_VIEWS = [_transpose_attr, _asarray, _atleast_1d, _flip, _flip_of_zeros, _np_transpose,
                        _asarray_after_a_call, _asarray_after_a_reduction, _views_of_views, _flip_of_a_slice,
                        _row_of_zeros, _column_slice, _transposed_slice, _reshaped, _slices_in_a_loop,
                        _view_made_before_the_write, _view_passed_to_a_writer, _view_in_a_list,
                        _iadd_into_a_reversed_view, _add_at, _subtract_at_a_view, _namedtuple_replace]


@pytest.mark.parametrize("f", WRITES_THROUGH_VIEWS)
def test_jvp_of_writes_through_views(f):
    x, v = X.copy(), V.copy()
    y, t = ad.jvp(f, (x,), (v,))
    np.testing.assert_array_equal(x, X)
    np.testing.assert_array_equal(v, V)
    h = 1e-6
    np.testing.assert_allclose(y, f(X.copy()), rtol=1e-12)
    np.testing.assert_allclose(t, (f(X + h * V) - f(X - h * V)) / (2 * h), rtol=1e-6, atol=1e-8)


HESSIANS = [_transpose_attr, _asarray, _flip, _np_transpose, _asarray_after_a_call, _asarray_after_a_reduction,
            _views_of_views, _row_of_zeros, _column_slice, _reshaped, _slices_in_a_loop, _view_made_before_the_write,
            _view_passed_to_a_writer, _view_in_a_list, _iadd_into_a_reversed_view, _transposed_slice,
            _atleast_1d, _flip_of_zeros, _add_at, _subtract_at_a_view]


@pytest.mark.parametrize("f", HESSIANS)
def test_hessian_and_hvp_of_writes_through_views(f):
    want, = hvp_by_differences(f, [X.copy()], [V])
    np.testing.assert_allclose(ad.hessian(f)(X.copy()) @ V, want, rtol=1e-4, atol=1e-5)
    got, = ad.hvp(f, (X.copy(),), (V,))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_what_forward_over_reverse_cannot_follow_is_differentiated_by_recordings():
    """Forward over reverse refuses ``NT._replace`` (``BeyondOrder``): ``ad.hvp`` differentiates the recording of
    the function instead (``tower``); ``ad.hessian`` runs f's pullback first, which refuses the call of it with
    keyword arguments by name."""
    want, = hvp_by_differences(_namedtuple_replace, [X.copy()], [V])
    np.testing.assert_allclose(ad.hvp(_namedtuple_replace, (X.copy(),), (V,))[0], want, rtol=1e-4, atol=1e-5)
    with pytest.raises(UnsupportedError, match="NT._replace with keyword arguments"):
        ad.hessian(_namedtuple_replace)(X.copy())


def _multiply_at(x):
    y = np.ones(3)
    np.multiply.at(y, np.array([0, 1]), x[:2])
    return np.sum(y)


def test_other_ufuncs_at_are_refused_in_forward_mode():
    with pytest.raises(UnsupportedError, match="np.multiply.at"):
        ad.jvp(_multiply_at, (X.copy(),), (V,))


def _write_through_a_view_of_a_fortran_array(x):
    y = np.zeros((2, 2), order="F")
    y.T[0, 1] = x[0] * x[1]
    return np.sum(y * y)


def test_a_write_through_a_view_it_cannot_map_is_refused():
    with pytest.raises(UnsupportedError, match="cannot be found as the same view"):
        ad.jvp(_write_through_a_view_of_a_fortran_array, (X.copy(),), (V,))


def _written_through_a_view(x):
    y = np.ones(4)
    v = y[1:]
    v *= -0.75        # a view of an array without a tangent, written before and after the array gets one
    y[2] = np.sin(x[1]) * 0.5
    w = y[0:]
    w *= x[0]
    return np.sum(y * y)


def test_in_place_operations_on_views_of_arrays_without_a_tangent():
    """``v = y[1:]; v *= c`` where ``y`` has no tangent yet was refused in forward mode; the write goes into
    the tangent of the array that owns the memory, made zero (as an item write through a view does)."""
    from conftest import central_difference
    x = np.array([0.3, -0.5, 0.7, 1.1])
    t = np.array([0.2, -1.0, 0.5, 0.3])
    g = central_difference(_written_through_a_view, (x,), 0)
    assert ad.jvp(_written_through_a_view, (x,), (t,))[1] == pytest.approx(g @ t, rel=1e-7)
    np.testing.assert_allclose(ad.hessian(_written_through_a_view)(x) @ t,
                               hvp_by_differences(_written_through_a_view, [x], [t])[0], rtol=1e-4, atol=1e-6)
