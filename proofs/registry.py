"""What ``python -m proofs`` checks: one ``PassSpec`` per pass whose rules have obligations.

A spec names the rule tables it covers, how to bring a generated program to the pass's precondition
(``prepare``), how to run the pass with a trace (``run``), the postcondition recogniser (``why_not``,
returning None or a reason), and the program strategies that feed it (``sources``: label and a
Hypothesis strategy of programs, from ``tests/strategies.py`` or built on it).

Every module ``proofs/specs_*.py`` is imported and registers its specs with ``register``; the
derivatives issue adds ``proofs/specs_derive.py`` the same way, with ``CheckSpec``s: the rules of
section 6 are methods and steps of a driver, not a rewrite table, so such a spec draws and checks its own
instances and hands back one ``RuleStats`` per rule.  A rule of a registered table
(``tensorlang.rules.all_tables``) that no spec covers has no obligations, and fails the runner.
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Callable, Sequence

__all__ = ["PassSpec", "CheckSpec", "RuleStats", "register", "specs", "load_specs"]


@dataclass
class PassSpec:
    name: str
    tables: tuple
    run: Callable  # (expr, trace) -> expr
    prepare: Callable = lambda e: e  # expr -> expr at the pass's precondition
    why_not: Callable | None = None  # expr -> None | reason (the postcondition)
    sources: Sequence = field(default_factory=tuple)  # ((label, strategy of programs, weight), ...)
    doc: str = ""


@dataclass
class RuleStats:
    """The checks of one rule of a ``CheckSpec``: instances seen and checked, failures, messages."""

    name: str
    realises: tuple = ()
    seen: int = 0
    checked: int = 0
    meaning_fail: int = 0
    cost_fail: int = 0
    errors: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.checked > 0 and not self.meaning_fail and not self.cost_fail

    def fail(self, kind: str, message: str) -> None:
        if kind == "meaning":
            self.meaning_fail += 1
        else:
            self.cost_fail += 1
        self.errors.append(f"{kind}: {message}")


@dataclass
class CheckSpec:
    """Rules that are not a rewrite table of ``tensorlang.rules`` (the derivative rules of section 6):
    ``rules`` lists ``(name, realised equations)``; ``check(programs=K, per_rule=N)`` draws its own
    instances and returns ``(programs drawn, [pass-level failure messages], {name: RuleStats})``.  A
    rule with no checked instance fails, as for a ``PassSpec``."""

    name: str
    rules: tuple
    check: Callable
    doc: str = ""
    tables: tuple = ()  # no rewrite tables: nothing for the orphan check


_SPECS: dict[str, object] = {}


def register(spec):
    _SPECS[spec.name] = spec
    return spec


def specs() -> tuple:
    return tuple(_SPECS.values())


def load_specs() -> tuple:
    """Import every ``proofs.specs_*`` module (in name order) and return the registered specs."""
    import proofs

    names = sorted(m.name for m in pkgutil.iter_modules(proofs.__path__) if m.name.startswith("specs_"))
    for name in names:
        importlib.import_module(f"proofs.{name}")
    return specs()
