"""Rules are data: named rewrite rules, tables of them, and one deterministic driver.

The paper states each normalisation pass (and each derivative) as a table of rewrite rules named by
equation numbers; the code reads the same way (DESIGN.md, "Rules are data").

* A ``Rule`` is a named object: ``Rule("5.6 let-lift gen", fn, kinds=(Gen,), doc=...)``.  Its left side
  is a small matching function ``fn(node, ctx)`` that returns ``None`` where the rule does not apply
  and the rewritten node where it does.  ``kinds`` lists the node classes it can match (for dispatch),
  ``root`` marks a rule that only applies to a whole program (the SSA fix-ups, for instance).
* A ``RuleTable`` is an ordered tuple of rules: one phase of a pass.  A pass is a tuple of tables run
  one after the other, each to its fixed point.
* ``rewrite(expr, table)`` is the one driver.  Its strategy is *leftmost-outermost*: at every step it
  applies the first rule (in table order) that matches at the first position (in pre-order, children
  left to right) where any rule matches.  So the result is a function of the program alone (no
  iteration over sets or dicts of nodes, no hash order).  Outermost-first matters for the cost model:
  a rule that sees a guarded operand of ``+`` or the guards of a ``sum`` chain fires before the rules
  inside them could hide those guards (see ``normalize/let_lift.py``).
* ``applications(expr, table)`` lists every ``(rule, position)`` where a rule matches in a whole
  program and ``apply_once(expr, rule, position)`` applies one of them, so a proof can check one rule
  application at a time; ``rewrite(..., trace=Trace())`` records every step with the whole program
  before and after it.
* ``ScopedDriver(table).run(expr)`` is the driver for rules that need the loops and brackets around a
  node (a ``Scope``): one top-down pass, the first applicable rule giving each node's result.

A position is a tuple of child slots from the root (see ``expr_children``).  Rules rewrite expressions
only: predicates, affine indices and types are fields, not positions.

Rule functions get a ``RewriteContext``: the whole program being rewritten (``ctx.root``), fresh
names that clash with nothing in it (``ctx.fresh_var``), and a dictionary for a pass's own caches.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

from .declarations import keeps_declarations
from .nodes import TRUE, Affine, Expr, Gen, Let, Max, Node, Sum, Type, Var, conj
from .substitute import freshen, rebuild

__all__ = [
    "Rule", "RuleTable", "RewriteContext", "Step", "Trace", "rewrite", "run_pass", "applications",
    "apply_once", "expr_children", "replace_child", "subterm", "replace_at", "all_tables",
    "register_table", "Scope", "ScopedDriver",
]


# --------------------------------------------------------------------------------------------------
# rules and tables


@dataclass(frozen=True, eq=False)
class Rule:
    """A named rewrite rule.

    ``name`` starts with the paper's equation number (``"5.6 let-lift gen"``); ``fn(node, ctx)`` returns
    the rewritten node or ``None``; ``kinds`` are the node classes it matches (empty: any expression; for
    a transposition rule of the adjoint, the statement classes it transposes, ``RuleTable.rules_for``);
    ``root``: applies to the whole program only; ``equations``: the paper's equations this rule realises
    (default: the number in its name); ``polynomial``: both sides are polynomials of the inputs whenever
    the program is (so ``proofs/`` also checks it symbolically with SymPy); ``doc``: the rule in the
    paper's notation and why it preserves meaning and cost.
    """

    name: str
    fn: Callable[[Expr, "RewriteContext"], Expr | None]
    kinds: tuple = ()
    doc: str = ""
    root: bool = False
    equations: tuple[str, ...] = ()
    polynomial: bool = True

    @property
    def number(self) -> str:
        return self.name.split()[0]

    @property
    def realises(self) -> tuple[str, ...]:
        return self.equations or (self.number,)

    def match(self, node: Expr, ctx: "RewriteContext") -> Expr | None:
        if self.kinds and not isinstance(node, self.kinds):
            return None
        out = self.fn(node, ctx)
        return None if out is None or out is node else out

    def __repr__(self) -> str:
        return f"<Rule {self.name}>"


def rule(name: str, kinds=(), *, root: bool = False, equations=(), polynomial: bool = True):
    """Decorator: ``@rule("5.1 let-lift add", Add)`` turns a matching function into a ``Rule`` whose
    doc is the function's docstring."""
    if not isinstance(kinds, tuple):
        kinds = (kinds,)

    def wrap(fn):
        return Rule(name, fn, kinds, (fn.__doc__ or "").strip(), root, tuple(equations), polynomial)

    return wrap


