"""Operators on values whose kind is not known when the function is transformed: numbers and arrays
(with un-broadcasting; Dask arrays too, but for ``@``), sequence concatenation and repetition, and user
types through their Python ``__add__``/``__radd__``... methods, which are transformed in turn.
"""
from __future__ import annotations

import math
import operator
import sys
import types

import numpy as np

from ....codegen.dask_graph import known_shape, lazy_array, like_values
from ....scalar_derivatives import SCALAR_DERIVATIVES
from ..ir import CONST_KIND, INT, NUM, extends_list, kind_of, writable_array
from ..runtime import ARRAY_TYPES, J, Jm, NONDIFF, RULES, ZERO, acc, acc_into, asarray, is_complex, unbroadcast, untracked
from ..source import generated
from .structures import setitem


# the logarithm of the largest float, less a margin for rounding: a power above it may overflow
_LOG_MAX = math.log(sys.float_info.max) - 1.0


def pow_da(a, b):
    """The partial of ``a ** b`` in ``a``: ``b * a ** (b - 1)``, zero at ``a == b == 0`` (``x ** 0`` is
    constant, also at 0), and NumPy's inf or nan where the derivative does not exist (``0 ** 0.5``), made by
    ``zero_power`` without NumPy's divide-by-zero warning (the power is taken of 1 in their place); infinite
    where it overflows, as JAX gives it.  It is written as a function of ``b`` too, so that its own
    derivative in ``b`` (``a ** (b - 1)`` at ``b == 0``) is right."""
    if (type(b) is int or type(b) is float) and b >= 1:   # (no pole and no constant: ``x ** 2``, the common case)
        return b * a ** (b - 1)
    if type(a) is not np.ndarray and type(b) is not np.ndarray and not lazy_array(a) and not lazy_array(b) \
            and type(a) not in ARRAY_TYPES and type(b) not in ARRAY_TYPES:
        if a == 0 and b == 0:
            return 0 * a
        if a == 0 and (b - 1).real < 0:
            return b * zero_power(a, b - 1)
        if type(a) is float and type(b) in (int, float) and (b - 1) * math.log(abs(a)) > _LOG_MAX:
            # (Python's float power raises where IEEE's, NumPy's, is infinite: ``x ** -1.0`` at 1e-200)
            return b * float(np.power(a, b - 1))
        return b * a ** (b - 1)
    zero = (a if lazy_array(a) else asarray(a)) == 0   # (a Dask array compared as it is: lazily)
    constant = zero & ((b if lazy_array(b) else asarray(b)) == 0)
    pole = zero & (np.real(b) < 1) & ~constant
    return b * np.where(pole, zero_power(a, b - 1), np.power(np.where(pole | constant, 1.0, a), b - 1))


def zero_power(a, e):
    """``a ** e`` for ``a == 0`` and ``e`` of negative real part, as IEEE's pow and NumPy give it but without
    the divide-by-zero warning: inf, -inf where ``a`` is a negative zero and ``e`` an odd integer, nan for a
    complex ``a`` or ``e``.  A constant where the derivative does not exist (its own derivative is none)."""
    e = asarray(e)
    if e.dtype.kind == "c" or is_complex(a):
        return np.full(np.broadcast(asarray(a), e).shape, complex(np.nan, np.nan))
    odd = np.mod(np.where(np.isfinite(e), e, 0), 2) == 1
    return np.where(odd & np.signbit(a), -np.inf, np.inf)


NONDIFF.update({zero_power, lazy_array})


def times(dy, d):
    """``dy * d`` for a gradient or tangent ``dy`` and a partial derivative ``d``, as a strong product: 0
    where either is exactly 0, also against an infinite or undefined other (``0 * inf``, ``0 * nan``).  In
    the common case (no NaN in the product: one sum finds it) it is the plain product."""
    g = dy * d
    if lazy_array(g) or type(g) in ARRAY_TYPES:   # (a Dask array, a batch: the same product, lazily, per example)
        return np.where((dy == 0) | (d == 0), 0, g)
    if type(g) is np.ndarray:
        s = g.sum()
        if s == s:
            return g
        return np.where((asarray(dy) == 0) | (asarray(d) == 0), 0, g)
    if g == g or not (dy == 0 or np.all(asarray(d) == 0)):
        return g
    return type(g)(0)


