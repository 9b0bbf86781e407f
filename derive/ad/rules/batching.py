"""The batch rules of ``ad.vmap`` (``batching.BATCH_RULES``): for each NumPy function, how it runs on a batch.

A rule is ``rule(frame, *args, **kw)``: ``frame.batched(v)`` says which operands carry the batch (axis 0 of their
``data``), ``frame.wrap`` makes a result batched.  Elementwise operations align each batched operand as
``(B, 1, ..., 1, *shape)`` to the result's per-example rank (``frame.aligned``), plain operands broadcasting as
they are (right-aligned); functions with axes shift them by one; ``matmul``, ``solve`` and ``einsum`` keep vector operands
apart from the batch axis; indexing reads and writes through one translation of the index (``_data_index``).
A rule that cannot keep the examples apart (a batched boolean mask, a write into a plain array) refuses by name.
"""
from __future__ import annotations

import math
import string

import numpy as np

from ....errors import UnsupportedError
from ..batching import BATCH_RULES, Batched, fresh, lays_batch_innermost
from ..cotangent import basic_index


def _axes(axis, nd: int):
    """Per-example ``axis`` (an int, a tuple, or None for all) as axes of the data (shifted by one)."""
    if axis is None:
        return tuple(range(1, nd + 1))
    if isinstance(axis, (tuple, list)):
        return tuple(_axis(a, nd) for a in axis)
    return _axis(axis, nd)


def _axis(a, nd: int) -> int:
    a = int(a)
    if not -nd <= a < nd:
        raise np.exceptions.AxisError(a, nd)
    return a % nd + 1


def _batched_first(frame, name, first):
    """Refuses a call whose batch is not in its first argument (the array a reduction or selection reads)."""
    if not frame.batched(first):
        raise UnsupportedError(f"ad.vmap has no batching rule for numpy.{name} with a batched argument other than "
                               f"the array")


# -- elementwise ----------------------------------------------------------------------------------------------
def _ufunc(frame, ufunc, *inputs, **kw):
    ops, nd = frame.aligned(inputs)
    if nd == 1 and any(frame.batched(v) and lays_batch_innermost(v.data) for v in inputs) \
            and all(type(v) is np.ndarray or isinstance(v, _NUMBERS) for v in ops):
        kw = {"order": "F", **kw}   # (a batch of small vectors: its result too, as ``batching.fresh`` lays it out)
    return frame.wrap(ufunc(*ops, **kw))


_NUMBERS = (int, float, complex, np.generic)


def _elementwise(func):
    def rule(frame, *args, **kw):
        ops, _ = frame.aligned(args)
        return frame.wrap(func(*ops, **kw))
    return rule


def _where(frame, *args):
    if len(args) != 3:
        raise UnsupportedError("ad.vmap has no batching rule for numpy.where with one argument (the indices of the "
                               "true entries: a number of them per example); use np.where(cond, a, b)")
    return _elementwise(np.where)(frame, *args)


def _reduce(frame, ufunc, a, axis=0, **kw):
    _batched_first(frame, f"{ufunc.__name__}.reduce", a)
    axes = _axes(axis, a.ndim)
    short = _short_sum(a.data, axes, kw) if ufunc is np.add else None
    return frame.wrap(ufunc.reduce(_examples_contiguous(a.data), axis=axes, **kw) if short is None else short)


SHORT_SUM = 7   # the most entries of the trailing axes a batched sum adds slice by slice (``_short_sum``)


