"""The functions that ``ad.jacobian`` and ``ad.hessian`` make, differentiated.

Their own code loops over probes, copies and stacks outside the subset the transform takes.  Each carries
``__ad_code__(n)`` (``probed_code``): the same Jacobian for ``n`` positional arguments written in that subset,
one ``gradient`` per entry of the output, which ``api.specialised`` and ``forward.specialised_jvp`` differentiate
in its place (``api.ByCode``) by the rules of nested gradients.  So ``ad.jacobian(ad.jacobian(f))``, ``ad.jvp``
of a Jacobian, and ``ad.grad`` of a loss that calls one are second derivatives of ``f`` like ``ad.hessian``, and
a Hessian differentiated is a third derivative, as far as those rules go.
"""
from __future__ import annotations

import numpy as np

from ...errors import UnsupportedError
from .api import gradient


def probed_code(f, argnums, hessian: bool, n: int):
    """The Jacobian of ``f`` (of its gradient, for ``hessian``) in argument ``argnums`` at ``n`` positional
    arguments, as a function of them in the subset the transform takes; its closure's ``f`` is ``f``, so that
    the gradient of the function made by ``ad.jacobian`` or ``ad.hessian`` is that of ``f`` at field ``f``."""
    made_by = "ad.hessian" if hessian else "ad.jacobian"
    if not isinstance(argnums, int) or not 1 <= n <= len(_PROBED) or not -n <= argnums < n:
        raise UnsupportedError(f"differentiating a function made by {made_by} is supported for an int argnums and "
                               f"1 to {len(_PROBED)} positional arguments, not argnums={argnums!r} with {n}")
    return _PROBED[n - 1](f, argnums % n, _HESSIAN_ENTRY[n - 1] if hessian else _ENTRY[n - 1])


def _probed1(f, i, entry):
    def jacobian_code(a):
        y = entry(f, i, -1)(a)
        rows = []
        for k in range(np.size(y)):
            rows.append(gradient(entry(f, i, k), a)[0])
        return _assembled(rows, y, a)
    return jacobian_code


def _probed2(f, i, entry):
    def jacobian_code(a, b):
        y = entry(f, i, -1)(a, b)
        rows = []
        for k in range(np.size(y)):
            rows.append(gradient(entry(f, i, k), a, b)[i])
        return _assembled(rows, y, (a, b)[i])
    return jacobian_code


def _probed3(f, i, entry):
    def jacobian_code(a, b, c):
        y = entry(f, i, -1)(a, b, c)
        rows = []
        for k in range(np.size(y)):
            rows.append(gradient(entry(f, i, k), a, b, c)[i])
        return _assembled(rows, y, (a, b, c)[i])
    return jacobian_code


# ``entry(f, i, k)``: the function whose gradient is row ``k`` of the Jacobian (of ``f``, or of its gradient in
# argument ``i``), and for ``k = -1`` the function whose Jacobian it is; ``f`` is called with copies of its array
# arguments (``_fresh``), as ``ad.jacobian`` calls it, so that one that writes into them sees the caller's values
# at every call
def _entry1(f, i, k):
    def entry(a):
        y = f(_fresh(a))
        return y if k < 0 else np.ravel(y)[k]
    return entry


def _entry2(f, i, k):
    def entry(a, b):
        y = f(_fresh(a), _fresh(b))
        return y if k < 0 else np.ravel(y)[k]
    return entry


def _entry3(f, i, k):
    def entry(a, b, c):
        y = f(_fresh(a), _fresh(b), _fresh(c))
        return y if k < 0 else np.ravel(y)[k]
    return entry


def _hessian_entry1(f, i, k):
    def entry(a):
        g = gradient(f, _fresh(a))[0]
        return g if k < 0 else np.ravel(g)[k]
    return entry


def _hessian_entry2(f, i, k):
    def entry(a, b):
        g = gradient(f, _fresh(a), _fresh(b))[i]
        return g if k < 0 else np.ravel(g)[k]
    return entry


def _hessian_entry3(f, i, k):
    def entry(a, b, c):
        g = gradient(f, _fresh(a), _fresh(b), _fresh(c))[i]
        return g if k < 0 else np.ravel(g)[k]
    return entry


def _fresh(a):
    """A copy of an array argument, as ``mixed.fresh`` makes (this one in the subset the transform takes: the
    entries are differentiated)."""
    return a.copy() if type(a) is np.ndarray else a


_PROBED = [_probed1, _probed2, _probed3]
_ENTRY = [_entry1, _entry2, _entry3]
_HESSIAN_ENTRY = [_hessian_entry1, _hessian_entry2, _hessian_entry3]


def _assembled(rows, y, x):
    """The gradients ``rows`` of the entries of ``y`` in ``x`` as a Jacobian of shape ``shape(y) + shape(x)``,
    a number where both are numbers, as ``ad.jacobian`` returns it."""
    if np.size(y) == 0:
        return np.zeros(np.shape(y) + np.shape(x))
    if np.ndim(y) == 0 and np.ndim(x) == 0:
        return rows[0]
    return np.reshape(np.stack(rows), np.shape(y) + np.shape(x))
