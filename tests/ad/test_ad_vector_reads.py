"""Entries of vector arguments read at int indices (``x[i]`` with ``x`` a 1-D float array) are numbers in
a specialisation that checks that assumption when it is entered: the loops over them take the inlined
scalar rules, and the gradients of the entries are collected in C arrays.  Checked against central
differences, and against the same functions called with arguments that break the assumption (2-D, int,
float32 arrays, bool and int-parameter indices), which take the general specialisation.  ``for v in x``
over an array indexes it the same way, and module globals that are vectors (the data of a fit) are
assumed to stay vectors."""
import numpy as np
import pytest

from tensorlang import ad
from tensorlang.errors import TensorLangError


def sum_of_squares(x):
    s = 0.0
    for i in range(len(x)):
        s = s + x[i] * x[i]
    return s


def neighbours(x, w):
    s = 0.0
    n = len(x)
    for i in range(1, n):
        s += w[i - 1] * (x[i] - x[i - 1]) ** 2 + np.sin(x[-i])
    return s + x[0] * np.sum(x) + x[n - 1]


def compares(x):
    s = 0.0
    for i in range(len(x)):
        if x[i] > 0:          # read for the comparison only: a zero gradient
            s = s + 2.0 * x[(i + 1) % len(x)]
    return s


def complex_values(x):
    s = 0.0
    for i in range(len(x)):
        s = s + abs(x[i] * (1 + 2j)) ** 2
    return s


def with_index_argument(x, k):
    s = 0.0
    for _ in range(3):
        s = s + np.sum(x[k] * x[k])
    return s


def for_each(x):
    s = 0.0
    for v in x:
        s = s + np.sin(v) * v
    return np.sum(s)


def comprehension(x):
    return np.sum(sum([v * v for v in x]))


T = np.linspace(0, 1, 7)
Y = np.sin(T)


def fit(w):
    s = 0.0
    for i in range(len(T)):
        r = w[0] * T[i] + w[1] * T[i] * T[i] - Y[i]
        s = s + r * r
    return s


def rows(x):
    s = 0.0
    for i in range(len(x)):
        s = s + np.sum(x[i] * x[i])
    return s


@pytest.mark.parametrize("f, args", [
    (sum_of_squares, (np.linspace(-1, 2, 7),)),
    (neighbours, (np.linspace(-1, 2, 6), np.linspace(0.5, 1.5, 5))),
    (compares, (np.array([0.3, -1.2, 0.7, 2.0, -0.1]),)),
    (complex_values, (np.array([0.3, -1.2, 0.7]),)),
    (with_index_argument, (np.array([0.3, -1.2, 0.7]), 1)),
    (with_index_argument, (np.array([0.3, -1.2, 0.7]), -1)),
    (for_each, (np.linspace(-1, 2, 5),)),
    (for_each, (np.arange(6.0).reshape(3, 2) / 5,)),
    (comprehension, (np.linspace(-1, 2, 5),)),
    (comprehension, (np.arange(6.0).reshape(3, 2) / 5,)),
    (rows, (np.arange(6.0).reshape(3, 2) / 5,)),
    (rows, (np.linspace(-1, 2, 4),)),
])
def test_gradients_against_central_differences(f, args, check):
    check(f, *args)


def test_arguments_that_are_not_float_vectors_take_the_general_specialisation(check):
    check(rows, np.linspace(-1, 2, 5))                     # the vector specialisation first
    check(rows, np.linspace(-1, 2, 6).reshape(3, 2))       # x[i] is a row: the fallback
    check(rows, np.linspace(-1, 2, 5))
    g, = ad.gradient(sum_of_squares, np.arange(4))            # an int array: entries are ints
    np.testing.assert_allclose(g, 2 * np.arange(4))
    x32 = np.linspace(-1, 2, 5, dtype=np.float32)
    g, = ad.gradient(sum_of_squares, x32)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, 2 * x32, rtol=1e-6)
    check(sum_of_squares, np.linspace(-1, 2, 5))           # and back


