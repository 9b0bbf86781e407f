"""Derivatives of any order, by recording each one at the point.

The transform differentiates a derivative again by differentiating the code that computes it: to second order,
and to third through primitives (``nested``, ``api.gradient_code``).  Where it does not reach, it raises
``BeyondOrder``, and the entry point that was asked (the functions ``ad.grad``, ``ad.value_and_grad``,
``ad.jacobian`` and ``ad.hessian`` make; ``ad.gradient``, ``ad.pullback``, ``ad.jvp``, ``ad.hvp``) is asked again
for the same derivative of the function's *recording* at the point (``derivative_recording``), in which each
derivative below it was recorded in turn: f's own (``recorded``, its helpers inlined), then, for each transform
that made the function from f, innermost first, the recording of that transform of the last recording, run on
stand-ins of the arguments.  The
generated code and the rules it calls compute on the stand-ins like on arrays (``Traced`` is an array type to
the runtime), so each recording of a derivative is straight-line code of primitives again, and the next level
is a first derivative of it: no order is out of reach.  Each level's recording is checked against the
derivative run on the arguments themselves (``_check``) and refused where they disagree.  A tower is made per
call (another point may branch otherwise), from one run of each derivative below on stand-ins and one on the
arguments.
"""
from __future__ import annotations

import types

import numpy as np

from ...errors import BeyondOrder, named_cause
from .ir import ARRAY_TYPES
from .recorded import Traced, is_recording, recorded, unshimmed

# what the recordings of a tower are for, as their refusals say it (``recorded.refused``)
WHY = ("in a derivative of an order that the transform does not reach (tensorlang.ad records the derivatives below "
       "it at this point, running them on stand-ins of the arguments)", "write it with NumPy operations")

ARRAY_TYPES.add(Traced)   # (the runtime and the rules compute on a stand-in as on the array or number it holds)


def made_from(g):
    """``(f, remake)`` for a function ``g`` that tensorlang.ad made from ``f`` (``remake(h)`` makes the same
    derivative of ``h``), else None."""
    remake = getattr(g, "__ad_remake__", None)
    return None if remake is None else (g.__wrapped__, remake)


def derivative_recording(g, args: tuple, kw: dict | None = None):
    """The recording of ``g`` called with ``args`` and keywords ``kw``: a straight-line function of the same
    positional arguments that equals ``g`` near ``args``, made level by level (the module's docstring); to be
    called with ``numpy_numbers(args)``, as it was recorded."""
    args = numpy_numbers(args)
    remakes = []
    while (made := made_from(g)) is not None:
        g, remake = made
        remakes.append(remake)
    if kw:   # (keyword arguments are not differentiated: constants of the recording)
        g = _called_with(g, kw)
    if type(g) is types.FunctionType:
        r = recorded(g, args, why=WHY)
        _check(r, g, args)   # (its code may have run a derivative on the stand-ins: ``on_stand_ins``)
    else:
        r = g
    for remake in reversed(remakes):
        r = _level(remake, r, args)
    return r


def _level(remake, r, args):
    """The recording of ``remake(r)`` at ``args``, checked; where recording a Hessian on the stand-ins is refused
    (forward over reverse through an item write into one), the recording of the Jacobian of the recording of
    the gradient (or of the Jacobian), two first derivatives, each of straight-line code (``first_derivatives`` of
    the remake that ``mixed.hessian`` gives)."""
    level = _dense(remake, r)
    try:
        out = recorded(level, args, shim=False, why=WHY)
    except BeyondOrder:
        split = getattr(remake, "first_derivatives", None)   # (a Hessian's: ``mixed.hessian``)
        if split is None:
            raise
        out = r
        for part in split(r, args):
            out = _level(part, out, args)
    _check(out, level, args)
    return out


def _check(r, level, args):
    """Refuses recording ``r`` of derivative ``level`` where, at ``args``, it does not give the value that
    ``level`` gives run on the arguments themselves: the runtime computed something else on stand-ins than on
    arrays, and the next level would differentiate it."""
    got, want = r(*_copies(args)), level(*_copies(args))
    if not _close(got, want):
        raise BeyondOrder(f"the recording of {getattr(level, '__qualname__', 'a derivative')} at this point gives "
                          f"{got!r}, where the derivative itself gives {want!r}")


def _each(v, leaf):
    """``v`` with ``leaf(x)`` in the place of each ``x`` it holds in tuples, lists and dicts."""
    t = type(v)
    if t in (tuple, list):
        return t(_each(x, leaf) for x in v)
    if t is dict:
        return {k: _each(x, leaf) for k, x in v.items()}
    return leaf(v)


def _copies(v):
    return _each(v, lambda x: x.copy() if isinstance(x, np.ndarray) else x)


def _close(a, b) -> bool:
    """Whether values ``a`` and ``b`` (numbers, arrays, None, tuples, lists and dicts of them) agree to rounding."""
    if type(a) in (tuple, list) or type(b) in (tuple, list):
        return type(a) is type(b) and len(a) == len(b) and all(map(_close, a, b))
    if type(a) is dict or type(b) is dict:
        return type(a) is type(b) and a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if a is None or b is None:
        return a is None and b is None or _close(0.0, a if b is None else b)
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    a, b = np.asarray(a), np.asarray(b)
    scale = max(float(np.max(np.abs(b), initial=0.0)), 1.0)
    return a.shape == b.shape and bool(np.all(np.abs(a - b) <= 1e-9 * scale)) or \
        bool(np.array_equal(a, b, equal_nan=True))


