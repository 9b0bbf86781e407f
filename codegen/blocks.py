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
keeps blocks of its own).  A reader left whole (one block: inputs in one chunk) takes in the same way
the statements it reads that are whole too, computed whole before it: a program on one chunk is one
task, as the kernel on NumPy arrays is one call.  Statements are considered from the last to the
first, and for a reader its candidates from the latest to the earliest, so a chain fuses as far back
as it can.  A statement fused is no Dask key: a block reads its inputs' chunks once and writes its
result, and the statements between never leave the task.  ``fuse=False`` runs every statement as blocks
of its own.

**Runs.**  A block whose windows of chunked variables cross a chunk edge would have those windows joined
(copied) by its task.  Instead its task runs the block program on pieces of the block (``_runs``): an
interior whose windows each lie in one chunk, read in place, and the thin rims around it, whose small
windows are joined.  The pieces are cut along the block's sum dimensions, their partial results added,
or, for a block split along no sum, along the generator of the result's first axis, each piece written
into its rows of the block's slab (``in_pieces``).  Windows of fewer than ``IN_PLACE`` elements are
joined whole: a copy costs less than a second run.  The deconvolution's block ``[lo, hi)`` reads
``x[lo : hi + m - 1)``: its interior ``[lo, hi - m + 1)`` reads ``x``'s chunk itself and its rim the
``2 (m - 1)`` elements around the edge.

**Footprints.**  A block's ``Footprint`` is the bytes its task needs: its windows and whole reads, its
result and its block program's workspace (the windows of the statements fused into it among them), all
at sizes the plan knows.  The block programs a plan needs are compiled once, together (one compiler
run).

