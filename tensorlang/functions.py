"""Black-box scalar functions (4.5): the built-ins of LANGUAGE.md and user functions registered with
``define_function``.

Each function is data: a SymPy expression in its arguments, from which its NumPy implementation, its
partial derivatives (for the derivative rules 6.6 and 6.27) and its C code are all derived, so a
user-registered function differentiates and prints like a built-in one.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import sympy

from .errors import TypeCheckError


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

    @property
    def arity(self) -> int:
        return len(self.params)

    def partial(self, k: int) -> sympy.Expr:
        """The partial derivative with respect to argument k, as a SymPy expression in ``params``."""
        return sympy.diff(self.expr, self.params[k])


_REGISTRY: dict[str, FunctionSpec] = {}


def _register(name, arity, body, numpy_fn=None, positive=()) -> FunctionSpec:
    params = tuple(sympy.Symbol(f"u{k}", real=True) for k in range(arity))
    expr = sympy.sympify(body(*params))
    if numpy_fn is None:
        numpy_fn = sympy.lambdify(params, expr, modules="numpy")
    spec = FunctionSpec(name, params, expr, numpy_fn, tuple(positive))
    _REGISTRY[name] = spec
    return spec


def define_function(name: str, body: Callable, *, positive: tuple[int, ...] = ()) -> FunctionSpec:
    """Register ``name`` as a scalar function given by a SymPy body, e.g.
    ``tl.define_function("softplus", lambda u: sympy.log(1 + sympy.exp(u)))``."""
    if not name.isidentifier():
        raise TypeCheckError(f"{name!r} is not a valid function name")
    arity = len(inspect.signature(body).parameters)
    return _register(name, arity, body, positive=positive)


def lookup(name: str) -> FunctionSpec:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise TypeCheckError(f"unknown function {name!r} (known: {', '.join(sorted(_REGISTRY))})") from None


def is_function(name: str) -> bool:
    return name in _REGISTRY


def registered() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def _relu(u):
    return np.maximum(u, 0.0)


def _sigmoid(u):
    return 0.5 * (1.0 + np.tanh(0.5 * u))


_register("exp", 1, sympy.exp, np.exp)
_register("log", 1, sympy.log, np.log, positive=(0,))
_register("sin", 1, sympy.sin, np.sin)
_register("cos", 1, sympy.cos, np.cos)
_register("tan", 1, sympy.tan, np.tan)
_register("tanh", 1, sympy.tanh, np.tanh)
_register("sqrt", 1, sympy.sqrt, np.sqrt, positive=(0,))
_register("sigmoid", 1, lambda u: 1 / (1 + sympy.exp(-u)), _sigmoid)
_register("relu", 1, lambda u: sympy.Max(u, 0), _relu)
_register("abs", 1, sympy.Abs, np.abs)
_register("recip", 1, lambda u: 1 / u, np.reciprocal, positive=(0,))
_register("pow", 2, lambda u, v: u**v, np.power, positive=(0,))
_register("max", 2, sympy.Max, np.maximum)
_register("min", 2, sympy.Min, np.minimum)