class RuleTable:
    """An ordered tuple of rules: one phase of a pass, run to its fixed point by ``rewrite``.

    ``local=True`` declares that a rewrite never creates a redex at an ancestor of the rewritten
    position (true of the Tensor SSA statement rules); the driver then goes on from the rewritten
    position instead of the root, which keeps long statement chains linear.
    """

    def __init__(self, name: str, rules: Sequence[Rule], *, doc: str = "", local: bool = False):
        self.name = name
        self.rules = tuple(rules)
        self.doc = doc
        self.local = local
        names = [r.name for r in self.rules]
        if len(set(names)) != len(names):
            raise ValueError(f"rule table {name} names a rule twice")
        self._dispatch: dict[type, tuple[Rule, ...]] = {}
        self.root_rules = tuple(r for r in self.rules if r.root)
        self.node_rules = tuple(r for r in self.rules if not r.root)

    def rules_for(self, node) -> tuple[Rule, ...]:
        cls = type(node)
        found = self._dispatch.get(cls)
        if found is None:
            found = tuple(r for r in self.node_rules if not r.kinds or issubclass(cls, r.kinds))
            self._dispatch[cls] = found
        return found

    def only(self, *numbers: str) -> "RuleTable":
        """The sub-table of the rules whose numbers (or names) are given, in table order."""
        keep = [r for r in self.rules if r.number in numbers or r.name in numbers]
        return RuleTable(f"{self.name}[{','.join(numbers)}]", keep, doc=self.doc, local=self.local)

    def without(self, *numbers: str) -> "RuleTable":
        keep = [r for r in self.rules if r.number not in numbers and r.name not in numbers]
        return RuleTable(f"{self.name}[-{','.join(numbers)}]", keep, doc=self.doc, local=self.local)

    def __iter__(self) -> Iterator[Rule]:
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    def __getitem__(self, name: str) -> Rule:
        for r in self.rules:
            if r.name == name or r.number == name:
                return r
        raise KeyError(name)

    def __repr__(self) -> str:
        return f"<RuleTable {self.name}: {', '.join(r.name for r in self.rules)}>"


_TABLES: dict[str, RuleTable] = {}


def register_table(table: RuleTable) -> RuleTable:
    """Make a table known to ``proofs/`` (``all_tables``); returns it."""
    _TABLES[table.name] = table
    return table


def all_tables() -> tuple[RuleTable, ...]:
    """Every registered table, in registration order."""
    return tuple(_TABLES.values())


# --------------------------------------------------------------------------------------------------
# positions


def expr_children(node: Node) -> list[tuple[object, Expr]]:
    """The expression children of a node with their slots: ``k`` for field k, ``(k, j)`` for element j
    of a tuple field (a call's arguments)."""
    out = []
    for k, v in enumerate(node.children):
        if isinstance(v, Expr):
            out.append((k, v))
        elif isinstance(v, tuple):
            for j, w in enumerate(v):
                if isinstance(w, Expr):
                    out.append(((k, j), w))
    return out


def replace_child(node: Node, slot, new: Expr) -> Node:
    values = list(node.children)
    if isinstance(slot, tuple):
        k, j = slot
        t = list(values[k])
        t[j] = new
        values[k] = tuple(t)
    else:
        values[slot] = new
    return type(node)(*values)


def _child(node: Node, slot) -> Expr:
    if isinstance(slot, tuple):
        return node.children[slot[0]][slot[1]]
    return node.children[slot]


def subterm(expr: Expr, position: Sequence) -> Expr:
    """The subterm of ``expr`` at ``position``."""
    node = expr
    for slot in position:
        node = _child(node, slot)
    return node


