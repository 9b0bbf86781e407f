"""Check every rule's obligations on generated instances and print the table.

For each registered pass (``proofs/registry.py``): programs are drawn with Hypothesis from the spec's
sources (``tests/strategies.py``), brought to the pass's precondition and normalised with a trace that
keeps the whole program before and after every rule application.  Each recorded application is an
instance of its rule; up to ``per_rule`` instances per rule (at most two from one program) are checked:

* meaning: the whole program before and after the one application evaluate equal (``tl.evaluate``,
  relative tolerance 1e-6) on two random input sets;
* cost: the exact Fig. 6 cost (``tl.cost``) after is at most the cost before, at both input sets' sizes;
* symbolic (polynomial rules, on programs without black boxes): both programs evaluated with a SymPy
  symbol for every input entry, at small sizes, expand to the same polynomials;

and the pass's result must be in its normal form (the recogniser of ``normalize/normal_forms.py``).
A rule with no checked instance, or in a registered table no spec covers, fails.

A ``CheckSpec`` (the derivative rules of section 6, ``proofs/specs_derive.py``) draws and checks its own
instances and hands back one row per rule; those specs run after the rewrite passes, and their rows are
printed in the same table (no symbolic column).

Every draw is derandomised, and Hypothesis draws no literal constants from the source of the modules
loaded (``tests.strategies.without_local_constants``): the instances, and so the table, are the same in
every run, whatever the hash seed, whatever else the process has imported, and whatever source was
edited outside the strategies and the specs.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import tensorlang as tl
from tensorlang.rules import Trace, all_tables

from .registry import CheckSpec, RuleStats, load_specs
from .symbolic import is_polynomial, same_polynomials, symbolic_inputs, symbolic_value

__all__ = ["run", "Stats"]


@dataclass
class Stats(RuleStats):
    """A rewrite rule's checks: those of ``RuleStats``, and the symbolic ones a polynomial rule needs."""

    rule: object = None
    spec: str = ""
    symbolic: int = 0
    symbolic_fail: int = 0

    @property
    def ok(self) -> bool:
        need_sym = self.rule.polynomial
        return super().ok and not self.symbolic_fail and (self.symbolic > 0 or not need_sym)


def _print_row(name: str, s: RuleStats, sym: str, realises) -> bool:
    """One row of the table; whether the rule failed (its first messages are printed under it)."""
    meaning = "ok" if s.checked and not s.meaning_fail else ("FAIL" if s.meaning_fail else "-")
    cost = "ok" if s.checked and not s.cost_fail else ("FAIL" if s.cost_fail else "-")
    mark = "" if s.ok else "   <-- FAIL" + (" (no instances)" if not s.checked else "")
    print(f"{name:44s} {s.seen:9d} {s.checked:8d} {meaning:>8s} {cost:>6s} {sym:>9s}  {', '.join(realises)}{mark}")
    for msg in ([] if s.ok else s.errors[:2]):
        print(f"    {msg}")
    return not s.ok


def _draw(strategy, count: int, seed: int) -> list:
    from tests.strategies import inputs_for

    out: list = []
    both = strategy.flatmap(lambda e: st.tuples(st.just(e), inputs_for(e), inputs_for(e, max_size=3)))

    @settings(max_examples=count, database=None, derandomize=True, deadline=None,
              suppress_health_check=list(HealthCheck), phases=[Phase.generate])
    @given(both)
    def collect(item):
        out.append(item)

    collect()
    return out[:count]


def _only(expr, inputs):
    names = set(expr.free_vars) | set(expr.sizes)
    return {k: v for k, v in inputs.items() if k in names}


def _close(a, b) -> bool:
    if isinstance(a, tuple) or isinstance(b, tuple):
        return isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) and all(
            _close(x, y) for x, y in zip(a, b))
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-6, atol=1e-8, equal_nan=True))


