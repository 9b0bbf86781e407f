"""Data structures: attribute and item access (cons-cell rules: the gradient of ``first(C)`` is
``cons(dy, 0)``), and mutation by the box rules: ``x[i] = v``, ``o.a = v``, ``append``, ``pop``,
``extend``, ``insert``, ``update`` register the object as a box and their pullbacks take the gradient of
the written slot out of the box.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import operator
import types

import numpy as np

from ....errors import BeyondOrder, UnsupportedError
from ..context import current
from ..cotangent import Indexed, basic_index, dense
from ..ir import CONST_KIND, INT, is_array, kind_of, memory_of, writable_array
from ..registry import JVP_RULES, LINEAR, refusing
from ..runtime import (ARRAY_TYPES, BOX_METHODS, HELPERS, KEYWORD_RULES, NONDIFF, NONDIFF_METHODS, RULES, J, Jkw,
                       METHOD_RULES, TRANSFORM, WRITING_RULES, ZERO, acc, box_grad, field, field_grad, is_complex,
                       make_like, own, part_of, register, rewound, summed_to, unbroadcast, untracked)
from .layout import concatenator_getitem, like_entries

AxisConcatenator = type(np.r_).__mro__[1]   # the class of np.r_ and np.c_


class _Like:
    """What an item pullback keeps of its container: its type and its length or shape and dtype."""

    __slots__ = ("kind", "n", "shape", "dtype")

    def __init__(self, obj):
        t = type(obj)   # a subclass of dict or list (defaultdict, OrderedDict ...) has a plain dict or list
        self.kind = t if t is np.ndarray or isinstance(obj, tuple) else dict if isinstance(obj, dict) else list
        if self.kind is np.ndarray:
            self.shape, self.dtype = obj.shape, np.result_type(obj.dtype, 0.0)
        elif self.kind is not dict:
            self.n = len(obj)


def index_grad(like: _Like, idx, dy):
    """The gradient of the container when only its item ``idx`` has gradient ``dy``."""
    k = like.kind
    if k is dict:
        return {idx: dy}
    if k is np.ndarray:
        if type(dy) in (list, tuple):   # (the items' gradients of a list made of the part read: L.extend(x[:2]))
            dy = _as_part(like, idx, dy)
        return Indexed.at(like.shape, like.dtype, idx, dy)
    g = _with_item(like.n, idx, dy)
    if k is list:
        return g
    return k._make(g) if hasattr(k, "_make") else tuple(g)   # a named tuple, or a tuple


def _as_part(like: _Like, idx, items) -> np.ndarray:
    """The gradients ``items`` of the rows of ``x[idx]`` (an array ``like`` describes) as one array (zero for None)."""
    part = np.zeros(np.empty(like.shape, dtype=bool)[idx].shape, like.dtype)
    for i, d in enumerate(items):
        if d is not None:
            part[i] = dense(d)
    return part


def _with_item(n: int, idx, dy) -> list:
    """The gradients of the ``n`` items of a list or tuple where its item (or slice) ``idx`` has ``dy``."""
    g = [None] * n
    g[idx] = dy
    return g


def _entry(g, idx):
    """Item ``idx`` of gradient ``g`` of a container (None if it has none)."""
    if g is None:
        return None
    if type(g) is dict:
        return g.get(idx)
    return dense(g)[idx] if type(g) is Indexed else g[idx]


def _builtin_items(obj, name) -> bool:
    """Whether ``obj`` is a list or dict (or a subclass of one) whose method ``name`` is the builtin's."""
    return isinstance(obj, (list, dict)) and not isinstance(getattr(type(obj), name, None), types.FunctionType)


def _opaque(obj, what):
    """The pullback of ``what`` (an item access) of an object of a class without rules: an error naming the
    class once a gradient reaches it (``runtime.untracked``)."""
    return untracked(f"{what} a {type(obj).__name__} ({type(obj).__module__}.{type(obj).__qualname__})")


