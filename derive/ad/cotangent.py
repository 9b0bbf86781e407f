"""Indexed cotangents: the gradient of an array of which only some entries were read (``x[i]``, a slice,
a fancy index), kept as the list of ``(index, gradient)`` pairs instead of a dense array with one entry
set, so that the adjoint of ``for i in range(n): s = s + x[i] * x[i]`` costs O(n), not O(n^2) (the
transposed gather of JAX, the indexed references of Dex).

Sums of indexed cotangents stay lazy (a tree of ``+`` nodes, O(1) each); the first use other than a sum
scatters every part into one dense buffer (``dense``), once.  The numbers read from a vector in a loop
(``x[i]`` in a specialisation that knows ``x`` is 1-D) add their gradients to one leaf of entries, two
C arrays appended to in place (``entries``), scattered by one ``np.add.at``.  An indexed cotangent is used as the array it
stands for by any NumPy operation (``__array__``, ``__array_ufunc__``, arithmetic), and the runtime turns
it into that array wherever a gradient leaves the adjoint (``runtime.take``, ``runtime.like``)."""
from __future__ import annotations

import operator
from array import array

import numpy as np

from .ir import ARRAY_TYPES


def basic_index(idx) -> bool:
    items = idx if type(idx) is tuple else (idx,)
    return all(type(i) in (int, slice, type(None), type(Ellipsis)) or isinstance(i, np.integer) for i in items)


class Indexed:
    """The cotangent of an array of ``shape`` (gradient dtype ``dtype``): a leaf ``("at", idx, dy)``
    (``dy`` at ``idx``), a dense array ``("dense", g)``, the entries ``("entries", indices, dys)`` (two
    ``array.array``: ``dys[k]`` at ``indices[k]``), or the sum ``("sum", left, right)``."""

    __slots__ = ("shape", "dtype", "node", "_dense")
    __array_priority__ = 100

    def __init__(self, shape, dtype, node):
        self.shape, self.dtype, self.node, self._dense = shape, dtype, node, None

    @classmethod
    def at(cls, shape, dtype, idx, dy):
        t = type(dy)
        same = dtype == np.float64 and (t is float or t is np.float64)   # the common case, without result_type
        return cls(shape, dtype if same else np.result_type(dtype, dy), ("at", idx, dy))

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return int(np.prod(self.shape))

    def dense(self) -> np.ndarray:
        """The array this cotangent stands for (computed once)."""
        if self._dense is None:
            batch = self.batch()
            g = np.zeros(self.shape, dtype=self.dtype) if batch is None else batch.zeros(self.shape, self.dtype)
            self.add_into(g)
            self._dense = g
        return self._dense

    def batch(self):
        """A gradient of a type of ``ir.ARRAY_TYPES`` (a batch of ``ad.vmap``) among the parts, or None: the dense
        array is then one of its type (``zeros``)."""
        todo = [self]
        while todo:
            node = todo.pop().node
            if node[0] == "sum":
                todo += node[1:]
            elif type(node[-1]) in ARRAY_TYPES:
                return node[-1]
        return None

    def add_into(self, g: np.ndarray) -> None:
        """``g += self``, in place, visiting the tree without recursion."""
        todo = [self]
        while todo:
            c = todo.pop()
            if c._dense is not None:
                g += c._dense
                continue
            node = c.node
            if node[0] == "at":
                if basic_index(node[1]):
                    g[node[1]] += node[2]
                else:
                    np.add.at(g, node[1], node[2])
            elif node[0] == "entries":
                np.add.at(g, np.frombuffer(node[1], dtype=np.int64), np.frombuffer(node[2]))
            elif node[0] == "dense":
                g += node[1]
            else:
                todo.append(node[1])
                todo.append(node[2])

    def __add__(self, other):
        if other is None:
            return self
        if type(other) is Indexed and other.shape == self.shape:
            dtype = self.dtype if self.dtype == other.dtype else np.result_type(self.dtype, other.dtype)
            return Indexed(self.shape, dtype, ("sum", self, other))
        if type(other) is np.ndarray and other.shape == self.shape:
            leaf = Indexed(self.shape, other.dtype, ("dense", other))
            return Indexed(self.shape, np.result_type(self.dtype, other.dtype), ("sum", self, leaf))
        return self.dense() + other

    __radd__ = __add__

    def __array__(self, dtype=None, copy=None):
        g = self.dense()
        return g if dtype is None else g.astype(dtype)

    def __array_ufunc__(self, ufunc, method, *inputs, **kw):
        if ufunc is np.add and method == "__call__" and len(inputs) == 2 and not kw:   # array + self: lazy
            return self + (inputs[0] if inputs[1] is self else inputs[1])
        inputs = tuple(x.dense() if type(x) is Indexed else x for x in inputs)
        return getattr(ufunc, method)(*inputs, **kw)

    def __getattr__(self, name):   # the methods and attributes of the dense array (.sum(), .T ...)
        return getattr(self.dense(), name)

    def __getitem__(self, idx):
        return self.dense()[idx]

    def __len__(self):
        return self.shape[0]

    def __repr__(self):
        return f"Indexed({self.dense()!r})"


def _dense_op(op, reflected):
    if reflected:
        return lambda self, other: op(other, self.dense())
    return lambda self, other: op(self.dense(), other)


for _name, _op in [("sub", operator.sub), ("mul", operator.mul), ("truediv", operator.truediv),
                   ("pow", operator.pow), ("matmul", operator.matmul)]:
    setattr(Indexed, f"__{_name}__", _dense_op(_op, False))
    setattr(Indexed, f"__r{_name}__", _dense_op(_op, True))
Indexed.__neg__ = lambda self: -self.dense()


def entries():
    """Two empty C arrays, for the indices and the float64 gradients of the entries read from a vector
    (``x[i]``, a number, in a specialisation that knows ``x`` is 1-D): the generated adjoint appends to
    them in place, keeping no Python object alive per read, and ``with_entries`` adds them up once."""
    return array("q"), array("d")


def with_entries(d, x, idx, dys):
    """The gradient ``d`` of vector ``x`` plus ``dys[k]`` at each entry ``idx[k]``."""
    if not idx:
        return d
    leaf = Indexed(x.shape, np.result_type(x.dtype, np.float64), ("entries", idx, dys))
    return leaf if d is None else leaf + d


def add_at(d, x, i, dy):
    """The gradient ``d`` of vector ``x`` plus ``dy`` at entry ``i``, for a ``dy`` that is not a float."""
    leaf = Indexed.at(x.shape, np.result_type(x.dtype, 0.0), i, dy)
    return leaf if d is None else leaf + d


def dense(g):
    """``g`` as an array if it is an indexed cotangent, else ``g``."""
    return g.dense() if type(g) is Indexed else g