**Plans are cached** per sizes, input chunks, ``chunks``, ``fuse`` and ``IN_PLACE`` (an optimiser's loop
calls with the same), and so are their Dask tasks (``Plan.graph``, a ``dask_graph.Graph``): a call on inputs of a
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
IN_PLACE = 1 << 16  # a block is run in pieces where the windows it would join hold at least this many elements
# (below it, copying them costs less than running the block program more than once)


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
    runs: list  # per block: [(piece of the block, its boxes)], the block itself when it is run whole
    rows: list  # per block run in pieces along a generator: (its slab's shape, each run's rows in it), else None
    shape: tuple
    chunks: tuple  # of its result: the gen splits' cuts on their axes, whole elsewhere
    sizes: list = field(default_factory=list)  # per block: per run {size name: value}
    run_footprints: list = field(default_factory=list)  # per block: per run Footprint
    footprints: list = field(default_factory=list)  # per block: Footprint (of its largest run, and the sum)

    def measure(self, plan_sizes: dict) -> None:
        """Fill ``sizes`` and ``footprints``: each run's sizes are the plan's, each split's offset and
        length, each window's lower corner and lengths (an empty window: lengths 0 at 0); a run's footprint
        is the bytes of its block program's arguments and workspace at those sizes.  A block run in pieces
        holds the windows and workspace of its largest run and its result: the runs' sum and one run's
        partial result, or the slab its runs write their rows into."""
        from .runtime import argument_bytes

        bp = self.program
        for runs in self.runs:
            sizes, prints = [], []
            for block, boxes in runs:
                at = dict(plan_sizes)
                for (off, length), (lo, hi) in zip(bp.sizes, block):
                    at[off.name], at[length.name] = lo, hi - lo
                for v, (_, los, lens) in bp.windows.items():
                    for s, t, (a, b) in zip(los, lens, boxes.get(v) or tuple((0, 0) for _ in los)):
                        at[s.name], at[t.name] = a, b - a
                sizes.append(at)
                prints.append(Footprint(*argument_bytes(bp.library.meta, at, bp.library.meta["dtype"])))
            largest = max(prints, key=lambda f: f.inputs + f.temporaries)
            if len(prints) > 1:
                summed = any(sp.kind == "sum" for sp in bp.splits)
                largest = Footprint(largest.inputs, 2 * largest.outputs if summed else
                                    sum(f.outputs for f in prints), largest.temporaries)
            self.sizes.append(sizes)
            self.run_footprints.append(prints)
            self.footprints.append(largest)

    def footprint(self) -> Footprint:
        """The largest footprint of its blocks."""
        return max(self.footprints, key=lambda f: f.total)

    def __str__(self) -> str:
        from tensorlang.printer import expr_str

        bp = self.program
        name = self.stmt.var.name if self.stmt.var is not None else "out"
        head = [f"{m.var.name} = {expr_str(m.value)}" for m in bp.fused] + [f"{name} = {expr_str(self.stmt.value)}"]
        fused = f"{', '.join(m.var.name for m in bp.fused)} fused into {name}" if bp.fused else ""
        if not bp.splits:
            whole = f"one block (whole inputs){', ' + fused if fused else ''}"
            return "\n".join(head) + f"\n  {whole}, holding {self.footprint()}"
        if fused:
            head.append(f"  one block program: {fused}, computed on their windows in each block")
        what = {"gen": "slabs, concatenated", "sum": "partial sums, added"}
        lines = head + ["  split along " + ", ".join(
            f"{sp.kind} {sp.var.name} in {len(cut)} ({what[sp.kind]})" for sp, cut in zip(bp.splits, self.cuts))]
        for block, bx, runs in zip(self.blocks, self.boxes, self.runs):
            lines.append(f"  {self._line(block, bx)}")
            if len(runs) > 1:
                lines += [f"    run {self._line(piece, b)}" for piece, b in runs]
        lines.append(f"  a task holds at most {self.footprint()}")
        whole = [v.name for v in bp.reads if v not in bp.windows]
        if whole:
            lines.append(f"  whole: {', '.join(whole)}")
        return "\n".join(lines)

    def _line(self, block, bx) -> str:
        """A block (or a run of one): where it is and the windows it reads and computes."""
        made = [m.var for m in self.program.fused]
        reads = "  ".join(_box_str(v, b) for v, b in bx.items() if v not in made) or "-"
        computed = "  ".join(_box_str(v, bx[v]) for v in made)
        at = ", ".join(f"{sp.var.name} in [{lo}, {hi})" for sp, (lo, hi) in zip(self.program.splits, block))
        return f"{at}: {reads}" + (f"; computing {computed}" if computed else "")


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
    _graphs: dict = field(default_factory=dict)  # its tasks (dask_graph.Graph) by locality, made when first needed

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

    def graph(self, local: bool = False) -> Graph:
        """The plan's tasks, made once (for each ``local``, see ``dask_graph.Graph``): each call of the kernel
        names them after its inputs."""
        if local not in self._graphs:
            self._graphs[local] = Graph(self, local)
        return self._graphs[local]


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
               bool(fuse), IN_PLACE)
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
            members = [*fused, k]
            runs = [self._runs(members, splits, b, bx, sizes, layout) for b, bx in zip(blocks, boxes)]
            rows = [_slab_rows(splits, shape, b, r) for b, r in zip(blocks, runs)]
            plans.append(StatementPlan(stmt, bp, cuts, blocks, boxes, runs, rows, shape,
                                       _result_chunks(shape, splits, cuts)))
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
            while fuse:
                candidates = [j for j, r in enumerate(self.reader) if r in members and j not in members
                              and j not in rejected and not any(sp.kind == "sum" for sp in choices[j][0])
                              and (splits or not choices[j][0])]   # a whole reader: whole producers
                if not candidates:
                    break
                j = max(candidates)
                if not splits:
                    members = sorted(members + [j])
                    continue
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
        return [group_boxes(self._members(members), splits, b, sizes) for b in blocks] if splits else [{}]

    def _runs(self, members: list, splits: tuple, block: tuple, boxes: dict, sizes: dict, layout: dict) -> list:
        """The runs of a block (module docstring, "Runs"): ``[(piece, boxes)]``, the block itself, or, where
        windows of chunked variables cross chunk edges (``IN_PLACE`` elements or more of them), the block cut
        into an interior whose windows each lie in one chunk and the rims around it, along its sum
        dimensions (``in_pieces``).  Each such dimension is pulled in at both ends by the most any window
        overshoots the chunk it mostly lies in (at its far end, or at its near end for a read that runs
        backwards), where that removes crossings; the interior is kept only when it crosses no edge and
        holds at least as much as its rims."""
        made = {self.statements[j].var for j in members}
        chunked = {v: layout[v] for v in boxes if v not in made and v in layout and boxes[v] is not None}

        def crossings(bx: dict) -> int:
            return sum(_crosses(a, b, ax) for v, c in chunked.items() for (a, b), ax in zip(bx[v], c))

        dims = in_pieces(splits)
        joined = sum(_volume(boxes[v]) for v, c in chunked.items()
                     if any(_crosses(a, b, ax) for (a, b), ax in zip(boxes[v], c)))
        if not dims or not joined or joined < IN_PLACE:
            return [(block, boxes)]
        ends = [(_widest(a, b, ax), (a, b)) for v, c in chunked.items() for (a, b), ax in zip(boxes[v], c)]
        near = max(max(0, clo - a) for (clo, _), (a, _) in ends)
        far = max(max(0, b - chi) for (_, chi), (_, b) in ends)
        inner, left = list(block), crossings(boxes)
        for d in dims:
            lo, hi = block[d]
            for a, b in ((near, far), (far, near)):
                trial = inner[:d] + [(lo + a, hi - b)] + inner[d + 1:]
                if lo + a < hi - b:
                    now = crossings(group_boxes(self._members(members), splits, tuple(trial), sizes))
                    if now < left:
                        inner, left = trial, now
                        break
        if left or _volume(inner) * 2 < _volume(block):
            return [(block, boxes)]
        pieces = [[(lo, a), (a, b), (b, hi)] for (lo, hi), (a, b) in zip(block, inner)]
        return [(piece, group_boxes(self._members(members), splits, piece, sizes))
                for piece in itertools.product(*pieces) if all(a < b for a, b in piece)]

    def _members(self, members: list) -> tuple:
        return tuple(self.statements[j] for j in members)

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


