"""Black-box scalar functions (4.5): the built-ins of docs/language.md and user functions registered with
``define_function``.

Each function is data: a SymPy expression in its arguments, from which its NumPy implementation, its
partial derivatives (for the derivative rules 6.6 and 6.27) and its C code are all derived, so a
user-registered function differentiates and prints like a built-in one.  A built-in's partial derivatives
are the table of scalar derivatives' (``tensorlang.scalar_derivatives``, which ``tensorlang.ad`` reads
too) where it has a smooth entry; they are SymPy's derivatives of the body (a test checks it).
"""
from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import scipy.special
import sympy
from sympy.codegen import cfunctions

from .errors import TypeCheckError
from .nodes import OPERATIONS, Add, Call, Const, Expr, Mul
from .scalar_derivatives import SCALAR_DERIVATIVES, ScalarDerivative
from .spelling import did_you_mean


@dataclass(frozen=True)
class FunctionSpec:
    """A registered scalar function.

    ``expr`` is the SymPy body over ``params``; ``numpy`` evaluates it elementwise; ``positive`` lists the
    argument positions that must be positive to stay in the domain (used by the random-program
    generator and the docs, not enforced at run time).
    """

    name: str
    params: tuple[sympy.Symbol, ...]
    expr: sympy.Expr
    numpy: Callable = field(compare=False)
    positive: tuple[int, ...] = ()
    derivative: ScalarDerivative | None = field(default=None, compare=False)

    @property
    def arity(self) -> int:
        return len(self.params)

    def partial(self, k: int) -> sympy.Expr:
        """The partial derivative with respect to argument k, as a SymPy expression in ``params``: the table
        of scalar derivatives' for a built-in that has a smooth entry there, else SymPy's of the body."""
        if self.derivative is None or not self.derivative.smooth:
            return sympy.diff(self.expr, self.params[k])
        names = {f"_u{i}": p for i, p in enumerate(self.params)}
        template = self.derivative.partials()[k].format(*names, y="_y", m="_m")
        return sympy.sympify(eval(template, {"_m": sympy, "_y": self.expr, **names}))  # noqa: S307 - the table's


_REGISTRY: dict[str, FunctionSpec] = {}


def _register(name, arity, body, numpy_fn=None, positive=(), derivative=None) -> FunctionSpec:
    params = tuple(sympy.Symbol(f"u{k}", real=True) for k in range(arity))
    expr = sympy.sympify(body(*params)) if not isinstance(body, sympy.Lambda) else body(*params)
    if numpy_fn is None:
        numpy_fn = sympy.lambdify(params, expr, modules="numpy") if expr.free_symbols else _constant(float(expr))
    spec = FunctionSpec(name, params, expr, numpy_fn, tuple(positive), derivative)
    _REGISTRY[name] = spec
    return spec


def _constant(value: float) -> Callable:
    """The NumPy function of a constant body (a derivative of ``equal``, say): the value in the arguments'
    broadcast shape, as every other black box returns (a lambdified constant is one number)."""
    return lambda *args: np.full(np.broadcast(*args).shape, value)


def define_function(name: str, body: Callable, *, positive: tuple[int, ...] = ()) -> FunctionSpec:
    """Register ``name`` as a scalar function given by a SymPy body, e.g.
    ``tl.define_function("softplus", lambda u: sympy.log(1 + sympy.exp(u)))``."""
    if not isinstance(name, str) or not name.isidentifier() or name in KEYWORDS:
        raise TypeCheckError(f"{name!r} is not a valid function name (an identifier, not a keyword)")
    if not callable(body):
        raise TypeCheckError(
            f"the body of {name} must be a function of SymPy symbols, e.g. lambda u: sympy.exp(u), "
            f"not {body!r}"
        )
    params = tuple(sympy.Symbol(f"u{k}", real=True) for k in range(len(inspect.signature(body).parameters)))
    try:
        expr = sympy.sympify(body(*params))
    except Exception as exc:  # noqa: BLE001 - a user's body may fail in any way on symbols
        raise TypeCheckError(f"the body of {name} fails on SymPy symbols: {type(exc).__name__}: {exc}") from None
    _check_numeric(name, params, expr)
    return _register(name, len(params), sympy.Lambda(params, expr), positive=positive)


# the words of the grammar, which a function cannot be called by
KEYWORDS = frozenset({"let", "in", "gen", "sum", "exists", "and", "or", "not", "true", "false", "R", "rel"})


