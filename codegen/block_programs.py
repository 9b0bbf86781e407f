"""A program's statements, where they read, the footprint isl computes for a block of one, and the block
programs that run a block.

**Statements and reads.**  ``Statement.of(var, value)`` groups the places ``value`` reads a variable
(``Read``: an access ``x[a0, a1]``, a whole use, a relation atom ``R(a0, a1)``, with its enclosing loops
and Iverson guards) by variable; a variable is read through a window when every read of it is a full
access of a real element (or it is a relation).  ``splits(value)`` are the loop dimensions a statement
can be split along: its top generators (blocks are slabs of the result), then the summations right below
them (blocks are partial results).

**Footprints.**  A read is evaluated on its enclosing loops cut by its enclosing guards (a guarded
access is not evaluated where its guard is false).  For a block (``lo_k <= v_k < hi_k`` for each split
dimension) that set is built by the predicates module as an isl set at the call's sizes, and the box of
the read (``footprint``) is the exact minimum and maximum of each index over it.  The window of a
variable for the block is the box hull of its reads: a convolution's block ``[lo, hi)`` of ``x[i + j]``
reads ``x[lo : hi + m - 1]``, a 5-point stencil's tile its one-cell border, nothing more; a relation's
window is also clipped to its extent (an atom outside it holds nowhere).

**Block programs.**  A block runs its statement's *block program*: the value with each split dimension
``v``'s range replaced by a size ``blk_len`` and ``v`` by ``v + blk_off`` (``blk_off_1``... for the next
ones), every windowed variable ``x`` replaced by a window of type ``[len_x_0]...R`` read at
``a_k - lo_x_k``; a block's offsets and window corners and lengths are sizes passed at the call.

**Fused statements.**  A statement ``t = gen(i0:s0, ...) e`` (a generator nest over every axis of its
result) may be computed inside the block program of its reader instead of as blocks of its own
(overlapped tiling): for each block, ``group_boxes`` takes the window of ``t`` the reader's block reads
(isl, as above) and computes ``t`` on that window, so its reads are evaluated on the window's box and
their windows follow (a chain of fused statements: the windows grow backwards through it).  The block
program is then itself a program, ``let t = gen(i0:len_t_0, ...) e[i_k := i_k + lo_t_k] in <the
reader's block program>``, with one window of each input shared by all the statements it holds, which
the single-kernel compiler compiles (and fuses) as any program.  Its task is given only what no
statement of it computes (``BlockProgram.reads``).  A reader that is not split is one block: the
statements fused into it are computed whole, ``let t = e in <the reader's value>``, with no window.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import islpy as isl

from tensorlang.nodes import (
    TRUE, Access, Affine, And, Exists, Expr, Gen, Guard, IndexVar, Max, Node, Or, Pred, R, RelAtom,
    RelType, SizeVar, Sum, TensorType, Type, Var, box, build_lets, compare, conj, strip_accesses,
    strip_gens, tensor,
)
from tensorlang.substitute import freshen, rebuild, substitute_index
from tensorlang.traversal import free_vars, size_vars

__all__ = ["BlockProgram", "Read", "Split", "Statement", "block_program", "footprint", "fusable",
           "group_boxes", "group_reads", "hull", "ndims", "reads", "shape_at", "splits", "value_at"]


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
    elif isinstance(e, (Gen, Sum, Max)):  # a maximum reads its whole range (it is never split)
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


def ndims(t: Type) -> int:
    k = 0
    while isinstance(t, TensorType):
        k, t = k + 1, t.elem
    return k if t is R else -1


def _windowable(var: Var, rs: list[Read]) -> bool:
    """A variable is read through a window when every read of it is a full access of a real element."""
    if isinstance(var.type, RelType):
        return True
    nd = ndims(var.type)
    return nd > 0 and all(len(r.indices) == nd for r in rs)


def shape_at(t: Type, sizes: dict) -> tuple[int, ...]:
    dims = list(t.sizes) if isinstance(t, RelType) else []
    while isinstance(t, TensorType):
        dims.append(t.size)
        t = t.elem
    return tuple(value_at(a, sizes) for a in dims)


def value_at(a: Affine, sizes: dict) -> int:
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
        for t, extent in zip(extra, shape_at(read.var.type, sizes)):
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


def hull(boxes: list) -> tuple | None:
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
    if ndims(value.type) < 0:
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
    programs ``exprs``."""

    def __init__(self, exprs):
        self.taken = set()
        for e in exprs:
            self.taken |= {s.name for s in size_vars(e)} | {v.name for v in free_vars(e)}

    def __call__(self, base: str) -> SizeVar:
        name, k = base, 0
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        return SizeVar(name)


