"""Blockwise plans: a program split into blocks along loop dimensions, the footprint of each block
computed by isl.

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

**Footprints.**  Every place the value reads a variable (``x[a0, a1]``, a relation atom ``R(a0, a1)``)
is evaluated on a set of loop points: its enclosing loops, cut by its enclosing Iverson guards (a
guarded access is not evaluated where its guard is false).  For a block (``lo_k <= v_k < hi_k`` for each
split dimension) that set is built by the predicates module as an isl set at the call's sizes, and the
box of the read is the exact minimum and maximum of each index over it.  The window of a variable for
the block is the box hull of its reads: a convolution's block ``[lo, hi)`` of ``x[i + j]`` reads
``x[lo : hi + m - 1]``, a 5-point stencil's tile its one-cell border, nothing more; a relation's window
is also clipped to its extent (an atom outside it holds nowhere).  A variable read whole, or by partial accesses, or of
pair type is passed whole.  A block's ``Footprint`` is the bytes its task needs: its windows and whole
reads, its result and its block program's workspace, all at sizes the plan knows.

**Block programs.**  A block runs the statement's *block program*: its value with each split dimension
``v``'s range replaced by a size ``blk_len`` and ``v`` by ``v + blk_off`` (``blk_off_1``... for the next
ones), every windowed variable ``x`` replaced by a window of type ``[len_x_0]...R`` read at
``a_k - lo_x_k``.  The block programs a plan needs are compiled once, together (one compiler run); a
block's offsets and window lengths are sizes passed at the call.

**Plans are cached** per sizes, input chunks and ``chunks`` (an optimiser's loop calls with the same),
and so are their Dask tasks (``Plan.graph``, a ``dask_graph.Graph``): a call on inputs of a chunking
seen before computes no footprint and makes no task.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import islpy as isl
import numpy as np

from tensorlang.declarations import body_of
from tensorlang.errors import UnsupportedError
from tensorlang.nodes import (
    TRUE, Access, Affine, And, Exists, Expr, Gen, Guard, IndexVar, Node, Or, Pred, R, RelAtom,
    RelType, SizeVar, Sum, TensorType, Type, Var, box, compare, conj, let_chain, Pair, strip_accesses,
    strip_gens, tensor,
)
from tensorlang.substitute import rebuild, substitute_index
from tensorlang.traversal import free_vars, size_vars

from .build import build_c
from .c import CEmitter
from .dask_graph import BlockLibrary, Graph, collection
from .generate import emitter_for

__all__ = ["Blocked", "Footprint", "Plan", "StatementPlan", "Read", "reads", "footprint"]


# --------------------------------------------------------------------------------------------------
# statements and where they read


@dataclass(frozen=True)
class Read:
    """One place a value reads ``var``: at ``indices`` (``()`` for a whole read), under the loops ``dims``
    (``(IndexVar, size)`` outermost first) and the guards ``pred``."""

    var: Var
    indices: tuple
    dims: tuple
    pred: Pred


def reads(value: Expr) -> list[Read]:
    """Every read of a variable in ``value`` (accesses, whole uses and relation atoms), each once."""
    out: list[Read] = []
    _reads(value, (), TRUE, out, set())
    return out


def _reads(e, dims: tuple, pred: Pred, out: list, seen: set) -> None:
    key = (id(e), tuple(id(v) for v, _ in dims), id(pred))
    if key in seen:
        return
    seen.add(key)
    if isinstance(e, Access):
        indices, base = strip_accesses(e)
        if isinstance(base, Var):
            out.append(Read(base, indices, dims, pred))
            return
        _reads(base, dims, pred, out, seen)
    elif isinstance(e, Var):
        out.append(Read(e, (), dims, pred))
    elif isinstance(e, (Gen, Sum)):
        _reads(e.body, dims + ((e.var, e.size),), pred, out, seen)
    elif isinstance(e, Guard):
        _atoms(e.pred, dims, pred, out)
        _reads(e.body, dims, conj(pred, e.pred), out, seen)
    else:
        for child in e.children:
            for c in child if isinstance(child, tuple) else (child,):
                if isinstance(c, Expr):
                    _reads(c, dims, pred, out, seen)


def _atoms(p: Pred, dims: tuple, pred: Pred, out: list) -> None:
    """The relation atoms of the guard ``p`` as reads, evaluated (at most) wherever the guard is."""
    if isinstance(p, RelAtom):
        out.append(Read(p.rel, tuple(p.args), dims, pred))
    elif isinstance(p, (And, Or)):
        for q in p.parts:
            _atoms(q, dims, pred, out)
    elif isinstance(p, Exists):
        _atoms(p.body, dims + ((p.var, p.size),), pred, out)


def _ndims(t: Type) -> int:
    k = 0
    while isinstance(t, TensorType):
        k, t = k + 1, t.elem
    return k if t is R else -1


def _windowable(var: Var, rs: list[Read]) -> bool:
    """A variable is read through a window when every read of it is a full access of a real element."""
    if isinstance(var.type, RelType):
        return True
    nd = _ndims(var.type)
    return nd > 0 and all(len(r.indices) == nd for r in rs)


def _shape(t: Type, sizes: dict) -> tuple[int, ...]:
    dims = list(t.sizes) if isinstance(t, RelType) else []
    while isinstance(t, TensorType):
        dims.append(t.size)
        t = t.elem
    return tuple(_value(a, sizes) for a in dims)


def _value(a: Affine, sizes: dict) -> int:
    return int(a.evaluate({v: sizes[v.name] for v in a.size_vars}))


# --------------------------------------------------------------------------------------------------
# footprints


def footprint(read: Read, sizes: dict, block: tuple = ()) -> tuple | None:
    """The box ``((lo_0, hi_0), ...)`` of the indices ``read`` evaluates at ``sizes`` (for the points
    with ``lo <= v < hi`` for every ``(v, lo, hi)`` of ``block``), or None when it evaluates none."""
    extra = tuple(IndexVar(f"tl_a{k}") for k in range(len(read.indices)))
    dims = tuple(v for v, _ in read.dims) + extra
    where = [box(read.dims), read.pred]
    for v, lo, hi in block:
        if any(v is d for d in dims):
            where += [compare("<=", lo, v), compare("<", v, hi)]
    where += [compare("=", Affine.var(t), a) for t, a in zip(extra, read.indices)]
    if isinstance(read.var.type, RelType):  # an atom outside its relation's extent holds nowhere
        for t, extent in zip(extra, _shape(read.var.type, sizes)):
            where += [compare("<=", 0, t), compare("<", t, extent)]
    from tensorlang.isl_sets import to_isl

    s = to_isl(conj(*where), dims)
    for k in reversed(range(s.dim(isl.dim_type.param))):
        name = s.get_dim_name(isl.dim_type.param, k)
        s = s.fix_val(isl.dim_type.param, k, isl.Val(str(sizes[name])))
    if s.is_empty():
        return None
    s = s.project_out(isl.dim_type.set, 0, len(read.dims))
    return tuple((s.dim_min_val(k).to_python(), s.dim_max_val(k).to_python() + 1) for k in range(len(extra)))


def _hull(boxes: list) -> tuple | None:
    boxes = [b for b in boxes if b is not None]
    if not boxes:
        return None
    return tuple((min(b[k][0] for b in boxes), max(b[k][1] for b in boxes)) for k in range(len(boxes[0])))


# --------------------------------------------------------------------------------------------------
# statements and their block programs


@dataclass(frozen=True)
class Split:
    """A loop dimension a statement can be split along: ``kind`` is ``"gen"`` or ``"sum"``; ``axis`` the
    output axis of a gen dimension."""

    kind: str
    axis: int
    var: IndexVar
    size: Affine


def splits(value: Expr) -> list[Split]:
    """The dimensions ``value`` can be split along: its top generators, then the summations right below
    them (guards between allowed)."""
    if _ndims(value.type) < 0:
        return []
    gens, body = strip_gens(value)
    out = [Split("gen", k, v, s) for k, (v, s) in enumerate(gens)]
    while isinstance(body, (Guard, Sum)):
        if isinstance(body, Sum):
            out.append(Split("sum", -1, body.var, body.size))
        body = body.body
    return out


@dataclass
class Statement:
    """``var = value`` (``var`` is None for a part of the output), and its reads grouped by variable."""

    var: Var | None
    value: Expr
    reads: dict = field(default_factory=dict)  # Var -> [Read]
    windowed: tuple = ()  # the variables read through windows

    @staticmethod
    def of(var, value) -> "Statement":
        by_var: dict = {}
        for r in reads(value):
            by_var.setdefault(r.var, []).append(r)
        windowed = tuple(v for v, rs in by_var.items() if _windowable(v, rs))
        return Statement(var, value, by_var, windowed)


class _Names:
    """Fresh size names for a block program (``blk_off``, ``lo_x_0``...), none equal to a name of the
    program."""

    def __init__(self, expr: Expr):
        self.taken = {s.name for s in size_vars(expr)} | {v.name for v in free_vars(expr)}

    def __call__(self, base: str) -> SizeVar:
        name, k = base, 0
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        return SizeVar(name)


@dataclass
class BlockProgram:
    """The block program of a statement split along ``splits`` (none: the statement whole), the names of
    its block sizes (offset and length per split) and its windows: variable -> (window variable,
    [lo size], [len size])."""

    expr: Expr
    splits: tuple = ()
    sizes: tuple = ()  # ((off, len), ...) SizeVars, one pair per split
    windows: dict = field(default_factory=dict)
    library: object = None  # the compiled block program: a dask_graph.BlockLibrary


def block_program(stmt: Statement, splits: tuple) -> BlockProgram:
    """The statement's value with the dimensions of ``splits`` over one block, windowed (module
    docstring)."""
    if not splits:
        return BlockProgram(stmt.value)
    names = _Names(stmt.value)
    value, sizes = stmt.value, []
    for split in splits:
        off, length = names("blk_off"), names("blk_len")
        value = _reblock(value, split.var, Affine.var(off), Affine.var(length))
        sizes.append((off, length))
    windows = {}
    for v in stmt.windowed:
        nd = len(v.type.sizes) if isinstance(v.type, RelType) else _ndims(v.type)
        los = [names(f"lo_{v.name}_{k}") for k in range(nd)]
        lens = [names(f"len_{v.name}_{k}") for k in range(nd)]
        wtype = RelType(tuple(Affine.var(s) for s in lens)) if isinstance(v.type, RelType) else tensor(
            [Affine.var(s) for s in lens])
        windows[v] = (Var(v.name, wtype), los, lens)
    return BlockProgram(_windowed(value, windows, {}), tuple(splits), tuple(sizes), windows)


def _reblock(e: Expr, v: IndexVar, off: Affine, length: Affine) -> Expr:
    if isinstance(e, (Gen, Sum)) and e.var is v:
        return type(e)(v, length, substitute_index(e.body, {v: Affine.var(v) + off}))
    if isinstance(e, (Gen, Sum)):
        return type(e)(e.var, e.size, _reblock(e.body, v, off, length))
    if isinstance(e, Guard):
        return Guard(e.pred, _reblock(e.body, v, off, length))
    raise AssertionError("the split dimension is a binder of the statement's top nest")


def _windowed(node, windows: dict, memo: dict):
    if isinstance(node, (Affine, Type)) or not isinstance(node, Node):
        return node
    if id(node) in memo:
        return memo[id(node)]
    out = None
    if isinstance(node, Access):
        indices, base = strip_accesses(node)
        if isinstance(base, Var) and base in windows:
            w, los, _ = windows[base]
            out = w[tuple(a - Affine.var(lo) for a, lo in zip(indices, los))]
    elif isinstance(node, RelAtom) and node.rel in windows:
        w, los, _ = windows[node.rel]
        out = RelAtom(w, tuple(a - Affine.var(lo) for a, lo in zip(node.args, los)))
    if out is None:
        out = rebuild(node, lambda c: _windowed(c, windows, memo))
    memo[id(node)] = out
    return out


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
    """A statement at the call's sizes: its block program, the cuts ``[(lo, hi), ...]`` of each split
    dimension, its blocks (every combination of cuts, as ``((lo, hi), ...)``, in row-major order; one
    ``()`` when whole), per block the window box of every windowed variable (None: empty), the sizes
    its block program runs at and its ``Footprint``."""

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

        name = self.stmt.var.name if self.stmt.var is not None else "out"
        head = f"{name} = {expr_str(self.stmt.value)}"
        splits = self.program.splits
        if not splits:
            return head + f"\n  one block (whole inputs), holding {self.footprint()}"
        what = {"gen": "slabs, concatenated", "sum": "partial sums, added"}
        lines = [head, "  split along " + ", ".join(
            f"{sp.kind} {sp.var.name} in {len(cut)} ({what[sp.kind]})" for sp, cut in zip(splits, self.cuts))]
        for block, bx in zip(self.blocks, self.boxes):
            reads = "  ".join(_box_str(v, b) for v, b in bx.items()) or "-"
            at = ", ".join(f"{sp.var.name} in [{lo}, {hi})" for sp, (lo, hi) in zip(splits, block))
            lines.append(f"  {at}: {reads}")
        lines.append(f"  a task holds at most {self.footprint()}")
        whole = [v.name for v in self.stmt.reads if v not in self.stmt.windowed]
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
        self._programs: dict = {}
        self._plans: dict = {}  # (sizes, input chunks, chunks) -> Plan

    def _output(self, e: Expr):
        if isinstance(e, Pair):
            return (self._output(e.first), self._output(e.second))
        if isinstance(e, Var):
            return e
        self.statements.append(Statement.of(None, e))
        return self.statements[-1]

    def plan(self, inputs: dict, chunks: int | None = None) -> Plan:
        """The plan at ``inputs``' sizes and chunks (cached: an optimiser's loop calls with the same)."""
        from tensorlang.inputs import infer_sizes

        if self.target != "c":
            raise UnsupportedError(f"blockwise runs on Dask use C kernels; this kernel's target is {self.target!r}")
        if chunks is not None and (isinstance(chunks, bool) or not isinstance(chunks, (int, np.integer))
                                   or chunks < 1):
            raise UnsupportedError(f"chunks must be a positive number of elements per block, got {chunks!r}")
        sizes = infer_sizes(self.expr, inputs)
        layout = _input_chunks(self.expr, inputs)
        key = (tuple(sorted(sizes.items())), tuple(sorted((v.name, c) for v, c in layout.items())), chunks)
        if key not in self._plans:
            if len(self._plans) >= 8:
                self._plans.pop(next(iter(self._plans)))
            self._plans[key] = self._plan(sizes, layout, chunks)
        return self._plans[key]

    def _plan(self, sizes: dict, layout: dict, chunks) -> Plan:
        inputs_layout = dict(layout)
        choices = []
        for stmt in self.statements:
            splits, cuts = self._choice(stmt, sizes, layout, chunks)
            choices.append((splits, cuts))
            if stmt.var is not None and splits:
                layout[stmt.var] = _result_chunks(_shape(stmt.value.type, sizes), splits, cuts)
        self._compile([(k, splits) for k, (splits, _) in enumerate(choices)])
        plans = []
        for k, (stmt, (splits, cuts)) in enumerate(zip(self.statements, choices)):
            shape = _shape(stmt.value.type, sizes) if _ndims(stmt.value.type) >= 0 else ()
            bp = self._programs[self._key(k, splits)]
            blocks = list(itertools.product(*cuts))
            boxes = [{v: _hull([footprint(r, sizes, tuple((sp.var, lo, hi) for sp, (lo, hi) in zip(splits, b)))
                                for r in stmt.reads[v]]) for v in stmt.windowed} for b in blocks] \
                if splits else [{}]
            plans.append(StatementPlan(stmt, bp, cuts, blocks, boxes, shape, _result_chunks(shape, splits, cuts)))
            plans[-1].measure(sizes)
        return Plan(sizes, plans, self.output, self.dtype, inputs_layout)

    @staticmethod
    def _choice(stmt: Statement, sizes: dict, layout: dict, chunks):
        """``(splits, cuts)`` for a statement: the dimensions cut into two blocks or more, and their cuts."""
        chosen, cuts = [], []
        for sp in splits(stmt.value):
            extent = _value(sp.size, sizes)
            edges = _edges(sp, extent, stmt, layout, chunks)
            if edges:
                bounds = [0] + edges + [extent]
                chosen.append(sp)
                cuts.append([(a, b) for a, b in zip(bounds[:-1], bounds[1:])])
        return tuple(chosen), cuts

    @staticmethod
    def _key(k: int, splits: tuple):
        return k, tuple((sp.kind, sp.axis, id(sp.var)) for sp in splits)

    def _compile(self, wanted: list) -> None:
        """Compile the block programs not compiled yet, all in one library (one compiler run)."""
        todo: list = []
        for k, splits in wanted:
            key = self._key(k, splits)
            if key not in self._programs and all(t[0] != key for t in todo):
                todo.append((key, block_program(self.statements[k], splits)))
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
