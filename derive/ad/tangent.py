"""What generated forward-mode code calls at run time: ``JVP`` (a call's result and its tangent, from a
forward rule, from the transformed function, or from a reverse rule's pullback transposed), tangent
arithmetic on structures, and the tangent store that gives mutable objects their tangent.

Tangents mirror the value they belong to, as gradients do (``runtime``): numbers and arrays for numbers
and arrays, the same containers for tuples, lists and dicts, the same dataclass or a
``types.SimpleNamespace`` for objects and closures, and ``None`` for "zero".

A mutable object's tangent is mutated alongside it (``lst.append(x)`` appends ``tx`` to the list's
tangent); an object that is written to but has no tangent yet (an array from ``np.zeros``, an argument
passed without one) gets a zero tangent registered under its identity for the rest of the
differentiation, where later reads of the same object find it.  A view of an array has as tangent the
same view of the array's tangent (``follow_views`` for what a call returns, ``mutable`` and
``tangent_of`` through the array that owns the memory), as reverse mode's ``runtime._grad_view`` does for
gradients, so a write through a view reaches its base's tangent; any other array has a tangent of its own
(``follow_views``), so a write into it reaches no other array's.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import types

import numpy as np

from ...errors import UnsupportedError
from .context import Provided, current
from .flat import flat_call, flat_tangents, takes_extras
from .ir import ARRAY_TYPES, INT, NUM, check_write, is_array, kind_of, own_tangent
from .recorded import recorded_in_place
from .source import NoSourceKept
from .registry import JVP_METHOD_RULES, JVP_RULES  # noqa: F401  (read through here)
from .runtime import (CACHED, LINEAR, METHOD_RULES, NONDIFF, NONDIFF_METHODS, RULES, acc, by_parameters,
                      check_keywords, differentiable, field, in_table, initializer, make_like, memory_owner,
                      outside_refused, plain_dataclass, qualified_name, ufunc_method, view_within, with_defaults)


# the transforms JVP hands calls over to, provided by the modules that make them (which call JVP in turn):
# ``TRANSFORM.fn(f, args)``, the compiled forward entry of a Python function (``forward``), and
# ``REVERSE_RULE_JVP.fn(r, args, ts)``, the JVP of a call of reverse rule ``r`` or None when ``r`` is not
# one (forward over reverse, ``second``)
TRANSFORM = Provided("forward mode's source transformation (forward.specialised_jvp)")
REVERSE_RULE_JVP = Provided("the forward mode of reverse rules (second.reverse_rule_jvp)")


class PullbackTangent:
    """The tangent of a pullback: ``cross(dy)`` is the derivative of ``back_x(dy)`` along x's tangent.  A
    pullback that reads more than ``dy`` (the box store) gives ``call(dy, tdy) -> (back(dy), tangent)``
    instead, which calls it."""

    __slots__ = ("cross", "call")

    def __init__(self, cross, call=None):
        self.cross, self.call = cross, call


def pullback_tangent(back, tback):
    """``tback``, the tangent of pullback ``back``, as a ``PullbackTangent`` (a closure's tangent is that of
    what it captured, and its forward mode gives the derivative)."""
    if tback is None or type(tback) is PullbackTangent:
        return tback

    def call(dy, tdy):   # the forward mode of back's code, along dy's tangent and what it captured at once
        return JVP(back, tback, (dy,), (tdy,))

    def cross(dy):   # (along what it captured alone: dy's tangent an explicit zero, not the one a write into
        # dy registered, which ``back(tdy)`` counts: ``np.max``'s gradient is written into np.zeros)
        return None if dy is None else JVP(back, tback, (dy,), (zero(dy),))[1]
    return PullbackTangent(cross, call)


def call_pullback(back, tback, dy, tdy):
    """``(back(dy), back(tdy) + tback(dy))``."""
    if tback is not None and tback.call is not None:
        return tback.call(dy, tdy)
    g = back(dy)
    tg = None if tdy is None else back(tdy)
    if tback is not None:
        tg = acc(tg, tback.cross(dy))
    return g, tg


# -- tangent arithmetic (a sum of tangents is ``runtime.acc``, the sum of gradients) ---------------------
def zero(x):
    """A zero tangent for a number or an array (None for other values)."""
    if kind_of(x) in (INT, NUM) and type(x) is not bool or isinstance(x, (complex, np.complexfloating)):
        z = 0 * x
        return z if z == z else type(x)(0)   # (an exact 0 for an infinite number too, not 0 * inf)
    if is_array(x):   # (a batch's: the same zeros for every example)
        return np.zeros(x.shape, dtype=np.result_type(x.dtype, float))
    return None


def zero_mut(x):
    """A fresh zero tangent for a mutable container or a float array (None for other values)."""
    t = type(x)
    if t is np.ndarray:
        return zero(x) if x.dtype.kind in "fc" else None
    if t in ARRAY_TYPES:   # (a batch of ad.vmap: a batch of zeros, each example's written apart)
        return x.zeros(x.shape, np.result_type(x.dtype, float)) if x.dtype.kind in "fc" else None
    if t is list:
        return [None] * len(x)
    if t is dict:
        return {}
    return None


def dense(t, like):
    """Tangent ``t`` as a number or array of ``like``'s shape (zeros for None)."""
    if t is None:
        z = zero(like)
        return 0.0 if z is None else z
    return t


