"""The public API of ``tensorlang.ad`` (LANGUAGE.md section 4), the cache of specialisations, and the
rules that make the layer differentiate its own output (nested derivatives, checkpoints, hooks).
"""
from __future__ import annotations

import ast
import functools
import inspect
import numbers
import textwrap
import threading
import types

import numpy as np

from ...codegen.dask_graph import lazy, like_values
from ... import collector
from ...errors import BeyondOrder, TensorLangError, TypeCheckError, UnsupportedError, user_traceback
from . import rules  # (importing it registers the rule library)
from . import nested  # noqa: F401,E402  (registers the rules of J, Jkw, Jm for second order)
from .analysis import NEVER_ACTIVE, analyse, indexed_by_ints, may_write, restartable, write_free_callee
from .context import Store, current, within
from .emit import compile_function, is_boxfree, scalar_seed
from .flat import flat_call, takes_extras
from .ir import ARR, INT, PYINT, VEC, is_array, spec_kind
from .lower import lowered
from .nested_store import nested_gradient
from .recorded import recorded, recording, stand_in, unshimmed
from .registry import JVP_RULES, PAIRS, refusing
from .runtime import (BUILD_LOCK, HELPERS, RULES, TRANSFORM, J, ZERO, acc, field, field_grad, with_defaults,
                      with_nested_boxes)
from .source import NoSourceKept, kept, unsupported
from .tower import beyond, on_stand_ins
from .tangent import JVP

_FLAGS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE


class Specialisation:
    """One function compiled for one tuple of argument kinds: its SSA IR and generated entry points
    (``emit``), those that return the value too compiled the first time they are asked for (``valued``)."""

    def __init__(self, code, ir, grad, pb, fast, boxfree, source, make_valued, generic=None):
        self.code, self.ir, self.grad, self.pb, self.source = code, ir, grad, pb, source
        self.fast, self.boxfree = fast, boxfree
        self.generic = generic or self   # without assumptions on globals (for nested derivatives)
        self._make_valued, self._valued = make_valued, None

    def valued(self) -> tuple:
        """``(vfast, afast)``: ``emit``'s ``_ad_vfast`` and ``_ad_afast`` (None where the function returns no
        pair written out), compiled by ``make_valued()`` once, by the first thread that asks."""
        made = self._valued
        if made is None:
            with BUILD_LOCK:
                made = self._valued
                if made is None:
                    made = self._valued = self._make_valued()
        return made


class Entry:
    """A cache entry of ``gradient``, for one function's code and argument types: the generated entry it
    runs (``fast``; without a box store of its own where ``boxfree``), and those that ``value_and_grad``
    (``vfast``) and ``has_aux`` (``afast``) run, each at first a stand-in that has the specialisation compile
    them (``Specialisation.valued``), puts them in their places and runs the one it stands for."""

    __slots__ = ("code", "type", "fast", "boxfree", "vfast", "afast", "spec")

    def __init__(self, code, type_, spec):
        self.code, self.type, self.fast, self.boxfree, self.spec = code, type_, spec.fast, spec.boxfree, spec
        self.vfast, self.afast = self._vfast, self._afast

    def _fill(self):
        vfast, afast = self.spec.valued()
        self.afast = afast or _aux_in_own_store
        self.vfast = vfast

    def _vfast(self, f, *args):
        self._fill()
        return self.vfast(f, *args)

    def _afast(self, f, *args):
        self._fill()
        return self.afast(f, *args)


_SPECS: dict = {}   # (code, kinds) -> Specialisation
_FAST: dict = {}    # (id(code), argument types...) -> Entry (its ``type`` the first argument's)
_FAST1: dict = {}   # id(code) -> the same for one-argument functions (the argument type last used)
_SEEN: dict = {}    # (id(code), argument types...) -> the same, every one made


@TRANSFORM.provide
def specialised(f: types.FunctionType, args, fixed=frozenset()) -> Specialisation:
    """The compiled specialisation of ``f`` for the kinds of ``args`` (transformed on first use); ``fixed``:
    the positions of the arguments not differentiated (``analysis.analyse``), whose gradients are None.  A copy
    of a function that a recording reads its globals through (``recorded._shimmed``) is the function's."""
    f = unshimmed(f)
    kinds = tuple(map(spec_kind, args))
    if fixed:   # (those of kinds never differentiated are inactive anyway: the specialisation is shared)
        fixed = frozenset(i for i in fixed if kinds[i] not in NEVER_ACTIVE)
    code = f.__code__
    key = (id(code), kinds, fixed)
    spec = _SPECS.get(key)
    if spec is None or spec.code is not code:   # code objects compare by content: key by identity
        if made_by_grad(f):
            return _GradSpecialisation
        if hasattr(f, "__ad_code__"):
            return ByCode
        refuse_made(f)
        with BUILD_LOCK:   # (built once: another thread may have built it meanwhile)
            spec = _SPECS.get(key)
            if spec is None or spec.code is not code:
                spec = _SPECS[key] = _build(f, kinds, fixed)
    return spec



def refuse_made(f):
    """An ``UnsupportedError`` for a function that says it is not differentiated (``__ad_refused__``: one that
    ``ad.jacobian`` or ``ad.hessian`` made with ``sparse=True``), before its code is read."""
    refused = getattr(f, "__ad_refused__", None)
    if refused is not None:
        raise UnsupportedError(refused)


def analysed_ir(f, kinds, globals_kinds=None, derived=frozenset(), pure=None, fixed=frozenset()):
    """The SSA form of ``f`` analysed for argument ``kinds``; ``pure``: the global functions it calls that are
    assumed to write nothing (name -> what that assumes, ``analysis.write_free``); ``fixed``: as
    ``analysis.analyse`` takes it."""
    code = f.__code__
    fn, node, filename, text = lowered(f)
    if pure:
        fn.pure, fn.purity = pure, tuple(a for assumed in pure.values() for a in assumed)
    if code.co_flags & _FLAGS:
        what = "'async' functions are" if code.co_flags & inspect.CO_COROUTINE else "generators ('yield') are"
        raise unsupported(what, filename, text, node)
    analyse(fn, kinds, globals_kinds, derived, fixed=fixed)
    return fn, filename, text