def getitem(obj, idx):
    t = type(obj)
    if t is tuple:   # (the common case first: a function's results unpacked)
        n = len(obj)
        return obj[idx], lambda dy: (None, None) if dy is None else (tuple(_with_item(n, idx, dy)), None)
    if t in (list, dict, np.ndarray) or isinstance(obj, tuple) or _builtin_items(obj, "__getitem__"):
        like = _Like(obj)
        return obj[idx], lambda dy: (None, None) if dy is None else (index_grad(like, idx, dy), None)
    if t is np.flatiter or type(memory_of(obj)) is np.flatiter:
        # x.flat[i] (a recording's stand-in's too): an item of x.reshape(-1), whose gradient is the flat iterator's
        return getitem(obj.base.reshape(-1), idx)
    if t in ARRAY_TYPES:   # (a batch of ad.vmap: its gradient a batch too)
        return obj[idx], lambda dy: (None, None) if dy is None else (_scattered(obj, idx, dy), None)
    if isinstance(obj, AxisConcatenator):
        return concatenator_getitem(obj, idx)
    m = getattr(t, "__getitem__", None)
    if isinstance(m, types.FunctionType):
        y, back = J(m, obj, idx)
        return y, lambda dy: back(dy)[1:]
    y = obj[idx]
    return y, ZERO if kind_of(y) in (INT, CONST_KIND) else _opaque(obj, "reading an item of")


def _scattered(obj, idx, dy):
    """The gradient of array ``obj`` (of a type of ``ARRAY_TYPES``) where its item ``idx`` has gradient ``dy``: an
    indexed cotangent where ``dy`` is a batch too (the reads of one batch scattered into one buffer, once), else
    scattered by NumPy's ``add.at`` into a batch of zeros."""
    dtype = np.result_type(obj.dtype, 0.0)
    if type(dy) in ARRAY_TYPES:
        return Indexed.at(obj.shape, dtype, idx, dy)
    g = np.zeros_like(obj, dtype=dtype)
    np.add.at(g, idx, dy)
    return g


def _written_grad(g, idx, val):
    """The gradient of ``val`` in ``a[idx] = val`` from the gradient ``g`` of ``a`` after the write: the
    slots it wrote (the last write wins where a fancy index repeats), summed down to ``val``'s shape."""
    dv = np.copy(g[idx])
    if not basic_index(idx):
        computed = any(type(i) in ARRAY_TYPES for i in (idx if type(idx) is tuple else (idx,)))
        # (an index that is a recording's stand-in, np.argsort's: the last writes found of g's kind, recorded too)
        last = np.full_like(g, -1, dtype=np.intp) if computed else np.full(g.shape, -1)
        last[idx] = np.arange(dv.size).reshape(dv.shape)
        dv = np.where(last[idx] == np.arange(dv.size).reshape(dv.shape), dv, 0)
    if isinstance(val, (list, tuple)):   # (y[[0, 1]] = [a, b]: the gradient in the form of the list, item by item)
        return like_entries(val, summed_to(dv, np.shape(val)))
    return unbroadcast(dv, val) if np.ndim(dv) else dv[()]


def flat_places(flat, idx) -> tuple:
    """The array ``flat`` iterates over (``x.flat``) and the index into it of the places flat index ``idx`` names."""
    base = flat.base
    return base, np.unravel_index(np.arange(base.size)[idx], base.shape)


def setitem(obj, idx, val):
    t = type(obj)
    if t is np.ndarray or t in ARRAY_TYPES or _builtin_items(obj, "__setitem__"):
        register(obj)
        before = _overwritten(obj, idx, val)
        obj[idx] = val
        return None, Clear(obj, idx, val, before)
    if t is np.flatiter:   # x.flat[i] = v: a write into x at the places the flat index names (no view of x)
        return setitem(*flat_places(obj, idx), val)
    m = getattr(t, "__setitem__", None)
    if isinstance(m, types.FunctionType):
        y, back = J(m, obj, idx, val)
        return y, lambda dy: back(dy)[1:]
    if kind_of(val) not in (INT, CONST_KIND) and not isinstance(val, (list, tuple, dict)):
        _opaque(obj, "writing a number or array into")(val)
    obj[idx] = val
    return None, ZERO