def densify(t, x):
    """Tangent ``t`` of ``x`` with zeros for None, item by item through lists and tuples (as lists)."""
    if isinstance(x, (list, tuple)):
        ts = [None] * len(x) if t is None else t
        return [densify(ti, xi) for ti, xi in zip(ts, x)]
    return dense(t, x)


def filled(t, x):
    """Tangent ``t`` of argument ``x`` as a NumPy function takes it: a list or tuple's tangent with zeros for
    the None of its items (``np.sum([1, x[0] * x[1]])``); ``t`` itself where it has no such None."""
    if type(x) not in (list, tuple) or not isinstance(t, (list, tuple)) or not any(_holes(ti) for ti in t):
        return t
    return densify(t, x)


def _holes(t) -> bool:
    return t is None or isinstance(t, (list, tuple)) and any(map(_holes, t))


def numpy_filled(f, ts, args) -> tuple:
    """The tangents ``ts`` of ``args`` as NumPy or SciPy function ``f`` takes them (``filled``); other
    functions' as they are (a list's tangent may be written in place)."""
    numpy = isinstance(f, np.ufunc) or (getattr(f, "__module__", None) or "").split(".")[0] in ("numpy", "scipy")
    return tuple(map(filled, ts, args)) if numpy else ts


def inner(a, b):
    """The real inner product of two tangents (or gradients) of the same structure; None is zero."""
    if a is None or b is None:
        return 0.0
    if isinstance(a, (tuple, list)):
        return sum((inner(x, y) for x, y in zip(a, b)), 0.0)
    if isinstance(a, dict):
        return sum((inner(v, b.get(k)) for k, v in a.items()), 0.0)
    if isinstance(a, types.SimpleNamespace) or dataclasses.is_dataclass(a):
        names = vars(a) if isinstance(a, types.SimpleNamespace) else [f.name for f in dataclasses.fields(a)]
        return sum((inner(getattr(a, n, None), getattr(b, n, None)) for n in names), 0.0)
    if type(a) in ARRAY_TYPES or type(b) in ARRAY_TYPES:   # (a batch of ad.vmap: one product per example)
        return np.sum(np.real(np.conj(a) * b))
    return float(np.real(np.vdot(np.asarray(a), np.asarray(b))))


# -- the tangent store -------------------------------------------------------------------------------------
def tangent_of(obj, t):
    """``t``, or the tangent registered for ``obj`` when ``t`` is None (for a view of an array, the same
    view of the registered tangent of the array that owns its memory)."""
    if t is not None:
        return t
    hit = _registered(obj)
    if hit is None and type(obj) is np.ndarray and obj.base is not None:
        root = memory_owner(obj)
        troot = _registered(root)
        return None if troot is None else _view_of_tangent(root, obj, troot)
    return hit


def _registered(obj):
    hit = current().tangents.get(id(obj))
    return None if hit is None or hit[0] is not obj else hit[1]


