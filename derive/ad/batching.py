"""``ad.vmap``: a function mapped over an axis of its arguments by batching its primitives, as ``jax.vmap``.

``vmap(f)(xs)`` runs ``f`` once, on ``Batched`` values: a ``Batched`` is an array (``data``) whose axis 0 is
the batch, and which shows the per-example view (``shape``, ``ndim``, ``len``, ``T`` ...).  Every NumPy
function and ufunc that reaches one dispatches (``__array_function__``, ``__array_ufunc__``) to its batch rule,
found in the table ``BATCH_RULES`` (filled by ``rules.batching``) and run by ``dispatch``; a function without
one, and Python control flow on a batched value, are refused by name.  Each vmap call has a level (``LEVELS``,
increasing), so that nested vmaps keep their batches apart: a rule batches along the newest level among its
operands, and a value of an older level is, for it, a plain operand whose own NumPy calls dispatch again.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from ...errors import TensorLangError, UnsupportedError, named_cause
from .context import Store, current, within
from .cotangent import dense
from .ir import ARRAY_TYPES, Memory
from .runtime import NONDIFF, J

BATCH_RULES: dict = {}   # NumPy function, ufunc method name ("reduce") or operator name -> rule(frame, *args, **kw)
LEVELS = itertools.count(1)   # a fresh level per call of a vmapped function (newer: inner)

_CONTROL = ("Python control flow cannot depend on a batched value inside ad.vmap (the batch's examples may "
            "differ); use np.where(cond, a, b) to select per example")


class Batched:
    """A batch of values: ``data``'s axis 0 is the batch (``data`` is a NumPy array, or a ``Batched`` of an
    outer vmap), at vmap level ``level``, in its call's ``memory``; its attributes are those of one example."""

    __slots__ = ("data", "level", "memory", "__weakref__")
    __array_priority__ = 1000
    __hash__ = None

    def __init__(self, data, level: int, memory: Memory):
        self.data, self.level, self.memory = data, level, memory
        memory.hold(data, self)

    def __ad_values__(self):
        """The array holding the examples' values (``runtime.keep`` keeps them for a pullback that reads them)."""
        return self.data

    def __ad_tangent__(self, t):
        """A tangent of this batch as a batch of this level (``ir.own_tangent``): a plain one (the same for every
        example) broadcast into a batch of its own."""
        if type(t) is Batched and t.level == self.level:
            return t
        return self.zeros(self.shape, np.result_type(self.dtype, float)) + t

    @property
    def __ad_number__(self) -> bool:
        """Whether each example is a number (what ``np.sum(x)`` or ``x[0]`` gives), which ``x op= v`` does not write
        into but rebinds, as NumPy's scalars are."""
        return self.ndim == 0

    def __ad_written__(self):
        """Called by ``tensorlang.ad`` before a derivative follows a write into this batch (``ir.check_write``):
        refused where another batch shares its memory, a write that the derivative would not see reach it."""
        if type(self.data) is Batched:
            self.data.__ad_written__()
        elif type(self.data) is np.ndarray and self.memory.shared(self.data):
            raise UnsupportedError("ad.vmap under a derivative: a write into a batched array that shares its memory "
                                   "with another (a view of it, or the array a view was taken of: a slice, reshape, "
                                   "transpose ...) is not followed by tensorlang.ad; write into a copy "
                                   "(v = x[1:].copy()) or make the array without writing through a view")

    # -- the per-example view ----------------------------------------------------------------------------------
    shape = property(lambda self: tuple(self.data.shape[1:]))
    ndim = property(lambda self: self.data.ndim - 1)
    dtype = property(lambda self: self.data.dtype)
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))
    T = property(lambda self: np.transpose(self))
    mT = property(lambda self: np.swapaxes(self, -1, -2))
    real = property(lambda self: np.real(self))
    imag = property(lambda self: np.imag(self))

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a batched scalar (unsized)")
        return self.shape[0]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __repr__(self):
        return f"Batched(level={self.level}, per-example shape={self.shape}, data={self.data!r})"

    # -- NumPy's dispatch ----------------------------------------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kw):
        if kw.get("out") is not None:
            raise UnsupportedError(f"ad.vmap: numpy.{ufunc.__name__}(..., out=...) writes into an array (also "
                                   f"x op= v of a plain array x and a batched v); the batch rules make new arrays "
                                   f"(drop out=, write x = x op v)")
        kw.pop("out", None)
        if method == "__call__":   # (a generalised ufunc, np.matmul, has a rule of its own)
            return dispatch(ufunc, inputs, kw) if ufunc.signature else dispatch("ufunc", (ufunc, *inputs), kw)
        return dispatch(method, (ufunc, *inputs), kw, f"numpy.{ufunc.__name__}.{method}")

    def __array_function__(self, func, types, args, kwargs):
        if kwargs.get("out") is not None:
            raise UnsupportedError(f"ad.vmap: {_name(func)}(..., out=...) writes into an array; the batch rules "
                                   f"make new arrays (drop out=)")
        kwargs = {k: v for k, v in kwargs.items() if k != "out"}
        return dispatch(func, args, kwargs, _name(func))

    def __array__(self, dtype=None, copy=None):
        raise UnsupportedError("ad.vmap: a batched value cannot become a plain NumPy array (np.asarray, np.array, "
                               "a write into a plain array, a library that converts its input): that would mix the "
                               "batch into the example; use NumPy functions on it, which have batch rules "
                               "(np.stack([x, y]) for np.array([x, y])); a plain table read at a batched index "
                               "(table[i], np.take(table, i)) is not dispatched by NumPy: map the table too "
                               "(np.broadcast_to(table, (B, *table.shape)), in_axes=0)")

    @staticmethod
    def __tl_kernel__(kernel, inputs):
        """A compiled tensorlang kernel called with a batch (``codegen.kernel``): refused."""
        raise UnsupportedError(f"ad.vmap: a compiled tensorlang kernel (inputs {', '.join(inputs)}) has no batching "
                               f"rule; batch inside the kernel's program with a gen over the batch instead")

    # -- Python's operators: the NumPy functions they stand for --------------------------------------------------
    def __getitem__(self, index):
        return dispatch("getitem", (self, index), {}, "indexing x[i]")

    def __setitem__(self, index, value):
        dispatch("setitem", (self, index, value), {}, "item assignment x[i] = v")

    def _control(what):
        def refused(self, *args):
            raise UnsupportedError(f"ad.vmap: {what} of a batched value: {_CONTROL}")
        return refused

    __bool__, __int__ = _control("bool()"), _control("int()")

    def __float__(self):   # (also what NumPy asks of a value written into an entry of a plain array)
        raise UnsupportedError(f"ad.vmap: float() of a batched value: {_CONTROL}; or the value is written into an "
                               f"entry of a plain NumPy array (v = np.zeros(n); v[0] = x), which cannot hold a "
                               f"batch: make the array from a batched value (np.zeros_like(y) of one of its shape) "
                               f"or build it with np.stack")
    __index__ = _control("an index into a plain array (np.take(table, i, axis) gathers per example) or an int")
    __complex__ = _control("complex()")
    item, tolist = _control(".item()"), _control(".tolist()")
    del _control

    @property
    def flat(self):
        raise UnsupportedError("ad.vmap has no batching rule for x.flat; write np.ravel(x)[i] (or x.reshape(-1))")

    # -- array methods: the NumPy functions of the same name -----------------------------------------------------
    def reshape(self, *shape, **kw):
        return np.reshape(self, shape[0] if len(shape) == 1 else shape, **kw)

    def transpose(self, *axes):
        return np.transpose(self, axes[0] if len(axes) == 1 else (axes or None))

    def astype(self, dtype, **kw):
        return Batched(self.data.astype(dtype, **kw), self.level, self.memory)

    def zeros(self, shape, dtype):
        """Zeros of per-example ``shape`` and ``dtype`` at this value's level (of its batch size)."""
        full = (len(self.data), *shape)
        if type(self.data) is Batched:
            return Batched(self.data.zeros(full, dtype), self.level, self.memory)
        data = fresh(full, dtype)
        data[...] = 0
        return Batched(data, self.level, self.memory)

    def copy(self):
        data = self.data
        return Batched(data.copy(order="K") if type(data) is np.ndarray else data.copy(), self.level, self.memory)

    def ravel(self, order="C"):
        return np.ravel(self, order)

    def flatten(self, order="C"):   # (a copy, as NumPy's)
        return np.ravel(self, order).copy()