def _short_sum(data, axes, kw):
    """``np.sum(data, axes, **kw)`` where ``axes`` are the trailing axes of at most ``SHORT_SUM`` entries in all (a
    sum over each example of a batch of small vectors) and ``kw`` at most ``keepdims``: their slices added in order.
    NumPy's reduction over a short last axis runs its inner loop row by row (a (31843, 3) sum: 370 us, the slices
    15 us), and for as few entries adds them in the same order, so the bits are NumPy's.  None otherwise."""
    axes = (axes,) if isinstance(axes, int) else tuple(axes)
    nd = np.ndim(data)
    if set(kw) - {"keepdims"} or type(data) is not np.ndarray or data.dtype not in (np.float32, np.float64) or not axes \
            or sorted(axes) != list(range(nd - len(axes), nd)):
        return None
    k = math.prod(data.shape[nd - len(axes):])
    if not 0 < k <= SHORT_SUM:
        return None
    flat = data.reshape(data.shape[:nd - len(axes)] + (k,))
    out = flat[..., 0].copy() if k == 1 else flat[..., 0] + flat[..., 1]
    for j in range(2, k):
        out += flat[..., j]
    return out.reshape(out.shape + (1,) * len(axes)) if kw.get("keepdims") else out


# -- reductions and functions along axes ----------------------------------------------------------------------------
def _reduction(func):
    def rule(frame, a, axis=None, *args, **kw):
        _batched_first(frame, func.__name__, a)
        axes = _axes(axis, a.ndim)
        short = _short_sum(a.data, axes, kw) if func is np.sum and not args else None
        return frame.wrap(func(_examples_contiguous(a.data), axes, *args, **kw) if short is None else short)
    return rule


def _examples_contiguous(data):
    """``data`` with each example contiguous (C order), so that NumPy reduces it as it reduces one example (the
    same pairwise sums, the same bits); the batch rules lay the batch innermost, which would make a reduction
    add an example's entries one after another."""
    return np.ascontiguousarray(data) if type(data) is np.ndarray and not data.flags.c_contiguous else data


def _flattening(func):
    """A function whose ``axis=None`` flattens the example (argmax, cumsum, sort ...)."""
    def rule(frame, a, axis=None, *args, **kw):
        _batched_first(frame, func.__name__, a)
        if axis is None:
            y = func(np.reshape(a.data, (frame.size, -1)), 1, *args, **{k: v for k, v in kw.items() if k != "keepdims"})
            return frame.wrap(np.reshape(y, (frame.size,) + (1,) * a.ndim) if kw.get("keepdims") else y)
        return frame.wrap(func(a.data, _axis(axis, a.ndim), *args, **kw))
    return rule


def _along(func, default):
    """A function of one axis with a default (``np.sort``'s -1)."""
    flat = _flattening(func)
    return lambda frame, a, axis=default, *args, **kw: flat(frame, a, axis, *args, **kw)


def _selecting(func):
    """``np.take``, ``np.delete``, ``np.repeat``: entries picked by a plain second argument along ``axis`` (None:
    of the flattened example)."""
    def rule(frame, a, which, axis=None, **kw):
        _batched_first(frame, func.__name__, a)
        if frame.batched(which):
            raise UnsupportedError(f"ad.vmap has no batching rule for numpy.{func.__name__} with a batched "
                                   f"selection (index the array instead: x[idx])")
        if axis is None:
            return frame.wrap(func(np.reshape(a.data, (frame.size, -1)), which, axis=1, **kw))
        return frame.wrap(func(a.data, which, axis=_axis(axis, a.ndim), **kw))
    return rule


def _take(frame, a, indices, axis=None, **kw):
    """``np.take``: a gather per example where the indices are batched (``x[..., idx]``), else ``_selecting``'s."""
    if not frame.batched(indices):
        return _selecting(np.take)(frame, a, indices, axis, **kw)
    if frame.batched(a):
        return (np.ravel(a) if axis is None else a)[(slice(None),) * (0 if axis is None else _axis(axis, a.ndim) - 1)
                                                    + (indices,)]
    y = np.take(a, indices.data, axis=axis, **kw)   # (a plain table: the batch lands where the axis was)
    return frame.wrap(y if axis is None else np.moveaxis(y, axis % np.ndim(a), 0))


