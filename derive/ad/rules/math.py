"""``math`` functions as ordinary rules, for calls the transform could not inline (arguments of unknown
kind, calls through variables).  Built from the same templates as the inlined versions, as Python source
(kept in ``linecache``), so that the rules can themselves be differentiated for nested derivatives."""
from __future__ import annotations

import math as _m

from ..runtime import RULES
from ..source import generated
from .operators import pow_da, times
from .scalar import INLINE_CALLS


def rule_from_template(f, spec, n):
    """``rule(a0, ...)`` returning ``(f(a0, ...), back)`` with the template derivatives in ``back``."""
    args = ", ".join(f"a{i}" for i in range(n))
    exprs = "".join(t.format(*[f"a{i}" for i in range(n)], dy="dy", y="y", m="_m") + ", " for t in spec.derivs)
    src = f"def rule_{spec.name}({args}):\n    y = f({args})\n    return y, lambda dy: ({exprs})\n"
    return generated(f"rule_{spec.name}", src, f"<tensorlang.ad rule {spec.name}>",
                     {"f": f, "_m": _m, "_ad_times": times, "_ad_powd": pow_da})   # (the helpers templates name)


for _f, _spec in INLINE_CALLS.items():
    if getattr(_f, "__module__", None) == "math":
        RULES[_f] = rule_from_template(_f, _spec, max(_spec.nargs))