def _method(func):
    return lambda self, *args, **kw: func(self, *args, **kw)


for _f in ("sum", "mean", "prod", "max", "min", "any", "all", "argmax", "argmin", "var", "std", "cumsum",
           "cumprod", "swapaxes", "squeeze", "clip", "dot", "trace", "diagonal", "argsort", "round", "conj",
           "conjugate", "nonzero", "repeat", "take"):
    setattr(Batched, _f, _method(getattr(np, _f)))


def _sort(self, axis=-1, kind=None, order=None):
    """``x.sort()``: each example sorted in place (``np.sort`` returns a sorted copy)."""
    self[...] = np.sort(self, axis=axis, kind=kind, order=order)


def _partition(self, kth, axis=-1, kind="introselect", order=None):
    """``x.partition(kth)``: each example partitioned in place."""
    self[...] = np.partition(self, kth, axis=axis, kind=kind, order=order)


def _fill(self, value):
    """``x.fill(v)``: every entry of every example set to ``v``."""
    self[...] = value


Batched.sort, Batched.partition, Batched.fill = _sort, _partition, _fill

_OPERATORS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
              "floordiv": np.floor_divide, "mod": np.remainder, "pow": np.power, "matmul": np.matmul,
              "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}
for _op, _f in _OPERATORS.items():
    setattr(Batched, f"__{_op}__", (lambda f: lambda self, other: f(self, other))(_f))
    setattr(Batched, f"__r{_op}__", (lambda f: lambda self, other: f(other, self))(_f))

