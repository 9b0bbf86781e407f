"""Blockwise plans: a program split into blocks along loop dimensions, the footprint of each block
computed by isl.

The program is normalised to statements (``pair_elim(let_lift(e))``: a chain ``let t = value in ...``
whose output is a tree of pairs).  Each statement is split along one loop dimension ``v``:

* a dimension of the generator nest at the top of its value: each block is a slab of the result, and
  the slabs are concatenated;
* or a dimension of the summation chain right below that nest (``gen(k:m) sum(i:n) ...``): each block
  is a partial result, and the partials are added (a tree reduction on Dask).

The dimension is the one of largest extent at the call's sizes (the first on ties); a statement whose
extent is below 2 is one block.  The blocks are cut at the chunk edges of the Dask input axis whose extent
is nearest the dimension's (or every ``chunks`` elements when the caller asks); where no Dask input is
chunked, the statement is one block.

**Footprints.**  Every place the value reads a variable (``x[a0, a1]``, a relation atom ``R(a0, a1)``)
is evaluated on a set of loop points: its enclosing loops, cut by its enclosing Iverson guards (a
guarded access is not evaluated where its guard is false).  For the block ``lo <= v < hi`` that set is
built by the predicates module as an isl set at the call's sizes, and the box of the read is the exact
minimum and maximum of each index over it.  The window of a variable for the block is the box hull of
its reads: a convolution's block ``[lo, hi)`` of ``x[i + j]`` reads ``x[lo : hi + m - 1]``, a 5-point
stencil's block its one-cell border, nothing more.  A variable read whole, or by partial accesses, or of
pair type is passed whole.

**Block programs.**  A block runs the statement's *block program*: its value with ``v``'s range replaced
by the size ``tl_B`` and ``v`` by ``v + tl_off``, every windowed variable ``x`` replaced by a window of
type ``[tl_len_x_0]...R`` read at ``a_k - tl_lo_x_k``.  It is compiled once per statement; a block's
offsets and window lengths are sizes passed at the call.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import islpy as isl
import numpy as np

from tensorlang.errors import UnsupportedError
from tensorlang.nodes import (
    TRUE, Access, Affine, And, Exists, Expr, Gen, Guard, IndexVar, Node, Or, PairType, Pred, R, RelAtom,
    RelType, SizeVar, Sum, TensorType, Type, Var, box, compare, conj, let_chain, Pair, strip_accesses,
    strip_gens, tensor,
)
from tensorlang.substitute import rebuild, substitute_index
from tensorlang.traversal import free_vars, size_vars

__all__ = ["Blocked", "Plan", "StatementPlan", "Read", "reads", "footprint"]


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


def footprint(read: Read, sizes: dict, block: tuple | None = None) -> tuple | None:
    """The box ``((lo_0, hi_0), ...)`` of the indices ``read`` evaluates at ``sizes`` (for the points
    with ``lo <= v < hi`` when ``block = (v, lo, hi)``), or None when it evaluates none."""
    extra = tuple(IndexVar(f"tl_a{k}") for k in range(len(read.indices)))
    dims = tuple(v for v, _ in read.dims) + extra
    where = [box(read.dims), read.pred]
    if block is not None and any(v is block[0] for v in dims):
        v, lo, hi = block
        where += [compare("<=", lo, v), compare("<", v, hi)]
    where += [compare("=", Affine.var(t), a) for t, a in zip(extra, read.indices)]
    from tensorlang.predicates import to_isl

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
    """Fresh size names for a block program (``tl_off``, ``tl_lo_x_0``...), none equal to a name of the
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
    """The block program of a statement split along ``split`` (None: the statement whole), the names of
    its block sizes, and its windows: variable -> (window variable, [lo size], [len size])."""

    expr: Expr
    split: Split | None
    off: SizeVar | None = None
    length: SizeVar | None = None
    windows: dict = field(default_factory=dict)
    library: object = None  # the compiled block program: a dask_graph.BlockLibrary


def block_program(stmt: Statement, split: Split | None) -> BlockProgram:
    """The statement's value with ``split``'s dimension over one block, windowed (module docstring)."""
    if split is None:
        return BlockProgram(stmt.value, None)
    names = _Names(stmt.value)
    off, length = names("blk_off"), names("blk_len")
    value = _reblock(stmt.value, split.var, Affine.var(off), Affine.var(length))
    windows = {}
    for v in stmt.windowed:
        nd = len(v.type.sizes) if isinstance(v.type, RelType) else _ndims(v.type)
        los = [names(f"lo_{v.name}_{k}") for k in range(nd)]
        lens = [names(f"len_{v.name}_{k}") for k in range(nd)]
        wtype = RelType(tuple(Affine.var(s) for s in lens)) if isinstance(v.type, RelType) else tensor(
            [Affine.var(s) for s in lens])
        windows[v] = (Var(v.name, wtype), los, lens)
    return BlockProgram(_windowed(value, windows, {}), split, off, length, windows)


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


