"""Outputs written at positions read from an index array: the C of a sparse Jacobian's values kernel.

A kernel emitted with ``scatter`` (``Positions``: the C type of the positions, ``int32_t`` or ``int64_t``,
and each output's pattern) takes, in each output's place, an array of that type over the output's points
(C order), and after them one array of reals, ``tl_data``: the point ``g`` of output ``k`` is written to
``tl_data[outk[g]]``.  So the values of every piece of a sparse Jacobian go straight to their positions in
the CSR ``data`` (``derive.sparse.SparseJacobian.pattern``), in the one pass that computes them.  A gather's
loop nest runs over the output's pattern only (its points outside the pattern, whose positions are
negative, are never visited, and it needs no test); the other ways of writing a statement (interchanged or
chunked reductions, a scalar) write where the position is not negative.  No output is a BLAS call's target
there (``emit_stmt``).

The sweep.  Where every output is a gather (or one entry) with no long reduction in its body, the outputs
are one loop nest (``emit_sweep``): each point of each output is scheduled, by isl, at its entry's
coordinates (the rows' indices, then the columns', ``Positions.entries``), so the nest runs over the rows
of the matrix and writes each row's entries together, in the order of ``data``: one pass over ``data``,
where a nest per output would pass over it once per output, writing a few entries of each row each
time.  A temporary
that only the outputs read, at a first index within a fixed distance of the reading entry's first
coordinate (``sweep_temporaries``: a tangent of a Hessian read at the neighbouring rows), is computed a
block of rows at a time beside the rows of the sweep that read it, into a buffer on the stack, as
``codegen.groups`` computes a temporary beside its gathers: it never goes to memory.
"""
from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from tensorlang.nodes import TRUE, Affine, Guard, IndexVar, Pred, SizeVar, box, conj, drop_conjunct, walk
from tensorlang.predicates import has_relations
from tensorlang.substitute import substitute_index

from . import domains as D
from .groups import accesses, reads
from .ir import Array, MaxReduce, Reduce, Stmt
from .loops import User, loop_nest
from .schedule import GROUP_BUFFER, Leaf

__all__ = ["Positions", "Scatter"]

SHORT = 64   # the most points of a reduction in a statement of the sweep


def _short(red) -> bool:
    """A reduction over constant extents of at most ``SHORT`` points in all."""
    count = 1
    for size in red.sizes:
        if not size.is_const:
            return False
        count *= max(size.const, 0)
    return count <= SHORT


@dataclass(frozen=True)
class Positions:
    """How a kernel's outputs are written (``codegen.scatter``): ``ctype`` the C type of the positions,
    ``patterns`` for each output ``(its loop variables, the predicate over them where it is in the pattern)``,
    ``entries`` for each output the coordinates of its point's entry (the rows' indices, then the columns',
    affine in its loop variables; empty: unknown, no sweep), ``rows`` the extent of their first coordinate,
    ``stored`` for each output None or how it is stored over a relation's entries
    (``derive.sparse.SparseJacobian.stored``: its positions are over its other loops and then the entries of
    the relation, ``emit_over_entries``)."""

    ctype: str
    patterns: tuple[tuple[tuple, Pred], ...]
    entries: tuple[tuple[Affine, ...], ...] = ()
    rows: Affine | None = None   # the extent of the entries' first coordinate
    stored: tuple = ()   # for each output, None or (atom, ka, kb): its points are over the atom's relation's entries