def _diff(frame, a, n=1, axis=-1, **kw):
    if kw:
        raise UnsupportedError("ad.vmap has no batching rule for numpy.diff with prepend= or append=")
    _batched_first(frame, "diff", a)
    return frame.wrap(np.diff(a.data, n, _axis(axis, a.ndim)))


def _roll(frame, a, shift, axis=None):
    _batched_first(frame, "roll", a)
    if frame.batched(shift):
        raise UnsupportedError("ad.vmap has no batching rule for numpy.roll with a batched shift")
    if axis is None:   # (the flattened example rolled)
        return frame.wrap(np.reshape(np.roll(np.reshape(a.data, (frame.size, -1)), shift, 1), a.data.shape))
    return frame.wrap(np.roll(a.data, shift, _axes(axis, a.ndim)))


def _take_along_axis(frame, arr, indices, axis):
    """Plain operands broadcast across the batch, the axis shifted (None: of the flattened examples)."""
    a, i = frame.across(arr), frame.across(indices)
    if axis is None:
        return frame.wrap(np.take_along_axis(np.reshape(a, (frame.size, -1)), i, 1))
    return frame.wrap(np.take_along_axis(a, i, _axis(axis, np.ndim(arr))))


def _put_along_axis(frame, arr, indices, values, axis):
    if not frame.batched(arr) or axis is None:
        raise UnsupportedError("ad.vmap has no batching rule for numpy.put_along_axis into a plain array or with "
                               "axis=None")
    (v,), _ = frame.aligned([values], np.ndim(indices))
    np.put_along_axis(arr.data, frame.across(indices), v, _axis(axis, arr.ndim))


def _pad(frame, a, pad_width, mode="constant", **kw):
    """``np.pad``: no padding along the batch; per-axis options (``constant_values=((1, 2), ...)``) refused."""
    _batched_first(frame, "pad", a)
    if any(np.ndim(v) for v in kw.values()) or frame.batched(pad_width):
        raise UnsupportedError("ad.vmap has no batching rule for numpy.pad with per-axis or batched options")
    width = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (a.ndim, 2))
    return frame.wrap(np.pad(a.data, ((0, 0), *map(tuple, width)), mode, **kw))


def _split(func):
    """``np.split``, ``np.array_split``: the pieces of each example, each a batch."""
    def rule(frame, a, sections, axis=0):
        _batched_first(frame, func.__name__, a)
        if frame.batched(sections):
            raise UnsupportedError(f"ad.vmap has no batching rule for numpy.{func.__name__} at batched places")
        return [frame.wrap(p) for p in func(a.data, sections, axis=_axis(axis, a.ndim))]
    return rule


def _two_axes(func):
    """``np.trace``, ``np.diagonal``: ``(offset, axis1=0, axis2=1)``, the axes shifted."""
    def rule(frame, a, *args, **kw):
        _batched_first(frame, func.__name__, a)
        given = dict(zip(("offset", "axis1", "axis2"), args), **kw)
        for k, d in (("axis1", 0), ("axis2", 1)):
            given[k] = _axis(given.get(k, d), a.ndim)
        return frame.wrap(func(a.data, **given))
    return rule


# -- shapes ---------------------------------------------------------------------------------------------------------
def _reshape(frame, a, shape=None, order="C", **kw):
    """Each example reshaped, in C or Fortran order (``np.reshape(x, s, order="F")`` is
    ``np.reshape(x.T, s[::-1]).T``, here with the batch axis left first)."""
    shape = kw.pop("newshape", shape)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    data = frame.across(a)
    if order == "C":
        return frame.wrap(np.reshape(data, (frame.size, *shape), **kw))
    if order != "F":
        raise UnsupportedError(f"ad.vmap: reshaping with order={order!r} (which depends on how each example is "
                               f"laid out in memory) has no batching rule; pass order='C' or order='F'")
    reversed_example = np.transpose(data, (0, *range(data.ndim - 1, 0, -1)))
    out = np.reshape(reversed_example, (frame.size, *shape[::-1]), **kw)
    return frame.wrap(np.transpose(out, (0, *range(out.ndim - 1, 0, -1))))


