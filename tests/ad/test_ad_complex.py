"""Complex numbers in Zygote's convention (the gradient of a real loss in z = x + iy is dL/dx + i dL/dy):
every rule against central differences on the real and imaginary parts at random points, real inputs
mixed with complex values, forward mode, and the Cauchy-Riemann relation through ``ad.wirtinger``."""
import cmath

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorlang import ad

H = 1e-6


def _fd(L, z):
    """dL/dx + i dL/dy by central differences."""
    return (L(z + H) - L(z - H)) / (2 * H) + 1j * (L(z + 1j * H) - L(z - 1j * H)) / (2 * H)


LOSSES = {
    "abs": lambda z: abs(z * z + 1),
    "abs2": lambda z: (z * np.conj(z)).real,
    "real": lambda z: np.real(np.exp(z) * z),
    "imag": lambda z: np.imag(np.log(z) / (1 + z)),
    "angle": lambda z: np.angle(z) * abs(z + 1j),
    "conj": lambda z: np.real(np.conj(z) * (2 - 1j) * z * z),
    "cmath": lambda z: abs(cmath.sin(z) + cmath.exp(z) - cmath.sqrt(z)),
    "attributes": lambda z: z.real * z.imag + abs(z) ** 2,
    "methods": lambda z: (z.conjugate() * z * 3).real - (z - 2j).imag ** 2,
    "division": lambda z: abs(1 / (z + 0.5) + z / (z + 2)),
}

# the right half-plane, away from the branch cuts of log, sqrt and angle
points = st.builds(complex, st.floats(0.3, 2.0), st.floats(-2.0, 2.0))


@pytest.mark.parametrize("name", sorted(LOSSES))
@settings(max_examples=15, deadline=None)
@given(z=points)
def test_rules_follow_the_convention(name, z):
    L = LOSSES[name]
    g = ad.gradient(L, z)[0]
    assert isinstance(g, (complex, np.complexfloating))
    assert abs(g - _fd(L, z)) <= 1e-5 * (1 + abs(g)), (name, z)


def test_arrays_products_and_reductions():
    rng = np.random.default_rng(3)
    z = rng.standard_normal(3) + 1j * rng.standard_normal(3)
    w = rng.standard_normal(3) + 1j * rng.standard_normal(3)

    def L(z):
        return np.sum(np.abs(np.exp(z) * z) ** 2) + np.real(np.sum(z * w) + z @ w + np.dot(z, z))
    g = ad.gradient(L, z)[0]
    for k in range(3):
        e = np.eye(3)[k]
        assert abs(g[k] - _fd(lambda t: L(z + (t - z[k]) * e), z[k])) < 1e-5


def test_real_inputs_mixed_with_complex_values_get_real_gradients():
    def L(x, y):
        return abs(x * (1 + 2j) + 0.5j * y) ** 2 + np.real(np.exp(1j * x))

    gx, gy = ad.gradient(L, 1.5, -0.3)
    assert np.isreal(gx) and np.isreal(gy)
    assert gx == pytest.approx((L(1.5 + H, -0.3) - L(1.5 - H, -0.3)) / (2 * H), rel=1e-6)
    assert gy == pytest.approx((L(1.5, -0.3 + H) - L(1.5, -0.3 - H)) / (2 * H), rel=1e-6)

    def La(x):
        return np.sum(np.abs(x * np.exp(1j * x)) ** 2 + np.real(x * (2 - 1j)))
    x = np.array([0.2, -1.0])
    g = ad.gradient(La, x)[0]                   # La = sum(x^2 + 2x)
    assert g.dtype.kind == "f" and np.allclose(g, 2 * x + 2)


HOLOMORPHIC = {
    "exp": (lambda z: np.exp(z), lambda z: np.exp(z)),
    "cube": (lambda z: z ** 3 - 2 * z, lambda z: 3 * z ** 2 - 2),
    "sin": (lambda z: cmath.sin(z), lambda z: cmath.cos(z)),
    "log": (lambda z: np.log(z) * z, lambda z: np.log(z) + 1),
    "quotient": (lambda z: (z + 1) / (z - 2), lambda z: -3 / (z - 2) ** 2),
}


@pytest.mark.parametrize("name", sorted(HOLOMORPHIC))
@settings(max_examples=10, deadline=None)
@given(z=points)
def test_cauchy_riemann_and_the_gradient_of_the_real_part(name, z):
    f, df = HOLOMORPHIC[name]
    dz, dzbar = ad.wirtinger(f, z)
    assert abs(dzbar) <= 1e-9 * (1 + abs(dz))               # Cauchy-Riemann
    assert abs(dz - df(z)) <= 1e-9 * (1 + abs(dz))
    # forward mode is the complex derivative, reverse mode its conjugate (Zygote's convention)
    assert abs(ad.jvp(f, (z,), (1j,))[1] - 1j * df(z)) <= 1e-9 * (1 + abs(dz))
    g = ad.gradient(lambda z: np.real(f(z)), z)[0]
    assert abs(g - np.conj(df(z))) <= 1e-9 * (1 + abs(g))


def test_wirtinger_of_non_holomorphic_functions():
    z = 0.4 - 1.1j
    dz, dzbar = ad.wirtinger(lambda z: z * np.conj(z), z)   # |z|^2: d/dz = conj(z), d/dconj(z) = z
    assert np.isclose(dz, np.conj(z)) and np.isclose(dzbar, z)
    dz, dzbar = ad.wirtinger(np.conj, z)
    assert np.isclose(dz, 0) and np.isclose(dzbar, 1)


def test_hessian_through_complex_values():
    # |exp(ix) (x + i)|^2 = x^2 + 1 for real x: the second derivative is 2 (forward over reverse of complex values)
    got, = ad.hvp(lambda x: abs(np.exp(1j * x) * (x + 1j)) ** 2, (0.5,), (1.0,))
    assert np.isclose(got, 2.0, rtol=1e-12) and not isinstance(got, complex)