def getattr_(obj, name):
    if name in ("real", "imag") and is_complex(obj):
        return RULES[np.real if name == "real" else np.imag](obj)
    t = type(obj)
    if t is np.ndarray or isinstance(obj, np.generic) or t in ARRAY_TYPES and _absent(obj, name):
        return _array_attr(obj, name)   # (a NumPy scalar's as a 0-d array's; a stand-in of a recording: its value's)
    if name == "__dict__":
        raise UnsupportedError("tensorlang.ad does not differentiate an object's attributes read or written "
                               "through its __dict__ (use obj.name or setattr)")
    fget = getter(obj, name)
    if fget is not None:
        y, back = J(fget, obj)
        return y, lambda dy: back(dy)[1:]
    if computed_attribute(obj, name):
        return _first_of(J(t.__getattr__, obj, name))
    y = getattr(obj, name)
    if isinstance(obj, types.ModuleType) or isinstance(y, type):
        return y, ZERO
    if getattr(y, "__self__", None) is obj:   # a bound method: its gradient's __self__ is obj's
        return y, _bound_method_back
    return y, lambda dy: (None,) if dy is None else (field_grad(obj, name, dy),)


def getter(obj, name):
    """The Python function that computes ``obj.name`` where its class makes it a property, or a
    ``functools.cached_property`` not cached yet (differentiated at each read: a cached value written into the
    object would be read back as a constant); None otherwise."""
    static = getattr(type(obj), name, None)
    if isinstance(static, property):
        return static.fget
    if isinstance(static, functools.cached_property) and name not in getattr(obj, "__dict__", ()):
        return static.func
    return None


def computed_attribute(obj, name) -> bool:
    """Whether ``obj.name`` is computed by its class's ``__getattr__`` (a Python function; not a stand-in's or a
    batch's, which reads its value's)."""
    return type(obj) not in ARRAY_TYPES and isinstance(getattr(type(obj), "__getattr__", None), types.FunctionType) \
        and _absent(obj, name)


def _first_of(call):
    """``(y, back)`` of a call ``f(obj, ...)`` as the rule of a function of ``obj`` alone."""
    y, back = call
    return y, lambda dy: back(dy)[1:2]


def _absent(obj, name) -> bool:
    """Whether ``obj`` has no attribute ``name`` short of its class's ``__getattr__``."""
    return inspect.getattr_static(obj, name, _absent) is _absent


def _bound_method_back(dy):
    return (field(dy, "__self__"),)


# the attributes of an array that hold no entries of it (``x.imag`` of a real array: zeros)
ARRAY_CONSTANT_ATTRIBUTES = frozenset({"shape", "size", "ndim", "dtype", "strides", "itemsize", "nbytes", "flags",
                                       "imag", "device", "__array_priority__", "__array_interface__", "__class__"})


def _array_attr(x, name):
    if name == "T":
        return x.T, lambda dy: (None if dy is None else np.transpose(dy),)
    if name == "mT":
        return x.mT, lambda dy: (None if dy is None else np.swapaxes(dy, -1, -2),)
    if name == "real":
        return x.real, lambda dy: (dy,)
    if name == "flat":
        return x.flat, lambda dy: (_flat_grad(x, dy),)
    y = getattr(x, name)
    if getattr(y, "__self__", None) is x:
        return y, _bound_method_back
    # (another attribute of an array, x.base: its gradient has nowhere to go, refused once one reaches it)
    plain = name in ARRAY_CONSTANT_ATTRIBUTES or type(memory_of(x)) is not np.ndarray
    return y, ZERO if plain else untracked(f"the attribute {name} of an array")


def _flat_grad(x, dy):
    """The gradient of ``x`` from that of ``x.flat``: an array of its entries in a row, or, where the rules' own
    code read the iterator's ``base`` and was differentiated again, a namespace whose ``base`` is ``x``'s."""
    if dy is None:
        return None
    if type(dy) is types.SimpleNamespace:
        dy = getattr(dy, "base", None)
        if dy is None:
            return None
    return np.reshape(dense(dy), x.shape)


def setattr_(obj, name, val):
    own_setattr = type(obj).__setattr__
    if isinstance(own_setattr, types.FunctionType):   # the class's own __setattr__, transformed in turn
        y, back = J(own_setattr, obj, name, val)
        return y, lambda dy: (lambda g: (g[1], g[3]))(back(None))
    y, back = store_attr(obj, name, val, setattr)
    return y, lambda dy: (lambda g: (g[0], g[2]))(back(dy))


