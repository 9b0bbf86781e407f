"""Forward over reverse: the tangent of a pullback, so that forward mode can run generated reverse code
(``ad.hessian``, ``ad.hvp``).

Generated gradient code calls reverse rules, ``y, back = rule(*args)``, and later ``back(dy)``.  Under
forward mode the pair gets a tangent ``(ty, tback)``: ``ty`` from the primitive's forward rule, and
``tback`` the derivative of ``x -> back_x(dy)`` along the tangents, a ``PullbackTangent``.  Calling
``back`` with tangent ``tback`` then gives ``back(tdy) + tback(dy)`` (``back`` is linear in ``dy``).

``tback`` comes from the same data the first-order rules are made of:

* linear primitives (sums, reshapes, indexing, ``+``): the pullback does not depend on the primal
  values, so ``tback`` is zero;
* elementwise NumPy functions and operators: their partial derivatives are Python functions
  (``rules.numpy.PARTIALS_UNARY``/``PARTIALS_BINARY``, ``rules.operators.NUMERIC_GRADS``), whose
  own forward mode gives the derivative of the pullback;
* bilinear primitives (``@``, ``dot``, ``outer``, ``*``): the pullback at ``(a, tb)`` and ``(ta, b)``.

Any other rule raises ``UnsupportedError`` naming it, as does a pullback through mutation (boxes).
"""
from __future__ import annotations

import operator

import numpy as np

from ...errors import UnsupportedError
from .rules import structures
from .rules.numpy import PARTIALS_BINARY, PARTIALS_UNARY
from .rules.operators import BINOPS, NUMERIC_GRADS, PYOP, UNARY
from .runtime import HELPERS, RULES, STORE, acc, is_complex, unbroadcast
from .tangent import JVP, JVP_RULES, REVERSE_RULE_JVP, PullbackTangent


ZERO = PullbackTangent(lambda dy: None)   # the tangent of a pullback that does not depend on the primal


# -- the derivative of a pullback, per primitive ---------------------------------------------------------------------
def _partials_unary(d):
    def cross(args, ts, y, ty):
        (x, *_), t = args, ts[0]
        td = JVP(d, None, (x, y), (t, ty))[1]
        return None if td is None else (lambda dy: (dy * td,))
    return cross


def _partials_binary(d):
    def cross(args, ts, y, ty):
        a, b = args
        tp = JVP(d, None, (a, b, y), (*ts, ty))[1]
        if tp is None:
            return None
        return lambda dy: tuple(None if t is None else unbroadcast(dy * t, x) for t, x in zip(tp, (a, b)))
    return cross


def _partials_operator(grads):
    def cross(args, ts, y, ty):
        a, b = args
        if not all(type(x) is np.ndarray or isinstance(x, (int, float, complex, np.generic)) for x in args):
            raise UnsupportedError("forward over reverse through an operator on non-numeric values is not supported")

        def apply(dy):
            tg = JVP(grads, None, (dy, a, b, y), (None, *ts, ty))[1]
            return (None, None) if tg is None else tuple(unbroadcast(t, x) for t, x in zip(tg, (a, b)))
        return apply
    return cross


def _bilinear(rule):
    def cross(args, ts, y, ty):
        a, b = args
        ta, tb = ts

        def apply(dy):
            ga = None if tb is None else rule(a, tb)[1](dy)[0]
            gb = None if ta is None else rule(ta, b)[1](dy)[1]
            return ga, gb
        return apply
    return cross


_LINEAR = object()   # the pullback does not depend on the primal values
CROSS: dict = {}     # primitive -> _LINEAR or cross(args, tangents, y, ty) -> (dy -> argument tangents)


