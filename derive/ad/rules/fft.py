"""``numpy.fft``: ``fft``, ``ifft``, ``fft2``, ``ifft2``, ``fftn``, ``ifftn``, ``rfft`` and ``irfft``, with
their ``n``/``s``, ``axis``/``axes`` and ``norm`` arguments, in reverse and forward mode.

Every transform is linear, so its forward rule is the transform of the tangent, and its pullback is its
adjoint in the complex convention of ``rules.complexes`` (the adjoint for ``<a, b> = Re(conj(a) b)``, the
gradient of a real argument its real part): the adjoint of ``fft`` with normalisation ``norm`` is ``ifft``
with the dual normalisation (``backward`` and ``forward`` swapped, ``ortho`` its own), and the other way
round; a length changed by ``n`` or ``s`` (the input cropped or padded with zeros) is changed back.
``rfft`` is ``fft`` of a real input keeping the first ``n // 2 + 1`` entries: its pullback pads the
cotangent with zeros and takes the real part of ``ifft``.  ``irfft`` reads the first ``n // 2 + 1`` entries
of its input, drops the imaginary part of the first (and, for an even ``n``, of the last), and mirrors the
others: its pullback is ``rfft`` of the cotangent with the mirrored entries doubled and the imaginary
parts dropped zeroed.  The pullbacks are written with these transforms, so that they are differentiated
in turn at second order."""
from __future__ import annotations

import numpy as np

from ....errors import UnsupportedError
from ..runtime import NONDIFF, RULES, is_complex
from ..tangent import JVP_RULES
from .implemented import implemented_by

_DUAL = {None: "forward", "backward": "forward", "forward": "backward", "ortho": "ortho"}


def dual(norm):
    """The normalisation of the adjoint transform."""
    return _DUAL[norm]


def check_real_input(name, a):
    """Refuse a complex input of ``rfft`` (NumPy drops its imaginary part)."""
    if np.iscomplexobj(a):
        raise UnsupportedError(f"tensorlang.ad differentiates np.fft.{name} of a real array, not a complex one")


def transform_axes(a, s, axes):
    """The axes a multidimensional transform runs over (all of them, or the last ``len(s)``, by default)."""
    if axes is not None:
        return tuple(axes)
    if s is not None:
        return tuple(range(-len(s), 0))
    return tuple(range(np.ndim(a)))


def resized(g, m, axis):
    """``g`` cropped or padded with zeros to length ``m`` along ``axis`` (the adjoint of the transform's
    own change of length from ``m``)."""
    k = np.shape(g)[axis]
    if k == m:
        return g
    moved = np.moveaxis(g, axis, 0)
    if k > m:
        return np.moveaxis(moved[:m], 0, axis)
    widths = [(0, 0)] * np.ndim(g)
    widths[0] = (0, m - k)
    return np.moveaxis(np.pad(moved, widths), 0, axis)


def _real_if(g, a):
    """The gradient of argument ``a``: the real part of ``g`` where ``a`` is real."""
    if is_complex(a):
        return g
    return np.real(g)


def _one(transform, adjoint):
    """The rule of a one-dimensional transform (``fft``, ``ifft``): the gradient is the adjoint transform
    along the same axis, cropped or padded back to the argument's length."""
    def rule(a, n=None, axis=-1, norm=None):
        y = transform(a, n, axis, norm)
        m = np.shape(a)[axis]

        def back(dy):
            return _real_if(resized(adjoint(dy, None, axis, dual(norm)), m, axis), a), None, None, None
        return y, back
    return rule


_fft = _one(np.fft.fft, np.fft.ifft)
_ifft = _one(np.fft.ifft, np.fft.fft)


def _nd(transform, adjoint):
    """The rule of an n-dimensional transform (``fftn``, ``ifftn``): the gradient is the adjoint transform
    over the same axes, cropped or padded back to the argument's shape."""
    def rule(a, s=None, axes=None, norm=None):
        y = transform(a, s, axes, norm)
        over = transform_axes(a, s, axes)
        shape = np.shape(a)

        def back(dy):
            g = adjoint(dy, None, over, dual(norm))
            for ax in over:
                g = resized(g, shape[ax], ax)
            return _real_if(g, a), None, None, None
        return y, back
    return rule


_fftn = _nd(np.fft.fftn, np.fft.ifftn)
_ifftn = _nd(np.fft.ifftn, np.fft.fftn)


