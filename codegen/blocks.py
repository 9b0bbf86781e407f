"""Blockwise plans: a program split into blocks along loop dimensions, the statements that can run on
the same block fused into one block program, the footprint of each block computed by isl
(``codegen.block_programs``).

The program is normalised to statements (``pair_elim(let_lift(e))``: a chain ``let t = value in ...``
whose output is a tree of pairs).  Each statement is split along the loop dimensions of its top nest
that follow a chunked array:

* a dimension of the generator nest at the top of its value: its blocks are slabs of the result, and
  the slabs are concatenated (``gen(i:n, j:n)`` over a 2-D chunked input: a grid of tiles);
* a dimension of the summation chain right below that nest (``gen(k:m) sum(i:n) ...``): its blocks
  are partial results, and the partials are added (a tree reduction on Dask).

A dimension ``v`` follows an array when some read of the array indexes one of its axes by ``v`` with
coefficient +-1 (``x[i + j]`` follows ``i``); its blocks are cut at that axis's chunk edges (inputs'
Dask chunks, or an intermediate's blocks), clipped to ``v``'s range; with ``chunks`` given, every
dimension of the nest is cut every ``chunks`` elements.  A statement with no dimension cut into two
blocks or more is one block.

**Fusion.**  A statement is computed inside its reader's block program, on the window the reader's
block reads (``block_programs``: overlapped tiling, its halo recomputed), rather than as blocks of its
own, when: it is a generator nest over every axis of its result split along no summation (a sum across
blocks is a tree of tasks: it ends a group), one statement reads it and reads it through windows, the
reader is split, it is not a part of the output, and its windows over all the reader's blocks hold at
most ``RECOMPUTE`` times its elements (chunks smaller than the halo recompute too much: the statement
keeps blocks of its own).  Statements are considered from the last to the first, and for a reader its
candidates from the latest to the earliest, so a chain fuses as far back as it can.  A statement fused
is no Dask key: a block reads its inputs' chunks once and writes its result, and the statements between
never leave the task.  ``fuse=False`` runs every statement as blocks of its own.

**Footprints.**  A block's ``Footprint`` is the bytes its task needs: its windows and whole reads, its
result and its block program's workspace (the windows of the statements fused into it among them), all
at sizes the plan knows.  The block programs a plan needs are compiled once, together (one compiler
run).

**Plans are cached** per sizes, input chunks, ``chunks`` and ``fuse`` (an optimiser's loop calls with
the same), and so are their Dask tasks (``Plan.graph``, a ``dask_graph.Graph``): a call on inputs of a
chunking seen before computes no footprint and makes no task.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from tensorlang.declarations import body_of
from tensorlang.errors import UnsupportedError
from tensorlang.nodes import Expr, Pair, Var, let_chain
from tensorlang.traversal import free_vars

from .block_programs import (
    BlockProgram, Split, Statement, block_program, fusable, group_boxes, ndims, shape_at, splits, value_at,
)
from .build import build_c
from .c import CEmitter
from .dask_graph import BlockLibrary, Graph, collection
from .generate import emitter_for

__all__ = ["Blocked", "Footprint", "Plan", "StatementPlan", "RECOMPUTE"]

RECOMPUTE = 2  # a fused statement's windows, over all its reader's blocks, hold at most this many times its elements


# --------------------------------------------------------------------------------------------------
# plans


@dataclass(frozen=True)
class Footprint:
    """The bytes one block task needs: the dense arrays its block program reads (its windows, the
    variables it reads whole), those it writes (its block of the result, or its partial result) and its
    temporaries (the workspace).  Relations are not counted: what they take depends on their nonzeros."""

    inputs: int
    outputs: int
    temporaries: int

    @property
    def total(self) -> int:
        return self.inputs + self.outputs + self.temporaries

    def __str__(self) -> str:
        return (f"{self.total:,} bytes (read {self.inputs:,}, written {self.outputs:,}, "
                f"temporaries {self.temporaries:,})")


@dataclass
class StatementPlan:
    """A statement at the call's sizes, with the statements fused into it: its block program, the cuts
    ``[(lo, hi), ...]`` of each split dimension, its blocks (every combination of cuts, as
    ``((lo, hi), ...)``, in row-major order; one ``()`` when whole), per block the window box of every
    windowed variable, a fused statement's included (None: empty), the sizes its block program runs at
    and its ``Footprint``."""

    stmt: Statement
    program: BlockProgram
    cuts: list
    blocks: list
    boxes: list  # per block: {Var: box or None}
    shape: tuple
    chunks: tuple  # of its result: the gen splits' cuts on their axes, whole elsewhere
    sizes: list = field(default_factory=list)  # per block: {size name: value}
    footprints: list = field(default_factory=list)  # per block: Footprint

    def measure(self, plan_sizes: dict) -> None:
        """Fill ``sizes`` and ``footprints``: each block's sizes are the plan's, each split's offset and
        length, each window's lower corner and lengths (an empty window: lengths 0 at 0); its footprint
        is the bytes of its block program's arguments and workspace at those sizes."""
        from .runtime import argument_bytes

        bp = self.program
        for block, boxes in zip(self.blocks, self.boxes):
            sizes = dict(plan_sizes)
            for (off, length), (lo, hi) in zip(bp.sizes, block):
                sizes[off.name], sizes[length.name] = lo, hi - lo
            for v, (_, los, lens) in bp.windows.items():
                for s, t, (a, b) in zip(los, lens, boxes.get(v) or tuple((0, 0) for _ in los)):
                    sizes[s.name], sizes[t.name] = a, b - a
            self.sizes.append(sizes)
            self.footprints.append(Footprint(*argument_bytes(bp.library.meta, sizes, bp.library.meta["dtype"])))

    def footprint(self) -> Footprint:
        """The largest footprint of its blocks."""
        return max(self.footprints, key=lambda f: f.total)

    def __str__(self) -> str:
        from tensorlang.printer import expr_str

        bp = self.program
        name = self.stmt.var.name if self.stmt.var is not None else "out"
        head = [f"{m.var.name} = {expr_str(m.value)}" for m in bp.fused] + [f"{name} = {expr_str(self.stmt.value)}"]
        if not bp.splits:
            return "\n".join(head) + f"\n  one block (whole inputs), holding {self.footprint()}"
        if bp.fused:
            head.append(f"  one block program: {', '.join(m.var.name for m in bp.fused)} fused into {name}, "
                        f"computed on their windows in each block")
        what = {"gen": "slabs, concatenated", "sum": "partial sums, added"}
        lines = head + ["  split along " + ", ".join(
            f"{sp.kind} {sp.var.name} in {len(cut)} ({what[sp.kind]})" for sp, cut in zip(bp.splits, self.cuts))]
        made = [m.var for m in bp.fused]
        for block, bx in zip(self.blocks, self.boxes):
            reads = "  ".join(_box_str(v, b) for v, b in bx.items() if v not in made) or "-"
            computed = "  ".join(_box_str(v, bx[v]) for v in made)
            at = ", ".join(f"{sp.var.name} in [{lo}, {hi})" for sp, (lo, hi) in zip(bp.splits, block))
            lines.append(f"  {at}: {reads}" + (f"; computing {computed}" if computed else ""))
        lines.append(f"  a task holds at most {self.footprint()}")
        whole = [v.name for v in bp.reads if v not in bp.windows]
        if whole:
            lines.append(f"  whole: {', '.join(whole)}")
        return "\n".join(lines)


