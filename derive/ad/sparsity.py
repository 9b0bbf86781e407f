"""Sparse Jacobians and Hessians of Python functions: ``ad.jacobian(f, sparse=True)`` and
``ad.hessian(f, sparse=True)``, whose results are ``scipy.sparse.csr_array``s.

On the first call at a shape, the pattern is detected by operator-level sparsity tracing, as sparse-AD
tools do (SparseConnectivityTracer.jl): ``f`` runs once on a NumPy object array of ``Tracer``s, one per input
entry, each holding the input entries its value depends on (``deps``) and, for a Hessian, the pairs of them
that interact nonlinearly (``pairs``); NumPy's object ufuncs call the tracers' methods (``x.sin()``), so
every NumPy operation that works on object arrays is traced by the rules of this module: a sum depends on
what its terms do, a product makes the pairs of its factors' entries interact, a nonlinear function the
pairs of its argument's.  A comparison of traced values (a branch on the point) is refused by name: the
pattern would depend on the point.  The pattern is then coloured (greedily: two columns that share a row
never share a colour), and each call computes one Jacobian-vector product (forward mode) or Hessian-vector
product (forward over reverse) per colour, with the seed the sum of that colour's unit vectors, and reads
each entry from the product of its column's colour.
"""
from __future__ import annotations

import functools
import threading

import numpy as np

from ...errors import TensorLangError, UnsupportedError
from . import mixed
from .ir import ARRAY_TYPES
from .registry import JVP_RULES, refusing
from .runtime import RULES


class Tracer:
    """A traced value: a node of the graph of the operations that made it.  ``kind`` is ``"input"`` (``args``
    is its flat index), ``"linear"`` (a sum, a difference, a scaling of ``args``), ``"product"`` (of two
    traced factors), ``"quotient"`` (the dividend and the divisor), ``"nonlinear"`` (a smooth function of
    ``args`` jointly) or ``"constant"`` (a function whose derivative is zero: ``sign``, ``floor``).  Nothing
    is computed while ``f`` runs; ``dependencies`` and ``interactions`` read the graph afterwards, once, so
    a sum of n terms costs O(n), not the O(n^2) of unions taken term by term."""

    __slots__ = ("kind", "args")

    def __init__(self, kind: str, args):
        self.kind, self.args = kind, args

    def _with(self, kind: str, other=None):
        if other is None:
            return Tracer(kind, (self,))
        if not isinstance(other, Tracer):
            return self if kind != "nonlinear" else Tracer(kind, (self,))
        return Tracer(kind, (self, other))

    # -- operators -----------------------------------------------------------------------------------------------
    def __add__(self, other):
        return self._with("linear", other)

    __radd__ = __sub__ = __rsub__ = __add__

    def __mul__(self, other):
        return self._with("product", other)

    __rmul__ = __mul__

    def __truediv__(self, other):
        return self._with("quotient", other) if isinstance(other, Tracer) else self

    def __rtruediv__(self, other):
        return self._with("nonlinear")

    def __pow__(self, other):
        if isinstance(other, Tracer):
            return self._with("nonlinear", other)
        return self if other == 1 else self._with("constant") if other == 0 else self._with("nonlinear")

    def __rpow__(self, other):
        return self._with("nonlinear")

    def __neg__(self):
        return self

    __pos__ = conjugate = real = deg2rad = rad2deg = __neg__

    def __abs__(self):
        return self   # piecewise linear: its second derivative is zero wherever it exists

    absolute = fabs = __abs__

    def _nonlinear(self, other=None):
        return self._with("nonlinear", other)

    def _constant(self, *other):
        return Tracer("constant", ())

    def _refused(self, *args):
        raise UnsupportedError("ad.jacobian/ad.hessian(sparse=True): the function compares traced values (a "
                               "branch on the point), so its sparsity pattern could depend on the point; "
                               "use sparse=False")

    __lt__ = __le__ = __gt__ = __ge__ = __eq__ = __ne__ = __bool__ = _refused

    @staticmethod
    def through_kernel(kernel, inputs: dict):
        """A compiled kernel called on traced inputs: each output entry a smooth function of the input
        entries its row of the kernel's Jacobian can depend on (``tl.jacobian(..., sparse=True)``'s pattern
        at these sizes; every pair of them may interact)."""
        return kernel_outputs(kernel, inputs)

    def __float__(self):
        raise UnsupportedError("ad.jacobian/ad.hessian(sparse=True): the function converts a traced value to a "
                               "Python float (math.* or float()); write it with NumPy's functions")

    __int__ = __index__ = __complex__ = __float__

    __hash__ = object.__hash__


