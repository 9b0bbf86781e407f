"""Python functions with ``*args``, ``**kwargs`` or keyword-only parameters, differentiated as their flat twins.

The transforms take a function's parameters by position.  A function that gathers arguments (``def f(x, *rest,
scale=1.0, **opts)``) is differentiated as its *flat twin*: the same code object taking every parameter by
position, in the order Python keeps them among its locals (the positional ones, the keyword-only ones, the
``*args`` tuple, the ``**kwargs`` dict), so that its body runs unchanged.  A call is bound to the twin's parameters
as Python binds it (``inspect.Signature.bind``, defaults filled in), and the gradients (or tangents) of the twin's
parameters are given back to the call's arguments: an argument gathered into ``*args`` or ``**kwargs`` gets its item
of the tuple's or the dict's gradient.  The twin's source is its function's (``source.same_source``); where Python
kept none, the twin is recorded as its function would be.
"""
from __future__ import annotations

import inspect
import types

from ...errors import internal_file, library_file
from .source import same_source

_GATHERING = inspect.CO_VARARGS | inspect.CO_VARKEYWORDS
_USERS: dict[int, tuple[types.CodeType, bool]] = {}   # id(code) -> (code, whether it is the user's)
_TWINS: dict[int, tuple[types.CodeType, types.CodeType]] = {}   # id(code) -> (code, its twin's code)


def takes_extras(f) -> bool:
    """Whether Python function ``f`` is the user's and has ``*args``, ``**kwargs`` or keyword-only parameters
    (tensorlang's own functions, those that ``ad.grad`` makes among them, and the libraries' are differentiated
    by their rules or refused, as they were written)."""
    code = f.__code__
    if not (code.co_kwonlyargcount or code.co_flags & _GATHERING) or "_ad_self" in (f.__kwdefaults__ or ()):
        return False
    known = _USERS.get(id(code))
    if known is None or known[0] is not code:
        known = _USERS[id(code)] = (code, _users(code))
    return known[1]


def _users(code: types.CodeType) -> bool:
    """Whether ``code`` is the user's: not a library's, not tensorlang's own but for the user's nested functions
    that a transform compiled again (under a ``<tensorlang...>`` name, not named ``_ad_...``)."""
    name = code.co_filename
    if library_file(name) or code.co_name.startswith("_ad_"):
        return False
    return name.startswith("<tensorlang") or not internal_file(name)


def _parameters(code: types.CodeType) -> int:
    return code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & inspect.CO_VARARGS) \
        + bool(code.co_flags & inspect.CO_VARKEYWORDS)


def flat_twin(f) -> types.FunctionType:
    """The flat twin of Python function ``f``: its code taking each of its parameters by position, with its
    globals and closure."""
    code = f.__code__
    known = _TWINS.get(id(code))
    if known is None or known[0] is not code:
        twin = code.replace(co_argcount=_parameters(code), co_posonlyargcount=0, co_kwonlyargcount=0,
                            co_flags=code.co_flags & ~_GATHERING)
        same_source(twin, f)
        known = _TWINS[id(code)] = (code, twin)
    g = types.FunctionType(known[1], f.__globals__, f.__name__, None, f.__closure__)
    g.__qualname__ = f.__qualname__
    return g


def flat_call(f, pos: tuple, kw: dict) -> tuple[types.FunctionType, tuple, list]:
    """``(twin, flat, where)``: the call ``f(*pos, **kw)`` as the call ``twin(*flat)`` of f's flat twin, and where
    each argument of the call (its positions, then its keywords in order) landed: a parameter's index, or
    ``(index, item)`` in the ``*args`` tuple or the ``**kwargs`` dict.  A call that does not fit f's signature
    raises Python's ``TypeError``."""
    sig = inspect.signature(f, follow_wrapped=False)   # (its own parameters, not those of what it wraps)
    try:
        bound = sig.bind(*pos, **kw)
    except TypeError as e:
        raise TypeError(f"{f.__qualname__}(): {e}") from None
    bound.apply_defaults()
    code = f.__code__
    names = code.co_varnames[:_parameters(code)]
    flat = tuple(bound.arguments[name] for name in names)
    named = code.co_argcount + code.co_kwonlyargcount
    gathered = named   # (the index of the *args tuple, where there is one; the **kwargs dict follows it)
    kwargs = named + bool(code.co_flags & inspect.CO_VARARGS)
    where: list = [i if i < code.co_argcount else (gathered, i - code.co_argcount) for i in range(len(pos))]
    for k in kw:
        i = names.index(k) if k in names[code.co_posonlyargcount:named] else None
        where.append(i if i is not None else (kwargs, k))
    return flat_twin(f), flat, where


def flat_tangents(flat: tuple, where: list, ts: tuple) -> tuple:
    """The tangents of f's flat twin's parameters (``flat``) from those ``ts`` of a call's arguments (``where``
    each landed, ``flat_call``): a tuple's or dict's tangent of those gathered, None where none is given."""
    out: list = [None] * len(flat)
    gathered: dict = {}   # (the tangents of the *args tuple and the **kwargs dict, by their index)
    for t, w in zip(ts, where):
        if t is None:
            continue
        if type(w) is int:
            out[w] = t
        else:
            i, key = w
            gathered.setdefault(i, [None] * len(flat[i]) if isinstance(flat[i], tuple) else {})[key] = t
    for i, t in gathered.items():
        out[i] = tuple(t) if type(t) is list else t
    return tuple(out)


def call_grads(where: list, g) -> tuple:
    """The gradients of a call's arguments (``where`` each landed, ``flat_call``) from ``g``, those of f's flat
    twin's parameters, one per parameter."""
    return tuple(g[w] if type(w) is int else part(g[w[0]], w[1]) for w in where)


def part(g, key):
    """Item ``key`` of ``g``, the gradient of a tuple or a dict (None when it has none)."""
    if g is None:
        return None
    if isinstance(g, dict):
        return g.get(key)
    return g[key]


def holding(like, key, d):
    """The gradient of a tuple or dict whose gradient is shaped as ``like``, ``d`` at item ``key``, none elsewhere
    (the transpose of ``part``)."""
    if d is None:
        return None
    if isinstance(like, dict):
        return {key: d}
    return tuple(d if k == key else None for k in range(len(like)))


def shifted(w, by: int):
    """Place ``w`` (``flat_call``'s) in a tuple of gradients with ``by`` more in front."""
    return w + by if type(w) is int else (w[0] + by, w[1])
