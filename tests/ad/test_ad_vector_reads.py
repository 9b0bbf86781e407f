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