def _tile(frame, a, reps):
    """``np.tile``: each example promoted to the length of ``reps`` (axes after the batch's), the batch not
    repeated."""
    reps = (int(reps),) if isinstance(reps, (int, np.integer)) else tuple(reps)
    data = frame.across(a)
    nd = max(len(reps), data.ndim - 1)
    data = np.reshape(data, (frame.size,) + (1,) * (nd - data.ndim + 1) + data.shape[1:])
    return frame.wrap(np.tile(data, (1,) + (1,) * (nd - len(reps)) + reps))


def _append(frame, arr, values, axis=None):
    """``np.append``: ``np.concatenate`` of the examples (raveled where ``axis`` is None), by their rules."""
    if axis is None:
        return np.concatenate([np.ravel(arr), np.ravel(values)])
    return np.concatenate([arr, values], axis=axis)


def _flip(frame, a, axis=None):
    return frame.wrap(np.flip(frame.across(a), _axes(axis, a.ndim)))


def _transpose(frame, a, axes=None):
    axes = tuple(range(a.ndim))[::-1] if axes is None else axes
    return frame.wrap(np.transpose(frame.across(a), (0, *(_axis(x, a.ndim) for x in axes))))


def _swapaxes(frame, a, i, j):
    return frame.wrap(np.swapaxes(frame.across(a), _axis(i, a.ndim), _axis(j, a.ndim)))


def _moveaxis(frame, a, source, destination):
    return frame.wrap(np.moveaxis(frame.across(a), _axes(source, a.ndim), _axes(destination, a.ndim)))


def _expand_dims(frame, a, axis):
    n = a.ndim + (len(axis) if isinstance(axis, (tuple, list)) else 1)
    return frame.wrap(np.expand_dims(frame.across(a), _axes(axis, n)))


def _squeeze(frame, a, axis=None):
    if axis is None:
        axis = tuple(k for k, n in enumerate(a.shape) if n == 1)
    return frame.wrap(np.squeeze(frame.across(a), _axes(axis, a.ndim)))


def _broadcast_to(frame, a, shape, **kw):
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    (data,), _ = frame.aligned([a], len(shape))
    return frame.wrap(np.broadcast_to(data, (frame.size, *shape), **kw))


def _joined(func, rank):
    """``np.concatenate``/``np.stack``: the axis shifted, plain operands broadcast across the batch; ``rank``:
    the result's per-example rank for the axis (the operands' for concatenate, one more for stack)."""
    def rule(frame, arrays, axis=0, **kw):
        arrays = list(arrays)
        if axis is None:
            arrays, axis = [np.reshape(a, -1) for a in arrays], 0
        nd = np.ndim(arrays[0]) + rank
        datas, k = [frame.across(a) for a in arrays], _axis(axis, nd)
        if kw or not all(type(d) is np.ndarray for d in datas) or len({d.ndim for d in datas}) != 1:
            return frame.wrap(func(datas, axis=k, **kw))
        shape = list(datas[0].shape)
        if rank:
            shape.insert(k, len(datas))
        else:
            shape[k] = sum(d.shape[k] for d in datas)
        out = fresh(shape, np.result_type(*datas))
        return frame.wrap(func(datas, axis=k, out=out))
    return rule


def _hstack(frame, arrays, **kw):
    arrays = [np.atleast_1d(a) for a in arrays]
    return np.concatenate(arrays, axis=0 if np.ndim(arrays[0]) == 1 else 1, **kw)


def _vstack(frame, arrays, **kw):
    return np.concatenate([np.atleast_2d(a) for a in arrays], axis=0, **kw)


def _at_least(k):
    def rule(frame, *arrays):
        out = [np.reshape(a, (1,) * (k - np.ndim(a)) + np.shape(a)) if np.ndim(a) < k else a for a in arrays]
        return out[0] if len(out) == 1 else tuple(out)
    return rule


