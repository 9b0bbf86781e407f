"""Derivatives of any order (``derive/ad/tower.py``): fourth to sixth derivatives, third derivatives through
calls of other functions, of functions that differentiate inside, of Jacobians and Hessians, in every entry point
(``ad.grad``, ``value_and_grad``, ``ad.jvp``, ``ad.hvp``, ``ad.jacobian``, ``ad.hessian``, ``ad.pullback``),
against SymPy's derivatives of the same functions written out (an oracle that shares no code with tensorlang.ad)
and central differences of the derivative one order below; what cannot be recorded refused by name (threads:
test_ad_third_order.py).
"""
import functools
import math
import os

import numpy as np
import pytest
import sympy as sp

import tensorlang as tl
from tensorlang import ad
from tensorlang.derive.ad import tower
from tensorlang.errors import BeyondOrder, UnsupportedError, named_cause

S = sp.Symbol("s")


def _nth(f, n):
    for _ in range(n):
        f = ad.grad(f)
    return f


def _sympy_nth(expr, n, x):
    return float(sp.diff(expr, S, n).subs(S, x).evalf(30))


def _helper(x):
    return x * np.sin(x)


def _calls_helper(x):
    return _helper(x) + x ** 3


def _loop(x):
    y = x
    for _ in range(3):
        y = y * 0.5 + np.tanh(y)
    return y


def _sympy_loop():
    y = S
    for _ in range(3):
        y = y * sp.Rational(1, 2) + sp.tanh(y)
    return y


def _containers(x):
    acc, d = [], {}
    for k in range(3):
        acc.append(x ** (k + 1))
        d[k] = np.exp(-x * k)
    return sum(a * d[k] for k, a in enumerate(acc))


def _branches(x):
    if x > 0:
        return np.log1p(x * x) * np.cos(x)
    return x ** 4


def _made(a):
    return lambda x: a * np.sin(x) ** 3


SCALAR = [
    ("np.sin*x^3", lambda x: np.sin(x) * x ** 3, sp.sin(S) * S ** 3),
    ("math exp cos", lambda x: math.exp(-x * x) * math.cos(x), sp.exp(-S * S) * sp.cos(S)),
    ("tanh^2", lambda x: np.tanh(x) ** 2, sp.tanh(S) ** 2),
    ("x^2.5", lambda x: x ** 2.5, S ** sp.Rational(5, 2)),
    ("helper", _calls_helper, S * sp.sin(S) + S ** 3),
    ("loop", _loop, _sympy_loop()),
    ("lists and dicts", _containers, sum(S ** (k + 1) * sp.exp(-S * k) for k in range(3))),
    ("branch", _branches, sp.log(1 + S * S) * sp.cos(S)),
    ("closure", _made(1.3), 1.3 * sp.sin(S) ** 3),
]


@pytest.mark.parametrize("order", [3, 4, 5])
@pytest.mark.parametrize("name, f, expr", SCALAR, ids=[c[0] for c in SCALAR])
def test_derivatives_of_order_three_to_five_by_sympy(name, f, expr, order):
    for x in (0.4, 1.3):
        assert _nth(f, order)(x) == pytest.approx(_sympy_nth(expr, order, x), rel=1e-9, abs=1e-9)


def test_a_sixth_derivative():
    x = 0.7
    assert _nth(np.sin, 6)(x) == pytest.approx(-math.sin(x), rel=1e-12)
    f = lambda x: np.exp(np.sin(x))   # noqa: E731
    assert _nth(f, 6)(x) == pytest.approx(_sympy_nth(sp.exp(sp.sin(S)), 6, x), rel=1e-9)


def test_the_fourth_derivative_agrees_with_differences_of_the_third():
    """The third derivative through the transform (a function of primitives), the fourth through recordings."""
    f = lambda x: np.exp(-x * x) * np.cos(3 * x)   # noqa: E731
    third = _nth(f, 3)
    x, h = 0.3, 1e-4
    central = lambda step: (third(x + step) - third(x - step)) / (2 * step)   # noqa: E731
    assert _nth(f, 4)(x) == pytest.approx((4 * central(h / 2) - central(h)) / 3, rel=1e-6)


def _two(x, y):
    return np.sin(x * y) + x ** 3 * y * y