def log_base(a):
    """``log(a)``, the partial of ``a ** b`` in ``b`` over ``a ** b``: the principal logarithm of a complex
    ``a``; for a real one, 0 where ``a <= 0`` (there ``a ** b`` has a value at integers ``b`` only)."""
    if is_complex(a):
        return np.log(a)
    return np.log(np.where((a if lazy_array(a) else asarray(a)) > 0, a, 1))


def is_numeric(a) -> bool:
    return type(a) is np.ndarray or type(a) in ARRAY_TYPES or kind_of(a) in (INT, NUM) \
        or isinstance(a, (np.generic, complex))


def lazy_arithmetic(a, b) -> bool:
    """Whether ``a op b`` is arithmetic of Dask arrays (one at least), NumPy arrays and numbers: its
    gradients are the numeric ones, a Dask operand's lazy, a NumPy operand's computed."""
    return (lazy_array(a) or lazy_array(b)) and (lazy_array(a) or is_numeric(a)) and (lazy_array(b) or is_numeric(b))


def _is_active(b):
    return kind_of(b) != INT and not (type(b) is np.ndarray and b.dtype.kind in "iub")


# the helpers that the templates of the table of scalar derivatives name (``rules.numpy`` adds its own)
TEMPLATE_HELPERS = {"_ad_times": times, "_ad_powd": pow_da, "_ad_logbase": log_base}


def _gradients(op: str, name: str):
    """``gradients(dy, a, b, y)`` of ``a OP b`` on numbers and arrays, from the templates of the table of scalar
    derivatives (the source kept: second order differentiates it); an integer exponent has no gradient."""
    da, db = (t.format("a", "b", dy="dy", y="y", np="np") for t in SCALAR_DERIVATIVES[name].for_arrays())
    if op == "**":
        db = f"{db} if _is_active(b) else None"
    src = f"def gradients(dy, a, b, y):\n    return {da}, {db}\n"
    env = {"np": np, **TEMPLATE_HELPERS, "_is_active": _is_active}
    return generated("gradients", src, f"<tensorlang.ad gradients of {op}>", env)


# the gradients of a OP b, for numbers and arrays
NUMERIC_GRADS = {op: _gradients(op, name) for op, name in
                 (("+", "add"), ("-", "subtract"), ("*", "multiply"), ("/", "divide"), ("**", "pow"), ("%", "mod"))}
READS_RESULT = {"/", "**"}   # the operators whose gradients (NUMERIC_GRADS) read the result ``y``
DUNDER = {"+": "add", "-": "sub", "*": "mul", "/": "truediv", "**": "pow", "%": "mod", "@": "matmul",
           "//": "floordiv", "&": "and", "|": "or", "^": "xor", "<<": "lshift", ">>": "rshift"}
PYOP = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "**": operator.pow,
         "%": operator.mod, "@": operator.matmul, "//": operator.floordiv, "&": operator.and_,
         "|": operator.or_, "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift}


def matmul_grad(dy, a, b, which):
    """The gradient of operand ``which`` (0 or 1) of ``a @ b``: a 1-D operand is promoted to a matrix as
    ``matmul`` does, and the gradient is summed over the batch axes its operand was broadcast along."""
    a, b, dy = asarray(a), asarray(b), asarray(dy)
    if a.ndim == 1 and b.ndim == 1:
        return dy * (b if which == 0 else a)
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    if a.ndim == 1:
        dy = np.expand_dims(dy, -2)
    if b.ndim == 1:
        dy = dy[..., None]
    if which == 0:
        return unbroadcast(dy @ np.swapaxes(b2, -1, -2), a2).reshape(a.shape)
    return unbroadcast(np.swapaxes(a2, -1, -2) @ dy, b2).reshape(b.shape)