def _in_place(f, op):
    """``x op= v``: written into ``x``'s data, as NumPy writes into an array (its views see it), with NumPy's
    casting rule; a batch of numbers (what ``np.sum(x)`` and ``x[0]`` give an example) is not written into, as a
    NumPy scalar is not: ``x`` is bound to the result, and what else held it keeps its value."""
    def write(self, other):
        if self.__ad_number__:   # (x op= v binds x to a new batch)
            return f(self, other)
        data, mine = self.data, type(other) is Batched and other.level == self.level
        if type(data) is np.ndarray and (mine and type(other.data) is np.ndarray or type(other) is not Batched):
            if (other.ndim if mine else np.ndim(other)) < data.ndim:   # (written in place, aligned as the rules)
                (v,), _ = Frame(self.level, len(data), self.memory).aligned((other,), self.ndim)
                try:
                    f(data, v, out=data, casting="same_kind")
                    return self
                except ValueError:   # (v broadcasts x: refused below)
                    pass
        y = f(self, other)
        if type(y) is not Batched or y.level != self.level or np.shape(y.data) != np.shape(self.data):
            raise UnsupportedError(f"ad.vmap: x {op}= v, where v is batched by an inner vmap or broadcasts x, "
                                   f"cannot be written into x; write x = x {op} v")
        np.copyto(self.data, y.data, casting="same_kind")
        return self
    return write


for _op, _sym in {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "pow": "**",
                  "and": "&", "or": "|", "xor": "^"}.items():
    setattr(Batched, f"__i{_op}__", _in_place(_OPERATORS[_op], _sym))
for _op, _f in {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal, "eq": np.equal,
                "ne": np.not_equal}.items():
    setattr(Batched, f"__{_op}__", (lambda f: lambda self, other: f(self, other))(_f))
