"""Python builtins: ``sum``, ``abs``, ``min``, ``max``, ``float``, ``list``, ``tuple``, ``dict``, ``zip``,
``enumerate``, ``map``, ``filter``, ``reversed``, ``sorted``, and the functions that have no derivative."""
from __future__ import annotations

import builtins as _b
import types

import numpy as np

from ....errors import UnsupportedError
from ..lower import as_sequence, called_with, formatted, found_by_super, keywords_of
from ..registry import define
from ..runtime import (ARRAY_TYPES, LINEAR, J, NONDIFF, RULES, WRITING_RULES, Jkw, acc, summed_to, unbroadcast,
                       unfollowed)


def seq_grad(xs, g: list):
    """The gradient of sequence ``xs`` from the list ``g`` of its items' gradients (None is zero): a
    tuple for a tuple, a dense array for an array, a list otherwise."""
    if type(xs) is np.ndarray:
        if all(d is None for d in g):
            return None
        zero = np.zeros(xs.shape[1:], dtype=np.result_type(xs.dtype, 0.0))
        return np.array([zero if d is None else d + zero for d in g], dtype=zero.dtype).reshape(xs.shape)
    if type(xs) in ARRAY_TYPES and len(g):   # (a batch of ad.vmap: its entries' gradients stacked by its rules)
        if all(d is None for d in g):
            return None
        zero = np.zeros_like(xs[0]) * 1.0
        return np.stack([zero if d is None else d + zero for d in g])
    return tuple(g) if type(xs) is tuple else g


def _sum(xs, start=0):
    items = list(xs) if not isinstance(xs, (list, tuple, np.ndarray)) else xs
    y = _b.sum(items, start)
    kind = type(xs)
    if isinstance(y, (list, tuple)):   # a concatenation (``sum(rows, [])``): each its part of the gradient
        return y, lambda dy: _parts(dy, [start, *items], kind)
    if kind is np.ndarray:   # each row added, broadcast against the others and ``start``
        return y, lambda dy: (np.broadcast_to(summed_to(np.asarray(dy), xs.shape[1:]), xs.shape).astype(
            np.result_type(xs, dy, 0.0)), unbroadcast(dy, start))
    grads = lambda dy: [unbroadcast(dy, x) for x in items]   # (a batch of ad.vmap's: stacked, ``seq_grad``)
    return y, lambda dy: (seq_grad(xs, grads(dy)), unbroadcast(dy, start))


def _parts(dy, pieces, kind):
    """The gradients of ``start`` and the items that ``sum`` concatenated, from the result's ``dy``."""
    if dy is None:
        return None, None
    grads, at = [], 0
    for piece in pieces:
        grads.append(type(piece)(dy[at:at + len(piece)]))
        at += len(piece)
    return (tuple(grads[1:]) if kind is tuple else grads[1:]), grads[0]


def ranking(items, key):
    """What min/max compare the positions of ``items`` by: the items, or ``key`` of them (the key only
    chooses which item is the result, so it is called on the values and not differentiated)."""
    return items.__getitem__ if key is None else lambda i: key(items[i])


def _extremum(pick):
    def chosen(xs, key):
        """The sequence compared and the position of the item picked."""
        seq = xs[0] if len(xs) == 1 else xs
        items = list(seq)
        return seq, items, pick(range(len(items)), key=ranking(items, key))

    def along(args, kw, ts):
        """Along tangents ``ts``: the tangent of the item picked (the pick is locally constant, so the pullback
        does not depend on the items' values; its code takes ``*xs``)."""
        _, _, i = chosen(args, kw.get("key"))
        picked = ts[0] if len(args) == 1 else ts
        return None if picked is None else picked[i]

    def rule(*xs, key=None):
        seq, items, i = chosen(xs, key)
        y = items[i]
        n = len(items)

        def back(dy):
            g = [None] * n
            g[i] = dy
            return (seq_grad(seq, g),) if len(xs) == 1 else tuple(g)
        return y, back
    LINEAR[rule] = along
    return rule


def _abs(x):
    m = getattr(type(x), "__abs__", None)
    if isinstance(m, types.FunctionType):   # (a class's own __abs__: differentiated as any method)
        y, back = J(m, x)
        return y, lambda dy: back(dy)[1:]
    return abs(x), lambda dy: (dy * np.sign(x),)