def _build(f, kinds, fixed=frozenset()) -> Specialisation:
    fn, filename, text = analysed_ir(f, kinds, fixed=fixed)
    spec = _compiled(f, fn, filename, text)
    pure = _write_free_callees(f, fn)
    if pure:   # (a function that calls user code is never box-free: the assumptions below do not apply)
        fn2, _, _ = analysed_ir(f, kinds, pure=pure, fixed=fixed)
        return _compiled(f, fn2, filename, text, spec)
    # Assumptions that make the function box-free or its loops cheaper, checked by its entries once at the
    # start (handing over to the specialisation above when they do not hold): globals that are arrays or
    # ints now (the data of a model: ``X @ w``, ``z[LABEL]``) keep their types (box-free, NumPy and
    # arithmetic only, nothing can rebind a global while it runs); arguments and globals that are 1-D real
    # arrays read at an int index are vectors (their entries ``x[i]`` are numbers, with the inlined scalar
    # rules), and so are the arrays it makes that are read so (checked where they are made: the function
    # is run again by the other specialisation when one is not, so it must have no effect), the int
    # arguments such an index is computed from are Python ints.
    gk = {}
    for ins in fn.values():
        if not spec.boxfree and getattr(ins, "op", None) == "global" and ins.attr in f.__globals__:
            t = type(f.__globals__[ins.attr])
            if t is np.ndarray or t is int:
                gk[ins.attr] = ARR if t is np.ndarray else INT
    read, int_args = indexed_by_ints(fn, kinds)
    assumed = {k: VEC for k in sorted({x.attr[0] for x in read if x.op == "param" and kinds[x.attr[0]] == ARR})}
    assumed.update((k, PYINT) for k in sorted(int_args))
    names = sorted({x.attr for x in read if x.op == "global" and gk.get(x.attr) == ARR
                    and _vector(f.__globals__[x.attr])})
    gk.update((name, VEC) for name in names)
    derived = frozenset(x.id for x in read if x.op not in ("param", "global")) if restartable(fn) else frozenset()
    if not gk and VEC not in assumed.values() and not derived:
        return spec
    kinds2 = tuple(assumed.get(k, kind) for k, kind in enumerate(kinds))
    fn2, _, _ = analysed_ir(f, kinds2, gk, derived, fixed=fixed)
    if not is_boxfree(fn2):
        return spec
    return _compiled(f, fn2, filename, text, spec, gk, assumed)


def _compiled(f, fn, filename, text, generic=None, guard=None, assumed=None) -> Specialisation:
    """The specialisation of ``f`` compiled from IR ``fn``; with ``generic``, one whose entries check the
    assumptions it was analysed under (the functions it calls still the write-free ones, or ``guard`` and
    ``assumed``: ``emit.generate``) and otherwise run the same entry of ``generic`` (in a box store of its own,
    ``_stored``, the ones ``gradient`` runs, where this one is box-free and ``generic`` is not); its
    value-returning entries compiled when first asked for, those of ``generic`` when one of them first falls
    back to it (``_valued_of``)."""
    boxfree = is_boxfree(fn)
    stored = generic is not None and boxfree and not generic.boxfree

    def fallbacks(entries: dict) -> dict | None:
        if generic is None:
            return None
        return {f"_ad_fb_{name}": functools.partial(_stored, run, name != "fast")
                if stored and name not in ("grad", "pb") else run
                for name, run in entries.items()}

    compile_ = functools.partial(compile_function, fn, f.__globals__, f.__qualname__, filename, text, guard)
    grad, pb, fast, src = compile_(fallbacks({"grad": generic.grad, "pb": generic.pb, "fast": generic.fast})
                                   if generic else None, assumed)

    def make_valued():
        later = {name: functools.partial(_valued_of, generic, k) for k, name in enumerate(("vfast", "afast"))}
        return compile_(fallbacks(later) if generic else None, assumed, valued=True)

    return Specialisation(f.__code__, fn, grad, pb, fast, boxfree, src, make_valued, generic)


def _valued_of(spec, k, f, *args):
    """``spec``'s value-returning entry ``k`` (0: ``vfast``, 1: ``afast``) run, compiled first if it is not yet:
    the fallback of a specialisation that assumes more, so compiled only when an assumption fails."""
    return spec.valued()[k](f, *args)


def _write_free_callees(f, fn) -> dict:
    """The module globals that ``f`` calls with arrays (or values that may hold them) and that are bound to
    Python functions that write to nothing (``analysis.write_free``), or to objects that declare they write
    nothing (``__ad_write_free__``: a compiled kernel): name -> what that assumes.  Assuming
    so, ``f`` passes them its arrays without copies (copy on capture), and when it writes nothing itself
    its own array operations get inlined rules; its entries check that the names are bound as they were
    (else the specialisation that assumes nothing runs) and each such call that they still are."""
    out = {}
    for v in fn.values():
        if getattr(v, "op", None) == "call" and may_write(v):
            c = v.args[0]
            g = f.__globals__.get(c.attr) if getattr(c, "op", None) == "global" else None
            if g is not None and c.attr not in out and "out" not in v.attr:
                assumed = write_free_callee(f.__globals__, c.attr, g)
                if assumed is not None:
                    out[c.attr] = assumed
    return out


def _vector(x) -> bool:
    """Whether ``x`` is a 1-D real array (``ir.VEC``); the generated entries check the same."""
    return type(x) is np.ndarray and x.ndim == 1 and x.dtype.kind == "f"


def gradient(f, *args):
    """The gradient of scalar-valued ``f`` at ``args``: a tuple with one entry per argument, mirroring
    its structure; ``None`` for arguments that are not differentiable (ints, strings ...).  An error
    shows the user's frames only (generated code is compiled at the lines of f's source)."""
    # the cached path, kept short (it is the whole per-call overhead): one dict lookup by the identity
    # of the code object, the argument types checked against the entry, the generated entry called; the
    # functions that ``grad`` returns run this code too, the picking put around it (``_picker``)
    try:
        code = getattr(f, "__code__", None)
        if len(args) == 1:
            x, = args
            entry = _FAST1.get(id(code))
            if entry is None or entry.code is not code or type(x) is not entry.type:
                grads = _gradient(f, args)
            elif entry.boxfree:   # the entry touches no store
                run = entry.fast   # (a call of entry.fast is a method lookup, slower on a slot than a local)
                grads = run(f, x)   # (not *args: a star call costs more than a small forward)
            else:
                grads = _with_store(entry.fast, f, args)
        else:
            entry = _FAST.get((id(code), *map(type, args)))
            if entry is None or entry.code is not code:
                grads = _gradient(f, args)
            elif entry.boxfree:
                run = entry.fast
                grads = run(f, *args)
            else:
                grads = _with_store(entry.fast, f, args)
        return grads
    except BeyondOrder as refusal:   # (beyond the orders the transform reaches: of f's recording, ``tower``)
        return _beyond(refusal, lambda r, a: gradient(r, *a), f, args)
    except Exception as err:
        raise err.with_traceback(user_traceback(err.__traceback__))


def _beyond(refusal, run, f, args, kw=None):
    """``tower.beyond``, an error showing the user's frames."""
    try:
        return beyond(refusal, run, f, args, kw)
    except Exception as err:
        raise err.with_traceback(user_traceback(err.__traceback__))


