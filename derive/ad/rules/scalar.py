"""Scalar rules that are written straight into the generated code (inlined), for arguments known to be
numbers.  Each derivative is a Python expression template from the table of scalar derivatives
(``tensorlang.scalar_derivatives``): ``{dy}`` the incoming gradient, ``{y}`` the result, ``{0}``, ``{1}``
the arguments, ``{m}`` the ``math`` module.  Generic number types work: a
``Fraction`` in gives a ``Fraction`` out wherever the template only multiplies and adds.
"""
from __future__ import annotations

import builtins
import math

from ....scalar_derivatives import SCALAR_DERIVATIVES


class Inline:
    """A primitive whose pullback is inlined: ``derivs[i]`` is the gradient for argument ``i``."""

    def __init__(self, name: str, derivs: list[str], nargs=(1,)):
        self.name = name
        self.derivs = derivs
        self.nargs = nargs

    def arity(self, n: int) -> bool:
        return n in self.nargs


# y = a OP b: the gradients for a and b
INLINE_BINOPS = {op: list(SCALAR_DERIVATIVES[name].for_numbers()) for op, name in
                 (("+", "add"), ("-", "subtract"), ("*", "multiply"), ("/", "divide"), ("**", "pow"), ("%", "mod"))}
INLINE_UNARY = {op: SCALAR_DERIVATIVES[name].for_numbers()[0] for op, name in (("-", "negative"), ("+", "positive"))}

# the functions on numbers, by their names in the table of derivatives
_CALLS = {
    math.sin: "sin", math.cos: "cos", math.tan: "tan", math.exp: "exp", math.expm1: "expm1", math.log: "log",
    math.log1p: "log1p", math.log2: "log2", math.log10: "log10", math.sqrt: "sqrt", math.tanh: "tanh",
    math.sinh: "sinh", math.cosh: "cosh", math.asin: "asin", math.acos: "acos", math.atan: "atan",
    math.atan2: "atan2", math.hypot: "hypot", math.pow: "pow", math.erf: "erf", math.fabs: "abs",
    math.asinh: "asinh", math.acosh: "acosh", math.atanh: "atanh", math.erfc: "erfc",
    builtins.abs: "abs", builtins.float: "float", builtins.min: "min", builtins.max: "max",
}
INLINE_CALLS = {f: Inline(f.__name__, list(SCALAR_DERIVATIVES[name].for_numbers()),
                          nargs=(len(SCALAR_DERIVATIVES[name].for_numbers()),))
                for f, name in _CALLS.items()}

# calls whose result is a float whatever numbers go in
FLOAT_RESULT_CALLS = {f for f in INLINE_CALLS if getattr(f, "__module__", None) == "math"} | {builtins.float}

# calls whose result is an int when their arguments are ints
INT_PRESERVING_CALLS = {builtins.abs, builtins.min, builtins.max}

# calls whose result is an int (never differentiated)
INT_RESULT_CALLS = {builtins.len, builtins.int, builtins.round, builtins.bool, builtins.isinstance,
                    builtins.hash, builtins.id, math.floor, math.ceil, math.trunc, math.isnan, math.isinf,
                    math.isfinite}
