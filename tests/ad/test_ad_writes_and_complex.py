"""Derivatives that were silently wrong, checked against oracles that share no code with tensorlang.ad
(central differences computed here or in ``all_modes``, closed forms, the Python loop for ``ad.vmap``): an
array method called with ``out=``; an array an object keeps that a call made from it; complex values through rules whose pullback needs
the conjugate of a partial (``prod``, ``einsum``, ``det`` ...); in-place methods and numbers written with
``op=`` under ``ad.vmap``."""
import numpy as np
import pytest
import scipy.special as sc

from tensorlang import ad
from tensorlang.errors import TensorLangError, UnsupportedError
from all_modes import check_modes   # (tests/ad is on the path)

X = np.array([3.0, 0.2, -2.0, 0.7])


# -- an array method with out= --------------------------------------------------------------------------------------
def sum_axis_out(x):
    o = np.empty(2)
    x.reshape(2, 2).sum(axis=1, out=o)
    return np.sum(o ** 2)


def sum_out(x):
    o = np.empty(())
    x.sum(out=o)
    return float(o) ** 2


def cumsum_out(x):
    o = np.empty(4)
    x.cumsum(out=o)
    return np.sum(o ** 2)


def mean_out(x):
    o = np.empty(2)
    x.reshape(2, 2).mean(axis=0, out=o)
    return np.sum(o ** 3)


def dot_out(x):
    o = np.empty(2)
    x.reshape(2, 2).dot(np.array([0.5, -1.5]), out=o)
    return np.sum(np.sin(o))


def clip_into_itself(x):
    y = x * 1.0
    y.clip(-0.5, 0.5, out=y)
    return np.sum(y * x)


def clip_min_into_itself(x):
    y = x * 1.0
    y.clip(min=-0.5, out=y)
    return np.sum(y * x)


@pytest.mark.parametrize("f", [sum_axis_out, sum_out, cumsum_out, mean_out, dot_out, clip_into_itself,
                               clip_min_into_itself])
def test_an_array_method_with_out_writes_its_result_in_every_mode(f):
    check_modes(f, X.copy())
    assert ad.value_and_grad(f)(X.copy())[0] == pytest.approx(f(X.copy()))


def test_reverse_over_reverse_through_an_array_method_with_out():
    v = np.array([0.3, -1.0, 0.5, 2.0])
    np.testing.assert_allclose(ad.grad(lambda x: np.sum(ad.grad(sum_axis_out)(x) * v))(X.copy()),
                               _central(lambda x: np.sum(ad.grad(sum_axis_out)(x) * v), X.copy(), 1e-5), atol=1e-6)


# -- o[k] op= v, o.a op= v: the array the item holds written in place --------------------------------------------------
class Holder:
    def __init__(self, p):
        self.p = p


def through_an_object_a_constructor_made(x):
    a = x[:2] * 1.0
    h = Holder(a)   # (h.p is a: the call's copy of a, on capture, is not what h holds)
    h.p[...] *= np.cos(x[2:])
    return np.sum(a ** 2) + np.sum(h.p)


def test_an_array_an_object_keeps_is_the_one_it_was_made_from():
    x = np.array([0.5, 0.3, -0.7, 1.1])
    f = through_an_object_a_constructor_made
    check_modes(f, x.copy())
    assert ad.value_and_grad(f)(x.copy())[0] == pytest.approx(f(x.copy()))


def test_a_number_in_a_list_written_with_op_equals_is_rebound():
    def f(x):
        s = [x[0], x[1]]
        t = s[0]
        s[0] += x[2]   # (a NumPy scalar: a new one in the list, t keeps x[0])
        return s[0] * t + s[1]
    check_modes(f, X.copy())


# -- complex values: the conjugate of each partial --------------------------------------------------------------------
def _z(x):
    return x[0] + 1j * x[1], x[2] + 1j * x[3]


COMPLEX = {
    "prod": lambda x: np.imag(np.prod(np.array(_z(x)))),
    "prod method": lambda x: np.imag(np.array(_z(x)).prod()),
    "cumprod": lambda x: np.imag(np.cumprod(np.array(_z(x)))[-1]),
    "kron": lambda x: np.imag(np.kron(np.array(_z(x)[:1]), np.array(_z(x)[1:]))[0]),
    "einsum": lambda x: np.imag(np.einsum("i,i->", np.array(_z(x)[:1]), np.array(_z(x)[1:]))),
    "einsum matmul": lambda x: np.real(np.einsum("ij,jk->ik", np.array([[_z(x)[0]]]), np.array([[_z(x)[1]]]))[0, 0]
                                       ** 2),
    "det": lambda x: np.imag(np.linalg.det(np.array([[_z(x)[0], 1.0], [0.5j, _z(x)[1]]]))),
    "cross": lambda x: np.imag(np.cross(np.array([_z(x)[0], 0, 1]), np.array([0.5, _z(x)[1], 0]))[2]),
    "slogdet": lambda x: np.linalg.slogdet(np.array([[_z(x)[0], 0.3], [0.2j, _z(x)[1]]]))[1],
    "logsumexp": lambda x: np.imag(sc.logsumexp(np.array(_z(x)))),
    "logsumexp with b": lambda x: np.real(sc.logsumexp(np.array(_z(x)), b=np.array([0.5, 2.0 + 1j]))),
}