def _check_numeric(name: str, params: tuple, expr) -> None:
    """A body must be a SymPy expression in its arguments alone that NumPy can evaluate."""
    if not isinstance(expr, sympy.Expr):
        raise TypeCheckError(f"the body of {name} is not a SymPy expression: {expr!r}")
    unknown = sorted(str(s) for s in expr.free_symbols - set(params))
    undefined = sorted(str(f.func) for f in expr.atoms(sympy.core.function.AppliedUndef))
    if unknown or undefined:
        raise TypeCheckError(
            f"the body of {name} ({expr}) uses {', '.join(unknown + undefined)}, which are not its arguments "
            f"or functions SymPy can evaluate numerically"
        )
    try:
        with np.errstate(all="ignore"):
            np.asarray(sympy.lambdify(params, expr, modules="numpy")(*([np.full(2, 0.5)] * len(params))), float)
    except Exception as exc:  # noqa: BLE001 - whatever NumPy makes of SymPy's printing
        raise TypeCheckError(
            f"the body of {name} ({expr}) cannot be evaluated by NumPy: {type(exc).__name__}: {exc}"
        ) from None


def lookup(name: str) -> FunctionSpec:
    spec = _REGISTRY.get(name) or _derive(name)
    if spec is None:
        raise TypeCheckError(f"unknown function {name!r} (known: {', '.join(sorted(_REGISTRY))})"
                             f"{did_you_mean(name, sorted(_REGISTRY))}")
    return spec


def is_function(name: str) -> bool:
    return name in _REGISTRY or _derive(name) is not None


def registered() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def _relu(u):
    return np.maximum(u, 0.0)


def _sigmoid(u):
    return 0.5 * (1.0 + np.tanh(0.5 * u))


def _equal(u, v):
    return np.equal(u, v).astype(np.float64)


def _builtin(name, arity, body, numpy_fn, positive=()) -> FunctionSpec:
    """A built-in black box; its partial derivatives are the table's where it has a smooth entry."""
    return _register(name, arity, body, numpy_fn, positive, SCALAR_DERIVATIVES.get(name))


_builtin("exp", 1, sympy.exp, np.exp)
_builtin("log", 1, sympy.log, np.log, positive=(0,))
_builtin("sin", 1, sympy.sin, np.sin)
_builtin("cos", 1, sympy.cos, np.cos)
_builtin("tan", 1, sympy.tan, np.tan)
_builtin("tanh", 1, sympy.tanh, np.tanh)
_builtin("sqrt", 1, sympy.sqrt, np.sqrt, positive=(0,))
_builtin("sigmoid", 1, lambda u: 1 / (1 + sympy.exp(-u)), _sigmoid)
_builtin("relu", 1, lambda u: sympy.Max(u, 0), _relu)
_builtin("abs", 1, sympy.Abs, np.abs)
_builtin("recip", 1, lambda u: 1 / u, np.reciprocal, positive=(0,))
_builtin("pow", 2, lambda u, v: u**v, np.power, positive=(0,))
_builtin("max", 2, sympy.Max, np.maximum)
_builtin("min", 2, sympy.Min, np.minimum)
_builtin("log1p", 1, cfunctions.log1p, np.log1p, positive=(0,))
_builtin("expm1", 1, cfunctions.expm1, np.expm1)
_builtin("erf", 1, sympy.erf, scipy.special.erf)
# 1 where its arguments are equal, else 0: what the derivatives of max(i:n) e compare with (derivative 0)
_builtin("equal", 2, lambda u, v: sympy.Piecewise((1, sympy.Eq(u, v)), (0, True)), _equal)


# ------------------------------------------------------------------------------------------------
# derivatives of black boxes, as data (rules 6.6 and 6.27)
#
# A partial derivative is first translated back into the language (``cos(u)`` for ``sin``); where the
# translation would cost more than one operation, or SymPy's expression has no counterpart in the
# language (``Heaviside`` for ``relu``), it becomes a derived black box of its own, registered under a
# name that the parser re-derives on demand: ``<f>_d<k>`` for the k-th partial, ``<f>_jvp`` for the
# whole directional derivative ``sum_k d_k f(u) * du_k`` and ``<f>_vjp<k>`` for ``d_k f(u) * dy``.  Each derived black box costs one operation,
# which is what Theorems 6.1 and 6.35 assume of ``Df`` and ``D^T f``.

_DERIVED = re.compile(r"^(?P<base>.+)_(?:d(?P<k>\d+)|(?P<jvp>jvp)|vjp(?P<v>\d+))$")


