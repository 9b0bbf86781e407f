"""The reference evaluator (Fig. 4-5 of the paper), vectorised with NumPy over index spaces.

An expression is evaluated in a ``Scope``: the index variables bound around it, each one array axis.
The value of an expression of type ``[s1]...[sk]R`` in a scope of depth d is an array with d + k axes:
the first d broadcastable over the scope (extent 1 where the value does not depend on that index), the
last k its own.  Pairs are tuples of such values, so ``[n](T0, T1)`` is held as a struct of arrays
(the isomorphism of section 5.2).  ``gen`` adds an axis, ``sum`` reduces one (a product under sums is
one ``einsum``), an access gathers along the first own axis.

Evaluation is lazy under false Iverson guards (4.12): the scope carries a mask of the points where
the enclosing guards hold; an operand is not evaluated where its guard is false everywhere, accesses
out of range at masked-out points are harmless, and values there are replaced by zeros.
"""
from __future__ import annotations

import operator

import numpy as np

from .dispatch import dispatch
from .errors import BoundsError, ShapeError, TypeCheckError, UnsupportedError
from .functions import lookup
from .inputs import Binding, bind
from .nodes import (
    OPERATIONS, Access, Add, Affine, And, Call, Cmp, Const, Declare, Exists, Expr, FalsePred, Gen, Guard, IndexVar,
    Let, Max, Mul, Or, Pair, PairType, Pred, Proj, R, RealType, RelAtom, Sum, TensorType, TruePred, Type, Var,
)
from .traversal import free_vars


def evaluate(expr: Expr, **inputs):
    """``tl.evaluate(expr, **inputs)``: the value of ``expr`` as a float, a NumPy array or a tuple."""
    binding = bind(expr, inputs)
    try:
        with np.errstate(all="ignore"):
            return _to_output(Evaluator(binding).expr(expr, Scope.top(binding)))
    except (MemoryError, ValueError, RuntimeError) as exc:
        too_deep = str(exc).startswith("maximum supported dimension") or "supports up to 32 dimensions" in str(exc)
        if isinstance(exc, RuntimeError) and not too_deep:
            raise
        if too_deep:
            raise UnsupportedError(f"the evaluator holds one array axis per enclosing loop, and NumPy at most "
                                   f"64 (32 in some functions): this program nests its loops deeper ({exc})"
                                   ) from None
        if isinstance(exc, ValueError) and not str(exc).startswith(_NUMPY_TOO_LARGE):
            raise
        raise too_large(expr, binding, exc) from None


# how NumPy says that an array is larger than the address space (a MemoryError says it cannot be had)
_NUMPY_TOO_LARGE = ("Maximum allowed", "array is too big")


def too_large(expr: Expr, binding: Binding, exc: Exception) -> ShapeError:
    """The error for sizes whose arrays cannot be allocated: names the sizes, the largest loop nest and
    its bytes as float64."""
    points, nest = _largest_nest(expr, binding)
    sizes = ", ".join(f"{k} = {v}" for k, v in binding.sizes.items())
    return ShapeError(
        f"the arrays of this program are too large to allocate at {sizes}: the loops {nest} span {points:,} "
        f"points ({8 * points:,} bytes as float64) ({type(exc).__name__}: {exc})"
    )


def _largest_nest(node, binding: Binding, memo=None) -> tuple[int, str]:
    """The largest product of loop extents along one nesting of ``gen``, ``sum`` and ``exists`` in
    ``node``, and those loops as text (``i:n, j:n``)."""
    memo = {} if memo is None else memo
    hit = memo.get(id(node))
    if hit is None:
        children = [c for f in node.children for c in (f if isinstance(f, tuple) else (f,))]
        inner = [_largest_nest(c, binding, memo) for c in children if isinstance(c, (Expr, Pred))]
        hit = max(inner, key=lambda r: r[0], default=(1, ""))
        if isinstance(node, (Gen, Sum, Max, Exists)):
            from .printer import affine_str

            loop = f"{node.var.name}:{affine_str(node.size)}"
            hit = (binding.size(node.size) * hit[0], loop + (", " + hit[1] if hit[1] else ""))
        memo[id(node)] = hit
    return hit


def _to_output(value):
    if isinstance(value, tuple):
        return tuple(_to_output(v) for v in value)
    if value.ndim == 0:
        return float(value)
    return np.array(value, dtype=np.float64)