def matmul_back(dy, a, b):
    return matmul_grad(dy, a, b, 0), matmul_grad(dy, a, b, 1)


def _make_binop(op):
    pyop = PYOP[op]
    grads = NUMERIC_GRADS.get(op)
    name = DUNDER[op]

    def rule(a, b):
        if is_numeric(a) and is_numeric(b):
            y = pyop(a, b)
            if op == "@":
                return y, lambda dy: matmul_back(dy, a, b)
            if grads is None:
                return y, ZERO
            if op in READS_RESULT:
                return y, lambda dy: tuple(unbroadcast(g, x) for g, x in zip(grads(dy, a, b, y), (a, b)))
            # (a pullback that holds no result: code after the call may write into it, runtime.keep)
            return y, lambda dy: tuple(unbroadcast(g, x) for g, x in zip(grads(dy, a, b, None), (a, b)))
        if op != "@" and lazy_arithmetic(a, b):
            return _lazy_binop(grads, pyop, a, b)
        return _dunder(op, name, pyop, a, b)

    rule.__name__ = f"J_{name}"
    return rule


def _lazy_binop(grads, pyop, a, b):
    """``a op b`` of Dask arrays, NumPy arrays and numbers (``lazy_arithmetic``): each gradient as its
    operand is, lazy or computed (``like_values``); a Dask array of unknown shape refused by name."""
    y = pyop(known_shape(a), known_shape(b))
    if grads is None:
        return y, ZERO
    return y, lambda dy: like_values(tuple(unbroadcast(g, x) for g, x in zip(grads(dy, a, b, y), (a, b))), (a, b))


def _dunder(op, name, pyop, a, b):
    # (no f-strings: forward over reverse differentiates this code, ``second``)
    m = getattr(type(a), "__" + name + "__", None)
    if isinstance(m, types.FunctionType):
        y, back = J(m, a, b)
        if y is not NotImplemented:
            return y, lambda dy: back(dy)[1:]
    m = getattr(type(b), "__r" + name + "__", None)
    if isinstance(m, types.FunctionType):
        y, rback = J(m, b, a)
        if y is not NotImplemented:
            return y, lambda dy: (lambda g: (g[2], g[1]))(rback(dy))
    y = pyop(a, b)
    if numpy_with_sequence(y, a, b):
        return _as_arrays(op, a, b)
    if op == "+" and isinstance(a, (list, tuple)):
        return y, _split_back(len(a))
    if op == "*" and isinstance(a, (list, tuple)) and kind_of(b) == INT:
        return y, _fold_back(len(a), 0)
    if op == "*" and isinstance(b, (list, tuple)) and kind_of(a) == INT:
        return y, _fold_back(len(b), 1)
    if op == "|" and isinstance(a, dict) and isinstance(b, dict):   # a merge: b's keys win
        return y, _merge_back(a, b)
    return y, ZERO if kind_of(y) in (INT, CONST_KIND) else _opaque(op, a, b)


def numpy_with_sequence(y, a, b) -> bool:
    """Whether ``y = a op b`` was NumPy's arithmetic of a list or tuple with an array or NumPy number
    (``[1.0, 2.0] - x``: an array, where ``[1.0] + [2.0]`` concatenates and ``[1.0] * np.int64(2)`` repeats)."""
    return isinstance(y, (np.ndarray, np.generic)) and (isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)))


def _as_arrays(op, a, b):
    """``a op b`` with a list or tuple operand taken as the array it stands for: the numeric rule, and the
    sequence's gradient its items' (``unbroadcast``)."""
    y, back = BINOPS[op](asarray(a) if isinstance(a, (list, tuple)) else a,
                         asarray(b) if isinstance(b, (list, tuple)) else b)

    def pullback(dy):
        ga, gb = back(dy)
        return unbroadcast(ga, a), unbroadcast(gb, b)
    return y, pullback


def _opaque(op, a, b):
    return untracked(f"{type(a).__name__} {op} {type(b).__name__}")


