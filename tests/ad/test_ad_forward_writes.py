"""Forward mode (``ad.jvp``, ``ad.jacobian`` in forward mode, and ``ad.hessian``/``ad.hvp``, forward over
reverse) through writes into an array made from an argument: a new array (``x + 1.0``, ``x.copy()``,
``np.array(x)`` ...) has a tangent of its own, so writing into it leaves the argument's tangent as it is,
while the argument itself or a view of it (``np.asarray(x)``, ``x.reshape(3)``, ``x[:]``) shares the
argument's tangent, so writing into it writes the argument's.  Each kind of write (an item with an int, a
slice or an index array, ``+=``, ``*=``, ``np.add.at``, ``np.put``, ``np.copyto``, ``out=``, an item of a view)
is checked against central differences of the function, computed here; the Hessian against nested
central differences.  The tangents the caller passes are never written."""
import numpy as np
import pytest

from tensorlang import ad
from tensorlang.errors import UnsupportedError

from conftest import hvp_by_differences   # tests/ad is on the path (rootdir conftest)
from primitive_examples import EXAMPLES

X = np.array([1.0, 2.0, 3.0])
V = np.array([1.0, 0.0, 0.0])
U = np.array([0.5, -0.3, 0.8])


def _difference(f, x, v, h=1e-6):
    """The central difference of ``f`` at ``x`` along ``v`` (``f`` gets copies: it may write into them)."""
    return (f(x + h * v) - f(x - h * v)) / (2 * h)


def _gradient_by_differences(f, x):
    return np.array([_difference(f, x, e) for e in np.eye(x.size)])


# -- the case of the report, written out ----------------------------------------------------------------------
def plus_constant_then_item(x):
    y = x + 1.0
    y[0] = 5.0
    return np.sum(y * x)


def times_one_then_item(x):
    y = x * 1.0
    y[0] = 5.0
    return np.sum(y * x) + np.sum(x * x)


def positive_then_slice(x):
    y = +x
    y[1:] = x[0] * 2.0
    return np.sum(y * x) + np.sum(x * x)


def reshape_then_item(x):    # a view: the write reaches x
    y = x.reshape(3)
    y[0] = 5.0
    return np.sum(y * x) + np.sum(x * x)


def reshape_then_plus_equal(x):
    y = x.reshape(3)
    y += x * x
    return np.sum(y * x) + np.sum(x * x)


def _pair(x):   # no writes: its NumPy operations are inlined, x + 1.0's tangent from the template of +
    return x + 1.0, x


def pair_then_item(x):
    a, b = _pair(x)
    a[0] = 5.0
    return np.sum(a * b) + np.sum(x * x)


def flatten_then_item(x):   # a copy, where x.ravel() is a view
    y = x.flatten()
    y[0] = 5.0
    return np.sum(y * x) + np.sum(x * x)


def write_into_x_after(x):   # x written, y = x + 1.0 read after: y's tangent is not x's
    y = x + 1.0
    x[0] = 5.0
    return np.sum(y * x)


def new_array_of_a_view(x):
    y = x[1:]
    z = y + 0.0
    z[0] = 7.0
    return np.sum(z * y) + np.sum(x * x)


def two_new_arrays_written(x):
    y = x * 1.0
    z = y + 0.0
    y[1] = x[0] ** 2
    z[2] = 3.0
    return np.sum(y * z) + np.sum(x)


def new_arrays_in_a_loop(x):
    y = x + 0.0
    for i in range(3):
        z = y + 1.0
        z[i] = x[i] ** 2
        y = z
    return np.sum(y * x)


def out_into_a_new_array(x):
    y = x + 0.0
    np.multiply(x, x, out=y)
    return np.sum(y) + np.sum(x * x)


WRITTEN_OUT = [plus_constant_then_item, times_one_then_item, positive_then_slice, reshape_then_item,
               reshape_then_plus_equal, pair_then_item, flatten_then_item, write_into_x_after, new_array_of_a_view,
               two_new_arrays_written, new_arrays_in_a_loop, out_into_a_new_array]


# -- every way of making y from x, with every kind of write ------------------------------------------------------
# each maker ``make(write)`` is a function of x that makes y from x (inline, as the user writes it: its forward
# code is inlined), calls ``write(y, x)``, then reads y and x
def _plus_constant(write):
    def f(x):
        y = x + 1.0
        write(y, x)
        return np.sum(y * x) + np.sum(x * x)
    return f


def _minus_constant(write):
    def f(x):
        y = x - 0.5
        write(y, x)
        return np.sum(y * x) + np.sum(x * x)
    return f


def _times_one(write):
    def f(x):
        y = x * 1.0
        write(y, x)
        return np.sum(y * x) + np.sum(x * x)
    return f


def _unary_plus(write):
    def f(x):
        y = +x
        write(y, x)
        return np.sum(y * x) + np.sum(x * x)
    return f


