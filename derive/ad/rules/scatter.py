"""NumPy functions that write entries into an array in place: ``np.add.at`` and ``np.subtract.at`` (the
unbuffered scatter-add: a repeated index adds once per occurrence), ``np.put``, ``np.place`` and
``np.put_along_axis`` (assignments at flat indices or under a mask, the values repeated in turn; along an axis,
the values broadcast).  Their reverse rules write by the box rules
(``WRITING_RULES``: the pullback runs although the call returns None, and reads the gradient of the array
written from the box store): ``np.add.at``'s pullback is ``Added``, a box rule with a ``transpose`` for a
second differentiation (``nested_store``); ``np.put``, ``np.place`` and ``np.put_along_axis`` are given as Python code
(``implemented.implemented_by``) that writes ``a[index] = values``.  Forward over reverse is their pair
(``second``): the same call on the tangents, and the pullback run again on the tangent store.

The ``at`` of ``np.multiply``, ``np.divide``, ``np.power``, ``np.maximum`` and ``np.minimum`` are refused by
name in every mode: their derivative needs the value each occurrence of a repeated index saw."""
from __future__ import annotations

import numpy as np

from ....errors import UnsupportedError
from ..cotangent import dense
from ..registry import PAIRS, refusing
from ..runtime import ARRAY_TYPES, NONDIFF, RULES, WRITING_RULES, asarray, box_grad, part_of, register, unbroadcast
from ..tangent import JVP_RULES
from .implemented import implemented_by
from .jvp import ufunc_at


def scattered(a, indices, b):
    """An array of ``a``'s shape, zero but for ``b`` added at ``indices`` (``np.add.at`` into zeros: a
    repeated index adds once per occurrence)."""
    g = np.zeros(np.shape(a), dtype=np.result_type(np.asarray(a).dtype, np.asarray(b).dtype, 0.0))
    np.add.at(g, indices, b)
    return g


class Added:
    """The pullback of ``np.add.at(a, indices, b)`` (``sign`` 1) or ``np.subtract.at`` (``sign`` -1), a box
    rule: ``a``'s gradient is left as it is, ``b``'s is ``sign`` times its entries at ``indices``, one per
    occurrence, summed down to ``b``'s shape.  (``transpose``: for a second differentiation, as
    ``structures.Clear``'s.)"""

    __slots__ = ("obj", "idx", "val", "sign")

    def __init__(self, obj, idx, val, sign):
        self.obj, self.idx, self.val, self.sign = obj, idx, val, sign

    def __call__(self, dy):
        g = box_grad(self.obj)
        if g is None or self.obj.dtype.kind not in "fc":   # (a number added into an int array is rounded)
            return (None, None, None)
        return (None, None, self.sign * unbroadcast(asarray(dense(g))[self.idx], self.val))

    def transpose(self, a, form, dd):
        dv = None if dd is None or len(dd) < 3 else dd[2]
        if dv is not None:
            a = np.zeros(*form) if a is None else a
            part_of(self.obj, a)[...] += self.sign * scattered(self.obj, self.idx, dv)
        return a, None


def _added(u, sign):
    """The rule of ``u.at(a, indices, b)`` (``np.add``, ``np.subtract``): the write, by the box rules."""
    def rule(a, indices, b):
        if type(a) is not np.ndarray and type(a) not in ARRAY_TYPES:
            raise UnsupportedError(f"tensorlang.ad differentiates np.{u.__name__}.at into a NumPy array only, not "
                                   f"{type(a).__name__}")
        register(a)
        u.at(a, indices, b)
        return None, Added(a, indices, b, sign)
    return rule


def put_index(a, ind, mode):
    """The index (a tuple of int arrays) of the entries of ``a`` that ``np.put(a, ind, v, mode)`` writes."""
    n = np.size(a)
    flat = np.ravel(np.asarray(ind, dtype=np.intp))
    if mode == "wrap":
        flat = flat % n
    elif mode == "clip":
        flat = np.clip(flat, 0, n - 1)
    elif np.any((flat < -n) | (flat >= n)):
        raise IndexError(f"np.put: index out of range for an array of size {n}")
    return np.unravel_index(flat % n if n else flat, np.shape(a))


def written(n, m):
    """The number ``n`` of entries written from ``m`` values (repeated in turn: ``np.resize``)."""
    if n and not m:
        raise ValueError("cannot write from an empty array of values")
    return n


def _put(a, ind, v, mode="raise"):
    index = put_index(a, ind, mode)
    a[index] = np.resize(v, written(np.size(index[0]), np.size(v)))


def place_index(mask):
    """The boolean index of the entries that ``np.place(arr, mask, vals)`` writes."""
    return np.asarray(mask, dtype=bool)


def _place(arr, mask, vals):
    where = place_index(mask)
    arr[where] = np.resize(vals, written(int(np.sum(where)), np.size(vals)))


def along_index(shape, indices, axis):
    """The index (a tuple of int arrays) of the entries of an array of ``shape`` that ``np.put_along_axis`` (and
    ``np.take_along_axis``) with ``indices`` and ``axis`` reach: NumPy's own, the flat one for ``axis=None``
    (``indices`` kept of its kind: a recording's stand-in, computed by ``np.argsort``, stays one)."""
    indices = asarray(indices)
    if indices.dtype.kind not in "iu":
        raise IndexError("`indices` must be an integer array")
    if axis is None:
        if indices.ndim != 1:
            raise ValueError("when axis=None, `indices` must have a single dimension.")
        n = int(np.prod(shape, dtype=np.intp))
        if np.any((indices < -n) | (indices >= n)):
            raise IndexError(f"index out of range for an array of size {n}")
        return np.unravel_index(indices % n if n else indices, shape)
    ndim = len(shape)
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    axis %= ndim
    if indices.ndim != ndim:
        raise ValueError("`indices` and `arr` must have the same number of dimensions")
    return tuple(indices.astype(np.intp) if d == axis else np.arange(n).reshape((1,) * d + (n,) + (1,) * (ndim - d - 1))
                 for d, n in enumerate(shape))


def _put_along_axis(arr, indices, values, axis):
    arr[along_index(np.shape(arr), indices, axis)] = values


ADDED = (np.add.at, np.subtract.at)   # (their pullback is ``Added``)
for _u, _sign in ((np.add, 1), (np.subtract, -1)):
    RULES[_u.at] = _added(_u, _sign)
    JVP_RULES[_u.at] = lambda args, ts, u=_u: ufunc_at(u, None, args, ts)
for _f, _impl in ((np.put, _put), (np.place, _place), (np.put_along_axis, _put_along_axis)):
    implemented_by(_f, _impl)
IN_PLACE = (*ADDED, np.put, np.place, np.put_along_axis)   # (their rules write to their first argument)
WRITING_RULES.update(RULES[f] for f in IN_PLACE)
NONDIFF.update({put_index, place_index, written, along_index})

for _u in (np.multiply, np.divide, np.power, np.maximum, np.minimum):
    _why = (f"np.{_u.__name__}.at's derivative needs the value each occurrence of a repeated index saw; "
            f"write the updates as array operations")
    RULES[_u.at] = refusing(_u.at, "reverse", _why)
    JVP_RULES[_u.at] = refusing(_u.at, "forward", _why)
    PAIRS[_u.at] = refusing(_u.at, "forward over reverse", _why)
    RULES[RULES[_u.at]] = refusing(_u.at, "reverse over reverse", _why)