def follow_views(y, ty, args, ts):
    """The tangent of a call's result ``y``: when ``y`` is an argument array itself, that argument's tangent,
    and when it is a view of one, the same view of that argument's tangent (so writes through ``y`` reach
    the argument's tangent, as they reach the argument).  Otherwise ``ty``, or a copy of it where it shares
    memory with the tangent of an array among ``args`` (or in a list, tuple or dict among them) that ``y``
    does not share memory with, or where it is read-only and ``y`` is not.  So an array's tangent is never
    another array's, or part of it, unless the arrays share memory themselves, and a write into an array
    writes into a tangent of its own (``x + 0.0``'s tangent has the values of ``x``'s, and is never ``x``'s;
    ``np.linalg.eigh(x)[0]``'s is not a read-only diagonal)."""
    if type(y) in ARRAY_TYPES:   # (an array whose memory is not followed: an argument's own tangent, never another's,
        for a, ta in zip(args, ts):   # and of its kind, so that a write into it writes its tangent in place)
            if a is y:
                return ta
        own = own_tangent(y, ty)
        return ty.copy() if own is ty and ty is not None and any(ta is ty for ta in ts) else own
    if type(y) is not np.ndarray or y.dtype.kind not in "fc":
        return ty
    root = (ty if ty.base is None else memory_owner(ty)) if type(ty) is np.ndarray else None
    shared = False
    for a, ta in zip(args, ts):
        t = type(ta)
        if t is not np.ndarray:
            if root is not None and not shared and (t is list or t is tuple or t is dict):
                shared = _shared(root, memory_owner(y), a, ta)
            continue
        if type(a) is np.ndarray:
            if y is a:
                return ta
            if y.base is not None and memory_owner(y) is memory_owner(a):
                tv = view_within(a, y, ta)
                if tv is not None:
                    return tv
                continue   # (y shares a's memory: its tangent may share a's tangent's)
        if root is not None and (ta if ta.base is None else memory_owner(ta)) is root:
            shared = True
    if root is not None and (shared or not ty.flags.writeable and y.flags.writeable):
        return ty.copy()
    return ty


def _shared(root, yroot, a, ta) -> bool:
    """Whether tangent ``ta`` of ``a``, or the tangent of an item ``a`` holds, is in the memory owned by
    ``root`` while its array is not in the memory owned by ``yroot``."""
    t = type(ta)
    if t is np.ndarray:
        return memory_owner(ta) is root and not (type(a) is np.ndarray and memory_owner(a) is yroot)
    if (t is list or t is tuple) and type(a) in (list, tuple):
        return any(_shared(root, yroot, item, titem) for item, titem in zip(a, ta))
    if t is dict and type(a) is dict:
        return any(_shared(root, yroot, a.get(k), titem) for k, titem in ta.items())
    return False


def mutable(obj, t):
    """The tangent of ``obj`` that its writes update: ``t``, the registered one, or a fresh zero; for a
    view of an array, the same view of the tangent of the array that owns its memory."""
    if type(obj) is np.ndarray and obj.base is not None:
        return _view_tangent(obj, t)
    if type(obj) in ARRAY_TYPES:
        check_write(obj)
    t = tangent_of(obj, t)
    if t is None:
        t = zero_mut(obj) if type(obj) in (list, dict) or is_array(obj) else types.SimpleNamespace()
        if t is None:
            raise UnsupportedError(f"tensorlang.ad.jvp: cannot write a tangent into {type(obj).__name__} "
                                   f"(an integer array written with differentiable values?)")
    elif type(obj) in ARRAY_TYPES and type(t) is not type(obj):   # (a batch whose tangent is the same for
        t = zero_mut(obj) + t   # every example, a plain array: made a batch, which a write changes per example)
    if type(obj) is np.ndarray and type(t) is np.ndarray and not t.flags.writeable:
        t = np.array(t)
    current().tangents[id(obj)] = (obj, t)
    return t


def _view_tangent(v, t):
    """The tangent that a write through view ``v`` updates: the view of the registered tangent of the array
    that owns its memory (made zero when neither has one), or ``t`` when that is itself a view (of the
    tangent that the code holds for that array: ``follow_views``, an item read)."""
    root = memory_owner(v)
    troot = _registered(root)
    if troot is None and t is None:
        troot = mutable(root, None)
    if troot is not None:
        return _view_of_tangent(root, v, troot)
    if type(t) is np.ndarray and t.base is not None and t.flags.writeable:
        return t
    return _view_of_tangent(root, v, None)


def _view_of_tangent(root, v, troot):
    """View ``v`` of array ``root`` taken of ``troot``, ``root``'s tangent; refused where it cannot be."""
    tv = None if troot is None else view_within(root, v, troot)
    if tv is None:
        raise UnsupportedError(f"tensorlang.ad.jvp: a view of shape {v.shape} of an array of shape {root.shape} "
                               f"(written or read after a write) whose tangent cannot be found as the same view "
                               f"of the array's tangent (an array not in C order, or a read-only tangent)")
    return tv