def _like(func):
    def rule(frame, a, *args, **kw):
        if "shape" in kw and kw["shape"] is not None:
            raise UnsupportedError(f"ad.vmap has no batching rule for numpy.{func.__name__} with shape=")
        return frame.wrap(func(frame.across(a), *args, **kw))
    return rule


def _outer(frame, a, b):
    a, b = np.reshape(a, (-1, 1)), np.reshape(b, (1, -1))
    return a * b


def _per_example(name):
    """``np.shape``, ``np.ndim``, ``np.size``: of one example."""
    return lambda frame, a: getattr(a, name) if type(a) is Batched else getattr(np, name)(a)


def _of_dtypes(func):
    """``np.result_type``, ``np.iscomplexobj`` ...: of the operands' dtypes, which a batch does not change."""
    return lambda frame, *args: func(*(np.empty((), a.dtype) if type(a) is Batched else a for a in args))


def _copy(frame, a, **kw):
    return frame.wrap(np.copy(frame.across(a), **kw))


# -- contractions and linear algebra ---------------------------------------------------------------------------------
def _matrices(frame, operands, vectors):
    """``operands`` as stacks of matrices aligned for a broadcasting ``np.linalg``/``matmul`` call (a vector
    operand made a matrix: a row where ``vectors[k]`` is -2, a column where it is -1)."""
    mats = []
    for v, where in zip(operands, vectors):
        if np.ndim(v) == 1:
            v = np.expand_dims(v, where)
        mats.append(v)
    ops, _ = frame.aligned(mats)
    return ops


def _matmul(frame, a, b, **kw):
    if "axes" in kw or "axis" in kw:
        raise UnsupportedError("ad.vmap has no batching rule for numpy.matmul with axes= or axis=")
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        raise ValueError("matmul: Input operand does not have enough dimensions")
    ops = _matrices(frame, (a, b), (-2, -1))
    y = np.matmul(*ops, **kw)
    drop = tuple(k for k, v in ((-2, a), (-1, b)) if np.ndim(v) == 1)
    return frame.wrap(np.squeeze(y, drop) if drop else y)


def _dot(frame, a, b):
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return np.multiply(a, b)
    if np.ndim(b) == 1 or np.ndim(a) <= 2 and np.ndim(b) <= 2:
        return np.matmul(a, b)
    raise UnsupportedError("ad.vmap has no batching rule for numpy.dot of arrays of more than two dimensions "
                           "(use np.einsum or np.tensordot)")


def _einsum(frame, subscripts, *operands, **kw):
    if not isinstance(subscripts, str):
        raise UnsupportedError("ad.vmap has no batching rule for numpy.einsum with subscripts given as lists")
    spec = subscripts.replace(" ", "")
    ins, arrow, out = spec.partition("->")
    terms = ins.split(",")
    if not arrow:
        letters = [c for c in ins if c.isalpha()]
        out = ("..." if "..." in ins else "") + "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    fresh = next(c for c in string.ascii_letters if c not in spec)
    terms = [fresh + t if frame.batched(v) else t for t, v in zip(terms, operands)]
    data = [v.data if frame.batched(v) else v for v in operands]
    return frame.wrap(np.einsum(f"{','.join(terms)}->{fresh}{out}", *data, **kw))


def _tensordot(frame, a, b, axes=2):
    """``np.tensordot`` as the ``np.einsum`` it stands for (whose rule batches it)."""
    na, nb = np.ndim(a), np.ndim(b)
    if np.ndim(axes) == 0:
        pairs = [(na - axes + k, k) for k in range(axes)]
    else:
        ax_a, ax_b = ([x] if np.ndim(x) == 0 else list(x) for x in axes)
        pairs = [(i % na, j % nb) for i, j in zip(ax_a, ax_b)]
    letters = iter(string.ascii_letters)
    ta = [next(letters) for _ in range(na)]
    tb = [next(letters) for _ in range(nb)]
    for i, j in pairs:
        tb[j] = ta[i]
    out = [c for k, c in enumerate(ta) if k not in {i for i, _ in pairs}] \
        + [c for k, c in enumerate(tb) if k not in {j for _, j in pairs}]
    return np.einsum(f"{''.join(ta)},{''.join(tb)}->{''.join(out)}", a, b)


