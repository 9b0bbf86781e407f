"""What generated code calls at run time: ``J`` (a call's result and its pullback, from a rule, from a
kernel's ``__ad_pullback__`` or from the transformed function), gradient arithmetic on structures, and
the box store that gives mutable objects (lists, dicts, objects, arrays written in place) their adjoint.

Gradients mirror the value they belong to: numbers and arrays for numbers and arrays, tuples, lists and
dicts of gradients for those, an instance of the same dataclass for a dataclass (fields without a
gradient are None), a ``types.SimpleNamespace`` of attributes for other objects and of captured
variables for closures, and ``None`` for "no gradient" (the zero of every structure).

Mutation follows the box rules of Innes (2018, section 3.2): an object written to at run time is
registered as a box; gradients that reach it are kept in a store keyed by its identity instead of a
local variable, so that the adjoint of ``append``/``x[i] = v``/``o.a = v`` finds them wherever they
came from; ``take`` hands a box's gradient out (and empties it) where the object was made.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import sys
import threading
import types

import numpy as np

from ...codegen.dask_graph import lazy_array
from ...errors import BeyondOrder, UnsupportedError, internal_file, library_file, user_call_site
from .context import Provided, current
from .cotangent import Indexed, add_at, dense, entries, with_entries
from .ir import ANY, ARRAY_TYPES, NUM, check_write, is_array, kind_of, memory_of, memory_owner
from .flat import call_grads, flat_call, takes_extras
from .source import NoSourceKept, define
from .registry import (JVP_RULES, LINEAR, METHOD_RULES, MULTILINEAR, NONDIFF, RULES, refusing,  # noqa: F401
                       rule_owner)   # (read through here)


def is_complex(v) -> bool:
    """Whether ``v`` is a complex number or an array of complex numbers (cheap for the common cases)."""
    t = type(v)
    if t is float or t is int:
        return False
    if t in ARRAY_TYPES:   # (a batch of ad.vmap, a recording's stand-in: as the values it holds)
        dtype = getattr(v, "dtype", None)
        return dtype.kind == "c" if dtype is not None else isinstance(v, complex)
    return t is complex or isinstance(v, np.complexfloating) or t is np.ndarray and v.dtype.kind == "c"


# -- gradient arithmetic --------------------------------------------------------------------------------
def asarray(x, dtype=None):
    """``np.asarray(x, dtype)`` for the rules, but that a value of a type of ``ARRAY_TYPES`` stays what it is
    (a batch of ``ad.vmap``, whose NumPy calls dispatch to its own rules), of ``dtype`` where one is given."""
    if type(x) in ARRAY_TYPES:
        return x if dtype is None else x.astype(dtype)
    return np.asarray(x, dtype)


def acc(a, b):
    """The sum of two gradients of the same value (None is zero)."""
    if a is None:
        return b
    if b is None:
        return a
    t = type(a)
    if t is np.ndarray and type(b) is np.ndarray:   # (the common case, first)
        return a + b
    if t is tuple:
        return tuple(acc(x, y) for x, y in zip(a, b))
    if t is list:
        return [acc(x, y) for x, y in zip(a, b)]
    if t is dict:
        out = dict(a)
        for k, v in b.items():
            out[k] = acc(out.get(k), v)
        return out
    if t is types.SimpleNamespace:
        out = types.SimpleNamespace(**vars(a))
        for k, v in vars(b).items():
            setattr(out, k, acc(getattr(out, k, None), v))
        return out
    if type(b) is Indexed:   # stays lazy: O(1)
        return b + a
    if isinstance(a, tuple) and hasattr(a, "_fields"):
        return t(*(acc(x, y) for x, y in zip(a, b)))
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return make_like(a, {f.name: acc(getattr(a, f.name, None), getattr(b, f.name, None))
                              for f in dataclasses.fields(a)})
    return a + b


def unbroadcast(g, x):
    """Sum gradient ``g`` down to the shape of ``x`` (undoing NumPy broadcasting)."""
    if g is None:
        return None
    if is_array(x):
        shape = x.shape
        if getattr(g, "shape", ()) == shape:
            return g
        return summed_to(g if type(g) in ARRAY_TYPES else np.asarray(g), shape)
    if lazy_array(x) or lazy_array(g):   # a Dask array: summed lazily
        return summed_to(g, x.shape if lazy_array(x) else ())
    if type(x) is list or type(x) is tuple:   # a NumPy operand given as a list: its items' gradients, as np.array's
        return sequence_grad(summed_to(dense(g) if type(g) is Indexed else np.asarray(g), np.shape(x)), type(x))
    if type(g) is np.ndarray or type(g) is Indexed or type(g) in ARRAY_TYPES and g.ndim:
        return dense(g).sum()   # (an indexed one: a tangent of a gradient, at second order; a batch's per example)
    return g


def sequence_grad(g, kind):
    """Array gradient ``g`` of a list or tuple (``kind``) of numbers or arrays: its items' gradients."""
    items = g.tolist() if g.ndim == 1 and type(g) not in ARRAY_TYPES else list(g)
    return tuple(items) if kind is tuple else items


def summed_to(g, shape: tuple):
    """Array ``g`` (NumPy's or Dask's) summed over the axes along which ``shape`` was broadcast to its."""
    while np.ndim(g) > len(shape):
        g = g.sum(axis=0)
    for axis, n in enumerate(shape):
        if n == 1 and g.shape[axis] != 1:
            g = g.sum(axis=axis, keepdims=True)
    return g


def like(x, g):
    """Gradient ``g`` of argument ``x`` in ``x``'s precision: a float32 (or float16, complex64) array gets a
    gradient of its own dtype, however wide the arithmetic that made it (a complex gradient of a real
    array is kept as it is)."""
    g = dense(g)
    if is_array(g) and is_array(x) and g.dtype != x.dtype and x.dtype.kind in "fc" \
            and (g.dtype.kind == "f" or x.dtype.kind == "c"):
        return g.astype(x.dtype)
    return g


def addn(d, g):
    """``d + g`` for a number gradient ``d``, where ``g`` may be None."""
    return d if g is None else d + g


def make_like(obj, fields: dict):
    """A gradient shaped like ``obj``: same dataclass (built without ``__init__``) or a namespace."""
    if dataclasses.is_dataclass(obj):
        out = object.__new__(type(obj))
        for f in dataclasses.fields(obj):
            object.__setattr__(out, f.name, fields.get(f.name))
        return out
    return types.SimpleNamespace(**{k: v for k, v in fields.items() if v is not None})


def field_grad(obj, name, dy):
    """The gradient of ``obj`` when only its attribute ``name`` has gradient ``dy``."""
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(dy if f == name else None for f in obj._fields))
    return make_like(obj, {name: dy})


def field(g, name):
    """Attribute ``name`` of a structural gradient (None when absent)."""
    return None if g is None else getattr(g, name, None)


def item(g, key):
    return None if g is None else g.get(key)


def fngrad(f, values):
    """The gradient of closure ``f``: its captured variables that received a gradient."""
    fields = {n: v for n, v in zip(f.__code__.co_freevars, values) if v is not None}
    return types.SimpleNamespace(**fields) if fields else None


def fold(g, name):
    """The gradient of a recursive closure, whose field ``name`` (itself) holds the gradients of the
    deeper calls, summed into one level."""
    out = None
    while g is not None:
        rest = {k: v for k, v in vars(g).items() if k != name}
        out = acc(out, types.SimpleNamespace(**rest))
        g = getattr(g, name, None)
    return out


# reverse over reverse through the gradient of a recursive closure: the recording's (tower.py)
RULES[fold] = refusing(fold, "reverse", "the gradient of a recursive closure, folded over its levels, is not "
                                        "differentiated again by the transform", BeyondOrder)


def deref(f, i):
    return f.__closure__[i].cell_contents


def holds(purity) -> bool:
    """Whether the module globals that ``analysis.write_free`` found bound to functions that write nothing
    (``purity``: their ``(globals, name, function, code)``) are bound to them still, with the same code (code
    None: an object that declares it writes nothing, ``analysis.write_free_callee``)."""
    for fglobals, name, f, code in purity:
        if fglobals.get(name) is not f or code is not None and f.__code__ is not code:
            return False
    return True


