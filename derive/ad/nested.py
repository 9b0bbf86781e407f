"""Differentiating generated gradient code again (second order): the rules of ``J``, ``Jkw`` and ``Jm``.

Generated code calls ``J(f, *args)`` (``Jkw`` with keyword arguments, ``Jm`` for methods); to a second
differentiation these are calls like any other, and their rules differentiate what they run: f's
generated pullback code when f is Python, or the Python code of f's rule, called positionally by
``call_rule`` (keyword arguments bound to the rule's parameters first).

Rules whose own code is outside the transformed subset (the ``*args`` driver of ``rules.layout``,
``einsum``) declare what their pullback is instead (in ``runtime``), so that it is differentiated without
their code:

* ``LINEAR[rule] = along``: the function is linear in its arguments jointly (its constants aside), so
  its pullback does not depend on them; ``along(args, kw, ts)`` is the function along tangents ``ts``
  (None for "no tangent"), with its constants 0.  The derivative of ``back(dy)`` in ``dy`` is then
  ``along`` of the incoming cotangents;
* ``MULTILINEAR[rule] = positions``: linear in each argument at ``positions(args)`` separately (a
  product); the derivative of ``back(dy)`` in ``dy`` is the sum of the function with one argument
  replaced by its cotangent, and each argument gets the pullback at the arguments with another one
  replaced by its cotangent.

Box methods (``list.append``/``pop`` ...) move gradients through the box store: ``nested_store`` gives
them their rules.
"""
from __future__ import annotations

import inspect
import functools
import types

import numpy as np

from ...errors import BeyondOrder, UnsupportedError
from .analysis import write_free
from .cotangent import dense
from .flat import flat_call, holding, part, shifted, takes_extras
from .nested_store import box_method
from .registry import PAIRS
from .rules import is_nondiff
from .context import current
from .runtime import (BOX_METHODS, CACHED, LINEAR, MULTILINEAR, NONDIFF_METHODS, RULES, TRANSFORM, ZERO, J, Jkw, Jkw_read,
                      Jm, WRITING_RULES, Writes, acc, box_of, check_keywords, differentiable, filled, method_rule,
                      out_method, rule_code_refused, ufunc_method, unfollowed, with_defaults)

# -- the pullbacks handed to generated code -----------------------------------------------------------------------
class Pullback:
    """A pullback in the convention its caller expects: the gradients of ``back(dy)`` at places ``where``
    (-1 for None: J's leading gradient of a rule, a method's arguments after its object ...).  For a
    rule in LINEAR/MULTILINEAR, ``back`` is the rule's own pullback and its arguments are attributes, so
    that the outer differentiation gives them their part of the second derivative.  ``quiet``: ``back`` is a
    rule's own pullback that writes nothing, not called without a cotangent (its gradients are None then), as
    ``runtime.RulePullback`` does.  One object, with no object in its attributes: its gradient is a namespace of
    them."""

    def __init__(self, back, where, rule=None, args=(), kw=None, quiet=False):
        self.back = back
        self.where = where
        self.rule = rule
        self.args = args
        self.kw = kw
        self.quiet = quiet

    def __call__(self, dy):
        if dy is None and self.quiet:
            return (None,) * len(self.where)
        if self.rule is None:
            back = self.back   # (an attribute holding a callable, called as a function)
            g = back(dy)
        else:
            g = declared_back(self.rule, self.args, self.kw, self.back, dy)
        return picked(g, self.where)


def picked(g, where):
    """The entries of ``g`` at ``where`` (None for -1 or past its end; all None when ``g`` is no gradient)."""
    if g is ZERO or g is None:
        return (None,) * len(where)
    return tuple(map(functools.partial(_entry, g), where))


