"""Data structures: attribute and item access (cons-cell rules: the gradient of ``first(C)`` is
``cons(dy, 0)``), and mutation by the box rules: ``x[i] = v``, ``o.a = v``, ``append``, ``pop``,
``extend``, ``insert``, ``update`` register the object as a box and their pullbacks take the gradient of
the written slot out of the box.
"""
from __future__ import annotations

import dataclasses
import inspect
import math
import types

import numpy as np

from ....errors import UnsupportedError
from ..cotangent import Indexed, basic_index, dense
from ..ir import INT, CONST_KIND, kind_of
from ..runtime import (BOX_METHODS, HELPERS, KEYWORD_RULES, NONDIFF, NONDIFF_METHODS, RULES, J, Jkw, METHOD_RULES, STORE,
                       WRITING_RULES, ZERO, acc, box_grad, field, field_grad, is_complex, own, register, unbroadcast, untracked)
from .layout import concatenator_getitem

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


def _index_grad(like: _Like, idx, dy):
    """The gradient of the container when only its item ``idx`` has gradient ``dy``."""
    k = like.kind
    if k is dict:
        return {idx: dy}
    if k is np.ndarray:
        return Indexed.at(like.shape, like.dtype, idx, dy)
    g = [None] * like.n
    g[idx] = dy
    if k is list:
        return g
    return k._make(g) if hasattr(k, "_make") else tuple(g)   # a named tuple, or a tuple


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
    if t in (list, tuple, dict, np.ndarray) or isinstance(obj, tuple) or _builtin_items(obj, "__getitem__"):
        like = _Like(obj)
        return obj[idx], lambda dy: (None, None) if dy is None else (_index_grad(like, idx, dy), None)
    if isinstance(obj, AxisConcatenator):
        return concatenator_getitem(obj, idx)
    if t is np.flatiter:   # x.flat[i]: an item of x.reshape(-1), whose gradient is the flat iterator's
        return getitem(obj.base.reshape(-1), idx)
    m = getattr(t, "__getitem__", None)
    if isinstance(m, types.FunctionType):
        y, back = J(m, obj, idx)
        return y, lambda dy: back(dy)[1:]
    y = obj[idx]
    return y, ZERO if kind_of(y) in (INT, CONST_KIND) else _opaque(obj, "reading an item of")


def _written_grad(g, idx, val):
    """The gradient of ``val`` in ``a[idx] = val`` from the gradient ``g`` of ``a`` after the write: the
    slots it wrote (the last write wins where a fancy index repeats), summed down to ``val``'s shape."""
    dv = np.array(g[idx])
    if not basic_index(idx):
        last = np.full(g.shape, -1)
        last[idx] = np.arange(dv.size).reshape(dv.shape)
        dv = np.where(last[idx] == np.arange(dv.size).reshape(dv.shape), dv, 0)
    return unbroadcast(dv, val) if np.ndim(dv) else dv[()]


def setitem(obj, idx, val):
    t = type(obj)
    if t is np.ndarray or _builtin_items(obj, "__setitem__"):
        register(obj)
        obj[idx] = val

        def back(dy):
            g = box_grad(obj)
            if g is None:
                return (None, None, None)
            if type(g) is dict:
                return (None, None, g.pop(idx, None))
            dv = g[idx]
            if t is np.ndarray:   # a number written into an int or bool array is rounded: no gradient
                dv = _written_grad(g, idx, val) if obj.dtype.kind in "fc" else None
                g[idx] = 0
            else:
                g[idx] = [None] * len(dv) if type(idx) is slice else None
            return (None, None, dv)
        return None, back
    if t is np.flatiter and obj.base.flags.c_contiguous:   # x.flat[i] = v: a write into x.reshape(-1), a view
        return setitem(obj.base.reshape(-1), idx, val)
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
    if t is np.ndarray:
        return _array_attr(obj, name)
    if name == "__dict__":
        raise UnsupportedError("tensorlang.ad does not differentiate an object's attributes read or written "
                               "through its __dict__ (use obj.name or setattr)")
    static = getattr(t, name, None)
    if isinstance(static, property):
        y, back = J(static.fget, obj)
        return y, lambda dy: back(dy)[1:]
    fallback = getattr(t, "__getattr__", None)
    if isinstance(fallback, types.FunctionType) and _absent(obj, name):   # computed by the class's __getattr__
        return _first_of(J(fallback, obj, name))
    y = getattr(obj, name)
    if isinstance(obj, types.ModuleType) or isinstance(y, type):
        return y, ZERO
    if getattr(y, "__self__", None) is obj:   # a bound method: its gradient's __self__ is obj's
        return y, _bound_method_back
    return y, lambda dy: (None,) if dy is None else (field_grad(obj, name, dy),)


def _first_of(call):
    """``(y, back)`` of a call ``f(obj, ...)`` as the rule of a function of ``obj`` alone."""
    y, back = call
    return y, lambda dy: back(dy)[1:2]


def _absent(obj, name) -> bool:
    """Whether ``obj`` has no attribute ``name`` short of its class's ``__getattr__``."""
    return inspect.getattr_static(obj, name, _absent) is _absent


def _bound_method_back(dy):
    return (field(dy, "__self__"),)


