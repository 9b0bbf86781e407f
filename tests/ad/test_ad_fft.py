"""``numpy.fft`` rules (``derive/ad/rules/fft.py``) against central differences: real losses of the complex
transforms as a user writes them (``abs(...)**2``, ``real``, ``imag``), with the ``n``/``s``, ``axis``/``axes`` and
``norm`` arguments, real and complex inputs, in reverse, forward and second order (``all_modes``)."""
import numpy as np
import pytest

from all_modes import check_modes   # tests/ad is on the path (rootdir conftest)
from tensorlang import ad
from tensorlang.errors import UnsupportedError

RNG = np.random.default_rng(3)
V = RNG.standard_normal(6)
V5 = RNG.standard_normal(5)
M = RNG.standard_normal((3, 4))
T = RNG.standard_normal((2, 3, 2))
W = np.arange(1.0, 9.0)


def _w(y):
    """Weights that differ between entries, in the shape of ``y``."""
    return (1 + 0.1 * np.arange(np.size(y))).reshape(np.shape(y))


CASES = {
    "fft-power": (lambda x: np.sum(np.abs(np.fft.fft(x)) ** 2 * _w(x)), [V]),
    "fft-real": (lambda x: np.sum(np.real(np.fft.fft(x)) * _w(x)), [V]),
    "fft-imag-n-pad": (lambda x: np.sum(np.imag(np.fft.fft(x, n=8)) * W), [V5]),
    "fft-n-crop-ortho": (lambda x: np.sum(np.abs(np.fft.fft(x, 4, norm="ortho")) ** 2 * W[:4]), [V]),
    "fft-axis0-forward": (lambda x: np.sum(np.real(np.fft.fft(x, axis=0, norm="forward")) ** 2 * _w(x)), [M]),
    "ifft": (lambda x: np.sum(np.abs(np.fft.ifft(x)) ** 3 * _w(x)), [V]),
    "ifft-n-axis": (lambda x: np.sum(np.imag(np.fft.ifft(x, 6, axis=0)) * np.arange(6.0)[:, None]), [M]),
    "rfft": (lambda x: np.sum(np.abs(np.fft.rfft(x)) ** 2 * W[:4]), [V]),
    "rfft-odd-n": (lambda x: np.sum(np.real(np.fft.rfft(x, n=7, norm="ortho")) * W[:4]), [V]),
    "rfft-axis": (lambda x: np.sum(np.imag(np.fft.rfft(x, axis=0)) ** 2), [M]),
    "irfft": (lambda x: np.sum(np.fft.irfft(x) * np.arange(1.0, 11.0) ** 0.5), [V]),
    "irfft-odd-n": (lambda x: np.sum(np.fft.irfft(x, n=7) ** 2 * W[:7]), [V5]),
    "irfft-short-n-forward": (lambda x: np.sum(np.sin(np.fft.irfft(x, n=4, norm="forward"))), [V]),
    "irfft-of-rfft": (lambda x: np.sum(np.fft.irfft(np.fft.rfft(x) * W[:4]) ** 2), [V]),
    "fft2": (lambda x: np.sum(np.real(np.fft.fft2(x)) * _w(x)), [M]),
    "fft2-s": (lambda x: np.sum(np.abs(np.fft.fft2(x, s=(2, 5))) ** 2), [M]),
    "ifft2-ortho": (lambda x: np.sum(np.imag(np.fft.ifft2(x, norm="ortho")) * _w(x)), [M]),
    "fftn": (lambda x: np.sum(np.abs(np.fft.fftn(x)) ** 2 * _w(x)), [T]),
    "fftn-axes": (lambda x: np.sum(np.real(np.fft.fftn(x, axes=(0, 2))) ** 2 * _w(x)), [T]),
    "fftn-s-axes": (lambda x: np.sum(np.imag(np.fft.fftn(x, s=(3, 1), axes=(2, 0)))), [T]),
    "ifftn": (lambda x: np.sum(np.real(np.fft.ifftn(x)) ** 2 * _w(x)), [T]),
    "fft-then-ifft": (lambda x: np.sum(np.real(np.fft.ifft(np.fft.fft(x) * np.exp(-W[:6]))) ** 2), [V]),
    "spectrum-and-signal": (lambda x, y: np.sum(np.abs(np.fft.fft(x * y)) ** 2), [V, V[::-1].copy()]),
}


@pytest.mark.parametrize("name", CASES)
def test_every_mode(name):
    f, args = CASES[name]
    check_modes(f, *args)


Z = V[:4] + 1j * V[2:]
ZM = M + 1j * M[::-1]

COMPLEX = {
    "fft": lambda z: np.sum(np.abs(np.fft.fft(z)) ** 2 * W[:4]),
    "ifft-n": lambda z: np.sum(np.real(np.fft.ifft(z, 6)) * W[:6]),
    "fft2": lambda z: np.sum(np.imag(np.fft.fft2(z)) * _w(z)),
    "irfft": lambda z: np.sum(np.fft.irfft(z) * W[:6]),   # the imaginary parts dropped have no gradient
    "irfft-odd": lambda z: np.sum(np.fft.irfft(z, 7) ** 2),
}


@pytest.mark.parametrize("name", COMPLEX)
def test_complex_input(name):
    z = ZM if name == "fft2" else Z
    check_modes(COMPLEX[name], z, second=False)


def test_irfft_drops_the_imaginary_part_of_the_first_and_last_entries():
    g = ad.grad(lambda z: np.sum(np.fft.irfft(z) * W[:6]))(Z)
    assert g[0].imag == 0 and g[-1].imag == 0 and np.all(g[1:-1].imag != 0)


def test_power_spectrum_gradient_is_parseval():
    # sum |fft(x)|^2 = n sum x^2, so the gradient is 2 n x and the Hessian 2 n I
    x = RNG.standard_normal(7)
    np.testing.assert_allclose(ad.grad(lambda x: np.sum(np.abs(np.fft.fft(x)) ** 2))(x), 14 * x)
    np.testing.assert_allclose(ad.hessian(lambda x: np.sum(np.abs(np.fft.fft(x)) ** 2))(x), 14 * np.eye(7),
                               atol=1e-12)


def test_complex_tangent_of_a_transform():
    t = RNG.standard_normal(6)
    y, ty = ad.jvp(np.fft.fft, (V,), (t,))
    np.testing.assert_allclose(ty, np.fft.fft(t))
    y, ty = ad.jvp(lambda z: np.fft.irfft(z, 10), (np.fft.rfft(V),), (np.fft.rfft(t),))
    np.testing.assert_allclose(ty, np.fft.irfft(np.fft.rfft(t), 10))


def test_rfft_of_a_complex_array_is_refused():
    with pytest.raises(UnsupportedError, match="rfft of a real array"):
        ad.grad(lambda z: np.sum(np.abs(np.fft.rfft(z))))(Z)