def _merge_back(a, b):
    """The pullback of the dict merge ``a | b``."""
    return lambda dy: (None, None) if dy is None else (
        {k: g for k, g in dy.items() if k in a and k not in b}, {k: g for k, g in dy.items() if k in b})


def _split_back(n):
    """The pullback of ``a + b`` for sequences, ``a`` of length ``n``."""
    return lambda dy: (None, None) if dy is None else (dy[:n], dy[n:])


def _fold_back(n, which):
    """The pullback of ``a * k`` (``which`` 0) or ``k * b`` (1) for a sequence of length ``n``."""
    def back(dy):
        if dy is None:
            return (None, None)
        g = _fold(dy, n)
        return (g, None) if which == 0 else (None, g)
    return back


def _fold(dy, n):
    out = None
    for k in range(0, len(dy), n):
        out = acc(out, dy[k:k + n])
    return out


def make_inplace(op):
    """``a op= b``: on a float array (a batch of ``ad.vmap`` too) a write in place (``a[...] = a op b``, by
    the box rules of ``structures.setitem``), on a list ``+=`` extends it, on a dict ``|=`` updates it, on an
    object whose class defines ``__iop__`` in Python that method (transformed in turn), otherwise ``a op b``."""
    plain = BINOPS[op]
    name = f"__i{DUNDER[op]}__"

    def rule(a, b):
        if writable_array(a) and a.dtype.kind in "fc":
            y, op_back = plain(a.copy(), b.copy() if b is a else b)
            fits(a, y)
            _, write_back = setitem(a, Ellipsis, y)
            return a, lambda dy: _through(op_back, acc(dy, write_back(None)[2]))
        # (the list's ``extend``, the dict's ``update``, through ``Jm``: differentiated again, as those methods are)
        if op == "+" and extends_list(a, b):
            _, extend_back = Jm("extend", (), a, b)
            return a, lambda dy: extend_back(acc_into(a, None, dy))   # the result's gradient is the list's
        if type(a) is dict and op == "|":
            _, update_back = Jm("update", (), a, b)
            return a, lambda dy: update_back(acc_into(a, None, dy))
        m = getattr(type(a), name, None)
        if isinstance(m, types.FunctionType) and type(a) not in ARRAY_TYPES:   # (not a stand-in's: a number)
            y, own_back = J(m, a, b)
            if y is not NotImplemented:
                return y, lambda dy: own_back(dy)[1:]
        y, plain_back = plain(a, b)
        return y, lambda dy: _through(plain_back, dy)

    rule.__name__ = f"J_i{DUNDER[op]}"
    return rule


def fits(a, y):
    """NumPy's error for ``a op= b`` whose result ``y`` does not fit in ``a`` (no derivative: forward over
    reverse calls it as it is)."""
    if np.shape(y) != a.shape:
        raise ValueError(f"non-broadcastable output operand with shape {a.shape} doesn't match the "
                         f"broadcast shape {np.shape(y)}")


NONDIFF.add(fits)


def _through(back, dy):
    return (None, None) if dy is None else back(dy)


BINOPS = {op: _make_binop(op) for op in DUNDER}
BINOPS.update({op + "=": make_inplace(op) for op in DUNDER})
RULES.update({PYOP[op]: rule for op, rule in BINOPS.items() if op in PYOP})
PYIOP = {op + "=": getattr(operator, f"i{name}") for op, name in DUNDER.items()}   # operator.iadd for +=
RULES.update({PYIOP[op]: BINOPS[op] for op in PYIOP})


def _neg(a):
    if is_numeric(a) or lazy_array(a):
        return -a, lambda dy: (-dy,)
    m = getattr(type(a), "__neg__", None)
    if isinstance(m, types.FunctionType):
        y, back = J(m, a)
        return y, lambda dy: back(dy)[1:]
    return -a, ZERO


def _pos(a):
    return +a, lambda dy: (dy,)


UNARY = {"-": _neg, "+": _pos, "~": lambda a: (~a, ZERO), "not": lambda a: (not a, ZERO)}
RULES.update({operator.neg: _neg, operator.pos: _pos})
NONDIFF.update({issubclass, operator.not_, operator.invert})