def still_write_free(purity) -> None:
    """Before a call that generated code assumes writes nothing (checked by its entry with ``holds``): an
    ``UnsupportedError`` where a function it calls was rebound since the entry began."""
    if not holds(purity):
        names = ", ".join(sorted({name for _, name, _, _ in purity}))
        raise UnsupportedError(f"tensorlang.ad assumed that {names} write to nothing, as they did when this "
                               f"gradient began; one was rebound while it ran")


NONDIFF.update((holds, still_write_free))


def snap(x):
    """A copy of an array that may be written to later (copy on capture), recorded in the context's ``copies``
    while gradient code is differentiated again (``nested_store``), so that the store operations the code
    calls with a copy act on the array itself.  A recording's stand-in of an array is copied too (the copy
    recorded), as the array it stands for is."""
    if type(x) is not np.ndarray and type(memory_of(x)) is not np.ndarray and type(x) not in ARRAY_TYPES:
        return x   # (a batch of ad.vmap is copied as an array is)
    c = x.copy()
    copies = current().copies
    if copies is not None:
        copies[id(c)] = (c, x)
    return c


def keep(y, back):
    """The values of the arrays in result ``y`` (an array, or a tuple or list holding arrays) that its pullback
    ``back`` holds, where code after the call that made it may write into them: ``(array, copy)`` pairs, for
    ``kept``.  The result itself is what the program goes on with (whatever else holds it sees its writes);
    its pullback, which may read it (``np.exp``'s reads its result; ``*``'s reads only its arguments, which
    are copied on capture), runs on the values it made."""
    arrays = [a for a in _arrays_of(y) if a.flags.writeable and a.size]
    if not arrays:
        return ()
    held = _held_memory(back)
    return tuple((a, a.copy()) for a in arrays if held is None or id(memory_owner(a)) in held)


def _arrays_of(y) -> list:
    if type(y) is np.ndarray:
        return [y]
    if batched(y):   # (the array of its examples' values, which a write writes)
        return _arrays_of(y.__ad_values__())
    if isinstance(y, (tuple, list)):
        return [a for item in y for a in _arrays_of(item)]
    return []


_HELD_LIMIT = 256   # objects looked at in a pullback before assuming it holds everything


def _held_memory(back):
    """The ids of the arrays owning the memory of every array that pullback ``back`` can reach (through
    closures, defaults, partials, bound methods, containers and objects' attributes), or None where there is
    more to look at than ``_HELD_LIMIT`` objects (then it may hold anything)."""
    seen, held, todo = set(), set(), [back]
    while todo:
        x = todo.pop()
        if id(x) in seen or x is None or isinstance(x, (int, float, complex, str, bytes, bool, type)):
            continue
        seen.add(id(x))
        if len(seen) > _HELD_LIMIT:
            return None
        if type(x) is np.ndarray:
            held.add(id(memory_owner(x)))
        elif isinstance(x, (tuple, list, set, frozenset)):
            todo.extend(x)
        elif isinstance(x, dict):
            todo.extend(x.values())
        elif isinstance(x, types.FunctionType):
            todo.extend(c.cell_contents for c in x.__closure__ or () if filled(c))
            todo.extend(x.__defaults__ or ())
            todo.extend((x.__kwdefaults__ or {}).values())
        elif isinstance(x, types.MethodType):
            todo += [x.__func__, x.__self__]
        elif isinstance(x, functools.partial):
            todo += [x.func, x.args, x.keywords]
        elif not isinstance(x, (types.BuiltinFunctionType, types.ModuleType, np.ufunc)):
            todo.extend(getattr(x, "__dict__", {}).values())
            todo.extend(getattr(x, n, None) for n in getattr(type(x), "__slots__", ()))
    return held


def filled(cell) -> bool:
    """Whether closure cell ``cell`` holds a value (a name bound later leaves it empty)."""
    try:
        cell.cell_contents
    except ValueError:   # (a cell not bound yet)
        return False
    return True


def kept(pairs, back, dy):
    """``back(dy)`` with the arrays of ``pairs`` (``keep``) holding the values they had when the call that made
    them returned, and the values written since then after it."""
    if not pairs:
        return back(dy)
    _exchange(pairs)
    try:
        return back(dy)
    finally:
        _exchange(pairs)


def _exchange(pairs) -> None:
    for a, c in pairs:
        t = a.copy()
        a[...] = c
        c[...] = t


def cut(y, back, copy, x):
    """After a call given ``copy`` of array ``x`` (copied because ``x`` may be written after the call while the
    call keeps it for its derivative), with result ``y`` and pullback ``back``: the result and pullback to
    use.  A result that is a view of the copy (or a list or tuple holding such views) becomes the same view
    of ``x`` (a list keeps its identity, its items replaced: it may be one the caller holds); a call that wrote
    into the copy has its writes copied into ``x`` (which becomes a box), and its pullback first hands the
    gradient ``x`` has after the call to the copy, then hands back to ``x`` the gradient the call's pullback
    left in the copy's box (that of ``x`` before the call: ``np.add.at`` leaves it as it is)."""
    if copy is x:
        return y, back
    if type(y) is np.ndarray:
        y = _rebased(y, copy, x)
    elif y is copy:   # (a batch of ad.vmap; its views are refused where written, by the batch)
        y = x
    elif type(y) in (list, tuple):
        items = [_rebased(r, copy, x) if type(r) is np.ndarray else x if r is copy else r for r in y]
        if any(r is not v for r, v in zip(items, y)):
            if type(y) is list:   # (f(xs, a) returning xs)
                y[:] = items
            else:
                y = tuple(items)
    else:
        _rebased_fields(y, copy, x)
    if id(copy) not in current().store.boxes:
        return y, back
    x[...] = copy
    register(x)

    def bridged(dy):
        acc_into(copy, None, take(x, None))
        grads = back(dy)
        acc_into(x, None, take(copy, None))   # what the call left in the copy's box: x's before the call
        return grads
    return y, bridged


def _rebased_fields(obj, copy, x) -> None:
    """In a dict or an object a call returned (``Model(w)`` keeping ``w``), the arrays that are ``copy`` of ``x``
    or views of it replaced by ``x`` or the same views of ``x``: what it holds is the caller's array, as in
    Python, so that a write through it reaches the array the caller holds."""
    if type(obj) is dict:
        fields = obj
    elif isinstance(obj, (type, types.FunctionType, types.ModuleType, np.ndarray)) or type(obj) in ARRAY_TYPES:
        return
    else:
        fields = getattr(obj, "__dict__", None)
        if type(fields) is not dict:
            return
    for k, v in list(fields.items()):
        if type(v) is np.ndarray and (v is copy or v.base is not None):
            r = _rebased(v, copy, x)
            if r is not v:
                fields[k] = r   # (as it is: a frozen dataclass's field too)


def _rebased(r, copy, x):
    """``r`` itself, or for a view of ``copy`` (a C-ordered copy of ``x``) the same view of ``x``."""
    if r is copy:
        return x
    if r.base is None or memory_owner(r) is not copy:
        return r
    offset = r.__array_interface__["data"][0] - copy.__array_interface__["data"][0]
    if x.flags.c_contiguous:
        return np.ndarray(r.shape, r.dtype, buffer=x, offset=offset, strides=r.strides)
    placed = _axes_view(r, copy, offset)
    if placed is None:
        raise UnsupportedError("tensorlang.ad cannot differentiate a call that returns a view of an array "
                               "argument not in C order that is written after the call (other than a slice of "
                               "its axes)")
    start, axes = placed
    strides = tuple(0 if j is None else step * x.strides[j] for j, step in axes)
    first = x[tuple(slice(i, i + 1) for i in start)]   # (a view of x that starts at that entry)
    return np.lib.stride_tricks.as_strided(first, r.shape, strides, writeable=r.flags.writeable)


