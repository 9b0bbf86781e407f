"""More ``numpy.linalg`` and ``scipy.linalg.expm`` (``derive/ad/rules/linalg_more.py``) against central
differences of NumPy's and SciPy's own functions, in reverse, forward and second order (``all_modes``), and
their refusals by name where a point is not differentiable."""
import numpy as np
import pytest
import scipy.linalg as sl

from all_modes import check_modes   # tests/ad is on the path (rootdir conftest)
from tensorlang import ad
from tensorlang.errors import UnsupportedError

RNG = np.random.default_rng(11)
A = RNG.standard_normal((3, 3))
TALL = RNG.standard_normal((4, 3))
STACK = RNG.standard_normal((2, 3, 3))
B = RNG.standard_normal(4)
B2 = RNG.standard_normal((4, 2))
V = RNG.standard_normal(5)
ROTATING = np.array([[0.5, -2.0, 0.3], [1.5, 0.2, -0.4], [0.1, 0.7, -1.0]])   # a complex pair of eigenvalues


def _w(y):
    return (1 + 0.1 * np.arange(np.size(y))).reshape(np.shape(y))


CASES = {
    # qr: Q and R each, a square and a tall matrix, mode='r'
    "qr-tall": (lambda a: np.sum(np.linalg.qr(a)[0] * _w(TALL)) + np.sum(np.linalg.qr(a)[1] ** 2), [TALL]),
    "qr-square-Q": (lambda a: np.sum(np.sin(np.linalg.qr(a).Q)), [A]),
    "qr-complete": (lambda a: np.sum(np.linalg.qr(a, "complete")[1] * _w(A)), [A]),
    "qr-r": (lambda a: np.sum(np.linalg.qr(a, mode="r") ** 3), [TALL]),
    "qr-stacked": (lambda a: np.sum(np.linalg.qr(a)[0][..., 0] * np.linalg.qr(a)[1][..., -1]), [STACK]),
    # lstsq: the solution, the residuals, both arguments, one and several right-hand sides
    "lstsq": (lambda a, b: np.sum(np.linalg.lstsq(a, b, rcond=None)[0] * np.arange(1.0, 4.0)), [TALL, B]),
    "lstsq-residuals": (lambda a, b: np.sum(np.linalg.lstsq(a, b)[1]), [TALL, B2]),
    "lstsq-square": (lambda a, b: np.sum(np.linalg.lstsq(a, b)[0] ** 2), [A, B[:3]]),
    "lstsq-singular-values": (lambda a: np.sum(np.linalg.lstsq(a, B)[3] * np.arange(1.0, 4.0)), [TALL]),
    # eig/eigvals of real matrices: real and complex eigenvalues, eigenvector losses as NumPy normalises them
    "eigvals-real": (lambda a: np.sum(np.real(np.linalg.eigvals(a)) ** 2), [A]),
    "eigvals-complex": (lambda a: np.sum(np.abs(np.linalg.eigvals(a)) ** 2 * np.arange(1.0, 4.0)), [ROTATING]),
    "eigvals-imag": (lambda a: np.sum(np.imag(np.linalg.eigvals(a)) ** 2), [ROTATING]),
    "eig-vectors": (lambda a: np.sum(np.abs(np.linalg.eig(a)[1][0]) ** 2 * np.arange(1.0, 4.0)), [ROTATING]),
    "eig-vectors-real-part": (lambda a: np.sum(np.real(np.linalg.eig(a)[1]) * _w(a)), [ROTATING]),
    "eig-vectors-imag-part": (lambda a: np.sum(np.imag(np.linalg.eig(a).eigenvectors) * _w(a)), [ROTATING]),
    "eig-real-matrix": (lambda a: np.sum(np.real(np.linalg.eig(a)[1]) * _w(a)) + np.sum(np.real(np.linalg.eig(a)[0])),
                        [A + A.T + np.diag([0.0, 1.0, 3.0])]),
    # norms, cond
    "norm-1": (lambda a: np.linalg.norm(a, 1), [A]),
    "norm-minus-1": (lambda a: np.linalg.norm(a, -1), [A]),
    "norm-2": (lambda a: np.linalg.norm(a, 2), [A]),
    "norm-minus-2": (lambda a: np.linalg.norm(a, -2), [A]),
    "norm-inf": (lambda a: np.linalg.norm(a, np.inf), [A]),
    "norm-minus-inf": (lambda a: np.linalg.norm(a, -np.inf), [A]),
    "norm-nuc": (lambda a: np.linalg.norm(a, "nuc"), [TALL]),
    "norm-nuc-axes": (lambda a: np.sum(np.linalg.norm(a, "nuc", axis=(2, 1)) * np.arange(1.0, 3.0)), [STACK]),
    "norm-2-keepdims": (lambda a: np.sum(np.linalg.norm(a, 2, axis=(1, 2), keepdims=True) ** 2), [STACK]),
    "norm-fro-keepdims": (lambda a: np.sum(np.linalg.norm(a, keepdims=True) * a), [A]),
    "vector-norm-inf": (lambda v: np.linalg.norm(v, np.inf) ** 2, [V]),
    "vector-norm-minus-inf": (lambda v: np.linalg.norm(v, -np.inf), [V]),
    "vector-norm-inf-axis": (lambda a: np.sum(np.linalg.norm(a, np.inf, axis=0)), [A]),
    "cond": (lambda a: np.linalg.cond(a), [A]),
    "cond-minus-2": (lambda a: np.linalg.cond(a, -2), [A]),
    "cond-fro": (lambda a: np.linalg.cond(a, "fro"), [A]),
    "cond-1": (lambda a: np.linalg.cond(a, 1), [A]),
    # products and tensor solves
    "matrix-power-3": (lambda a: np.sum(np.linalg.matrix_power(a, 3) * _w(a)), [A]),
    "matrix-power-minus-2": (lambda a: np.sum(np.linalg.matrix_power(a, -2) * _w(a)), [A]),
    "matrix-power-0-1": (lambda a: np.sum(np.linalg.matrix_power(a, 0) + np.linalg.matrix_power(a, 1) ** 2), [A]),
    "multi-dot": (lambda a, b: np.sum(np.linalg.multi_dot([a, b.T, b, a]) * _w(a)), [A, TALL]),
    "multi-dot-vectors": (lambda a, v: np.linalg.multi_dot([v[:3], a, a, v[2:]]), [A, V]),
    "tensorinv": (lambda t: np.sum(np.linalg.tensorinv(t, ind=1) * np.arange(6.0).reshape(2, 3, 1)),
                  [RNG.standard_normal((6, 2, 3))]),
    "tensorsolve": (lambda t, b: np.sum(np.linalg.tensorsolve(t, b) * np.arange(1.0, 7.0).reshape(3, 2)),
                    [RNG.standard_normal((2, 3, 3, 2)), RNG.standard_normal((2, 3))]),
    "tensorsolve-axes": (lambda t, b: np.sum(np.linalg.tensorsolve(t, b, axes=(0,)) ** 2),
                         [RNG.standard_normal((3, 3)), RNG.standard_normal(3)]),
    # scipy.linalg.expm
    "expm": (lambda a: np.sum(sl.expm(a) * _w(a)), [A]),
    "expm-stacked": (lambda a: np.sum(sl.expm(0.5 * a) ** 2), [STACK]),
}