for _op, _f in {"neg": np.negative, "pos": np.positive, "abs": np.absolute, "invert": np.invert}.items():
    setattr(Batched, f"__{_op}__", (lambda f: lambda self: f(self))(_f))
ARRAY_TYPES.add(Batched)   # (the AD runtime treats it as an array: gradients summed to its shape ...)


def _name(func) -> str:
    module = getattr(func, "__module__", None) or "numpy"
    return f"{module}.{getattr(func, '__name__', func)}"


class Frame:
    """What a batch rule is run with: the level it batches (``level``), its batch size (``size``) and its vmap
    call's ``memory``."""

    __slots__ = ("level", "size", "memory")

    def __init__(self, level: int, size: int, memory: Memory):
        self.level, self.size, self.memory = level, size, memory

    def batched(self, v) -> bool:
        """Whether ``v`` is batched at this level."""
        return type(v) is Batched and v.level == self.level

    def wrap(self, data):
        """``data`` (axis 0 the batch) as a value of this level; a tuple's items each."""
        if isinstance(data, tuple):
            return type(data)(*map(self.wrap, data)) if hasattr(data, "_fields") else tuple(map(self.wrap, data))
        return Batched(data, self.level, self.memory)

    def aligned(self, operands, nd=None):
        """The operands' arrays for an elementwise NumPy call whose result has per-example rank ``nd`` (default:
        the largest operand's): batched ones ``(B, 1, ..., 1, *shape)``, plain ones as they are."""
        ranks = [v.data.ndim - 1 if type(v) is Batched else np.ndim(v) for v in operands]
        nd = max(ranks) if nd is None else nd
        return [v.data.reshape((self.size,) + (1,) * (nd - r) + v.data.shape[1:]) if self.batched(v) and r < nd
                else v.data if self.batched(v) else v for v, r in zip(operands, ranks)], nd

    def across(self, v):
        """``v``'s data with the batch axis first: a plain operand broadcast across the batch."""
        if self.batched(v):
            return v.data
        return np.broadcast_to(v, (self.size, *np.shape(v)))


def dispatch(func, args, kwargs, what=None):
    """``func(*args, **kwargs)`` by its batch rule, at the newest level among the batched values in ``args``
    and ``kwargs`` (in sequences of them too: ``np.stack``)."""
    found = []
    _batches(args, found)
    _batches(tuple(kwargs.values()), found)
    level = max(v.level for v in found)
    mine = [v for v in found if v.level == level]
    sizes = {len(v.data) for v in mine}
    if len(sizes) > 1:
        raise TensorLangError(f"ad.vmap: {what or _name(func)} got batches of sizes {sorted(sizes)} at one level")
    rule = BATCH_RULES.get(func)
    if rule is None:
        raise UnsupportedError(f"ad.vmap has no batching rule for {what or _name(func)}")
    return rule(Frame(level, sizes.pop(), mine[0].memory), *args, **kwargs)


def _batches(values, found: list) -> None:
    """The ``Batched`` values among ``values`` (a tuple or list), and in the tuples, lists and dicts among them,
    appended to ``found``."""
    for v in values:
        if type(v) is Batched:
            found.append(v)
        elif isinstance(v, (tuple, list)):
            _batches(v, found)
        elif isinstance(v, dict):
            _batches(tuple(v.values()), found)


# -- vmap ---------------------------------------------------------------------------------------------------------
def _tree(fn, v):
    """``v`` with ``fn`` applied to each leaf (what is not a tuple, list or dict)."""
    if isinstance(v, (tuple, list)):
        items = [_tree(fn, x) for x in v]
        return type(v)(*items) if hasattr(v, "_fields") else type(v)(items)
    if isinstance(v, dict):
        return {k: _tree(fn, x) for k, x in v.items()}
    return fn(v)


def _leaves_of(v) -> list:
    out = []
    _tree(out.append, v)
    return out