def grad(f, argnums=0, has_aux=False):
    """``jax.grad``: the gradient function of scalar-valued ``f``.  For an int ``argnums``,
    ``grad(f)(*args)`` is the gradient with respect to that argument (``gradient(f, *args)[argnums]``);
    for a tuple of ints, the tuple of those gradients.  The result can be differentiated again
    (``grad(grad(f))``).  See ``_installing`` for the code the returned function runs.
    With ``has_aux``, ``f`` returns a pair ``(value, aux)``: the function returns ``(gradient, aux)``, aux
    not differentiated.  As in JAX, keyword arguments are passed to ``f`` and not differentiated, and an
    int or bool argument in a differentiated position is refused (``refuse_integers``)."""
    name = getattr(f, '__qualname__', repr(f))
    remake = functools.partial(grad, argnums=argnums, has_aux=has_aux)
    if has_aux:
        return _installing(f, _argnums(argnums), "grad_aux", f"grad({name}, has_aux=True)",
                           f"The gradient of {name} (``tensorlang.ad.grad``) in argument(s) {argnums}, and its aux.",
                           remake)
    return _installing(f, _argnums(argnums), None, f"grad({name})",
                       f"The gradient of {name} (``tensorlang.ad.grad``) in argument(s) {argnums}.", remake)


def value_and_grad(f, argnums=0, has_aux=False):
    """``jax.value_and_grad``: a function returning ``(f(*args), grad(f, argnums)(*args))``, both from one
    differentiation; with ``has_aux``, ``f`` returns ``(value, aux)`` and the function
    ``((value, aux), gradient)``.  Keyword arguments are passed to ``f`` and not differentiated."""
    name = getattr(f, '__qualname__', repr(f))
    return _installing(f, _argnums(argnums), "aux" if has_aux else "value", f"value_and_grad({name})",
                       f"The value of {name} and its gradient in argument(s) {argnums} "
                       f"(``tensorlang.ad.value_and_grad``{', has_aux' if has_aux else ''}).",
                       functools.partial(value_and_grad, argnums=argnums, has_aux=has_aux))


def _argnums(argnums):
    if isinstance(argnums, int) and not isinstance(argnums, bool):
        return argnums
    if isinstance(argnums, (tuple, list)) and all(type(i) is int for i in argnums):
        return tuple(argnums)
    raise TensorLangError(f"argnums must be an int or a tuple of ints (argument positions), not {argnums!r}")


def _picked(grads, pick, args):
    try:
        return grads[pick] if isinstance(pick, int) else tuple(grads[i] for i in pick)
    except IndexError:
        raise _no_such_argument(pick, len(args)) from None


def _no_such_argument(pick, n: int) -> TensorLangError:
    return TensorLangError(f"argnums={pick!r} names an argument that the call does not have (it passed {n})")


def made_by_grad(f: types.FunctionType) -> bool:
    """Whether Python function ``f`` is one that ``grad`` returns."""
    own = f.__kwdefaults__
    return own is not None and own.get("_ad_self") is f and own["_ad_i"] is not None and own["_ad_how"] is None


_APIS = {None: "grad", "grad_aux": "grad", "value": "value_and_grad", "aux": "value_and_grad"}


def _checked_gradients(f, pick, how, args, kw):
    """What the function that ``_installing(f, pick, how)`` makes gives for ``args`` and keywords ``kw``, every
    case handled: an int argument at a picked position refused, keywords passed to ``f`` (JAX's conventions;
    where ``pick`` is None, ``gradient(f, *args)``, no keywords), each gradient as its argument is
    (``as_arguments``); beyond the orders the transform reaches, of f's recording (``tower``)."""
    if not kw:
        f = on_stand_ins(f, args)
    try:
        return _checked(f, pick, how, args, kw)
    except BeyondOrder as refusal:
        return beyond(refusal, lambda r, a: _checked(r, pick, how, a, {}), f, args, kw)


def _checked(f, pick, how, args, kw):
    if pick is None:
        if kw:
            raise TypeError(f"gradients({getattr(f, '__qualname__', 'f')}) got keyword arguments {sorted(kw)}: "
                            f"it takes positional arguments only")
        return gradient(f, *args)
    refuse_integers(_APIS[how], f, args, (pick,) if isinstance(pick, int) else pick)
    g, full = with_keywords(f, args, kw) if kw else (f, args)
    if how is None:   # (the arguments left out of ``pick``, and keywords, not differentiated: ``_gradient``)
        return _as_picked(_gradient(g, full, pick=_positive(pick, len(args)))[:len(args)], pick, args)
    y, grads = _valued_with_store(g, full, how != "value")
    picked = _as_picked(grads[:len(args)], pick, args)
    return (picked, y[1]) if how == "grad_aux" else (y, picked)


def _as_picked(grads, pick, args):
    """The gradients in the arguments at ``pick`` of ``grads``, those of every argument, each as its
    argument is (``as_arguments``), zeros where a number's or a float array's gradient is None (the function
    does not depend on it there), as ``jax.grad`` gives them."""
    return _picked_zeros(as_arguments(grads, args), pick, args)


def _picked_zeros(grads, pick, args):
    """The gradients at ``pick`` of ``grads``, those of every argument, zeros where one is None
    (``_zeros_for_none``): what ``grad(f)(*args)`` gives."""
    return _picked(tuple(map(_zeros_for_none, grads, args)), pick, args)


def _zeros_for_none(g, x):
    """Gradient ``g`` of argument ``x``; where it is None, the zero of a float or complex number or array ``x``
    (of its type and dtype), and a tuple, list or dict of them as the same container of zeros (None for an entry
    that is neither)."""
    if g is not None:
        return g
    t = type(x)
    if t is float or t is complex:
        return t(0)
    if t is np.ndarray and x.dtype.kind in "fc" or isinstance(x, np.inexact):
        return np.zeros_like(x)[()] if t is not np.ndarray else np.zeros_like(x)
    if t in (tuple, list):
        return t(_zeros_for_none(None, v) for v in x)
    if t is dict:
        return {k: _zeros_for_none(None, v) for k, v in x.items()}
    return None


def as_arguments(grads: tuple, args: tuple) -> tuple:
    """The gradients of ``args`` as the arguments are where a gradient or an argument is lazy (Dask's;
    ``codegen.dask_graph.like_values``): a Dask argument's a Dask array in its chunks, a NumPy argument's
    computed."""
    return like_values(grads, args) if lazy(grads) or lazy(args) else grads