# -- JVP: a call and its tangent -----------------------------------------------------------------------------
def JVP(f, tf, args, ts):
    """``(f(*args), tangent)`` for tangents ``ts`` of ``args`` and ``tf`` of ``f`` itself (a closure's
    captured variables)."""
    if current().tangents:
        ts = tuple(map(tangent_of, args, ts))
    y, ty = _jvp(f, tf, args, ts)
    return y, follow_views(y, ty, args, ts)


def _jvp(f, tf, args, ts):
    try:
        rule = JVP_RULES.get(f)
    except TypeError:
        rule = None
    if rule is not None:
        return rule(args, numpy_filled(f, ts, args))
    if type(tf) is PullbackTangent:
        return call_pullback(f, tf, args[0], ts[0])
    t = type(f)
    if t is types.FunctionType and tf is None and all(x is None for x in ts):
        context = current()
        if not context.tangents and not context.store.boxes:
            return f(*args), None
    paired = REVERSE_RULE_JVP.fn(f, args, numpy_filled(f, ts, args))
    if paired is not None:
        return paired
    try:
        back_rule = RULES.get(f)
    except TypeError:
        back_rule = None
    along = LINEAR.get(back_rule) if back_rule is not None else None
    if along is not None:   # linear (the layout functions): the function along the tangents, complex ones too
        ts = numpy_filled(f, ts, args)   # (a list's tangent of Nones: none)
        return f(*args), None if not any(map(active, ts)) else along(args, {}, ts)
    if back_rule is not None:   # a pullback (also a user's @ad.rule on a Python function) and no forward rule
        return transposed(back_rule, args, ts)
    if t is types.FunctionType:
        return (f(*args), None) if in_table(f, NONDIFF) else code_jvp(f, tf, args, ts)
    if t is types.MethodType or t is types.BuiltinMethodType and _bound_to_object(f):
        return _jvp_bound((), f, tf, args, ts)
    if all(x is None for x in ts) and tf is None or in_table(f, NONDIFF):
        return f(*args), None
    if isinstance(f, type):
        return _construct(f, args, ts)
    if t is functools.partial:
        return partial_jvp(f, tf, (), args, ts)
    if t is CACHED:   # (functools.cache, lru_cache: its function's)
        return JVP(f.__wrapped__, None, args, ts)
    hook = getattr(f, "__ad_jvp__", None)
    if hook is not None:
        return hook(args, ts)
    hook = getattr(f, "__ad_pullback__", None)
    if hook is not None:
        return transposed(hook, args, ts)
    if not any(differentiable(a) for a in args):
        return f(*args), None
    call = getattr(t, "__call__", None)
    if isinstance(call, types.FunctionType):
        return JVP(call, None, (f, *args), (tf, *ts))
    name = getattr(f, "__qualname__", repr(f))
    raise UnsupportedError(f"no forward-mode rule for {getattr(f, '__module__', '') or ''}.{name}; "
                           f"register a pullback with @tensorlang.ad.rule or a JVP with @tensorlang.ad.jvp_rule")


def partial_jvp(p, tp, names, args, ts):
    """The JVP of a call of ``functools.partial`` object ``p`` (tangent ``tp``: None, or a namespace of the
    tangents of its ``args`` and ``keywords``) with ``args``, the last ``len(names)`` of them keywords: its
    function's, with the bound arguments first and the bound keywords that the call does not override."""
    k = len(names)
    kw = {**p.keywords, **dict(zip(names, args[len(args) - k:]))}
    tbound, tkw = _field(tp, "args") or (None,) * len(p.args), _field(tp, "keywords") or {}
    tkw = {**{n: tkw.get(n) for n in p.keywords}, **dict(zip(names, ts[len(ts) - k:]))}
    xs = (*p.args, *args[:len(args) - k], *kw.values())
    txs = (*tbound, *ts[:len(ts) - k], *(tkw.get(n) for n in kw))
    return JVPkw(tuple(kw), p.func, None, xs, txs) if kw else JVP(p.func, None, xs, txs)


def _bound_to_object(f) -> bool:
    owner = getattr(f, "__self__", None)
    return owner is not None and type(owner) is not types.ModuleType