def _box_str(v: Var, b) -> str:
    if b is None:
        return f"{v.name}[]"
    return f"{v.name}[" + ", ".join(f"{lo}:{hi}" for lo, hi in b) + "]"


@dataclass
class Plan:
    """A program's statements at the call's sizes, and its output (a tree of tuples of statements or
    inputs); ``str(plan)`` shows every block and the footprint isl computed for it."""

    sizes: dict
    statements: list
    output: object
    dtype: str
    layout: dict  # the chunks of the Dask inputs: {Var: chunks}
    _graph: object = None  # its tasks (dask_graph.Graph), made by the first call that needs them

    def __str__(self) -> str:
        sz = ", ".join(f"{k} = {v}" for k, v in self.sizes.items())
        return f"blockwise plan at {sz or 'no sizes'}\n" + "\n".join(str(s) for s in self.statements) + \
            f"\nblock footprint: {self.footprint()}"

    def footprint(self) -> Footprint:
        """The largest footprint of its block tasks: what one task in flight holds beyond the data its
        worker stores (input chunks, statements' results waiting for their readers)."""
        return max((sp.footprint() for sp in self.statements), key=lambda f: f.total)

    def collection(self, inputs: dict):
        """The lazy Dask collection of the program on ``inputs`` (see ``codegen.dask_graph``)."""
        return collection(self, inputs)

    def graph(self) -> Graph:
        """The plan's tasks, made once: each call of the kernel names them after its inputs."""
        if self._graph is None:
            self._graph = Graph(self)
        return self._graph