def with_keywords(f, args, kw):
    """The call ``f(*args, **kw)`` as ``(g, full)``, a function and positional arguments whose first
    ``len(args)`` are ``args``, so that differentiating ``g`` at ``full`` differentiates ``f`` in ``args`` and
    not in the keywords (JAX's convention): a Python function with its keywords bound to its parameters
    (defaults filled in); a function made by ``grad`` as ``grad`` of its function, so bound; any other
    callable as ``functools.partial(f, **kw)``."""
    if type(f) is types.FunctionType:
        own = f.__kwdefaults__ or {}
        if made_by_grad(f):   # (grad of its function bound so, at every order; else partial of it, below)
            inner, full = with_keywords(own["_ad_f"], args, kw)
            if type(inner) is not functools.partial:
                return grad(inner, own["_ad_i"]), full
        elif takes_extras(f):   # (its flat twin, where the arguments differentiated come first in it)
            twin, full, where = flat_call(f, args, kw)
            if where[:len(args)] == list(range(len(args))):
                return twin, full
        else:
            bound = inspect.signature(f).bind(*args, **kw)
            bound.apply_defaults()
            if not bound.kwargs:
                return f, bound.args
    return functools.partial(f, **kw), args


def refuse_integers(api, f, args, positions):
    """JAX's convention for the arguments that ``grad``, ``value_and_grad``, ``jacobian`` and ``hessian``
    differentiate (``positions``): an int or a bool (a Python or NumPy scalar, or an array of an integer or
    bool dtype) is a ``TypeCheckError`` naming it, not a None or float gradient (``gradient``, Zygote's form,
    gives ints None)."""
    for i in positions:
        if not -len(args) <= i < len(args):
            continue   # (argnums beyond the arguments: refused where the gradient is picked)
        got = _integral(args[i])
        if got is not None:
            code = getattr(f, "__code__", None)
            k = i % len(args)
            name = f" ({code.co_varnames[k]})" if code is not None and k < code.co_argcount else ""
            raise TypeCheckError(f"ad.{api}({getattr(f, '__qualname__', repr(f))}): argument {k}{name} is {got[0]}, "
                                 f"and {api} requires real- or complex-valued inputs (input dtype that is a sub-dtype "
                                 f"of np.inexact), but got {got[1]}; pass it as a float, or leave it out of argnums")


def _integral(x):
    """``(what x is, its dtype)`` for an int or bool (a Python or NumPy scalar, an array), else None."""
    if type(x) is bool:
        return "a bool", "bool"
    if isinstance(x, int):
        return "an int", "int"
    if isinstance(x, (np.integer, np.bool_)):
        return f"a NumPy {x.dtype}", str(x.dtype)
    if is_array(x) and x.dtype.kind in "biu":
        return f"an array of dtype {x.dtype}", str(x.dtype)
    return None


_THIRD_ORDER = ("a third derivative of a function whose code calls ad.grad or ad.gradient (ad.grad(ad.grad(f)) of an f "
                "that calls ad.grad, ad.gradient of a function that calls ad.gradient of one that does) is not "
                "supported: ad.grad(ad.grad(ad.grad(f))) of f itself is")


