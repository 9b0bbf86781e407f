"""Derivatives of ``ad.jvp`` itself: reverse over forward and forward over forward (JAX's ``grad`` of a
``jvp``, ``jvp`` of a ``jvp``).

``jvp(f, x, t) = (f(x), J(x) t)`` is differentiated as a primitive whose rules are made of the modes that
exist already, so that nothing is written twice.  With ``s(x) = <c, f(x)>`` for a constant ``c`` and its
gradient code (``api.gradient_code``, which gives the gradient of what ``s`` and so ``f`` capture too):

* **reverse** (the call inside a function differentiated by ``ad.grad``): at cotangents ``(dy, dty)`` of
  ``(y, ty)``, the gradient in ``x`` is ``J(x)^T dy + d/de J(x + e t)^T dty``, in ``t`` it is ``J(x)^T dty``.
  ``J^T dy`` is the gradient code of ``s`` at ``c = dy``; ``J^T dty`` and its derivative along ``t`` are the
  value and the tangent of that code at ``c = dty`` under forward mode, one forward-over-reverse pass
  (``ad.hvp``'s).  The gradient of the values ``f`` captures (a closure over the variables differentiated)
  comes out of the same two runs;
* **forward** (the call inside a function differentiated by ``ad.jvp``): along tangents ``(tx, tt)`` of
  ``(x, t)`` and ``tf`` of what ``f`` captures, ``y`` moves by ``J(x) tx`` and the part along ``tf``, ``ty`` by
  ``J(x) tt + H(x)[t, tx]`` and the part along ``tf``, the last two the tangent of ``J(x)^T c`` along ``tx``
  and ``tf`` read against ``t``: one forward-over-reverse pass per entry of ``f``'s output (``c`` its unit
  vectors; one in all for a scalar ``f``).

What the rules take: ``f`` a function whose output is a real number or a real array, primals that are real
numbers or real arrays (or integers, with no tangent), no complex value anywhere; ``f`` may capture real numbers
and arrays.  Refused by name: a differentiable value ``f`` holds another way (in a list, object or function it
captures, as a default: its gradient would be lost), an ``f`` that writes into its primals, and a third
derivative through these rules (their own code is not differentiated again).
"""
from __future__ import annotations

import functools
import types

import numpy as np

from ...errors import BeyondOrder, UnsupportedError
from .cotangent import dense
from .ir import NUM, is_array, kind_of
from .mixed import fresh, jvp, jvp_of
from .nested import call_rule
from .registry import JVP_RULES, PAIRS, RULES, define, refusing
from .runtime import ZERO, acc, differentiable, field, filled, with_nested_boxes
from .second import with_stores
from .tangent import JVP

_BEYOND = ("a third derivative through ad.jvp (ad.grad or ad.jvp of a function whose derivative calls ad.jvp "
           "inside another derivative) is not supported: ad.grad of a function that calls ad.jvp, and ad.jvp of "
           "one, are")


# -- reverse over forward -----------------------------------------------------------------------------------------
def _jvp_reverse(f, primals, tangents):
    """The reverse rule of ``jvp(f, primals, tangents)``: ``((y, ty), back)``, ``back((dy, dty))`` the
    gradients of ``f`` (of the numbers and arrays it captures: a namespace by name, as a closure's), of the
    primals and of the tangents."""
    xbox, tbox = _box(primals), _box(tangents)
    primals, tangents = _checked(f, primals, tangents)
    _refuse_captures(f)
    before, along = fresh(primals), fresh(tangents)   # (as they are now: the caller may write into them later)
    y, ty = jvp(f, primals, tangents)
    _refuse_writes(f, before, primals)
    _refuse_output(f, y)

    def back(d):
        dy, dty = (None, None) if d is None or d is ZERO else (dense(d[0]), dense(d[1]))
        gx, gt, gf = [None] * len(before), None, None
        if dty is not None:   # J^T dty and its derivative along t: one forward-over-reverse pass
            (df, g), (tdf, hv) = hvp_pass(f, before, along, dty)
            gt = tbox(_real_grads(g, before))
            gx = [acc(a, b) for a, b in zip(gx, _real_grads(hv, before))]
            gf = tdf
        if dy is not None:
            df, g = _vjp(f, before, dy)
            gx = [acc(a, b) for a, b in zip(gx, _real_grads(g, before))]
            gf = acc(gf, df)
        return gf, xbox(gx), gt
    return (y, ty), back


def _box(v):
    """The type of the tuple or list ``v`` (a gradient mirrors it)."""
    return type(v) if type(v) in (list, tuple) else tuple


def _vjp(f, primals, c):
    """``(gradient of f's captured values, J(primals)^T c)``: the gradient code of ``<c, f(x)>``."""
    s, xs, code = _scalarised(f, primals, c)
    ds, g = with_stores(lambda: _split(xs, code(s, xs)))
    return field(ds, "f"), g