class Scatter:
    """The scattered-output half of an emitter (needs ``scatter``, ``prog``, ``caps``, ``linear`` and
    ``layout``); with ``scatter`` None, outputs are plain arrays."""

    scatter: str | None = None

    def scattered(self, arr: Array) -> bool:
        return self.scatter is not None and arr.kind == "output"

    def pattern(self, arr: Array, gv: tuple) -> Pred:
        """Where the statement ``arr[gv] = ...`` is in its output's pattern (TRUE for an array not scattered)."""
        if not self.scattered(arr):
            return TRUE
        variables, pred = self.scatter.patterns[self.prog.output_arrays().index(arr)]
        return substitute_index(pred, {v: Affine.var(g) for v, g in zip(variables, gv)})

    def written(self, stmt: Stmt) -> Pred:
        """Where ``stmt`` writes: its target's box, within its output's pattern where the output is scattered."""
        return conj(box(zip(stmt.vars, stmt.target.dims)), self.pattern(stmt.target, stmt.vars))

    def sweep(self) -> list[Stmt]:
        """The statements of the outputs, when they are written in one sweep over the entries
        (``emit_sweep``): several outputs, each one gather (or one entry) whose reductions are short (over
        constant extents of at most ``SHORT`` points: a long one has schedules of its own); else ``[]``."""
        if self.scatter is None or not self.scatter.entries or any(has_relations(p) for _, p in self.scatter.patterns):
            return []
        outs = self.prog.output_arrays()
        stmts = [s for s in self.prog.stmts if any(s.target is a for a in outs)]
        if len(outs) < 2 or len(stmts) != len(outs) or any(
                s.contraction is not None or has_relations(s.body)
                or any(isinstance(n, (Reduce, MaxReduce)) and not _short(n) for n in walk(s.body)) for s in stmts):
            return []
        return stmts

    def stored_over_entries(self, stmt: Stmt):
        """``(atom, ka, kb)`` over ``stmt``'s variables where it writes an output stored over the entries of
        the atom's relation (``Positions.stored``), else None."""
        if not self.scattered(stmt.target) or not any(self.scatter.stored):
            return None
        k = self.prog.output_arrays().index(stmt.target)
        stored = self.scatter.stored[k]
        if stored is None:
            return None
        atom, ka, kb = stored
        at = {v: Affine.var(g) for v, g in zip(self.scatter.patterns[k][0], stmt.vars)}
        return substitute_index(atom, at), ka, kb

    def emit_over_entries(self, stmt: Stmt, stored, scope) -> None:
        """An output stored over the entries of a relation ``E`` (``stored``: ``(E(u + c, w + d), ka, kb)``
        over its variables): its other variables over their extents, ``u`` over its extent, and ``w`` over
        the entries ``p`` of row ``u + c`` of ``E``'s CSR form, writing at the position of ``(the others,
        p)``; O(nnz) points for each of the others, where the box has the extent of ``w`` for each entry.
        Every entry of the pattern is written (a zero where the statement's guard is false)."""
        atom, ka, kb = stored
        arr, gv = stmt.target, stmt.vars
        pred, body = (stmt.body.pred, stmt.body.body) if isinstance(stmt.body, Guard) else (TRUE, stmt.body)
        rel = self.relations[id(atom.rel)]
        rel.csr = True
        ptr, idx = rel.cname + "_ptr", rel.cname + "_idx"
        row, col = atom.args
        u, w = gv[ka], gv[kb]
        others = [v for k, v in enumerate(gv) if k not in (ka, kb)]
        sc = scope.block(parallel_ok=False)
        nnz = self.fresh("nnz")
        sc.line(f"const int64_t {nnz} = {ptr}[{self.affine(rel.dims[0])}];")
        work = f"{nnz} * ({self.body_work(body)})"
        inner, bound, first = sc, scope.bound, scope.parallel_ok
        for v in [*others, u]:
            name, extent = self.names.var(v), self.affine(arr.dims[gv.index(v)])
            bound += (v,)
            inner = inner.loop(name, f"int64_t {name} = 0", f"{name} < {extent}", f"{name}++", bound=bound,
                               threads=self.threads(work, None, f"tl_max(1, ({extent}) / 32)") if first else None)
            first = False
        r, p, at = self.fresh("row"), self.fresh("p"), self.fresh("at")
        inner.line(f"const int64_t {r} = {self.affine(row)};")
        entries = inner.branch(f"{r} >= 0 && {r} < {self.affine(rel.dims[0])}").loop(
            p, f"int64_t {p} = {ptr}[{r}]", f"{p} < {ptr}[{r} + 1]", f"{p}++", bound=bound + (w,))
        entries.line(f"const int64_t {self.names.var(w)} = (int64_t){idx}[{p}] - ({self.affine(col - Affine.var(w))});")
        lin = self.linear(tuple(arr.dims[gv.index(v)] for v in others), [Affine.var(v) for v in others])
        entries.line(f"const int64_t {at} = {arr.cname}[({lin}) * {nnz} + {p}];")
        written = entries.branch(f"{at} >= 0")
        cond = self.pred(drop_conjunct(pred, atom), written)   # (the atom holds at an entry)
        self.write_guarded(written, cond, body, lambda value: f"tl_data[{at}] = {value};")

    def entry_of(self, stmt: Stmt) -> list[Affine]:
        """The coordinates of the entry of ``stmt``'s point (an output's), over its variables."""
        k = self.prog.output_arrays().index(stmt.target)
        at = dict(zip(self.scatter.patterns[k][0], map(Affine.var, stmt.vars)))
        return [substitute_index(a, at) for a in self.scatter.entries[k]]

    def sweep_temporaries(self, stmts: list[Stmt]) -> list[tuple[Stmt, int, int]]:
        """The temporaries that only the sweep's statements ``stmts`` read, each a gather (no reduction) that
        reads no other of them, read at first indices between ``lo`` and ``hi`` (constants) from the first
        coordinate of the reading point's entry: ``[(statement, lo, hi)]``."""
        if self.scatter.rows is None:
            return []
        sweep = {id(s) for s in stmts}
        out: list = []
        for t in self.prog.stmts:
            arr = t.target
            if arr.kind != "temp" or not t.vars or len(t.vars) != len(arr.dims) or t.contraction is not None \
                    or any(isinstance(n, (Reduce, MaxReduce)) for n in walk(t.body)) \
                    or any(reads(t.body, c.target.key) for c, _, _ in out):
                continue
            readers = [s for s in self.prog.stmts if s is not t and reads(s.body, arr.key)]
            if not readers or any(id(s) not in sweep for s in readers):
                continue
            reach = [self.row_reach(s, arr) for s in readers]
            if any(r is None for r in reach):
                continue
            out.append((t, min(lo for lo, _ in reach), max(hi for _, hi in reach)))
        return out

    def row_reach(self, stmt: Stmt, arr: Array) -> tuple[int, int] | None:
        """The least and the greatest first index of ``arr`` that a point of output statement ``stmt`` reads,
        less the first coordinate of the point's entry, over the statement's pattern; ``None`` unless both are
        constants."""
        row = self.entry_of(stmt)[0]
        dom = D.domain(self.written(stmt), stmt.vars, (), self.names)
        if dom.is_empty():
            return None
        lows, highs = [], []
        for index, _ in accesses(stmt.body, arr.key, len(arr.dims), {}):
            if index is None or any(isinstance(v, IndexVar) and all(v is not g for g in stmt.vars) for v, _ in index.terms):
                return None
            offset = self.isl_form(dom.get_space(), index - row).intersect_domain(dom)
            low, high = offset.min_val(), offset.max_val()
            if not (low.is_int() and high.is_int()):
                return None
            lows.append(low.to_python())
            highs.append(high.to_python())
        return (min(lows), max(highs)) if lows else None

    def emit_sweep(self, stmts: list[Stmt], temps: list, scope) -> None:
        """The outputs ``stmts`` (``sweep``) and the temporaries ``temps`` only they read (``sweep_temporaries``):
        the temporaries a block of rows at a time, each block's window of them (its rows widened by their
        reach) computed into a buffer on the stack and the block's rows of the outputs swept on it, the
        blocks in parallel; as many rows a block as keep the buffers within ``GROUP_BUFFER`` elements (else,
        or with no such temporary, the temporaries whole and then one sweep)."""
        if not temps:
            self.emit_sweep_nest(stmts, scope)
            return
        sc = scope.block()
        rows, chunk, nch, q, lo, hi = (self.fresh(b) for b in ("rows", "chunk", "nch", "q", "lo", "hi"))
        widths = [(self.size_product(self.layout(t.target)[1:]), high - low) for t, low, high in temps]
        per_row = " + ".join(f"({w})" for w, _ in widths)
        halo = " + ".join(f"({w}) * {span}" for w, span in widths)
        sc.line(f"const int64_t {rows} = {self.affine(self.scatter.rows)};")
        sc.line(f"const int64_t {chunk} = ({GROUP_BUFFER} - ({halo})) / tl_max(1, {per_row});")
        blocks, whole = sc.branch(f"{chunk} >= 1", orelse=True)
        for t, _, _ in temps:
            self.emit_stmt(t, whole)
        self.emit_sweep_nest(stmts, whole)
        blocks.line(f"const int64_t {nch} = ({rows} + {chunk} - 1) / {chunk};")
        work = self.work(stmts)
        body = blocks.loop(q, f"int64_t {q} = 0", f"{q} < {nch}", f"{q} += 1",
                           threads=self.threads(work, None, "1"), parallel_ok=False)
        body.line(f"const int64_t {lo} = {q} * {chunk}, {hi} = tl_min({lo} + {chunk}, {rows});")
        for (t, low, high), (width, span) in zip(temps, widths):
            arr, buf, tlo, thi = t.target, self.fresh("buf"), self.fresh("tlo"), self.fresh("thi")
            body.line(f"/* {arr.label}: the rows the block reads */")
            body.line(f"const int64_t {tlo} = tl_max(0, {lo} + ({low})), "
                      f"{thi} = tl_min({self.affine(arr.dims[0])}, {hi} + ({high}));")
            body.line(f"real {buf}[({chunk} + {span}) * ({width})];")
            body.line(f"real *const {arr.cname} = {buf} - {tlo} * ({width});")
            pred, value = (t.body.pred, t.body.body) if isinstance(t.body, Guard) else (TRUE, t.body)
            self.emit_gather(t, pred, value, body, window=(tlo, thi))
        self.emit_sweep_nest(stmts, body, rows=(lo, hi))

    def emit_sweep_nest(self, stmts: list[Stmt], scope, rows: tuple[str, str] | None = None) -> None:
        """The outputs ``stmts`` (``sweep``) in one isl loop nest that runs their points in the order of their
        entries: a point of output ``k`` over ``g`` is scheduled at ``(its entry's coordinates, k, g)``.  The
        nest runs every point of the pattern once, in the order of ``data``, so within an iteration of an
        outermost loop the positions are consecutive: the first is read, the others counted.  ``rows``: C
        names ``(lo, hi)``, the points whose entry's first coordinate is in ``[lo, hi)`` only."""
        names = self.names
        width = max(len(s.vars) for s in stmts)   # (an output of one entry has none)
        parts, schedules, known = [], {}, {}
        for k, stmt in enumerate(stmts):
            gv = stmt.vars
            pred, body = (stmt.body.pred, stmt.body.body) if isinstance(stmt.body, Guard) else (TRUE, stmt.body)
            ranges = self.written(stmt)
            dom_all = D.domain(ranges, gv, scope.bound, names)
            dom_c = D.domain(conj(ranges, pred), gv, scope.bound, names)
            entry = self.entry_of(stmt)
            order = [*entry, Affine.const_(k), *map(Affine.var, gv), *[Affine.const_(0)] * (width - len(gv))]
            if rows is not None:
                dom_all, dom_c = (self.rows_between(d, entry[0], *rows) for d in (dom_all, dom_c))
            pieces = [(f"C{k}_{j}", piece) for j, piece in enumerate(self.split_by_guards(dom_c, body, gv, scope))]
            for name, piece in pieces + [(f"Z{k}", dom_all - dom_c)]:
                parts.append((name, piece))
                schedules[name] = self.schedule_map(piece.align_params(scope.ctx.get_space()), order)
                known[name] = (stmt, piece, body if name[0] == "C" else None)
        its = [self.fresh("e") for _ in order]
        tree = loop_nest(parts, scope.ctx, its, schedules=schedules)
        if tree is None:
            return

        counting = []   # (inside an outermost loop, whose body counts the positions in tl_k)

        def user(node: User, sc) -> None:
            stmt, dom, body = known[node.name]
            for v, a in zip(stmt.vars, node.args):
                sc.line(f"const int64_t {names.var(v)} = {a};")
            at = [Affine.var(v) for v in stmt.vars]
            value = "0"
            if body is not None:
                inner = sc.child(ctx=D.lift_to_context(node.domain if node.domain is not None else dom) & sc.ctx,
                                 bound=sc.bound + stmt.vars, parallel_ok=False)
                value = self.expr(body, inner)
            if not counting:
                sc.line(self.store(stmt.target, at, value, True))
                return
            position = f"{stmt.target.cname}[{self.linear(self.layout(stmt.target), at)}]"
            sc.line(f"if (tl_k < 0) tl_k = {position};")
            sc.line(f"tl_data[tl_k++] = {value};")

        def outermost(tree, sc) -> bool:
            """An outermost loop: its iterations are runs of consecutive entries, so each counts its positions
            from the first one's (read from its positions array); it may run in parallel."""
            if not tree.outermost:
                return False
            body = self.for_loop(tree, sc, sc.parallel_ok, work, None)
            body.line("int64_t tl_k = -1;")
            counting.append(tree)
            self.emit_tree(tree.body, body, leaf, False, work)
            counting.pop()
            return True

        work = self.work(stmts)
        leaf = Leaf(user, loop=outermost)
        self.emit_tree(tree, scope, leaf, parallel=scope.parallel_ok, work=work)

    def schedule_map(self, dom, order) -> "isl.Map":
        """The map from ``dom``'s space to the affine forms ``order`` of its variables and the sizes."""
        out = None
        for a in order:
            m = isl.Map.from_pw_aff(self.isl_form(dom.get_space(), a))
            out = m if out is None else out.flat_range_product(m)
        return out

    def isl_form(self, space, a: Affine) -> "isl.PwAff":
        """The affine form ``a`` (of index variables and sizes, by their C names) over isl's ``space``."""
        v = isl.affs_from_space(space)
        out = v[0] + a.const
        for var, c in a.terms:
            out = out + v[self.names.size(var.name) if isinstance(var, SizeVar) else self.names.var(var)] * c
        return out

    def rows_between(self, dom, row: Affine, lo: str, hi: str):
        """The points of ``dom`` whose entry's first coordinate ``row`` lies in ``[lo, hi)`` (C names, parameters)."""
        dom = dom.align_params(isl.Space.create_from_names(D.CTX, set=[], params=[lo, hi]))
        v, at = isl.affs_from_space(dom.get_space()), self.isl_form(dom.get_space(), row)
        return dom & v[lo].le_set(at) & at.lt_set(v[hi])

    def store(self, arr: Array, idx, value: str, in_pattern: bool = False) -> str:
        """The C statement that writes ``value`` at ``idx`` of ``arr``; ``in_pattern``: ``idx`` is known to be
        in the output's pattern as isl sees it (a scattered one's position is not negative there, unless the
        pattern reads a relation, which isl's domains leave out: then the position is tested)."""
        if not self.scattered(arr):
            return super().store(arr, idx, value)
        at = f"{arr.cname}[{self.linear(self.layout(arr), idx)}]"
        if in_pattern and not has_relations(self.scatter.patterns[self.prog.output_arrays().index(arr)][1]):
            return f"tl_data[{at}] = {value};"
        return f"{{ const int64_t tl_at = {at}; if (tl_at >= 0) tl_data[tl_at] = {value}; }}"

    def output_declarations(self, k: int) -> list[str]:
        """The outputs' arguments from ``tl_args[k]`` on (positions, then ``tl_data``, when scattered)."""
        restrict = self.caps.restrict
        if self.scatter is None:
            return [f"real *{restrict} {a.cname} = (real *)tl_args[{k + j}];"
                    for j, a in enumerate(self.prog.output_arrays())]
        outs, ctype = self.prog.output_arrays(), self.scatter.ctype
        lines = [f"const {ctype} *{restrict} {a.cname} = (const {ctype} *)tl_args[{k + j}];" for j, a in enumerate(outs)]
        return lines + [f"real *{restrict} tl_data = (real *)tl_args[{k + len(outs)}];"]

    def parameter_type(self, name: str, target: Array) -> str:
        """The C type of array ``name`` as a parameter of the function of a statement writing ``target``."""
        if name == "tl_data":
            return "real *"
        if self.scatter is not None and name in {a.cname for a in self.prog.output_arrays()}:
            return f"const {self.scatter.ctype} *"
        return "real *" if name == target.cname else "const real *"
