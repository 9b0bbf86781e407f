"""Normalisation (section 5 of the paper): four passes, each one driver over tables of named rules.

``let_lift`` (Fig. 7) -> ``pair_elim`` (Fig. 8) -> ``gen_pushout`` (Fig. 9) -> ``tensor_ssa`` (Fig. 10-12);
``to_ssa`` runs the four in order.  Every pass takes an ``Expr`` and returns one with the same meaning
and a cost no higher (Fig. 6); ``normal_forms`` recognises each pass's postcondition.  The rule tables
(``LET_LIFT``, ``PAIR_ELIM``, ...) are data: ``proofs/`` checks each rule's obligations.
"""
from tensorlang.declarations import keeps_declarations
from tensorlang.nodes import Var, build_lets, let_chain
from tensorlang.rules import Trace, run_pass
from tensorlang.traversal import value_inputs

from .gen_pushout import GEN_PUSHOUT, gen_pushout
from .let_lift import LET_LIFT, let_lift
from .normal_forms import (
    is_gen_pushed_out, is_let_lifted, is_pair_eliminated, is_tensor_ssa, why_not_gen_pushed_out,
    why_not_let_lifted, why_not_pair_eliminated, why_not_tensor_ssa,
)
from .pair_elim import PAIR_ELIM, PAIR_OUTPUT, pair_elim
from .tensor_ssa import SSA, SSA_FINISH, SSA_NAMES, SSA_OUTPUT, tensor_ssa

#: The passes in order, each a tuple of rule tables run one after the other.
PASSES = {
    "let_lift": (LET_LIFT,),
    "pair_elim": (PAIR_OUTPUT, PAIR_ELIM),
    "gen_pushout": (GEN_PUSHOUT,),
    "tensor_ssa": (SSA_OUTPUT, SSA, SSA_FINISH, SSA_NAMES),
}


@keeps_declarations
def to_ssa(expr, trace=None):
    """``tl.to_ssa``: the four normalisation passes in order; the program in Tensor SSA form (Fig. 10).

    The result reads the same inputs as ``expr``: an input that a pass made unused (``(x, y).0 -> x``
    drops y) keeps an input statement ``let X = y``, so ``tl.evaluate(tl.to_ssa(e), **inputs)`` takes
    the inputs ``e`` takes."""
    original = value_inputs(expr)
    for tables in PASSES.values():
        expr = run_pass(expr, tables, trace)
    kept = set(value_inputs(expr))
    missing = [v for v in original if v not in kept]
    if missing:
        bindings, out = let_chain(expr)
        extra = [(Var(f"%{k}", v.type), v) for k, v in enumerate(missing)]
        expr = run_pass(build_lets(extra + bindings, out), (SSA_NAMES,), trace)
    return expr


__all__ = [
    "let_lift", "pair_elim", "gen_pushout", "tensor_ssa", "to_ssa", "PASSES", "Trace",
    "LET_LIFT", "PAIR_OUTPUT", "PAIR_ELIM", "GEN_PUSHOUT", "SSA_OUTPUT", "SSA", "SSA_FINISH", "SSA_NAMES",
    "is_let_lifted", "is_pair_eliminated", "is_gen_pushed_out", "is_tensor_ssa",
    "why_not_let_lifted", "why_not_pair_eliminated", "why_not_gen_pushed_out", "why_not_tensor_ssa",
]