class Scope:
    """The index variables in scope (outermost first) with their extents, the live mask, and the
    values of let-bound variables (each with the depth at which it was bound)."""

    __slots__ = ("axes", "extents", "mask", "env", "memo", "parent", "bound", "_index")

    def __init__(self, axes, extents, mask, env, parent=None, bound=None):
        self.axes: tuple[IndexVar, ...] = axes
        self.extents: tuple[int, ...] = extents
        self.mask: np.ndarray | None = mask
        self.env: dict = env
        self.memo: dict = {}
        self.parent: Scope | None = parent  # the scope this one extends by one let binding
        self.bound: Var | None = bound
        self._index: dict = {}

    @staticmethod
    def top(binding: Binding) -> "Scope":
        env = {v: (_map(val, np.asarray), 0) for v, val in binding.values.items()}
        return Scope((), (), None, env)

    @property
    def depth(self) -> int:
        return len(self.axes)

    def push(self, var: IndexVar, extent: int) -> "Scope":
        mask = None if self.mask is None else self.mask[..., None]
        return Scope(self.axes + (var,), self.extents + (extent,), mask, self.env)

    def bind(self, var: Var, value) -> "Scope":
        env = dict(self.env)
        env[var] = (value, self.depth)
        return Scope(self.axes, self.extents, self.mask, env, parent=self, bound=var)

    def restrict(self, live: np.ndarray) -> "Scope":
        mask = live if self.mask is None else (self.mask & live)
        return Scope(self.axes, self.extents, mask, self.env)

    def index(self, var: IndexVar) -> np.ndarray:
        """The values of index ``var`` as an integer array along its own axis."""
        arr = self._index.get(var)
        if arr is None:
            try:
                k = self.axes.index(var)
            except ValueError:
                raise TypeCheckError(f"index variable {var.name} is not bound here") from None
            shape = [1] * self.depth
            shape[k] = self.extents[k]
            arr = np.arange(self.extents[k]).reshape(shape)
            self._index[var] = arr
        return arr

    def lookup(self, node):
        """A memoised value for ``node``, also from enclosing let scopes whose binding it does not use."""
        scope = self
        while scope is not None:
            hit = scope.memo.get(id(node))
            if hit is not None:
                return hit
            if scope.bound is None or scope.bound in free_vars(node):
                return None
            scope = scope.parent
        return None