def _refusal_unwrapped(run):
    """``run()``, where NumPy wrapped a batch's refusal in its own ``TypeError`` or ``ValueError`` (a batch written
    into an entry of a plain array is asked for ``float()``), raising the refusal itself."""
    try:
        return run()
    except (TypeError, ValueError) as e:
        refusal = named_cause(e)
        if refusal is None:
            raise
        raise refusal.with_traceback(e.__traceback__) from None


class Mapped:
    """The function ``vmap(f, in_axes, out_axes)``: ``f`` run once on the arguments batched along ``in_axes``
    (a leaf of a tuple, list or dict argument each), its outputs stacked along ``out_axes``.  Under ``ad.grad``
    its pullback is ``f``'s, run once on the batch of cotangents (``__ad_pullback__``)."""

    def __init__(self, f, in_axes, out_axes):
        if type(out_axes) is not int:
            raise TensorLangError(f"ad.vmap: out_axes must be an int, not {out_axes!r}")
        self.f, self.in_axes, self.out_axes = f, in_axes, out_axes
        self.name = getattr(f, "__qualname__", repr(f))
        self.__name__ = self.__qualname__ = f"vmap({self.name})"
        self.__doc__ = f"{self.name} mapped over axis {in_axes} of its arguments (``tensorlang.ad.vmap``)."

    def _axes(self, args) -> tuple:
        axes = self.in_axes if isinstance(self.in_axes, tuple) else (self.in_axes,) * len(args)
        if len(axes) != len(args) or not all(a is None or type(a) is int for a in axes):
            raise TensorLangError(f"ad.vmap({self.name}): in_axes must be an int, None or a tuple of those with one "
                                  f"entry per positional argument; got {self.in_axes!r} for {len(args)} argument(s)")
        return axes

    def batched(self, args):
        """``(level, size, batched arguments, memory)`` for a call with ``args``."""
        axes = self._axes(args)
        mapped = [(k, x) for k, a in enumerate(axes) if a is not None for x in _leaves_of(args[k])]
        bad = sorted({k for k, x in mapped if not -np.ndim(x) <= axes[k] < np.ndim(x)})
        sizes = sorted({np.shape(x)[axes[k]] for k, x in mapped if k not in bad})
        if bad or len(sizes) != 1:
            raise TensorLangError(f"ad.vmap({self.name}): the mapped arguments must have the mapped axis, all of one "
                                  f"size; got sizes {sizes}" + (f", argument(s) {bad} without it" if bad else ""))
        level, memory = next(LEVELS), Memory()
        batched = [x if a is None else _tree(lambda v, a=a: Batched(innermost(np.moveaxis(v, a, 0)), level, memory),
                                             x)
                   for x, a in zip(args, axes)]
        return level, sizes[0], batched, memory

    def __call__(self, *args, **kw):
        level, size, batched, _ = self.batched(args)
        y = _refusal_unwrapped(lambda: self.f(*batched, **kw))
        return _tree(lambda v: _unbatched(v, level, size, self.out_axes, self.name), y)

    def __ad_pullback__(self, *args):
        level, size, batched, memory = self.batched(args)
        own = current().but(store=Store())   # (f's boxes are its own: none is left in the caller's store)
        y, back = _refusal_unwrapped(lambda: within(own, J, self.f, *batched))
        out = _tree(lambda v: _unbatched(v, level, size, self.out_axes, self.name), y)

        def pullback(dy):
            g = within(own, back, _tree(lambda d: None if d is None else Batched(np.moveaxis(dense(d), self.out_axes, 0),
                                                                                level, memory), dy))
            if g[0] is not None:
                raise UnsupportedError(f"ad.grad through ad.vmap({self.name}): {self.name} captures values that have "
                                       f"gradients; pass them as arguments (in_axes=None for those not mapped)")
            return tuple(None if gk is None else _tree(lambda v, a=a: _grad_of(v, a, level, size), gk)
                         for gk, a in zip(g[1:], self._axes(args)))
        return out, pullback