@dataclass
class BlockProgram:
    """The block program of a statement split along ``splits`` (none: the statement whole), with the
    statements ``fused`` into it (module docstring), the names of its block sizes (offset and length per
    split), its windows (variable -> (window variable, [lo size], [len size]); a fused statement's
    variable among them) and the variables its task is given (``reads``: read, not computed in it)."""

    expr: Expr
    splits: tuple = ()
    sizes: tuple = ()  # ((off, len), ...) SizeVars, one pair per split
    windows: dict = field(default_factory=dict)
    reads: tuple = ()
    fused: tuple = ()  # Statements, in program order
    library: object = None  # the compiled block program: a dask_graph.BlockLibrary


def group_reads(members: tuple) -> tuple[tuple, tuple]:
    """``(reads, windowed)`` of statements run in one block program: the variables they read that none of
    them computes, in order of first read, and those of them read through a window by every member that
    reads them."""
    made = [m.var for m in members]
    order: list = []
    for m in members:
        order += [v for v in m.reads if v not in made and v not in order]
    windowed = tuple(v for v in order if all(v in m.windowed for m in members if v in m.reads))
    return tuple(order), windowed


def group_boxes(members: tuple, splits: tuple, block: tuple, sizes: dict) -> dict:
    """``{Var: box or None}`` for one block of the last of ``members`` (``((lo, hi), ...)`` along
    ``splits``), the others fused into its block program: the windows of what it reads, and of each
    fused statement the box of its result its readers read (a fused statement is computed on that box,
    so its own reads are evaluated there)."""
    *fused, sink = members
    windowed = group_reads(members)[1] + tuple(m.var for m in fused)
    boxes: dict = {}
    for m in reversed(members):
        if m is sink:
            at = tuple((sp.var, lo, hi) for sp, (lo, hi) in zip(splits, block))
        elif boxes.get(m.var) is None:  # none of its result is read: it computes nothing
            continue
        else:
            at = tuple((v, lo, hi) for (v, _), (lo, hi) in zip(strip_gens(m.value)[0], boxes[m.var]))
        for v, rs in m.reads.items():
            if v in windowed:
                boxes[v] = hull([boxes.get(v)] + [footprint(r, sizes, at) for r in rs])
    return {v: boxes.get(v) for v in windowed}


def block_program(stmt: Statement, splits: tuple, fused: tuple = ()) -> BlockProgram:
    """The statement's value with the dimensions of ``splits`` over one block, windowed, and the
    statements ``fused`` (whose values are generator nests over all their axes) computed on their
    windows before it (module docstring); with no ``splits``, the value and ``fused`` whole."""
    members = (*fused, stmt)
    if not splits:   # one block: the statements fused into it computed whole, before it
        return BlockProgram(build_lets([(m.var, m.value) for m in fused], stmt.value),
                            reads=group_reads(members)[0], fused=tuple(fused))
    names = _Names(m.value for m in members)
    value, sizes = stmt.value, []
    for split in splits:
        off, length = names("blk_off"), names("blk_len")
        value = _reblock(value, split.var, Affine.var(off), Affine.var(length))
        sizes.append((off, length))
    reads, windowed = group_reads(members)
    windows = {v: _window(v, names) for v in windowed + tuple(m.var for m in fused)}
    bindings = []
    for m in fused:  # on its window: its generators' ranges are the window's, offset by its corner
        w, los, lens = windows[m.var]
        computed = m.value
        for (v, _), lo, length in zip(strip_gens(m.value)[0], los, lens):
            computed = _reblock(computed, v, Affine.var(lo), Affine.var(length))
        bindings.append((w, _windowed(freshen(computed), windows, {})))  # its binders apart from others'
    expr = build_lets(bindings, _windowed(value, windows, {}))
    return BlockProgram(expr, tuple(splits), tuple(sizes), windows, reads, tuple(fused))


def _window(v: Var, names: _Names) -> tuple:
    """A window of ``v``: ``(window variable, [lo size], [len size])``."""
    nd = len(v.type.sizes) if isinstance(v.type, RelType) else ndims(v.type)
    los = [names(f"lo_{v.name}_{k}") for k in range(nd)]
    lens = [names(f"len_{v.name}_{k}") for k in range(nd)]
    wtype = RelType(tuple(Affine.var(s) for s in lens)) if isinstance(v.type, RelType) else tensor(
        [Affine.var(s) for s in lens])
    return Var(v.name, wtype), los, lens


def fusable(stmt: Statement) -> bool:
    """Whether the statement can be computed on a window inside a reader's block program: a generator nest
    over every axis of its result."""
    nd = ndims(stmt.value.type) if stmt.var is not None else -1
    return nd > 0 and len(strip_gens(stmt.value)[0]) == nd


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