def _inner(frame, a, b):
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return np.multiply(a, b)
    return np.tensordot(a, b, axes=([-1], [-1]))


def _cross(frame, a, b, **kw):
    """``np.cross`` of two batches of 3-vectors: its three components, each two products of components (NumPy's
    own formula), written into a result with the batch innermost; other shapes and keywords by ``_last_axes``."""
    if kw or np.shape(a)[-1:] != (3,) or np.shape(b)[-1:] != (3,):
        return _crossed(frame, a, b, **kw)
    (u, v), _ = frame.aligned((a, b))
    shape = np.broadcast_shapes(np.shape(u), np.shape(v))
    if type(u) is not np.ndarray or type(v) is not np.ndarray or len(shape) < 2 or shape[0] != frame.size:
        return _crossed(frame, a, b)
    out = fresh(shape, np.result_type(u, v))
    for i, j, k in ((0, 1, 2), (1, 2, 0), (2, 0, 1)):
        np.subtract(u[..., j] * v[..., k], u[..., k] * v[..., j], out=out[..., i])
    return frame.wrap(out)


def _last_axes(func, arrays, what=()):
    """A function of its first ``arrays`` arguments' last axes that broadcasts over the leading ones (``np.cross``,
    ``np.tril``, ``np.linalg.matrix_power``): those aligned, the other arguments plain, the keywords ``what``
    (other axes) refused."""
    def rule(frame, *args, **kw):
        if any(k in kw for k in what) or any(frame.batched(v) for v in args[arrays:]):
            raise UnsupportedError(f"ad.vmap has no batching rule for numpy.{func.__name__} with a batched "
                                   f"argument after the array(s)" + (f" or with {'/'.join(what)}=" if what else ""))
        ops, _ = frame.aligned(args[:arrays])
        return frame.wrap(func(*ops, *args[arrays:], **kw))
    return rule


_crossed = _last_axes(np.cross, 2, ("axis", "axisa", "axisb", "axisc"))   # (np.cross by its general rule)


def _batched_linalg(func):
    """An ``np.linalg`` function of one stack of matrices (inv, det, cholesky, eigh ...)."""
    def rule(frame, a, *args, **kw):
        _batched_first(frame, f"linalg.{func.__name__}", a)
        return frame.wrap(func(a.data, *args, **kw))
    return rule


def _solve(frame, a, b):
    ops = _matrices(frame, (a, b), (-2, -1))
    y = np.linalg.solve(*ops)
    return frame.wrap(y[..., 0] if np.ndim(b) == 1 else y)


def _norm(frame, x, ord=None, axis=None, keepdims=False):
    _batched_first(frame, "linalg.norm", x)
    if axis is None and ord is None:
        y = np.linalg.norm(np.reshape(x.data, (frame.size, -1)), axis=1)
        return frame.wrap(np.reshape(y, (frame.size,) + (1,) * x.ndim) if keepdims else y)
    if axis is None:
        axis = tuple(range(x.ndim))
    return frame.wrap(np.linalg.norm(x.data, ord, _axes(axis, x.ndim), keepdims))


# -- indexing ---------------------------------------------------------------------------------------------------------
def _expanded(index) -> list:
    """``index`` as a list, boolean arrays replaced by their ``nonzero`` integer arrays (in place: NumPy's
    placement of the result dims is the same); a batched boolean index is refused (its examples select different
    counts).  An Ellipsis stays: it separates advanced indices even where it stands for no axis."""
    out = []
    for i in (list(index) if type(index) is tuple else [index]):
        if isinstance(i, list) or type(i) is np.ndarray:
            i = np.asarray(i)
            if i.dtype == np.bool_:
                out.extend(np.nonzero(i))
                continue
        elif type(i) is Batched and i.dtype == np.bool_:
            raise UnsupportedError("ad.vmap: indexing with a batched boolean mask (each example would select a "
                                   "different number of entries); use np.where")
        out.append(i)
    return out


