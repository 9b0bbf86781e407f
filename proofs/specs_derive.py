"""The derivatives' obligations (section 6): rules 6.1-6.13 (Fig. 13), 6.14-6.29 (Fig. 14-17) and the
simplification rules S1-S8 and the structure rules T1-T3, registered as ``CheckSpec``s, one row per rule of the tables ``FORWARD``,
``ADJOINT`` and ``SIMPLIFY`` of ``derive/``.  What is checked, and how, is documented in
``proofs/derive_checks.py``; it is imported only when the checks run, so that loading the specs leaves
the other passes' draws alone (Hypothesis's generation is sensitive to what the process has allocated
before it, and the normalisation rows have rules with few instances)."""
from __future__ import annotations

from tensorlang.derive.adjoint import ADJOINT
from tensorlang.derive.forward import FORWARD
from tensorlang.derive.simplify import SIMPLIFY
from tensorlang.derive.structure import STRUCTURE

from .registry import CheckSpec, register

FORWARD_ROWS = tuple((r.name, r.realises) for r in FORWARD)
ADJOINT_ROWS = tuple((r.name, r.realises) for r in ADJOINT)
SIMPLIFY_ROWS = tuple((r.name, r.realises) for r in SIMPLIFY)
STRUCTURE_ROWS = tuple((r.name, r.realises) for r in STRUCTURE)


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
def _structure(**kw):
    from .derive_checks import check_structure

    return check_structure(**kw)


register(CheckSpec("derive simplify", SIMPLIFY_ROWS, _simplify, doc="derive/simplify.py, rules S1-S8"))
register(CheckSpec("derive structure", STRUCTURE_ROWS, _structure, doc="derive/structure.py, rules T1-T3"))