def _jvp_bound(names, f, tf, args, ts):
    """The JVP of a call of bound method ``f`` (keyword arguments ``names``): the method's own with its
    object's tangent, ``tf.__self__`` (a Python method's function, a builtin type's method rule)."""
    obj, tobj = f.__self__, _field(tf, "__self__")
    if type(f) is types.BuiltinMethodType:
        return JVPm(f.__name__, names, obj, tobj, args, ts)
    return (JVPkw(names, f.__func__, None, (obj, *args), (tobj, *ts)) if names
            else JVP(f.__func__, None, (obj, *args), (tobj, *ts)))


def code_jvp(f, tf, args, ts):
    """The JVP of Python function ``f`` by the forward mode of its code (whatever rule ``f`` has)."""
    if takes_extras(f):
        return _jvp_flat(f, tf, args, {}, ts)
    if len(args) != f.__code__.co_argcount and not f.__code__.co_flags & inspect.CO_VARARGS:
        full = with_defaults(f, args)
        args, ts = full, tuple(ts) + (None,) * (len(full) - len(args))
    try:
        entry = TRANSFORM.fn(f, args)
    except NoSourceKept:   # (a function without source: its recording at args)
        return code_jvp(recorded_in_place(f, args, tf), None, args, ts)
    except UnsupportedError as e:
        raise outside_refused(f, e) or e
    return entry(f, tf, *args, *ts)


def _jvp_flat(f, tf, pos, kw, ts):
    """The JVP of a call of Python function ``f`` that has ``*args``, ``**kwargs`` or keyword-only parameters
    (``ts``: the tangents of its positions, then of its keywords): that of its flat twin (``flat``)."""
    twin, args, where = flat_call(f, pos, kw)
    return JVP(twin, tf, args, flat_tangents(args, where, ts))


def active(t):
    """Whether tangent ``t`` is not zero by its structure (a tuple of None is: the tangent of an axes tuple)."""
    return t is not None and (not isinstance(t, (tuple, list)) or any(map(active, t)))


def JVPkw(names, f, tf, args, ts):
    """JVP for a call with keyword arguments (``names`` are the last ``len(names)`` of ``args``)."""
    if current().tangents:
        ts = tuple(map(tangent_of, args, ts))
    y, ty = _jvp_kw(names, f, tf, args, ts)
    return y, follow_views(y, ty, args, ts)