def _fft2(a, s=None, axes=(-2, -1), norm=None):
    return _fftn(a, s, axes, norm)


def _ifft2(a, s=None, axes=(-2, -1), norm=None):
    return _ifftn(a, s, axes, norm)


def _rfft(a, n=None, axis=-1, norm=None):
    check_real_input("rfft", a)
    y = np.fft.rfft(a, n, axis, norm)
    m = np.shape(a)[axis]
    full = m if n is None else n

    def back(dy):
        g = np.real(np.fft.ifft(resized(dy, full, axis), None, axis, dual(norm)))
        return resized(g, m, axis), None, None, None
    return y, back


def mirrored(n, axis, ndim):
    """For ``irfft`` of output length ``n``: the weight of each of the ``n // 2 + 1`` entries it reads (2 for
    an entry that stands for its mirror too, 1 for the first and, for an even ``n``, the last) and where
    the imaginary part is dropped (1 there, else 0), shaped to broadcast along ``axis``."""
    k = n // 2 + 1
    j = np.arange(k)
    dropped = (j == 0) | (2 * j == n)
    shape = [1] * ndim
    shape[axis] = k
    return np.where(dropped, 1.0, 2.0).reshape(shape), dropped.astype(float).reshape(shape)


def _irfft(a, n=None, axis=-1, norm=None):
    y = np.fft.irfft(a, n, axis, norm)
    m = np.shape(a)[axis]
    out = np.shape(y)[axis]
    weight, dropped = mirrored(out, axis, np.ndim(y))

    def back(dy):
        z = np.fft.rfft(dy, None, axis, dual(norm))
        g = weight * z - 1j * (dropped * np.imag(z))
        return _real_if(resized(g, m, axis), a), None, None, None
    return y, back


def _linear_jvp(f):
    """The forward rule of linear transform ``f``: the transform of the tangent (of the array argument;
    the others are lengths, axes and the normalisation)."""
    def jvp(args, ts, **kw):
        a, *rest = args
        y = f(a, *rest, **kw)
        if ts[0] is None:
            return y, None
        if f is np.fft.rfft:
            check_real_input("rfft", a)
        return y, f(ts[0], *rest, **kw)
    return jvp


_RULES = {np.fft.fft: _fft, np.fft.ifft: _ifft, np.fft.fftn: _fftn, np.fft.ifftn: _ifftn, np.fft.fft2: _fft2,
          np.fft.ifft2: _ifft2, np.fft.rfft: _rfft, np.fft.irfft: _irfft}
RULES.update(_RULES)
JVP_RULES.update({f: _linear_jvp(f) for f in _RULES})
NONDIFF.update({dual, check_real_input, transform_axes, mirrored})


# -- the multidimensional real transforms, as code: rfft along the last axis then fft along the others, and back
def real_transform_args(a, s, axes, inverse):
    """The lengths and axes of ``rfftn``/``irfftn`` (NumPy's defaults: the last ``len(s)`` axes, or all; for
    the inverse, ``2 (m - 1)`` along the last axis)."""
    shape = np.shape(a)
    axes = transform_axes(a, s, axes)
    if s is None:
        s = [shape[ax] for ax in axes]
        if inverse:
            s[-1] = (shape[axes[-1]] - 1) * 2
    return tuple(s), axes


def _rfftn(a, s=None, axes=None, norm=None, out=None):
    lengths, over = real_transform_args(a, s, axes, False)
    y = np.fft.rfft(a, lengths[-1], over[-1], norm)
    for k in range(len(over) - 1):
        y = np.fft.fft(y, lengths[k], over[k], norm)
    return y


def _irfftn(a, s=None, axes=None, norm=None, out=None):
    lengths, over = real_transform_args(a, s, axes, True)
    y = a
    for k in range(len(over) - 1):
        y = np.fft.ifft(y, lengths[k], over[k], norm)
    return np.fft.irfft(y, lengths[-1], over[-1], norm)


def _rfft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    return _rfftn(a, s, axes, norm)


def _irfft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    return _irfftn(a, s, axes, norm)


NONDIFF.add(real_transform_args)
for _f, _impl in ((np.fft.rfftn, _rfftn), (np.fft.irfftn, _irfftn), (np.fft.rfft2, _rfft2),
                  (np.fft.irfft2, _irfft2)):
    implemented_by(_f, _impl)