def store_attr(obj, name, val, write=object.__setattr__, at=2):
    """``object.__setattr__``: a property's setter (transformed in turn), else a write by the box rules (the
    gradient of ``val`` at place ``at`` of what the write's pullback gives)."""
    static = getattr(type(obj), name, None)
    if isinstance(static, property) and isinstance(static.fset, types.FunctionType):
        y, back = J(static.fset, obj, val)
        return y, lambda dy: (lambda g: (g[1], None, g[2]))(back(None))
    register(obj)
    write(obj, name, val)
    return None, ClearAttr(obj, name, at)


# -- list and dict methods (box rules) ---------------------------------------------------------------------
def _append(lst, x):
    register(lst)
    lst.append(x)
    return None, Cut(lst, None, 1)


def extend_list(lst, xs):
    register(lst)
    n = len(lst)
    lst.extend(xs)
    return None, CutTail(lst, n, len(lst) - n, type(xs))


def _insert(lst, i, x):
    register(lst)
    lst.insert(i, x)
    return None, Cut(lst, i if i >= 0 else max(len(lst) - 1 + i, 0), 2)


def _pop(lst, i=-1):
    register(lst)
    n = len(lst)
    y = lst.pop(i)
    return y, Put(lst, n, i if i >= 0 else n + i, y)


# -- the pullbacks of writes: operations on the gradient of the object written (in the box store) -------------
# Each is called with the cotangent of the write's result (its first-order pullback, on the current store), and
# has a ``transpose`` for a second differentiation (``nested_store``): from the cotangent ``a`` of the object's
# gradient after the call (``form``: its length for a list, shape and dtype for an array) and ``dd`` of what
# the call returned, the cotangent of the object's gradient before the call and of ``dy``.
def _at(dd, i):
    return None if dd is None or i >= len(dd) else dd[i]


def _set_key(a: dict, k, v):
    if v is None:
        a.pop(k, None)
    else:
        a[k] = v


class Cut:
    """An item appended (``pos`` None) or inserted at ``pos``: its gradient, for argument ``at`` of the call,
    is cut out of the list's."""

    __slots__ = ("obj", "pos", "at")

    def __init__(self, obj, pos, at):
        self.obj, self.pos, self.at = obj, pos, at

    def _place(self, last):
        return last if self.pos is None else min(self.pos, last)

    def __call__(self, dy):
        items = rewound(self.obj)
        if items:
            items.pop(self._place(len(items) - 1))
        g = box_grad(self.obj)
        if g is None:
            return (None,) * (self.at + 1)
        return (None,) * self.at + (g.pop(self._place(len(g) - 1)),)

    def transpose(self, a, n, dd):
        a = [None] * n if a is None else list(a)
        a.insert(self._place(n), _at(dd, self.at))
        return a, None


class CutTail:
    """``extend``: the gradients of the ``m`` items after the first ``n``, cut out of the list's (a tuple for
    a tuple argument)."""

    __slots__ = ("obj", "n", "m", "kind")

    def __init__(self, obj, n, m, kind):
        self.obj, self.n, self.m, self.kind = obj, n, m, kind

    def __call__(self, dy):
        del rewound(self.obj)[self.n:]
        g = box_grad(self.obj)
        if g is None:
            return (None, None)
        tail = g[self.n:]
        del g[self.n:]
        return (None, tuple(tail) if self.kind is tuple else tail)

    def transpose(self, a, n, dd):
        dt = _at(dd, 1)
        a = [None] * n if a is None else list(a)
        a.extend([None] * self.m if dt is None else list(dt))
        return a, None


class Put:
    """``pop`` of item ``pos`` of a list of ``n``: the popped value's gradient ``dy`` is put back in its place."""

    __slots__ = ("obj", "n", "pos", "item")

    def __init__(self, obj, n, pos, item):
        self.obj, self.n, self.pos, self.item = obj, n, pos, item

    def __call__(self, dy):
        rewound(self.obj).insert(self.pos, self.item)
        g = box_grad(self.obj)
        if g is None:
            if dy is None:
                return (None, None)
            g = current().store.grads[id(self.obj)] = [None] * (self.n - 1)
        g.insert(self.pos, dy)
        return (None, None)

    def transpose(self, a, n, dd):
        if a is None:
            return None, None
        a = list(a)
        return a, a.pop(self.pos)