def _float(x):
    if type(x) in ARRAY_TYPES:   # (a batch of ad.vmap, a stand-in of a recording: its one entry, as a 0-d array)
        shape = np.shape(x)
        return np.reshape(x, ()), lambda dy: (np.reshape(dy, shape),)
    return float(x), lambda dy: (dy,)


def _list(xs=()):
    y = list(xs)
    return y, _items_back(xs)


def _tuple(xs=()):
    y = tuple(xs)
    return y, _items_back(xs)


def _items_back(xs):
    """The pullback of ``list(xs)`` or ``tuple(xs)``: the items' gradients as ``xs``'s (a dict's keys have none)."""
    if isinstance(xs, dict):
        return lambda dy: (None,)
    return lambda dy: (seq_grad(xs, list(dy)),)


def dict_items(src) -> list:
    """The ``(key, value)`` items ``dict(src)`` is made of, in order (a later one sets its key again)."""
    if isinstance(src, dict):
        return list(src.items())
    if type(src) not in (list, tuple):
        raise UnsupportedError(f"tensorlang.ad differentiates dict() of a dict, or of a list or tuple of (key, value) "
                               f"pairs, not of a {type(src).__qualname__}: make a list of it first")
    return [tuple(p) for p in src]


def _dict(*src, **kw):
    """``dict(pairs or mapping, **kw)``: a value's gradient is the key's in the dict's gradient where that value
    is the one the key keeps (the last pair of the key, unless a keyword sets it), None where it is overwritten."""
    items = dict_items(src[0]) if src else []
    y = dict(items, **kw)
    last = {k: i for i, (k, _) in enumerate(items) if k not in kw}

    def back(dy):
        if dy is None:
            return (None,) * (len(src) + len(kw))
        kept = [(None, dy.get(k)) if last.get(k) == i and dy.get(k) is not None else None
                for i, (k, _) in enumerate(items)]
        if src and isinstance(src[0], dict):
            g_src = {k: g[1] for (k, _), g in zip(items, kept) if g is not None}
        elif src:
            g_src = seq_grad(src[0], kept)
        return (*((g_src,) if src else ()), *(dy.get(n) for n in kw))
    return y, back


def kept_by(f, items) -> list:
    """The positions of the ``items`` that ``filter(f, ...)`` keeps (``f`` only chooses them, so it is called on
    the values, not differentiated)."""
    return [i for i, v in enumerate(items) if (bool(v) if f is None else f(v))]


def _filter(f, xs):
    """``filter``: the items kept."""
    items = list(xs)
    kept = kept_by(f, items)

    def back(dy):
        g = [None] * len(items)
        for pos, i in enumerate(kept):
            g[i] = dy[pos]
        return None, seq_grad(xs, g)
    return [items[i] for i in kept], back


def _zip(*seqs, strict=False):
    y = list(zip(*seqs, strict=strict))

    def back(dy):
        out = []
        for k, s in enumerate(seqs):
            g = [None] * len(s)
            for i, d in enumerate(dy):
                if d is not None:
                    g[i] = d[k]
            out.append(seq_grad(s, g))
        return tuple(out)
    return y, back


def _zip_along(args, kw, ts):
    """``zip`` along tangents (None for a sequence without one)."""
    return list(zip(*[[None] * len(s) if t is None else t for s, t in zip(args, ts)]))


def _enumerate(xs, start=0):
    y = list(enumerate(xs, start))
    return y, lambda dy: (seq_grad(xs, [None if d is None else d[1] for d in dy]), None)


def _map(f, *seqs):
    """``map`` calls J of ``f`` per element (a higher-order function)."""
    results = [J(f, *xs) for xs in zip(*seqs)]
    y = [r[0] for r in results]
    return y, lambda dy: map_grads(seqs, [b(d) for (_, b), d in zip(results, dy)])