def _entry(g, w):
    """The entry of ``g`` at place ``w``: an index (None for -1 or past its end), or ``(index, item)`` of a tuple or
    dict there (an argument of a call gathered into ``*args`` or ``**kwargs``, ``flat``)."""
    i, key = (w, None) if type(w) is int else w
    if i < 0 or i >= len(g):
        return None
    return g[i] if key is None else part(g[i], key)


def _picked_rule(g, where):
    if g is ZERO or g is None:
        return picked(g, where), lambda d: (None, None)
    def back(d):
        dg = [None] * len(g)
        for k, w in enumerate(where):
            i, key = (w, None) if type(w) is int else w
            if 0 <= i < len(g):
                dg[i] = acc(dg[i], d[k] if key is None else holding(g[i], key, d[k]))
        return tuple(dg), None
    return picked(g, where), back


# -- rules whose code is transformed ----------------------------------------------------------------------------
def call_rule(r, args):
    """``r(*args)``, in the subset the transform handles (no ``*args``)."""
    n = len(args)
    if n == 1:
        return r(args[0])
    if n == 2:
        return r(args[0], args[1])
    if n == 3:
        return r(args[0], args[1], args[2])
    if n == 4:
        return r(args[0], args[1], args[2], args[3])
    if n == 5:
        return r(args[0], args[1], args[2], args[3], args[4])
    if n == 6:
        return r(args[0], args[1], args[2], args[3], args[4], args[5])
    if n == 7:
        return r(args[0], args[1], args[2], args[3], args[4], args[5], args[6])
    return r(args[0], args[1], args[2], args[3], args[4], args[5], args[6], args[7])


_MOST = 8   # the most arguments call_rule passes


def positional(r, pos, kw):
    """``pos`` and ``kw`` bound to the parameters of ``r``, as one positional tuple without the trailing
    defaults, and where each argument (positions, then keywords in order) landed; None if ``r`` takes
    ``*args``, ``**kw`` or keyword-only parameters."""
    sig = inspect.signature(r)
    params = list(sig.parameters.values())
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.KEYWORD_ONLY) for p in params):
        return None
    bound = sig.bind(*pos, **kw)
    names = [p.name for p in params]
    full = [bound.arguments.get(p.name, p.default) for p in params]
    while len(full) > len(pos) and full[-1] is params[len(full) - 1].default \
            and params[len(full) - 1].name not in kw:
        full.pop()
    return tuple(full), list(range(len(pos))) + [names.index(k) for k in kw]


def _through_code(f, r, pos, kw, lead):
    """J of a call of rule ``r`` (or of Python function ``f`` when r is None) by differentiating its code;
    ``lead``: the pullback gives the function's own gradient first (J's convention)."""
    where = list(range(len(pos) + len(kw)))
    if r is None and takes_extras(f):
        f, pos, where = flat_call(f, pos, kw)   # (f's flat twin)
    elif kw:
        bound = positional(r if r is not None else f, pos, kw)
        if bound is None:
            raise BeyondOrder(f"a second differentiation through {_name(f)} called with keyword "
                              f"arguments is not supported")
        pos, where = bound
    if r is None:   # f's generated pullback, f's own gradient first
        if writes_what_it_captures(f):
            raise BeyondOrder(f"a second differentiation through {_name(f)}, a nested function that may write into "
                              f"an object it captures, is not supported")
        if len(pos) < f.__code__.co_argcount and not f.__code__.co_flags & inspect.CO_VARARGS:
            pos = with_defaults(f, pos)   # (defaults filled in, as J does; their gradients dropped)
        spec = TRANSFORM.fn(f, pos)
        if getattr(spec, "refused_again", None):   # a function that ad.grad made, differentiated a third time
            raise BeyondOrder(spec.refused_again)
        (y, back), pb = J(spec.generic.pb, f, *pos)
        for a in pos:   # (a result that is an array argument or a view of one: a write into it is the recording's)
            if type(a) is np.ndarray and any(np.may_share_memory(a, r) for r in _arrays_in(y)):
                lv = current().level
                if id(box_of(a if lv is None else lv.original(a))) in current().store.boxes:   # (f wrote into it)
                    raise BeyondOrder(f"a second differentiation through {_name(f)}, which returns an array "
                                      f"argument it wrote into (or a view of it), is not supported")
                unfollowed(a)
        where = [0] + [shifted(w, 1) for w in where]
        grads = lambda g: (g[1], *_at(g[2:], where[1:], -1))   # noqa: E731
    else:   # the rule's pullback, one gradient per argument
        if len(pos) > _MOST:
            raise BeyondOrder(f"a second differentiation through {_name(f)} with more than {_MOST} "
                              f"arguments is not supported")
        try:
            (y, back), pb = J(call_rule, r, pos)
        except UnsupportedError as e:
            code = getattr(r, "__code__", None)
            if code is None or not str(e).startswith(code.co_filename):   # (not a refusal of the rule's code)
                raise
            raise rule_code_refused(_name(f), e) from None
        where = [-1] + where if lead else where
        grads = lambda g: (None, *_at(_spread(g[2], len(pos)), where[lead:], 0))   # noqa: E731

    def code_back(d):
        dy, dback = (None, None) if d is None else d
        return grads(pb((dy, None if dback is None else getattr(dback, "back", None))))
    # the code may make boxes (a loop's stack of values) whose gradients reach the store and not the pair's
    # cotangent: its pullback runs without a cotangent too, and takes them where they were made
    return (y, Pullback(back, where, quiet=r is not None and r not in WRITING_RULES)), Writes(code_back)