class Blocked:
    """A kernel's program as statements, with their block programs, each compiled once, when a
    plan first needs it."""

    def __init__(self, expr: Expr, target: str, dtype: str):
        from tensorlang.normalize import let_lift, pair_elim

        self.expr, self.target, self.dtype = expr, target, dtype
        bindings, out = let_chain(pair_elim(let_lift(body_of(expr))))  # every input of expr is an argument
        self.statements = [Statement.of(v, e) for v, e in bindings]
        self.output = self._output(out)
        self.reader = self._readers()  # per statement: the index of its one reader, or None
        self._programs: dict = {}
        self._plans: dict = {}  # (sizes, input chunks, chunks, fuse) -> Plan

    def _output(self, e: Expr):
        if isinstance(e, Pair):
            return (self._output(e.first), self._output(e.second))
        if isinstance(e, Var):
            return e
        self.statements.append(Statement.of(None, e))
        return self.statements[-1]

    def _readers(self) -> list:
        """Per statement, the index of the statement that reads it when it can be fused into that reader's
        block program (module docstring: one reader, through windows, not a part of the output; a
        generator nest over its axes), else None."""
        outputs, todo = [], [self.output]
        while todo:
            o = todo.pop()
            if isinstance(o, tuple):
                todo += o
            elif isinstance(o, Var):
                outputs.append(o)
        out = []
        for stmt in self.statements:
            readers = [k for k, r in enumerate(self.statements) if stmt.var is not None and stmt.var in r.reads]
            one = len(readers) == 1 and stmt.var in self.statements[readers[0]].windowed
            out.append(readers[0] if one and fusable(stmt) and stmt.var not in outputs else None)
        return out

    def plan(self, inputs: dict, chunks: int | None = None, fuse: bool = True) -> Plan:
        """The plan at ``inputs``' sizes and chunks (cached: an optimiser's loop calls with the same), its
        statements fused where they can be (``fuse``, module docstring)."""
        from tensorlang.inputs import infer_sizes

        if self.target != "c":
            raise UnsupportedError(f"blockwise runs on Dask use C kernels; this kernel's target is {self.target!r}")
        if chunks is not None and (isinstance(chunks, bool) or not isinstance(chunks, (int, np.integer))
                                   or chunks < 1):
            raise UnsupportedError(f"chunks must be a positive number of elements per block, got {chunks!r}")
        sizes = infer_sizes(self.expr, inputs)
        layout = _input_chunks(self.expr, inputs)
        key = (tuple(sorted(sizes.items())), tuple(sorted((v.name, c) for v, c in layout.items())), chunks,
               bool(fuse))
        if key not in self._plans:
            if len(self._plans) >= 8:
                self._plans.pop(next(iter(self._plans)))
            self._plans[key] = self._plan(sizes, layout, chunks, fuse)
        return self._plans[key]

    def _plan(self, sizes: dict, layout: dict, chunks, fuse: bool) -> Plan:
        inputs_layout = dict(layout)
        choices = []
        for stmt in self.statements:
            splits, cuts = self._choice(stmt, sizes, layout, chunks)
            choices.append((splits, cuts))
            if stmt.var is not None and splits:
                layout[stmt.var] = _result_chunks(shape_at(stmt.value.type, sizes), splits, cuts)
        groups = self._groups(sizes, choices, fuse)
        self._compile([(k, choices[k][0], fused) for k, fused, _, _ in groups])
        plans = []
        for k, fused, blocks, boxes in groups:
            stmt, (splits, cuts) = self.statements[k], choices[k]
            shape = shape_at(stmt.value.type, sizes) if ndims(stmt.value.type) >= 0 else ()
            bp = self._programs[self._key(k, splits, fused)]
            plans.append(StatementPlan(stmt, bp, cuts, blocks, boxes, shape, _result_chunks(shape, splits, cuts)))
            plans[-1].measure(sizes)
        return Plan(sizes, plans, self.output, self.dtype, inputs_layout)

    def _groups(self, sizes: dict, choices: list, fuse: bool) -> list:
        """``[(k, fused, blocks, boxes)]`` in program order: each statement ``k`` not fused into another, the
        indices of those fused into it (program order), its blocks and per block the box of every window
        (module docstring)."""
        groups, taken = [], set()
        for k in reversed(range(len(self.statements))):
            if k in taken:
                continue
            splits, cuts = choices[k]
            blocks = list(itertools.product(*cuts))
            members, boxes = [k], self._boxes([k], splits, blocks, sizes)
            rejected: list = []
            while fuse and splits:
                candidates = [j for j, r in enumerate(self.reader) if r in members and j not in members
                              and j not in rejected and not any(sp.kind == "sum" for sp in choices[j][0])]
                if not candidates:
                    break
                j = max(candidates)
                trial = sorted(members + [j])
                trial_boxes = self._boxes(trial, splits, blocks, sizes)
                var = self.statements[j].var
                held = sum(_volume(b.get(var)) for b in trial_boxes)
                if held <= RECOMPUTE * int(np.prod(shape_at(var.type, sizes))):
                    members, boxes = trial, trial_boxes
                else:
                    rejected.append(j)
            taken.update(members)
            groups.append((k, tuple(members[:-1]), blocks, boxes))
        return groups[::-1]

    def _boxes(self, members: list, splits: tuple, blocks: list, sizes: dict) -> list:
        """Per block, ``group_boxes`` of the statements ``members`` (indices, the reader last)."""
        stmts = tuple(self.statements[j] for j in members)
        return [group_boxes(stmts, splits, b, sizes) for b in blocks] if splits else [{}]

    @staticmethod
    def _choice(stmt: Statement, sizes: dict, layout: dict, chunks):
        """``(splits, cuts)`` for a statement: the dimensions cut into two blocks or more, and their cuts."""
        chosen, cuts = [], []
        for sp in splits(stmt.value):
            extent = value_at(sp.size, sizes)
            edges = _edges(sp, extent, stmt, layout, chunks)
            if edges:
                bounds = [0] + edges + [extent]
                chosen.append(sp)
                cuts.append([(a, b) for a, b in zip(bounds[:-1], bounds[1:])])
        return tuple(chosen), cuts

    @staticmethod
    def _key(k: int, splits: tuple, fused: tuple):
        return k, tuple((sp.kind, sp.axis, id(sp.var)) for sp in splits), fused

    def _compile(self, wanted: list) -> None:
        """Compile the block programs not compiled yet, all in one library (one compiler run)."""
        todo: list = []
        for k, cut, fused in wanted:
            key = self._key(k, cut, fused)
            if key not in self._programs and all(t[0] != key for t in todo):
                todo.append((key, block_program(self.statements[k], cut, tuple(self.statements[j] for j in fused))))
        if not todo:
            return
        emitters, metas = [], []
        for j, (_, bp) in enumerate(todo):
            emitter, meta = emitter_for(bp.expr, "c", self.dtype, f"tl_block{j}")
            emitters.append(emitter)
            metas.append(meta)
        with open(build_c(CEmitter.translation_unit(emitters)), "rb") as f:
            data = f.read()
        for (key, bp), meta in zip(todo, metas):
            bp.library = BlockLibrary(meta, data)
            self._programs[key] = bp