def _jvp_kw(names, f, tf, args, ts):
    if "out" in names and args[len(args) - len(names) + names.index("out")] is not None:
        return _jvp_out(names, args, ts, lambda rest, xs, txs: _jvp_kw(rest, f, tf, xs, txs) if rest
                        else JVP(f, tf, xs, txs))
    k = len(names)
    pos, kw = args[:len(args) - k], dict(zip(names, args[len(args) - k:]))
    tpos, tkw = numpy_filled(f, ts[:len(ts) - k], pos), dict(zip(names, ts[len(ts) - k:]))
    try:
        rule = JVP_RULES.get(f)
    except TypeError:
        rule = None
    if rule is not None:
        if getattr(rule, "keyword_tangents", False):   # the rule takes the keywords' tangents too
            check_keywords(f, rule, names)
            return rule(pos, tpos, tkw=tkw, **kw)
        if any(map(active, tkw.values())) or not _takes(rule, names):
            # (np.dot(a, b=b), np.linalg.solve(a=m, b=v)): by position, as the reverse rule names them
            placed = _by_position(_reverse_rule(f), pos, kw, tpos, tkw)
            if placed is not None:
                return rule(*placed)
            check_keywords(f, rule, names)
            raise UnsupportedError(f"tensorlang.ad.jvp: a differentiable keyword argument of {f!r}")
        return rule(pos, tpos, **kw)
    try:
        back_rule = RULES.get(f)
    except TypeError:
        back_rule = None
    if back_rule is not None:
        check_keywords(f, back_rule, names)
    if in_table(f, NONDIFF):   # called as it is, keywords too (np.eye(n, dtype=bool)), before binding them
        return f(*pos, **kw), None
    if type(f) is types.MethodType or type(f) is types.BuiltinMethodType and _bound_to_object(f):
        return _jvp_bound(names, f, tf, args, ts)
    if type(f) is functools.partial:
        return partial_jvp(f, tf, names, args, ts)
    if type(f) is types.FunctionType and back_rule is None and takes_extras(f):
        return _jvp_flat(f, tf, pos, kw, (*tpos, *tkw.values()))
    if type(f) is types.FunctionType and not (back_rule is not None and _keyword_only(f)):
        # bound to f's parameters (a rule's pullback takes them positionally: not past a keyword-only one)
        sig = inspect.signature(f)
        bound, tbound = sig.bind(*pos, **kw), sig.bind(*tpos, **tkw)
        bound.apply_defaults()
        order = list(sig.parameters)
        full = tuple(bound.arguments[p] for p in order)
        tfull = tuple(tbound.arguments.get(p) for p in order)
        return JVP(f, tf, full, tfull)
    if isinstance(f, type) and plain_dataclass(f):
        y = f(*pos, **kw)
        fields = [fd.name for fd in dataclasses.fields(f)]
        tans = dict(zip(fields, tpos), **tkw)
        return y, make_like(y, tans) if any(v is not None for v in tans.values()) else None
    if isinstance(f, type) and dataclasses.is_dataclass(f):   # (one that computes fields: by its initializer)
        sig = inspect.signature(initializer(f))
        full, _ = by_parameters(initializer(f), pos, kw, names)
        given = sig.bind_partial(None, *tpos, **tkw).arguments
        return _construct(f, full, tuple(given.get(p) for p in list(sig.parameters)[1:]))
    if all(x is None for x in ts):
        return f(*pos, **kw), None
    if isinstance(f, type) and back_rule is None:
        return _construct(f, args, ts, names)
    hook = getattr(f, "__ad_jvp__", None)
    if hook is not None:   # (a compiled tensorlang kernel takes its inputs by name)
        return hook(pos, tpos, kw, tkw)
    along = LINEAR.get(back_rule) if back_rule is not None else None
    if getattr(along, "keyword_tangents", False):   # linear in its arguments, keywords included
        return f(*pos, **kw), along(pos, kw, tpos, tkw)
    if back_rule is not None and not any(map(active, tkw.values())):   # int keywords (axes=([1], [1])) pass
        return transposed(lambda *a: back_rule(*a, **kw), pos, tpos)
    placed = _by_position(back_rule, pos, kw, tpos, tkw)
    if placed is not None:   # a differentiable keyword (np.full_like(x, fill_value=a)): the pullback transposed
        return transposed(back_rule, *placed)
    call = getattr(type(f), "__call__", None)
    if back_rule is None and isinstance(call, types.FunctionType):   # a callable object: its __call__, object first
        return JVPkw(names, call, None, (f, *args), (tf, *ts))
    raise UnsupportedError(f"no forward-mode rule for {qualified_name(f)} called with keyword arguments")


def write_attr(obj, tobj, name, tval):
    """The tangent of ``obj.name = val`` written into ``obj``'s tangent; returns that tangent."""
    tl = mutable(obj, tobj)
    if dataclasses.is_dataclass(tl):
        object.__setattr__(tl, name, tval)
    else:
        setattr(tl, name, tval)
    return tl


def _takes(rule, names) -> bool:
    """Whether forward rule ``rule`` takes keyword arguments ``names`` (``runtime.check_keywords`` passes)."""
    try:
        check_keywords("", rule, names)
    except UnsupportedError:
        return False
    return True


def _reverse_rule(f):
    try:
        return RULES.get(f)
    except TypeError:
        return None


def _by_position(rule, pos, kw, tpos, tkw):
    """A call's arguments and their tangents bound to the parameters of reverse rule ``rule`` (which names them
    as the function does) by name, as positional tuples up to the last one given (the defaults between filled
    in); None where the rule takes ``*args``, ``**kw`` or keyword-only parameters."""
    if type(rule) is not types.FunctionType or rule.__code__.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS) \
            or _keyword_only(rule):
        return None
    sig = inspect.signature(rule)
    try:
        bound, tbound = sig.bind(*pos, **kw), sig.bind_partial(*tpos, **tkw)
    except TypeError:
        return None
    names = list(sig.parameters)
    last = max(names.index(n) for n in bound.arguments)
    bound.apply_defaults()
    return (tuple(bound.arguments[n] for n in names[:last + 1]),
            tuple(tbound.arguments.get(n) for n in names[:last + 1]))


def out_argument(names, args, ts):
    """For a call with ``out=`` among its keyword arguments ``names``: its place in ``args``, whether it is a
    tuple of one array, the array written and its tangent, and the other keyword names."""
    i = len(args) - len(names) + names.index("out")
    out, tout = args[i], ts[i]
    single = type(out) is tuple and len(out) == 1
    target = out[0] if single else out
    if type(target) is not np.ndarray:
        raise UnsupportedError(f"tensorlang.ad differentiates out= only for one array, not {type(out).__name__}")
    return i, single, target, tout[0] if single and tout is not None else tout, tuple(n for n in names if n != "out")