def _arrays_in(y) -> list:
    return [y] if type(y) is np.ndarray else [r for r in y if type(r) is np.ndarray] if type(y) in (list, tuple) \
        else []


def _at(g, where, shift):
    """The gradients of the call's arguments from those ``g`` of the bound parameters."""
    return tuple(_entry(g, shifted(w, shift)) for w in where)


def _spread(g, n):
    return (None,) * n if g is None else tuple(g)


# -- rules that declare their pullback ---------------------------------------------------------------------------
def declared_back(rule, args, kw, back, dy):
    """``back(dy)``, one gradient per argument of ``rule`` (a rule in LINEAR/MULTILINEAR)."""
    return (None,) * len(args) if dy is None else tuple(back(dy))


def _declared_back_rule(rule, args, kw, back, dy):
    g = declared_back(rule, args, kw, back, dy)

    def pb(d):
        n = len(args)
        ts = (None,) * n if d is None else tuple(dense(t) for t in d[:n])
        tkw = {} if d is None else {k: dense(t) for k, t in zip(kw, d[n:]) if t is not None}
        if all(t is None for t in ts) and not tkw:
            return (None,) * 5
        if type(rule) is _KernelPullback:
            dkw, ddy = rule.vjp(kw, dy, d)
            return None, None, dkw, None, ddy
        along = LINEAR.get(rule)
        if tkw and not getattr(along, "keyword_tangents", False):
            raise BeyondOrder(f"a second differentiation through a differentiable keyword argument of "
                              f"{_name(rule)} is not supported")
        if along is not None:
            return None, None, None, None, along(args, kw, ts, tkw) if tkw else along(args, kw, ts)
        ddy, dargs = multilinear_along(rule, args, kw, ts, dy)
        return None, dargs, None, None, ddy
    return g, pb


def multilinear_along(rule, args, kw, ts, dy):
    """For a rule in MULTILINEAR, the derivatives along tangents ``ts`` of its value (the sum of the
    function with one argument replaced by its tangent) and, for ``dy`` not None, of its pullback at
    ``dy`` (each argument's gradient at the arguments with another one replaced by its tangent)."""
    ty, targs = None, [None] * len(args)
    for k in MULTILINEAR[rule](args):
        if ts[k] is None:
            continue
        moved = args[:k] + (ts[k],) + args[k + 1:]
        yk, back_k = rule(*moved, **kw)
        ty = acc(ty, yk)
        if dy is not None:
            gk = back_k(dy)
            for j in MULTILINEAR[rule](args):
                if j != k:
                    targs[j] = acc(targs[j], gk[j])
    return ty, tuple(targs)


