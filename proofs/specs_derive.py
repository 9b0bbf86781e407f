"""The derivatives' obligations (section 6): rules 6.1-6.13 (Fig. 13), 6.14-6.29 (Fig. 14-17) and the
simplification rules S1-S7, registered as ``CheckSpec``s.  What is checked, and how, is documented in
``proofs/derive_checks.py``; it is imported only when the checks run, so that loading the specs leaves
the other passes' draws alone (Hypothesis's generation is sensitive to what the process has allocated
before it, and the normalisation rows have rules with few instances)."""
from __future__ import annotations

from .registry import CheckSpec, register

FORWARD_ROWS = tuple((name, (name.split()[0],)) for name in (
    "6.1 variable", "6.2 variable not in sigma", "6.3 constant", "6.4 addition", "6.5 product", "6.6 black box",
    "6.7 pair", "6.8 projection", "6.9 generator", "6.10 sum", "6.11 access", "6.12 bracket", "6.13 let",
))
ADJOINT_ROWS = (
    ("6.14-6.16 start", ("6.14", "6.15", "6.16")),
    ("6.25 join", ("6.19", "6.25")),
    ("6.20 unused differential", ("6.20", "6.24")),
    ("6.21 input", ("6.21",)),
    ("6.22 inactive operand", ("6.22",)),
    ("6.23 constant", ("6.23",)),
    ("6.26 addition", ("6.26",)),
    ("6.27 map", ("6.27",)),
    ("6.28 binary contraction", ("6.28",)),
    ("6.29 unary contraction", ("6.29",)),
    ("6.17-6.18 gradient", ("6.17", "6.18")),
)
SIMPLIFY_ROWS = tuple((name, (name.split()[0],)) for name in (
    "S1 one-point sum", "S2 bracket", "S3 inline", "S4 dead let", "S5 unit", "S6 hoist bracket", "S7 constant",
    "S8 implied by the sum",
))


def _forward(**kw):
    from .derive_checks import check_forward

    return check_forward(**kw)


def _adjoint(**kw):
    from .derive_checks import check_adjoint

    return check_adjoint(**kw)


def _simplify(**kw):
    from .derive_checks import check_simplify

    return check_simplify(**kw)


register(CheckSpec("derive forward", FORWARD_ROWS, _forward, doc="Fig. 13, rules 6.1-6.13, Theorem 6.1"))
register(CheckSpec("derive adjoint", ADJOINT_ROWS, _adjoint, doc="Fig. 14-17, rules 6.14-6.29, Theorem 6.35"))
register(CheckSpec("derive simplify", SIMPLIFY_ROWS, _simplify, doc="derive/simplify.py, rules S1-S8"))