def _dims_before(entries, k: int, nd: int) -> int:
    """How many result dims the basic entries before position ``k`` make (an Ellipsis the axes left over)."""
    consumed = sum(1 for i in entries if i is not None and i is not Ellipsis)
    return sum(nd - consumed if i is Ellipsis else 1 for i in entries[:k])


def _advanced(i) -> bool:
    return type(i) in (np.ndarray, Batched) or isinstance(i, (int, np.integer))


def _data_index(frame, index, nd: int):
    """``(idx, src, dst)``: the index of the data that ``x[index]`` reads for each example, and the axes for which
    ``np.moveaxis(data[idx], src, dst)`` is the batch of the examples' results, dims where NumPy puts them for one
    example.  Without batched index arrays, the batch is a slice prepended (advanced indices apart then put their
    dims before it: moved back); with them, the batch is one more advanced index, first, aligned with them (their
    dims then come right after it: moved to where the example's basic dims before them end)."""
    entries = _expanded(index)
    arrays = [k for k, i in enumerate(entries) if type(i) in (np.ndarray, Batched)]
    adv = [k for k, i in enumerate(entries) if _advanced(i)] if arrays else []
    adjacent = not adv or adv == list(range(adv[0], adv[-1] + 1))
    if not any(frame.batched(entries[k]) for k in arrays):
        rank = len(np.broadcast_shapes(*(np.shape(entries[k]) for k in adv)))
        return (slice(None), *entries), (() if adjacent else (rank,)), (() if adjacent else (0,))
    rank = max(np.ndim(entries[k]) for k in adv)
    ops, _ = frame.aligned([entries[k] for k in adv], rank)
    for k, op in zip(adv, ops):
        entries[k] = op
    batch = np.reshape(np.arange(frame.size), (frame.size,) + (1,) * rank)
    if not adjacent:
        return (batch, *entries), (), ()
    before = _dims_before(entries, adv[0], nd)
    return (batch, *entries), tuple(range(1, 1 + rank)), tuple(range(1 + before, 1 + before + rank))


def _getitem(frame, x, index):
    idx, src, dst = _data_index(frame, index, np.ndim(x))
    y = np.moveaxis(frame.across(x)[idx], src, dst)
    if y.ndim == 1 and (type(y) is Batched or y.base is not None):   # (an entry of each example: NumPy reads one
        y = y.copy()                                                  # as a scalar, a copy, not a view)
    return frame.wrap(y)


def _written(frame, x, index, values, what):
    """``(idx, values)``: the index of ``x.data`` that ``x[index]`` writes to and the values in the layout of
    ``x.data[idx]`` (``_data_index``'s, the other way); a write into a plain array is refused."""
    if not frame.batched(x):
        raise UnsupportedError(f"ad.vmap: {what} writes a batched value into a plain array; build the array from "
                               f"batched values instead (np.stack, np.where, np.zeros_like of a batched value)")
    idx, src, dst = _data_index(frame, index, x.ndim)
    rank = x.data[idx].ndim - 1

    def full(v):   # (of the result's rank and one more for the batch: a plain value's axis of length 1)
        (a,), _ = frame.aligned([v], rank)
        return a if frame.batched(v) else np.reshape(a, (1,) * (rank + 1 - np.ndim(a)) + np.shape(a))
    return idx, [np.moveaxis(full(v), dst, src) for v in values]


def _setitem(frame, x, index, value):
    idx, (v,) = _written(frame, x, index, [value], "item assignment x[i] = v")
    x.data[idx] = v


