"""The public API of ``tensorlang.ad`` (LANGUAGE.md section 4), the cache of specialisations, and the
rules that make the layer differentiate its own output (nested derivatives, checkpoints, hooks).
"""
from __future__ import annotations

import inspect
import types

from ...errors import UnsupportedError
from . import rules  # noqa: F401  (registers the rule library)
from .analysis import analyse
from .emit import compile_function
from .lower import lower
from .runtime import HELPERS, RULES, STORE, J, _Store, acc, kind_of
from .source import function_node, unsupported

_FLAGS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE


class Specialisation:
    """One function compiled for one tuple of argument kinds: its SSA IR and generated entry points."""

    def __init__(self, code, ir, grad, pb, source):
        self.code, self.ir, self.grad, self.pb, self.source = code, ir, grad, pb, source


_SPECS: dict = {}   # (code, kinds) -> Specialisation
_FAST: dict = {}    # (code, argument types...) -> the fused gradient function


def specialised(f: types.FunctionType, args) -> Specialisation:
    """The compiled specialisation of ``f`` for the kinds of ``args`` (transformed on first use)."""
    kinds = tuple(map(kind_of, args))
    code = f.__code__
    key = (id(code), kinds)
    spec = _SPECS.get(key)
    if spec is None or spec.code is not code:   # code objects compare by content: key by identity
        spec = _SPECS[key] = _build(f, kinds)
    return spec


def _ir(f, kinds):
    code = f.__code__
    node, filename, text = function_node(f)
    fn = lower(node, filename, text, code.co_freevars, f.__globals__)
    if code.co_flags & _FLAGS:
        what = "'async' functions are" if code.co_flags & inspect.CO_COROUTINE else "generators ('yield') are"
        raise unsupported(what, filename, text, node)
    analyse(fn, kinds)
    return fn, filename, text


def _build(f, kinds) -> Specialisation:
    fn, filename, text = _ir(f, kinds)
    grad, pb, src = compile_function(fn, f.__globals__, f.__qualname__, filename, text)
    return Specialisation(f.__code__, fn, grad, pb, src)


def gradient(f, *args):
    """The gradient of scalar-valued ``f`` at ``args``: a tuple with one entry per argument, mirroring
    its structure; ``None`` for arguments that are not differentiable (ints, strings ...)."""
    outer = STORE[0]
    if outer.boxes:
        STORE[0] = _Store()
    try:
        if type(f) is types.FunctionType and len(args) == f.__code__.co_argcount:
            code = f.__code__
            key = (id(code), type(args[0])) if len(args) == 1 else (id(code), *map(type, args))
            entry = _FAST.get(key)
            if entry is None or entry[0] is not code:
                entry = _FAST[key] = (code, specialised(f, args).grad)
            return entry[1](f, *args)[1:]
        _, back = J(f, *args)
        return tuple(back(1)[1:])
    finally:
        s = STORE[0]
        if s.boxes:
            s.boxes.clear()
            s.grads.clear()
        STORE[0] = outer


def pullback(f, *args):
    """``(y, back)`` where ``back(dy)`` returns the tuple of argument gradients.  The function's own
    gradient (its captured variables, for a closure) is ``back.closure_gradient`` after a call."""
    store = _Store()
    outer, STORE[0] = STORE[0], store
    try:
        y, inner = J(f, *args)
    finally:
        STORE[0] = outer

    def back(dy):
        outer, STORE[0] = STORE[0], store
        store.grads.clear()
        try:
            g = inner(dy)
        finally:
            STORE[0] = outer
        back.closure_gradient = g[0]
        return tuple(g[1:])

    back.closure_gradient = None
    return y, back


def rule(f):
    """Register a custom pullback for ``f``: the decorated function takes f's arguments and returns
    ``(y, back)``, where ``back(dy)`` returns one gradient per argument."""
    def register(r):
        RULES[f] = r
        return r
    return register


class Listing:
    """Printable program text (``str`` gives it)."""

    def __init__(self, text: str):
        self.text = text

    def __str__(self):
        return self.text

    __repr__ = __str__


def code_ir(f, *args) -> Listing:
    """The SSA IR of ``f`` (kinds from ``args`` when given, else unknown)."""
    kinds = tuple(map(kind_of, args)) if args else ("any",) * f.__code__.co_argcount
    return Listing(str(_ir(f, kinds)[0]))


