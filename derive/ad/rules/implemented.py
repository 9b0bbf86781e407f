"""Rules of NumPy functions given as Python code: ``implemented_by(f, impl)`` registers, as ``f``'s reverse
and forward rules, the differentiation of ``impl``, a Python function with ``f``'s parameters that computes
what ``f`` does with functions that have rules of their own (``np.linalg.cond`` as a ratio of
``svdvals``, ``np.cov`` as a product of centred arrays ...).  Its derivatives in every mode, and at second
order, are then those of that code: the reverse rule calls ``J(impl, ...)``, whose code the transform
differentiates again; the forward rule is the forward mode of ``impl``.

``impl`` is checked against ``f`` where it is registered: the rules are only as right as the code is the
same function, so each one is tested against central differences of NumPy's own ``f``."""
from __future__ import annotations

import inspect
import itertools
import linecache

from ..runtime import RULES, J
from ..tangent import JVP, JVP_RULES

_COUNT = itertools.count()


def implemented_by(f, impl):
    """Register the rules of ``f`` as the derivatives of ``impl`` (same parameters, positional or keyword,
    with defaults; no ``*args``, ``**kw`` or keyword-only ones)."""
    sig = inspect.signature(impl)
    names = list(sig.parameters)
    name = f"rule_{impl.__name__.lstrip('_')}"
    src = (f"def {name}({', '.join(names)}):\n"
           f"    y, back = J(impl, {''.join(n + ', ' for n in names)})\n"
           f"    return y, lambda dy: back(dy)[1:]\n")
    filename = f"<tensorlang.ad rule {name} {next(_COUNT)}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    env = {"J": J, "impl": impl}
    exec(compile(src, filename, "exec"), env)
    rule = env[name]
    rule.__defaults__ = impl.__defaults__
    rule.__module__ = impl.__module__

    def forward(args, ts, **kw):
        bound = sig.bind(*args, **kw)
        bound.apply_defaults()
        full = tuple(bound.arguments[n] for n in names)
        return JVP(impl, None, full, tuple(ts) + (None,) * (len(full) - len(ts)))

    RULES[f] = rule
    JVP_RULES[f] = forward
    return rule