SMALL_EXAMPLE = 16   # the most entries of an example that a batch lays out with the batch innermost


def innermost(data):
    """A mapped argument's ``data`` (axis 0 the batch) as the batch rules lay out batches (``fresh``): a copy, as
    ``jax.vmap``'s arguments are values, so a write into a mapped argument does not reach the caller's array."""
    if type(data) is not np.ndarray:
        return data
    out = fresh(data.shape, data.dtype)
    out[...] = data
    return out


def fresh(shape, dtype):
    """An empty batch of ``shape`` (axis 0 the batch).  An example of at most ``SMALL_EXAMPLE`` entries is laid
    out with the batch innermost (``batch_last``), so that an operation on a batch of small examples (a
    (31843, 3) array) runs NumPy's inner loop along the batch, not along an example's few entries; a larger one
    stays in C order, its rows long enough for NumPy's loops and BLAS."""
    return batch_last(shape, dtype) if math.prod(shape[1:]) <= SMALL_EXAMPLE else np.empty(shape, dtype)


def batch_last(shape, dtype):
    """An empty array of ``shape`` (axis 0 the batch) laid out with the batch innermost and each example's axes
    in C order (a C array of shape ``(*shape[1:], shape[0])`` seen with its last axis first): every example's
    axes have the strides of a C-contiguous example times the batch's size, so that a reshape or ravel of an
    example is a view exactly where NumPy's of one example is (and a write through it reaches the example)."""
    return np.moveaxis(np.empty((*shape[1:], shape[0]), dtype), -1, 0)


def lays_batch_innermost(data) -> bool:
    """Whether ``data`` (a batch's array) has the batch innermost (``fresh``'s layout of small examples)."""
    return type(data) is np.ndarray and data.ndim > 1 and data.strides[0] == data.itemsize


def _grad_of(g, axis, level, size):
    """The gradient of an argument mapped along ``axis`` (None: not mapped, the examples' gradients summed) from
    ``g``, that of its batched value."""
    if g is None:
        return None
    g = dense(g)   # (an indexed cotangent: its array, a batch where its parts are)
    mine = type(g) is Batched and g.level == level
    if axis is None:
        return np.sum(g.data, axis=0) if mine else size * g
    data = g.data if mine else np.broadcast_to(g, (size, *np.shape(g)))
    return np.moveaxis(data, 0, axis)


def vmap(f, in_axes=0, out_axes=0) -> Mapped:
    """``jax.vmap``: the function that maps ``f`` over axis ``in_axes`` of its arguments (an int, None for an
    argument not mapped, or a tuple of those, one per positional argument; for a tuple, list or dict argument,
    of each of its arrays) and stacks its outputs (an array, a number, or tuples, lists and dicts of them)
    along axis ``out_axes`` of every output leaf; ``f`` runs once, on batched values."""
    return Mapped(f, in_axes, out_axes)


NONDIFF.add(vmap)   # (called in a differentiated function, it makes the function; its calls have the pullback)


def _unbatched(y, level, size, out_axes, name):
    """Output leaf ``y`` of a batched run as an array with the batch at ``out_axes`` (an output that does not
    depend on the batch is repeated along it)."""
    if type(y) is Batched and y.level == level:
        data = y.data
    elif y is None or isinstance(y, (str, bytes)):
        raise TensorLangError(f"ad.vmap({name}): f returned {type(y).__name__}; outputs must be numbers or arrays "
                              f"(or tuples, lists and dicts of them)")
    else:
        data = np.broadcast_to(y, (size, *np.shape(y)))
        data = data.copy() if type(data) is np.ndarray else data
    nd = np.ndim(data)
    if not -nd <= out_axes < nd:
        raise TensorLangError(f"ad.vmap({name}): out_axes={out_axes} is out of range for an output of "
                              f"{nd - 1} dimension(s)")
    return np.moveaxis(data, 0, out_axes)