def _central(f, x, h=1e-6):
    return np.array([(f(x + e) - f(x - e)) / (2 * h) for e in np.eye(len(x)) * h])


@pytest.mark.parametrize("name", sorted(COMPLEX))
def test_a_real_loss_of_complex_values_through_a_rule_has_the_conjugate_partials(name):
    f = COMPLEX[name]
    x = np.array([0.5, 0.3, -0.7, 1.1])
    np.testing.assert_allclose(ad.grad(f)(x), _central(f, x), rtol=1e-6, atol=1e-8)


def test_the_sign_of_slogdet_of_a_complex_matrix_is_refused_not_left_out():
    def f(x):
        sign, logdet = np.linalg.slogdet(np.array([[_z(x)[0], 0.3], [0.2j, _z(x)[1]]]))
        return np.real(sign) + logdet
    with pytest.raises(UnsupportedError, match="its sign"):
        ad.grad(f)(np.array([0.5, 0.3, -0.7, 1.1]))


# -- ad.vmap: in-place methods, numbers written with op= ---------------------------------------------------------------
def sort_in_place(x):
    y = x * 1.0
    y.sort()
    return y[0] * 10 + y[2]


def fill_in_place(x):
    y = x * 1.0
    y.fill(2.0)
    return np.sum(y * x)


def partition_in_place(x):
    y = x * 1.0
    y.partition(1)
    return y[0] * 10 + y[1]


def a_sum_rebound(x):
    s = np.sum(x)
    t = s
    s -= 1.0
    return s * t


def an_entry_rebound(x):
    s = x[0]
    t = s
    s *= 3.0
    return s * t + x[1]


@pytest.mark.parametrize("f", [sort_in_place, fill_in_place, a_sum_rebound, an_entry_rebound])
def test_vmap_of_in_place_methods_and_numbers_written_with_op_equals_is_the_loop(f):
    xs = np.array([[3.0, 1.0, 2.0], [0.5, -1.0, 4.0], [0.2, 0.3, -0.4]])
    np.testing.assert_allclose(ad.vmap(f)(xs.copy()), [f(r.copy()) for r in xs])
    np.testing.assert_allclose(ad.vmap(ad.grad(f))(xs.copy()), [_central(f, r.copy()) for r in xs],
                               rtol=1e-6, atol=1e-7)


def test_vmap_of_partition_in_place_is_refused_by_name():
    with pytest.raises(UnsupportedError, match="no batching rule for numpy.partition"):
        ad.vmap(partition_in_place)(np.ones((2, 3)))


def test_vmap_of_a_gradient_through_a_method_with_out_is_the_loop():
    xs = np.array([[3.0, 0.2, -2.0, 0.7], [0.1, -0.3, 0.4, 2.0]])
    np.testing.assert_allclose(ad.vmap(ad.grad(clip_into_itself))(xs.copy()),
                               [_central(clip_into_itself, r.copy()) for r in xs], rtol=1e-6, atol=1e-7)


# -- iterating over a dict in forward mode: its keys have no tangent ---------------------------------------------------
def _forwarded(*args, **kwargs):
    return _target(*args, **kwargs)


def _target(a, c=1.0, d=0.0):
    return a * c + d


def test_a_keyword_forwarder_called_with_different_keywords_at_second_order():
    def f(x):   # x ** 2 + 1.5 + x + x
        return _forwarded(x, c=x, d=1.5) + _forwarded(x, d=x)
    assert ad.hessian(f)(0.7) == pytest.approx(2.0)
    check_modes(f, 0.7)


def test_a_loop_over_a_dict_in_every_mode():
    def f(x):
        d = {"a": x[0] * x[1], "b": np.sin(x[2]), "c": x}
        s = 0.0
        for k in d:
            s = s + np.sum(d[k] ** 2)
        return s
    check_modes(f, X.copy())


# -- a list extended by an array's entries; a gradient of a function of no arguments --------------------------------
def test_a_list_extended_by_the_entries_of_an_array_slice():
    def extended(x):
        items = []
        items.extend(x[:2])
        return items[0] * items[1]

    def added(x):   # (NumPy's + takes precedence over the list's +=: [x0] + x[1:3], two entries)
        items = list(x[:1])
        items += x[1:3]
        return items[0] * items[1] + np.sum(items)

    def added_a_list(x):
        items = list(x[:1])
        items += [x[1], x[2] * 2.0]
        return items[1] * items[2] + items[0]
    for f in (extended, added, added_a_list):
        check_modes(f, np.array([0.31, -0.72, 0.46]))
        assert ad.value_and_grad(f)(np.array([0.31, -0.72, 0.46]))[0] == pytest.approx(f(np.array([0.31, -0.72, 0.46])))


def test_a_gradient_of_a_function_of_no_arguments_names_the_missing_argument():
    with pytest.raises(TensorLangError, match=r"argnums=0 names an argument that the call does not have \(it passed 0\)"):
        ad.grad(lambda: 1.0)()