def test_globals_read_at_int_indices_are_vectors_while_they_are(check, monkeypatch):
    w = np.array([0.5, -0.2])
    check(fit, w)
    src = str(ad.code_adjoint(fit, w))
    assert "T.ndim == 1 and T.dtype.kind == 'f'" in src and "_ad_J" not in src
    monkeypatch.setitem(globals(), "T", np.arange(7))        # an int array now: the general specialisation
    check(fit, w)
    monkeypatch.setitem(globals(), "T", [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5])   # a list
    check(fit, w)


def test_a_bool_index_is_not_an_entry():
    x = np.array([0.5, -1.5, 2.0])
    g, _ = ad.gradient(with_index_argument, x, True)   # x[True] is an array of shape (1, 3)
    np.testing.assert_allclose(g, 6 * x)


def test_pullback_called_twice_and_grad_of_grad():
    x = np.linspace(-1, 2, 5)
    y, back = ad.pullback(sum_of_squares, x)
    np.testing.assert_allclose(back(1.0)[0], 2 * x)
    np.testing.assert_allclose(back(3.0)[0], 6 * x)
    np.testing.assert_allclose(ad.hessian(sum_of_squares)(x), 2 * np.eye(5))
    np.testing.assert_allclose(ad.gradient(lambda x: ad.gradient(sum_of_squares, x)[0][1], x)[0], [0, 2, 0, 0, 0])


def test_the_specialisation_checks_its_assumption_and_reads_entries_again():
    src = str(ad.code_adjoint(sum_of_squares, np.ones(3)))
    assert "ndim == 1" in src and "_i1.append" in src
    assert "_ad_J" not in src and "_B" not in src     # no generic rule, no pullback closure
    src = str(ad.code_adjoint(for_each, np.ones(3)))
    assert "as_sequence" not in src and "_i1.append" in src   # for v in x: x indexed as it is


# -- arrays the function makes, and indices computed from int arguments ----------------------------------
def of_tanh(x):
    y = np.tanh(x)
    s = 0.0
    for i in range(len(y)):
        s = s + y[i] * y[i]
    return s


def of_expressions(x, w):
    y = w * x + 1.0                 # arrays made before the loop by arithmetic and by rules
    d = x[1:] - x[:-1]
    c = np.cumsum(x)
    s = np.sum(y)
    for i in range(len(d)):
        s = s + d[i] * y[i + 1] + np.sin(c[i]) * y[-1 - i]
    return s


def made_in_the_loop(x):
    s = 0.0
    for t in range(3):
        y = np.exp(x * (t + 1.0))
        s = s + y[t] / y[0] + np.sum(y)
    return s


def softmax_entropy(x):
    p = np.exp(x) / np.sum(np.exp(x))
    s = 0.0
    for i in range(len(p)):
        s = s - p[i] * np.log(p[i])
    return s


def rows_of_made(x):
    y = np.tanh(x)
    s = 0.0
    for i in range(len(y)):
        s = s + np.sum(y[i] * y[i])
    return s


def index_arguments(x, k, n):
    s = x[k] * x[k]
    for i in range(n - 1):
        s = s + (x[i + 1] - x[i]) ** 2 * x[n - 1 - i] + x[min(i + k, n - 1)] * x[abs(i - k)]
    return s


def wraps(x):
    s = 0.0
    for i in range(len(x)):
        s = s + x[i - 1] * x[i] + x[-i - 1]   # x[-1] at i = 0, as NumPy
    return s


def past_the_end(x):
    s = 0.0
    for i in range(len(x)):
        s = s + x[i + 1] * x[i]
    return s


def written(x):
    y = x * 1.0
    s = 0.0
    for i in range(len(y)):
        y[i] = y[i] * y[i]
        s = s + y[i] * y[0]
    return s


def entries_of_rows(x):
    s = 0.0
    for i in range(len(x)):
        s = s + x[i][0] * x[i][-1]
    return s


def int_made(x):
    c = np.cumsum(np.arange(len(x)))    # an int array (checked where it is made: the general code)
    s = 0.0
    for i in range(len(x)):
        s = s + x[i] * c[i]
    return s


def iterate_made(x):
    s = 0.0
    for v in np.sin(x) * x:
        s = s + v * v
    return s


def printing(x):
    print("called")
    y = np.tanh(x)
    s = 0.0
    for i in range(len(y)):
        s = s + np.sum(y[i] * y[i])
    return s