def replace_at(expr: Expr, position: Sequence, new: Expr) -> Expr:
    """``expr`` with the subterm at ``position`` replaced by ``new``."""
    if not position:
        return new
    slot = position[0]
    return replace_child(expr, slot, replace_at(_child(expr, slot), position[1:], new))


# --------------------------------------------------------------------------------------------------
# context


def var_objects(node: Node) -> tuple[Var, ...]:
    """Every ``Var`` object below ``node``, free or bound (let binders included), first occurrence first."""
    if isinstance(node, Var):  # not memoised: the cache of a variable would refer to the variable
        return (node,)

    def compute():
        out: dict = {}
        for k, v in enumerate(node.children):
            if isinstance(v, Node) and not isinstance(v, _SKIP):
                out.update(dict.fromkeys(var_objects(v)))
            elif isinstance(v, tuple):
                for w in v:
                    if isinstance(w, Node) and not isinstance(w, _SKIP):
                        out.update(dict.fromkeys(var_objects(w)))
        return tuple(out)

    return node.memo("rules.var_objects", compute)


_SKIP = (Affine, Type)


class RewriteContext:
    """What a rule may know beyond the node it matches: the whole program and a name supply."""

    def __init__(self, root: Expr):
        self.root = root
        self.taken: set[str] = set()
        self.cache: dict = {}
        self._by_name: dict[str, list[Var]] | None = None  # root's variable objects by name, when asked
        self._least_free: dict[tuple, int] = {}  # (base, numbered) -> the least k fresh_name may find free

    def _variables_named(self, name: str) -> list[Var]:
        if self._by_name is None:
            self._by_name = {}
            for v in var_objects(self.root):
                self._by_name.setdefault(v.name, []).append(v)
        return self._by_name.get(name, [])

    def name_in_use(self, name: str) -> bool:
        return name in self.taken or bool(self._variables_named(name))

    def name_is_unique(self, var: Var) -> bool:
        """True when ``var`` is the only variable object with its name in the program."""
        return all(v is var for v in self._variables_named(var.name)) and var.name not in self.taken

    def fresh_name(self, base: str, *, numbered: bool = False) -> str:
        if not numbered and not self.name_in_use(base):
            name = base
        else:
            # names only get used, so no number below the last one found is free
            k = self._least_free.get((base, numbered), 0 if numbered else 1)
            while self.name_in_use(f"{base}{k}"):
                k += 1
            self._least_free[(base, numbered)] = k
            name = f"{base}{k}"
        self.taken.add(name)
        return name

    def fresh_var(self, base: str, type_, *, numbered: bool = False) -> Var:
        """A ``Var`` whose name is used nowhere in the program and by no earlier fresh name."""
        return Var(self.fresh_name(base, numbered=numbered), type_)


# --------------------------------------------------------------------------------------------------
# traces


@dataclass
class Step:
    """One rule application: ``rule`` fired at ``position``, rewriting ``before`` to ``after``; the whole
    program was ``program_before`` and became ``program_after``."""

    rule: Rule
    position: tuple
    before: Expr
    after: Expr
    program_before: Expr | None = None
    program_after: Expr | None = None

    def __str__(self) -> str:
        from .printer import expr_str

        return f"{self.rule.name} at {list(self.position)}: {expr_str(self.before)}  ==>  {expr_str(self.after)}"


@dataclass
class Trace:
    """The steps of one or more ``rewrite`` runs.  ``programs=True`` also keeps the whole program before
    and after each step (what ``proofs/`` checks)."""

    programs: bool = False
    steps: list[Step] = field(default_factory=list)

    def record(self, step: Step) -> None:
        self.steps.append(step)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.steps:
            out[s.rule.name] = out.get(s.rule.name, 0) + 1
        return out

    def __len__(self) -> int:
        return len(self.steps)

    def __iter__(self):
        return iter(self.steps)

    def __str__(self) -> str:
        return "\n".join(str(s) for s in self.steps)


# --------------------------------------------------------------------------------------------------
# the driver