class PopKeys:
    """``update``: the gradients of the keys written, taken out of the dict's."""

    __slots__ = ("obj", "keys", "before")

    def __init__(self, obj, keys, before):
        self.obj, self.keys, self.before = obj, keys, before

    def __call__(self, dy):
        items = rewound(self.obj)
        for k, old in self.before.items():
            if old is _ABSENT:
                items.pop(k, None)
            else:
                items[k] = old
        g = box_grad(self.obj)
        if g is None:
            return (None, None)
        return (None, {k: g.pop(k, None) for k in self.keys})

    def transpose(self, a, form, dd):
        dg = _at(dd, 1) or {}
        a = {} if a is None else dict(a)
        for k in self.keys:
            _set_key(a, k, dg.get(k))
        return a, None


_ABSENT = object()   # (a key a dict did not have before a write)


def _overwritten(obj, idx, val):
    """What ``obj[idx] = val`` overwrites in list or dict ``obj``: ``(place, items)``, the items it replaces and
    where the ones it writes go, for its pullback to put them back (``runtime.rewound``); None for an array."""
    if isinstance(obj, dict):
        return idx, obj.get(idx, _ABSENT)
    if not isinstance(obj, list):
        return None
    if type(idx) is slice:
        start, stop, step = idx.indices(len(obj))
        if step != 1:   # (an extended slice writes as many items as it replaces)
            return idx, obj[idx]
        return slice(start, start + len(val)), obj[start:max(stop, start)]
    return (idx if idx >= 0 else idx + len(obj)), obj[idx]


class Clear:
    """``obj[idx] = val``: the gradient of the slot written, taken out of the container's (zeroed in an
    array's, where the last write wins for a repeated fancy index); a list's or dict's item it overwrote put
    back where the backward pass has reached (``before``, ``runtime.rewound``)."""

    __slots__ = ("obj", "idx", "val", "before")

    def __init__(self, obj, idx, val, before=None):
        self.obj, self.idx, self.val, self.before = obj, idx, val, before

    def __call__(self, dy):
        obj, idx = self.obj, self.idx
        if self.before is not None:
            place, old = self.before
            items = rewound(obj)
            if old is not _ABSENT:
                items[place] = old
            else:
                items.pop(place, None)
        g = box_grad(obj)
        if g is None:
            return (None, None, None)
        if type(g) is dict:
            return (None, None, g.pop(idx, None))
        if is_array(obj):   # (into an int or bool array: rounded, no gradient)
            dv = _written_grad(g, idx, self.val) if obj.dtype.kind in "fc" else None
            g[idx] = 0
            return (None, None, dv)
        place, old = self.before   # (a slice written with another number of items: the items it wrote)
        dv = g[place]
        g[place] = [None] * len(old) if type(place) is slice else None
        return (None, None, dv)

    def transpose(self, a, form, dd):
        obj, idx, dv = self.obj, self.idx, _at(dd, 2)
        if isinstance(obj, dict):
            a = {} if a is None else dict(a)
            _set_key(a, idx, dv)
        elif type(obj) is not np.ndarray:
            a = [None] * form if a is None else list(a)
            if type(idx) is slice:
                a[idx] = [None] * len(range(*idx.indices(form))) if dv is None else list(dv)
            else:
                a[idx] = dv
        else:   # (the repeated entries of a fancy index take dv's last, as the write did)
            a = np.zeros(*form) if a is None else a
            part_of(obj, a)[idx] = 0 if dv is None else dv
        return a, None