def map_grads(seqs, calls):
    """The gradients ``(df, *dseqs)`` of ``map(f, *seqs)`` from those ``(df, *dxs)`` of its calls of ``f`` (None
    for a call without any): each sequence's gradient as ``seq_grad`` makes it, of the sequence's length
    (``map`` stops at the shortest: the items past it get none), f's their sum."""
    df, dseqs = None, [[None] * (len(s) if hasattr(s, "__len__") else len(calls)) for s in seqs]
    for i, g in enumerate(calls):
        if g is not None:
            df = acc(df, g[0])
            for k in range(len(seqs)):
                dseqs[k][i] = g[k + 1]
    return (df, *(seq_grad(s, d) for s, d in zip(seqs, dseqs)))


def _called_with(f, args, named, opts):
    """``called_with(f, args, named, opts)``, a call with star-arguments: J of ``f`` as any call, its arguments'
    gradients gathered back into the tuple's and the dicts'."""
    kw = keywords_of(f, named, opts)
    names = tuple(kw)
    y, back = Jkw(names, f, *args, *kw.values()) if names else J(f, *args)
    n = len(args)

    def called_back(dy):
        g = back(dy)
        dargs = tuple(g[k] for k in range(1, n + 1))
        dnamed = {k: g[n + 1 + i] for i, k in enumerate(names) if k in named and g[n + 1 + i] is not None}
        dopts = {k: g[n + 1 + i] for i, k in enumerate(names) if k in opts and g[n + 1 + i] is not None}
        return g[0], dargs if any(d is not None for d in dargs) else None, dnamed or None, dopts or None
    return y, called_back


def _reversed(xs):
    y = list(reversed(xs))
    return y, lambda dy: (seq_grad(xs, list(reversed(dy))),)


def _sorted(xs, key=None, reverse=False):
    items = list(xs)
    order = sorted(range(len(items)), key=(lambda i: items[i]) if key is None else (lambda i: key(items[i])),
                   reverse=reverse)
    y = [items[i] for i in order]

    def back(dy):
        g = [None] * len(items)
        for pos, i in enumerate(order):
            g[i] = dy[pos]
        return (seq_grad(xs, g),)
    return y, back


RULES.update({
    _b.sum: _sum, _b.min: _extremum(_b.min), _b.max: _extremum(_b.max), _b.abs: _abs, _b.float: _float,
    _b.list: _list, _b.tuple: _tuple, _b.dict: _dict, _b.filter: _filter, _b.zip: _zip, _b.enumerate: _enumerate,
    _b.map: _map, _b.reversed: _reversed, _b.sorted: _sorted, called_with: _called_with,
})
NONDIFF.update({_b.print, _b.isinstance, _b.len, _b.range, _b.int, _b.round, _b.str, _b.repr, _b.type,
                _b.hash, _b.id, _b.bool, _b.callable, _b.hasattr, _b.format, _b.all, _b.any,
                found_by_super,    # (super().f(...): the function found, then called as any other)
                formatted})        # (an f-string's text)


def _as_sequence(xs):
    """What a ``for`` loop indexes (``lower.as_sequence``): the value itself, or a list of it."""
    unfollowed(xs)
    y = as_sequence(xs)
    if y is xs or type(xs) is np.flatiter:   # (x.flat: its gradient an array of the entries', as x.flat's rule takes)
        return y, lambda dy: (dy,)
    if type(xs) in (list, tuple, dict) or type(xs) in ARRAY_TYPES:
        return _list(xs)
    return y, _opaque_iteration(xs)


def _opaque_iteration(xs):
    """The pullback of iterating over an object whose iteration runs code the transform does not see (a class's
    ``__iter__``, ``np.ndenumerate``): its items' gradients have nowhere to go, refused once one reaches them."""
    def back(dy):
        if dy is None or all(d is None for d in dy):
            return (None,)
        raise UnsupportedError(f"tensorlang.ad does not differentiate iterating over a {type(xs).__qualname__} "
                               f"(the items' gradients cannot reach what it holds): iterate over a list or an array")
    return back


RULES[as_sequence] = _as_sequence
WRITING_RULES.add(_called_with)   # (the function it calls may move gradients through the box store: ``self.w = w``)
LINEAR[_zip] = _zip_along   # (its code takes *seqs)
define(_b.map, refused={"reverse over reverse": "its rule calls J of the function on each item, over *seqs, "
                                                "outside the transformed subset"})