def code_adjoint(f, *args) -> Listing:
    """The generated Python source of f's primal and adjoint (for the kinds of ``args`` when given)."""
    kinds = tuple(map(kind_of, args)) if args else ("any",) * f.__code__.co_argcount
    key = (id(f.__code__), kinds)
    spec = _SPECS.get(key)
    if spec is None or spec.code is not f.__code__:
        spec = _SPECS[key] = _build(f, kinds)
    return Listing(spec.source)


def checkpoint(f, *args):
    """``f(*args)``; under differentiation its values are recomputed in the adjoint, not stored."""
    return f(*args)


def hook(fn, x):
    """``x``; under differentiation the gradient flowing back through it is replaced by ``fn(dx)``."""
    return x


# -- rules of the API itself -------------------------------------------------------------------------------
def _checkpoint_rule(f, *args):
    y = f(*args)
    return y, lambda dy: J(f, *args)[1](dy)


def _hook_rule(fn, x):
    return x, lambda dy: (None, fn(dy))


def _gradient_rule(f, *args):
    """Nested derivatives: differentiate the generated gradient code of ``f`` like any function."""
    if type(f) is not types.FunctionType:
        r = RULES.get(f) if len(args) <= len(_RULE_GRADS) else None
        if r is None:
            raise UnsupportedError(f"nested ad.gradient of {f!r} is not supported")
        y, back = J(_RULE_GRADS[len(args) - 1], r, *args)
        return y, lambda dy: (None, *back(dy)[2:])
    spec = specialised(f, args)
    y, back = J(spec.grad, f, *args)
    return y[1:], lambda dy: back((None, *dy))[1:]


def _J_rule(f, *args):
    """J of J (``J(J, f, x)``): differentiate f's generated pullback code, or a rule's Python code."""
    try:
        r = RULES.get(f)
    except TypeError:
        r = None
    if type(f) is types.FunctionType:
        spec = specialised(f, args)
        y, back = J(spec.pb, f, *args)
        return y, lambda dy: back(dy)[1:]
    if r is not None:
        y, back = J(_call_rule, r, len(args), *args)
        return y, lambda dy: (None, *back(dy)[3:])
    raise UnsupportedError(f"nested differentiation through {f!r} is not supported")


def _call_rule(r, n, *args):
    y, back = r(*args)
    return y, _Padded(back, n)


def _rule_grad1(r, a):
    return r(a)[1](1)


def _rule_grad2(r, a, b):
    return r(a, b)[1](1)


def _rule_grad3(r, a, b, c):
    return r(a, b, c)[1](1)


_RULE_GRADS = [_rule_grad1, _rule_grad2, _rule_grad3]


class _Padded:
    """A rule's pullback in J's convention, written in the subset the transform handles."""

    def __init__(self, back, n):
        self.back = back
        self.n = n

    def __call__(self, dy):
        g = tuple(self.back(dy))
        return (None,) + g + (None,) * (self.n - len(g))


def _deref_rule(f, i):
    name = f.__code__.co_freevars[i]
    return HELPERS["_ad_deref"](f, i), lambda dy: (types.SimpleNamespace(**{name: dy}), None)


def _fngrad_rule(f, values):
    names = f.__code__.co_freevars
    y = HELPERS["_ad_fngrad"](f, values)
    return y, lambda dy: (None, tuple(getattr(dy, n, None) for n in names))


RULES.update({
    HELPERS["_ad_deref"]: _deref_rule, HELPERS["_ad_fngrad"]: _fngrad_rule,
    checkpoint: _checkpoint_rule, hook: _hook_rule, gradient: _gradient_rule,
    J: _J_rule,
    HELPERS["_ad_acc"]: lambda a, b: (acc(a, b), lambda dy: (dy, dy)),
    HELPERS["_ad_addn"]: lambda d, g: (d if g is None else d + g, lambda dy: (dy, None if g is None else dy)),
    HELPERS["_ad_acci"]: lambda v, d, c: (HELPERS["_ad_acci"](v, d, c), lambda dy: (None, dy, dy)),
    HELPERS["_ad_take"]: lambda v, d: (HELPERS["_ad_take"](v, d), lambda dy: (None, dy)),
})
