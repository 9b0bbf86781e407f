"""``ad.jacobian(f, sparse=True)`` and ``ad.hessian(f, sparse=True)``: the pattern traced once per shape through
NumPy object arrays, coloured, and filled by one product per colour; checked against central differences of
gradients written by hand and the dense ``ad.jacobian``/``ad.hessian``."""
import math

import numpy as np
import pytest
import scipy.sparse as sp
from oracles import differenced_jacobian

from tensorlang import ad
from tensorlang.errors import UnsupportedError


def energy(u):
    """A 2-D finite-difference energy with a nonlinear potential."""
    dv = u[1:, :] - u[:-1, :]
    dh = u[:, 1:] - u[:, :-1]
    return 0.5 * np.sum(dv * dv) + 0.5 * np.sum(dh * dh) + np.sum(0.25 * u ** 4 - np.sin(u))


def energy_gradient(u):
    """The gradient of ``energy``, by hand."""
    g = u ** 3 - np.cos(u)
    dv, dh = u[1:, :] - u[:-1, :], u[:, 1:] - u[:, :-1]
    g[1:, :] += dv
    g[:-1, :] -= dv
    g[:, 1:] += dh
    g[:, :-1] -= dh
    return g


def test_the_sparse_hessian_of_a_2d_energy_matches_differences_of_its_gradient():
    u = np.random.default_rng(0).normal(size=(6, 7))
    H = ad.hessian(energy, sparse=True)(u)
    assert isinstance(H, sp.csr_array) and H.shape == (42, 42)
    assert H.nnz == 42 + 2 * (5 * 7 + 6 * 6)   # the diagonal and one entry per pair of neighbours
    np.testing.assert_allclose(H.toarray(), differenced_jacobian(energy_gradient, u), atol=1e-6)
    np.testing.assert_allclose(H.toarray(), ad.hessian(energy)(u).reshape(42, 42), atol=1e-12)


def test_the_pattern_is_traced_once_per_shape_and_the_colours_do_not_grow_with_the_grid():
    calls = []

    def counted(u):
        calls.append(u.dtype == object)
        return energy(u)

    hessian = ad.hessian(counted, sparse=True)
    for n in (8, 8, 16):
        u = np.random.default_rng(n).normal(size=(n, n))
        H = hessian(u)
        np.testing.assert_allclose(H @ np.ones(n * n), np.ravel(differenced_jacobian(
            lambda s: energy_gradient(u + s[0]), np.zeros(1))), rtol=1e-6, atol=1e-6)
    assert sum(calls) == 2   # traced at 8 x 8 and at 16 x 16, not at the second 8 x 8 call
    from tensorlang.derive.ad.sparsity import Compressed, hessian_pattern
    for n in (8, 32):
        assert Compressed(hessian_pattern(energy, (np.zeros((n, n)),), 0)).count <= 13


def test_the_sparse_jacobian_of_a_residual_matches_central_differences():
    def residual(x, a):
        return x[1:] * x[:-1] - np.exp(a * x[1:]) + np.tanh(x[:-1]) / (1 + x[1:] ** 2)

    x = np.random.default_rng(1).normal(size=9)
    J = ad.jacobian(residual, sparse=True)(x, 0.3)
    assert isinstance(J, sp.csr_array) and J.shape == (8, 9) and J.nnz == 16
    np.testing.assert_allclose(J.toarray(), differenced_jacobian(lambda y: residual(y, 0.3), x), atol=1e-6)


def test_branches_and_python_floats_are_refused_by_name():
    with pytest.raises(UnsupportedError, match="compares traced values"):
        ad.hessian(lambda x: np.sum(np.maximum(x, 0.0) ** 2), sparse=True)(np.ones(3))
    with pytest.raises(UnsupportedError, match="Python float"):
        ad.hessian(lambda x: math.sin(x[0]) * x[1], sparse=True)(np.ones(2))
    with pytest.raises(UnsupportedError, match="tracing the sparsity pattern"):
        ad.hessian(lambda x: np.linalg.det(np.outer(x, x) + np.eye(2)), sparse=True)(np.ones(2))


def test_the_pattern_goes_through_a_compiled_kernel():
    import tensorlang as tl

    kernel = tl.compile(tl.parse("x : [n]R\ngen(i:n) [0 < i] * x[i] * x[i - 1] + sin(x[i])"))

    def residual(x, a):
        y = kernel(x=x)
        return a * y[1:] - np.exp(y[:-1]) * x[:-1]

    x = np.random.default_rng(2).normal(size=7)
    J = ad.jacobian(residual, sparse=True)(x, 0.7)
    assert J.nnz == 17   # banded: each residual reads the kernel's outputs i and i + 1, each x[i - 1] and x[i]
    np.testing.assert_allclose(J.toarray(), differenced_jacobian(lambda y: residual(y, 0.7), x), atol=1e-6)


def test_through_a_kernel_whose_pattern_depends_on_a_relation_every_entry_is_kept():
    """A pattern traced once holds at every call, whatever relation the call passes: where a kernel's own
    sparse Jacobian depends on a relation's data, each of its outputs is taken to read every entry."""
    import tensorlang as tl

    kernel = tl.compile(tl.parse("E : rel[n, n]\nx : [n]R\ngen(i:n) sum(j:n) [E(i, j)] * x[i] * x[j] * x[j]"))
    rng = np.random.default_rng(4)
    E = rng.random((5, 5)) < 0.4

    def f(x):
        return np.sum(np.sin(kernel(E=E, x=x)))

    x = rng.normal(size=5)
    H = ad.hessian(f, sparse=True)(x)
    assert H.nnz == 25
    dense = differenced_jacobian(lambda y: differenced_jacobian(f, y, 1e-4).ravel(), x, 1e-4)
    np.testing.assert_allclose(H.toarray(), dense, rtol=1e-5, atol=1e-5)
    E[:] = ~E   # another relation of the same shape: the same pattern is still right
    np.testing.assert_allclose(ad.hessian(f, sparse=True)(x).toarray(),
                               differenced_jacobian(lambda y: differenced_jacobian(f, y, 1e-4).ravel(), x, 1e-4),
                               rtol=1e-5, atol=1e-5)