class ClearAttr:
    """``obj.name = val``: the gradient of the attribute written, taken out of the object's, for argument
    ``at`` of the call."""

    __slots__ = ("obj", "name", "at")

    def __init__(self, obj, name, at):
        self.obj, self.name, self.at = obj, name, at

    def __call__(self, dy):
        g = box_grad(self.obj)
        if g is None:
            return (None,) * (self.at + 1)
        if is_array(g):   # (an object the runtime treats as an array, a cotangent: its gradient has no fields)
            raise BeyondOrder(f"tensorlang.ad: the gradient of a {type(self.obj).__qualname__} reached as an array "
                              f"where its attribute {self.name!r} was written (tensorlang.ad's own values, "
                              f"differentiated at an order the transform does not reach)")
        dv = getattr(g, self.name, None)
        if dv is not None:
            if dataclasses.is_dataclass(g):
                object.__setattr__(g, self.name, None)
            else:
                delattr(g, self.name)
        return (None,) * self.at + (dv,)

    def transpose(self, a, form, dd):
        a, dv = make_like(self.obj, {}) if a is None else own(a), _at(dd, self.at)
        if dataclasses.is_dataclass(a):
            object.__setattr__(a, self.name, dv)
        elif dv is None:
            vars(a).pop(self.name, None)
        else:
            setattr(a, self.name, dv)
        return a, None


def _dict_get(d, k, default=None):
    present = k in d
    y = d.get(k, default)
    return y, lambda dy: (None, None, None) if dy is None else (
        ({k: dy}, None, None) if present else (None, None, dy))


def dict_update(d, other):
    register(d)
    keys = list(other)
    before = {k: d.get(k, _ABSENT) for k in keys}
    d.update(other)
    return None, PopKeys(d, keys, before)


def _dict_items(d):
    y = list(d.items())
    return y, lambda dy: (None,) if dy is None else ({k: g[1] for (k, _), g in zip(y, dy) if g is not None},)


def _dict_values(d):
    keys = list(d)
    return list(d.values()), lambda dy: (None,) if dy is None else ({k: g for k, g in zip(keys, dy)},)


LINEAR[_dict_values] = lambda args, kw, ts: None if ts[0] is None else [ts[0].get(k) for k in args[0]]


def _copy(x):
    return x.copy(), lambda dy: (own(dy) if dy is not None else None,)


METHOD_RULES.update({
    (list, "append"): _append, (list, "extend"): extend_list, (list, "insert"): _insert, (list, "pop"): _pop,
    (list, "copy"): _copy, (dict, "copy"): _copy, (dict, "get"): _dict_get, (dict, "update"): dict_update,
    (dict, "items"): _dict_items, (dict, "values"): _dict_values,
    (dict, "keys"): lambda d: (list(d.keys()), ZERO),
})

def unaliased(values, target):
    """``values`` with copies of the arrays that share memory with array ``target``, which is about to be
    written (``np.multiply(y, x, out=y)``: the pullback reads the ``y`` it was called with)."""
    return tuple(v.copy() if type(v) is np.ndarray and np.shares_memory(v, target) else v for v in values)


def with_out(names, f, *args):
    """``f(..., out=o)``: the result computed as without ``out`` and written into ``o`` by the box rules."""
    i = len(args) - len(names) + names.index("out")
    out = args[i]
    target = out[0] if type(out) is tuple and len(out) == 1 else out
    if not writable_array(target):
        raise UnsupportedError(f"tensorlang.ad differentiates out= only for one array, not {type(out).__name__}")
    rest = tuple(n for n in names if n != "out")
    pos = unaliased((*args[:i], *args[i + 1:]), target)
    y, back = Jkw(rest, f, *pos) if rest else J(f, *pos)
    _, write_back = setitem(target, Ellipsis, y)

    def out_back(dy):
        g = back(acc(dy, write_back(None)[2]))
        return (*g[:i + 1], None, *g[i + 1:])
    return out, out_back


def _copyto(dst, src):
    """``np.copyto(dst, src)``: ``dst[...] = src`` by the box rules."""
    if type(dst) is not np.ndarray:
        _opaque(dst, "np.copyto into")(src)
    _, back = setitem(dst, Ellipsis, src)
    return None, lambda dy: (lambda g: (None, g[2]))(back(None))


def _getattr_call(obj, name, *default):
    """The builtin ``getattr(obj, name[, default])``."""
    if _defaulted(obj, name, default):
        return default[0], lambda dy: (None, None, dy)
    y, back = getattr_(obj, name)
    return y, lambda dy: (back(dy)[0], None, None)