def _declared(r, pos, kw, lead):
    """J of a call of a rule in LINEAR/MULTILINEAR, whose pullback is a ``Pullback`` over its arguments
    (``lead``: in J's convention, the function's own gradient first).  A rule with ``by_position`` (the
    layout driver) is called with the keyword arguments that name its positional parameters moved to
    their places, so that they are differentiated as its positional arguments are."""
    bind = getattr(r, "by_position", None)
    full, rest, moved = bind(pos, kw) if bind is not None and kw else (pos, kw, ())
    y, back = r(*full, **rest)
    n = len(full)
    # where each argument of the call (positions, then keywords in call order) is in ``back(dy)``
    where = [*range(len(pos)), *(len(pos) + moved.index(k) if k in moved else n + list(rest).index(k) for k in kw)]

    def pb(d):
        dy, dback = (None, None) if d is None else d
        g = _spread(None if dy is None else back(dy), n + len(rest))
        extra = None if dback is None else getattr(dback, "args", None)
        if extra is not None:
            g = tuple(acc(a, b) for a, b in zip(g, extra))
        extra = None if dback is None else getattr(dback, "kw", None)
        if extra:   # (a kernel's inputs, by name)
            g = g[:n] + tuple(acc(a, extra.get(k)) for a, k in zip(g[n:], rest))
        return (None,) * lead + picked(g, where)
    return (y, Pullback(back, [-1] * lead + where, r, full, rest)), pb


class _KernelPullback:
    """A compiled kernel as a declared rule (``_declared``): called, its ``__ad_pullback__``; its pullback
    differentiated again by ``vjp``, the kernel's ``__ad_pullback_vjp__`` (its adjoint's compiled adjoint).
    (A pair the kernel returned and later code wrote into is refused before this: its values are kept for
    the pullback, ``runtime.keep``.)"""

    def __init__(self, kernel):
        self.kernel = kernel
        self.y = None

    def __call__(self, **kw):
        self.y, back = self.kernel.__ad_pullback__(**kw)
        return self.y, back

    def vjp(self, kw, dy, dgrads):
        dy = tuple(map(dense, dy)) if isinstance(dy, tuple) else dense(dy)
        return self.kernel.__ad_pullback_vjp__(kw, dy, self.y, tuple(map(dense, dgrads)))


def _declared_rule(r):
    """The rule of calling declared rule ``r`` itself (generated code calls rules directly).  What it returns is
    made by ``r``'s primitive, whose pullback does not take the gradients of what it made from the store: the
    code that calls it does (``runtime.made_by_primitive``), as for any primitive."""
    def rule(*args, **kw):
        return _declared(r, args, kw, False)
    rule.made_by_primitive = True
    return rule


_CAPTURED_WRITES: dict = {}   # code -> whether it may write (analysis.write_free)


def writes_what_it_captures(f) -> bool:
    """Whether nested function ``f`` captures an object (a dict, a list, an array ...) and may write (an item, an
    attribute, a method that writes): the transform's second reverse differentiation loses the gradient that
    flows between two of its calls through that object (a Hessian-vector product missing terms, with no error),
    so the entry point differentiates the recording instead."""
    code = f.__code__
    if (f.__module__ or "").startswith("tensorlang."):   # (the functions ad.grad and its kin make)
        return False
    held = [c.cell_contents for c in f.__closure__ or () if filled(c)]
    if not any(isinstance(v, (list, dict, set, np.ndarray)) or hasattr(v, "__dict__") and not callable(v)
               and not isinstance(v, types.ModuleType) and not type(v).__module__.startswith("tensorlang.")
               for v in held):   # (a seed an entry point hands over is tensorlang's own, not the user's)
        return False
    if code not in _CAPTURED_WRITES:
        _CAPTURED_WRITES[code] = write_free(f) is None
    return _CAPTURED_WRITES[code]