class Evaluator:
    """Evaluates expressions and predicates of one program under one binding of its inputs."""

    def __init__(self, binding: Binding):
        self.binding = binding
        self.let_brackets: dict = {}  # scalar let variable -> (where a false bracket zeroes it, its depth)

    # ---------------------------------------------------------------------------------------------
    # expressions

    def expr(self, e: Expr, scope: Scope):
        hit = scope.lookup(e)
        if hit is None:
            hit = dispatch(self, "_eval_", e, scope)
            scope.memo[id(e)] = hit
        return hit

    def _eval_Declare(self, e: Declare, scope: Scope):
        return self.expr(e.body, scope)

    def _eval_Const(self, e: Const, scope: Scope):  # 4.2
        return np.full((1,) * scope.depth, e.real)

    def _eval_Var(self, e: Var, scope: Scope):  # 4.1
        try:
            value, depth = scope.env[e]
        except KeyError:
            raise TypeCheckError(f"variable {e.name} has no value") from None
        return _lift(value, depth, scope.depth)

    def _eval_Add(self, e: Add, scope: Scope):  # 4.3
        return self.expr(e.left, scope) + self.expr(e.right, scope)

    def _eval_Mul(self, e: Mul, scope: Scope):  # 4.4
        return self._strong_zeros(e, self.expr(e.left, scope) * self.expr(e.right, scope), scope)

    def _strong_zeros(self, product: Expr, value, scope: Scope):
        """Iverson's strong zero: a product is +0 where one of its brackets is false, whatever its other
        factors are there (inf, NaN, a negative number), as in a kernel, which does not compute them
        there; a bracket reaches through the operand of a bracket, the body of a let and a scalar let
        (which a kernel inlines)."""
        if (np.isfinite(value) & (value != 0)).all():
            return value
        dead = self._bracketed(product, scope)
        return value if dead is None else np.where(dead, 0.0, value)

    def _bracketed(self, e: Expr, scope: Scope):
        """Where ``e`` is zero by a false bracket among its factors: None (nowhere known), True or a
        boolean array over the scope."""
        dead = None
        for f in _factors(e):
            if isinstance(f, Guard):
                live = self.pred(f.pred, scope)
                here = _either((not live) if isinstance(live, bool) else ~live, self._bracketed(f.body, scope))
            elif isinstance(f, Let):
                here = self._bracketed(f.body, scope)
            elif isinstance(f, Var) and f in self.let_brackets:
                mask, depth = self.let_brackets[f]
                here = mask if isinstance(mask, bool) else _lift(mask, depth, scope.depth)
            else:
                continue
            dead = _either(dead, here)
        return dead

    def _eval_Call(self, e: Call, scope: Scope):  # 4.5
        args = [self.expr(a, scope) for a in e.args]
        return np.asarray(lookup(e.fn).numpy(*args), dtype=np.float64)

    def _eval_Pair(self, e: Pair, scope: Scope):  # 4.6
        return (self.expr(e.first, scope), self.expr(e.second, scope))

    def _eval_Proj(self, e: Proj, scope: Scope):  # 4.10
        return self.expr(e.pair, scope)[e.index]

    def _eval_Gen(self, e: Gen, scope: Scope):  # 4.7
        n = self.binding.size(e.size)
        d = scope.depth
        body = self.expr(e.body, scope.push(e.var, n))
        return _map(body, lambda v: np.broadcast_to(v, v.shape[:d] + (n,) + v.shape[d + 1:]))

    def _eval_Sum(self, e: Sum, scope: Scope):  # 4.8
        contraction = self._contraction(e, scope)
        if contraction is not None:
            return contraction
        n = self.binding.size(e.size)
        d = scope.depth
        if n == 0:  # the empty sum is 0, whatever its body would be (inf, NaN)
            return np.zeros((1,) * d)
        body = self.expr(e.body, scope.push(e.var, n))
        # + 0.0: a sum starts from +0, as a kernel's accumulator does (a sum of -0 is +0 there)
        if body.shape[d] == 1:
            return np.take(body, 0, axis=d) * n + 0.0
        return body.sum(axis=d) + 0.0

    def _eval_Max(self, e: Max, scope: Scope):
        n = self.binding.size(e.size)
        d = scope.depth
        if n <= 0:  # the maximum over an empty range is -inf, whatever its body would be
            return np.full((1,) * d, -np.inf)
        body = self.expr(e.body, scope.push(e.var, n))
        # NaN propagates, as through the scalar max (and a kernel's tl_fmax)
        return np.take(body, 0, axis=d) if body.shape[d] == 1 else body.max(axis=d)

    def _contraction(self, e: Sum, scope: Scope):
        """``sum(i...) f0 * f1 * ...`` as one einsum over the factors (BLAS where it applies)."""
        inner, body = scope, e
        while isinstance(body, Sum):
            inner = inner.push(body.var, self.binding.size(body.size))
            body = body.body
        factors = _factors(body)
        if len(factors) < 2:
            return None
        d, depth = scope.depth, inner.depth
        if 0 in inner.extents[d:]:
            return np.zeros((1,) * d)
        values = [self.expr(f, inner) for f in factors]
        if not all(np.isfinite(v).all() for v in values):
            # an inf or NaN: the product one point at a time (a bracket's strong zero against it), summed
            # as written (einsum would factor, (a0 + a1) * inf, where a kernel computes a0 * inf + a1 * inf)
            return None
        operands, used = [], set()
        for v in values:
            keep = [k for k in range(depth) if v.shape[k] != 1]
            operands.append(v.reshape([v.shape[k] for k in keep]))
            operands.append(keep)
            used.update(keep)
        out_axes = [k for k in range(d) if k in used]
        # einsum's optimiser hands matrix-like contractions to BLAS; for matrix-vector it only costs
        blas = len(values) > 2 or all(len(axes) >= 2 for axes in operands[1::2])
        result = np.einsum(*operands, out_axes, optimize=blas)
        for k in range(d, depth):
            if k not in used:
                result = result * inner.extents[k]
        shape = [scope.extents[k] if k in used else 1 for k in range(d)]
        return np.asarray(result, dtype=np.float64).reshape(shape) + 0.0  # from +0, as in _sum

    def _eval_Access(self, e: Access, scope: Scope):  # 4.11
        value = self.expr(e.tensor, scope)
        return _map(value, lambda v: self._gather(e, v, scope))

    def _gather(self, e: Access, v: np.ndarray, scope: Scope) -> np.ndarray:
        d = scope.depth
        if 0 in scope.extents:  # the loops around have no point: nothing is read (and nothing is outside)
            return np.zeros(scope.extents + v.shape[d + 1:])
        extent = v.shape[d]
        window = _strided_window(e.index, v, scope, self.binding, d)
        if window is not None:
            return window
        index = self.affine(e.index, scope)
        if isinstance(index, int):
            if not 0 <= index < extent:
                self._out_of_range(e, np.array(index), extent, scope)
            return v[(slice(None),) * d + (index,)]
        outside = (index < 0) | (index >= extent)
        if outside.any():
            live = outside if scope.mask is None else (outside & scope.mask)
            if live.any():
                self._out_of_range(e, np.broadcast_to(index, live.shape), extent, scope, live)
            index = np.where(outside, 0, index)
        index = np.asarray(index, dtype=np.int64)  # in range now, whatever it was computed in
        if all(s == 1 for s in v.shape[:d]):
            return v.reshape(v.shape[d:])[index]
        ctx = tuple(scope.index(scope.axes[k]) if v.shape[k] != 1 else 0 for k in range(d))
        return v[ctx + (index,)]

    def _out_of_range(self, e: Access, index: np.ndarray, extent: int, scope: Scope, live=None):
        from .printer import expr_str

        where = ""
        if live is not None:
            point = np.argwhere(live)[0]
            where = " at " + ", ".join(f"{v.name} = {int(p)}" for v, p in zip(scope.axes, point))
            value = int(index[tuple(point)])
        else:
            value = int(index)
        raise BoundsError(f"{expr_str(e)} reads index {value}{where}, outside [0, {extent})")

    def _eval_Guard(self, e: Guard, scope: Scope):  # 4.12
        live = self.pred(e.pred, scope)
        if live is False or (live is not True and not live.any()):  # also where there are no points
            return self.zeros(e.type, scope.depth)
        if live is True or live.all():
            return self.expr(e.body, scope)
        value = self.expr(e.body, scope.restrict(live))
        return _map(value, lambda v: np.where(live.reshape(live.shape + (1,) * (v.ndim - live.ndim)), v, 0.0))

    def _eval_Let(self, e: Let, scope: Scope):  # 4.9
        value = self.expr(e.value, scope)
        if e.value.type is R:
            dead = self._bracketed(e.value, scope)
            if dead is not None:
                self.let_brackets[e.var] = (dead, scope.depth)
        return self.expr(e.body, scope.bind(e.var, value))

    def zeros(self, t: Type, depth: int):
        """The zero of type ``t`` (4.12) in a scope of the given depth."""
        if isinstance(t, PairType):
            return (self.zeros(t.first, depth), self.zeros(t.second, depth))
        shape = []
        while isinstance(t, TensorType):
            shape.append(self.binding.size(t.size))
            t = t.elem
        if isinstance(t, PairType):
            return _map(self.zeros(t, depth), lambda z: np.zeros((1,) * depth + tuple(shape)))
        assert isinstance(t, RealType)
        return np.zeros((1,) * depth + tuple(shape))

    # ---------------------------------------------------------------------------------------------
    # predicates and indices (Fig. 5)

    def affine(self, a: Affine, scope: Scope):
        """An integer, or an integer array over the scope (4.13-4.17).  Where a value may leave int64
        (a huge constant or coefficient), the array holds Python integers, which are exact."""
        terms = [(self._variable(v, scope), c) for v, c in a.terms]
        wide = abs(a.const) + sum(abs(c) * int(np.max(x, initial=0)) for x, c in terms) >= _INT64_SAFE
        value = a.const
        for x, c in terms:
            value = value + c * (x.astype(object) if wide and isinstance(x, np.ndarray) else x)
        return value

    def _variable(self, v, scope: Scope):
        """An index variable's values over the scope, or a size variable's value."""
        return scope.index(v) if isinstance(v, IndexVar) else self.binding.sizes[v.name]

    def pred(self, p: Pred, scope: Scope):
        """``True``/``False`` or a boolean array over the scope."""
        key = ("pred", id(p))
        hit = scope.memo.get(key)
        if hit is None:
            hit = dispatch(self, "_eval_", p, scope)
            if not isinstance(hit, bool):
                hit = np.asarray(hit)
                if hit.ndim < scope.depth:
                    hit = hit.reshape((1,) * (scope.depth - hit.ndim) + hit.shape)
            scope.memo[key] = hit
        return hit

    def _eval_TruePred(self, p: TruePred, scope: Scope):
        return True

    def _eval_FalsePred(self, p: FalsePred, scope: Scope):
        return False

    def _eval_Cmp(self, p: Cmp, scope: Scope):  # 4.18
        lhs, rhs = self.affine(p.lhs, scope), self.affine(p.rhs, scope)
        result = {"<": np.less, "<=": np.less_equal, "=": np.equal, "!=": np.not_equal}[p.op](lhs, rhs)
        return bool(result) if np.ndim(result) == 0 else result

    def _eval_And(self, p: And, scope: Scope):  # 4.19
        return self._junction(p.parts, scope, False, operator.and_)

    def _eval_Or(self, p: Or, scope: Scope):  # 4.19
        return self._junction(p.parts, scope, True, operator.or_)

    def _junction(self, parts, scope: Scope, absorbing: bool, combine):
        """The conjunction (``absorbing`` False) or disjunction (True) of ``parts``: stops at the first part
        that is ``absorbing`` everywhere, skips the parts that are the unit everywhere."""
        out = unit = not absorbing
        for q in parts:
            v = self.pred(q, scope)
            if v is absorbing:
                return absorbing
            if v is not unit:
                out = v if out is unit else combine(out, v)
        return out

    def _eval_Exists(self, p: Exists, scope: Scope):  # 4.21
        n = self.binding.size(p.size)
        if n == 0:
            return False
        body = self.pred(p.body, scope.push(p.var, n))
        if isinstance(body, bool):
            return body
        return body.any(axis=scope.depth)

    def _eval_RelAtom(self, p: RelAtom, scope: Scope):  # 4.20
        table = scope.env[p.rel][0]
        if table.size == 0:  # an empty relation holds nowhere (and has no entry to look at)
            return False
        args = [self.affine(a, scope) for a in p.args]
        inside = True
        for a, extent in zip(args, table.shape):
            inside = inside & (np.asarray(a) >= 0) & (np.asarray(a) < extent)
        if not np.any(inside):  # no point in range: an argument may be beyond int64 (a huge constant)
            return inside
        clipped = tuple(np.asarray(np.where(inside, a, 0), dtype=np.int64) for a in args)
        return np.asarray(table[clipped]) & inside