def hvp_pass(f, primals, tangents, c, tf=None):
    """``((df, J(x)^T c), (tdf, d/de J(x + e t)^T c))`` at ``x = primals``, ``t = tangents``: the gradient code of
    ``<c, f(x)>`` under forward mode (``ad.hvp``'s pass), its value and tangent, each with the gradient of the
    values ``f`` captures first; ``tf``: the tangents of those values (their part of the tangent too)."""
    s, xs, code = _scalarised(f, primals, c)
    ts = None if tf is None else types.SimpleNamespace(f=tf)   # (s's captured f moves along tf)
    (ds, g), (tds, tg) = with_stores(lambda: [_split(xs, o) for o in JVP(code, None, (s, xs), (ts, tuple(tangents)))])
    return (field(ds, "f"), g), (field(tds, "f"), (None,) * len(xs) if tg is None else tg)


def _scalarised(f, primals, c):
    """``(s, xs, code)``: ``s = <c, f(*xs)>`` (``_against``), the primals as one tuple ``xs`` (copies) and the
    gradient code of ``s`` (``api.gradient_code``: ``code(s, xs) -> (ds, (dxs,))``)."""
    from .api import gradient_code
    s, xs = _against(f, c), tuple(fresh(primals))
    return s, xs, gradient_code(s, (xs,))


def _split(xs, out):
    """The gradient code's ``(ds, (dxs,))`` (or its tangent) as ``(ds, dxs)``, a gradient per primal, with the
    gradients still in the box store of what the primals hold (``with_nested_boxes``)."""
    if out is None or out is ZERO:
        return None, None
    return out[0], with_nested_boxes(xs, tuple(out[1]) if out[1] is not None else (None,) * len(xs))


def _against(f, c):
    """``xs -> <c, f(*xs)>`` (a function of one tuple: the transform takes no ``*args``)."""
    def s(xs):
        return np.sum(c * call_rule(f, xs))
    return s


# -- forward over forward -----------------------------------------------------------------------------------------
def _jvp_forward(args, ts):
    """The forward rule of ``jvp``: ``((y, ty), (tangent of y, tangent of ty))`` along tangents ``ts`` of
    ``(f, primals, tangents)``, ``f``'s the tangents of the values it captures (a closure's)."""
    f, primals, tangents = args
    tf, tx, tt = ts
    if type(tf) is types.SimpleNamespace and all(v is None for v in vars(tf).values()):
        tf = None
    if tf is not None and not isinstance(f, types.FunctionType):
        raise BeyondOrder(f"forward over forward through ad.jvp of {_name(f)}, whose state has tangents, is "
                          f"not supported: pass those values to f as primals")
    primals, tangents = _checked(f, primals, tangents)
    n = len(primals)
    tx = (None,) * n if tx is None else tuple(tx)
    tt = (None,) * n if tt is None else tuple(tt)
    before = fresh(primals)
    y, ty = jvp(f, primals, tangents)
    _refuse_writes(f, before, primals)
    _refuse_output(f, y)
    moving = tf is not None or any(t is not None for t in tx)
    t_y = jvp_of(f, tf, fresh(before), tx)[1] if moving else None
    t_ty = jvp(f, fresh(before), tt)[1] if any(t is not None for t in tt) else None
    if moving and any(t is not None for t in tangents):   # H(x)[t, tx]: J^T c along tx, read against t
        t_ty = acc(t_ty, _second(f, before, tangents, tx, tf, y))
    return (y, ty), (t_y, t_ty)


def _second(f, primals, t, tx, tf, y):
    """``H(x)[t, tx]`` (and, along the tangents ``tf`` of what ``f`` captures, the derivative of ``J(x) t`` in
    those), shaped as ``f``'s output: per output entry ``k``, the tangent along ``tx`` and ``tf`` of ``J(x)^T e_k``
    read against ``t``."""
    shape = np.shape(y)
    out = np.empty(int(np.prod(shape)))
    for k in range(out.size):
        c = np.zeros(shape)
        c.flat[k] = 1.0
        hv = hvp_pass(f, primals, tx, c, tf)[1][1]
        out[k] = sum(float(np.sum(a * b)) for a, b in zip(t, hv) if a is not None and b is not None)
    return out.reshape(shape) if shape else float(out[0])


# -- what the rules take ------------------------------------------------------------------------------------------
def _checked(f, primals, tangents):
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise UnsupportedError(f"ad.jvp: {len(primals)} primals but {len(tangents)} tangents")
    for k, (x, t) in enumerate(zip(primals, tangents)):
        integral = isinstance(x, (int, np.integer)) and not isinstance(x, bool) or is_array(x) and x.dtype.kind in "iu"
        if not _real_value(x) and not (integral and t is None):
            raise UnsupportedError(f"a derivative of ad.jvp of {_name(f)} needs primals that are real numbers or "
                                   f"real arrays (integers without a tangent); primal {k} is "
                                   f"{type(x).__name__}{'' if not is_array(x) else ' of ' + str(x.dtype)}")
    return primals, tangents