def _axes_view(r, copy, offset):
    """Where view ``r`` of C-ordered ``copy`` is a slice of its axes (each axis of ``r`` steps along one axis of
    ``copy``, or repeats): the index of its first entry and, for each axis of ``r``, ``(axis of copy, step)``
    (``(None, 0)`` for a repeat); None otherwise (a reshape that merges axes)."""
    if offset % copy.itemsize:
        return None
    start = np.unravel_index(offset // copy.itemsize, copy.shape) if copy.size else (0,) * copy.ndim
    axes, used, last = [], set(), list(start)
    for n, stride in zip(r.shape, r.strides):
        if n == 1 or stride == 0:
            axes.append((None, 0))
            continue
        found = next(((j, stride // c) for j, c in enumerate(copy.strides)
                      if j not in used and c and stride % c == 0 and copy.shape[j] > 1), None)
        if found is None:
            return None
        j, step = found
        used.add(j)
        last[j] += (n - 1) * step
        axes.append(found)
    if any(not 0 <= i < m for i, m in zip(last, copy.shape)):
        return None
    return tuple(int(i) for i in start), axes


# forward mode (forward over reverse): the rebased view has the values of the view of the copy, and so its tangent
JVP_RULES[_rebased] = lambda args, ts: (_rebased(*args), ts[0])


# -- the box store (``context.Store``, the current context's) ------------------------------------------------
def register(obj, store=None) -> None:
    """Mark ``obj`` as a box (it is being written to) in ``store`` (the current one by default); writing to
    a view of an array writes to the array that owns the memory, which becomes the box."""
    if type(obj) in ARRAY_TYPES:
        check_write(obj)
    obj = box_of(obj)
    (store or current().store).boxes[id(obj)] = obj


def box_of(obj):
    """The object whose gradient the store keeps for ``obj``: the array that owns the memory of a view."""
    return memory_owner(obj) if type(obj) is np.ndarray and obj.base is not None else obj


def part_of(obj, g):
    """The part of ``g``, a gradient of ``box_of(obj)``, that ``obj`` covers (a view of it for a view)."""
    box = box_of(obj)
    return g if box is obj else _grad_view(box, obj, g)


def _view_of_box(v):
    """The box that array ``v`` is a view of, or None."""
    if type(v) is not np.ndarray or v.base is None:
        return None
    root = memory_owner(v)
    return root if id(root) in current().store.boxes else None


def _grad_view(root, v, g):
    """The part of ``g`` (the gradient of box ``root``, owned by the store) that view ``v`` of ``root``
    covers, as a view of ``g`` that can be read and written."""
    if not root.flags.c_contiguous:
        raise UnsupportedError("tensorlang.ad differentiates writes through a view only of an array in C order")
    out = view_within(root, v, g)
    if out is None and batched(g):
        raise UnsupportedError("ad.vmap under a derivative: a write through a view of an array that is not batched, "
                               "whose gradient is, is not followed by tensorlang.ad; write into a copy "
                               "(v = x[1:].copy())")
    if out is None:
        raise UnsupportedError("tensorlang.ad cannot map this view of an array to its gradient")
    return out


def batched(x) -> bool:
    """Whether ``x`` is a batch of ``ad.vmap`` (its examples' values in an array of its own, ``__ad_values__``)."""
    return getattr(type(x), "__ad_values__", None) is not None


def view_within(a, v, g):
    """The view of ``g`` (an array of ``a``'s shape in C order: ``a``'s gradient or tangent) that ``v``, a
    view of memory inside C-ordered array ``a``, is of ``a``; None where that cannot be mapped (a view of
    part of each entry, ``z.real`` of a complex array, is not the same view of the gradient)."""
    if batched(g) or not (a.flags.c_contiguous and g.flags.c_contiguous) or g.shape != a.shape \
            or g.itemsize < a.itemsize or v.itemsize != a.itemsize:
        return None
    r = g.itemsize // a.itemsize
    offset = v.__array_interface__["data"][0] - a.__array_interface__["data"][0]
    lo = offset + sum((n - 1) * s for n, s in zip(v.shape, v.strides) if s < 0)
    hi = offset + sum((n - 1) * s for n, s in zip(v.shape, v.strides) if s > 0) + v.itemsize
    if g.itemsize % a.itemsize or offset % a.itemsize or any(s % a.itemsize for s in v.strides) \
            or v.size and (lo < 0 or hi > a.nbytes):
        return None
    return np.ndarray(v.shape, g.dtype, buffer=g, offset=offset * r, strides=tuple(s * r for s in v.strides))


def _root_grad(root):
    """The gradient of box array ``root`` in the store, made (zero) if it has none yet."""
    s = current().store
    g = s.grads.get(id(root))
    if g is None:
        g = s.grads[id(root)] = np.zeros(root.shape, dtype=np.result_type(root, 0.0))
    return g


def own(g):
    if type(g) is list:
        return list(g)
    if type(g) is dict:
        return dict(g)
    if type(g) is np.ndarray or type(g) is Indexed or isinstance(g, np.generic):   # (a 0-d array's: a scalar)
        a = dense(g)
        return np.array(a, dtype=np.result_type(g.dtype, 0.0)) if type(a) not in ARRAY_TYPES else own(a)
    if type(g) in ARRAY_TYPES:   # (a batch of ad.vmap: a copy of its own kind)
        return g.astype(np.result_type(g.dtype, 0.0))
    if type(g) is types.SimpleNamespace:
        return types.SimpleNamespace(**vars(g))
    if dataclasses.is_dataclass(g):
        return make_like(g, {f.name: getattr(g, f.name) for f in dataclasses.fields(g)})
    return g


# a copy is linear (its code builds a namespace from ``**vars``, outside the transformed subset)
RULES[own] = lambda g: (own(g), lambda dy: (dy,))
JVP_RULES[own] = lambda args, ts: (own(args[0]), None if ts[0] is None else own(ts[0]))


def box_grad(obj):
    """The current gradient of box ``obj`` (owned by the store, so it may be updated in place); for a
    view of a box array, the part of the box's gradient it covers."""
    g = current().store.grads.get(id(obj))
    if g is None and type(obj) is np.ndarray:
        root = _view_of_box(obj)
        if root is not None:
            return _grad_view(root, obj, _root_grad(root))
    return g


def acc_into(v, d, c):
    """Add gradient ``c`` for value ``v``: into the store if ``v`` is a box (or a view of one), else into
    local ``d``."""
    if c is None:
        return d
    s = current().store
    if not s.boxes:   # (no box exists: the local sum, the common case inlined)
        if d is None:
            return c
        return d + c if type(d) is np.ndarray and type(c) is np.ndarray else acc(d, c)
    if type(c) in (list, tuple, dict) and type(v) is type(c):
        c = _items_to_boxes(v, c, s, set())
    if id(v) in s.boxes:
        if type(v) is list and type(c) is np.ndarray:   # from a NumPy rule that read the list as an array
            c = list(c)
        with BOX_LOCK:   # pullbacks of work that ran in threads run in parallel (threads.py)
            old = s.grads.get(id(v))
            if type(old) is np.ndarray and getattr(c, "shape", None) == old.shape \
                    and type(c) not in ARRAY_TYPES and np.can_cast(c.dtype, old.dtype, "same_kind") \
                    and (type(c) is not Indexed or c.batch() is None):   # (NumPy's array cannot hold a batch)
                if type(c) is Indexed:   # the store owns old: added in place, O(size of c's parts)
                    c.add_into(old)
                else:
                    old += c
            else:
                s.grads[id(v)] = own(c) if old is None else own(acc(old, c))
        return d
    root = _view_of_box(v)
    if root is not None:
        v, c = _unrepeated(v, c)
        g = _grad_view(root, v, _root_grad(root))
        g += c
        return d
    return acc(d, c)


def _repeats(v) -> tuple:
    """The axes along which view ``v`` repeats the entries it views (stride 0: a view ``np.broadcast_to`` made)."""
    return tuple(k for k, (n, st) in enumerate(zip(v.shape, v.strides)) if st == 0 and n > 1)


def _first_of_repeats(v, axes: tuple) -> tuple:
    """The selection of ``v`` at the first of each entry's repeats along ``axes``."""
    return tuple(slice(0, 1) if k in axes else slice(None) for k in range(v.ndim))


def _unrepeated(v, c):
    """View ``v`` and gradient ``c``; where ``v`` repeats entries (``_repeats``), ``v`` less the repeats and ``c``
    summed over them, so that each entry's gradient is added once (added through the repeating view, all but one
    of the sums would be lost)."""
    axes = _repeats(v)
    if not axes:
        return v, c
    return v[_first_of_repeats(v, axes)], np.sum(np.broadcast_to(dense(c), v.shape), axis=axes, keepdims=True)


def unfollowed(xs) -> None:
    """Note, in gradient code being differentiated again (``nested_store.Level``), that the transform does not
    follow a write into array ``xs`` from here on (a ``for`` loop iterates over it, its rows views of it; a call
    returned it, or a view of it): such a write goes to the recording (``nested_store._refuse_write_into_stored``)."""
    lv = current().level
    if lv is not None and type(xs) is np.ndarray:
        lv.stored.add(id(box_of(lv.original(xs))))


NONDIFF.add(unfollowed)


def rewound(obj):
    """The items of list or dict box ``obj`` as they were at the point of the program the backward pass has
    reached, for the pullback of a write into it to rewind further (put back what the write overwrote, take out
    what it added): the pullback of a read made earlier sees the items that read saw, not those the program
    ended with (a copy of its items the first time)."""
    s = current().store
    items = s.rewound.get(id(obj))
    if items is None:
        items = s.rewound[id(obj)] = dict(obj) if isinstance(obj, dict) else list(obj)
    return items


def _items_to_boxes(v, c, s, seen):
    """Gradient ``c`` of list, tuple or dict ``v`` less the parts that belong to what ``v`` holds (at any depth,
    through containers, attributes and bound methods' ``__self__``) that is a box or a view of a box array:
    those parts are added into the store, where a read of such an object leaves its gradient too
    (``take_captured``), so the pullbacks of writes into it find them.  What ``v`` holds is what it held where
    the backward pass has reached (``rewound``)."""
    seen.add(id(v))
    items = s.rewound.get(id(v), v)   # (as the read whose gradient ``c`` is saw them: ``rewound``)
    keys = list(c) if type(c) is dict else range(min(len(c), len(items)))
    out = None
    for k in keys:
        part = c[k]
        if part is None or type(c) is dict and k not in items:
            continue
        new = _part_to_boxes(items[k], part, s, seen)
        if new is not part:
            out = (dict(c) if type(c) is dict else list(c)) if out is None else out
            out[k] = new
    if out is None:
        return c
    return out if type(c) is not tuple else tuple(out)


def _part_to_boxes(item, part, s, seen):
    """``part``, the gradient of ``item``, less what ``_items_to_boxes`` moves into the store."""
    if id(item) in s.boxes or _view_of_box(item) is not None:
        acc_into(item, None, part)
        return None
    if id(item) in seen:
        return part
    t = type(item)
    if t in (list, tuple, dict) and type(part) is t:
        return _items_to_boxes(item, part, s, seen)
    if type(part) is not types.SimpleNamespace:   # (an object's gradient, a bound method's __self__)
        return part
    seen.add(id(item))
    fields = {k: _part_to_boxes(getattr(item, k, None), g, s, seen) for k, g in vars(part).items()}
    if all(fields[k] is g for k, g in vars(part).items()):
        return part
    fields = {k: g for k, g in fields.items() if g is not None}
    return types.SimpleNamespace(**fields) if fields else None


BOX_LOCK = threading.Lock()
# transforming a function is done by one thread at a time (CPython 3.11's ast module is not thread-safe)
BUILD_LOCK = threading.RLock()


def take(v, d):
    """The gradient of ``v`` where it was made: the local ``d`` plus (and emptying) its box's.  The box of an
    object this thread's pullback shares with pullbacks running beside it (the arguments of work sent to
    threads, ``threads``) keeps its gradient until the thread that made the object takes it."""
    context = current()
    s = context.store
    d = dense(d)
    if s.boxes:
        if id(v) in s.boxes:
            return d if id(v) in context.shared else acc(d, s.grads.pop(id(v), None))
        root = _view_of_box(v)
        if root is not None and id(root) in s.grads:
            axes = _repeats(v)
            if not axes:
                g = _grad_view(root, v, s.grads[id(root)])
                d = acc(d, g.copy())
            else:   # (each entry's gradient handed out once, at the first of its repeats)
                first = _first_of_repeats(v, axes)
                g = _grad_view(root, v[first], s.grads[id(root)])
                part = np.zeros(v.shape, np.result_type(g.dtype, float))
                part[first] = g
                d = acc(d, part)
            g[...] = 0
    return d


def take_items(v, d):
    """``take`` of the results of a primitive (a NumPy or user rule, a compiled kernel): for a tuple (a named
    one too: ``eigh``), each item's gradient where the primitive made it.  A primitive cannot take the
    gradients that code after it left in the box store for the arrays it returned (code that wrote into
    them); transformed code takes those of what it makes itself."""
    if not isinstance(v, tuple) or not current().store.boxes:
        return take(v, d)
    items = item_grads(v, d)
    return dense(d) if items is None else like_grads(d, tuple(take(x, g) for x, g in zip(v, items)))


def made_by_primitive(rule) -> bool:
    """Whether ``rule``'s results are made by its primitive (the rule library's, a user's ``@ad.rule``), not by
    transformed code or the layer's own helpers (nested gradients, checkpoints, the store's operations),
    which take the gradients of what they make."""
    module = getattr(rule, "__module__", None) or ""
    return not module.startswith(_LAYER) or module.startswith(_LAYER + "rules") \
        or getattr(rule, "made_by_primitive", False)


_LAYER = __name__[:__name__.rindex(".") + 1]   # this package, ``...derive.ad.``


def item_grads(v: tuple, d):
    """The gradients of the items of tuple ``v`` in its gradient ``d`` (None: every item's is None), or None
    where ``d`` is not a gradient item by item."""
    if d is None:
        return (None,) * len(v)
    return d if isinstance(d, tuple) and len(d) == len(v) else None


def like_grads(d, grads: tuple):
    """``grads``, the gradients of a tuple's items, in the form of its gradient ``d`` (a named tuple stays
    one), or None where every item is None (no gradient)."""
    if all(g is None for g in grads):
        return None
    return d._make(grads) if hasattr(type(d), "_make") else grads


def held(v, obj) -> bool:
    """Whether ``v``, read out of ``obj`` by an index, is held by it (an item of a container, a view of an array)
    rather than made by the read (an array read from an array by an advanced index, ``x[[0, 1]]``): the gradient
    of a box it holds stays in the store for the code that made the box (``take_captured``); that of a box
    the read made (an array written into after the read) is taken here (``take``).  A value of a type of
    ``ARRAY_TYPES`` that names the array holding its values (``__ad_memory__``: a recording's stand-in) is
    answered for by that array."""
    v, obj = memory_of(v), memory_of(obj)
    return not (type(obj) is np.ndarray and type(v) is np.ndarray and not np.may_share_memory(v, obj))


NONDIFF.add(held)


def take_captured(v, d):
    """The gradient of ``v`` read out of a closure's cell, a container or an attribute: the local ``d``.
    The gradient of a box (or of a view of one) stays in the store, where the code that made the box takes
    it after the pullback of every write into it has run (``with_nested_boxes`` for boxes the arguments
    hold)."""
    s = current().store
    if s.boxes and (id(v) in s.boxes or _view_of_box(v) is not None):
        return dense(d)
    return take(v, d)


def with_nested_boxes(args, grads):
    """The gradients ``grads`` of ``args`` at the end of a differentiation, plus the gradients still in the
    store of the objects the arguments hold that were written to (``m[0][1] = v`` for an argument ``m``)."""
    s = current().store
    if not s.grads:
        return grads
    seen: set = set()
    return tuple(_nested_grad(a, g, s.grads, seen) for a, g in zip(args, grads))


def _nested_grad(v, g, grads, seen):
    t = type(v)
    if t in (float, int, bool, complex, str, np.float64) or id(v) in seen:
        return g
    seen.add(id(v))
    if t is list or t is tuple:
        parts = [_nested_grad(x, None if g is None else g[i], grads, seen) for i, x in enumerate(v)]
        if g is not None or any(p is not None for p in parts):
            g = parts if t is list else tuple(parts)
    elif t is dict:
        parts = {k: _nested_grad(x, None if g is None else g.get(k), grads, seen) for k, x in v.items()}
        if g is not None or any(p is not None for p in parts.values()):
            g = {k: p for k, p in parts.items() if p is not None}
    elif t is not np.ndarray and isinstance(getattr(v, "__dict__", None), dict) \
            and not isinstance(v, (type, types.ModuleType, types.FunctionType)):
        extra = {k: _nested_grad(x, None, grads, seen) for k, x in vars(v).items()}
        extra = {k: p for k, p in extra.items() if p is not None}
        if extra:
            g = acc(g, make_like(v, extra))
    return acc(g, grads.pop(id(v), None))


# -- J: a call and its pullback ----------------------------------------------------------------------------
NONDIFF.add(current)   # (the context, read by this module's functions that forward mode differentiates)
BOX_METHODS: set = set()   # (type, name) of methods that write to their object: pullback runs without dy
NONDIFF_METHODS: set = set()   # names of methods whose result has no derivative (str.join, ndarray.argmax ...)
WRITING_RULES: set = set()   # rules that write to an argument (known to the analysis); J wraps their pullback in Writes
KEYWORD_RULES: dict = {}   # keyword -> rule(names, f, *args): a call whose keyword changes what it does (out=)
# specialised(f, args): the source transformation, by which J differentiates a Python function (``api``
# provides it; the transform itself calls into this module)
TRANSFORM = Provided("the source transformation (api.specialised)")
# recorded_pullback(f, args): J of a function whose source Python kept nowhere, by its recording (``recorded``)
RECORDED = Provided("the recording of functions without source (recorded.recorded_pullback)")
# a library's top-level package -> the function that registers the rules of its functions (by importing
# them; ``rules`` fills it in), called the first time one of its functions is met without a rule, so that
# importing tensorlang.ad does not import the library (Dask)
LIBRARY_RULES: dict = {}


def along_first(rule):
    """``along`` for a rule linear in its first argument alone (the others say how: shapes, axes ...)."""
    return lambda args, kw, ts: rule(ts[0], *args[1:], **kw)[0]


class RulePullback:
    """Adapts a rule's pullback (argument gradients) to J's convention (the function's own first); ``made``:
    the tuple of results a primitive made, whose items' gradients it takes first (``take_items``)."""

    __slots__ = ("back", "n", "made")

    def __init__(self, back, n, made=None):
        self.back, self.n, self.made = back, n, made

    def __call__(self, dy):
        if self.made is not None:
            dy = take_items(self.made, dy)
        if dy is None and type(self.back) is not Writes:
            return (None,) * (self.n + 1)
        g = self.back(dy)   # (a rule may give gradients of parameters left at their defaults: dropped)
        if g is ZERO:   # (a pullback differentiated again, through a call without derivative)
            return (None,) * (self.n + 1)
        if len(g) == self.n:
            return (None, *g)
        return (None, *g[:self.n]) if len(g) > self.n else (None, *g, *(None,) * (self.n - len(g)))


class Writes:
    """A rule's pullback that moves gradients through the box store: it runs without a cotangent too."""

    __slots__ = ("back",)

    def __init__(self, back):
        self.back = back

    def __call__(self, dy):
        return self.back(dy)


class _Zero:
    """The pullback of a call without derivative: every gradient is None."""

    __slots__ = ()

    def __call__(self, dy):
        return self

    def __getitem__(self, i):
        return None


ZERO = _Zero()


def untracked(what: str):
    """The pullback of an operation whose derivative tensorlang.ad cannot follow (``what``, e.g. an item
    of a ``deque``): no gradients while none reaches its result, else an ``UnsupportedError`` naming it
    (a gradient is never dropped silently)."""
    def back(dy):
        if dy is None:
            return ZERO
        raise UnsupportedError(f"tensorlang.ad has no derivative rule for {what}")
    return back


def J(f, *args):
    """``(f(*args), back)`` with ``back(dy) = (df, *dargs)``."""
    try:
        rule = RULES.get(f)
    except TypeError:
        rule = None
    if rule is not None:
        y, back = rule(*args)
        if rule in WRITING_RULES:   # its pullback runs without a gradient of the result
            back = Writes(back)
        return y, RulePullback(back, len(args), _made(y, rule))
    t = type(f)
    if t is types.FunctionType:
        if f in NONDIFF:   # (a Python function without derivative is called as it is, not transformed)
            return f(*args), ZERO
        if takes_extras(f):
            return J_flat(f, args, {})
        n = f.__code__.co_argcount
        if len(args) == n or f.__code__.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS):
            return _transformed(f, args).pb(f, *args)
        full = with_defaults(f, args)
        y, back = _transformed(f, full).pb(f, *full)
        return y, lambda dy: back(dy)[:len(args) + 1]
    hook = getattr(f, "__ad_pullback__", None)
    if hook is not None:
        y, back = hook(*args)
        return y, RulePullback(back, len(args), _made(y, f))
    bound = bound_call((), f, args)
    if bound is not None:
        return bound
    if in_table(f, NONDIFF):
        return f(*args), ZERO
    if isinstance(f, type):
        return _construct(f, args)
    if t is functools.partial:
        return partial_call(f, args, {})
    if t is CACHED and any(differentiable(a) for a in args):   # (functools.cache, lru_cache: its function's; the
        return J(f.__wrapped__, *args)                           # cache holds values, not derivatives)
    call = getattr(t, "__call__", None)
    if isinstance(call, types.FunctionType):   # (also when only the object's own state is differentiable)
        y, back = J(call, f, *args)
        return y, lambda dy: back(dy)[1:]
    if not any(differentiable(a) for a in args):
        return f(*args), ZERO
    raise UnsupportedError(f"no derivative rule for {qualified_name(f)}{called_at()}; register one with "
                           f"@tensorlang.ad.rule")


CACHED = type(functools.lru_cache(None)(len))   # the type of a function functools.cache or lru_cache wraps


def bound_call(names, f, args):
    """J of a call of bound method ``f`` (keyword arguments ``names``, the last of ``args``): a Python
    method's, or a builtin type's (``x.sum``, also reached as ``getattr(x, "sum")``) by its method rule; its
    gradient's ``__self__`` is the object's.  None for other callables."""
    t = type(f)
    if t is types.MethodType:
        y, back = Jkw(names, f.__func__, f.__self__, *args) if names else J(f.__func__, f.__self__, *args)
        return y, lambda dy: method_grads(back(dy))
    owner = getattr(f, "__self__", None)
    if t is types.BuiltinMethodType and owner is not None and type(owner) is not types.ModuleType:
        y, back = Jm(f.__name__, names, owner, *args)
        return y, ZERO if back is ZERO else lambda dy: method_grads((None, *back(dy)))
    return None



def _transformed(f, args):
    """The source transformation of Python function ``f`` at ``args``.  A rule of the library is transformed
    when it is differentiated again (generated code calls rules directly); where its code is outside the
    subset, the refusal names the primitive it is the rule of."""
    try:
        return TRANSFORM.fn(f, args)
    except UnsupportedError as e:
        if library_rules(f):
            return _BY_RULE
        if isinstance(e, NoSourceKept):
            return _BY_RECORDING
        primitive = rule_owner(f) if str(e).startswith(f.__code__.co_filename) else None
        if primitive is None:
            raise outside_refused(f, e) or e
        raise rule_code_refused(primitive.name, e) from None


def library_rules(f) -> bool:
    """Whether Python function ``f`` has a rule once the rules of its library are registered (those of
    ``LIBRARY_RULES``, registered here on first need)."""
    register = LIBRARY_RULES.get(str(getattr(f, "__module__", None)).partition(".")[0])
    if register is None:
        return False
    register()
    return f in RULES


# what ``_transformed`` gives for a function whose rule ``library_rules`` registered: J by the rule
_BY_RULE = types.SimpleNamespace(pb=lambda f, *args: J(f, *args))
# ... and for a function without source: J of its recording at these arguments
_BY_RECORDING = types.SimpleNamespace(pb=lambda f, *args: RECORDED.fn(f, args))


def called_at() -> str:
    """`` (called at FILE:line, in g)``: where the innermost frame of the user's code on the stack is, or ``""``."""
    site = user_call_site(sys._getframe(1))
    return f" (called at {site[0]}:{site[1]}, in {site[2]})" if site else ""


def outside_refused(f, e: UnsupportedError) -> UnsupportedError | None:
    """The refusal of Python function ``f`` from outside the user's code (a library's: its file is in the
    Python installation or a site-packages folder; or one whose source file is missing), whose code the
    transform refused with ``e``: it says to register a rule with ``@ad.rule`` and where the user's code
    called ``f`` (the innermost frame of the user's code on the stack).  None for the user's own functions,
    whose refusal is at their ``FILE:line:col`` already, for tensorlang's own code (installed in site-packages
    or not: its refusals are the transform's to handle), and for a refusal that says what to do."""
    code = f.__code__
    if "ad.rule" in str(e) or internal_file(code.co_filename) \
            or not (library_file(code.co_filename) or getattr(e, "no_source", False)):
        return None
    site = user_call_site(sys._getframe(1))
    where = f"{site[0]}:{site[1]}: in {site[2]}: " if site else ""
    name = qualified_name(f)
    called = site[3] if site and site[3] else name   # the library function the user's code called
    inner = f", through {name} ({code.co_filename}:{code.co_firstlineno})" if called != name else \
        f" ({code.co_filename}:{code.co_firstlineno})"
    err = UnsupportedError(
        f"{where}tensorlang.ad cannot differentiate this call of {called}{inner}: library code outside the subset "
        f"the transform takes. Register a rule with `@ad.rule({called})` (a function of its arguments "
        f"returning (value, back), back(dy) giving one gradient per argument; docs/ad.md, \"Rules\"), or keep "
        f"the call out of the differentiated code. The transform's refusal: {e}")
    err.__cause__ = None
    return err


def rule_code_refused(name, e) -> BeyondOrder:
    """The refusal of a second differentiation through primitive ``name`` whose rule's code the transform
    refused with ``e`` (its recording is differentiated instead: ``tower``).  Where the rule is tensorlang's
    own, the place in its code is no help to the user and is left out."""
    why = "tensorlang.ad does not differentiate its own rule for it again" if internal_file(
        str(e).partition(":")[0]) else f"the code of its rule is outside the subset tensorlang.ad transforms ({e})"
    return BeyondOrder(f"a second differentiation (reverse over reverse: ad.grad of ad.grad, ad.hessian of a "
                       f"function that calls ad.grad) through {name} is not supported: {why}")


def partial_call(p, args, kw):
    """J of calling ``functools.partial`` object ``p`` with ``args`` and keywords ``kw``: J of its function
    with the bound arguments in place (``p.func(*p.args, *args, **{**p.keywords, **kw})``).  The gradients
    of its function and bound arguments are the partial object's own (``SimpleNamespace(func=...,
    args=..., keywords=...)``)."""
    keywords = {**p.keywords, **kw}
    names = tuple(keywords)
    n, m = len(p.args), len(args)
    y, back = Jkw(names, p.func, *p.args, *args, *keywords.values()) if names else J(p.func, *p.args, *args)

    def pb(dy):
        g = back(dy)
        if g is ZERO or g is None:
            return ZERO
        g = tuple(g)
        bound = g[1:n + 1]
        given = dict(zip(names, g[n + m + 1:]))
        own_kw = {k: given[k] for k in p.keywords if k not in kw and given.get(k) is not None}
        own = None if g[0] is None and all(b is None for b in bound) and not own_kw else \
            types.SimpleNamespace(func=g[0], args=bound, keywords=own_kw)
        return (own, *g[n + 1:n + m + 1], *(given.get(k) for k in kw))
    return y, pb


def _make_partial(func, *args, **kw):
    """The rule of ``functools.partial(func, *args, **kw)``: the partial object's gradient (see
    ``partial_call``) goes back to the function and the bound arguments.  A partial of a partial is one
    partial of the inner function (Python flattens it): the inner partial's part of the gradient is its own."""
    p = functools.partial(func, *args, **kw)
    inner = len(func.args) if p.func is not func else 0

    def back(dp):
        if dp is None:
            return (None,) * (len(args) + len(kw) + 1)
        dfunc = dp.func
        if p.func is not func:
            dfunc = types.SimpleNamespace(func=dp.func, args=dp.args[:inner], keywords={
                k: v for k, v in dp.keywords.items() if k in func.keywords and k not in kw})
        return (dfunc, *dp.args[inner:], *(dp.keywords.get(k) for k in kw))
    return p, back


def _partial_again(*args, **kw):
    raise BeyondOrder("a second differentiation through functools.partial is not supported")


RULES[functools.partial] = _make_partial
RULES[_make_partial] = _partial_again   # (generated gradient code calls the rule itself)


def qualified_name(f) -> str:
    """f's module and qualified name as a user spells it ('numpy.linalg.svd'), or its repr."""
    name = getattr(f, "__qualname__", None)
    if name is None:
        return repr(f)
    module = getattr(f, "__module__", None) or ""
    for spelt in ("numpy.linalg", "numpy.fft", "numpy"):
        if module.startswith(spelt) and getattr(sys.modules.get(spelt), name, None) is f:
            return f"{spelt}.{name}"
    return f"{module}.{name}" if module else name


def in_table(f, table) -> bool:
    try:
        return f in table
    except TypeError:
        return False


def _pad(g, n):
    if type(g) is _Zero or len(g) >= n:
        return g
    return (*g, *(None,) * (n - len(g)))


def method_grads(g):
    """A bound method's gradients in J's convention from its function's, ``(df, dself, *dargs)``: the
    gradient of its ``__self__`` as the method's own."""
    if type(g) is _Zero:
        return g
    dself = g[1]
    return (types.SimpleNamespace(__self__=dself) if dself is not None else None, *g[2:])


def J_flat(f, pos, kw):
    """J of a call of Python function ``f`` that has ``*args``, ``**kwargs`` or keyword-only parameters: J of its
    flat twin (``flat``), the gradients given back to the call's arguments."""
    twin, args, where = flat_call(f, pos, kw)
    y, back = J(twin, *args)

    def flat_back(dy):
        g = back(dy)
        return g if type(g) is _Zero else (g[0], *call_grads(where, g[1:]))
    return y, flat_back


def refuse_keyword_only(f) -> None:
    """The fence's refusal of Python function ``f`` with keyword-only parameters, where a call binds them by
    name (the transforms take a function's parameters by position)."""
    code = f.__code__
    if code.co_kwonlyargcount:
        names = ", ".join(code.co_varnames[code.co_argcount:code.co_argcount + code.co_kwonlyargcount])
        raise UnsupportedError(f"{code.co_filename}:{code.co_firstlineno}: {f.__qualname__}'s keyword-only "
                               f"parameters ({names}) are not supported by tensorlang.ad; declared before the "
                               f"'*', they can still be passed by name")


def with_defaults(f, args):
    n = f.__code__.co_argcount
    defaults = f.__defaults__ or ()
    missing = n - len(args)
    if missing < 0 or missing > len(defaults):
        raise TypeError(f"{f.__qualname__}() takes {n} positional arguments but {len(args)} were given")
    return args + defaults[len(defaults) - missing:]


def differentiable(x) -> bool:
    k = kind_of(x)
    if k == NUM:
        return True
    if k != ANY:
        return False
    if is_array(x):
        return x.dtype.kind in "fc"
    if isinstance(x, _RANDOM):   # a random generator's state holds no differentiable value
        return False
    return not callable(x) or isinstance(x, types.FunctionType)


_RANDOM = (np.random.RandomState, np.random.Generator, np.random.BitGenerator)


def _made(y, how):
    """``y`` where it is a tuple that primitive ``how`` (a rule, or an object with ``__ad_pullback__`` that
    declares ``__ad_write_free__``: it returns new arrays) made, else None (``RulePullback.made``)."""
    if not isinstance(y, tuple):
        return None
    made = getattr(type(how), "__ad_write_free__", False) if hasattr(how, "__ad_pullback__") \
        else made_by_primitive(how)
    return y if made else None


def Jkw_read(read, names, f, *args):
    """``Jkw`` of a call whose caller reads the gradients of the keyword arguments named in ``read`` alone (the
    others are inactive there: ``analysis``): a callee that can leave gradients out (``__ad_pullback_read__``:
    a compiled kernel, whose adjoint is then the one in those inputs) is asked for those, the others' as
    None; any other callee as by ``Jkw``."""
    hook = getattr(type(f), "__ad_pullback_read__", None)
    if hook is None:
        return Jkw(names, f, *args)
    return _read_call(hook, read, names, f, args)


def _read_call(hook, read, names, f, args):
    """``f``'s ``__ad_pullback_read__`` (``hook``) called, its pullback in J's convention."""
    k = len(names)
    y, back = hook(f, read, *args[:len(args) - k], **dict(zip(names, args[len(args) - k:])))
    return y, RulePullback(back, len(args), _made(y, f))


def Jkw(names, f, *args):
    """J for a call with keyword arguments (``names`` are the last ``len(names)`` of ``args``)."""
    hook = getattr(type(f), "__ad_pullback_read__", None)
    if hook is not None:   # (a compiled kernel: its keywords are its inputs, whatever their names)
        return _read_call(hook, None, names, f, args)
    k = len(names)
    pos, kw = args[:len(args) - k], dict(zip(names, args[len(args) - k:]))
    if "out" in kw and kw["out"] is not None:
        return KEYWORD_RULES["out"](names, f, *args)
    try:
        rule = RULES.get(f)
    except TypeError:
        rule = None
    if rule is not None:
        check_keywords(f, rule, names)
        y, back = rule(*pos, **kw)
        made, writing = _made(y, rule), rule in WRITING_RULES   # (a writing rule's pullback runs without dy)

        def kwback(dy):
            if made is not None:
                dy = take_items(made, dy)
            if dy is None and not writing:
                return (None,) * (len(args) + 1)
            return keyword_grads(rule, len(pos), names, back(dy))
        return y, kwback
    if type(f) is functools.partial:
        return partial_call(f, pos, kw)
    hook = getattr(f, "__ad_pullback__", None)
    if hook is not None:
        y, back = hook(*pos, **kw)
        return y, RulePullback(back, len(args), _made(y, f))
    if in_table(f, NONDIFF):   # called as it is, keywords too (np.eye(n, dtype=bool)), before binding them
        return f(*pos, **kw), ZERO
    bound = bound_call(names, f, args)
    if bound is not None:
        return bound
    if type(f) is types.FunctionType:
        if library_rules(f):
            return Jkw(names, f, *args)
        if takes_extras(f):
            return J_flat(f, pos, kw)
        sig = inspect.signature(f)
        bound = sig.bind(*pos, **kw)
        bound.apply_defaults()
        order = list(sig.parameters)
        if any(n not in order for n in names):   # (a library's function: not flattened, ``flat.takes_extras``)
            raise UnsupportedError(f"a call of {f.__qualname__} with keyword arguments it takes as **kwargs is not "
                                   f"differentiated by tensorlang.ad")
        full = tuple(bound.arguments[p] for p in order)
        where = list(range(len(pos))) + [order.index(n) for n in names]
        y, back = J(f, *full)

        def kwback(dy):
            g = back(dy)
            return (g[0], *(g[i + 1] for i in where))
        return y, kwback
    if isinstance(f, type) and plain_dataclass(f):
        y = f(*pos, **kw)
        return y, lambda dy: (None, *(field(dy, f_.name) for f_ in dataclasses.fields(f)[:len(pos)]),
                              *(field(dy, n) for n in names))
    if isinstance(f, type) and dataclasses.is_dataclass(f):   # (one that computes fields: by its initializer)
        full, where = by_parameters(initializer(f), pos, kw, names)
        y, back = _construct(f, full)
        return y, lambda dy: (lambda g: (g[0], *(g[i + 1] for i in where)))(back(dy))
    if isinstance(f, type):
        return _construct(f, args, names)
    call = getattr(type(f), "__call__", None)
    if isinstance(call, types.FunctionType):   # a callable object: its __call__ with the object first
        y, back = Jkw(names, call, f, *args)
        return y, lambda dy: back(dy)[1:]
    if not any(differentiable(a) for a in args):
        return f(*pos, **kw), ZERO
    raise UnsupportedError(f"no derivative rule for {qualified_name(f)} called with keyword arguments"
                           f"{called_at()}; register one with @tensorlang.ad.rule")


_KEYWORDS: dict = {}


def check_keywords(f, rule, names) -> None:
    """Refuse, naming them, keyword arguments of a call of ``f`` that its rule ``rule`` does not take
    (``np.max(x, initial=0)``, ``np.multiply(a, b, where=m)``): the rule would fail with a raw
    ``TypeError``, or compute something else."""
    key = (rule, tuple(names))
    bad = _KEYWORDS.get(key)
    if bad is None:
        try:
            params = inspect.signature(rule).parameters.values()
        except (TypeError, ValueError):
            params = ()
        if any(p.kind is p.VAR_KEYWORD for p in params) or not params:
            bad = ()
        else:
            known = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
            bad = tuple(n for n in names if n not in known)
        _KEYWORDS[key] = bad
    if bad:
        name = f if type(f) is str else getattr(f, "__qualname__", None) or getattr(f, "__name__", repr(f))
        raise UnsupportedError(f"tensorlang.ad differentiates {name} without the keyword argument"
                               f"{'s' if len(bad) > 1 else ''} {', '.join(bad)}")


_PLACES: dict = {}


def keyword_grads(rule, npos, names, g):
    """The gradients ``g`` that ``rule``'s pullback gave for a call with ``npos`` positional arguments and
    keyword arguments ``names``, in J's convention (the function's own first, then the call's arguments)."""
    where = _keyword_places(rule, npos, names)
    if None in where and len(g) == npos + len(names):   # a rule taking them as **kw gave them in call order
        return (None, *g)
    return (None, *g[:npos], *(g[i] if i is not None and i < len(g) else None for i in where))


def _keyword_places(rule, npos, names) -> tuple:
    """Where the gradient of each keyword argument is in ``rule``'s pullback: the position of the parameter
    of that name (rules name their parameters as NumPy does), None for keywords it takes as ``**kw``."""
    key = (rule, npos, names)
    places = _PLACES.get(key)
    if places is None:
        params = [p.name for p in inspect.signature(rule).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        places = _PLACES[key] = tuple(params.index(n) if n in params[npos:] else None for n in names)
    return places


def plain_dataclass(cls) -> bool:
    """Whether ``cls`` is a dataclass that is its constructor's arguments (no ``__post_init__``, no field with
    ``init=False``): a value's gradient is then its fields', read off the gradient of the object."""
    return dataclasses.is_dataclass(cls) and not hasattr(cls, "__post_init__") \
        and all(f.init for f in dataclasses.fields(cls))


_INITIALIZERS: dict = {}


def initializer(cls):
    """The ``__init__`` the transform differentiates to construct ``cls``: its own, but for a dataclass that
    computes fields from its arguments (``__post_init__``, ``field(init=False)``) the ``__init__`` dataclasses
    makes written out as source (the one it makes has none): each field set by ``object.__setattr__``, then
    ``self.__post_init__()``."""
    if not dataclasses.is_dataclass(cls) or plain_dataclass(cls):
        return cls.__dict__.get("__init__") or getattr(cls, "__init__", None)
    made = _INITIALIZERS.get(cls)
    if made is None:
        made = _INITIALIZERS[cls] = _dataclass_initializer(cls)
    return made


def _dataclass_initializer(cls):
    initvars = [f for f in cls.__dataclass_fields__.values()
                if isinstance(f.type, dataclasses.InitVar) or isinstance(f.type, str) and "InitVar" in f.type]
    if initvars or any(f.kw_only for f in dataclasses.fields(cls)):
        raise UnsupportedError(f"tensorlang.ad does not differentiate constructing {cls.__qualname__}, a dataclass "
                               f"that computes fields, with InitVar or keyword-only fields")
    env, params, body = {"_missing": dataclasses.MISSING}, ["self"], []
    for k, f in enumerate(dataclasses.fields(cls)):
        env[f"_default{k}"], env[f"_factory{k}"] = f.default, f.default_factory
        given = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        if f.init:
            params.append(f.name if not given else f"{f.name}=_default{k}")
            if f.default_factory is not dataclasses.MISSING:
                body.append(f"if {f.name} is _missing:\n        {f.name} = _factory{k}()")
            value = f.name
        elif given:
            value = f"_default{k}" if f.default is not dataclasses.MISSING else f"_factory{k}()"
        else:
            continue
        body.append(f"object.__setattr__(self, {f.name!r}, {value})")
    if hasattr(cls, "__post_init__"):
        body.append("self.__post_init__()")
    lines = "".join(f"    {b}\n" for b in body) or "    pass\n"
    return define(f"def __init__({', '.join(params)}):\n{lines}", env)["__init__"]


def _construct(cls, args, names=()):
    """Pullbacks of constructors: dataclasses and named tuples by their fields; other classes (and dataclasses
    that compute fields) by transforming ``__init__`` on a fresh box (``names``: the keywords of the call, the last
    of ``args``, which only such a class is constructed with here)."""
    if names:
        return _initialized(cls, args, names)
    if plain_dataclass(cls):
        y = cls(*args)
        names = [f.name for f in dataclasses.fields(cls) if f.init][:len(args)]
        return y, lambda dy: (None, *(field(dy, n) for n in names))
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        y = cls(*args)
        return y, lambda dy: (None,) * (len(args) + 1) if dy is None else (None, *dy)
    return _initialized(cls, args, names)


def _initialized(cls, args, names):
    """An object of class ``cls`` made by its Python ``__init__`` on a fresh box, transformed (the keywords
    ``names`` the last of ``args``)."""
    init = initializer(cls)
    if isinstance(init, types.FunctionType) and cls.__new__ is object.__new__:
        obj = object.__new__(cls)
        register(obj)
        _, back = Jkw(names, init, obj, *args) if names else J(init, obj, *args)

        def ctor_back(dy):
            acc_into(obj, None, dy)
            return (None, *back(None)[2:])
        return obj, ctor_back
    if not any(differentiable(a) for a in args):
        k = len(args) - len(names)
        return cls(*args[:k], **dict(zip(names, args[k:]))), ZERO
    raise UnsupportedError(f"no derivative rule for constructing {cls.__qualname__}"
                           f"{' called with keyword arguments' if names else ''}")


def by_parameters(init, pos, kw, names) -> tuple:
    """The arguments of a call ``cls(*pos, **kw)`` as positions of ``init``'s parameters after ``self`` (the
    defaults filled in), and the place there of each argument of the call (positions, then ``names``)."""
    sig = inspect.signature(init)
    bound = sig.bind(None, *pos, **kw)
    bound.apply_defaults()
    order = list(sig.parameters)[1:]
    return tuple(bound.arguments[p] for p in order), list(range(len(pos))) + [order.index(n) for n in names]


def method_rule(obj, name):
    """The rule of method ``name`` of ``obj`` (of its type or a base type), or None."""
    t = type(obj)
    rule = METHOD_RULES.get((t, name))
    if rule is None and (isinstance(obj, np.generic) or t in ARRAY_TYPES):   # (a NumPy scalar: a 0-d array's)
        rule = METHOD_RULES.get((np.ndarray, name))
    if rule is None and t is not np.ndarray:
        for base in t.__mro__[1:]:
            rule = METHOD_RULES.get((base, name))
            if rule is not None:
                break
    return rule


# the methods of an array that take ``out=`` and are NumPy's function of their name with the array first
OUT_METHODS = frozenset({"all", "any", "argmax", "argmin", "clip", "cumprod", "cumsum", "dot", "max", "mean", "min",
                         "prod", "round", "std", "sum", "take", "trace", "var"})


def out_method(name, kwnames, obj, args):
    """NumPy's function of the name where ``obj.name(*args)`` (keywords ``kwnames``, the last of ``args``) is an
    array's method of ``OUT_METHODS`` called with ``out=``, else None."""
    if "out" not in kwnames or name not in OUT_METHODS or not (type(obj) is np.ndarray or type(obj) in ARRAY_TYPES):
        return None
    return getattr(np, name) if args[len(args) - len(kwnames) + kwnames.index("out")] is not None else None


def Jm(name, kwnames, obj, *args):
    """J for ``obj.name(*args)``: method rules, module functions, then Python methods transformed."""
    t = type(obj)
    if kwnames:
        k = len(kwnames)
        pos, kw = args[:len(args) - k], dict(zip(kwnames, args[len(args) - k:]))
    else:
        pos, kw = args, None
    f = out_method(name, kwnames, obj, args)
    if f is not None:   # x.sum(axis=1, out=o) as np.sum(x, axis=1, out=o), whose write into o the box rules follow
        y, back = Jkw(kwnames, f, obj, *args)
        return y, lambda dy: back(dy)[1:]
    rule = method_rule(obj, name)
    if rule is not None:
        if kw:
            check_keywords(f"{t.__name__}.{name}", rule, kwnames)
        y, back = rule(obj, *pos, **kw) if kw else rule(obj, *pos)
        n = len(args) + 1

        def grads(dy):   # (with keywords, the pullback gives one's gradient at its parameter's place: x.sum(initial=a))
            return keyword_grads(rule, n - len(kw), kwnames, back(dy))[1:] if kw else _pad(back(dy), n)
        if (t, name) in BOX_METHODS:
            return y, grads
        return y, lambda dy: ZERO if dy is None else grads(dy)
    if t is types.ModuleType or isinstance(obj, type) and _class_function(obj, name) or ufunc_method(obj, name):
        f = getattr(obj, name)   # a module's function; a class's function called on the class (Cls.f(o, v));
        # a ufunc's method with a rule of its own (np.add.reduce)
        y, back = Jkw(kwnames, f, *args) if kwnames else J(f, *args)
        return y, lambda dy: back(dy)
    attr = inspect.getattr_static(obj, name, None)
    if callable(attr) and name in getattr(obj, "__dict__", ()):   # a callable the object holds, not a method
        y, back = Jkw(kwnames, attr, *args) if kwnames else J(attr, *args)
        return y, lambda dy: (lambda g: (None if g[0] is None else field_grad(obj, name, g[0]), *g[1:]))(back(dy))
    if isinstance(attr, types.FunctionType):
        y, back = Jkw(kwnames, attr, obj, *args) if kwnames else J(attr, obj, *args)
        return y, lambda dy: back(dy)[1:]
    if isinstance(attr, staticmethod):
        f = attr.__func__
        y, back = Jkw(kwnames, f, *args) if kwnames else J(f, *args)
        return y, lambda dy: (None, *back(dy)[1:])
    bound = getattr(obj, name)
    if not differentiable(obj) and not any(differentiable(a) for a in args) or name in NONDIFF_METHODS:
        return (bound(*pos, **kw) if kw else bound(*pos)), ZERO
    raise UnsupportedError(f"no derivative rule for the method {t.__qualname__}.{name}")


def ufunc_method(obj, name) -> bool:
    """Whether ``obj.name`` is a ufunc's method with a rule of its own (``np.add.reduce``: its rule is keyed
    by the bound method, as a function's)."""
    if type(obj) is not np.ufunc:
        return False
    try:
        return getattr(obj, name) in RULES
    except (AttributeError, TypeError):
        return False


def _class_function(cls, name) -> bool:
    """Whether ``cls.name`` is a Python function or method, or has a rule (``object.__setattr__``)."""
    f = getattr(cls, name, None)
    if isinstance(f, (types.FunctionType, types.MethodType)):
        return True
    try:
        return f in RULES
    except TypeError:
        return False


HELPERS = {
    "_ad_J": J, "_ad_Jkw": Jkw, "_ad_Jkw_read": Jkw_read, "_ad_Jm": Jm, "_ad_acc": acc, "_ad_acci": acc_into,
    "_ad_take": take, "_ad_takei": take_items, "_ad_held": held,
    "_ad_takef": take_captured, "_ad_addn": addn, "_ad_field": field, "_ad_item": item, "_ad_fngrad": fngrad, "_ad_deref": deref, "_ad_fold": fold,
    "_ad_snap": snap, "_ad_cut": cut, "_ad_keep": keep, "_ad_kept": kept, "_ad_like": like, "_ad_addat": add_at,
    "_ad_ents": entries, "_ad_withents": with_entries, "_ad_f64": np.float64,
}