def _input_chunks(expr: Expr, inputs: dict) -> dict:
    """``{Var: chunks}`` for every Dask input of ``expr`` (its ``.chunks``: block lengths per axis)."""
    out = {}
    for v in free_vars(expr):
        value = inputs.get(v.name)
        if hasattr(value, "__dask_graph__") and hasattr(value, "chunks"):
            out[v] = tuple(tuple(int(c) for c in ax) for ax in value.chunks)
    return out


def _result_chunks(shape: tuple, splits: tuple, cuts: list) -> tuple:
    """The chunks of a statement's result of ``shape``: its gen splits' cuts on their axes, whole elsewhere."""
    chunks = [(d,) for d in shape]
    for sp, cut in zip(splits, cuts):
        if sp.kind == "gen":
            chunks[sp.axis] = tuple(hi - lo for lo, hi in cut)
    return tuple(chunks)


def _edges(sp: Split, extent: int, stmt: Statement, layout: dict, chunks) -> list[int]:
    """The inner cut points of dimension ``sp`` (module docstring): every ``chunks`` elements when given,
    otherwise the chunk edges of the first chunked axis some read indexes by ``sp.var`` with
    coefficient +-1, clipped to ``(0, extent)``."""
    if extent < 2:
        return []
    if chunks is not None:
        return list(range(int(chunks), extent, int(chunks)))
    for var, rs in stmt.reads.items():
        axes = layout.get(var)
        if axes is None:
            continue
        for r in rs:
            for k, a in enumerate(r.indices[:len(axes)]):
                if abs(a.coeff(sp.var)) == 1 and len(axes[k]) > 1:
                    inner = np.cumsum(axes[k])[:-1]
                    edges = sorted({int(e) for e in inner if 0 < e < extent})
                    if edges:
                        return edges
    return []


def _volume(bx) -> int:
    """The number of elements of a box (None: empty)."""
    return 0 if bx is None else int(np.prod([hi - lo for lo, hi in bx]))