_NONLINEAR = ("sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh",
              "arctanh", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "cbrt", "square",
              "reciprocal", "sinc", "logaddexp", "logaddexp2", "hypot", "arctan2")
for _name in _NONLINEAR:
    setattr(Tracer, _name, Tracer._nonlinear)
for _name in ("sign", "floor", "ceil", "rint", "trunc"):
    setattr(Tracer, _name, Tracer._constant)


class Graph:
    """What the traced values of one run depend on: ``dependencies(t)``, the input entries a value
    depends on (memoised: the shared parts of the graph are read once), and ``interactions(t)``, the pairs
    ``(i, j)``, ``i <= j``, whose second derivative of ``t`` can be nonzero: the pairs of the two factors
    of every product below it, of the divisor with the dividend and itself in every quotient, and of the
    arguments of every nonlinear function, jointly."""

    def __init__(self):
        self.memo: dict[int, frozenset] = {}

    def dependencies(self, t) -> frozenset:
        if not isinstance(t, Tracer):
            return frozenset()
        stack, order = [t], []
        while stack:   # the nodes below t whose dependencies are not known yet, each once, then bottom-up
            node = stack.pop()
            if id(node) in self.memo or node.kind == "input":
                continue
            self.memo[id(node)] = None
            order.append(node)
            stack.extend(a for a in node.args if isinstance(a, Tracer))
        for node in reversed(order):
            self.memo[id(node)] = frozenset().union(*(self._known(a) for a in node.args))
        return self._known(t)

    def _known(self, t) -> frozenset:
        if t.kind == "input":
            return frozenset((t.args,))
        return self.memo[id(t)]

    def interactions(self, t) -> set:
        pairs: set = set()
        seen: set[int] = set()
        stack = [t] if isinstance(t, Tracer) else []
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if node.kind == "product" and len(node.args) == 2:
                pairs |= _cross(self.dependencies(node.args[0]), self.dependencies(node.args[1]))
            elif node.kind == "quotient":
                divisor = self.dependencies(node.args[1])
                pairs |= _cross(self.dependencies(node.args[0]), divisor) | _cross(divisor, divisor)
            elif node.kind == "nonlinear":
                d = frozenset().union(*(self.dependencies(a) for a in node.args))
                pairs |= _cross(d, d)
            if node.kind != "input":
                stack.extend(a for a in node.args if isinstance(a, Tracer))
        return pairs


def kernel_outputs(kernel, inputs: dict) -> np.ndarray:
    """The traced outputs of ``kernel`` (a tensor of reals) on ``inputs``, some of them object arrays of tracers."""
    from ...cost import sizes_and_relations
    from ...nodes import PairType

    expr = kernel.expr
    if isinstance(expr.type, PairType):
        raise UnsupportedError("ad.jacobian(sparse=True): tracing through a kernel with a pair output is not "
                               "supported; use sparse=False")
    traced = {k: v for k, v in inputs.items() if isinstance(v, np.ndarray) and v.dtype == object}
    plain = {k: (np.zeros(v.shape) if k in traced else v) for k, v in inputs.items()}
    sizes = sizes_and_relations(expr, plain)[0]
    rows: list | None = None
    n_out = int(np.prod(kernel_shape(expr, sizes), dtype=np.int64))
    for name, value in traced.items():
        flat = value.ravel()
        rows = rows or [[] for _ in range(n_out)]
        jacobian = _kernel_jacobian(expr, name)
        if jacobian is None:   # its pattern depends on a relation's data: every output may read every entry
            for r in range(n_out):
                rows[r].extend(flat)
            continue
        _, indices, indptr, _ = jacobian.pattern(sizes)
        for r in range(n_out):
            rows[r].extend(flat[indices[indptr[r]:indptr[r + 1]]])
    out = np.empty(len(rows), dtype=object)
    for r, args in enumerate(rows):
        out[r] = Tracer("nonlinear", tuple(args)) if args else Tracer("constant", ())
    shape = kernel_shape(expr, sizes)
    return out.reshape(shape) if shape else out[0]


@functools.lru_cache(maxsize=64)
def _kernel_jacobian(expr, name: str):
    """The sparse Jacobian of a kernel's program in input ``name``, or None where it can be nonzero
    depends on the data of a relation (a pattern traced once must hold for every call's relation)."""
    from ..api import jacobian
    from ..sparse import RelationPattern

    try:
        found = jacobian(expr, name, sparse=True)
    except RelationPattern:
        return None
    return None if found.relations else found