def _np_positive(write):
    def f(x):
        y = np.positive(x)
        write(y, x)
        return np.sum(y * x) + np.sum(x * x)
    return f


def _np_add(write):
    def f(x):
        y = np.add(x, 0.0)
        write(y, x)
        return np.sum(y * x) + np.sum(x * x)
    return f


def _copy(write):
    def f(x):
        y = x.copy()
        write(y, x)
        return np.sum(y * x) + np.sum(x * x)
    return f


def _asarray_float(write):   # x itself (a float array): the write is a write into x
    def f(x):
        y = np.asarray(x, dtype=float)
        write(y, x)
        return np.sum(y * x) + np.sum(x * x)
    return f


def _astype(write):
    def f(x):
        y = x.astype(float)
        write(y, x)
        return np.sum(y * x) + np.sum(x * x)
    return f


def _np_array(write):
    def f(x):
        y = np.array(x)
        write(y, x)
        return np.sum(y * x) + np.sum(x * x)
    return f


def _reshape(write):   # a view
    def f(x):
        y = x.reshape(3)
        write(y, x)
        return np.sum(y * x) + np.sum(x * x)
    return f


def _full_slice(write):   # a view
    def f(x):
        y = x[:]
        write(y, x)
        return np.sum(y * x) + np.sum(x * x)
    return f


def _reversed_slice(write):   # a view, strides negative
    def f(x):
        y = x[::-1]
        write(y, x)
        return np.sum(y * x) + np.sum(x * x)
    return f


def _sum_of_a_list(write):   # builtins.sum of one array: 0 + x, a new array
    def f(x):
        y = sum([x])
        write(y, x)
        return np.sum(y * x) + np.sum(x * x)
    return f


def _zeros_negated(write):   # no tangent until the write gives it one; read after it by an inlined -y
    def f(x):
        y = np.zeros(3)
        write(y, x)
        return np.sum(-y * x) + np.sum(x * x)
    return f


MAKERS = [_plus_constant, _minus_constant, _times_one, _unary_plus, _np_positive, _np_add, _copy, _asarray_float,
          _astype, _np_array, _reshape, _full_slice, _reversed_slice, _sum_of_a_list, _zeros_negated]


def _item(y, x):
    y[0] = 5.0


def _item_of_value(y, x):
    y[2] = x[1] * x[0]


def _slice(y, x):
    y[1:] = x[0] ** 2


def _index_array(y, x):
    y[[0, 2]] = np.sin(x[1])


def _plus_equal(y, x):
    y += x * x


def _times_equal(y, x):
    y *= 2.0


def _add_at(y, x):
    np.add.at(y, [0, 0, 2], x[1])


def _put(y, x):
    np.put(y, [1], x[0] ** 2)


def _copyto(y, x):
    np.copyto(y, x ** 2)


def _ufunc_out(y, x):
    np.multiply(x, 3.0, out=y)


def _item_of_a_view(y, x):
    y[1:][0] = 5.0


WRITES = [_item, _item_of_value, _slice, _index_array, _plus_equal, _times_equal, _add_at, _put, _copyto, _ufunc_out,
          _item_of_a_view]

CASES = [pytest.param(make, write, id=f"{make.__name__[1:]}-{write.__name__[1:]}") for make in MAKERS
         for write in WRITES]

# the refusals that name their cause
REFUSALS = ("numpy.copyto is not differentiated in forward mode", "writes into an array a call returned")


def _refused_by_name(e: Exception, f) -> None:
    """A refusal is right only where it names what it refuses."""
    assert any(r in str(e) for r in REFUSALS), f"{f.__qualname__}: {e}"