class _Checker:
    def __init__(self):
        self.cost_cache: dict = {}
        self.value_cache: dict = {}

    def value(self, expr, inputs, k):
        key = (id(expr), k)
        if key not in self.value_cache:
            self.value_cache[key] = (tl.evaluate(expr, **_only(expr, inputs)), expr)
        return self.value_cache[key][0]

    def cost(self, expr, inputs, k):
        key = (id(expr), k)
        if key not in self.cost_cache:
            self.cost_cache[key] = (tl.cost(expr, **_only(expr, inputs)), expr)
        return self.cost_cache[key][0]

    def meaning(self, before, after, input_sets) -> str | None:
        for k, inputs in enumerate(input_sets):
            a, b = self.value(before, inputs, k), self.value(after, inputs, k)
            if not _close(a, b):
                return f"values differ: {a!r} vs {b!r}"
        return None

    def cost_ok(self, before, after, input_sets) -> str | None:
        for k, inputs in enumerate(input_sets):
            a, b = self.cost(before, inputs, k), self.cost(after, inputs, k)
            if b > a:
                return f"cost rises from {a} to {b} at {({n: inputs[n] for n in before.sizes})}"
        return None


def _symbolic(before, after, seed: int) -> str | None:
    sizes = {name: 2 for name in set(before.sizes) | set(after.sizes)}
    rng = np.random.default_rng(seed)
    from tensorlang.nodes import IndexMapType, RelType
    from tensorlang.traversal import free_vars

    relations = {}
    for v in free_vars(before):
        if isinstance(v.type, RelType):
            shape = tuple(int(s.const + sum(c * sizes[w.name] for w, c in s.terms)) for s in v.type.sizes)
            if isinstance(v.type, IndexMapType):  # one entry per row, as a mask
                relations[v.name] = np.eye(shape[1], dtype=bool)[rng.integers(0, shape[1], shape[0])]
            else:
                relations[v.name] = rng.random(shape) < 0.5
    inputs = symbolic_inputs(before, sizes, relations)
    a = symbolic_value(before, sizes, inputs)
    b = symbolic_value(after, sizes, {v: inputs[v] for v in free_vars(after) if v in inputs})
    return None if same_polynomials(a, b) else "the expanded polynomials differ"