if hasattr(np.linalg, "matrix_norm"):
    CASES.update({
        "matrix-norm": (lambda a: np.sum(np.linalg.matrix_norm(a)), [STACK]),
        "matrix-norm-nuc-keepdims": (lambda a: np.sum(np.linalg.matrix_norm(a, keepdims=True, ord="nuc") * a),
                                     [A]),
        "matrix-norm-inf": (lambda a: np.linalg.matrix_norm(a, ord=np.inf), [A]),
        "vector-norm": (lambda a: np.linalg.vector_norm(a), [A]),
        "vector-norm-axes": (lambda a: np.sum(np.linalg.vector_norm(a, axis=(0, 2), ord=3) * np.arange(1.0, 4.0)),
                             [STACK]),
        "vector-norm-inf-keepdims": (lambda a: np.sum(np.linalg.vector_norm(a, axis=1, keepdims=True, ord=np.inf)
                                                      * a), [A]),
    })


# reverse over reverse refuses these by name: a view that merges axes (a reshape) of an array not in C order (the
# axes moved) that the second derivative writes to; a slice of its axes is followed (tensorsolve-axes)
NOT_TWICE_REVERSE = {"vector-norm-axes"}


@pytest.mark.parametrize("name", CASES)
def test_every_mode(name):
    f, args = CASES[name]
    check_modes(f, *args, twice_reverse=name not in NOT_TWICE_REVERSE)