def in_pieces(splits: tuple) -> list:
    """The dimensions along which a block of a statement split along ``splits`` is run in pieces (module
    docstring, "Runs"): its sum dimensions, whose pieces' partial results its task adds; or, without one, its
    generator dimension of the result's first axis, whose pieces the task writes into their rows of the
    block's slab (rows of a C-ordered array are one stretch of memory: a piece written in place)."""
    sums = [d for d, sp in enumerate(splits) if sp.kind == "sum"]
    return sums or [d for d, sp in enumerate(splits) if sp.kind == "gen" and sp.axis == 0]


def _slab_rows(splits: tuple, shape: tuple, block: tuple, runs: list):
    """For a block run in pieces along the generator of the result's first axis (``in_pieces``, no sum): the
    shape of its slab and each run's rows in it; else None."""
    if len(runs) < 2 or any(sp.kind == "sum" for sp in splits):
        return None
    (d,), slab = in_pieces(splits), list(shape)
    for sp, (lo, hi) in zip(splits, block):
        slab[sp.axis] = hi - lo
    return tuple(slab), tuple((piece[d][0] - block[d][0], piece[d][1] - block[d][0]) for piece, _ in runs)


def _crosses(a: int, b: int, lengths: tuple) -> bool:
    """Whether ``[a, b)`` spans more than one of the chunks of ``lengths``."""
    edge = 0
    for length in lengths[:-1]:
        edge += length
        if a < edge < b:
            return True
    return False


def _widest(a: int, b: int, lengths: tuple) -> tuple:
    """The chunk ``(lo, hi)`` of ``lengths`` that holds most of ``[a, b)``."""
    best, start = (0, lengths[0]), 0
    for length in lengths:
        if min(b, start + length) - max(a, start) > min(b, best[1]) - max(a, best[0]):
            best = (start, start + length)
        start += length
    return best


def _volume(bx) -> int:
    """The number of elements of a box (None: empty)."""
    return 0 if bx is None else int(np.prod([hi - lo for lo, hi in bx]))