def _rule_of(f):
    try:
        return RULES.get(f)
    except TypeError:
        return None


def _call(f, r, pos, kw):
    """J of ``f(*pos, **kw)`` (``r`` its rule or None): ``(pair, pullback)`` in J's convention."""
    if type(f) is functools.partial:
        return _partial_call(f, pos, kw)
    if type(f) is CACHED and any(map(differentiable, (*pos, *kw.values()))):   # (functools.cache, lru_cache)
        return _call(f.__wrapped__, None, pos, kw)
    if r is not None and kw:
        check_keywords(f, r, tuple(kw))
    if r is not None and (r in LINEAR or r in MULTILINEAR):
        return _declared(r, pos, kw, True)
    if r is None and hasattr(f, "__ad_pullback_vjp__") and not pos:   # a compiled kernel
        return _declared(_KernelPullback(f), pos, kw, True)
    if r is None and is_nondiff(f):   # called as it is (np.eye(n, dtype=bool), np.arange(n, dtype=float))
        return (f(*pos, **kw), ZERO), _no_grads
    if r is not None or type(f) is types.FunctionType:
        return _through_code(f, r, pos, kw, True)
    if isinstance(f, type) and not any(map(differentiable, (*pos, *kw.values()))):
        return (f(*pos, **kw), ZERO), _no_grads   # an object made from constants (its fields written later)
    raise BeyondOrder(f"a second differentiation through {_name(f)} is not supported")


def _partial_call(p, pos, kw):
    """J of calling ``functools.partial`` object ``p`` made of constants: J of its function with the bound
    arguments in place (``runtime.partial_call``), whose pullback's gradients are picked for ``pos`` and
    ``kw``; the object itself has no gradient.  A partial that binds a differentiable value is refused."""
    if any(map(differentiable, (*p.args, *p.keywords.values()))):
        raise BeyondOrder("a second differentiation through a functools.partial object that binds a "
                          "differentiable value is not supported; pass the value as an argument")
    keywords = {**p.keywords, **kw}
    n, m = len(p.args), len(pos)
    full = (*p.args, *pos)
    (y, back), inner = _call(p.func, _rule_of(p.func), full, keywords)
    where = [-1, *range(n + 1, n + m + 1), *(n + m + 1 + list(keywords).index(k) for k in kw)]

    def pb(d):
        dy, dback = (None, None) if d is None else d
        g = inner((dy, getattr(dback, "back", None)))
        return ZERO if g is ZERO else picked(tuple(g), where)
    return (y, Pullback(back, where)), pb


def _no_grads(d):
    return ZERO


def _name(f):
    return getattr(f, "__qualname__", None) or repr(f)


def _J_rule(f, *args):
    """J of J (``J(J, f, x)``)."""
    return _call(f, _rule_of(f), args, {})


def _Jkw_rule(names, f, *args):
    """J of Jkw (``J(Jkw, names, f, *args)``)."""
    k = len(names)
    pos, kw = args[:len(args) - k], dict(zip(names, args[len(args) - k:]))
    if kw.get("out") is not None:
        raise BeyondOrder("a second differentiation through out= is not supported")
    pair, pb = _call(f, _rule_of(f), pos, kw)

    def back(d):
        g = pb(d)
        return (None,) * (len(args) + 2) if g is ZERO else (None, *g)   # (ZERO has every item: not unpacked)
    return pair, _writing_as(pb, back)


def _writing_as(pb, back):
    """``back``, a pullback made of ``pb``, run without a cotangent too where ``pb`` is (``Writes``: a call that
    writes into an argument, ``np.put(a, i, v, mode=...)``, whose gradients move through the box store)."""
    return Writes(back) if type(pb) is Writes else back