def test_mixed_partials_in_two_arguments():
    X, Y = sp.symbols("x y")
    expr = sp.sin(X * Y) + X ** 3 * Y * Y
    x, y = 0.3, 0.7
    at = {X: x, Y: y}
    g = ad.grad(ad.grad(ad.grad(ad.grad(_two, 1), 0), 1), 0)   # d4/dx2 dy2, innermost in y first
    assert g(x, y) == pytest.approx(float(sp.diff(expr, Y, X, Y, X).subs(at)), rel=1e-10)
    g = ad.grad(ad.grad(ad.grad(ad.grad(_two), 1)), 1)
    assert g(x, y) == pytest.approx(float(sp.diff(expr, X, Y, X, Y).subs(at)), rel=1e-10)
    both = ad.grad(_nth(_two, 3), (0, 1))(x, y)
    assert both[0] == pytest.approx(float(sp.diff(expr, X, 4).subs(at)), rel=1e-10)
    assert both[1] == pytest.approx(float(sp.diff(expr, X, 3, Y).subs(at)), rel=1e-10)


def test_value_and_grad_has_aux_and_keywords_at_fourth_order():
    f = lambda x, scale=1.0: scale * np.sin(x) * x ** 2   # noqa: E731
    x = 0.6
    third, fourth = (_sympy_nth(sp.sin(S) * S ** 2, n, x) for n in (3, 4))
    value, grad = ad.value_and_grad(_nth(f, 3))(x)
    assert value == pytest.approx(third, rel=1e-10) and grad == pytest.approx(fourth, rel=1e-10)
    assert _nth(f, 4)(x, scale=2.0) == pytest.approx(2 * fourth, rel=1e-10)
    assert _nth(f, 3)(x, scale=2.0) == pytest.approx(2 * third, rel=1e-10)
    aux = lambda x: (_nth(f, 3)(x, 1.0), "label")   # noqa: E731
    g, label = ad.grad(aux, has_aux=True)(x)
    assert g == pytest.approx(fourth, rel=1e-10) and label == "label"


# -- arrays ------------------------------------------------------------------------------------------------------
X3 = sp.symbols("x0:3")


def _h(x):
    return np.sum(np.sin(x) * x ** 2) + x[0] * x[1] * x[2] + np.exp(x[0] * x[1])


def _sympy_h():
    return sum(sp.sin(v) * v ** 2 for v in X3) + X3[0] * X3[1] * X3[2] + sp.exp(X3[0] * X3[1])


def _sympy_tensor(expr, order, x):
    at = dict(zip(X3, x))
    out = np.empty((3,) * order)
    for index in np.ndindex(*out.shape):
        out[index] = float(sp.diff(expr, *(X3[i] for i in index)).subs(at))
    return out


XA = np.array([0.3, -0.5, 0.9])


def test_third_derivative_tensors_of_an_array_function():
    expected = _sympy_tensor(_sympy_h(), 3, XA)
    np.testing.assert_allclose(ad.hessian(ad.grad(_h))(XA), expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ad.jacobian(ad.hessian(_h))(XA), expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ad.jacobian(ad.jacobian(ad.grad(_h)))(XA), expected, rtol=1e-10, atol=1e-12)
    v = np.array([0.2, -1.0, 0.5])
    H, dH = ad.jvp(ad.hessian(_h), (XA,), (v,))
    np.testing.assert_allclose(H, _sympy_tensor(_sympy_h(), 2, XA), rtol=1e-10)
    np.testing.assert_allclose(dH, expected @ v, rtol=1e-10, atol=1e-12)
    # the Hessian-vector product of the gradient's components' sum, and a pullback of the Hessian
    hv = ad.hvp(lambda x: np.sum(ad.grad(_h)(x)), (XA,), (v,))[0]
    np.testing.assert_allclose(hv, np.einsum("ijk,k->j", expected, v), rtol=1e-10, atol=1e-12)
    w = np.arange(9.0).reshape(3, 3)
    y, back = ad.pullback(ad.hessian(_h), XA)
    np.testing.assert_allclose(back(w)[0], np.einsum("ij,ijk->k", w, expected), rtol=1e-10, atol=1e-12)


def test_the_fourth_derivative_tensor():
    np.testing.assert_allclose(ad.hessian(ad.hessian(_h))(XA), _sympy_tensor(_sympy_h(), 4, XA), rtol=1e-10,
                               atol=1e-12)


