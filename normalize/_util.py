"""Small structural helpers shared by the four passes (no rules here); the general ones (``gens``,
``strip_guards``, ``let_chain``, ``has_pair``, ``value_inputs``, ...) live in the core
(``tensorlang.nodes``, ``tensorlang.traversal``)."""
from __future__ import annotations

from tensorlang.nodes import Access, Expr, Proj, Var


def is_path(e: Expr) -> bool:
    """A variable under projections and accesses only (``x``, ``x.0``, ``x[i].1[j]``): cost 0."""
    return path_base(e) is not None


def path_base(e: Expr) -> Var | None:
    while isinstance(e, (Proj, Access)):
        e = e.pair if isinstance(e, Proj) else e.tensor
    return e if isinstance(e, Var) else None
