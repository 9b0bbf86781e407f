"""``math`` functions as ordinary rules, for calls the transform could not inline (arguments of unknown
kind, calls through variables).  Built from the same templates as the inlined versions, as Python source
(kept in ``linecache``), so that the rules can themselves be differentiated for nested derivatives.  Called
with an array of a type of ``ARRAY_TYPES`` (a batch of ``ad.vmap``, a stand-in of a recording), which a
``math`` function cannot take, a rule is its NumPy function's (``NUMPY_OF_MATH``)."""
from __future__ import annotations

import math as _m

import numpy as np
import scipy.special

from ..runtime import ARRAY_TYPES, RULES, J
from ..source import generated
from .operators import TEMPLATE_HELPERS
from .scalar import INLINE_CALLS

# the NumPy (and SciPy) function that computes each ``math`` function on arrays
NUMPY_OF_MATH = {
    _m.sin: np.sin, _m.cos: np.cos, _m.tan: np.tan, _m.exp: np.exp, _m.expm1: np.expm1, _m.log: np.log,
    _m.log1p: np.log1p, _m.log2: np.log2, _m.log10: np.log10, _m.sqrt: np.sqrt, _m.tanh: np.tanh, _m.sinh: np.sinh,
    _m.cosh: np.cosh, _m.asin: np.arcsin, _m.acos: np.arccos, _m.atan: np.arctan, _m.atan2: np.arctan2,
    _m.hypot: np.hypot, _m.pow: np.power, _m.erf: scipy.special.erf, _m.fabs: np.abs, _m.asinh: np.arcsinh,
    _m.acosh: np.arccosh, _m.atanh: np.arctanh, _m.erfc: scipy.special.erfc,
}


def log_to_base(x, base):
    """``math.log(x, base)``, as CPython computes it: the form of ``math.log`` with a base, whose derivatives in
    every mode are those of this code."""
    return _m.log(x) / _m.log(base)


# the forms of ``math`` functions with one more argument than their template's, given as code
LONGER_FORMS = {_m.log: log_to_base}


def rule_from_template(f, spec, n):
    """``rule(a0, ...)`` returning ``(f(a0, ...), back)`` with the template derivatives in ``back``; the rule of
    ``NUMPY_OF_MATH[f]`` where an argument is of a type of ``ARRAY_TYPES``; a call of the longer form
    (``LONGER_FORMS``) differentiates its code."""
    names = [f"a{i}" for i in range(n)]
    args = ", ".join(names)
    exprs = "".join(t.format(*names, dy="dy", y="y", m="_m") + ", " for t in spec.derivs)
    arrays = " or ".join(f"type({a}) in _arrays" for a in names)
    head = f"def rule_{spec.name}({args}):\n"
    if f in LONGER_FORMS:
        head = (f"def rule_{spec.name}({args}, more=None):\n"
                f"    if more is not None:\n"
                f"        y, back = J(_longer, {args}, more)\n"
                f"        return y, lambda dy: back(dy)[1:]\n")
    src = (head +
           f"    if {arrays}:\n"
           f"        return _rules[_on_arrays]({args})\n"
           f"    y = f({args})\n"
           f"    return y, lambda dy: ({exprs})\n")
    return generated(f"rule_{spec.name}", src, f"<tensorlang.ad rule {spec.name}>",
                     {"f": f, "_m": _m, **TEMPLATE_HELPERS,
                      "_arrays": ARRAY_TYPES, "_rules": RULES, "_on_arrays": NUMPY_OF_MATH[f],
                      "J": J, "_longer": LONGER_FORMS.get(f)})


for _f, _spec in INLINE_CALLS.items():
    if getattr(_f, "__module__", None) == "math":
        RULES[_f] = rule_from_template(_f, _spec, max(_spec.nargs))
