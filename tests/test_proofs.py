"""The proof runner itself: it passes on the normalisation rules, and it fails on a wrong rule, on a
rule that never fires, and on a registered table that no spec covers."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from proofs.registry import PassSpec, load_specs  # noqa: E402
from proofs.runner import run  # noqa: E402
from tensorlang.nodes import Access, Affine, Gen, Guard  # noqa: E402
from tensorlang.rules import RuleTable, _TABLES, register_table, rule, run_pass  # noqa: E402
from tensorlang.substitute import substitute_index  # noqa: E402

try:
    from strategies import programs
except ImportError:
    from tests.strategies import programs


def test_the_normalisation_rules_pass(capsys):
    assert run(programs=3, per_rule=4, symbolic=1, only=["gen_pushout"]) == 0
    out = capsys.readouterr().out
    assert "5.21 access gen" in out and "0 failure(s)" in out


@rule("5.21 wrong access gen", Access)
def _wrong(e, ctx):
    """``(gen(i) e)[a] -> [i -> 0] e``: wrong on purpose."""
    if isinstance(e.tensor, Gen):
        return substitute_index(e.tensor.body, {e.tensor.var: Affine.const_(0)})
    return None


@rule("9.99 never fires", Guard)
def _never(e, ctx):
    """Matches nothing."""
    return None


def test_a_wrong_rule_and_a_rule_without_instances_fail(capsys):
    load_specs()
    table = RuleTable("broken", [_wrong, _never])
    spec = PassSpec("broken", (table,), lambda e, t: run_pass(e, (table,), t),
                    prepare=lambda e: e, sources=(("programs", programs(max_depth=3), 1),))
    failures = run(programs=12, per_rule=6, symbolic=0, specs=[spec])
    out = capsys.readouterr().out
    assert failures >= 2
    assert "5.21 wrong access gen" in out and "FAIL" in out
    assert "(no instances)" in out


def test_a_table_without_obligations_fails(capsys):
    table = register_table(RuleTable("orphan table", [_never]))
    try:
        failures = run(programs=1, per_rule=1, symbolic=0, only=["gen_pushout"])
    finally:
        del _TABLES[table.name]
    out = capsys.readouterr().out
    assert failures >= 1 and "has no obligations" in out


def test_the_derivative_rules_pass(capsys):
    """The section 6 specs: every rule 6.1-6.29 and S1-S8 has instances and passes (few programs)."""
    failures = run(programs=3, per_rule=3, symbolic=0,
                   only=["derive forward", "derive adjoint", "derive simplify"])
    out = capsys.readouterr().out
    assert "6.5 product" in out and "6.28 binary contraction" in out and "S1 one-point sum" in out
    for name in ("6.1", "6.13", "6.14", "6.17", "6.19", "6.22", "6.23", "6.25", "6.29"):
        assert f"{name}" in out
    assert failures == 0, out


def test_a_wrong_adjoint_rule_is_caught(monkeypatch):
    """Doubling the black boxes' vector-Jacobian products breaks 6.27, and the state check blames 6.27."""
    import tensorlang.derive.adjoint as adjoint
    from proofs.derive_checks import check_adjoint
    from tensorlang.nodes import Const, Mul

    right = adjoint.vjp
    monkeypatch.setattr(adjoint, "vjp", lambda fn, k, args, cot: Mul(Const(2), right(fn, k, args, cot)))
    _, _, stats = check_adjoint(programs=3, per_rule=3)
    assert stats["6.27 map"].meaning_fail > 0
    assert stats["6.29 unary contraction"].meaning_fail == 0 and stats["6.25 join"].meaning_fail == 0


def test_a_wrong_forward_rule_is_caught(monkeypatch):
    """Leibniz without its second term (6.5) fails finite differences."""
    import tensorlang.derive.forward as fwd
    from proofs.derive_checks import check_forward

    wrong = fwd.rule("6.5 product", fwd.Mul)(lambda e, at: (
        None if at.d(e.left) is None else fwd.Mul(at.d(e.left), e.right)))
    monkeypatch.setattr(fwd, "FORWARD", fwd.RuleTable("forward", [
        wrong if r.name == "6.5 product" else r for r in fwd.FORWARD]))
    _, _, stats = check_forward(programs=4, per_rule=20)
    assert stats["6.5 product"].meaning_fail > 0


def test_a_simplification_that_raises_the_cost_is_caught(monkeypatch):
    """An S7 that leaves ``c + 0 * exp(1)`` for ``c`` keeps the meaning and raises the cost."""
    from proofs.derive_checks import check_simplify
    from tensorlang.nodes import Add, Call, Const, Mul
    from tensorlang.rules import Scope

    original = Scope.record

    def record(self, rule, before, after):
        if rule.name == "S7 constant":
            after = Add(after, Mul(Const(0), Call("exp", (Const(1),))))
        return original(self, rule, before, after)

    monkeypatch.setattr(Scope, "record", record)
    _, _, stats = check_simplify(programs=2, per_rule=5)
    assert stats["S7 constant"].cost_fail > 0


def test_the_structure_rules_pass_and_a_wrong_support_is_caught(monkeypatch, capsys):
    """T1-T3 have instances and pass; a support that leaves out points where the value is nonzero (the
    first loop's last index) makes T1's brackets change the meaning, and the check says so."""
    failures = run(programs=2, per_rule=3, symbolic=0, only=["derive structure"])
    out = capsys.readouterr().out
    assert "T1 support bracket" in out and "T3 compress" in out and failures == 0, out

    import tensorlang.derive.structure as structure
    from tensorlang.nodes import compare, conj

    right = structure.support

    def too_small(e, dims, known):
        s = right(e, dims, known)
        return conj(s, compare("<", dims[0][0], dims[0][1] - 1)) if dims and s is not structure.FALSE else s

    monkeypatch.setattr(structure, "support", too_small)
    from proofs.derive_checks import check_structure

    _, problems, stats = check_structure(programs=2, per_rule=5)
    assert stats["T1 support bracket"].meaning_fail > 0