def _calls_grad(x):
    return x * ad.grad(lambda y: x * y * y)(2.0)   # 4 x^2


def _calls_jacobian(s):
    return np.sum(ad.jacobian(lambda s: np.tanh(np.array([1.0, 2.0]) * s))(s) ** 2)


def test_functions_that_differentiate_inside():
    assert ad.grad(ad.grad(_calls_grad))(0.37) == pytest.approx(8.0, rel=1e-12)
    assert _nth(_calls_grad, 3)(0.37) == pytest.approx(0.0, abs=1e-12)
    expr = (1 - sp.tanh(S) ** 2) ** 2 + (2 * (1 - sp.tanh(2 * S) ** 2)) ** 2
    for n in (2, 3):
        assert _nth(_calls_jacobian, n)(0.3) == pytest.approx(_sympy_nth(expr, n, 0.3), rel=1e-10)
    assert ad.hessian(_calls_jacobian)(0.3) == pytest.approx(_sympy_nth(expr, 2, 0.3), rel=1e-10)


def test_a_function_without_source_at_fourth_order():
    namespace = {}
    exec("import math\ndef f(x):\n    return math.sin(x) * x ** 3 + float(x) ** 2\n", namespace)
    x = 0.8
    assert _nth(namespace["f"], 4)(x) == pytest.approx(_sympy_nth(sp.sin(S) * S ** 3 + S ** 2, 4, x), rel=1e-10)


@functools.lru_cache(maxsize=None)
def _kernel():
    return tl.compile(tl.parse("x : [n]R\na : [n]R\ngen(i:n) [0 < i] * x[i] * x[i - 1] * a[i] + sin(x[i])"))


def test_what_cannot_be_recorded_is_refused_by_name_and_kernels_are_recorded():
    v, kernel = np.array([0.3, -0.2, 0.5]), _kernel()

    def around_a_kernel(s):
        y = kernel(x=v * s, a=v)
        return np.sum(y * y)

    for order in (2, 3, 4):   # (beyond the second, the kernel's adjoint kernels run on stand-ins: recorded calls)
        below = _nth(around_a_kernel, order - 1)
        assert _nth(around_a_kernel, order)(0.1) == pytest.approx((below(0.1 + 1e-4) - below(0.1 - 1e-4)) / 2e-4,
                                                                  rel=1e-6)
    with pytest.raises(UnsupportedError, match="infinite or undefined .* it came out NaN"):
        _nth(lambda y: np.power(0.0, y), 3)(0.3)


def test_derivatives_that_are_constants_and_zeros():
    """A level whose gradient does not depend on the argument (None from ``ad.grad`` for an array) is zeros to the
    next level: the fourth derivative of a quadratic is 0, its fourth derivative tensor zeros."""
    assert _nth(lambda x: x * x, 4)(0.5) == 0.0
    assert _nth(lambda z: (z * z).real, 4)(0.5) == 0.0
    np.testing.assert_array_equal(ad.hessian(ad.hessian(lambda v: np.sum(v * v)))(XA), np.zeros((3, 3, 3, 3)))
    assert _nth(lambda x: x ** 3, 3)(0.5) == pytest.approx(6.0) and _nth(lambda x: x ** 3, 5)(0.5) == 0.0


def _written_array(x):
    y = x * 1.0
    y[3] = x[0]
    return np.sum(y * y)


def _written_slices(x):
    y = np.zeros(4)
    y[1:3] += np.sin(y[0:2] + 0.5 * x[0:2])
    y[3] = np.tanh(x[1]) ** 2
    y[1:3] *= np.sin(np.tanh(y[0:2]))
    return np.sum(y + 0.5 * y) + y[3] * x[0]