@dataclass
class StatementPlan:
    """A statement at the call's sizes: its block program, its blocks ``[(lo, hi)]`` along the split
    dimension (one block ``None`` when whole) and, per block, the window box of every windowed variable
    (None for an empty window)."""

    stmt: Statement
    program: BlockProgram
    extent: int
    blocks: list
    boxes: list  # per block: {Var: box or None}
    shape: tuple

    def __str__(self) -> str:
        from tensorlang.printer import expr_str

        name = self.stmt.var.name if self.stmt.var is not None else "out"
        head = f"{name} = {expr_str(self.stmt.value)}"
        sp = self.program.split
        if sp is None:
            return head + "\n  one block (whole inputs)"
        what = "slabs, concatenated" if sp.kind == "gen" else "partial sums, added"
        lines = [head, f"  split along {sp.kind} {sp.var.name} ({self.extent}) in {len(self.blocks)} blocks "
                       f"({what})"]
        for (lo, hi), bx in zip(self.blocks, self.boxes):
            reads = "  ".join(_box_str(v, b) for v, b in bx.items()) or "-"
            lines.append(f"  {sp.var.name} in [{lo}, {hi}): {reads}")
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

    def __str__(self) -> str:
        sz = ", ".join(f"{k} = {v}" for k, v in self.sizes.items())
        return f"blockwise plan at {sz or 'no sizes'}\n" + "\n".join(str(s) for s in self.statements)

    def collection(self, inputs: dict):
        """The lazy Dask collection of the program on ``inputs`` (see ``codegen.dask_graph``)."""
        from .dask_graph import collection

        return collection(self, inputs)


class Blocked:
    """A kernel's program as statements, with their block programs compiled once each (on demand)."""

    def __init__(self, expr: Expr, target: str, dtype: str):
        from tensorlang.normalize import let_lift, pair_elim

        self.expr, self.target, self.dtype = expr, target, dtype
        bindings, out = let_chain(pair_elim(let_lift(expr)))
        self.statements = [Statement.of(v, e) for v, e in bindings]
        self.output = self._output(out)
        self._programs: dict = {}

    def _output(self, e: Expr):
        if isinstance(e, Pair):
            return (self._output(e.first), self._output(e.second))
        if isinstance(e, Var):
            return e
        self.statements.append(Statement.of(None, e))
        return self.statements[-1]

    def plan(self, inputs: dict, chunks: int | None = None) -> Plan:
        from tensorlang.inputs import infer_sizes

        if self.target != "c":
            raise UnsupportedError(f"blockwise runs on Dask use C kernels; this kernel's target is {self.target!r}")
        if chunks is not None and (isinstance(chunks, bool) or not isinstance(chunks, (int, np.integer))
                                   or chunks < 1):
            raise UnsupportedError(f"chunks must be a positive number of elements per block, got {chunks!r}")
        sizes = infer_sizes(self.expr, inputs)
        axes = _chunked_axes(inputs)
        choices = [self._choice(stmt, sizes, axes, chunks) for stmt in self.statements]
        self._compile([(k, split) for k, (split, _, _) in enumerate(choices)])
        plans = []
        for k, (stmt, (split, extent, bounds)) in enumerate(zip(self.statements, choices)):
            shape = _shape(stmt.value.type, sizes) if _ndims(stmt.value.type) >= 0 else ()
            bp = self._programs[self._key(k, split)]
            if split is None:
                plans.append(StatementPlan(stmt, bp, 0, [None], [{}], shape))
                continue
            boxes = [{v: _hull([footprint(r, sizes, (split.var, lo, hi)) for r in stmt.reads[v]])
                      for v in stmt.windowed} for lo, hi in bounds]
            plans.append(StatementPlan(stmt, bp, extent, bounds, boxes, shape))
        return Plan(sizes, plans, self.output, self.dtype)

    @staticmethod
    def _choice(stmt: Statement, sizes: dict, axes: list, chunks):
        """``(split, extent, blocks)`` for a statement at ``sizes`` (``(None, 0, [])``: whole)."""
        options = [(_value(s.size, sizes), -j, s) for j, s in enumerate(splits(stmt.value))]
        if not options:
            return None, 0, []
        extent, _, split = max(options, key=lambda o: o[:2])
        bounds = _boundaries(extent, axes, chunks)
        return (split, extent, bounds) if len(bounds) >= 2 else (None, 0, [])

    @staticmethod
    def _key(k: int, split: Split | None):
        return k, None if split is None else (split.kind, split.axis, id(split.var))

    def _compile(self, wanted: list) -> None:
        """Compile the block programs not compiled yet, all in one library (one compiler run)."""
        from .build import build_c
        from .c import CEmitter
        from .dask_graph import BlockLibrary
        from .kernel import emitter_for

        todo: list = []
        for k, split in wanted:
            key = self._key(k, split)
            if key not in self._programs and all(t[0] != key for t in todo):
                todo.append((key, block_program(self.statements[k], split)))
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


def _chunked_axes(inputs: dict) -> list[tuple]:
    """The chunks of every axis of every Dask input (in input order), as tuples of block lengths."""
    out = []
    for v in inputs.values():
        for w in (v if isinstance(v, (tuple, list)) else (v,)):
            if hasattr(w, "__dask_graph__") and hasattr(w, "chunks"):
                out.extend(tuple(int(c) for c in ax) for ax in w.chunks)
    return out


def _boundaries(extent: int, axes: list, chunks) -> list[tuple[int, int]]:
    """Blocks ``[(lo, hi)]`` cutting ``range(extent)``: every ``chunks`` elements when given; otherwise at
    the chunk edges of the input axis whose extent is nearest (a convolution's ``[n + m - 1]`` input cuts
    its ``n`` outputs where it is cut), the edges beyond ``extent`` dropped."""
    if extent < 2:
        return []
    if chunks is not None:
        edges = list(range(0, extent, int(chunks))) + [extent]
    else:
        cut = [ax for ax in axes if len(ax) > 1]
        if not cut:
            return []
        nearest = min(cut, key=lambda ax: abs(sum(ax) - extent))
        inner = [int(e) for e in np.cumsum(nearest)[:-1] if 0 < e < extent]
        edges = [0] + sorted(set(inner)) + [extent]
    return [(a, b) for a, b in zip(edges[:-1], edges[1:])]