@pytest.mark.parametrize("name", sorted(NOT_TWICE_REVERSE & set(CASES)))
def test_reverse_over_reverse_refused_by_name(name):
    f, args = CASES[name]
    g = ad.grad(f, argnums=0)
    with pytest.raises(UnsupportedError, match="not in C order"):
        if len(args) == 1:
            ad.grad(lambda x: np.sum(g(x)))(*args)
        else:
            ad.grad(lambda x, y: np.sum(g(x, y)))(*args)


def test_expm_of_a_complex_matrix():
    z = A + 1j * A[::-1]
    check_modes(lambda a: np.sum(np.abs(sl.expm(a)) ** 2), z, second=False)


def test_eig_tangents_of_values_and_vectors():
    t = RNG.standard_normal((3, 3))
    h = 1e-6
    (w, v), (dw, dv) = ad.jvp(np.linalg.eig, (ROTATING,), (t,))
    w1, v1 = np.linalg.eig(ROTATING + h * t)
    w0, v0 = np.linalg.eig(ROTATING - h * t)
    np.testing.assert_allclose(dw, (w1 - w0) / (2 * h), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(dv, (v1 - v0) / (2 * h), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("f, a, match", [
    (lambda a: np.sum(np.linalg.qr(a)[0]), np.array([[1.0, 2.0], [2.0, 4.0], [0.0, 0.0]]), "rank-deficient"),
    (lambda a: np.sum(np.linalg.qr(a)[1]), np.ones((2, 3)), "no more columns than rows"),
    (lambda a: np.sum(np.linalg.qr(a, "complete")[0]), np.ones((3, 2)), "not square"),
    (lambda a: np.sum(np.linalg.lstsq(a, np.ones(3))[0]), np.array([[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]]),
     "rank-deficient"),
    (lambda a: np.sum(np.abs(np.linalg.eigvals(a))), np.array([[2.0, 1.0], [0.0, 2.0]]), "two eigenvalues are equal"),
    (lambda a: np.sum(np.real(np.linalg.eig(a)[1])), np.eye(3), "two eigenvalues are equal"),
    (lambda a: np.linalg.norm(a, 2), np.eye(3), "singular value"),
    (lambda a: np.linalg.norm(a, "nuc"), np.array([[1.0, 2.0], [2.0, 4.0]]), "singular value"),
    (lambda a: np.linalg.cond(a), np.diag([2.0, 2.0, 1.0]), "singular value"),
])
def test_refused_by_name_where_not_differentiable(f, a, match):
    with pytest.raises(UnsupportedError, match=match):
        ad.grad(f)(a)
    with pytest.raises(UnsupportedError, match=match):
        ad.jvp(f, (a,), (np.ones_like(a),))


def test_complex_eig_input_is_refused():
    with pytest.raises(UnsupportedError, match="real matrices"):
        ad.grad(lambda a: np.sum(np.abs(np.linalg.eigvals(a))))(A + 1j * A)
