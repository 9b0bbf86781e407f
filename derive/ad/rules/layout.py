"""NumPy functions that only move, copy or drop entries (``roll``, ``tile``, ``repeat``, ``flip``,
``tril``, ``pad``, ``diag``, ``select``, the stack and split families, ``np.r_`` ...), differentiated by
one driver: the function runs once more on the *positions* of the entries of its array arguments
(1, 2, ... with 0 for "no entry"), so that each entry of that result names the argument entry it came
from, and the gradient is the incoming gradient summed into those positions, whatever the function did.

``layout_rule(f, arrays, sequences, fills)``: the arguments at ``arrays`` are arrays (or numbers), those
at ``sequences`` are sequences of them; the arguments in ``fills`` (by name or position: values that put
other numbers into the result, ``constant_values`` of ``pad``, ``default`` of ``select``) are numbered
too, so that a differentiable fill value gets the gradient of the entries it filled.
"""
from __future__ import annotations

import inspect
import numbers

import numpy as np

from ....errors import UnsupportedError
from ..ir import memory_of
from ..registry import JVP_RULES
from ..runtime import ARRAY_TYPES, LINEAR, RULES


def _is_entry(x) -> bool:
    """Whether ``x`` holds entries of the result (an array, a number, a list or tuple of numbers)."""
    return isinstance(x, (np.ndarray, numbers.Number, list, tuple)) and not isinstance(x, bool) \
        or type(x) in ARRAY_TYPES


class _Positions:
    """Numbers the entries of arguments in turn (from 1) and sums gradients back to them."""

    def __init__(self, start=1):
        self.next, self.parts = start, []

    def of(self, x):
        if not _is_entry(x):
            self.parts.append(None)
            return x
        a = x if type(x) in ARRAY_TYPES else np.asarray(x)
        if a.dtype.kind not in "biufc":
            raise UnsupportedError("tensorlang.ad differentiates layout functions of numeric arrays only")
        p = np.arange(self.next, self.next + a.size, dtype=np.int64).reshape(a.shape)
        if type(x) in ARRAY_TYPES and memory_of(x) is x:   # (a batch of ad.vmap: the same numbers in every example,
            # as a batch; not so a recording's stand-in, whose entries are those of the one array it holds)
            p = x.zeros(x.shape, np.int64) + p
        self.next += a.size
        self.parts.append((p, x))
        return p

    def grads(self, dys, wheres) -> list:
        g = None
        batch = None   # (a batch of ad.vmap among them: g is a batch; written in the subset that is differentiated)
        for group in (dys, wheres):
            for v in group:
                if batch is None and type(v) in ARRAY_TYPES:
                    batch = v
        for dy, w in zip(dys, wheres):
            if dy is not None:
                if g is None:
                    dtype = np.result_type(dy, 0.0)
                    g = np.zeros(self.next, dtype=dtype) if batch is None else batch.zeros((self.next,), dtype)
                np.add.at(g, np.ravel(w), np.ravel(dy))
        out = []
        for part in self.parts:
            if part is None or g is None:
                out.append(None)
                continue
            p, x = part
            gx = g[p.ravel()].reshape(p.shape)
            out.append(like_entries(x, gx))
        return out


def like_entries(x, g):
    """The gradient ``g`` (an array) in the form of ``x``: an array, a number, a list or a tuple."""
    if isinstance(x, np.ndarray) or type(x) in ARRAY_TYPES:
        return g
    if g.ndim == 0:
        return g[()]
    return type(x)(like_entries(xi, gi) for xi, gi in zip(x, g)) if type(x) in (list, tuple) else list(g)


def _items(y):
    """The arrays of a result: itself, or the items of a list or tuple (``split``)."""
    return list(y) if isinstance(y, (list, tuple)) else [y]


def _by_position(f, args, kw):
    """``args`` and ``kw`` with the keyword arguments that name f's next positional parameters moved into
    ``args`` (``np.hstack(tup=...)``, ``np.roll(a=x, shift=1)``), and the names moved, in order."""
    if not kw:
        return args, kw, ()
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        return args, kw, ()
    args, kw, moved = list(args), dict(kw), []
    for p in params[len(args):]:
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) or p.name not in kw:
            break
        args.append(kw.pop(p.name))
        moved.append(p.name)
    return tuple(args), kw, tuple(moved)


def _numbered(f, args, kw, arrays, sequences, fills, pos, where):
    """``where`` with 0 at the entries that no argument entry was numbered into: an argument in a numbered
    slot that holds no entries (a slice of ``np.r_[x, 1:10]``) puts numbers of its own into the result,
    which would read as positions. A second run numbered from ``pos.next`` moves every numbered entry by
    ``pos.next - 1`` and leaves those alone."""
    again = _Positions(pos.next)
    run = [again.of(a) if i in arrays or i in fills else [again.of(x) for x in a] if i in sequences else a
           for i, a in enumerate(args)]
    moved = f(*run, **{k: (again.of(v) if k in fills else v) for k, v in kw.items()})
    return [np.where(m - w == pos.next - 1, w, 0) for w, m in zip(_items(where), _items(moved))]


