"""The loop IR: what an entry point runs, between isl's AST (``codegen.loops``) and C text.

The emitters build it through ``scalar.Scope`` (``scope.loop``, ``scope.branch``, ``scope.block``,
``scope.line``) instead of writing text; the schedule's passes rewrite it; ``print_c`` prints it, and
nothing else writes a loop's braces.  Its nodes:

* ``Loop``: ``for (init; cond; step) body``, with ``threads`` (``Threads``: its iterations are independent
  and may run on several threads, with the nest's work and the variable they add into), which the
  ``openmp`` pass turns into ``parallel`` (an OpenMP clause: the schedule, a reduction, and the work below
  which the loop runs serially) where the target has OpenMP; or a ``pragma`` of its own (``#pragma omp
  simd``);
* ``Branch``: ``if (cond) then else orelse``;
* ``Block``: a C block, ``{ body }`` (the scope of its locals);
* ``Line``: one statement, declaration, comment or preprocessor line, as C text (the scalar printer's
  expressions are C text already).

A pass is a function of a list of nodes and the target's ``Capabilities``.  ``kernel.explain()`` prints the
IR of each statement after each pass (``PASSES``, by name): the IR as emitted, after ``openmp`` (which
loops run on threads, and from what work on), then after ``serial copies`` (each OpenMP loop with a serial
copy below its work threshold).  The printers print the IR after the passes: a loop whose ``threads`` no
pass decided is refused.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from tensorlang.dispatch import dispatch

__all__ = ["Line", "Loop", "Branch", "Block", "Threads", "Parallel", "with_bodies", "print_c", "print_ir", "openmp",
           "serial_copies", "PASSES", "PARALLEL_WORK", "scheduled"]

PARALLEL_WORK = 1 << 18  # points times inner work below which a nest runs on one thread (~0.1 ms of work)


@dataclass
class Line:
    text: str

    bodies = ()  # the names of a node's fields that hold lists of nodes


@dataclass
class Threads:
    """The iterations of a loop are independent, and may run on several threads: ``work`` is the rough work of
    its nest (C), ``reduction`` the variable its iterations add into (None: each writes its own points), and
    ``chunk`` (C) the iterations a thread takes at a time where they are dealt out dynamically (None: in
    equal shares, fixed in advance)."""

    work: str
    reduction: str | None = None
    chunk: str | None = None


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
    threads: Threads | None = None  # (as emitted; the openmp pass decides it)
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
        if node.threads is not None:
            raise ValueError(f"the loop over {node.var} is printed before the openmp pass decided its threads")
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
        if node.threads is not None:
            t = node.threads
            how = f"  [threads, work {t.work}" + (f", reduction {t.reduction}" if t.reduction else "") + (
                f", chunks of {t.chunk}" if t.chunk else "") + "]"
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


def openmp(nodes: list, caps) -> list:
    """Each loop whose iterations may run on threads as an OpenMP loop (``parallel``) where the target has
    OpenMP (else a plain loop: the CUDA target's threads are its grid's), parallel where its nest's work
    reaches ``PARALLEL_WORK``.  Gather loops (every element written by one iteration) are scheduled
    dynamically, in the chunks the emitter chose, so that on a shared machine a thread that is descheduled
    does not make the others wait for its share at the barrier (the result does not depend on the
    schedule); reductions keep a static schedule, so their per-thread partial sums are reproducible."""
    out = []
    for node in nodes:
        node = with_bodies(node, lambda body: openmp(body, caps))
        if isinstance(node, Loop) and node.threads is not None:
            t = node.threads
            clause = Parallel(f"dynamic, {t.chunk}" if t.chunk is not None else "static", t.reduction,
                              f"({t.work}) >= {PARALLEL_WORK}") if caps.openmp else None
            node = replace(node, threads=None, parallel=clause)
        out.append(node)
    return out


def serial_copies(nodes: list, caps=None) -> list:
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
PASSES = (("openmp", openmp), ("serial copies", serial_copies))


def scheduled(nodes: list, caps) -> list:
    """A statement's loop IR after every pass of ``PASSES``, in order, for a target of capabilities ``caps``."""
    for _, run in PASSES:
        nodes = run(nodes, caps)
    return nodes
