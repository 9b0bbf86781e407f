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

The sweep.  Where every output is a gather (no reduction in its body), the outputs are one loop nest
(``emit_sweep``): each point of each output is scheduled, by isl, at its entry's coordinates (the rows'
indices, then the columns', ``Positions.entries``), so the nest runs over the rows of the matrix and
writes each row's entries together, in the order of ``data``: one pass over ``data``, where a nest per
output would pass over it once per output, writing a few entries of each row each time.
"""
from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from tensorlang.nodes import TRUE, Affine, Guard, Pred, SizeVar, box, conj, walk
from tensorlang.predicates import has_relations
from tensorlang.substitute import substitute_index

from . import domains as D
from .ir import Array, MaxReduce, Reduce, Stmt
from .loops import User, loop_nest
from .schedule import Leaf

__all__ = ["Positions", "Scatter"]


@dataclass(frozen=True)
class Positions:
    """How a kernel's outputs are written (``codegen.scatter``): ``ctype`` the C type of the positions,
    ``patterns`` for each output ``(its loop variables, the predicate over them where it is in the pattern)``,
    ``entries`` for each output the coordinates of its point's entry (the rows' indices, then the columns',
    affine in its loop variables; empty: unknown, no sweep)."""

    ctype: str
    patterns: tuple[tuple[tuple, Pred], ...]
    entries: tuple[tuple[Affine, ...], ...] = ()


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

    def sweep(self) -> list[Stmt]:
        """The statements of the outputs, when they are written in one sweep over the entries
        (``emit_sweep``): several outputs, each one gather with no reduction in its body; else ``[]``."""
        if self.scatter is None or not self.scatter.entries:
            return []
        outs = self.prog.output_arrays()
        stmts = [s for s in self.prog.stmts if any(s.target is a for a in outs)]
        if len(outs) < 2 or len(stmts) != len(outs) or any(
                not s.vars or s.contraction is not None or has_relations(s.body)
                or any(isinstance(n, (Reduce, MaxReduce)) for n in walk(s.body)) for s in stmts):
            return []
        return stmts

    def emit_sweep(self, stmts: list[Stmt], scope) -> None:
        """The outputs ``stmts`` (``sweep``) in one isl loop nest that runs their points in the order of their
        entries: a point of output ``k`` over ``g`` is scheduled at ``(its entry's coordinates, k, g)``.  The
        nest runs every point of the pattern once, in the order of ``data``, so within an iteration of an
        outermost loop the positions are consecutive: the first is read, the others counted."""
        names, outs = self.names, self.prog.output_arrays()
        width = max(len(s.vars) for s in stmts)
        parts, schedules, known, work = [], {}, {}, []
        for k, stmt in enumerate(stmts):
            arr, gv = stmt.target, stmt.vars
            pred, body = (stmt.body.pred, stmt.body.body) if isinstance(stmt.body, Guard) else (TRUE, stmt.body)
            ranges = conj(box(zip(gv, arr.dims)), self.pattern(arr, gv))
            dom_all = D.domain(ranges, gv, scope.bound, names)
            dom_c = D.domain(conj(ranges, pred), gv, scope.bound, names)
            entry = [substitute_index(a, dict(zip(self.scatter.patterns[outs.index(arr)][0], map(Affine.var, gv))))
                     for a in self.scatter.entries[outs.index(arr)]]
            order = [*entry, Affine.const_(k), *map(Affine.var, gv), *[Affine.const_(0)] * (width - len(gv))]
            pieces = [(f"C{k}_{j}", piece) for j, piece in enumerate(self.split_by_guards(dom_c, body, gv, scope))]
            for name, piece in pieces + [(f"Z{k}", dom_all - dom_c)]:
                parts.append((name, piece))
                schedules[name] = self.schedule_map(piece.align_params(scope.ctx.get_space()), order)
                known[name] = (stmt, piece, body if name[0] == "C" else None)
            work.append(f"{self.size_product(arr.dims)} * ({self.body_work(body)})")
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

        work = " + ".join(work)
        leaf = Leaf(user, loop=outermost)
        self.emit_tree(tree, scope, leaf, parallel=scope.parallel_ok, work=work)

    def schedule_map(self, dom, order) -> "isl.Map":
        """The map from ``dom``'s space to the affine forms ``order`` of its variables and the sizes."""
        v = isl.affs_from_space(dom.get_space())
        out = None
        for a in order:
            aff = v[0] + a.const
            for var, c in a.terms:
                aff = aff + v[self.names.size(var.name) if isinstance(var, SizeVar) else self.names.var(var)] * c
            m = isl.Map.from_pw_aff(aff)
            out = m if out is None else out.flat_range_product(m)
        return out

    def store(self, arr: Array, idx, value: str, in_pattern: bool = False) -> str:
        """The C statement that writes ``value`` at ``idx`` of ``arr``; ``in_pattern``: ``idx`` is known to be
        in the output's pattern (a scattered one's position is not negative there)."""
        if not self.scattered(arr):
            return super().store(arr, idx, value)
        at = f"{arr.cname}[{self.linear(self.layout(arr), idx)}]"
        if in_pattern:
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
