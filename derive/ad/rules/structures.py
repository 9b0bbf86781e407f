"""Data structures: attribute and item access (cons-cell rules: the gradient of ``first(C)`` is
``cons(dy, 0)``), and mutation by the box rules: ``x[i] = v``, ``o.a = v``, ``append``, ``pop``,
``extend``, ``insert``, ``update`` register the object as a box and their pullbacks take the gradient of
the written slot out of the box.
"""
from __future__ import annotations

import dataclasses
import math
import types

import numpy as np

from ....errors import UnsupportedError
from ..cotangent import Indexed, basic_index, dense
from ..runtime import (BOX_METHODS, HELPERS, KEYWORD_RULES, NONDIFF_METHODS, RULES, J, Jkw, METHOD_RULES, STORE, ZERO,
                       acc, box_grad, field, field_grad, is_complex, own, register, unbroadcast)
from .layout import concatenator_getitem

AxisConcatenator = type(np.r_).__mro__[1]   # the class of np.r_ and np.c_


class _Like:
    """What an item pullback keeps of its container: its type and its length or shape and dtype."""

    __slots__ = ("kind", "n", "shape", "dtype")

    def __init__(self, obj):
        self.kind = type(obj)
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


def getitem(obj, idx):
    t = type(obj)
    if t in (list, tuple, dict, np.ndarray) or isinstance(obj, tuple):
        like = _Like(obj)
        return obj[idx], lambda dy: (None, None) if dy is None else (_index_grad(like, idx, dy), None)
    if isinstance(obj, AxisConcatenator):
        return concatenator_getitem(obj, idx)
    m = getattr(t, "__getitem__", None)
    if isinstance(m, types.FunctionType):
        y, back = J(m, obj, idx)
        return y, lambda dy: back(dy)[1:]
    return obj[idx], ZERO


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
    if t in (list, dict, np.ndarray):
        register(obj)
        obj[idx] = val

        def back(dy):
            g = box_grad(obj)
            if g is None:
                return (None, None, None)
            if t is dict:
                return (None, None, g.pop(idx, None))
            dv = g[idx]
            if t is np.ndarray:
                dv = _written_grad(g, idx, val)
                g[idx] = 0
            else:
                g[idx] = [None] * len(dv) if type(idx) is slice else None
            return (None, None, dv)
        return None, back
    m = getattr(t, "__setitem__", None)
    if isinstance(m, types.FunctionType):
        y, back = J(m, obj, idx, val)
        return y, lambda dy: back(dy)[1:]
    obj[idx] = val
    return None, ZERO


def getattr_(obj, name):
    if name in ("real", "imag") and is_complex(obj):
        return RULES[np.real if name == "real" else np.imag](obj)
    t = type(obj)
    if t is np.ndarray:
        return _array_attr(obj, name)
    static = getattr(t, name, None)
    if isinstance(static, property):
        y, back = J(static.fget, obj)
        return y, lambda dy: back(dy)[1:]
    y = getattr(obj, name)
    if isinstance(obj, types.ModuleType) or isinstance(y, type):
        return y, ZERO
    if getattr(y, "__self__", None) is obj:   # a bound method: its gradient's __self__ is obj's
        return y, _bound_method_back
    return y, lambda dy: (None,) if dy is None else (field_grad(obj, name, dy),)


def _bound_method_back(dy):
    return (field(dy, "__self__"),)


def _array_attr(x, name):
    if name == "T":
        return x.T, lambda dy: (None if dy is None else np.transpose(dy),)
    if name == "real":
        return x.real, lambda dy: (dy,)
    y = getattr(x, name)
    return y, (_bound_method_back if getattr(y, "__self__", None) is x else ZERO)


def setattr_(obj, name, val):
    register(obj)
    setattr(obj, name, val)

    def back(dy):
        g = box_grad(obj)
        if g is None:
            return (None, None)
        dv = getattr(g, name, None)
        if dv is not None:
            if dataclasses.is_dataclass(g):
                object.__setattr__(g, name, None)
            else:
                delattr(g, name)
        return (None, dv)
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


def _dict_update(d, other):
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
    (list, "copy"): _copy, (dict, "copy"): _copy, (dict, "get"): _dict_get, (dict, "update"): _dict_update,
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


KEYWORD_RULES["out"] = with_out
# (linear in dy: differentiated again without its code, which builds named tuples)
RULES[_index_grad] = lambda like, idx, dy: (_index_grad(like, idx, dy), lambda d: (None, None, _entry(d, idx)))
BOX_METHODS.update({(list, "append"), (list, "extend"), (list, "insert"), (list, "pop"), (dict, "update")})
# methods of lists, tuples and dicts that never write to their object
PURE_METHODS = {"get", "keys", "values", "items", "index", "count"}
NONDIFF_METHODS.update({"index", "count", "keys", "startswith", "endswith", "format", "join", "split", "__len__"})
HELPERS.update({"_ad_getitem": getitem, "_ad_setitem": setitem, "_ad_getattr": getattr_,
                "_ad_setattr": setattr_, "_ad_math": math})
