"""The loop IR: what an entry point runs, between isl's AST (``codegen.loops``) and C text.

The emitters build it through ``scalar.Scope`` (``scope.loop``, ``scope.branch``, ``scope.block``,
``scope.line``) instead of writing text; the schedule's passes rewrite it; ``print_c`` prints it, and
nothing else writes a loop's braces.  Its nodes:

* ``Loop``: ``for (init; cond; step) body``, with ``parallel`` (an ``OpenMP`` clause: the schedule, a
  reduction, and the work below which the loop runs serially) or a ``pragma`` of its own
  (``#pragma omp simd``);
* ``Branch``: ``if (cond) then else orelse``;
* ``Block``: a C block, ``{ body }`` (the scope of its locals);
* ``Line``: one statement, declaration, comment or preprocessor line, as C text (the scalar printer's
  expressions are C text already).

``kernel.explain()`` prints the IR of each statement after each pass (``PASSES``, by name): the IR as
emitted, then after ``serial copies`` (each OpenMP loop with a serial copy below its work threshold).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from tensorlang.dispatch import dispatch

__all__ = ["Line", "Loop", "Branch", "Block", "Parallel", "with_bodies", "print_c", "print_ir", "serial_copies",
           "PASSES", "scheduled"]


@dataclass
class Line:
    text: str

    bodies = ()  # the names of a node's fields that hold lists of nodes


@dataclass
class Parallel:
    """``#pragma omp parallel for schedule(schedule) reduction(+:reduction) if(work >= threshold)``."""

    schedule: str
    reduction: str | None
    work: str  # the C condition under which the loop runs on several threads


@dataclass
class Loop:
    """``for (init; cond; step)``: its three clauses as C (``init`` declares ``var``, or is empty for a loop
    that starts where ``var`` is)."""

    var: str
    init: str
    cond: str
    step: str
    body: list = field(default_factory=list)
    parallel: Parallel | None = None
    pragma: str | None = None  # a pragma of the loop alone (``omp simd``)

    bodies = ("body",)


@dataclass
class Branch:
    cond: str
    then: list = field(default_factory=list)
    orelse: list | None = None

    bodies = ("then", "orelse")


@dataclass
class Block:
    body: list = field(default_factory=list)

    bodies = ("body",)


def with_bodies(node, rewrite):
    """``node`` with ``rewrite(nodes)`` in place of each of its lists of nodes."""
    changed = {name: rewrite(getattr(node, name)) for name in node.bodies if getattr(node, name) is not None}
    return replace(node, **changed) if changed else node


# -- printing ---------------------------------------------------------------------------------------------


class _CPrinter:
    """The IR as C lines, two spaces per level of nesting."""

    def __init__(self, lines: list[str]):
        self.lines = lines

    def body(self, nodes: list, depth: int) -> None:
        for node in nodes:
            dispatch(self, "_print_", node, depth)

    def put(self, depth: int, text: str) -> None:
        self.lines.append("  " * depth + text)

    def _print_Line(self, node: Line, depth: int) -> None:
        self.put(depth, node.text)

    def _print_Loop(self, node: Loop, depth: int) -> None:
        if node.parallel is not None:
            p = node.parallel
            red = f" reduction(+:{p.reduction})" if p.reduction else ""
            clause = f" if({p.work})" if p.work else ""
            self.put(depth, f"#pragma omp parallel for schedule({p.schedule}){red}{clause}")
        if node.pragma is not None:
            self.put(depth, f"#pragma {node.pragma}")
        self.put(depth, f"for ({node.init}; {node.cond}; {node.step}) {{")
        self.body(node.body, depth + 1)
        self.put(depth, "}")

    def _print_Branch(self, node: Branch, depth: int) -> None:
        self.put(depth, f"if ({node.cond}) {{")
        self.body(node.then, depth + 1)
        if node.orelse is not None:
            self.put(depth, "} else {")
            self.body(node.orelse, depth + 1)
        self.put(depth, "}")

    def _print_Block(self, node: Block, depth: int) -> None:
        self.put(depth, "{")
        self.body(node.body, depth + 1)
        self.put(depth, "}")


def print_c(nodes: list, depth: int = 1) -> list[str]:
    """The C lines of ``nodes`` at nesting ``depth``."""
    lines: list[str] = []
    _CPrinter(lines).body(nodes, depth)
    return lines


class _Outline(_CPrinter):
    """The IR as an indented outline: a loop's clauses and schedule on one line, no braces."""

    def _print_Loop(self, node: Loop, depth: int) -> None:
        how = ""
        if node.parallel is not None:
            p = node.parallel
            how = f"  [parallel {p.schedule}" + (f", reduction {p.reduction}" if p.reduction else "") + (
                f", if {p.work}" if p.work else "") + "]"
        how += f"  [{node.pragma}]" if node.pragma else ""
        self.put(depth, f"for ({node.init}; {node.cond}; {node.step}){how}")
        self.body(node.body, depth + 1)

    def _print_Branch(self, node: Branch, depth: int) -> None:
        self.put(depth, f"if {node.cond}")
        self.body(node.then, depth + 1)
        if node.orelse is not None:
            self.put(depth, "else")
            self.body(node.orelse, depth + 1)

    def _print_Block(self, node: Block, depth: int) -> None:
        self.put(depth, "block")
        self.body(node.body, depth + 1)


def print_ir(nodes: list) -> str:
    """The IR as an indented outline (``kernel.explain``): loops with their schedule, branches, blocks."""
    lines: list[str] = []
    _Outline(lines).body(nodes, 0)
    return "\n".join(lines)


# -- passes -----------------------------------------------------------------------------------------------


def serial_copies(nodes: list) -> list:
    """Each OpenMP loop with a work condition as ``if (work) { parallel loop } else { serial loop }``: below
    the threshold the loop enters no OpenMP runtime (its ``if(false)`` clause still would, about half a
    microsecond a loop)."""
    out = []
    for node in nodes:
        node = with_bodies(node, serial_copies)
        if isinstance(node, Loop) and node.parallel is not None and node.parallel.work:
            parallel = replace(node, parallel=replace(node.parallel, work=""))
            node = Branch(node.parallel.work, [parallel], [replace(node, parallel=None)])
        out.append(node)
    return out


# the schedule's passes over the IR, in order (``kernel.explain`` prints the IR after each)
PASSES = (("serial copies", serial_copies),)


def scheduled(nodes: list) -> list:
    """A statement's loop IR after every pass of ``PASSES``, in order."""
    for _, run in PASSES:
        nodes = run(nodes)
    return nodes