def _refuse_output(f, y):
    if not _real_value(y):
        raise UnsupportedError(f"a derivative of ad.jvp of {_name(f)} needs f to return a real number or a real "
                               f"array; it returned {type(y).__name__}")


def _refuse_writes(f, before, primals):
    for k, (a, b) in enumerate(zip(before, primals)):
        if is_array(a) and not np.array_equal(a, b, equal_nan=True):
            raise UnsupportedError(f"a derivative of ad.jvp of {_name(f)}, which writes into its primal {k}, is "
                                   f"not supported")


def _refuse_captures(f):
    """Under reverse mode the gradient of what ``f`` captures is its gradient code's: real numbers and real arrays
    in its cells (``lambda v: f(v, w)``).  Refused: a differentiable value held another way (in a list, dict,
    object or function it captures, as a default, bound by ``functools.partial`` or as a method's object), whose
    gradient these rules do not carry, and a complex one."""
    if isinstance(f, types.FunctionType):
        cells, defaults = _function_holds(f)
        held = [(w, v) for w, v in cells if not _real_value(v)] + defaults
        where = next((w for w, v in held if _captured_differentiable(v, set(), 1) is not None), None)
    else:
        where = _captured_differentiable(f, set())
    if where is not None:
        raise BeyondOrder(f"ad.grad through ad.jvp of {_name(f)}, which captures {where}, is not supported "
                          f"(its gradient would be lost): pass the value to f as a primal with tangent None")


def _real_value(v) -> bool:
    """A real number or a real array: what these rules take as a primal or an output, and what a closure's
    gradient code carries a gradient of."""
    return kind_of(v) == NUM and not isinstance(v, complex) or is_array(v) and v.dtype.kind == "f" \
        or isinstance(v, np.floating)


def _captured_differentiable(v, seen: set, depth: int = 0):
    """A description of a differentiable value that ``v`` (a callable, a container, an object) holds, or None;
    past a few levels of objects inside objects, the answer is "yes" (refused rather than guessed)."""
    if id(v) in seen or isinstance(v, (bool, str, bytes, type, types.ModuleType, types.BuiltinFunctionType,
                                       np.ufunc)) or v is None:
        return None
    seen.add(id(v))
    if depth > 6:
        return "a value held deep inside objects"
    if isinstance(v, types.FunctionType):
        cells, defaults = _function_holds(v)
        held = cells + defaults
    elif isinstance(v, functools.partial):
        held = [("a value bound by functools.partial", a) for a in (v.func, *v.args, *v.keywords.values())]
    elif isinstance(v, types.MethodType):
        held = [(f"its object, a {type(v.__self__).__name__}", v.__self__), ("its function", v.__func__)]
    elif type(v) in (list, tuple):
        held = [("a value in a list or tuple", e) for e in v]
    elif type(v) is dict:
        held = [("a value in a dict", e) for e in v.values()]
    elif differentiable(v) and not callable(v):
        return "a value"
    elif hasattr(v, "__dict__"):
        held = [(f"a {type(v).__name__} holding it", e) for e in vars(v).values()]
    else:
        return None
    for where, h in held:
        inner = _captured_differentiable(h, seen, depth + 1)
        if inner is not None:
            return where if depth == 0 else inner
    return None


def _function_holds(f) -> tuple[list, list]:
    """What function ``f`` holds, as ``(where, value)`` pairs: its captured variables (``where`` their quoted
    names), then its defaults."""
    cells = [(repr(n), c.cell_contents) for n, c in zip(f.__code__.co_freevars, f.__closure__ or ()) if filled(c)]
    defaults = (*(f.__defaults__ or ()), *(f.__kwdefaults__ or {}).values())
    return cells, [(f"a default of {_name(f)}", d) for d in defaults]


def _real_grads(g, primals):
    """The gradients ``g`` with None for the primals that take none (integers)."""
    return [gi if _real_value(x) else None for gi, x in zip(g, primals)]


def _name(f):
    name = getattr(f, "__qualname__", None) or repr(f)
    return f.__name__ if name.startswith("_ad_") else name   # (a closure the transform made: its own name)


def _beyond(*args, **kw):
    raise BeyondOrder(_BEYOND)


define(jvp, reverse=_jvp_reverse, forward=_jvp_forward,
       pair=refusing(jvp, "forward over reverse", _BEYOND, BeyondOrder), refused={"reverse over reverse": _BEYOND})
RULES[_jvp_reverse] = _beyond
JVP_RULES[_jvp_forward] = _beyond
PAIRS[_jvp_reverse] = _beyond