def _Jkw_read_rule(read, names, f, *args):
    """J of Jkw_read (``J(Jkw_read, read, names, f, *args)``): as of Jkw, every gradient of the call's (the
    second derivative may need those the first left out)."""
    pair, back = _Jkw_rule(names, f, *args)
    return pair, _writing_as(back, lambda d: (None, *back(d)))


def _Jm_rule(name, kwnames, obj, *args):
    """J of Jm (``J(Jm, name, kwnames, obj, *args)``): method rules and module functions."""
    k = len(kwnames)
    pos, kw = args[:len(args) - k], dict(zip(kwnames, args[len(args) - k:]))
    if isinstance(obj, types.ModuleType) or ufunc_method(obj, name):
        f = getattr(obj, name)
        pair, pb = _call(f, _rule_of(f), pos, kw)
        back = lambda d: (None, None, None, *pb(d)[1:])   # noqa: E731
        return pair, _writing_as(pb, back)   # (np.add.at)
    if out_method(name, kwnames, obj, args) is not None:
        raise BeyondOrder(f"a second differentiation through x.{name}(out=...) is not supported: write "
                          f"np.{name}(x, ..., out=...)")
    r = method_rule(obj, name)
    if r is None and (name in NONDIFF_METHODS or not differentiable(obj) and not any(map(differentiable, args))):
        return Jm(name, kwnames, obj, *args), ZERO   # (no derivative: nor has its pullback)
    if r is None:
        raise BeyondOrder(f"a second differentiation through the method {type(obj).__qualname__}.{name} "
                          f"is not supported")
    if kw:
        check_keywords(f"{type(obj).__name__}.{name}", r, kwnames)
    if (type(obj), name) in BOX_METHODS:
        return box_method(name, kwnames, obj, *args)
    if r in LINEAR or r in MULTILINEAR:
        pair, pb = _declared(r, (obj, *pos), kw, False)
    else:
        pair, pb = _through_code(r, r, (obj, *pos), kw, False)
        pb = _drop_first(pb)
    return pair, lambda d: (None, None, *pb(d))


def _drop_first(pb):
    return lambda d: pb(d)[1:]


HIGHER_ORDER = ("tensorlang.ad differentiates to third order (ad.grad(ad.grad(ad.grad(f))), ad.jvp, ad.jacobian or "
                "ad.hessian of ad.grad(ad.grad(f)) or of ad.grad(f)) a function whose calls are of primitives "
                "(arithmetic, math, NumPy): a fourth derivative, and a third derivative through a call of another "
                "Python function or of a compiled kernel, are not supported")


def _beyond(*args, **kw):
    """The rule of the rules above differentiated themselves, and the forward mode of J, Jkw and Jm called by
    gradient code differentiated again (``PAIRS``): a fourth derivative, or a third one through a call that
    f's gradient code makes by J."""
    raise BeyondOrder(HIGHER_ORDER)


# what J, Jkw and Jm return, differentiated again, is made by a primitive where a declared rule runs
# (``_declared``, whose pullback does not take what it made from the store); the code that calls them takes the
# gradients of the items made (``runtime.take_items``), and transformed code finds them taken
for _rule in (_J_rule, _Jkw_rule, _Jkw_read_rule, _Jm_rule):
    _rule.made_by_primitive = True
RULES.update({J: _J_rule, Jkw: _Jkw_rule, Jkw_read: _Jkw_read_rule, Jm: _Jm_rule, declared_back: _declared_back_rule,
              picked: _picked_rule, _J_rule: _beyond, _Jkw_rule: _beyond, _Jkw_read_rule: _beyond, _Jm_rule: _beyond})
PAIRS.update({J: _beyond, Jkw: _beyond, Jkw_read: _beyond, Jm: _beyond})
RULES.update({r: _declared_rule(r) for r in [*LINEAR, *MULTILINEAR]})