def kernel_shape(expr, sizes: dict) -> tuple:
    from ...nodes import tensor_dims

    dims, _ = tensor_dims(expr.type)
    return tuple(int(d.evaluate({v: sizes[v.name] for v in d.size_vars})) for d in dims)


def _cross(a: frozenset, b: frozenset) -> set:
    return {(i, j) if i <= j else (j, i) for i in a for j in b}


def traced_inputs(x) -> np.ndarray:
    """An object array shaped like ``x`` of one input tracer per entry."""
    flat = np.empty(np.size(x), dtype=object)
    for k in range(flat.size):
        flat[k] = Tracer("input", k)
    return flat.reshape(np.shape(x))


def _traced(f, args, i):
    args = list(args)
    args[i] = traced_inputs(args[i])
    try:
        return f(*args)
    except UnsupportedError:
        raise
    except Exception as exc:   # a function that object arrays do not reach (np.linalg, a compiled kernel)
        raise UnsupportedError(
            f"ad.jacobian/ad.hessian(sparse=True): tracing the sparsity pattern of {getattr(f, '__name__', f)} "
            f"through NumPy object arrays failed ({type(exc).__name__}: {exc}); use sparse=False") from None


def jacobian_pattern(f, args, i):
    """The ``csr_array`` of ones where ``f``'s Jacobian in argument ``i`` can be nonzero."""
    import scipy.sparse as sp

    out = np.asarray(_traced(f, args, i), dtype=object).ravel()
    graph = Graph()
    rows, cols = [], []
    for r, value in enumerate(out):
        deps = graph.dependencies(value)
        rows += [r] * len(deps)
        cols += sorted(deps)
    n = int(np.size(args[i]))
    return sp.csr_array((np.ones(len(rows)), (np.array(rows, dtype=np.int64), np.array(cols, dtype=np.int64))),
                        shape=(out.size, n))


def hessian_pattern(f, args, i):
    """The symmetric ``csr_array`` of ones where ``f``'s Hessian in argument ``i`` can be nonzero."""
    import scipy.sparse as sp

    value = _traced(f, args, i)
    if np.ndim(value) != 0:
        raise TensorLangError(f"ad.hessian: f must return a scalar, got shape {np.shape(value)}")
    if isinstance(value, np.ndarray):
        value = value[()]
    pairs = sorted(Graph().interactions(value))
    rows = [a for a, b in pairs] + [b for a, b in pairs if a != b]
    cols = [b for a, b in pairs] + [a for a, b in pairs if a != b]
    n = int(np.size(args[i]))
    return sp.csr_array((np.ones(len(rows)), (np.array(rows, dtype=np.int64), np.array(cols, dtype=np.int64))),
                        shape=(n, n))


def colouring(pattern) -> np.ndarray:
    """A colour per column of ``pattern`` such that no two columns with a nonzero in the same row share
    one (greedy, columns in order)."""
    csc, csr = pattern.tocsc(), pattern.tocsr()
    colours = np.full(pattern.shape[1], -1, dtype=np.int64)
    for j in range(pattern.shape[1]):
        rows = csc.indices[csc.indptr[j]:csc.indptr[j + 1]]
        taken = set()
        for r in rows:
            taken.update(colours[csr.indices[csr.indptr[r]:csr.indptr[r + 1]]].tolist())
        c = 0
        while c in taken:
            c += 1
        colours[j] = c
    return colours


class Compressed:
    """A pattern, its colouring and what reads the entries out of the products with the colours' seeds."""

    def __init__(self, pattern):
        self.pattern = pattern.tocsr()
        self.pattern.sort_indices()
        self.colours = colouring(self.pattern)
        self.count = int(self.colours.max()) + 1 if self.colours.size else 0
        rows = np.repeat(np.arange(self.pattern.shape[0]), np.diff(self.pattern.indptr))
        self.read = (self.colours[self.pattern.indices], rows)   # entry k is product[colour(col k)][row k]

    def seed(self, c: int, shape) -> np.ndarray:
        return (self.colours == c).astype(float).reshape(shape)

    def assemble(self, products: list[np.ndarray]):
        import scipy.sparse as sp

        stacked = np.stack([np.ravel(p) for p in products]) if products else np.zeros((0, self.pattern.shape[0]))
        data = stacked[self.read] if products else np.zeros(0)
        return sp.csr_array((data, self.pattern.indices.copy(), self.pattern.indptr.copy()), shape=self.pattern.shape)