def _ensure_recursion(limit: int = 20000) -> None:
    if sys.getrecursionlimit() < limit:
        sys.setrecursionlimit(limit)


_ensure_recursion()  # long let chains nest deeply; raise the limit once, when the module loads


def rewrite(expr: Expr, table: RuleTable, trace: Trace | None = None, max_steps: int | None = None) -> Expr:
    """Rewrite ``expr`` with ``table`` to its fixed point, leftmost-outermost (see the module doc)."""
    _ensure_recursion()
    ctx = RewriteContext(expr)
    return _Driver(table, ctx, trace, max_steps).run(expr)


@keeps_declarations
def run_pass(expr: Expr, tables: Sequence[RuleTable], trace: Trace | None = None) -> Expr:
    """Run each table of a pass to its fixed point, in order (on the program's expression: its
    declarations are kept)."""
    for table in tables:
        expr = rewrite(expr, table, trace)
    return expr


class _Driver:
    def __init__(self, table: RuleTable, ctx: RewriteContext, trace: Trace | None, max_steps):
        self.table, self.ctx, self.trace = table, ctx, trace
        self.normal: set[int] = set()
        self.keep: list = []  # keeps the nodes in ``normal`` alive, so their ids stay theirs
        self.steps = 0
        self.max_steps = max_steps if max_steps is not None else 10_000_000

    def _count(self):
        self.steps += 1
        if self.steps > self.max_steps:
            raise RuntimeError(f"rule table {self.table.name} did not reach a fixed point in {self.max_steps} steps")

    def _record(self, rule, position, before, after, root_before, root_after):
        if self.trace is not None:
            step = Step(rule, tuple(position), before, after)
            if self.trace.programs:
                step.program_before, step.program_after = root_before, root_after
            self.trace.record(step)

    def _try(self, node, at_root: bool):
        rules = self.table.root_rules if at_root else ()
        for r in rules:
            out = r.match(node, self.ctx)
            if out is not None:
                return r, out
        if id(node) in self.normal:
            return None
        for r in self.table.rules_for(node):
            out = r.match(node, self.ctx)
            if out is not None:
                return r, out
        return None

    def run(self, root: Expr) -> Expr:
        if self.table.local:
            return self._run_local(root)
        while True:
            found = self._step(root, (), True)
            if found is None:
                return root
            new_root, r, position, before, after = found
            self._count()
            self.ctx.root = new_root
            self._record(r, position, before, after, root, new_root)
            root = new_root

    def _step(self, node, position, at_root):
        hit = self._try(node, at_root)
        if hit is not None:
            r, out = hit
            return out, r, position, node, out
        if id(node) in self.normal:
            return None
        for slot, child in expr_children(node):
            found = self._step(child, position + (slot,), False)
            if found is not None:
                new_child, r, pos, before, after = found
                return replace_child(node, slot, new_child), r, pos, before, after
        self.normal.add(id(node))
        self.keep.append(node)
        return None

    # -- local tables: ancestors never change, so go on from the rewritten position
    def _run_local(self, root: Expr) -> Expr:
        self._stack: list = []  # (parent, slot) from the root down, for whole-program snapshots
        return self._local(root, (), True)

    def _snapshot(self, node):
        out = node
        for parent, slot in reversed(self._stack):
            out = replace_child(parent, slot, out)
        return out

    def _local(self, node, position, at_root):
        while True:
            hit = self._try(node, at_root)
            if hit is None:
                break
            r, out = hit
            self._count()
            if self.trace is not None and self.trace.programs:
                before_root, after_root = self._snapshot(node), self._snapshot(out)
            else:
                before_root = after_root = None
            self._record(r, position, node, out, before_root, after_root)
            node = out
            if at_root:
                self.ctx.root = node
        if id(node) in self.normal:
            return node
        new = node
        for slot, child in expr_children(node):
            self._stack.append((new, slot))
            new_child = self._local(child, position + (slot,), False)
            self._stack.pop()
            if new_child is not child:
                new = replace_child(new, slot, new_child)
                if not self._stack:
                    self.ctx.root = new
        self.normal.add(id(new))
        self.keep.append(new)
        return new