@pytest.mark.parametrize("f, args", [
    (of_tanh, (np.linspace(-1, 2, 7),)),
    (of_expressions, (np.linspace(-1, 2, 6), 0.7)),
    (made_in_the_loop, (np.linspace(-1, 1, 4),)),
    (softmax_entropy, (np.linspace(-1, 2, 5),)),
    (rows_of_made, (np.linspace(-1, 2, 5),)),
    (rows_of_made, (np.linspace(-1, 2, 6).reshape(3, 2),)),   # a row, not an entry: handed over
    (index_arguments, (np.linspace(-1, 2, 6), 2, 6)),
    (index_arguments, (np.linspace(-1, 2, 6), -1, 5)),
    (index_arguments, (np.linspace(-1, 2, 6), np.int64(2), 6)),   # not a Python int: the general code
    (wraps, (np.linspace(-1, 2, 5),)),
    (written, (np.linspace(-1, 2, 5),)),
    (entries_of_rows, (np.linspace(-1, 2, 6).reshape(3, 2),)),
    (int_made, (np.linspace(-1, 2, 5),)),
    (iterate_made, (np.linspace(-1, 2, 5),)),
])
def test_made_arrays_and_computed_indices_against_central_differences(f, args, check):
    check(f, *args)


def test_made_arrays_and_int_arguments_are_checked_and_read_as_numbers():
    x = np.ones(4)
    for f, args, made in [(of_tanh, (x,), 1), (of_expressions, (x, 0.5), 3), (index_arguments, (x, 1, 4), 0)]:
        src = str(ad.code_adjoint(f, *args))
        assert "_ad_J(" not in src and "_ad_addat(" in src, f.__name__   # no generic rule; entries are numbers
        assert src.count("return _ad_fb(") == 3 * made, f.__name__    # each made vector checked, in each of 3 entries
    src = str(ad.code_adjoint(of_tanh, x))
    assert "_v3.ndim == 1 and _v3.dtype.kind == 'f'" in src and "_i3.append" in src
    assert "type(_v2) is" in str(ad.code_adjoint(index_arguments, x, 1, 4))


def test_made_arrays_that_are_not_float_vectors_run_the_general_code(check):
    check(rows_of_made, np.linspace(-1, 2, 5))
    check(rows_of_made, np.linspace(-1, 2, 6).reshape(2, 3))
    x32 = np.linspace(-1, 2, 5, dtype=np.float32)
    g, = ad.gradient(of_tanh, x32)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, 2 * np.tanh(x32) * (1 - np.tanh(x32) ** 2), rtol=1e-5)
    y, back = ad.pullback(of_tanh, np.linspace(-1, 2, 5))
    np.testing.assert_allclose(back(2.0)[0], 2 * ad.gradient(of_tanh, np.linspace(-1, 2, 5))[0])


def test_a_function_with_an_effect_runs_once(capsys, check):
    check(printing, np.linspace(-1, 2, 6).reshape(3, 2))
    capsys.readouterr()
    ad.gradient(printing, np.linspace(-1, 2, 6).reshape(3, 2))
    assert capsys.readouterr().out == "called\n"


def test_indices_out_of_range_raise_as_numpy_does():
    x = np.linspace(-1, 2, 4)
    for f, args in [(past_the_end, (x,)), (index_arguments, (x, 4, 4)), (index_arguments, (x, -5, 4))]:
        with pytest.raises(IndexError) as plain:
            f(*args)
        with pytest.raises(IndexError) as err:
            ad.gradient(f, *args)
        assert str(err.value) == str(plain.value)
    with pytest.raises(TensorLangError, match="shape"):   # x[True] is an array of shape (1, 4): handed over
        ad.gradient(index_arguments, x, True, 4)


@pytest.mark.parametrize("f, rest", [(of_tanh, ()), (made_in_the_loop, ()), (softmax_entropy, ()),
                                     (of_expressions, (0.7,)), (index_arguments, (2, 6))])
def test_second_order_against_central_differences_of_the_gradient(f, rest, fd):
    x = np.linspace(-1, 1.5, 6)
    h = ad.hessian(f)(x, *rest)
    by_fd = np.stack([fd(lambda x, i=i: ad.gradient(f, x, *rest)[0][i], (x,), 0) for i in range(len(x))])
    np.testing.assert_allclose(h, by_fd, rtol=1e-5, atol=1e-6)