class _PerShape:
    """The ``Compressed`` pattern of each input shape, detected on its first call."""

    def __init__(self):
        self.found: dict = {}
        self.lock = threading.Lock()

    def get(self, key, detect):
        with self.lock:
            hit = self.found.get(key)
        if hit is None:
            hit = Compressed(detect())
            with self.lock:
                self.found[key] = hit
        return hit


def jacobian(f, argnums=0, mode=None, sparse=False):
    """``ad.jacobian``: ``mixed.jacobian`` (dense: a ``jvp`` per input entry or a pullback per output entry;
    ``mode`` forces one), or with ``sparse=True`` a function whose result is a ``scipy.sparse.csr_array`` (rows:
    the flattened outputs, columns: the flattened inputs), one ``jvp`` per colour of its traced pattern."""
    if not sparse:
        return mixed.jacobian(f, argnums, mode)
    if not isinstance(argnums, int) or mode == "reverse":
        raise TensorLangError("ad.jacobian(sparse=True): argnums must be one int, and the mode forward")
    return sparse_jacobian(f, argnums)


def hessian(f, argnums=0, sparse=False):
    """``ad.hessian``: ``mixed.hessian`` (dense: a Hessian-vector product per input entry), or with
    ``sparse=True`` a function whose result is a ``scipy.sparse.csr_array``, one Hessian-vector product per
    colour of its traced pattern."""
    if not sparse:
        return mixed.hessian(f, argnums)
    if not isinstance(argnums, int):
        raise TensorLangError("ad.hessian: argnums must be one int")
    return sparse_hessian(f, argnums)


def sparse_jacobian(f, argnums: int):
    """``ad.jacobian(f, argnums, sparse=True)``: see the module docstring."""
    def pattern(g, args, i):
        return (np.shape(args[i]), np.shape(g(*args))), lambda: jacobian_pattern(g, args, i)

    def product(g, args, i, ts):
        return mixed.jvp(g, tuple(args), tuple(ts))[1]
    return _compressed(f, argnums, "jacobian", pattern, product)


def sparse_hessian(f, argnums: int):
    """``ad.hessian(f, argnums, sparse=True)``: see the module docstring."""
    def pattern(g, args, i):
        return np.shape(args[i]), lambda: hessian_pattern(g, args, i)

    def product(g, args, i, ts):
        return mixed.hvp(g, tuple(args), ts)[i]
    return _compressed(f, argnums, "hessian", pattern, product)


def _compressed(f, argnums: int, name: str, pattern, product):
    """The function ``args -> csr_array`` of ``f``'s compressed derivative ``name`` in argument ``argnums``:
    ``pattern(g, args, i)`` is the key of its pattern and how to detect it, ``product(g, args, i, tangents)``
    the derivative's product with one colour's seed."""
    known = _PerShape()

    def derivative(*args, **kw):
        from .api import refuse_integers, with_keywords
        i = argnums + len(args) if argnums < 0 else argnums
        refuse_integers(name, f, args, (i,))
        g, args = with_keywords(f, args, kw) if kw else (f, args)
        if any(type(a) in ARRAY_TYPES for a in args):
            raise UnsupportedError(f"ad.{name}(sparse=True) of batched arguments (under ad.vmap) is not supported: "
                                   f"its pattern is traced on one example's entries; use sparse=False")
        compressed = known.get(*pattern(g, args, i))
        products = []
        for c in range(compressed.count):
            ts = [None] * len(args)
            ts[i] = compressed.seed(c, np.shape(args[i]))
            t = product(g, args, i, ts)
            products.append(np.zeros(compressed.pattern.shape[0]) if t is None else np.ravel(t))
        return compressed.assemble(products)
    derivative.__name__ = f"{name}({getattr(f, '__name__', 'f')}, sparse=True)"
    derivative.__ad_refused__ = _SPARSE_REFUSED.format(name)
    return derivative


_SPARSE_REFUSED = ("differentiating a function made by ad.{0}(sparse=True) is not supported: its result is a "
                   "scipy.sparse array; differentiate ad.{0}(f) (sparse=False)")
for _f, _name in ((sparse_jacobian, "jacobian"), (sparse_hessian, "hessian")):
    RULES[_f] = refusing(_f, "reverse", _SPARSE_REFUSED.format(_name))
    JVP_RULES[_f] = refusing(_f, "forward", _SPARSE_REFUSED.format(_name))