def _copyto(frame, dst, src, **kw):
    idx, (v,) = _written(frame, dst, Ellipsis, [src], "numpy.copyto (np.full with a batched fill value, x[...] = v)")
    np.copyto(dst.data[idx], v, **kw)


def _at(frame, ufunc, a, index, *b):
    idx, ops = _written(frame, a, index, list(b), f"numpy.{ufunc.__name__}.at")
    if basic_index(idx):   # a view, each entry in it once: the ufunc in place (``ufunc.at`` is unbuffered, slow)
        view = a.data[idx]
        ufunc(view, *ops, out=view)
    else:
        ufunc.at(a.data, idx, *ops)


BATCH_RULES.update({
    "ufunc": _ufunc, "reduce": _reduce, "at": _at, np.copyto: _copyto, "getitem": _getitem, "setitem": _setitem,
    np.where: _where, np.clip: _elementwise(np.clip), np.round: _elementwise(np.round),
    np.around: _elementwise(np.around), np.real: _elementwise(np.real), np.imag: _elementwise(np.imag),
    np.angle: _elementwise(np.angle),
    np.isclose: _elementwise(np.isclose), np.nan_to_num: _elementwise(np.nan_to_num),
    **{f: _reduction(f) for f in (np.sum, np.mean, np.prod, np.max, np.min, np.amax, np.amin, np.any, np.all,
                                  np.var, np.std, np.nansum, np.nanmean, np.nanmax, np.nanmin, np.median,
                                  np.ptp, np.count_nonzero)},
    **{f: _flattening(f) for f in (np.argmax, np.argmin, np.cumsum, np.cumprod)},
    np.take: _take, np.take_along_axis: _take_along_axis, np.put_along_axis: _put_along_axis,
    **{f: _selecting(f) for f in (np.delete, np.repeat)},
    np.sort: _along(np.sort, -1), np.argsort: _along(np.argsort, -1),
    np.trace: _two_axes(np.trace), np.diagonal: _two_axes(np.diagonal), np.diff: _diff, np.roll: _roll, np.pad: _pad,
    np.split: _split(np.split), np.array_split: _split(np.array_split),
    np.reshape: _reshape, np.ravel: lambda frame, a, order="C": _reshape(frame, a, -1, order),
    np.transpose: _transpose, np.tile: _tile, np.append: _append,
    np.flip: _flip, np.swapaxes: _swapaxes, np.moveaxis: _moveaxis, np.expand_dims: _expand_dims, np.squeeze: _squeeze,
    np.broadcast_to: _broadcast_to, np.concatenate: _joined(np.concatenate, 0), np.stack: _joined(np.stack, 1),
    np.hstack: _hstack, np.vstack: _vstack, np.atleast_1d: _at_least(1), np.atleast_2d: _at_least(2),
    **{f: _like(f) for f in (np.zeros_like, np.ones_like, np.empty_like, np.full_like)},
    np.outer: _outer, np.copy: _copy, np.shape: _per_example("shape"), np.ndim: _per_example("ndim"),
    np.size: _per_example("size"),
    **{f: _of_dtypes(f) for f in (np.result_type, np.iscomplexobj, np.isrealobj)},
    np.matmul: _matmul, np.dot: _dot, np.einsum: _einsum, np.tensordot: _tensordot, np.linalg.solve: _solve,
    np.linalg.norm: _norm, np.inner: _inner, np.cross: _cross,
    np.tril: _last_axes(np.tril, 1), np.triu: _last_axes(np.triu, 1),
    np.linalg.matrix_power: _last_axes(np.linalg.matrix_power, 1),
    **{f: _batched_linalg(f) for f in (np.linalg.inv, np.linalg.det, np.linalg.slogdet, np.linalg.cholesky,
                                       np.linalg.eigh, np.linalg.eigvalsh, np.linalg.pinv, np.linalg.eig,
                                       np.linalg.eigvals, np.linalg.svd, np.linalg.qr)},
})