def layout_rule(f, arrays=(0,), sequences=(), fills=(), computes=None):
    """``computes(args, kw)``: what makes a call compute entries rather than move them (``np.pad`` with
    ``mode="mean"``), refused; None where it only moves them."""
    def rule(*args, **kw):
        names = tuple(kw)
        args, kw, moved = _by_position(f, args, kw)
        _moves_only(f, computes, args, kw)
        y = f(*args, **kw)
        pos = _Positions()
        run = list(args)
        for i, a in enumerate(args):
            if i in arrays or i in fills:
                run[i] = pos.of(a)
            elif i in sequences:
                run[i] = [pos.of(x) for x in a]
        filled = [k for k in kw if k in fills]
        where = f(*run, **{k: (pos.of(v) if k in fills else v) for k, v in kw.items()})
        if None in pos.parts:
            where = _numbered(f, args, kw, arrays, sequences, fills, pos, where)

        def back(dy):
            g = pos.grads(_items(dy), _items(where))
            out, k = [], 0
            for i, a in enumerate(args):
                if i in arrays or i in fills:
                    out.append(g[k])
                    k += 1
                elif i in sequences:
                    part = g[k:k + len(a)]
                    k += len(a)
                    out.append(tuple(part) if type(a) is tuple else part)
                else:
                    out.append(None)
            if not names:
                return tuple(out)
            n = len(out) - len(moved)   # a keyword call: the keyword arguments' gradients in call order
            by_name = dict(zip(moved, out[n:]))
            by_name.update(zip(filled, g[k:]))
            return tuple(out[:n]) + tuple([by_name.get(k) for k in names])
        return y, back

    def along(args, kw, ts, tkw=None):
        """The function along tangents ``ts`` of the arguments and ``tkw`` of the keyword arguments (it is
        linear in them)."""
        args, kw, moved = _by_position(f, args, kw)
        _moves_only(f, computes, args, kw)
        tkw = tkw or {}
        ts = (*ts, *(tkw.get(k) for k in moved))
        run = list(args)
        for i, a in enumerate(args):
            if i in arrays or i in fills:
                run[i] = _tangent(a, ts[i])
            elif i in sequences:
                run[i] = [_tangent(x, None if ts[i] is None else ts[i][j]) for j, x in enumerate(a)]
        return f(*run, **{k: (_tangent(v, tkw.get(k)) if k in fills else v) for k, v in kw.items()})

    rule.__name__ = f"rule_{getattr(f, '__name__', 'layout')}"
    along.keyword_tangents = True
    rule.by_position = lambda args, kw: _by_position(f, args, kw)
    LINEAR[rule] = along
    return rule


def _moves_only(f, computes, args, kw):
    why = computes and computes(args, kw)
    if why:
        raise UnsupportedError(f"tensorlang.ad differentiates np.{f.__name__} where it moves entries, not with {why}")


# the modes of ``np.pad`` that compute entries (a mean, a ramp ...) or leave them undefined
_PAD_COMPUTES = {"linear_ramp", "maximum", "mean", "median", "minimum", "empty"}


def _pad_computes(args, kw):
    mode = args[2] if len(args) > 2 else kw.get("mode", "constant")
    if callable(mode) or mode in _PAD_COMPUTES:
        return f"mode={getattr(mode, '__name__', mode)!r}"
    if kw.get("reflect_type") == "odd":   # 2 * edge - entry
        return "reflect_type='odd'"
    return None


def _tangent(x, t):
    """The tangent ``t`` of argument ``x`` of a layout function, zeros for None (x itself where it holds
    no entries); a list or tuple's tangent item by item."""
    if not _is_entry(x):
        return x
    if t is None:
        return np.zeros(np.shape(x))
    if type(x) in (list, tuple):
        return type(x)(_tangent(xi, ti) for xi, ti in zip(x, t))
    return t


def concatenator_getitem(obj, key):
    """``np.r_[...]``, ``np.c_[...]``: the entries of the items of ``key`` (arrays, numbers, lists)."""
    items = key if type(key) is tuple else (key,)
    y, back = layout_rule(lambda *xs: obj[xs], arrays=tuple(range(len(items))))(*items)
    if type(key) is tuple:
        return y, lambda dy: (None, back(dy))
    return y, lambda dy: (None, back(dy)[0])


def _concatenator_along(args, kw, ts):
    obj, key = args
    if type(key) is not tuple:
        return obj[_tangent(key, ts[1])]
    t = (None,) * len(key) if ts[1] is None else ts[1]
    return obj[tuple(np.zeros(np.r_[x].shape) if type(x) is slice else _tangent(x, tx) for x, tx in zip(key, t))]