class _GradSpecialisation:
    """What ``specialised`` gives for a function made by ``grad``: its pullback differentiates
    ``gradient(f, *args)`` (the rule of nested gradients) and passes the cotangent of the picked
    gradients through, so ``grad(grad(f))``, ``grad(grad(grad(f)))`` (``gradient_code``) and a ``grad(f)``
    called inside a differentiated function work; this pullback's own code is not differentiated again
    (``refused_again``).  Its forward entry ``jvp`` (what
    ``forward.specialised_jvp`` gives for it) is the forward mode of ``gradient(f, *args)``, forward over
    reverse as ``hvp``, with the picked gradients' tangents."""

    refused_again = _THIRD_ORDER

    @staticmethod
    def pb(g, *args):
        f, pick = g.__kwdefaults__["_ad_f"], g.__kwdefaults__["_ad_i"]
        grads, back = J(gradient, f, *args)
        y = _picked_zeros(grads, pick, args)

        def back_picked(dy):
            full = [None] * len(args)  # the cotangent of every gradient: zero but for the picked ones
            picks, dys = ((pick,), (dy,)) if isinstance(pick, int) else (pick, dy)
            for i, d in zip(picks, dys):
                full[i] = d
            _, df, *dargs = back(tuple(full))
            return (None if df is None else types.SimpleNamespace(_ad_f=df), *dargs)

        return y, back_picked

    @staticmethod
    def jvp(g, tg, *values):
        """``(g(*args), tangent)`` for ``values``, the arguments then their tangents."""
        args, ts = values[:len(values) // 2], values[len(values) // 2:]
        f, pick = g.__kwdefaults__["_ad_f"], g.__kwdefaults__["_ad_i"]
        refuse_integers("grad", f, args, (pick,) if isinstance(pick, int) else pick)
        grads, tgrads = JVP(gradient, None, (f, *args), (field(tg, "_ad_f"), *ts))
        return _picked_zeros(grads, pick, args), None if tgrads is None else _picked(tgrads, pick, args)


_GradSpecialisation.generic = _GradSpecialisation   # (it assumes nothing about globals)


class ByCode:
    """What ``specialised`` gives for a function that carries the code it is differentiated by,
    ``__ad_code__(n)`` for ``n`` positional arguments (one that ``ad.jacobian`` or ``ad.hessian`` made:
    ``probed``): that code's pullback and forward mode, the gradient of the function's closure passed through.
    Differentiating it again differentiates a Jacobian twice, or a Hessian: refused (``refused_again``)."""

    refused_again = ("a third or higher derivative through a function made by ad.jacobian or ad.hessian (ad.hessian "
                     "of a function that calls one, ad.grad of ad.grad of it, a Hessian differentiated twice) is not "
                     "supported; a second one (ad.jacobian, ad.jvp or ad.grad of a Jacobian) is")

    @staticmethod
    def pb(g, *args):
        return J(g.__ad_code__(len(args)), *args)

    @staticmethod
    def jvp(g, tg, *values):
        """``(g(*args), tangent)`` for ``values``, the arguments then their tangents."""
        args, ts = values[:len(values) // 2], values[len(values) // 2:]
        return JVP(g.__ad_code__(len(args)), tg, args, ts)


ByCode.generic = ByCode


def gradients(f):
    """The gradient function of scalar-valued ``f`` in every argument: ``gradients(f)(*args)`` equals
    ``gradient(f, *args)``.  See ``_installing`` for how it specialises itself on its first call.  Like
    ``jax.grad`` it differentiates ``f`` as it is at that first call: rebinding ``f.__code__`` afterwards is
    not seen."""
    name = getattr(f, '__qualname__', repr(f))
    return _installing(f, None, None, f"gradients({name})",
                       f"The gradients of {name} in every argument (``gradient(f, *args)``).", gradients)


def _installing(f, pick, how, qualname, doc, remake):
    """The function that ``grad(f, pick)`` (``how`` None), ``grad(f, pick, has_aux=True)`` (``"grad_aux"``),
    ``value_and_grad(f, pick)`` (``"value"``, ``"aux"`` with ``has_aux``) and ``gradients(f)`` (``pick`` None)
    return.  Its first call without keywords replaces its code by code specialised for the argument types
    of that call, ``pick`` and ``how``: a function of ``float``/``int`` arguments with one basic block of
    inlined arithmetic and ``math`` calls gets a tight straight-line gradient that computes and returns
    the picked gradients only (and the value, for ``value_and_grad``; ``straight.py``); any other function
    the code of ``_picker(pick, how)``.  Both check their arguments as cheaply as they can and hand any call
    they do not cover (other types, keywords, integers at picked positions, lazy gradients) over to
    ``_checked_gradients``.  Its keyword-only defaults (``_ad_self``, ``_ad_f``, ``_ad_i``, ``_ad_how``: the
    function itself, ``f``, ``pick`` and ``how``) never change, and the code it gets reads positional
    defaults only, which are set first: another thread that calls it meanwhile runs either code with what
    that code reads.  ``remake(h)`` makes the same function of ``h`` (a level of a tower: ``tower``)."""
    g = types.FunctionType(_grad_first.__code__, _grad_first.__globals__, qualname.replace(
        getattr(f, "__qualname__", ""), getattr(f, "__name__", "f")))
    g.__kwdefaults__ = {"_ad_self": g, "_ad_f": f, "_ad_i": pick, "_ad_how": how}
    g.__qualname__ = qualname
    g.__doc__ = doc
    g.__wrapped__ = f
    g.__ad_remake__ = remake
    g.__ad_source__ = None
    return g


def _grad_first(*args, _ad_self, _ad_f, _ad_i, _ad_how, **kw):
    # the code of a fresh ``_installing`` function: it replaces itself on its first call without keywords
    try:
        result = _checked_gradients(_ad_f, _ad_i, _ad_how, args, kw)
    except Exception as err:
        raise err.with_traceback(user_traceback(err.__traceback__))
    if not kw:
        _install(_ad_self, _ad_f, _ad_i, _ad_how, args)
    return result


_INSTALL_LOCK = threading.Lock()


def _install(g, f, pick, how, args):
    from .straight import compile_straight
    fast = None
    if type(f) is types.FunctionType and args and len(args) == f.__code__.co_argcount and not f.__defaults__ \
            and not takes_extras(f) \
            and how in (None, "value") and kept(f):
        types_ = tuple(map(type, args))
        if all(t is float or t is int for t in types_) and float in types_:
            fast = compile_straight(specialised(f, args).ir, types_, f, _with_code(_picker(pick, how), g),
                                    _positive(pick, len(args)), how == "value")
    if fast is None:
        fast = _picker(pick, how)
    with _INSTALL_LOCK:
        if g.__code__ is _grad_first.__code__:   # (not installed by another thread meanwhile)
            g.__ad_source__ = getattr(fast, "__ad_source__", None)
            g.__defaults__ = fast.__defaults__   # (the code of _grad_first reads no positional defaults)
            g.__code__ = fast.__code__


def _with_code(code_of, g):
    """A function with the code of function ``code_of`` and the keyword-only defaults of ``g``."""
    out = types.FunctionType(code_of.__code__, code_of.__globals__, g.__name__, code_of.__defaults__)
    out.__kwdefaults__ = g.__kwdefaults__
    out.__qualname__ = g.__qualname__
    return out


def _positive(pick, n):
    """``pick`` (None, an int, a tuple of ints) with its positions in ``range(n)`` (an error naming a position the
    call does not have)."""
    if pick is None:
        return pick
    if any(not -n <= i < n for i in ((pick,) if isinstance(pick, int) else pick)):
        raise _no_such_argument(pick, n)
    return pick % n if isinstance(pick, int) else tuple(i % n for i in pick)


_ndarray = np.ndarray
# the gradients a picker returns as they are (None, where a picked argument has none, is made zeros: ``_as_picked``)
_EAGER = frozenset({float, complex, np.ndarray, np.float64, np.float32, np.complex128, np.complex64})
_PICKERS: dict = {}   # (pick, how) -> a function whose code ``_installing`` functions for those run


def _picker(pick, how):
    """A function (of this module's globals) whose code an ``_installing`` function for ``pick`` and ``how``
    runs when no straight-line code fits (it reads the keyword-only defaults ``_ad_f``, ``_ad_i``,
    ``_ad_how``).  When no keywords are passed and every picked argument is a float or an array of a float
    or complex dtype (so that none is refused), it runs ``gradient``'s own code, the cached path (for
    ``grad``: ``how`` None; for ``value_and_grad`` and ``has_aux`` the same code calling the entry that
    returns the value too, ``_valued_code``), and returns the picked gradients where they are eager (no
    Dask collection for ``as_arguments`` to convert); any other call goes to ``_checked_gradients``.  The
    code is that of ``gradient`` with those lines put in before it and at the place of its last statement,
    so that an error shows the same frames, and beyond the orders the transform reaches the same function of
    f's recording (``tower``)."""
    made = _PICKERS.get((pick, how))
    if made is not None:
        return made
    checked = "    return _checked_gradients(_ad_f, _ad_i, _ad_how, args, kw)\n"
    if pick is None:
        before, after = f"if kw:\n{checked}", "return grads\n"
    else:
        picks = (pick,) if isinstance(pick, int) else pick
        need = max(i if i >= 0 else -i - 1 for i in picks) + 1 if picks else 0
        covered = "".join(f" and ((t := type(args[{i}])) is float or t is _ndarray and args[{i}].dtype.kind in 'fc')"
                          for i in picks)
        eager = " and ".join(f"type(grads[{i}]) in _EAGER" for i in picks) or "True"
        picked = f"grads[{pick}]" if isinstance(pick, int) else f"({''.join(f'grads[{i}], ' for i in picks)})"
        before = f"if kw or not (len(args) >= {need}{covered}):\n{checked}"
        valued = {None: "{}", "value": "(y, {})", "aux": "(y, {})", "grad_aux": "({}, y[1])"}[how]
        after = (("y, grads = grads\n" if how else "") + f"if {eager}:\n    return {valued.format(picked)}\n"
                 f"return {valued.format('_as_picked(grads, _ad_i, args)')}\n")
    lines, first = inspect.getsourcelines(gradient)
    tree = ast.parse(textwrap.dedent("".join(lines)))
    ast.increment_lineno(tree, first - 1)
    node = tree.body[0]
    node.name = "_ad_picker"
    node.args = ast.parse("def _(*args, _ad_self, _ad_f, _ad_i, _ad_how, **kw): pass").body[0].args
    trying = next(x for x in node.body if isinstance(x, ast.Try))
    if pick is not None:
        _picked_entries().visit(trying)
    trying.body[-1:] = _placed(ast.parse(after).body, trying.body[-1])
    trying.body[:0] = _placed(ast.parse(before + "f = _ad_f\n").body, trying)
    handler = next(h for h in trying.handlers if isinstance(h.type, ast.Name) and h.type.id == "BeyondOrder")
    handler.body = _placed(ast.parse("return _beyond(refusal, lambda r, a: _checked(r, _ad_i, _ad_how, a, {}), "
                                     "_ad_f, args, kw)").body, handler.body[0])
    node.body = [_valued_code("vfast" if how == "value" else "afast").visit(trying) if how else trying]
    ns: dict = {}
    exec(compile(ast.fix_missing_locations(tree), gradient.__code__.co_filename, "exec"), globals(), ns)
    made = _PICKERS[pick, how] = ns["_ad_picker"]
    made.__ad_source__ = None
    return made


class _picked_entries(ast.NodeTransformer):
    """``gradient``'s code made to run the entries specialised for ``grad``'s ``argnums`` (``_ad_i``): the
    cache looked up with it in the key (``(id(code), _ad_i, *types)``) and ``_gradient`` passed it, so that the
    arguments left out are not differentiated (``_gradient``'s ``pick``)."""

    def visit_Call(self, node):
        self.generic_visit(node)
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "_FAST" \
                and f.attr == "get":
            node.args[0].elts.insert(1, ast.copy_location(ast.Name("_ad_i", ast.Load()), node))
        elif isinstance(f, ast.Name) and f.id == "_gradient":
            node.keywords.append(ast.keyword("pick", ast.copy_location(ast.Name("_ad_i", ast.Load()), node)))
        return node


class _valued_code(ast.NodeTransformer):
    """``gradient``'s code made to give ``(y, gradients)``: each entry run is the cache entry's ``k``
    (``"vfast"``: ``emit``'s ``_ad_vfast``, ``"afast"``: its ``_ad_afast``) in place of its ``fast``,
    ``_gradient`` is asked for that one and ``_with_store`` for a value."""

    def __init__(self, k):
        self.k = k

    def visit_Attribute(self, node):
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id == "entry" and node.attr == "fast":
            node.attr = self.k
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in ("_gradient", "_with_store"):
            node.args.append(ast.copy_location(ast.Constant(self.k if node.func.id == "_gradient" else True), node))
        return node


def _placed(statements, where):
    """``statements`` with every node at the place of node ``where``."""
    for statement in statements:
        for node in ast.walk(statement):
            if "lineno" in node._attributes:
                ast.copy_location(node, where)
    return statements


def _gradient(f, args, k="fast", pick=None):
    """``gradient`` off the fast path: specialise (or go through ``J``), fill the cache, and run the
    entry (the cache ``Entry``'s ``k``: ``fast`` the gradients, ``vfast`` ``(y, gradients)``, ``afast`` the
    same with ``has_aux``, for the code of ``value_and_grad`` and ``grad(has_aux=True)``, ``_picker``) with
    a box store of its own unless it is box-free.  ``pick``: ``grad``'s ``argnums`` (``_picker``'s code passes
    it), the arguments it leaves out not differentiated where that is sound (``analysis.analyse``'s
    ``fixed``), their gradients None; cached under a key with ``pick``."""
    if type(f) is types.FunctionType and len(args) == f.__code__.co_argcount and args and not made_by_grad(f) \
            and not takes_extras(f):
        code = f.__code__
        key = (id(code), type(args[0])) if len(args) == 1 else (id(code), *map(type, args)) if pick is None \
            else (id(code), pick, *map(type, args))
        entry = _SEEN.get(key)
        if entry is None or entry.code is not code:
            fixed = frozenset()
            if pick is not None:
                picked = _positive(pick, len(args))
                fixed = frozenset(range(len(args))) - frozenset((picked,) if isinstance(picked, int) else picked)
            try:
                spec = specialised(f, args, fixed)
            except NoSourceKept:   # (a function without source: its recording at args, not cached)
                return _gradient(recorded(f, args, fixed), args, k, pick)
            entry = _SEEN[key] = Entry(code, type(args[0]), spec)
        if len(args) == 1:
            _FAST1[id(code)] = entry
        else:
            _FAST[key] = entry
        run = getattr(entry, k)
        return run(f, *args) if entry.boxfree else _with_store(run, f, args, k != "fast")
    return _with_store(_BY_J[k], f, args, k != "fast")


def _gradient_by_J(f, *args):
    return _value_and_gradients(f, args, False)[1]


def _valued_by_J(f, *args):
    return _value_and_gradients(f, args, False)


def _aux_by_J(f, *args):
    return _value_and_gradients(f, args, True)


_BY_J = {"fast": _gradient_by_J, "vfast": _valued_by_J, "afast": _aux_by_J}


def _aux_in_own_store(f, *args):
    """The has_aux entry of a function whose generated code has none (it returns no pair written out):
    ``_aux_by_J`` in a box store of its own, box-free or not."""
    return _valued_with_store(f, args, True)


def _value_and_gradients(f, args, aux):
    """``(y, gradients)``: the value of ``f`` at ``args`` and the gradients of the arguments, from one
    differentiation by ``J`` (in the current box store); with ``aux``, ``y`` is a pair ``(value, aux)`` and
    only the value is differentiated."""
    y, back = J(f, *args)
    if not aux:
        return y, _argument_grads(back(scalar_seed(y)), args)
    if not (isinstance(y, (tuple, list)) and len(y) == 2):
        raise TensorLangError(f"with has_aux=True, {getattr(f, '__qualname__', 'f')} must return a pair "
                              f"(value, aux), not {type(y).__name__}")
    return y, _argument_grads(back(type(y)((scalar_seed(y[0]), None))), args)


def _argument_grads(g, args):
    """The argument gradients of a pullback's result (None for each when f has no derivative: ZERO)."""
    return (None,) * len(args) if g is ZERO else tuple(g[1:])


def _with_store(run, f, args, valued=False):
    """``run(f, *args)``, the gradients of ``args`` (``valued``: ``(y, gradients)``), with a box store of its
    own (``_in_own_store``)."""
    return _in_own_store(_run_with_nested_boxes, run, f, args, valued)


def _stored(run, valued, f, *args):
    return _with_store(run, f, args, valued)


def _run_with_nested_boxes(run, f, args, valued):
    if valued:
        y, grads = run(f, *args)
        return y, with_nested_boxes(args, grads)
    return with_nested_boxes(args, run(f, *args))


def _valued_with_store(f, args, aux):
    """``_value_and_gradients(f, args, aux)`` with a box store of its own (``_in_own_store``)."""
    return _with_store(_aux_by_J if aux else _valued_by_J, f, args, True)


def _in_own_store(run, *args):
    """``run(*args)`` with a box store of its own, the cyclic garbage collector paused meanwhile: the values
    the adjoint reads (the stack, the pullbacks' closures) are live until it ends, and each full collection
    would scan all of them again, a cost per step that grew with the number of steps
    (``tensorlang.collector``)."""
    with collector.paused():
        return within(current().but(store=Store()), run, *args)


def pullback(f, *args):
    """``(y, back)`` where ``back(dy)`` returns the tuple of argument gradients.  The function's own
    gradient (its captured variables, for a closure) is ``back.closure_gradient`` after a call.  Each call
    of ``back`` has gradients of its own for the boxes of the forward pass, so calls may overlap (threads)."""
    store = Store()
    try:
        y, inner = within(current().but(store=store), J, f, *args)
    except BeyondOrder as refusal:   # (beyond the orders the transform reaches: of f's recording, ``tower``)
        return _beyond(refusal, lambda r, a: pullback(r, *a), f, args)
    except Exception as err:
        raise err.with_traceback(user_traceback(err.__traceback__))

    def back(dy):
        try:
            g = within(current().but(store=Store(store.boxes)), _pulled_back, inner, dy, args)
        except BeyondOrder as refusal:
            back.closure_gradient = None
            return _beyond(refusal, lambda r, a: pullback(r, *a)[1](dy), f, args)
        except Exception as err:
            raise err.with_traceback(user_traceback(err.__traceback__))
        back.closure_gradient = g[0]
        return tuple(g[1:])

    back.closure_gradient = None
    return y, back


def _pulled_back(inner, dy, args):
    g = inner(dy)
    return (g[0], *with_nested_boxes(args, _argument_grads(g, args)))


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
    kinds = tuple(map(spec_kind, args)) if args else ("any",) * f.__code__.co_argcount
    return Listing(str(analysed_ir(f, kinds)[0]))


def code_adjoint(f, *args) -> Listing:
    """The generated Python source of f's primal and adjoint (for the kinds of ``args`` when given)."""
    kinds = tuple(map(spec_kind, args)) if args else ("any",) * f.__code__.co_argcount
    key = (id(f.__code__), kinds)
    spec = _SPECS.get(key)
    if spec is None or spec.code is not f.__code__:
        spec = _SPECS[key] = _build(f, kinds)
    return Listing(spec.source)


def code_recording(f, *args) -> Listing:
    """The recording of ``f`` at ``args`` (``recorded``): what tensorlang.ad differentiates in the place of a
    function without source, a straight-line function of the same arguments."""
    return Listing(recording(f, args)[0])


def stop_gradient(x):
    """``x`` as a constant: its derivative is zero in every mode (``jax.lax.stop_gradient``).  A number is
    returned as it is; an array is copied, and a tuple, list or dict is made anew around its entries so
    treated, so that neither a write nor a derivative passes between ``x`` and the result (the layer follows
    arrays and containers by identity)."""
    t = type(x)
    if t is np.ndarray:
        return x.copy()
    if t is tuple or t is list:
        return t(map(stop_gradient, x))
    if t is dict:
        return {k: stop_gradient(v) for k, v in x.items()}
    if isinstance(x, (numbers.Number, np.generic, str)) or x is None:
        return x
    raise UnsupportedError(f"ad.stop_gradient of {t.__qualname__} is not supported: numbers, arrays, and tuples, "
                           f"lists and dicts of them are")


rules.mark_nondiff(stop_gradient)


def checkpoint(f, *args):
    """``f(*args)``; under differentiation its values are recomputed in the adjoint, not stored."""
    return f(*args)


def hook(fn, x):
    """``x``; under differentiation the gradient flowing back through it is replaced by ``fn(dx)``."""
    return x


# -- rules of the API itself -------------------------------------------------------------------------------
def _grad_rule(f, argnums=0):
    """``grad(f)`` made inside a differentiated function: the gradient that reaches the function it
    returns (through ``_GradSpecialisation``) is the gradient of ``f``, e.g. of the variables it closes over."""
    return grad(f, argnums), lambda dg: (field(dg, "_ad_f"),)


def _checkpoint_rule(f, *args):
    before = [(a, a.copy()) for a in args if type(a) is np.ndarray]
    y = f(*args)
    if any(not np.array_equal(a, c, equal_nan=True) for a, c in before):   # (the recomputation would start from them)
        raise UnsupportedError(f"ad.checkpoint of a function that writes into its array arguments "
                               f"({getattr(f, '__qualname__', f)}) is not supported: the adjoint recomputes it "
                               f"from them; write into a copy (x = x.copy())")
    return y, lambda dy: J(f, *args)[1](dy)


def _hook_rule(fn, x):
    return x, lambda dy: (None, fn(dy))


def _gradient_rule(f, *args):
    """Nested derivatives: differentiate the gradient code of ``f`` (``gradient_code``) like any function."""
    n = len(args)
    if type(f) is types.FunctionType and n < f.__code__.co_argcount and not made_by_grad(f):
        args = with_defaults(f, args)   # (defaults filled in, as ad.gradient does)
    f = stand_in(f, args)
    y, back = nested_gradient(lambda: J(gradient_code(f, args), f, *args), args)
    if type(f) is types.FunctionType and made_by_grad(f):   # (a third derivative)
        back = _defined(back, args)
    return y[1:n + 1], lambda dy: back((None, *dy, *(None,) * (len(args) - n)))[1:n + 2]


def _defined(back, args):
    return lambda dy: defined(back(dy), args, dy)


def defined(g, *inputs):
    """``g``, a third derivative computed from ``inputs``, refused where it has a NaN they do not: the second
    derivative's code makes a product with an infinite or undefined partial derivative 0 where the other factor
    is 0 (the strong product, ``rules.operators.times``), and its derivative there is not known to be right."""
    if _has_nan(g) and not _has_nan(inputs):
        raise UnsupportedError("a third derivative at a point where a partial derivative of the function is "
                               "infinite or undefined (np.power(0.0, y) for y < 1) is not supported: it came "
                               "out NaN")
    return g


def _has_nan(v) -> bool:
    if isinstance(v, (tuple, list)):
        return any(map(_has_nan, v))
    return isinstance(v, (float, complex, np.inexact, np.ndarray)) and bool(np.any(np.isnan(v)))


def gradient_code(f, args):
    """A Python function ``code(f, *args) -> (df, *dargs)``, the gradients of ``f`` at ``args`` (``df``: of what f
    closes over), in the subset the transform takes, so that differentiating it differentiates ``f`` once more:
    f's generated gradient code; for a function that ``grad`` made, ``_grad_of_grad``, which differentiates
    the gradient code of the function it was made from, so that each order is the code of the one below
    differentiated; for a primitive with a rule, the rule's pullback called (``_by_rule``)."""
    n = len(args)
    if type(f) is types.FunctionType and made_by_grad(f):
        pick = f.__kwdefaults__["_ad_i"]
        if not isinstance(pick, int) or not 0 < n <= len(_GRAD_OF_GRAD):
            raise BeyondOrder(f"a third or higher derivative (ad.grad of {f.__qualname__}) is supported for "
                              f"ad.grad of one picked argument (an int argnums) and 1 to {len(_GRAD_OF_GRAD)} "
                              f"arguments, not argnums={pick!r} and {n} arguments")
        return _GRAD_OF_GRAD[n - 1]
    if hasattr(f, "__ad_code__"):
        raise BeyondOrder(ByCode.refused_again)
    if type(f) is types.FunctionType:
        if n != f.__code__.co_argcount:   # (ad.gradient and its forward mode fill the defaults in first)
            raise BeyondOrder(f"a third derivative of {f.__qualname__} called without its arguments that have "
                              f"defaults is not supported: pass them")
        return specialised(f, args).generic.grad
    r = RULES.get(f) if 0 < n <= len(_BY_RULE) else None
    if r is not None:
        return _BY_RULE[n - 1]
    if (isinstance(f, functools.partial) or isinstance(getattr(type(f), "__call__", None), types.FunctionType)) \
            and not hasattr(f, "__ad_pullback__") and 0 < n <= len(_BY_CALL):   # (a kernel has its own)
        return _BY_CALL[n - 1]
    raise UnsupportedError(f"nested ad.gradient of {f!r} is not supported")


def _grad_of_grad1(g, a):
    """The gradient code (``gradient_code``) of ``g = grad(f)`` at one argument: J of f's gradient code, pulled
    back from the gradient that ``g`` picks.  Differentiated again (the transform takes its code), it gives
    the next order: the J of f's gradient code becomes J of J, whose rule differentiates that gradient code's
    own generated pullback (``nested``)."""
    f = stand_in(inner_function(g), (a,))
    y, back = J(gradient_code(f, (a,)), f, a)
    d = back(_picked_seed(g, y))
    return _closure_gradient(d[1]), d[2]


def _grad_of_grad2(g, a, b):
    f = stand_in(inner_function(g), (a, b))
    y, back = J(gradient_code(f, (a, b)), f, a, b)
    d = back(_picked_seed(g, y))
    return _closure_gradient(d[1]), d[2], d[3]


def _grad_of_grad3(g, a, b, c):
    f = stand_in(inner_function(g), (a, b, c))
    y, back = J(gradient_code(f, (a, b, c)), f, a, b, c)
    d = back(_picked_seed(g, y))
    return _closure_gradient(d[1]), d[2], d[3], d[4]


_GRAD_OF_GRAD = [_grad_of_grad1, _grad_of_grad2, _grad_of_grad3]


def inner_function(g):
    """The function that ``grad`` made ``g`` from."""
    return g.__kwdefaults__["_ad_f"]


def _closure_gradient(df):
    """The gradient of a function that ``grad`` made, from ``df``, that of the function it was made from."""
    return None if df is None else types.SimpleNamespace(_ad_f=df)


def _picked_seed(g, y):
    """The cotangent of ``y``, the gradients ``(df, *dargs)`` of the function that ``grad`` made ``g`` from: the
    seed of the scalar gradient that ``g`` picks, None for the others."""
    pick = g.__kwdefaults__["_ad_i"] % (len(y) - 1)
    return (None,) * (pick + 1) + (scalar_seed(y[pick + 1]),) + (None,) * (len(y) - pick - 2)


def _by_rule1(f, a):
    return None, RULES[f](a)[1](1)[0]


def _by_rule2(f, a, b):
    g = RULES[f](a, b)[1](1)
    return None, g[0], g[1]


def _by_rule3(f, a, b, c):
    g = RULES[f](a, b, c)[1](1)
    return None, g[0], g[1], g[2]


_BY_RULE = [_by_rule1, _by_rule2, _by_rule3]


# the gradient code of a callable object or a functools.partial: that of a function calling it, which the
# transform reads (the call goes through the object's __call__, or the partial's function, as at first order)
def _call1(f, a):
    return f(a)


def _call2(f, a, b):
    return f(a, b)


def _call3(f, a, b, c):
    return f(a, b, c)


def _by_call1(f, a):
    return specialised(_call1, (f, a)).generic.grad(_call1, f, a)[1:]


def _by_call2(f, a, b):
    return specialised(_call2, (f, a, b)).generic.grad(_call2, f, a, b)[1:]


def _by_call3(f, a, b, c):
    return specialised(_call3, (f, a, b, c)).generic.grad(_call3, f, a, b, c)[1:]


_BY_CALL = [_by_call1, _by_call2, _by_call3]


def _third_order(*args, **kw):
    raise BeyondOrder(_THIRD_ORDER)


def _deref_rule(f, i):
    name = f.__code__.co_freevars[i]
    return HELPERS["_ad_deref"](f, i), lambda dy: (field_grad(f, name, dy), None)


def _fngrad_rule(f, values):
    names = f.__code__.co_freevars
    y = HELPERS["_ad_fngrad"](f, values)
    return y, lambda dy: (None, tuple(getattr(dy, n, None) for n in names))


# forward over reverse through a call of ad.gradient (the gradient code of a function that calls it, under
# forward mode): a third derivative of a function that calls ad.grad
PAIRS[gradient] = refusing(gradient, "forward over reverse", _THIRD_ORDER, BeyondOrder)
rules.mark_nondiff(gradient_code)
rules.mark_nondiff(specialised)
rules.mark_nondiff(stand_in)
rules.mark_nondiff(_picked_seed)
JVP_RULES.update({inner_function: lambda args, ts: (inner_function(*args), field(ts[0], "_ad_f")),
                  _closure_gradient: lambda args, ts: (_closure_gradient(*args), _closure_gradient(ts[0]))})
_VALUE_AND_GRAD_INSIDE = ("ad.value_and_grad(f) inside a function being differentiated: call f(...) and "
                          "ad.grad(f)(...) there")
RULES[value_and_grad] = refusing(value_and_grad, "reverse", _VALUE_AND_GRAD_INSIDE)
JVP_RULES[value_and_grad] = refusing(value_and_grad, "forward", _VALUE_AND_GRAD_INSIDE)
RULES.update({
    inner_function: lambda g: (inner_function(g), lambda df: (_closure_gradient(df),)),
    _closure_gradient: lambda df: (_closure_gradient(df), lambda d: (field(d, "_ad_f"),)),
    HELPERS["_ad_deref"]: _deref_rule, HELPERS["_ad_fngrad"]: _fngrad_rule,
    checkpoint: _checkpoint_rule, hook: _hook_rule, gradient: _gradient_rule, grad: _grad_rule,
    _gradient_rule: _third_order, _grad_rule: _third_order,
    HELPERS["_ad_acc"]: lambda a, b: (acc(a, b), lambda dy: (dy, dy)),
    HELPERS["_ad_addn"]: lambda d, g: (d if g is None else d + g, lambda dy: (dy, None if g is None else dy)),
    HELPERS["_ad_like"]: lambda x, g: (HELPERS["_ad_like"](x, g), lambda dy: (None, dy)),
})