def _derive(name: str) -> FunctionSpec | None:
    match = _DERIVED.match(name)
    if not match or match["base"] not in _REGISTRY:
        return None
    base = _REGISTRY[match["base"]]
    if match["jvp"]:
        tangents = tuple(sympy.Symbol(f"du{k}", real=True) for k in range(base.arity))
        body = sum(base.partial(k) * t for k, t in enumerate(tangents))
        return _register(name, 2 * base.arity, sympy.Lambda(base.params + tangents, body))
    if match["v"] is not None:
        k, cotangent = int(match["v"]), sympy.Symbol("dy", real=True)
        if k >= base.arity:
            return None
        return _register(name, base.arity + 1, sympy.Lambda(base.params + (cotangent,), base.partial(k) * cotangent))
    k = int(match["k"])
    if k >= base.arity:
        return None
    return _register(name, base.arity, sympy.Lambda(base.params, base.partial(k)))


def partial(fn: str, k: int, args: Sequence) -> Expr:
    """``d_k fn(args)`` as an expression: translated into the language where that costs at most one
    operation, else the derived black box ``<fn>_d<k>``."""
    spec = lookup(fn)
    inline = from_sympy(spec.partial(k), dict(zip(spec.params, args)))
    if inline is not None and _ops(inline) <= 1:
        return inline
    return Call(f"{fn}_d{k}", tuple(args))


def jvp(fn: str, args: Sequence, tangents: Sequence) -> Expr:
    """``D fn(args; tangents)`` (rule 6.6); ``None`` tangents are zero.  One non-zero tangent gives
    ``partial * tangent``; several give the single derived black box ``<fn>_jvp``.  A tangent whose partial
    is identically zero (``equal``'s) contributes nothing, and is left out."""
    spec = lookup(fn)
    live = [k for k, t in enumerate(tangents) if t is not None and not spec.partial(k).is_zero]
    if not live:
        return None
    if len(live) == 1:
        (k,) = live
        return Mul(partial(fn, k, args), tangents[k])
    zeros = tuple(Const(0) if t is None else t for t in tangents)
    return Call(f"{fn}_jvp", tuple(args) + zeros)


def _ops(e) -> int:
    """The number of arithmetic operations in a scalar expression tree (its cost at one point)."""
    if isinstance(e, (Add, Mul)):
        return 1 + _ops(e.left) + _ops(e.right)
    if isinstance(e, Call):
        return 1 + sum(_ops(a) for a in e.args)
    return 0


_SYMPY_CALLS = {
    sympy.exp: "exp", sympy.log: "log", sympy.sin: "sin", sympy.cos: "cos", sympy.tan: "tan",
    sympy.tanh: "tanh", sympy.Abs: "abs", cfunctions.log1p: "log1p", cfunctions.expm1: "expm1", sympy.erf: "erf",
}


def from_sympy(expr: sympy.Expr, env: dict) -> Expr | None:
    """A SymPy expression over the symbols of ``env`` as an expression of the language, or ``None``
    where it uses something the language lacks."""
    if expr in env:
        return env[expr]
    if expr.is_Integer:
        return Const(int(expr))
    if expr.is_Number and expr.is_real:
        return Const(float(expr))
    parts = [from_sympy(a, env) for a in expr.args]
    if any(p is None for p in parts):
        return None
    if expr.is_Add:
        out = parts[0]
        for p in parts[1:]:
            out = Add(out, p)
        return out
    if expr.is_Mul:
        out = parts[-1]
        for p in reversed(parts[:-1]):
            out = Mul(p, out)
        return out
    if expr.is_Pow:
        base, exponent = parts[0], expr.args[1]
        if exponent == -1:
            return Call("recip", (base,))
        if exponent == sympy.Rational(1, 2):
            return Call("sqrt", (base,))
        if exponent.is_Integer and 2 <= exponent <= 3:
            out = base
            for _ in range(int(exponent) - 1):
                out = Mul(base, out)
            return out
        return Call("pow", (base, parts[1]))
    name = _SYMPY_CALLS.get(type(expr))
    if name is not None:
        return Call(name, tuple(parts))
    return None


def vjp(fn: str, k: int, args: Sequence, cotangent: Expr) -> Expr:
    """The k-th component of ``D^T fn(args, cotangent)`` (rule 6.27): ``partial * cotangent`` for a
    function of one argument (the same shape as its forward derivative), and the derived black box
    ``<fn>_vjp<k>`` (one operation) for a function of several."""
    if lookup(fn).arity == 1:
        return Mul(partial(fn, 0, args), cotangent)
    return Call(f"{fn}_vjp{k}", tuple(args) + (cotangent,))


OPERATIONS.install(lookup=lookup)