@pytest.mark.parametrize("f", WRITTEN_OUT)
def test_jvp_of_the_written_out_cases(f):
    v = V.copy()
    _, got = ad.jvp(f, (X.copy(),), (v,))
    np.testing.assert_allclose(got, _difference(f, X, V), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(v, V)


def test_the_report_gives_five():
    assert ad.jvp(plus_constant_then_item, (X.copy(),), (V.copy(),)) == (23.0, 5.0)


@pytest.mark.parametrize("f", WRITTEN_OUT)
def test_hessian_of_the_written_out_cases(f):
    want, = hvp_by_differences(f, [X.copy()], [U])
    try:
        got, = ad.hvp(f, (X.copy(),), (U.copy(),))
    except UnsupportedError as e:
        return _refused_by_name(e, f)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("make, write", CASES)
def test_jvp_and_forward_jacobian(make, write):
    f = make(write)
    u = U.copy()
    try:
        _, got = ad.jvp(f, (X.copy(),), (u,))
    except UnsupportedError as e:
        return _refused_by_name(e, f)
    np.testing.assert_allclose(got, _difference(f, X, U), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(u, U)   # the caller's tangent is not written
    jac = ad.jacobian(f, mode="forward")(X.copy())
    np.testing.assert_allclose(jac, _gradient_by_differences(f, X), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("make, write", CASES)
def test_hessian_and_hvp(make, write):
    f = make(write)
    u = U.copy()
    try:
        got, = ad.hvp(f, (X.copy(),), (u,))
    except UnsupportedError as e:
        return _refused_by_name(e, f)
    want, = hvp_by_differences(f, [X.copy()], [U])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(u, U)
    want_h = np.array([hvp_by_differences(f, [X.copy()], [e])[0] for e in np.eye(3)]).T
    np.testing.assert_allclose(ad.hessian(f)(X.copy()), want_h, rtol=1e-4, atol=1e-4)


# -- every primitive: writing into its result writes its result's tangent only -------------------------------------
def _written_after(fn):
    """``fn`` followed by a write into its result where that is a writeable float array (a new array, or a view
    of ``x``), then a read of ``x`` and the result: right only if the result's tangent is the result's own (or,
    for a view, the same view of ``x``'s)."""
    def g(x):
        y = fn(x)
        if type(y) is np.ndarray and y.dtype.kind == "f" and y.flags.writeable and y.ndim:
            y *= 2.0
            return np.sum(y * 0.7) + np.sum(x * x)
        return np.sum(x * x)
    return g


def _primitive_cases():
    for key, examples in EXAMPLES.items():
        for k, (fn, x) in enumerate(examples):
            if type(x) is np.ndarray and x.dtype.kind == "f":
                yield pytest.param(fn, x, id=f"{getattr(key, '__qualname__', key)}-{k}")


@pytest.mark.parametrize("fn, x", list(_primitive_cases()))
def test_writing_into_a_primitive_result_leaves_its_argument_tangent(fn, x):
    rng = np.random.default_rng(3)
    v = rng.uniform(-1.0, 1.0, x.shape)
    g = _written_after(fn)
    try:
        _, got = ad.jvp(g, (x.copy(),), (v.copy(),))
    except UnsupportedError:
        return   # (a mode the primitive's record refuses: test_ad_registry checks the refusal)
    np.testing.assert_allclose(got, _difference(g, x, v), rtol=1e-5, atol=1e-5)


def _write_into_a_listed_argument(lst):
    a = lst[0]
    a[0] = 5.0
    return np.sum(a * lst[1])


def test_the_tangents_the_caller_passes_in_a_list_are_not_written():
    t = [np.array([1.0, 1.0]), np.array([1.0, 2.0])]
    x = [np.array([1.0, 2.0]), np.array([3.0, 4.0])]
    y, ty = ad.jvp(_write_into_a_listed_argument, (x,), (t,))
    assert (y, ty) == (23.0, 13.0)   # 5 * 3 + a[1] * 4, and its tangent 1 * 4 + 5 * 1 + 2 * 2
    np.testing.assert_array_equal(t[0], [1.0, 1.0])
    np.testing.assert_array_equal(t[1], [1.0, 2.0])


def _reshape_of_a_strided_argument(x):
    y = np.reshape(x, -1)   # x strided: a copy of x, a view of the array np.reshape makes
    y[0] = 5.0
    return np.sum(y * np.ravel(x)) + np.sum(x * x)


def test_a_write_into_a_view_of_a_copy_np_reshape_made_is_refused():
    """Its tangent is its own (a copy), not a view of a tangent registered for the array it is a view of: the
    write is refused, never written into the argument's tangent."""
    x = np.arange(1.0, 7.0).reshape(2, 3).T
    t = np.linspace(-1.0, 1.0, 6).reshape(3, 2)
    with pytest.raises(UnsupportedError, match="cannot be found as the same view"):
        ad.jvp(_reshape_of_a_strided_argument, (x,), (t,))


K = 1.5   # (a module global: ``K + x`` is not inlined, the quotient goes through the operator's rule)


def _max_of_a_quotient(x):
    return np.max(1.0 / (K + x)) * x[0] + np.max(x / (K + np.cos(x))) * np.sum(x * x)


def test_hessian_through_a_cotangent_a_pullback_wrote():
    """``np.max``'s pullback writes its gradient into ``np.zeros``; in forward over reverse the write gives that
    array a tangent the generated code held as None, and the quotient's pullback then took the cotangent's tangent
    from the array it views (twice: one entry of the Hessian doubled, not symmetric).  The tangent of an argument
    of a call that may write is taken again after it where it had none (``forward.rewritten``)."""
    x = np.array([0.3, -0.5, 0.8, 0.1])
    hessian = ad.hessian(_max_of_a_quotient)(x)
    want = np.array([_difference(ad.grad(_max_of_a_quotient), x, e, 1e-6) for e in np.eye(4)])
    np.testing.assert_allclose(hessian, want, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(hessian, hessian.T, atol=1e-12)