def _register():
    CROSS.update({f: _partials_unary(d) for f, d in PARTIALS_UNARY.items()})
    CROSS.update({f: _partials_binary(d) for f, d in PARTIALS_BINARY.items()})
    CROSS.update({PYOP[op]: _partials_operator(g) for op, g in NUMERIC_GRADS.items() if op not in ("+", "-")})
    for f in (operator.add, operator.sub, operator.neg, operator.pos, np.sum, np.mean, np.reshape, np.transpose,
              np.ravel, np.squeeze, np.expand_dims, np.concatenate, np.stack, np.add, np.subtract, np.negative,
              np.positive, np.array, np.asarray, structures.getitem, structures.getattr_, np.real, np.imag,
              np.conj, sum, list, tuple, float):
        CROSS[f] = _LINEAR
    CROSS.update({np.matmul: _bilinear(RULES[np.matmul]), operator.matmul: _bilinear(BINOPS["@"]),
                  np.dot: _bilinear(RULES[np.dot]), np.outer: _bilinear(RULES[np.outer]),
                  np.multiply: _bilinear(RULES[np.multiply])})


_register()


def pair_jvp(f, rule, args, ts):
    """``((y, back), (ty, tback))`` for ``rule(*args) = (y, back)``, the reverse rule of primitive ``f``."""
    y, back = rule(*args)
    if all(t is None for t in ts):
        return (y, back), None
    if is_complex(y) or any(map(is_complex, args)):
        raise UnsupportedError("forward over reverse (ad.hessian, ad.hvp) of complex values is not supported")
    how = CROSS.get(f)
    if how is None:
        name = getattr(f, "__qualname__", repr(f))
        raise UnsupportedError(f"forward over reverse (ad.hessian, ad.hvp) through {name} is not supported: "
                               f"its pullback has no forward-mode derivative")
    ty = JVP(f, None, args, ts)[1] if f not in _STRUCTURAL else _STRUCTURAL[f](args, ts)
    cross = None if how is _LINEAR else how(args, ts, y, ty)
    return (y, back), (ty, ZERO if cross is None else PullbackTangent(cross))


def _structural_getitem(args, ts):
    from .rules.jvp import getitem
    return getitem(args[0], ts[0], args[1])[1]


def _structural_getattr(args, ts):
    from .rules.jvp import getattr_
    return getattr_(args[0], ts[0], args[1])[1]


_STRUCTURAL = {structures.getitem: _structural_getitem, structures.getattr_: _structural_getattr}


# -- rules that are reverse rules themselves (called from generated reverse code) ---------------------------------------
def reverse_rule_owner(r):
    """The primitive whose reverse rule ``r`` is (None if it is not one)."""
    owners = _OWNERS.get(len(RULES))
    if owners is None:
        owners = {id(rule): f for f, rule in RULES.items()}
        owners.update({id(UNARY["-"]): operator.neg, id(UNARY["+"]): operator.pos,
                       id(structures.getitem): structures.getitem, id(structures.getattr_): structures.getattr_})
        _OWNERS.clear()
        _OWNERS[len(RULES)] = owners
    return owners.get(id(r))


_OWNERS: dict = {}


def reverse_rule_jvp(r, args, ts):
    """The JVP of a call of ``r`` when it is a primitive's reverse rule (``pair_jvp``), else None."""
    owner = reverse_rule_owner(r)
    return None if owner is None else pair_jvp(owner, r, args, ts)


REVERSE_RULE_JVP[0] = reverse_rule_jvp


def _no_boxes(f):
    """A box-store helper under forward mode: ``f`` when no object has been written to, else an error."""
    def rule(args, ts):
        if STORE[0].boxes or f is None:
            raise UnsupportedError("forward over reverse (ad.hessian, ad.hvp) through mutation (objects "
                                   "written to while differentiating) is not supported")
        return f(args, ts)
    return rule


JVP_RULES.update({
    HELPERS["_ad_take"]: _no_boxes(lambda a, t: (a[1], t[1])),
    HELPERS["_ad_takef"]: _no_boxes(lambda a, t: (a[1], t[1])),
    HELPERS["_ad_acci"]: _no_boxes(lambda a, t: (acc(a[1], a[2]), acc(t[1], t[2]))),
    HELPERS["_ad_setitem"]: _no_boxes(None), HELPERS["_ad_setattr"]: _no_boxes(None),
})