def _setattr_call(obj, name, val):
    """The builtin ``setattr(obj, name, val)``."""
    y, back = setattr_(obj, name, val)
    return y, lambda dy: (lambda g: (g[0], None, g[1]))(back(dy))


def _replace(obj, **changes):
    """``dataclasses.replace(obj, **changes)``: a new object of ``obj``'s fields, those named replaced.  The
    gradient of each replaced value is its field's; ``obj``'s is the rest of the new object's."""
    y = dataclasses.replace(obj, **changes)

    def back(dy):
        if dy is None:
            return (None,) * (1 + len(changes))
        rest = {f.name: field(dy, f.name) for f in dataclasses.fields(obj) if f.name not in changes}
        return (make_like(obj, rest), *(field(dy, name) for name in changes))
    return y, back


KEYWORD_RULES["out"] = with_out
RULES.update({object.__setattr__: store_attr, np.copyto: _copyto, getattr: _getattr_call, operator.getitem: getitem,
              setattr: _setattr_call, dataclasses.replace: _replace})
WRITING_RULES.update({store_attr, _copyto, _setattr_call})
JVP_RULES[np.copyto] = refusing(np.copyto, "forward", "forward mode has no rule for a function that writes into "
                                                      "its argument; write dst[...] = src")
NONDIFF.add(_absent)
# (linear in dy: differentiated again without its code, which builds named tuples)
RULES[index_grad] = lambda like, idx, dy: (index_grad(like, idx, dy), lambda d: (None, None, _entry(d, idx)))
RULES[field_grad] = lambda obj, name, dy: (field_grad(obj, name, dy), lambda d: (None, None, field(d, name)))
JVP_RULES[field_grad] = lambda args, ts: (field_grad(*args), field_grad(args[0], args[1], ts[2]))   # (linear in dy)


def _getattr_again(obj, name):
    """The rule of ``getattr_`` itself, for gradient code differentiated again: but for a property (whose
    getter's code is differentiated), the pullback of an attribute does not depend on the object's values,
    so the object's cotangent is that pullback of the attribute's."""
    if type(obj) is not np.ndarray and isinstance(getattr(type(obj), name, None), property):
        y, back = TRANSFORM.fn(getattr_, (obj, name)).pb(getattr_, obj, name)
        return y, lambda d: back(d)[1:]
    y, back = getattr_(obj, name)
    return (y, back), lambda d: (None, None) if d is None or d[0] is None else (back(d[0])[0], None)


RULES[getattr_] = _getattr_again


def _defaulted(obj, name, default) -> bool:
    """Whether ``getattr(obj, name, *default)`` gives its default."""
    return bool(default) and _absent(obj, name) \
        and not isinstance(getattr(type(obj), "__getattr__", None), types.FunctionType)


def _getattr_call_again(obj, name, *default):
    """The rule of ``_getattr_call`` itself (its code takes ``*default``): ``getattr_``'s, or the default's
    (the pullback of either does not depend on the object's values)."""
    pair = _getattr_call(obj, name, *default)
    if _defaulted(obj, name, default):
        return pair, lambda d: (None, None, None if d is None else d[0])
    if type(obj) is not np.ndarray and isinstance(getattr(type(obj), name, None), property):
        raise UnsupportedError(f"a second differentiation through getattr(obj, {name!r}) of a property is not "
                               f"supported (read it as obj.{name})")
    _, again = _getattr_again(obj, name)
    return pair, lambda d: (*again(d), *(None,) * len(default))


RULES[_getattr_call] = _getattr_call_again
BOX_METHODS.update({(list, "append"), (list, "extend"), (list, "insert"), (list, "pop"), (dict, "update")})
# methods of lists, tuples and dicts that never write to their object
PURE_METHODS = {"get", "keys", "values", "items", "index", "count"}
NONDIFF_METHODS.update({"index", "count", "keys", "startswith", "endswith", "format", "join", "split", "__len__"})
HELPERS.update({"_ad_getitem": getitem, "_ad_setitem": setitem, "_ad_getattr": getattr_,
                "_ad_setattr": setattr_, "_ad_math": math})