def _dense(remake, r):
    """``remake(r)`` as a level of a tower: a gradient that ``ad.grad``, ``value_and_grad`` or ``gradients`` gives
    as None (it does not depend on the argument) is zeros of the argument's shape, which the next level
    differentiates (``ad.grad`` of a function that returns None would be refused)."""
    made = remake(r)
    how = getattr(remake, "func", remake).__name__
    if how not in ("grad", "value_and_grad", "gradients"):
        return made
    keywords = getattr(remake, "keywords", {})
    pick, aux = keywords.get("argnums"), keywords.get("has_aux", False)

    def level(*args):
        y = made(*args)
        if how == "gradients":
            return tuple(map(_zeros_for_none, y, args))
        g = y[1] if how == "value_and_grad" else y[0] if aux else y
        g = _zeros_for_none(g, args[pick]) if isinstance(pick, int) else tuple(
            _zeros_for_none(gi, args[i]) for gi, i in zip(g, pick))
        return (y[0], g) if how == "value_and_grad" else (g, y[1]) if aux else g
    return level


def _zeros_for_none(g, x):
    """Gradient ``g`` of argument ``x``, zeros like ``x`` where it is None and ``x`` a number or an array."""
    return np.zeros_like(x) if g is None and type(x) is Traced else g


def _called_with(f, kw):
    """``f`` with keyword arguments ``kw``, as a Python function of the positional ones."""
    def call(*args):
        return f(*args, **kw)
    return call


def _recordable(v) -> bool:
    """Whether ``v`` holds numbers, arrays, ints, strings and None only (in tuples, lists and dicts), none of them a
    stand-in of another recording: what a recording's arguments can be (else the refusal is of another entry
    point's, a ``gradient`` that ``hvp`` differentiates, or of a level of a tower)."""
    if type(v) in (tuple, list):
        return all(map(_recordable, v))
    if type(v) is dict:
        return all(map(_recordable, v.values()))
    return type(v) is not Traced and (v is None or isinstance(v, (bool, int, str, float, complex, np.number,
                                                                     np.ndarray)))


def beyond(refusal: BeyondOrder, run, f, args: tuple, kw: dict | None = None):
    """``run(r, args)``, ``r`` the recording of ``f`` at ``args`` (``derivative_recording``), its numbers NumPy's
    (``numpy_numbers``): what an entry point that the transform refused (``refusal``) for ``f`` gives.  Refused as
    it was where ``f`` is a recording already or an argument a stand-in of another recording (the refusal is then
    of a level of a tower), or where ``f`` cannot be recorded (the reason added)."""
    if getattr(f, "__ad_recording__", False) or not _recordable(args) or kw and not _recordable(kw):
        raise refusal
    args = numpy_numbers(args)
    try:
        r = derivative_recording(f, args, kw)
    except Exception as failed:   # (UnsupportedError, or a kernel's ShapeError naming the stand-in it refused)
        why = named_cause(failed)
        if why is None:
            raise
        failed = f"; and recording it at this point failed: {why}"   # (said once where an inner level said it)
        raise BeyondOrder(str(refusal) if str(refusal).endswith(failed) else f"{refusal}{failed}") from None
    if r is f:   # (a primitive, not made by tensorlang.ad: nothing to record)
        raise refusal
    r.__ad_recording__ = True
    return run(r, args)


def on_stand_ins(f, args: tuple):
    """``f``, or, where ``args`` hold stand-ins of a recording (a derivative called inside a function being
    recorded, a level of a tower) and ``f`` is a Python function that tensorlang.ad did not make, ``f``'s own
    recording at their values: the derivative's code then runs on the stand-ins through straight-line code of
    primitives, as a level of a tower does, where the arrays ``f`` makes from constants (``np.zeros(n)``, then
    written) are values of the recording (``recorded.made``) and not NumPy's, which cannot hold a stand-in."""
    if type(f) is not types.FunctionType or made_from(f) is not None or is_recording(f) \
            or not any(map(_holds_stand_in, args)):
        return f
    return recorded(unshimmed(f), numpy_numbers(_values(args)), why=WHY)


def _holds_stand_in(v) -> bool:
    if type(v) in (tuple, list):
        return any(map(_holds_stand_in, v))
    if type(v) is dict:
        return any(map(_holds_stand_in, v.values()))
    return type(v) is Traced


def _values(v):
    """``v`` with each stand-in its value (in tuples, lists and dicts)."""
    return _each(v, lambda x: x._tl_value if type(x) is Traced else x)


def numpy_numbers(v):
    """``v`` with each Python float and complex number a NumPy scalar (in tuples, lists and dicts): the stand-ins of
    a tower's levels are arrays to the runtime (``x.copy()``, ``x.dtype``), and its recordings are called with
    what they recorded."""
    return _each(v, lambda x: np.asarray(x)[()] if type(x) is float or type(x) is complex else x)