LINEAR[concatenator_getitem] = _concatenator_along


_ONE = [np.roll, np.tile, np.repeat, np.flip, np.fliplr, np.flipud, np.rot90, np.tril, np.triu, np.diag,
        np.diagonal, np.moveaxis, np.swapaxes, np.rollaxis, np.broadcast_to, np.atleast_1d, np.atleast_2d,
        np.atleast_3d, np.split, np.array_split, np.hsplit, np.vsplit, np.dsplit, np.take,
        np.take_along_axis, np.resize, np.copy, np.diagflat, np.ascontiguousarray, np.delete]
_SEQUENCE = [np.vstack, np.hstack, np.dstack, np.column_stack] + ([np.row_stack] if hasattr(np, "row_stack") else [])

RULES.update({f: layout_rule(f) for f in _ONE})
RULES.update({f: layout_rule(f, arrays=(), sequences=(0,)) for f in _SEQUENCE})
RULES.update({np.pad: layout_rule(np.pad, fills=("constant_values",), computes=_pad_computes),
              np.append: layout_rule(np.append, arrays=(0, 1)), np.insert: layout_rule(np.insert, arrays=(0, 2)),
              np.select: layout_rule(np.select, arrays=(), sequences=(1,), fills=("default", 2))})


# -- functions of a variable number of arrays, or of nested lists of them -------------------------------------------
def _leaves(x, out):
    """The arrays and numbers of nested lists ``x`` (``np.block``'s argument), in order, into ``out``."""
    if type(x) is list:
        for item in x:
            _leaves(item, out)
    else:
        out.append(x)
    return out


def _rebuilt(x, leaves, at=None):
    """Nested lists shaped like ``x`` holding ``leaves`` in order."""
    at = at if at is not None else [0]
    if type(x) is list:
        return [_rebuilt(item, leaves, at) for item in x]
    at[0] += 1
    return leaves[at[0] - 1]


def _block(arrays):
    """``np.block(arrays)``: the layout driver over the arrays of the nested lists."""
    leaves = _leaves(arrays, [])
    y, back = layout_rule(lambda *xs: np.block(_rebuilt(arrays, xs)), arrays=tuple(range(len(leaves))))(*leaves)
    return y, lambda dy: (_rebuilt(arrays, back(dy)),)


def _tangents_like(x, t):
    """The tangent ``t`` of nested lists ``x`` as nested lists (zeros for None; ``t``'s lists may be tuples)."""
    if type(x) is list:
        return [_tangents_like(xi, None if t is None else t[i]) for i, xi in enumerate(x)]
    return _tangent(x, t)


def _block_along(args, kw, ts):
    return np.block(_tangents_like(args[0], ts[0]))


def _meshgrid(*xi, **kw):
    """``np.meshgrid(*xi, ...)``: the layout driver over its arrays."""
    y, back = layout_rule(lambda *xs: np.meshgrid(*xs, **kw), arrays=tuple(range(len(xi))))(*xi)
    return y, back


def _meshgrid_along(args, kw, ts):
    return np.meshgrid(*(_tangent(x, t) for x, t in zip(args, ts)), **kw)


def _broadcast_arrays(*args, **kw):
    """``np.broadcast_arrays(*args)``: the layout driver over its arrays; the views it returns read-only, as NumPy
    will make them (reading whether one is writeable warns that it will not be)."""
    return layout_rule(lambda *xs: _read_only(np.broadcast_arrays(*xs, **kw)), arrays=tuple(range(len(args))))(*args)


def _read_only(views: tuple) -> tuple:
    for v in views:
        v.flags.writeable = False
    return views


def _broadcast_arrays_along(args, kw, ts):
    return _read_only(np.broadcast_arrays(*(_tangent(x, t) for x, t in zip(args, ts)), **kw))


def _linear_jvp(f, along):
    """The forward rule of a function linear in its arguments: ``along`` them."""
    def jvp(args, ts, **kw):
        y = f(*args, **kw)
        if all(t is None for t in ts):
            return y, None
        return y, along(args, kw, ts)
    return jvp


LINEAR.update({_block: _block_along, _meshgrid: _meshgrid_along, _broadcast_arrays: _broadcast_arrays_along})
RULES.update({np.block: _block, np.meshgrid: _meshgrid, np.broadcast_arrays: _broadcast_arrays,
              np.lib.stride_tricks.sliding_window_view: layout_rule(np.lib.stride_tricks.sliding_window_view)})
JVP_RULES.update({np.block: _linear_jvp(np.block, _block_along), np.meshgrid: _linear_jvp(np.meshgrid, _meshgrid_along),
                  np.broadcast_arrays: _linear_jvp(lambda *xs, **kw: _read_only(np.broadcast_arrays(*xs, **kw)),
                                                   _broadcast_arrays_along)})
