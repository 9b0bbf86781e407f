"""Recognisers of the four passes' postcondition grammars (sections 5.1-5.4).

``is_let_lifted``, ``is_pair_eliminated``, ``is_gen_pushed_out`` and ``is_tensor_ssa`` answer yes or no;
the ``why_not_*`` twins return ``None`` or a sentence naming the first offending subterm.
"""
from __future__ import annotations

from tensorlang.declarations import body_of
from tensorlang.nodes import Access, Gen, Guard, Let, Pair, Proj, RelType, has_pair, let_chain, strip_gens, walk
from tensorlang.traversal import value_inputs

from ._util import is_path, path_base
from .statements import classify

__all__ = [
    "is_let_lifted", "is_pair_eliminated", "is_gen_pushed_out", "is_tensor_ssa", "why_not_let_lifted",
    "why_not_pair_eliminated", "why_not_gen_pushed_out", "why_not_tensor_ssa",
]


def _show(e) -> str:
    try:
        from tensorlang.printer import expr_str

        text = expr_str(e)
    except Exception:  # noqa: BLE001 - a message must not fail
        text = type(e).__name__
    return text if len(text) < 200 else text[:197] + "..."


def _statements(e, previous, statement_reason, output_reason) -> str | None:
    """Why the program ``e`` is not in a pass's normal form: it is not in the ``previous`` one, or a
    statement ``x = value`` is not as it must be (``statement_reason(x, value, inputs)``), or the output
    (``output_reason(out, inputs)``); None when it is."""
    e = body_of(e)  # the program's expression (declarations are not statements)
    reason = previous(e)
    if reason:
        return reason
    inputs = frozenset(value_inputs(e))
    bindings, out = let_chain(e)
    for var, value in bindings:
        reason = statement_reason(var, value, inputs)
        if reason:
            return reason
    return output_reason(out, inputs)


# -- 5.1 --------------------------------------------------------------------------------------------


def why_not_let_lifted(e) -> str | None:
    """``Le ::= e | let x = e in Le`` with e let-free."""
    e = body_of(e)  # the program's expression (declarations are not statements)
    bindings, out = let_chain(e)
    for _, value in bindings:
        for n in walk(value):
            if isinstance(n, Let):
                return f"a let inside a right-hand side: {_show(n)}"
    for n in walk(out):
        if isinstance(n, Let):
            return f"a let inside the output: {_show(n)}"
    return None


def is_let_lifted(e) -> bool:
    return why_not_let_lifted(e) is None


# -- 5.2 --------------------------------------------------------------------------------------------


def _input_path(n, inputs) -> bool:
    return is_path(n) and path_base(n) in inputs


def _pair_free_e(e, inputs) -> str | None:
    """No let, no pair construction, projections only inside input paths."""
    stack = [e]
    seen = set()
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, Let):
            return f"a let: {_show(n)}"
        if isinstance(n, Pair):
            return f"a pair built inside a value: {_show(n)}"
        if isinstance(n, Proj):
            if not _input_path(n, inputs):
                return f"a projection of an intermediate: {_show(n)}"
            continue
        if isinstance(n, Access) and _input_path(n, inputs):
            continue
        from tensorlang.rules import expr_children

        stack.extend(c for _, c in expr_children(n))
    return None


def _pair_out(o, inputs) -> str | None:
    if isinstance(o, Pair):
        return _pair_out(o.first, inputs) or _pair_out(o.second, inputs)
    if has_pair(o.type) and isinstance(o, (Gen, Guard, Access)) and not _input_path(o, inputs):
        return _pair_out(o.body if isinstance(o, (Gen, Guard)) else o.tensor, inputs)
    return _pair_free_e(o, inputs)


def _pair_free_statement(var, value, inputs) -> str | None:
    if has_pair(var.type):
        return f"the intermediate {var.name} : {var.type} has a pair type"
    reason = _pair_free_e(value, inputs)
    return f"in {var.name}: {reason}" if reason else None


def why_not_pair_eliminated(e) -> str | None:
    """Let-lifted; every let-bound variable of a type without pairs; pairs built only at the output;
    projections only of inputs."""
    return _statements(e, why_not_let_lifted, _pair_free_statement, _pair_out)


def is_pair_eliminated(e) -> bool:
    return why_not_pair_eliminated(e) is None


# -- 5.3 --------------------------------------------------------------------------------------------


def _pushed_e(e, inputs) -> str | None:
    """No generator; accesses only of variables and inputs (Ae, Ie); no bracket right on a bracket."""
    for n in walk(e):
        if isinstance(n, Gen):
            return f"a generator inside a right-hand side: {_show(n)}"
        if isinstance(n, Access) and not is_path(n):
            return f"an access of a computed tensor: {_show(n)}"
        if isinstance(n, Guard) and isinstance(n.body, Guard):
            return f"stacked brackets: {_show(n)}"
    return None


def _pushed_out(o, inputs) -> str | None:
    if isinstance(o, Pair):
        return _pushed_out(o.first, inputs) or _pushed_out(o.second, inputs)
    if isinstance(o, Gen):
        return _pushed_out(o.body, inputs)
    return _pushed_e(o, inputs)


def _pushed_statement(var, value, inputs) -> str | None:
    reason = _pushed_e(strip_gens(value)[1], inputs)
    return f"in {var.name}: {reason}" if reason else None


def why_not_gen_pushed_out(e) -> str | None:
    """Pair-eliminated, and every right-hand side ``Ge ::= gen(i) Ge | e`` with e as in ``_pushed_e``."""
    return _statements(e, why_not_pair_eliminated, _pushed_statement, _pushed_out)


def is_gen_pushed_out(e) -> bool:
    return why_not_gen_pushed_out(e) is None


# -- 5.4 --------------------------------------------------------------------------------------------


def why_not_tensor_ssa(e) -> str | None:
    """Fig. 10: every right-hand side one of the SSA forms over earlier statements, no copies, no two
    equal right-hand sides, the output variables (or their pairs)."""
    e = body_of(e)  # the program's expression (declarations are not statements)
    from tensorlang.alpha import canonical
    from tensorlang.traversal import free_vars

    from .tensor_ssa import copy_of, output_ok

    inputs = frozenset(value_inputs(e))
    bindings, out = let_chain(e)
    bound: set = set()
    rhs: dict = {}
    for var, value in bindings:
        if var in bound:
            return f"{var.name} is bound twice"
        if classify(var, value, inputs) is None:
            return f"{var.name} = {_show(value)} is not one of the SSA forms"
        if copy_of(value, inputs) is not None:
            return f"{var.name} = {_show(value)} is a copy (fix-up 1)"
        for v in free_vars(value):
            if not isinstance(v.type, RelType) and v not in inputs and v not in bound:
                return f"{var.name} reads {v.name}, which is not bound before it"
        key = id(canonical(value))
        if key in rhs:
            return f"{var.name} and {rhs[key][0]} have the same right-hand side"
        rhs[key] = (var.name, value)
        bound.add(var)
    if not output_ok(out, inputs):
        return f"the output {_show(out)} is not a variable or a tuple of variables"
    return None


def is_tensor_ssa(e) -> bool:
    return why_not_tensor_ssa(e) is None