def _show(e, limit=400) -> str:
    from tensorlang.printer import expr_str

    text = expr_str(e)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def run(programs: int = 10, per_rule: int = 20, symbolic: int = 2, only=None, specs=None) -> int:
    """Check everything and print the table; the number of failures.  ``only``: names of the passes to
    check; ``specs``: the specs to check instead of the registered ones."""
    from tests.strategies import without_local_constants

    without_local_constants()
    started = time.time()
    registered = load_specs()
    chosen = tuple(specs) if specs is not None else registered
    specs = tuple(s for s in chosen if not only or s.name in only)
    # rewrite passes first, then the derivative checks (their rows follow the passes' in the table)
    specs = tuple(sorted(specs, key=lambda s: isinstance(s, CheckSpec)))
    covering = {t.name for s in registered + chosen for t in s.tables}  # tables with obligations
    stats: dict[str, Stats] = {}
    covered: set[str] = set()
    pass_rows = []
    check_rows = []
    for spec in specs:
        if isinstance(spec, CheckSpec):
            t0 = time.time()
            try:
                count, pass_fail, rule_stats = spec.check(programs=programs, per_rule=per_rule)
            except Exception as exc:  # noqa: BLE001 - reported as a failure of the spec
                count, pass_fail, rule_stats = 0, [f"raised {type(exc).__name__}: {exc}"], {}
            check_rows.append((spec, count, pass_fail, rule_stats, time.time() - t0))
            continue
        for table in spec.tables:
            covered.add(table.name)
            for r in table.rules:
                stats.setdefault(r.name, Stats(r.name, r.realises, rule=r, spec=spec.name))
        items = []
        for k, (label, strategy, weight) in enumerate(spec.sources):
            items += _draw(strategy, max(1, programs * weight), seed=k)
        normal_ok = normal_total = 0
        pass_fail: list = []
        for n, (expr, in1, in2) in enumerate(items):
            input_sets = (in1, in2)
            checker = _Checker()  # values and costs are cached per program object, for these inputs only
            try:
                pre = spec.prepare(expr)
                trace = Trace(programs=True)
                out = spec.run(pre, trace)
            except Exception as exc:  # noqa: BLE001 - reported as a failure of the pass
                pass_fail.append(f"raised {type(exc).__name__}: {exc} on {_show(expr)}")
                continue
            normal_total += 1
            reason = spec.why_not(out) if spec.why_not else None
            if reason is None:
                normal_ok += 1
            else:
                pass_fail.append(f"not in normal form ({reason}): {_show(expr)}")
            per_program: dict[str, int] = {}
            for step in trace:
                s = stats.get(step.rule.name)
                if s is None:
                    continue
                s.seen += 1
                before, after = step.program_before, step.program_after
                try:
                    if (step.rule.polynomial and s.symbolic < symbolic and is_polynomial(before)
                            and is_polynomial(after) and len(str(before)) < 600):
                        s.symbolic += 1
                        why = _symbolic(before, after, seed=n)
                        if why:
                            s.symbolic_fail += 1
                            s.errors.append(f"symbolic: {why}\n      before: {_show(before)}\n      after:  {_show(after)}")
                    if s.checked >= per_rule or per_program.get(step.rule.name, 0) >= 2:
                        continue
                    per_program[step.rule.name] = per_program.get(step.rule.name, 0) + 1
                    s.checked += 1
                    why = checker.meaning(before, after, input_sets)
                    if why:
                        s.meaning_fail += 1
                        s.errors.append(f"meaning: {why}\n      before: {_show(before)}\n      after:  {_show(after)}")
                    why = checker.cost_ok(before, after, input_sets)
                    if why:
                        s.cost_fail += 1
                        s.errors.append(f"cost: {why}\n      before: {_show(before)}\n      after:  {_show(after)}")
                except Exception as exc:  # noqa: BLE001
                    s.meaning_fail += 1
                    s.errors.append(f"raised {type(exc).__name__}: {exc}\n      before: {_show(before)}")
        pass_rows.append((spec, len(items), normal_ok, normal_total, pass_fail))

    # rules nobody checks
    orphans = []
    for table in all_tables():
        if table.name not in covering:
            for r in table.rules:
                orphans.append((table.name, r))

    failures = 0
    line = "-" * 100
    print(f"{'rule':44s} {'instances':>9s} {'checked':>8s} {'meaning':>8s} {'cost':>6s} {'symbolic':>9s}  realises")
    for spec, count, ok, total, pass_fail in pass_rows:
        print(line)
        nf = f"{ok}/{total}"
        flag = "ok" if ok == total and not pass_fail else "FAIL"
        print(f"pass {spec.name} ({spec.doc}): {count} programs, normal form {nf} {flag}")
        if flag != "ok":
            failures += 1
            for msg in pass_fail[:3]:
                print(f"    {msg}")
        shown = [r for table in spec.tables for r in table.rules if stats[r.name].spec == spec.name]
        if not shown:
            print("    (its rules' instances are counted in the rows above)")
        for table in spec.tables:
            for r in table.rules:
                s = stats[r.name]
                if s.spec != spec.name:
                    continue
                if r.polynomial:
                    sym = f"{s.symbolic} ok" if s.symbolic and not s.symbolic_fail else (
                        "FAIL" if s.symbolic_fail else "none")
                else:
                    sym = "n/a"
                failures += _print_row(r.name, s, sym, r.realises)
    for spec, count, pass_fail, rule_stats, seconds in check_rows:
        print(line)
        flag = "ok" if not pass_fail else "FAIL"
        print(f"{spec.name} ({spec.doc}): {count} programs, {seconds:.1f} s {flag}")
        if pass_fail:
            failures += 1
            for msg in pass_fail[:3]:
                print(f"    {msg}")
        for name, realises in spec.rules:
            s = rule_stats.get(name) or RuleStats(name, realises)
            stats[f"{spec.name}: {name}"] = s
            failures += _print_row(name, s, "n/a", realises)
    for table_name, r in orphans:
        print(f"{r.name:44s} (table {table_name}) has no obligations: no proofs spec covers it   <-- FAIL")
        failures += 1
    print(line)
    total_rules = len(stats)
    print(f"{total_rules} rules, {sum(s.checked for s in stats.values())} instances checked, "
          f"{failures} failure(s), {time.time() - started:.1f} s")
    return failures