def _jvp_out(names, args, ts, call):
    """A call with ``out=`` (``names`` its keyword names): ``call(names, args, ts)`` without it, its result
    written into ``out`` and its tangent into ``out``'s (as reverse mode's ``structures.with_out``)."""
    i, single, target, tout, rest = out_argument(names, args, ts)
    y, ty = call(rest, (*args[:i], *args[i + 1:]), (*ts[:i], *ts[i + 1:]))
    tl = mutable(target, tout)
    tl[...] = 0 if ty is None else ty
    target[...] = y
    return args[i], (tl,) if single else tl


def _keyword_only(f):
    """Whether Python function ``f`` has keyword-only parameters (``np.full(..., *, like=None)``)."""
    return f.__code__.co_kwonlyargcount > 0


def JVPm(name, kwnames, obj, tobj, args, ts):
    """JVP for ``obj.name(*args)``: forward method rules, module functions, Python methods, then the
    reverse method rules transposed."""
    if current().tangents:
        ts = tuple(map(tangent_of, args, ts))
    y, ty = _jvp_method(name, kwnames, obj, tobj, args, ts)
    return y, follow_views(y, ty, (obj, *args), (tangent_of(obj, tobj), *ts))


def _jvp_method(name, kwnames, obj, tobj, args, ts):
    t = type(obj)
    k = len(kwnames)
    pos, kw = args[:len(args) - k], dict(zip(kwnames, args[len(args) - k:]))
    tpos = ts[:len(ts) - k]
    if name == "_replace" and issubclass(t, tuple) and hasattr(t, "_fields") and not pos:
        tobj = tangent_of(obj, tobj)
        tkw = dict(zip(kwnames, ts[len(ts) - k:]))
        ty = (tobj or t(*(None for _ in t._fields)))._replace(**tkw)
        return obj._replace(**kw), None if all(x is None for x in ty) else ty
    if kw.get("out") is not None:
        return _jvp_out(kwnames, args, ts, lambda rest, xs, txs: _jvp_method(name, rest, obj, tobj, xs, txs))
    rule = JVP_METHOD_RULES.get((np.ndarray if t in ARRAY_TYPES or issubclass(t, np.generic) else t, name))
    # (a batch, a NumPy scalar: an array's rules, as reverse mode's ``runtime.method_rule`` takes them)
    if rule is None and t is not np.ndarray:
        rule = next((JVP_METHOD_RULES[(b, name)] for b in t.__mro__[1:] if (b, name) in JVP_METHOD_RULES), None)
    tkw = dict(zip(kwnames, ts[len(ts) - k:]))
    if rule is not None and getattr(rule, "keyword_tangents", False):   # the rule takes the keywords' tangents too
        return rule(obj, tangent_of(obj, tobj), pos, tpos, tkw=tkw, **kw)
    if any(map(active, tkw.values())) and (rule is not None or (t, name) in METHOD_RULES):
        raise UnsupportedError(f"tensorlang.ad.jvp: a differentiable keyword argument of the method "
                               f"{t.__qualname__}.{name} ({', '.join(n for n in kwnames if active(tkw[n]))})")
    if rule is not None:
        return rule(obj, tangent_of(obj, tobj), pos, tpos, **kw)
    if t is types.ModuleType or ufunc_method(obj, name):
        f = getattr(obj, name)
        return JVPkw(kwnames, f, None, args, ts) if kwnames else JVP(f, None, args, ts)
    if obj is object and name == "__setattr__" and not kwnames:   # (a dataclass's __init__, a frozen one's fields)
        write_attr(args[0], ts[0], args[1], ts[2])
        object.__setattr__(*args)
        return None, None
    attr = inspect.getattr_static(obj, name, None)
    if callable(attr) and not isinstance(obj, type) and name in getattr(obj, "__dict__", ()):
        tf = field(tangent_of(obj, tobj), name)   # (a callable the object holds, not a method: called as it is)
        return JVPkw(kwnames, attr, tf, args, ts) if kwnames else JVP(attr, tf, args, ts)
    if isinstance(attr, staticmethod) or isinstance(attr, types.FunctionType) and isinstance(obj, type):
        # (a static method, or a function read off a class: ``Base.__init__(self, x)``, called as it is)
        attr = getattr(attr, "__func__", attr)
        return JVPkw(kwnames, attr, None, args, ts) if kwnames else JVP(attr, None, args, ts)
    if isinstance(attr, classmethod) and isinstance(obj, type):   # Cls.f(x, k=a): its function, the class first
        f = attr.__func__
        return JVPkw(kwnames, f, None, (obj, *args), (None, *ts)) if kwnames else JVP(f, None, (obj, *args), (None, *ts))
    if isinstance(attr, types.FunctionType):
        tobj = tangent_of(obj, tobj)
        return (JVPkw(kwnames, attr, None, (obj, *args), (tobj, *ts)) if kwnames
                else JVP(attr, None, (obj, *args), (tobj, *ts)))
    bound = getattr(obj, name)
    if tangent_of(obj, tobj) is None and all(x is None for x in ts) or name in NONDIFF_METHODS:
        return bound(*pos, **kw), None
    back_rule = METHOD_RULES.get((t, name))
    if back_rule is not None and (t, name) not in _MUTATING:
        y, back = back_rule(obj, *pos, **kw)
        return transposed(lambda *a: (y, back), (obj, *pos), (tangent_of(obj, tobj), *tpos))
    raise UnsupportedError(f"no forward-mode rule for the method {t.__qualname__}.{name}")


