"""Scalar rules that are written straight into the generated code (inlined), for arguments known to be
numbers.  Each derivative is a Python expression template: ``{dy}`` the incoming gradient, ``{y}`` the
result, ``{0}``, ``{1}`` the arguments, ``{m}`` the ``math`` module.  Generic number types work: a
``Fraction`` in gives a ``Fraction`` out wherever the template only multiplies and adds.
"""
from __future__ import annotations

import builtins
import math


class Inline:
    """A primitive whose pullback is inlined: ``derivs[i]`` is the gradient for argument ``i``."""

    def __init__(self, name: str, derivs: list[str], nargs=(1,)):
        self.name = name
        self.derivs = derivs
        self.nargs = nargs

    def arity(self, n: int) -> bool:
        return n in self.nargs


# y = a OP b: the gradients for a and b
INLINE_BINOPS = {
    "+": ["{dy}", "{dy}"],
    "-": ["{dy}", "-{dy}"],
    "*": ["{dy} * {1}", "{dy} * {0}"],
    "/": ["{dy} / {1}", "-{dy} * {y} / {1}"],
    # (at 0: 0 for x ** 0, inf where the derivative is infinite, as NumPy's float gives it: 0 ** 0.5)
    "**": ["({dy} * {1} * {0} ** ({1} - 1) if {0} != 0 or {1} >= 1 else 0 * {dy} if {1} == 0 else {dy} * {m}.inf)",
           "({dy} * {y} * {m}.log({0}) if {0} > 0 else 0)"],
    "%": ["{dy}", "-{dy} * ({0} // {1})"],
}
INLINE_UNARY = {"-": "-{dy}", "+": "{dy}"}

_SIGN = "({dy} if {0} > 0 else -{dy} if {0} < 0 else 0)"

INLINE_CALLS = {
    math.sin: Inline("sin", ["{dy} * {m}.cos({0})"]),
    math.cos: Inline("cos", ["-{dy} * {m}.sin({0})"]),
    math.tan: Inline("tan", ["{dy} * (1 + {y} * {y})"]),
    math.exp: Inline("exp", ["{dy} * {y}"]),
    math.expm1: Inline("expm1", ["{dy} * ({y} + 1)"]),
    math.log: Inline("log", ["{dy} / {0}"]),
    math.log1p: Inline("log1p", ["{dy} / (1 + {0})"]),
    math.log2: Inline("log2", ["{dy} / ({0} * 0.6931471805599453)"]),
    math.log10: Inline("log10", ["{dy} / ({0} * 2.302585092994046)"]),
    math.sqrt: Inline("sqrt", ["{dy} / (2 * {y})"]),
    math.tanh: Inline("tanh", ["{dy} * (1 - {y} * {y})"]),
    math.sinh: Inline("sinh", ["{dy} * {m}.cosh({0})"]),
    math.cosh: Inline("cosh", ["{dy} * {m}.sinh({0})"]),
    math.asin: Inline("asin", ["{dy} / {m}.sqrt(1 - {0} * {0})"]),
    math.acos: Inline("acos", ["-{dy} / {m}.sqrt(1 - {0} * {0})"]),
    math.atan: Inline("atan", ["{dy} / (1 + {0} * {0})"]),
    math.atan2: Inline("atan2", ["{dy} * {1} / ({0} * {0} + {1} * {1})",
                                 "-{dy} * {0} / ({0} * {0} + {1} * {1})"], nargs=(2,)),
    math.hypot: Inline("hypot", ["{dy} * {0} / {y}", "{dy} * {1} / {y}"], nargs=(2,)),
    math.pow: Inline("pow", INLINE_BINOPS["**"], nargs=(2,)),
    math.erf: Inline("erf", ["{dy} * 1.1283791670955126 * {m}.exp(-{0} * {0})"]),
    math.fabs: Inline("fabs", [_SIGN]),
    builtins.abs: Inline("abs", [_SIGN]),
    builtins.float: Inline("float", ["{dy}"]),
    builtins.min: Inline("min", ["({dy} if {0} <= {1} else 0)", "(0 if {0} <= {1} else {dy})"], nargs=(2,)),
    builtins.max: Inline("max", ["({dy} if {0} >= {1} else 0)", "(0 if {0} >= {1} else {dy})"], nargs=(2,)),
}

# calls whose result is a float whatever numbers go in
FLOAT_RESULT_CALLS = {f for f in INLINE_CALLS if getattr(f, "__module__", None) == "math"} | {builtins.float}

# calls whose result is an int when their arguments are ints
INT_PRESERVING_CALLS = {builtins.abs, builtins.min, builtins.max}

# calls whose result is an int (never differentiated)
INT_RESULT_CALLS = {builtins.len, builtins.int, builtins.round, builtins.bool, builtins.isinstance,
                    builtins.hash, builtins.id, math.floor, math.ceil, math.trunc, math.isnan, math.isinf,
                    math.isfinite}