def test_a_level_whose_recording_disagrees_with_the_derivative_is_refused():
    """Forward over reverse through a write into an array, run on stand-ins, lost the tangent of the written slot
    (a campaign over the generated array programs found 23 of 40 third derivatives wrong); it is refused on
    stand-ins, and a Hessian level of a tower is recorded instead as the forward-mode Jacobian of the recording of
    the gradient, two first derivatives: the third derivative through the write agrees with central differences
    of the Hessian.  Each level's recording is checked against the derivative run on the arguments themselves,
    refused where they disagree, never passed on.  Writes through slices (``y[1:3] *= ...``) are recorded as the
    augmented item assignments they are, which write through no view (they were refused so)."""
    x, t = np.array([0.3, -0.5, 0.8, 0.1]), np.array([1.0, 0.3, -0.2, 0.5])
    hessian = ad.hessian(_written_array)
    np.testing.assert_allclose(hessian(x), np.diag([4.0, 2.0, 2.0, 0.0]), atol=1e-15)
    np.testing.assert_allclose(ad.jvp(hessian, (x,), (np.ones(4),))[1], np.zeros((4, 4)), atol=1e-12)
    hessian = ad.hessian(lambda v: _written_array(v) * np.sum(np.sin(v)))
    np.testing.assert_allclose(ad.jvp(hessian, (x,), (t,))[1],
                               (hessian(x + 1e-5 * t) - hessian(x - 1e-5 * t)) / 2e-5, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(ad.jacobian(hessian)(x) @ t, ad.jvp(hessian, (x,), (t,))[1], rtol=1e-12, atol=1e-14)
    hessian = ad.hessian(_written_slices)   # (writes through slices: each an augmented item assignment)
    np.testing.assert_allclose(ad.jvp(hessian, (x,), (t,))[1],
                               (hessian(x + 1e-5 * t) - hessian(x - 1e-5 * t)) / 2e-5, rtol=1e-6, atol=1e-8)
    hessian = ad.hessian(_written_array)
    with pytest.raises(UnsupportedError, match="the recording of .* at this point gives"):
        tower._check(lambda x: hessian(x) * 1.5, hessian, (x,))   # (a recording that computed something else)
    tower._check(lambda x: hessian(x) * (1 + 1e-12), hessian, (x,))   # (rounding passes)


def test_a_third_derivative_through_gradients_called_inside_is_right_or_refused_by_name():
    """``ad.grad`` of a function that calls ``ad.grad`` of one that calls ``ad.grad``, through entries of a vector
    read in a loop: the third derivative against central differences of the second, or a ``BeyondOrder``
    (it raised NumPy's raw ``AttributeError: Cannot delete array dtype``: the gradient of tensorlang.ad's own
    cotangent reached as an array where its attribute was written)."""
    x, e = np.array([0.3, -0.7, 1.1]), np.array([0.0, 1.0, 0.0])

    def loop(v):
        s, t = np.ones(3), np.zeros((3,))
        for _ in range(3):
            t = t + s * v
            s = np.tanh(t) * v[0]
        return np.sum(t) + np.max(s)

    def second(a):
        return ad.grad(lambda u: ad.grad(lambda w: loop(x + w * e))(u))(a)

    try:
        third = ad.grad(second)(0.2)
    except BeyondOrder:
        return
    assert np.isclose(third, (second(0.2 + 1e-4) - second(0.2 - 1e-4)) / 2e-4, rtol=1e-4)


def test_a_stand_in_that_numpy_refuses_to_put_in_an_array_is_refused_by_name():
    """``np.array([s, 1.3])`` of a recording's stand-in ``s``: NumPy asks ``float(s)``, which refuses, and raises its
    own ``ValueError`` from that refusal; the third derivative is refused by name (it raised that raw
    ``ValueError: setting an array element with a sequence``), naming the user's code and the rule that converted
    it.  A ``ValueError`` of the user's own code passes through as it is."""
    def g(s):
        v, y = np.array([s, 1.3]), np.zeros(2)
        y[0] = v[0] ** 3 * v[1]
        y[1] = np.sin(v[0])
        return np.sum(y)

    def second(s):
        return ad.grad(ad.grad(g))(s)

    assert second(0.7) == pytest.approx(6 * 0.7 * 1.3 - np.sin(0.7))
    with pytest.raises(BeyondOrder, match="recording it at this point failed: .*conversion to a Python float .*"
                                          r"at .*test_ad_any_order\.py:\d+ in .* \(by tensorlang.ad's rule setitem"):
        ad.grad(second)(0.7)

    def written(s):
        y = np.zeros(2)
        y[0] = s ** 3
        return np.sum(y)

    with pytest.raises(BeyondOrder, match="through .*setitem is not supported: tensorlang.ad does not "
                                          "differentiate its own rule for it again") as e:
        ad.grad(lambda s: ad.grad(ad.grad(written))(s))(0.7)
    assert f"{os.sep}derive{os.sep}" not in str(e.value)   # (the rule named by its file's name alone)

    try:
        raise ValueError("the user's own error")
    except ValueError as own:   # (no refusal of tensorlang.ad behind it: passed on as it is)
        assert named_cause(own) is None


def _filled(x):
    y = np.zeros(4)
    y[0] += x[3] * x[1]
    y[3] += np.sin(np.cos(x[3]) * x[3])
    y[3] += np.tanh(np.sin(x[2])) * y[0]
    return np.sum(y * x) + y[1] * x[1]


def _filled_through_views(x):
    y = np.zeros(4)
    y[1:3] = x[2:4] ** 2
    y[3] = np.sin(np.exp(0.3 * y[1]))
    y[1:3] = np.cos(np.cos(y[0:2]) * x[0:2]) * np.sin(x[2:4])
    return np.sum(np.tanh(y * x)) + y[1] * x[1]


def test_a_gradient_called_inside_a_recorded_function_runs_on_its_functions_recording():
    """``ad.hessian`` of a function that calls ``ad.grad`` of one that fills an array made by ``np.zeros``: the
    inner gradient ran on the outer recording's stand-ins and wrote one into NumPy's array, which cannot hold it
    (refused: 63 of 90 generated array programs); it runs on the inner function's recording at their values now,
    whose arrays are the recording's.  The recording of the outer function is checked against the function run
    on the arguments (one through views of a stand-in was refused so; augmented item assignments are recorded as
    such now, and reached)."""
    x, t = np.array([0.3, -0.5, 0.8, 0.1]), np.array([1.0, 0.3, -0.2, 0.5])
    hessian = ad.hessian(_filled)
    third = ad.hessian(lambda z: ad.grad(_filled)(z) @ t)(x)
    np.testing.assert_allclose(third, (hessian(x + 1e-5 * t) - hessian(x - 1e-5 * t)) / 2e-5, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(ad.jacobian(ad.jacobian(lambda z: ad.grad(_filled)(z) @ t))(x), third, atol=1e-12)
    inner = lambda z: ad.grad(_filled_through_views)(z) @ t   # noqa: E731
    gradient = ad.grad(inner)
    np.testing.assert_allclose(ad.hessian(inner)(x), [(gradient(x + 1e-6 * e) - gradient(x - 1e-6 * e)) / 2e-6
                                                      for e in np.eye(4)], rtol=1e-5, atol=1e-7)


def test_the_third_derivative_of_the_angle_of_a_complex_number():
    """``np.angle(x + 2j)`` is ``atan2(2, x)``: its third derivative was wrong (-0.0866 for 0.1118), the pullback's
    ``i z / |z|^2`` differentiated twice; written ``i / conj(z)`` it agrees with ``math.atan2``'s and the formula."""
    x, a = 0.7, 2.0
    third = ad.grad(ad.grad(ad.grad(lambda t: np.angle(t + 2j))))(x)
    assert third == pytest.approx(2 * a * (a * a - 3 * x * x) / (x * x + a * a) ** 3, rel=1e-12)
    assert third == pytest.approx(ad.grad(ad.grad(ad.grad(lambda t: math.atan2(2.0, t))))(x), rel=1e-12)


def _written_fancy_copy(x):
    v = x * x
    v[[0, 2]] -= x[[1, 3]] ** 3   # (the read by an advanced index is a copy, written, then written back)
    return np.sum(v * np.sin(x))


def test_a_third_derivative_through_a_write_into_an_advanced_index_read():
    """A derivative run on stand-ins asks whether an array read by an advanced index is held by the array it
    was read from as it does of NumPy's arrays, by their memory (``runtime.held``): it took a stand-in for held by
    any other, lost the gradient of the read copy, and the Hessian's recording was refused as disagreeing with
    the Hessian (the jvp of it and the third derivative of a line through it were out of reach)."""
    x, t = np.array([0.3, -0.5, 0.8, 0.1]), np.array([1.0, 0.3, -0.2, 0.5])
    hessian = ad.hessian(_written_fancy_copy)
    np.testing.assert_allclose(ad.jvp(hessian, (x,), (t,))[1],
                               (hessian(x + 1e-5 * t) - hessian(x - 1e-5 * t)) / 2e-5, rtol=1e-6, atol=1e-8)
    line = lambda s: _written_fancy_copy(x + s * t)   # noqa: E731
    second = ad.grad(ad.grad(line))
    assert ad.grad(ad.grad(ad.grad(line)))(0.2) == pytest.approx((second(0.2 + 1e-5) - second(0.2 - 1e-5)) / 2e-5,
                                                                   rel=1e-6)


def _recurrence_scaled(x):
    parts = [np.exp(0.3 * x), x * x]
    s = sum(np.sum(e) for e in parts)
    v = np.zeros_like(x)
    for i in range(1, 4):
        v[i] = v[i - 1] * 0.5 + np.sin(x[i] * x[0])
    v[0] *= s
    return np.sum(v)


def test_a_third_derivative_through_entries_written_in_a_loop():
    """Gradients of entries (``Indexed``) added into the gradient a box of the store holds, NumPy's array: on
    stand-ins the entries are stand-ins, which NumPy's array cannot hold (``float`` of one was refused in the
    jvp of the Hessian); they are added out of place there."""
    x, t = np.array([0.3, -0.5, 0.8, 0.1]), np.array([1.0, 0.3, -0.2, 0.5])
    hessian = ad.hessian(_recurrence_scaled)
    np.testing.assert_allclose(ad.jvp(hessian, (x,), (t,))[1],
                               (hessian(x + 1e-5 * t) - hessian(x - 1e-5 * t)) / 2e-5, rtol=1e-6, atol=1e-8)


def _through_a_named_view(x):
    y = np.sin(x) * 1.0
    w = y[1:]
    w *= x[:3]   # (a write through a view: y sees it)
    return np.sum(y * y * x)


def _view_read_before_a_write(x):
    y = np.cos(x) * 1.0
    v = y[1:3]
    y[1] = x[0] ** 2   # (v sees it)
    return np.sum(v * v * x[2:]) + np.sum(y)


@pytest.mark.parametrize("f", [_through_a_named_view, _view_read_before_a_write])
def test_views_of_stand_ins_are_refused_by_name(f):
    """Beyond the transform's orders a derivative runs on stand-ins, and follows writes through views of NumPy's
    arrays but not of stand-ins: a write through a view of an array another stand-in holds, and a view read before
    a write into its array and used after it, are refused by name (they computed something else, which the check
    of a level caught only where the values differed at the point)."""
    x, t = np.array([0.3, -0.5, 0.8, 0.1]), np.array([1.0, 0.3, -0.2, 0.5])
    with pytest.raises(BeyondOrder, match="a write through a view of an array|a value used after a write into"):
        ad.jvp(ad.hessian(f), (x,), (t,))
    np.testing.assert_allclose(ad.hessian(f)(x), [(ad.grad(f)(x + 1e-6 * e) - ad.grad(f)(x - 1e-6 * e)) / 2e-6
                                                  for e in np.eye(4)], rtol=1e-5, atol=1e-7)   # (the Hessian is)


def _written_at_sorted_entries(x):
    y = np.sin(x) * 1.0
    y[np.argsort(x)[:2]] = x[:2] ** 3   # (an index the arguments compute: a stand-in beyond the transform's orders)
    return np.sum(y * y * x)


def _written_slice_read_after(x):
    y = np.cos(x) + x[3]
    y[2:] *= x[:2]   # (an operand of the product is a view of y, which the write changes: copied on capture)
    y[1] = x[0]
    return np.sum(y * y)


@pytest.mark.parametrize("f", [_written_at_sorted_entries, _written_slice_read_after])
def test_a_third_derivative_through_writes_on_stand_ins(f):
    """On stand-ins, the slots a fancy-index write wins were found with NumPy's array indexed by a stand-in
    (refused), and an operand of a product that is a view of an array written after it was not copied on capture
    as NumPy's is (``runtime.snap``: the product's pullback would read the written values; refused as a view used
    after a write).  Both agree with central differences of the Hessian now."""
    x, t = np.array([0.3, -0.5, 0.8, 0.1]), np.array([1.0, 0.3, -0.2, 0.5])
    hessian = ad.hessian(f)
    np.testing.assert_allclose(ad.jvp(hessian, (x,), (t,))[1],
                               (hessian(x + 1e-5 * t) - hessian(x - 1e-5 * t)) / 2e-5, rtol=1e-6, atol=1e-7)


A3 = np.array([[1.0, 0.3, 0.2], [0.1, 2.0, 0.4], [0.3, 0.2, 1.5]])
W4 = np.array([1.0, 2.0, 3.0, 4.0])
# name: (function, point); each was refused beyond the transform's orders, where a rule's pullback or the user's
# code met a stand-in: np.einsum's pullback wrote a repeated letter's diagonal into a view, the layout rules numbered
# a stand-in's entries as a batch's, np.linalg.eig's made its vectors contiguous with np.ascontiguousarray, the
# tolerances of svd and eigh called np.max with initial=, a table read at an index or mask the arguments compute
# (w[np.argsort(x)]), x.flat[i] of a stand-in
THIRD_ORDER_NUMPY = {
    "einsum_trace": (lambda a: np.einsum("ii->", a) ** 3, A3),
    "einsum_diagonal_times": (lambda a: np.sum(np.einsum("ii,ij->ij", a, a) ** 2), A3),
    "einsum_broadcast": (lambda a: np.sum(np.einsum("ij,j->i", a, a[0]) ** 3), A3),
    "spectral_norm": (lambda a: np.linalg.norm(a, 2), A3),
    "nuclear_norm": (lambda a: np.linalg.norm(a, "nuc") ** 2, A3),
    "eigh": (lambda a: np.sum(np.linalg.eigh(a + a.T)[0] ** 3), A3),
    "svd_vectors": (lambda a: np.sum(np.linalg.svd(a)[0][:, 0] ** 3), A3),
    "eigvals": (lambda a: np.sum(np.real(np.linalg.eigvals(a)) ** 3), A3),
    "cond": (lambda a: np.linalg.cond(a), A3),
    "max_initial": (lambda a: np.sum(np.max(a * a, axis=1, initial=0.5) ** 3), A3),
    "table_at_argsort": (lambda x: np.sum(W4[np.argsort(x)] * x ** 3), XA4 := np.array([0.3, -1.2, 2.0, 0.7])),
    "table_at_mask": (lambda x: np.sum(W4[x > 0] * x[x > 0] ** 3), XA4),
    "read_at_nonzero": (lambda x: np.sum(x[np.nonzero(x > 0)] ** 3), XA4),
    "flat_item": (lambda x: x.flat[2] ** 3 * np.sum(x), XA4),
}


@pytest.mark.parametrize("name", THIRD_ORDER_NUMPY)
def test_third_derivatives_through_numpy_rules_that_met_stand_ins(name):
    """``ad.jvp`` of ``ad.hessian`` against central differences of the Hessian, through rules whose pullbacks
    converted, wrote into or numbered a recording's stand-in as a plain array (each was refused by name)."""
    f, x = THIRD_ORDER_NUMPY[name]
    t = np.cos(np.arange(x.size)).reshape(x.shape) * 0.1
    hessian = ad.hessian(f)
    got = ad.jvp(hessian, (x,), (t,))[1]
    want = (hessian(x + 1e-4 * t) - hessian(x - 1e-4 * t)) / 2e-4
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * max(1.0, np.abs(want).max()))



class _Quartic:
    """A callable object, as a model or a loss written as a class is."""

    def __init__(self, scale):
        self.scale = scale

    def __call__(self, x):
        return np.sum(self.scale * x ** 4)


def _power_sum(x, a):
    return np.sum(x ** a)


@pytest.mark.parametrize("f", [_Quartic(2.0), functools.partial(_power_sum, a=4.0)], ids=["object", "partial"])
def test_hessians_and_third_derivatives_of_callable_objects_and_partials(f):
    # (their Hessian was refused: "nested ad.gradient of <object> is not supported")
    x = np.array([0.3, -1.2, 0.8, 0.5])
    c = f.scale if isinstance(f, _Quartic) else 1.0
    np.testing.assert_allclose(ad.hessian(f)(x), np.diag(12 * c * x ** 2), rtol=1e-12)
    np.testing.assert_allclose(ad.jacobian(ad.grad(f))(x), np.diag(12 * c * x ** 2), rtol=1e-12)
    third = _nth(lambda s: f(np.array([s])), 3)(0.5)
    assert third == pytest.approx(24 * c * 0.5)