def _array_attr(x, name):
    if name == "T":
        return x.T, lambda dy: (None if dy is None else np.transpose(dy),)
    if name == "real":
        return x.real, lambda dy: (dy,)
    if name == "flat":
        return x.flat, lambda dy: (None if dy is None else np.reshape(dense(dy), x.shape),)
    y = getattr(x, name)
    return y, (_bound_method_back if getattr(y, "__self__", None) is x else ZERO)


def setattr_(obj, name, val):
    own_setattr = type(obj).__setattr__
    if isinstance(own_setattr, types.FunctionType):   # the class's own __setattr__, transformed in turn
        y, back = J(own_setattr, obj, name, val)
        return y, lambda dy: (lambda g: (g[1], g[3]))(back(None))
    y, back = _store_attr(obj, name, val, setattr)
    return y, lambda dy: (lambda g: (g[0], g[2]))(back(dy))


def _store_attr(obj, name, val, write=object.__setattr__):
    """``object.__setattr__``: a property's setter (transformed in turn), else a write by the box rules."""
    static = getattr(type(obj), name, None)
    if isinstance(static, property) and isinstance(static.fset, types.FunctionType):
        y, back = J(static.fset, obj, val)
        return y, lambda dy: (lambda g: (g[1], None, g[2]))(back(None))
    register(obj)
    write(obj, name, val)

    def back(dy):
        g = box_grad(obj)
        if g is None:
            return (None, None, None)
        dv = getattr(g, name, None)
        if dv is not None:
            if dataclasses.is_dataclass(g):
                object.__setattr__(g, name, None)
            else:
                delattr(g, name)
        return (None, None, dv)
    return None, back


# -- list and dict methods (box rules) ---------------------------------------------------------------------
def _append(lst, x):
    register(lst)
    lst.append(x)

    def back(dy):
        g = box_grad(lst)
        return (None, None) if g is None else (None, g.pop())
    return None, back


def extend_list(lst, xs):
    register(lst)
    n = len(lst)
    lst.extend(xs)
    kind = type(xs)

    def back(dy):
        g = box_grad(lst)
        if g is None:
            return (None, None)
        tail = g[n:]
        del g[n:]
        return (None, tail if kind is list else kind(tail) if kind is tuple else tail)
    return None, back


def _insert(lst, i, x):
    register(lst)
    lst.insert(i, x)
    pos = i if i >= 0 else max(len(lst) - 1 + i, 0)

    def back(dy):
        g = box_grad(lst)
        return (None, None, None) if g is None else (None, None, g.pop(min(pos, len(g) - 1)))
    return None, back


def _pop(lst, i=-1):
    register(lst)
    n = len(lst)
    y = lst.pop(i)
    pos = i if i >= 0 else n + i

    def back(dy):
        g = box_grad(lst)
        if g is None:
            if dy is None:
                return (None, None)
            g = [None] * (n - 1)
            STORE[0].grads[id(lst)] = g
        g.insert(pos, dy)
        return (None, None)
    return y, back


def _dict_get(d, k, default=None):
    present = k in d
    y = d.get(k, default)
    return y, lambda dy: (None, None, None) if dy is None else (
        ({k: dy}, None, None) if present else (None, None, dy))


def dict_update(d, other):
    register(d)
    keys = list(other)
    d.update(other)

    def back(dy):
        g = box_grad(d)
        if g is None:
            return (None, None)
        return (None, {k: g.pop(k, None) for k in keys})
    return None, back


def _dict_items(d):
    y = list(d.items())
    return y, lambda dy: (None,) if dy is None else ({k: g[1] for (k, _), g in zip(y, dy) if g is not None},)


def _dict_values(d):
    keys = list(d)
    return list(d.values()), lambda dy: (None,) if dy is None else (dict(zip(keys, dy)),)


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
    if type(target) is not np.ndarray:
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
    if default and _absent(obj, name) and not isinstance(getattr(type(obj), "__getattr__", None), types.FunctionType):
        return default[0], lambda dy: (None, None, dy)
    y, back = getattr_(obj, name)
    return y, lambda dy: (back(dy)[0], None, None)


def _setattr_call(obj, name, val):
    """The builtin ``setattr(obj, name, val)``."""
    y, back = setattr_(obj, name, val)
    return y, lambda dy: (lambda g: (g[0], None, g[1]))(back(dy))


KEYWORD_RULES["out"] = with_out
RULES.update({object.__setattr__: _store_attr, np.copyto: _copyto, getattr: _getattr_call,
              setattr: _setattr_call})
WRITING_RULES.update({_store_attr, _copyto, _setattr_call})
NONDIFF.add(_absent)
# (linear in dy: differentiated again without its code, which builds named tuples)
RULES[_index_grad] = lambda like, idx, dy: (_index_grad(like, idx, dy), lambda d: (None, None, _entry(d, idx)))
BOX_METHODS.update({(list, "append"), (list, "extend"), (list, "insert"), (list, "pop"), (dict, "update")})
# methods of lists, tuples and dicts that never write to their object
PURE_METHODS = {"get", "keys", "values", "items", "index", "count"}
NONDIFF_METHODS.update({"index", "count", "keys", "startswith", "endswith", "format", "join", "split", "__len__"})
HELPERS.update({"_ad_getitem": getitem, "_ad_setitem": setitem, "_ad_getattr": getattr_,
                "_ad_setattr": setattr_, "_ad_math": math})
