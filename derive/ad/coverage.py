"""The table of NumPy (and ``scipy.special``) functions that have a reverse rule (not one that refuses),
generated from the rule registry (``runtime.RULES``), grouped by the module of the rule library that holds
the rule; ``docs/ad.md`` carries it (a test checks that the two agree)."""
from __future__ import annotations

import numpy as np
import scipy.special as sc

from . import rules  # noqa: F401  (registers the rule library)
from .registry import REGISTRY
from .runtime import METHOD_RULES, RULES

_GROUPS = {
    "numpy": "elementwise functions, reductions, products, shapes",
    "layout": "functions that move, copy or drop entries (one driver over entry positions)",
    "linalg": "contractions and `numpy.linalg`",
    "linalg_more": "more `numpy.linalg`: factorisations with rules, norms and products as code",
    "implemented": "given as NumPy code, differentiated as code in every mode (statistics, nan-reductions, "
                   "convolutions, interpolation, NumPy 2's names, ufunc methods)",
    "scatter": "functions that write entries into an array in place (by the box rules; the `.at` of "
               "`multiply`, `divide`, `power`, `maximum`, `minimum` refused by name)",
    "fft": "`numpy.fft` (linear: the adjoint transforms)",
    "complexes": "complex numbers (Zygote's convention)",
    "structures": "indexing helpers",
    "special": "`scipy.special`",
}


def _numpy_name(f):
    """``f``'s public NumPy name (``linalg.det``, ``fft.fft``, ``r_``; ``special.erf`` for ``scipy.special``'s), or None when
    ``f`` is neither NumPy's nor ``scipy.special``'s."""
    name = getattr(f, "__name__", None)
    if name is None:
        return None
    owner = getattr(f, "__self__", None)
    if isinstance(owner, np.ufunc) and getattr(np, owner.__name__, None) is owner:   # np.add.reduce
        return f"{owner.__name__}.{name}"
    if getattr(np.lib.stride_tricks, name, None) is f and getattr(np, name, None) is not f:
        return f"lib.stride_tricks.{name}"
    if getattr(np.linalg, name, None) is f:
        return f"linalg.{name}"
    if getattr(np.fft, name, None) is f:
        return f"fft.{name}"
    if getattr(np, name, None) is f:
        return name
    return f"special.{name}" if getattr(sc, name, None) is f else None


def numpy_coverage() -> str:
    """The markdown table: one row per group, the functions in alphabetical order."""
    groups: dict = {}
    for f, rule in list(RULES.items()):
        name = _numpy_name(f)
        if name is None or "reverse" in REGISTRY[f].refused:
            continue
        module = getattr(rule, "__module__", "") or ""
        group = module.rsplit(".", 1)[-1] if module.startswith(__package__ + ".rules") else "numpy"
        group = "special" if name.startswith("special.") else group   # (elementwise ones made by rules.numpy)
        groups.setdefault(group if group in _GROUPS else "numpy", set()).add(name)
    methods = sorted(name for (t, name) in METHOD_RULES if t is np.ndarray)
    lines = ["| rules | what | NumPy functions |", "| --- | --- | --- |"]
    for group in _GROUPS:
        if group in groups:
            names = ", ".join(f"`{n}`" for n in sorted(groups[group]))
            lines.append(f"| `{group}` | {_GROUPS[group]} | {names} |")
    lines.append(f"| methods | `np.ndarray` methods | {', '.join(f'`.{n}`' for n in methods)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(numpy_coverage(), end="")
