"""Gen pushout (section 5.3, Fig. 9, rules 5.21-5.24): generators only at the top of right-hand sides.

Precondition: let-lifted and pair-eliminated.  Postcondition (``normal_forms.is_gen_pushed_out``)::

    Le  ::= let x = Ge in Le | Oe
    Ge  ::= gen(i:n) Ge | e
    Oe  ::= (Oe, Oe) | GOe          GOe ::= gen(i:n) GOe | e
    Ae  ::= Ae[a] | x               Ie ::= Ie[a] | PLe      PLe ::= PLe.0 | PLe.1 | x

where e has no generator and accesses only variables and inputs (Ae, Ie); brackets are never stacked.
5.21 may lower the cost (an access of a generator no longer charges the whole generator, 4.31); the
others keep it.
"""
from __future__ import annotations

from tensorlang.nodes import Access, Gen, Guard, conj
from tensorlang.rules import RuleTable, register_table, rule, run_pass
from tensorlang.substitute import substitute_index

__all__ = ["GEN_PUSHOUT", "gen_pushout"]


@rule("5.21 access gen", Access)
def access_gen(e, ctx):
    """``(gen(i:n) e)[a]  ->  [i -> a] e``.  Cost: one point of the generator instead of all n."""
    if isinstance(e.tensor, Gen):
        g = e.tensor
        return substitute_index(g.body, {g.var: e.index})
    return None


@rule("5.22 access guard", Access)
def access_guard(e, ctx):
    """``([p] * e)[a]  ->  [p] * e[a]``."""
    if isinstance(e.tensor, Guard):
        g = e.tensor
        return Guard(g.pred, Access(g.body, e.index))
    return None


@rule("5.23 guard gen", Guard)
def guard_gen(e, ctx):
    """``[p] * gen(i:n) e  ->  gen(i:n) [p] * e`` (p is outside the generator, so it cannot mention i)."""
    if isinstance(e.body, Gen):
        g = e.body
        return Gen(g.var, g.size, Guard(e.pred, g.body))
    return None


@rule("5.24 guard guard", Guard)
def guard_guard(e, ctx):
    """``[p0] * [p1] * e  ->  [p0 and p1] * e``."""
    if isinstance(e.body, Guard):
        return Guard(conj(e.pred, e.body.pred), e.body.body)
    return None


GEN_PUSHOUT = register_table(RuleTable(
    "gen-pushout", [access_gen, access_guard, guard_gen, guard_guard],
    doc="Fig. 9: generators to the top of every right-hand side.",
))

PASS = (GEN_PUSHOUT,)


def gen_pushout(expr, trace=None):
    """``tl.normalize.gen_pushout``: every generator at the top of its right-hand side (Fig. 9).  Expects
    a let-lifted, pair-eliminated program."""
    return run_pass(expr, PASS, trace)