_INT64_SAFE = 2**62  # an affine value bounded by this cannot overflow int64 on the way


def _strided_window(index: Affine, v: np.ndarray, scope: Scope, binding: Binding, d: int):
    """``v[index]`` as a zero-copy strided view, when ``v`` does not vary over the scope and every index
    value over the whole scope box is in range (so no point, live or not, reads outside ``v``)."""
    if not index.index_vars or any(s != 1 for s in v.shape[:d]) or 0 in scope.extents:
        return None
    start = index.const + sum(c * binding.sizes[s.name] for s, c in index.terms if not isinstance(s, IndexVar))
    low = high = start
    step = v.strides[d]
    shape, strides = [1] * d, [0] * d
    for var, c in index.terms:
        if isinstance(var, IndexVar):
            k = scope.axes.index(var)
            span = c * (scope.extents[k] - 1)
            low, high = low + min(span, 0), high + max(span, 0)
            shape[k], strides[k] = scope.extents[k], c * step
    if low < 0 or high >= v.shape[d]:
        return None
    base = v.reshape(v.shape[d:])[start:]
    return np.lib.stride_tricks.as_strided(
        base, tuple(shape) + v.shape[d + 1:], tuple(strides) + v.strides[d + 1:], writeable=False
    )


def _either(a, b):
    """The union of two places (None: nowhere; True; a boolean array)."""
    return b if a is None else a if b is None else (a | b)


def _factors(e: Expr) -> list[Expr]:
    """The factors of a (right- or left-nested) product."""
    if isinstance(e, Mul):
        return _factors(e.left) + _factors(e.right)
    return [e]


def _map(value, f):
    if isinstance(value, tuple):
        return tuple(_map(v, f) for v in value)
    return f(value)


def _lift(value, depth: int, to_depth: int):
    """A value computed at scope depth ``depth`` seen from a deeper scope: new axes of extent 1."""
    if depth == to_depth:
        return value
    extra = (1,) * (to_depth - depth)
    return _map(value, lambda v: np.asarray(v).reshape(np.shape(v)[:depth] + extra + np.shape(v)[depth:]))


OPERATIONS.install(evaluate=evaluate)