# --------------------------------------------------------------------------------------------------
# one application at a time


def applications(expr: Expr, table: RuleTable) -> list[tuple[Rule, tuple]]:
    """Every ``(rule, position)`` at which a rule of ``table`` matches in ``expr``, in pre-order, rules in
    table order at each position (root rules at the root only)."""
    ctx = RewriteContext(expr)
    out: list = []

    def visit(node, position, at_root):
        for r in (table.root_rules if at_root else ()):
            if r.match(node, ctx) is not None:
                out.append((r, position))
        for r in table.rules_for(node):
            if r.match(node, ctx) is not None:
                out.append((r, position))
        for slot, child in expr_children(node):
            visit(child, position + (slot,), False)

    _ensure_recursion()
    visit(expr, (), True)
    return out


def apply_once(expr: Expr, rule: Rule, position: Sequence = ()) -> Expr:
    """``expr`` with ``rule`` applied once at ``position``; ``ValueError`` if it does not match there."""
    ctx = RewriteContext(expr)
    node = subterm(expr, position)
    if rule.root and tuple(position) != ():
        raise ValueError(f"{rule.name} applies to the whole program only")
    out = rule.match(node, ctx)
    if out is None:
        raise ValueError(f"{rule.name} does not match at {list(position)}")
    return replace_at(expr, position, out)


# --------------------------------------------------------------------------------------------------
# the driver with scope: the loops and brackets around each node


class Scope:
    """What holds around a node: the loops around it (``loops``, ``(var, size)`` outermost first) and
    what the brackets on the way say (``guard``).  ``visit(child, loops=..., guard=...)`` rewrites a
    child in this scope, extended; ``record(rule, before, after)`` notes a step in the trace."""

    __slots__ = ("driver", "loops", "guard")

    def __init__(self, driver: "ScopedDriver", loops: tuple, guard):
        self.driver, self.loops, self.guard = driver, loops, guard

    @property
    def variables(self) -> tuple:
        return tuple(v for v, _ in self.loops)

    def visit(self, e: Expr, loops: tuple = (), guard=None) -> Expr:
        return self.driver.visit(e, Scope(self.driver, self.loops + tuple(loops),
                                          self.guard if guard is None else conj(self.guard, guard)))

    def record(self, rule: Rule, before: Expr, after: Expr) -> Expr:
        trace = self.driver.trace
        if trace is not None and after is not before:
            trace.append((rule.name, before, after))
        return after


class ScopedDriver:
    """One top-down pass of a table whose rules need the loops and brackets around a node (the
    simplification rules of ``derive/simplify.py``).  At each node the first rule of the table for its
    kind that applies (``fn(node, scope)`` returns a node, not ``None``) gives the result, and is
    responsible for the node's children (through ``scope.visit``); where none applies, the children are
    visited (a generator's or a maximum's body with its loop added) and the node rebuilt.  A binder that shadows an
    enclosing loop variable gets a fresh variable first.  ``trace`` (a list) receives ``(rule name,
    before, after)`` for every step."""

    def __init__(self, table: RuleTable, trace: list | None = None):
        self.table, self.trace = table, trace

    def run(self, expr: Expr) -> Expr:
        _ensure_recursion()
        return self.visit(expr, Scope(self, (), TRUE))

    def visit(self, e: Expr, scope: Scope) -> Expr:
        if isinstance(e, (Gen, Sum, Max)) and any(e.var is v for v, _ in scope.loops):
            e = freshen(e)  # a binder shadowing an enclosing one: give it its own variable
        for r in self.table.rules_for(e):
            out = r.fn(e, scope)
            if out is not None:
                return out
        if isinstance(e, (Gen, Max)):
            body = scope.visit(e.body, ((e.var, e.size),))
            return type(e)(e.var, e.size, body) if body is not e.body else e
        if isinstance(e, Let):
            value, body = scope.visit(e.value), scope.visit(e.body)
            return e if value is e.value and body is e.body else Let(e.var, value, body)
        if expr_children(e):
            return rebuild(e, lambda c: scope.visit(c) if isinstance(c, Expr) else c)
        return e
