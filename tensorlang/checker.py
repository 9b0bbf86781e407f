"""Well-formedness beyond types: the static bounds proof (every access in range), via the isl view."""
from __future__ import annotations


def check(expr):
    """Check ``expr`` and return it; raises ``BoundsError`` with a concrete offending point."""
    return expr