_MUTATING = {(list, "append"), (list, "extend"), (list, "insert"), (list, "pop"), (dict, "update")}


def _field(t, name):
    return None if t is None else getattr(t, name, None)


def _construct(cls, args, ts, names=()):
    """Constructors: dataclasses and named tuples by their fields; other classes by the forward mode of
    ``__init__`` on a fresh object whose tangent is a fresh namespace (``names``: the keywords of the call, the
    last of ``args``, which only such a class is constructed with here)."""
    if names:
        return _initialized(cls, args, ts, names)
    if plain_dataclass(cls):
        y = cls(*args)
        names = [f.name for f in dataclasses.fields(cls) if f.init]
        return y, make_like(y, dict(zip(names, ts)))
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        y = cls(*args)
        return y, cls(*ts)
    return _initialized(cls, args, ts, names)


def _initialized(cls, args, ts, names):
    """An object of class ``cls`` made by the forward mode of its Python ``__init__`` on a fresh object whose
    tangent is a fresh namespace (the keywords ``names`` the last of ``args``)."""
    init = initializer(cls)
    if isinstance(init, types.FunctionType) and cls.__new__ is object.__new__:
        obj = object.__new__(cls)
        tobj = mutable(obj, None)
        if names:
            JVPkw(names, init, None, (obj, *args), (tobj, *ts))
        else:
            JVP(init, None, (obj, *args), (tobj, *ts))
        return obj, tobj
    if not any(differentiable(a) for a in args):
        k = len(args) - len(names)
        return cls(*args[:k], **dict(zip(names, args[k:]))), None
    raise UnsupportedError(f"no forward-mode rule for constructing {cls.__qualname__}"
                           f"{' called with keyword arguments' if names else ''}")


def transposed(rule, args, ts):
    """The JVP of a primitive known only by its reverse rule: its pullback is linear, so the tangent is
    ``J v`` with row ``k`` of ``J`` read off ``back(e_k)`` (one pullback per entry of a real output;
    exact, and cheap for the scalar and small outputs it is used for)."""
    y, back = rule(*args)
    if all(t is None for t in ts):
        return y, None
    ts = tuple(map(filled, ts, args))
    batch = type(y) in ARRAY_TYPES   # (a batch of ad.vmap: the tangent is one too)
    ya = y if batch else np.asarray(y) if type(y) in (float, int) or isinstance(y, (np.ndarray, np.generic)) else None
    if ya is None or ya.dtype.kind not in "fiu":
        raise UnsupportedError(f"tensorlang.ad.jvp: no forward rule for {getattr(rule, '__name__', rule)!r}, "
                               f"and its output ({type(y).__name__}) is not a real number or array, so its "
                               f"pullback cannot be transposed")
    out = y.zeros(ya.shape, float) if batch else np.zeros(ya.shape)
    for k in np.ndindex(ya.shape):
        e = np.zeros(ya.shape)
        e[k] = 1.0
        g = back(e if ya.ndim else 1.0)
        out[k] = sum(inner(gi, ti) for gi, ti in zip(g, ts))
    return y, out if ya.ndim or batch else float(out)
