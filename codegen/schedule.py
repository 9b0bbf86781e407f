"""Scheduling: the order and grouping of the loops of a nest, and which of them run in parallel.

* Loop interchange: ``T[g] = sum(r) e`` into a small target runs with the reduction's loops outside and
  the target's inside (the choice is made at run time: the sizes are symbolic).
* Chunked small-target reductions: ``T[g] = sum(r) e`` into a small 1-D target with one long summed
  variable runs as chunks of ``r`` (in parallel), each summing into ``REDUCE_WAYS`` interleaved
  accumulators per element (lane-blocked over ``g``), the chunks' partial sums added in order: one
  pass over the data, in a fixed order that does not depend on the number of threads.
* Lane blocking (register blocking, "unroll and jam") of innermost loops whose points each run a
  reduction: ``lanes`` points at a time, bit for bit the result of the plain loop.
* Threads: the outermost loop of a nest is marked as one whose iterations may run on threads
  (``loop_ir.Threads``: the nest's work, the variable a reduction adds into, the chunks of a gather); the
  passes over the loop IR decide the rest (``loop_ir.openmp``: an OpenMP loop where the target has OpenMP
  and the work reaches ``PARALLEL_WORK``, gathers scheduled dynamically, reductions statically;
  ``loop_ir.serial_copies``: below that work a plain serial copy of the loop, since OpenMP's ``if(false)``
  clause still enters the runtime and makes a team of one, about half a microsecond per loop, which was
  most of the time of a small kernel such as an LSTM cell's adjoint).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

import islpy as isl

from tensorlang.nodes import Access, Add, Affine, Call, Expr, Guard, IndexVar, Mul, box, conj, strip_accesses, walk
from tensorlang.predicates import has_relations
from tensorlang.traversal import free_index_vars

from . import domains as D
from .groups import Group
from .ir import TRUE, MaxReduce, Reduce, Stmt
from .loop_ir import Threads
from .loops import Block, For, If, User, loop_nest
from .scalar import Scope
from .sparse import Sparse

__all__ = ["Schedule", "Leaf", "unparen", "has_reduce", "outer_reductions", "INTERCHANGE_MAX_TARGET", "PARALLEL_CHUNKS", "LANES",
           "BLOCK_LANES",
           "REDUCE_CHUNK", "REDUCE_CHUNKS", "REDUCE_TILE", "REDUCE_WAYS", "PARTIALS",
           "GROUP_BUFFER", "GROUP_RUN_BUFFER", "JAM", "SLAB", "SLAB_JAM", "SLAB_SUMS", "between"]

INTERCHANGE_MAX_TARGET = 256  # elements of a target small enough to accumulate in place (L1)
PARALLEL_CHUNKS = 32  # dynamic scheduling of gather loops: about this many chunks per loop
LANES = 8  # lanes of a sum reassociated in a fixed order (term k into lane k mod LANES): their number fixes the bits
# points of an innermost loop that lane blocking computes at once: two AVX-512 vectors of doubles (four AVX2),
# two independent chains of additions per term where -march=native targets AVX-512; the bits do not depend on it.
# The deconvolution's gradient in (c, x) (n = 2^21, m = 16): 4.9 ms with 8 lanes, 4.3 ms with 16; 32 spill
BLOCK_LANES = 16
REDUCE_CHUNK = 4096  # the shortest chunk of a reassociated reduction (a multiple of LANES)
REDUCE_CHUNKS = 1024  # the most chunks a reassociated reduction is cut into
REDUCE_TILE = 2048  # points of the last summed variable per tile of an interchanged reduction (in L1)
REDUCE_WAYS = 4  # interleaved accumulators of each element of a chunked small-target reduction
PARTIALS = 8192  # the chunks' partial sums of a chunked small-target reduction (a stack array, 64 KB)
GROUP_BUFFER = 1 << 15  # the most elements of a group's chunk of its temporary (a stack array, 256 KB)
# the most elements of a run of consecutive chunks of rows sharing one buffer (a stack array, 1 MB): each row of
# the temporary is computed once in a run, not again by the next chunk that reads it
GROUP_RUN_BUFFER = 1 << 17
JAM = 8  # elements of an interchanged reduction's target whose terms one innermost loop adds (emit_jammed)
SLAB = 4096  # elements of the part of a target that one row of emit_slab accumulates into (32 KB: L1, or L2)
SLAB_SUMS = 4  # the most reductions of a gather that emit_slab runs (each a slab on the thread's stack)
SLAB_JAM = 4  # consecutive values of a slab's summed variable whose terms one pass over the slab adds (emit_slab)


@dataclass
class Leaf:
    """What a loop nest runs at each of its points (``run(node, scope)``), with what lane blocking needs
    to know of it: the index variables the point's coordinates bind, the body whose reductions may be
    computed for several points at once (``None``: none may), the isl statements (by name) that do not
    run that body, and the nest's domain, for leaves isl gives none; ``loop(tree, scope)``, if given,
    may emit an innermost loop itself (it says whether it did)."""

    run: Callable
    vars: tuple = ()
    body: Expr | None = None
    domain: object = None
    plain: tuple = ()
    bodies: dict = field(default_factory=dict)  # the body of a statement (by name) that has its own
    loop: Callable | None = None

    def __call__(self, node: User, sc: Scope, *into) -> None:
        self.run(node, sc, *into)

    def body_at(self, node: User) -> Expr | None:
        return None if node.name in self.plain else self.bodies.get(node.name, self.body)


@dataclass(frozen=True)
class Combine:
    """How a reduction's partial results combine: ``identity``, and ``of(a, b)`` (C text)."""

    identity: str
    op: str   # an infix operator, or a two-argument function

    def of(self, a: str, b: str) -> str:
        return f"({a} {self.op} {b})" if not self.op.isidentifier() else f"{self.op}({a}, {b})"

    def into(self, acc: str, value: str) -> str:
        """The C statement that combines ``value`` into ``acc``."""
        return f"{acc} {self.op}= {value};" if not self.op.isidentifier() else f"{acc} = {self.op}({acc}, {value});"

    def lanes(self, name: str, count: int) -> str:
        """The declaration of ``count`` lanes ``name``, each the identity."""
        return f"real {name}[{count}] = {{0}};" if self.identity == "0" else \
            f"real {name}[{count}] = {{{', '.join([self.identity] * count)}}};"

    def tree(self, terms: list[str]) -> str:
        """``terms`` combined by a balanced tree: ``((a + b) + (c + d))``."""
        if len(terms) == 1:
            return terms[0]
        half = len(terms) // 2
        return self.of(self.tree(terms[:half]), self.tree(terms[half:]))


SUM = Combine("0", "+")                           # a sum's partial sums
MAX = Combine("-(real)INFINITY", "tl_fmax")       # a maximum's (NaN propagates whatever the order)


class Schedule:
    """The loop-tree half of an emitter (see the module docstring); ``lanes``: the points of an
    innermost loop that lane blocking runs at once (0: none)."""

    lanes = BLOCK_LANES

    @staticmethod
    def interchangeable(pred, body) -> bool:
        """``T[g] = [P] * sum(r) [Q] * e`` with affine guards and ``e`` depending on ``r``."""
        if not isinstance(body, Reduce) or has_relations(pred) or has_relations(body.pred):
            return False
        return any(v in free_index_vars(body.body) for v in body.vars)

    @staticmethod
    def lane_blocked(gv, red: Reduce) -> bool:
        """Whether the gather ``T[gv] = red`` has its innermost loop (over ``gv[-1]``) lane-blocked (as
        ``lane_reductions`` decides for it) when lane blocking is on: the forms of a statement are
        chosen as if it were (``BLOCK_LANES``), so that blocking changes no bit."""
        return lane_blockable(red, gv[-1:])

    def emit_interchanged(self, stmt: Stmt, pred, red: Reduce, scope: Scope, rows: tuple[str, str] | None = None,
                          into: str | None = None) -> None:
        """``T[g] = sum(r) e`` with the reduction's loops outside and the target's inside: ``for r': for
        tile: for g: for r_last in tile: ...`` (``r'`` the summed variables but the last, ``tile`` a cut
        of the last one into ``REDUCE_TILE`` consecutive points).  So the data a tile reads is read once
        for every element of the target while it stays in cache (the 2-D convolution's kernel gradient
        streams the image rows once), and the innermost loop runs over the reduction's last variable,
        usually the contiguous one: vectorised, each element's terms go to ``LANES`` accumulators (term
        ``r_last`` of a tile into lane ``(r_last - start) mod LANES``, as ``emit_lanes_sum``), which are
        combined by a fixed pairwise tree at the end.  The order of the additions depends on the sizes
        only: the same bits in every run (sequential).  Used when the target is small (it and its lanes
        stay in L1).  When the sums' domain does not depend on ``g`` (``T``'s box times the sums' own),
        ``JAM`` consecutive elements of ``T`` run in one innermost loop (``emit_jammed``): the same
        additions in the same order per element, with what their terms share (``dX[i, j]`` in
        ``dw[a, b] = sum(i, j) dX[i, j] * x[i + a, j + b]``) loaded once.  ``rows``: C names ``(lo, hi)``,
        the terms with ``lo <= r0 < hi`` only (``r0`` the first summed variable), and ``into``: a C pointer
        the sums go to (at the elements' row-major offsets) instead of ``T`` (``emit_group``'s chunks)."""
        arr, gv, names = stmt.target, stmt.vars, self.names
        acc, tile = self.fresh("tacc"), self.fresh("tile")
        scope.line(f"real {acc}[{INTERCHANGE_MAX_TARGET * LANES}];")
        scope.line(f"memset({acc}, 0, sizeof(real) * {LANES} * (size_t)({self.size_product(arr.dims)}));")
        jam = not any(v in gv for v in free_index_vars(pred) + free_index_vars(red.pred))
        outer_g = () if jam else tuple(gv)  # the target's variables the loop nest runs over
        order = tuple(red.vars[:-1]) + outer_g + tuple(red.vars[-1:])
        full = conj(box(zip(red.vars, red.sizes)), red.pred) if jam else \
            conj(box(zip(gv, arr.dims)), pred, box(zip(red.vars, red.sizes)), red.pred)
        dom = _tiled(D.domain(full, order, scope.bound, names), len(red.vars) - 1, tile, REDUCE_TILE)
        vars_ = order[:len(red.vars) - 1] + (None,) + order[len(red.vars) - 1:]
        if rows is not None:
            dom = between(dom, next(k for k, v in enumerate(vars_) if v is red.vars[0]), *rows)
        its = [self.fresh("x") for _ in vars_]
        tree = loop_nest([("S", dom)], scope.ctx, its)
        lanes_of = f"{acc} + {LANES} * ({self.linear(arr.dims, [Affine.var(v) for v in gv])})"

        def user(node: User, sc: Scope, into: str | None = None):
            for v, a in zip(vars_, node.args):
                if v is not None:
                    sc.line(f"const int64_t {names.var(v)} = {a};")
            known = D.lift_to_context(node.domain if node.domain is not None else dom) & sc.ctx
            if into is None and jam:  # a point of the sums that no innermost loop runs: every element's term
                e = self.fresh("e")
                body = sc.loop(e, f"int64_t {e} = 0", f"{e} < {self.size_product(arr.dims)}", f"{e} += 1")
                self.bind_flat(arr, gv, e, body)
            else:
                body = sc
            inner = body.child(ctx=known, bound=sc.bound + tuple(gv) + tuple(red.vars), parallel_ok=False)
            body.line(f"{into or f'({lanes_of})[0]'} += {self.expr(red.body, inner)};")

        def innermost(loop: For, sc: Scope) -> bool:
            if loop.var != its[-1] or not isinstance(loop.body, User) or self.trip(loop) is None:
                return False
            end = f"({loop.init}) + {self.trip(loop)}"
            if jam:
                self.emit_jammed(loop, sc, leaf, arr, gv, acc, end)
                return True
            lane = self.fresh("lane")
            s = sc.block()
            for v, a in zip(vars_, loop.body.args):
                if v in gv:
                    s.line(f"const int64_t {names.var(v)} = {a};")
            s.line(f"real {lane}[{LANES}];")
            s.line(f"memcpy({lane}, {lanes_of}, sizeof {lane});")
            self.emit_lanes_sum(loop, s, leaf, lane, end)
            s.line(f"memcpy({lanes_of}, {lane}, sizeof {lane});")
            return True

        leaf = Leaf(user, domain=dom, loop=innermost)
        if tree is not None:
            self.emit_tree(tree, scope, leaf, parallel=False)
        whole = D.domain(box(zip(gv, arr.dims)), gv, scope.bound, names)
        tree = loop_nest([("S", whole)], scope.ctx, [self.fresh("x") for _ in gv])
        lane = self.fresh("lane")

        def combine(node: User, sc: Scope) -> None:
            for v, a in zip(gv, node.args):
                sc.line(f"const int64_t {names.var(v)} = {a};")
            sc.line(f"const real *{lane} = {lanes_of};")
            at = [Affine.var(v) for v in gv]
            value = SUM.tree([f'{lane}[{i}]' for i in range(LANES)])
            sc.line(self.store(arr, at, value) if into is None else f"{into}[{self.linear(arr.dims, at)}] = {value};")

        if tree is not None:
            self.emit_tree(tree, scope, combine, parallel=False)

    @staticmethod
    def slab_reductions(stmt: Stmt, pred, body) -> list[Reduce]:
        """The reductions ``emit_slab`` runs for the gather ``T[g] = [P] * body``: the outermost ones of ``body``
        (evaluated unconditionally), when the target has a loop outside its slab, there are at most ``SLAB_SUMS``,
        none over a relation or with a nested reduction, each summand reads along the target's last loop
        (``reads_along``), so that the slab's innermost loop, over it, reads consecutive elements; ``[]``
        otherwise (a summand that reads along a summed variable, ``L[k, a, b]`` summed over ``b``, runs best as
        the gather's innermost loop)."""
        reds = outer_reductions(body, guards=False)
        if len(stmt.vars) < 2 or not reds or len(reds) > SLAB_SUMS or has_relations(pred) or any(
                has_relations(r.pred) or has_reduce(r.body) or not reads_along(r.body, stmt.vars[-1]) for r in reds):
            return []
        return reds

    def slabs_beat_interchange(self, stmt: Stmt, pred, red: Reduce) -> bool:
        """Whether the statement ``T[g] = [P] * red`` runs better row by row into slabs than interchanged: where
        slabs take it and its summand reads consecutive elements along the target's last loop but not along the
        sum's last variable.  Interchanged, the sum's variable runs innermost and each of its steps reads a
        line of its own (``sum(i0:n) d[i0, k] * X[i0, k, a]`` into ``S[k, a]``: a stride of ``B m`` through
        ``X``, each line read ``m`` times); a row's slab reads each line once."""
        return bool(self.slab_reductions(stmt, pred, red)) and not reads_along(red.body, red.vars[-1])

    @staticmethod
    def slab_beats_lanes(stmt: Stmt, reds: list[Reduce]) -> bool:
        """Whether slabs are the better form even where lane blocking runs the gather's last loop (its sums in
        registers, the data read once per block of ``BLOCK_LANES`` points): when the target has loops between its
        first and its last, whose sums read again what the rows of a slab share, or a sum lane blocking cannot
        take.  Otherwise slabs are taken only where that loop is too short for a block (k-means' centroids of
        8 coordinates: docs/codegen.md)."""
        return len(stmt.vars) > 2 or not all(lane_blockable(r, stmt.vars[-1:]) for r in reds)

    def emit_slab(self, stmt: Stmt, pred, body, reds: list[Reduce], scope: Scope) -> None:
        """``T[g0, g'] = [P] * body(sum_1, ..., sum_k)`` with each sum's loops between the target's first loop and
        the others (its *slab*, ``g'``): ``for g0: slab_j = 0; for r: for g': slab_j[g'] += term_j; for g':
        T[g0, g'] = [P] * body(slab_1[g'], ...)``, a sum's slab over the variables of ``g'`` it reads only (a
        number, for one that reads none: computed once per row, not once per element).  Each element's terms
        are added in the order of its sum's loops, as the gather adds them (the same bits), but the terms of a
        row come in one innermost loop over consecutive elements: independent additions where the gather's sum
        is one chain (a triangular domain, ``b < a``, that lane blocking cannot take), and what they share with
        the target's first loop (``dX[i, k0, a]`` of the GMM's ``L`` gradient, ``i`` summed) read once per row
        instead of once per element.  The slabs are stack arrays of ``SLAB`` elements, one per thread (the loop
        over ``g0`` runs in parallel)."""
        arr, gv, names = stmt.target, stmt.vars, self.names
        g0, rest = gv[:1], gv[1:]
        rows = D.domain(box(zip(g0, arr.dims[:1])), g0, scope.bound, names)
        tree = loop_nest([("S", rows)], scope.ctx, [self.fresh("s")])
        if tree is None:
            return
        work = f"{self.size_product(arr.dims)} * ({self.body_work(body)})"
        guarded = set(free_index_vars(pred))

        def run(node: User, sc: Scope) -> None:
            sc.line(f"const int64_t {names.var(g0[0])} = {node.args[0]};")
            row = sc.child(ctx=D.lift_to_context(node.domain if node.domain is not None else rows) & sc.ctx,
                           bound=sc.bound + g0, parallel_ok=False)
            slabs = []
            for red in reds:
                read = set(free_index_vars(red.body)) | set(free_index_vars(red.pred)) | guarded
                used = tuple(v for v in rest if v in read)
                dims = tuple(d for v, d in zip(rest, arr.dims[1:]) if v in read)
                slab = self.fresh("slab")
                at = self.linear(dims, [Affine.var(v) for v in used])
                slabs.append(f"{slab}[{at}]")
                row.line(f"real {slab}[{SLAB}];")
                row.line(f"memset({slab}, 0, sizeof(real) * (size_t)({self.size_product(dims)}));")
                if self.slab_jams(red, pred):
                    self.emit_jammed_terms(red, used, dims, pred, slabs[-1], row)
                    continue
                order = tuple(red.vars) + used
                dom = D.domain(conj(box(zip(used, dims)), pred, box(zip(red.vars, red.sizes)), red.pred), order,
                               row.bound, names)
                terms = loop_nest([("R", dom)], row.ctx, [self.fresh("r") for _ in order])

                def add(n2: User, s2: Scope, red=red, into=slabs[-1], order=order, dom=dom) -> None:
                    for v, a in zip(order, n2.args):
                        s2.line(f"const int64_t {names.var(v)} = {a};")
                    inner = s2.child(ctx=D.lift_to_context(n2.domain if n2.domain is not None else dom) & s2.ctx,
                                     bound=s2.bound + order, parallel_ok=False)
                    inner.line(f"{into} += {self.expr(red.body, inner)};")

                if terms is not None:
                    self.emit_tree(terms, row, add)
            every = D.domain(box(zip(rest, arr.dims[1:])), rest, row.bound, names)
            held = D.domain(conj(box(zip(rest, arr.dims[1:])), pred), rest, row.bound, names)
            points = loop_nest([("C", held), ("Z", every - held)], row.ctx, [self.fresh("c") for _ in rest])

            def write(n2: User, s2: Scope) -> None:
                for v, a in zip(rest, n2.args):
                    s2.line(f"const int64_t {names.var(v)} = {a};")
                where = [Affine.var(v) for v in gv]
                if n2.name == "Z":
                    s2.line(self.store(arr, where, "0"))
                    return
                inner = s2.child(ctx=D.lift_to_context(n2.domain if n2.domain is not None else held) & s2.ctx,
                                 bound=s2.bound + rest, parallel_ok=False)
                for red, value in zip(reds, slabs):
                    inner.cache[id(red)] = value
                inner.line(self.store(arr, where, self.expr(body, inner)))

            if points is not None:
                self.emit_tree(points, row, write)

        self.emit_tree(tree, scope, run, parallel=scope.parallel_ok, work=work)

    @staticmethod
    def slab_jams(red: Reduce, pred) -> bool:
        """Whether ``emit_jammed_terms`` runs the terms of ``red`` into its slab: a sum over one variable, over a
        box that neither the sum's brackets nor the target's guard restrict (so its terms for one element come
        in the order of that variable whatever the slab's loops inside)."""
        if len(red.vars) != 1:
            return False
        v, size = red.vars[0], red.sizes[0]
        return v not in free_index_vars(red.pred) and v not in free_index_vars(pred) \
            and not any(isinstance(w, IndexVar) for w, _ in size.terms)

    def emit_jammed_terms(self, red: Reduce, used: tuple, dims: tuple, pred, into: str, row: Scope) -> None:
        """The terms of sum ``red`` (over ``v``) added into its slab ``into`` (over the target's variables
        ``used``) ``SLAB_JAM`` values of ``v`` at a time, then the rest one by one: for each block of values, the
        slab's loops, each element loaded into a register, its ``SLAB_JAM`` terms added in the order of ``v``
        (the same bits as one value at a time) and stored back, where the plain loop loads and stores the
        element once per term (the GMM gradient in ``L``: a triangle of short rows, its stores most of its
        time)."""
        names, (v,), (size,) = self.names, red.vars, red.sizes
        dom = D.domain(conj(box(zip(used, dims)), pred, red.pred), used, row.bound, names)
        r = self.fresh("jr")
        outer = row.block()
        outer.line(f"int64_t {r} = 0;")
        for width, cond in ((SLAB_JAM, f"{r} + {SLAB_JAM} <= {self.affine(size)}"), (1, f"{r} < {self.affine(size)}")):
            body = outer.loop(r, "", cond, f"{r} += {width}")
            terms = loop_nest([("R", dom)], body.ctx, [self.fresh("r") for _ in used])
            if terms is None:
                return

            def add(n2: User, s2: Scope, width=width) -> None:
                for w, a in zip(used, n2.args):
                    s2.line(f"const int64_t {names.var(w)} = {a};")
                ctx = D.lift_to_context(n2.domain if n2.domain is not None else dom) & s2.ctx
                acc = self.fresh("jacc")
                s2.line(f"real {acc} = {into};")
                for k in range(width):
                    term = s2.block(ctx=ctx, bound=s2.bound + used + (v,), parallel_ok=False)
                    term.line(f"const int64_t {names.var(v)} = {r} + {k};")
                    term.line(f"{acc} += {self.expr(red.body, term)};")
                s2.line(f"{into} = {acc};")
            self.emit_tree(terms, body, add)

    def emit_jammed(self, loop: For, scope: Scope, leaf: Leaf, arr, gv, acc: str, end: str) -> None:
        """The innermost loop of ``emit_interchanged`` (over ``r_last``) for every element of the target:
        ``JAM`` consecutive elements (row-major) at a time, then the rest one by one.  Each block's lanes
        (``JAM`` x ``LANES`` accumulators, consecutive in ``acc``) are loaded, each vector step of the loop
        adds every element's terms into its own lanes (``emit_lanes_sum``), and the lanes are stored
        back: independent chains of additions, and what the elements' terms share read once."""
        e, u, lane, one = self.fresh("e"), self.fresh("u"), self.fresh("jlane"), self.fresh("jlane")
        total = self.size_product(arr.dims)
        sc = scope.block()
        sc.line(f"int64_t {e} = 0;")
        for width, cond, name in ((JAM, f"{e} + {JAM} <= {total}", lane), (1, f"{e} < {total}", one)):
            s = sc.loop(e, "", cond, f"{e} += {width}")
            s.line(f"real {name}[{width}][{LANES}];")
            s.line(f"memcpy({name}, {acc} + {LANES} * {e}, sizeof {name});")

            def around(block: Scope, body, width=width) -> None:
                inner = block.loop(u, f"int {u} = 0", f"{u} < {width}", f"{u} += 1")
                self.bind_flat(arr, gv, f"{e} + {u}", inner)
                body(inner)

            self.emit_lanes_sum(loop, s, leaf, f"{name}[{u}]", end, around)
            s.line(f"memcpy({acc} + {LANES} * {e}, {name}, sizeof {name});")

    def bind_flat(self, arr, gv, flat: str, scope: Scope) -> None:
        """``gv``, the target's variables, as the point at row-major offset ``flat`` of its box."""
        names, rest = self.names, flat
        for k in range(len(gv) - 1, -1, -1):
            extent = f"tl_max({self.affine(arr.dims[k])}, 1)"
            value = rest if k == 0 else f"({rest}) % {extent}"
            scope.line(f"const int64_t {names.var(gv[k])} = {value};")
            rest = f"({rest}) / {extent}"

    def chunkable(self, stmt: Stmt, pred, red: Reduce, scope: Scope):
        """The loop of the reduction of ``T[g] = [P] * sum(r) [Q] * e`` when ``emit_chunked`` can run the
        statement: a 1-D target, one summed variable whose domain does not depend on ``g``, a summand
        with no nested reduction, and isl's nest over ``r`` one loop with an evident trip count."""
        gv = stmt.vars
        if len(gv) != 1 or len(red.vars) != 1 or has_reduce(red.body) or \
                any(v in gv for v in free_index_vars(red.pred)):
            return None
        dom = D.domain(conj(box(zip(red.vars, red.sizes)), red.pred), red.vars, scope.bound, self.names)
        tree = loop_nest([("S", dom)], scope.ctx, [self.fresh("r")])
        return tree if tree is not None and self.reassociable(tree) else None

    def emit_chunked(self, stmt: Stmt, pred, red: Reduce, tree: For, scope: Scope) -> None:
        """``T[g] = [P] * sum(r) e`` into a small 1-D target, reassociated in a fixed order: the loop over
        ``r`` is cut into chunks whose length depends on the sizes only (at least ``REDUCE_CHUNK``, at
        most ``PARTIALS / |T|`` chunks); each chunk (one thread) computes every element's partial sum as
        a gather over ``g`` (lane-blocked: the chunk's data is read once per block of ``lanes`` elements,
        from cache), term ``r`` into the element's accumulator ``(r - lo) mod REDUCE_WAYS`` and the
        accumulators combined by a pairwise tree (``emit_ways``); then each element adds its chunks'
        partial sums in order.  The gradient of the convolution loss in ``c`` (16 sums of length n) is
        one pass over the signal, its chains of additions independent; the result is the same bits in
        every run with any number of threads.  Used when the target has at least ``lanes`` elements
        (fewer: ``emit_interchanged``)."""
        plan = self.emit_chunk_plan(stmt, tree, scope)
        p, q = self.fresh("p"), self.fresh("q")
        runs = scope.loop(p, f"int64_t {p} = 0", f"{p} < {plan.npart}", f"{p} += 1",
                          threads=self.threads(f"{plan.gn} * {plan.len}", None, "1"), parallel_ok=False)
        chunks = runs.loop(q, f"int64_t {q} = {p} * {plan.per}", f"{q} < tl_min({plan.nch}, {p} * {plan.per} + "
                           f"{plan.per})", f"{q} += 1", parallel_ok=False)
        self.emit_chunk(stmt, pred, red, tree, plan, q, p, chunks)
        self.emit_chunk_sums(stmt, plan.part, plan.gn, plan.npart, scope)

    def emit_chunk_plan(self, stmt: Stmt, tree: For, scope: Scope) -> "Chunks":
        """The chunks of ``emit_chunked``: ``REDUCE_CHUNK`` terms each (the data a chunk reads stays in
        cache), and the array of partial sums, one per run of ``per`` consecutive chunks, at most
        ``PARTIALS / |T|`` runs (one run a chunk until the sum has that many chunks)."""
        plan = Chunks(*(self.fresh(b) for b in ("len", "gn", "chunk", "nch", "per", "npart", "part")))
        scope.line(f"const int64_t {plan.len} = tl_max(0, {self.trip(tree)});")
        scope.line(f"const int64_t {plan.gn} = {self.size_product(stmt.target.dims)};")
        most = f"tl_max(1, {PARTIALS} / tl_max({plan.gn}, 1))"  # (computed before a group checks gn)
        scope.line(f"const int64_t {plan.chunk} = {REDUCE_CHUNK};")
        scope.line(f"const int64_t {plan.nch} = ({plan.len} + {plan.chunk} - 1) / {plan.chunk};")
        scope.line(f"const int64_t {plan.per} = tl_max(1, ({plan.nch} + {most} - 1) / {most});")
        scope.line(f"const int64_t {plan.npart} = ({plan.nch} + {plan.per} - 1) / {plan.per};")
        scope.line(f"real {plan.part}[{PARTIALS}];")
        return plan

    def emit_chunk(self, stmt: Stmt, pred, red: Reduce, tree: For, plan: "Chunks", q: str, p: str,
                   scope: Scope) -> None:
        """Chunk ``q`` of ``emit_chunked``, of run ``p``: every element's partial sum over it, into the run's
        partial sums (the first chunk of a run writes them, the others add to them, in order)."""
        (g,), names, arr = stmt.vars, self.names, stmt.target
        lo, hi, pq, first = self.fresh("lo"), self.fresh("hi"), self.fresh("pq"), self.fresh("first")
        scope.line(f"const int64_t {lo} = {q} * {plan.chunk};")
        scope.line(f"const int64_t {hi} = tl_min({lo} + {plan.chunk}, {plan.len});")
        scope.line(f"real *{pq} = {plan.part} + {p} * {plan.gn};")
        scope.line(f"const int {first} = {q} == {p} * {plan.per};")
        scope.branch(first).line(f"memset({pq}, 0, sizeof(real) * (size_t){plan.gn});")
        end = f"({tree.init}) + {hi}"
        self.chunk_spans[id(red)] = (For(tree.var, f"({tree.init}) + {lo}", f"{tree.var} < {end}", "1", tree.body), end)
        dom = D.domain(conj(box(zip(stmt.vars, arr.dims)), pred), stmt.vars, scope.bound, names)

        def user(node: User, sc: Scope):
            sc.line(f"const int64_t {names.var(g)} = {node.args[0]};")
            known = node.domain if node.domain is not None else dom
            inner = sc.child(ctx=D.lift_to_context(known) & sc.ctx, bound=sc.bound + (g,), parallel_ok=False)
            total = self.expr(red, inner)
            sc.line(f"{pq}[{names.var(g)}] = {first} ? {total} : {pq}[{names.var(g)}] + {total};")

        nest = loop_nest([("C", dom)], scope.ctx, [self.fresh("c")])
        if nest is not None:
            self.emit_tree(nest, scope, Leaf(user, (g,), red, dom))
        del self.chunk_spans[id(red)]

    def emit_chunk_sums(self, stmt: Stmt, part: str, gn: str, count: str, scope: Scope) -> None:
        """Each element of the target of chunked sums (``emit_chunked``, ``emit_group``): its ``count``
        partial sums (``part``, ``gn`` elements each, row-major; a run's of chunks, or a chunk's) added in
        order."""
        e, p, s = self.fresh("e"), self.fresh("p"), self.fresh("s")
        body = scope.loop(e, f"int64_t {e} = 0", f"{e} < {gn}", f"{e} += 1")
        body.line(f"real {s} = 0;")
        body.loop(p, f"int64_t {p} = 0", f"{p} < {count}", f"{p} += 1").line(f"{s} += {part}[{p} * {gn} + {e}];")
        self.bind_flat(stmt.target, stmt.vars, e, body)
        body.line(self.store(stmt.target, [Affine.var(v) for v in stmt.vars], s))

    def emit_group(self, group: Group, scope: Scope) -> None:
        """A group (``codegen.groups``) in chunks: chunk ``q`` covers chunk variables ``q * C`` to
        ``(q + 1) * C - 1`` of every reader; it computes the window of the temporary ``T`` that those read
        (the chunk widened by the readers' reach, clipped to ``T``; whole rows of the other dimensions)
        into a buffer on the stack, then runs the readers on it: ``T`` never goes to memory, and every
        input is read once, from cache.  ``C``: the reduction's chunk length when a reader is a 1-D
        chunked sum (whose chunks are those of ``emit_chunked``: the same bits as without the group);
        else ``REDUCE_CHUNK`` for a 1-D ``T``, and for a ``T`` of several dimensions as many rows as fit
        ``GROUP_BUFFER`` with the reach.  A reduction into a small target of several dimensions or sums
        runs interchanged over its chunk's terms (``emit_interchanged``), each chunk's sums added into the
        target in the chunks' order (sizes decide the chunks: the same bits in every run and thread
        count).  Used when the buffer has at most ``GROUP_BUFFER`` elements (and the partial sums fit
        ``PARTIALS``), otherwise the statements run one after another.  A ``T`` of several dimensions is
        computed in runs of consecutive chunks (parallel) that share a buffer of up to ``GROUP_RUN_BUFFER``
        elements: a chunk computes only the rows of its window that the run has not computed yet (the
        rows it shares with the previous chunk are not computed twice); as many chunks a run as leave
        four runs a thread.  Every element of ``T`` is computed by the same code whichever chunk computes
        it, so the runs change no bit.  With a chunked sum among the readers, a run is the chunks whose
        partial sums add into one (``emit_chunk_plan``), each chunk computing its whole window anew into
        one chunk's buffer."""
        sc = scope.block()
        red = next((r for r in group.readers if r.reduction is not None), None)
        tree = self.chunkable(red.stmt, _pred(red.stmt), red.reduction, sc) if red is not None else None
        t = group.producer.target
        conds = []
        if tree is not None:
            plan = self.emit_chunk_plan(red.stmt, tree, sc)
            conds.append(f"{plan.gn} <= {INTERCHANGE_MAX_TARGET}")
        starts, exts = [], []
        for r in group.readers:
            starts.append(f"({tree.init})" if r is red and tree is not None else "0")
            exts.append(plan.len if r is red and tree is not None else
                        self.size_product(r.reduction.sizes[:1] if r is red else r.stmt.target.dims[:1]))
        nch, width, q, tlo, thi, buf = (self.fresh(b) for b in ("nch", "width", "q", "tlo", "thi", "buf"))
        low = _fold("tl_min", [f"{s} + {self.affine(a)}" for s, r in zip(starts, group.readers) for a in r.reach[0]])
        high = _fold("tl_max", [f"{s} + {self.affine(a)}" for s, r in zip(starts, group.readers) for a in r.reach[1]])
        span = f"tl_max(0, ({high}) - ({low}))"
        row = self.size_product(self.layout(t)[1:])  # elements of T per point of its first dimension
        if tree is not None:
            chunk = plan.chunk
        else:
            chunk = self.fresh("chunk")
            rows = f"tl_max(1, {GROUP_BUFFER} / tl_max(1, {row}) - {span})"
            sc.line(f"const int64_t {chunk} = {REDUCE_CHUNK if len(t.dims) == 1 else rows};")
        sc.line(f"const int64_t {nch} = {_fold('tl_max', [f'({e} + {chunk} - 1) / {chunk}' for e in exts])};")
        sc.line(f"const int64_t {width} = ({chunk} + {span}) * ({row});")
        if red is not None and tree is None:
            gn, part = self.size_product(red.stmt.target.dims), self.fresh("part")
            conds += [f"{gn} <= {INTERCHANGE_MAX_TARGET}", f"{nch} * ({gn}) <= {PARTIALS}"]
            sc.line(f"real {part}[{PARTIALS}];")
        inner, fallback = sc.branch(' && '.join(conds + [f'{width} <= {GROUP_BUFFER}']), orelse=True)
        run, s, slo, done = (self.fresh(b) for b in ("run", "s", "slo", "done"))
        if tree is None:
            self.emit_run_length(run, nch, chunk, span, row if len(t.dims) > 1 else None, inner)
        else:   # (a run of the chunked sum's chunks: they add into one partial sum, each its window anew)
            inner.line(f"const int64_t {run} = {plan.per};")
        work = self.work(group.stmts)
        outer = inner.loop(s, f"int64_t {s} = 0", f"{s} < ({nch} + {run} - 1) / {run}", f"{s} += 1",
                           threads=self.threads(work, None, "1"), parallel_ok=False)
        shared = tree is None   # (the run's chunks share one buffer, each computing the rows it adds)
        outer.line(f"real {buf}[{width}{f' + ({run} - 1) * {chunk} * ({row})' if shared else ''}];")

        def window(sc: Scope, first: str) -> None:
            sc.line(f"const int64_t {slo} = tl_max(0, {first} * {chunk} + ({low}));")
            sc.line(f"real *const {t.cname} = {buf} - {slo}{'' if len(t.dims) == 1 else f' * ({row})'};")
            sc.line(f"int64_t {done} = {slo};")
        if shared:
            window(outer, f"{s} * {run}")
        body = outer.loop(q, f"int64_t {q} = {s} * {run}", f"{q} < tl_min({nch}, {s} * {run} + {run})", f"{q} += 1",
                          parallel_ok=False)
        if not shared:
            window(body, q)
        base = f"{q} * {chunk}"
        body.line(f"const int64_t {tlo} = {done};")
        body.line(f"const int64_t {thi} = tl_min({self.affine(t.dims[0])}, {base} + {chunk} + ({high}));")
        body.line(f"{done} = tl_max({done}, {thi});")
        body.line(f"/* {t.label} */")
        self.emit_gather(group.producer, *_pred_body(group.producer), body, window=(tlo, thi))
        for r, ext in zip(group.readers, exts):
            body.line(f"/* {r.stmt.target.label} */")
            if r is red and tree is not None:
                self.emit_chunk(r.stmt, _pred(r.stmt), r.reduction, tree, plan, q, s,
                                body.branch(f"{base} < {plan.len}"))
                continue
            lo, hi = self.fresh("lo"), self.fresh("hi")
            body.line(f"const int64_t {lo} = {base}, {hi} = tl_min({base} + {chunk}, {ext});")
            if r is red:
                rows, empty = body.branch(f"{lo} < {hi}", orelse=True)
                self.emit_interchanged(r.stmt, _pred(r.stmt), r.reduction, rows, rows=(lo, hi),
                                       into=f"({part} + {q} * ({gn}))")
                empty.line(f"memset({part} + {q} * ({gn}), 0, sizeof(real) * (size_t)({gn}));")
            else:
                self.emit_gather(r.stmt, *_pred_body(r.stmt), body, window=(lo, hi))
        if tree is not None:
            self.emit_chunk_sums(red.stmt, plan.part, plan.gn, plan.npart, inner)
        elif red is not None:
            self.emit_chunk_sums(red.stmt, part, gn, nch, inner)
        for s in group.stmts:
            self.emit_stmt(s, fallback.child())

    def emit_run_length(self, run: str, nch: str, chunk: str, span: str, row: str | None, scope: Scope) -> None:
        """``run``: the chunks of a group that share one buffer (``emit_group``): as many as fit
        ``GROUP_RUN_BUFFER`` with the reach, at most a quarter of the chunks a thread; 1 for a 1-D
        temporary (``row`` ``None``)."""
        if row is None:
            scope.line(f"const int64_t {run} = 1;")
            return
        threads = self.fresh("threads")
        if self.caps.openmp:
            scope.line("#ifdef _OPENMP")
            scope.line("extern int omp_get_max_threads(void);")
            scope.line(f"const int64_t {threads} = omp_get_max_threads();")
            scope.line("#else")
        scope.line(f"const int64_t {threads} = 1;")
        if self.caps.openmp:
            scope.line("#endif")
        fit = f"({GROUP_RUN_BUFFER} / tl_max(1, {row}) - {span}) / {chunk}"
        scope.line(f"const int64_t {run} = tl_max(1, tl_min({fit}, {nch} / (4 * {threads})));")

    def emit_ways(self, span: For, end: str, scope: Scope, leaf: Leaf, acc: str, lanes: int) -> None:
        """``acc += `` the terms of a chunk of a reduction (``span``, up to ``end``), term ``k`` of the chunk into
        accumulator ``k mod REDUCE_WAYS``, the accumulators combined by a pairwise tree: independent
        chains of additions.  ``lanes``: the accumulators are arrays of that many lanes (lane
        blocking), else scalars."""
        ways, k = [self.fresh("w") for _ in range(REDUCE_WAYS)], self.fresh("k")
        hi = end
        for w in ways:
            scope.line(f"real {w}[{lanes}] = {{0}};" if lanes else f"real {w} = 0;")

        def term(s: Scope, at: str, into: str) -> None:
            inner = s.block()
            inner.line(f"const int64_t {span.var} = {at};")
            leaf(span.body, inner, into)

        scope.line(f"int64_t {k} = {span.init};")
        steps = scope.loop(k, "", f"{k} + {REDUCE_WAYS} <= {hi}", f"{k} += {REDUCE_WAYS}")
        for u, w in enumerate(ways):
            term(steps, f"{k} + {u}", w)
        for u, w in enumerate(ways[:-1]):
            term(scope.branch(f"{k} + {u} < {hi}"), f"{k} + {u}", w)
        if lanes:
            lane = self.fresh("l")
            scope.loop(lane, f"int {lane} = 0", f"{lane} < {lanes}", f"{lane} += 1").line(
                f"{acc}[{lane}] += {SUM.tree([f'{w}[{lane}]' for w in ways])};")
        else:
            scope.line(f"{acc} += {SUM.tree(ways)};")

    def work(self, stmts) -> str:
        """The rough work of statements run in one nest, as C: each target's points times its body's work."""
        return " + ".join(f"{self.size_product(s.target.dims)} * ({self.body_work(s.body)})" for s in stmts)

    def body_work(self, e: Expr, depth: int = 0) -> str:
        """A rough C estimate of the work per point of a body: 1 plus, for each outermost reduction in
        it, the product of its extents times the work of its body (sibling sums add, nested ones
        multiply)."""
        terms = []
        seen: set[int] = set()
        stack = [e]
        while stack:
            n = stack.pop()
            if id(n) in seen or not isinstance(n, Expr):
                continue
            seen.add(id(n))
            if isinstance(n, Reduce):
                inner = self.body_work(n.body, depth + 1) if depth < 2 else "1"
                terms.append(f"{self.size_product(n.sizes)} * ({inner})")
                continue
            stack.extend(c for c in n.children if isinstance(c, Expr))
        return " + ".join(["1"] + terms[:4])

    # ---------------------------------------------------------------------------------------------
    # loop trees

    def emit_tree(self, tree, scope: Scope, user, parallel: bool = False, work: str = "0",
                  reduction: str | None = None) -> None:
        if isinstance(tree, Block):
            for c in tree.children:
                self.emit_tree(c, scope, user, parallel, work, reduction)
        elif isinstance(tree, For):
            if tree.degenerate:
                inner = scope.block()
                inner.line(f"const int64_t {tree.var} = {tree.init};")
                self.emit_tree(tree.body, inner, user, parallel, work, reduction)
                return
            if isinstance(user, Leaf) and user.loop is not None and user.loop(tree, scope):
                return
            reds = self.lane_reductions(tree, user)
            if reds:
                self.emit_lane_blocked(tree, reds, scope, user, parallel and tree.outermost, work, reduction)
                return
            body = self.for_loop(tree, scope, parallel and tree.outermost, work, reduction)
            self.emit_tree(tree.body, body, user, False, work, reduction)
        elif isinstance(tree, If):
            if tree.orelse is None:
                self.emit_tree(tree.then, scope.branch(tree.cond), user, parallel, work, reduction)
                return
            then, orelse = scope.branch(tree.cond, orelse=True)
            self.emit_tree(tree.then, then, user, parallel, work, reduction)
            self.emit_tree(tree.orelse, orelse, user, parallel, work, reduction)
        elif isinstance(tree, User):
            user(tree, scope.block())
        else:
            raise TypeError(tree)

    def for_loop(self, tree: For, scope: Scope, parallel: bool, work: str, reduction: str | None, **kw) -> Scope:
        """The loop of isl's ``tree`` (marked as one whose iterations may run on threads when it is a parallel
        outermost loop): the scope of its body."""
        clause = self.threads(work, reduction, self.chunk(tree) if reduction is None else None) if parallel else None
        return scope.loop(tree.var, f"int64_t {tree.var} = {tree.init}", unparen(tree.cond),
                          f"{tree.var} += {tree.inc}", threads=clause, **kw)

    @staticmethod
    def trip(tree: For) -> str | None:
        """The loop's trip count as C (``None`` when it is not evident from the loop's header)."""
        m = re.fullmatch(rf"{re.escape(tree.var)} (<=?) (.+)", unparen(tree.cond))
        if m is None or tree.inc != "1" or unparen(f"({m.group(2)})") != m.group(2):
            return None
        return f"({m.group(2)}) - ({tree.init})" + (" + 1" if m.group(1) == "<=" else "")

    def chunk(self, tree: For) -> str | None:
        """A chunk of about 1/32 of the loop's iterations (``None`` when the trip count is not evident)."""
        trip = self.trip(tree)
        return None if trip is None else f"tl_max(1, ({trip}) / {PARALLEL_CHUNKS})"

    # ---------------------------------------------------------------------------------------------
    # lane blocking

    def lane_reductions(self, tree: For, leaf) -> list[Reduce]:
        """The reductions that lane blocking computes for ``lanes`` points of the innermost loop ``tree``
        at once: those of the leaf's body evaluated unconditionally (not under a guard), whose domain
        does not move with the loop but whose summand does, with no relation and no nested reduction.
        Empty when the loop is not innermost or its trip count is not evident."""
        node = tree.body
        if not self.lanes or not isinstance(node, User) or not isinstance(leaf, Leaf):
            return []
        body = leaf.body_at(node)
        if body is None or self.trip(tree) is None:
            return []
        moving = self.moving_vars(tree, node, leaf)
        return [e for e in outer_reductions(body, guards=False) if lane_blockable(e, moving)]

    @staticmethod
    def moving_vars(tree: For, node: User, leaf: Leaf) -> tuple[IndexVar, ...]:
        """The leaf's variables whose coordinates change with the loop ``tree``."""
        it = re.compile(rf"\b{re.escape(tree.var)}\b")
        return tuple(v for v, a in zip(leaf.vars, node.args) if it.search(a))

    def emit_lane_blocked(self, tree: For, reds, scope: Scope, leaf: Leaf, parallel: bool, work: str,
                          reduction: str | None) -> None:
        """Lane blocking (register blocking, "unroll and jam"): the innermost loop runs ``lanes``
        consecutive points at a time.  Each reduction in ``reds`` runs once per block, its summand in a
        vectorisable loop over the lanes adding into one accumulator per lane; then the rest of the body
        runs point by point on the accumulators.  Every point's sum adds its terms in the same order as
        without blocking and the points finish in order, so the result is the same bit for bit: only
        the dependent chains of additions of neighbouring points interleave (the convolution's 16-tap
        sums run 3.5x faster).  The iterations left over after the last full block run unblocked."""
        nb, b = self.fresh("nb"), self.fresh("b")
        sc = scope.block()
        sc.line(f"const int64_t {nb} = tl_max(0, {self.trip(tree)}) / {self.lanes};")
        clause = self.threads(work, reduction, None if reduction else f"tl_max(1, {nb} / {PARALLEL_CHUNKS})") \
            if parallel else None
        blocks = sc.loop(b, f"int64_t {b} = 0", f"{b} < {nb}", f"{b} += 1", threads=clause)
        self.emit_lanes(tree, f"({tree.init}) + {b} * {self.lanes}", reds, blocks, leaf)
        rest = For(tree.var, f"({tree.init}) + {nb} * {self.lanes}", tree.cond, tree.inc, tree.body)
        self.emit_tree(tree.body, self.for_loop(rest, sc, False, work, reduction), leaf, False, work, reduction)

    def emit_lanes(self, tree: For, first: str, reds, sc: Scope, leaf: Leaf) -> None:
        """One block of lane blocking: the points ``first``, ..., ``first + lanes - 1`` of ``tree``."""
        node, names, it = tree.body, self.names, tree.var
        moving = self.moving_vars(tree, node, leaf)
        base, lane = self.fresh("base"), self.fresh("l")
        sc.line(f"const int64_t {base} = {first};")
        known = node.domain if node.domain is not None else leaf.domain
        fixed_known = known
        for k in reversed([k for k, v in enumerate(leaf.vars) if v in moving]):
            fixed_known = fixed_known.project_out(isl.dim_type.set, k, 1)
        fixed = tuple(v for v in leaf.vars if v not in moving)
        for v, a in zip(leaf.vars, node.args):
            if v not in moving:
                sc.line(f"const int64_t {names.var(v)} = {a};")
        outer = sc.child(ctx=D.lift_to_context(fixed_known) & sc.ctx, bound=sc.bound + fixed, parallel_ok=False)
        point_ctx = D.lift_to_context(known)

        def point(s: Scope) -> None:
            s.line(f"const int64_t {it} = {base} + {lane};")
            for v, a in zip(leaf.vars, node.args):
                if v in moving:
                    s.line(f"const int64_t {names.var(v)} = {a};")

        accs = []
        for red in reds:
            acc = self.fresh("lacc")
            accs.append(acc)
            outer.line(f"real {acc}[{self.lanes}] = {{0}};")

            def add(inner: Scope, into: str = acc, red=red) -> None:
                ln = inner.loop(lane, f"int {lane} = 0", f"{lane} < {self.lanes}", f"{lane} += 1", pragma="omp simd",
                                ctx=inner.ctx & point_ctx, bound=inner.bound + moving)
                point(ln)
                ln.line(f"{into}[{lane}] += {self.expr(red.body, ln)};")

            csr = self._csr_choice(red)
            if csr is None:
                self.reduce_nest(red, outer, add, lanes=self.lanes, acc=acc)
                continue
            k, atom, transposed = csr

            def add_in_row(inner: Scope, into: str = acc, red=red, k=k, atom=atom, transposed=transposed,
                           add=add) -> None:  # the row's entries once, each added into every lane
                self._csr_loop(into, red, atom, transposed, red.vars[k], red.sizes[k], inner,
                               lambda s: add(s, into))

            self.reduce_nest(red, outer, add_in_row, k, lanes=self.lanes, acc=acc)
        pt = sc.loop(lane, f"int {lane} = 0", f"{lane} < {self.lanes}", f"{lane} += 1")
        point(pt)
        for red, acc in zip(reds, accs):
            pt.cache[id(red)] = f"{acc}[{lane}]"
        leaf(node, pt.block())

    def max_in_lanes(self, e, scope: Scope) -> bool:
        """Whether maximum ``e`` (a ``MaxReduce``) runs in lanes: over one variable, its body reading along it
        (consecutive elements, ``reads_along``) with no reduction inside, and not itself inside a loop over
        lanes.  Its terms go to ``LANES`` running maxima in a vectorised loop, combined at the end: a maximum
        is the same whatever the order of its terms (of two zeros, the first: which zero may differ)."""
        return bool(self.lanes) and not scope.simd and self.lane_max(e)

    def has_max_in_lanes(self, body: Expr, over) -> bool:
        """Whether ``body`` holds a maximum that runs in lanes (``max_in_lanes``) at every point of the loops
        over variables ``over`` (one that reads none of them is computed once, outside): those loops then run
        their points one by one (``blocked``), each maximum taking the lanes."""
        return bool(self.lanes) and any(isinstance(n, MaxReduce) and self.lane_max(n)
                                        and any(v in over for v in free_index_vars(n)) for n in walk(body))

    @staticmethod
    def lane_max(e) -> bool:
        """A maximum over one variable whose body reads consecutive elements as it steps, holding no reduction."""
        return len(e.vars) == 1 and not has_reduce(e.body) \
            and not any(isinstance(n, MaxReduce) for n in walk(e.body)) and reads_along(e.body, e.vars[0])

    # ---------------------------------------------------------------------------------------------
    # reassociated reductions

    def reassociable(self, tree) -> bool:
        """A reduction whose loops are one loop with an evident trip count (a long sum of one index)."""
        return self.reassociable_nest(tree) and isinstance(tree.body, User)

    def reassociable_nest(self, tree) -> bool:
        """A reduction whose outermost loop has an evident trip count (a long sum of one index, or a sum
        over rows of several indices)."""
        return isinstance(tree, For) and not tree.degenerate and self.trip(tree) is not None

    def emit_reassociated(self, tree: For, scope: Scope, leaf: Leaf, acc: str, work: str, blocked: bool,
                          combine: Combine = SUM) -> None:
        """``acc += sum of the loop's terms`` (``combine``: or their maximum, ``MAX``, the leaf's ``into`` then
        taking the maximum), reassociated in a fixed order that does not depend on the
        number of threads: the iterations of the outermost loop are cut into chunks (the cut depends on
        its trip count only: for one loop at least ``REDUCE_CHUNK`` terms a chunk, for a nest of loops
        at least one row; at most ``REDUCE_CHUNKS`` chunks), each chunk's partial sum is computed by one
        thread, and the partial sums are added in order.  In a chunk, term ``k`` of an innermost loop
        goes to lane ``k mod LANES`` (a vectorisable loop over the lanes) and the lanes are combined by a
        fixed pairwise tree; where the terms hold reductions (``blocked``: a convolution inside the
        loss, whose sums lane blocking runs for several points at once), the innermost loops are
        emitted as everywhere and each point adds its term into its lane.  Every run, with any number
        of threads, adds the same numbers in the same order."""
        n, chunk, nch, part, q, lo, hi = (self.fresh(b) for b in ("len", "chunk", "nch", "part", "q", "lo", "hi"))
        sc = scope.block()
        sc.line(f"const int64_t {n} = tl_max(0, {self.trip(tree)});")
        if isinstance(tree.body, User):   # one loop
            sc.line(f"const int64_t {chunk} = tl_max({REDUCE_CHUNK}, "
                    f"({n} + {REDUCE_CHUNKS - 1}) / {REDUCE_CHUNKS} / {LANES} * {LANES} + {LANES});")
        else:
            sc.line(f"const int64_t {chunk} = tl_max(1, ({n} + {REDUCE_CHUNKS - 1}) / {REDUCE_CHUNKS});")
        sc.line(f"const int64_t {nch} = ({n} + {chunk} - 1) / {chunk};")
        sc.line(f"real {part}[{REDUCE_CHUNKS}];")
        body = sc.loop(q, f"int64_t {q} = 0", f"{q} < {nch}", f"{q} += 1", threads=self.threads(work, None, "1"))
        body.line(f"const int64_t {lo} = ({tree.init}) + {q} * {chunk};")
        body.line(f"const int64_t {hi} = tl_min({lo} + {chunk}, ({tree.init}) + {n});")
        span = For(tree.var, lo, f"{tree.var} < {hi}", "1", tree.body)
        self.emit_nest_in_lanes(span, body, leaf, f"{part}[{q}]", blocked, combine)
        sc.loop(q, f"int64_t {q} = 0", f"{q} < {nch}", f"{q} += 1").line(combine.into(acc, f"{part}[{q}]"))

    def emit_nest_in_lanes(self, span: For, sc: Scope, leaf: Leaf, out: str, blocked: bool,
                           combine: Combine = SUM) -> None:
        """``out = `` the sum of the terms of the loop nest ``span``: term ``k`` of each innermost loop
        into lane ``(k - start) mod LANES`` (a point outside such a loop into lane 0), the lanes combined
        by a pairwise tree.  Where the terms hold reductions (``blocked``), the innermost loops are
        emitted as everywhere (lane blocking runs several points' sums at once) and each point adds its
        term into its lane; otherwise ``emit_lanes_sum`` runs them (a vectorised loop over the lanes).
        Both add the same terms into the same lanes in the same order."""
        lane = self.fresh("lane")
        sc.line(combine.lanes(lane, LANES))
        current = []

        def innermost(tree: For, s: Scope) -> bool:
            trip = self.trip(tree)
            if tree.degenerate or not isinstance(tree.body, User) or trip is None:
                return False
            if blocked:
                current[:] = [tree]
                return False
            self.emit_lanes_sum(tree, s.block(), leaf, lane, f"({tree.init}) + tl_max(0, {trip})")
            return True

        def run(node: User, s: Scope, *_) -> None:
            loop = current[0] if current and current[0].body is node else None
            at = "0" if loop is None else f"(({loop.var}) - ({loop.init})) % {LANES}"
            leaf.run(node, s, f"{lane}[{at}]")

        into = Leaf(run, leaf.vars, leaf.body if blocked else None, leaf.domain, leaf.plain, leaf.bodies,
                    loop=innermost)
        self.emit_tree(span, sc, into)
        sc.line(f"{out} = {combine.tree([f'{lane}[{i}]' for i in range(LANES)])};")

    def emit_lanes_sum(self, span: For, sc: Scope, leaf: Leaf, lane: str, end: str, around=None) -> None:
        """``lane[(k - start) mod LANES] += `` term ``k`` of the innermost loop ``span``, for ``k`` from its
        start to ``end``: blocks of ``LANES`` terms in a vectorised loop, then the rest.  ``around(scope,
        body)``, if given, emits the code around each block's vector loop and each remaining term
        (``emit_jammed``: a loop over the elements whose lanes ``lane`` names)."""
        k, j = self.fresh("k"), self.fresh("j")
        around = around or (lambda s, body: body(s))

        def term(s: Scope, at: str, into: str) -> None:
            s.line(f"const int64_t {span.var} = {at};")
            leaf(span.body, s.block(), into)

        sc.line(f"int64_t {k} = {span.init};")

        def block(s: Scope) -> None:
            lanes = s.loop(j, f"int {j} = 0", f"{j} < {LANES}", f"{j} += 1", pragma="omp simd")
            term(lanes, f"{k} + {j}", f"{lane}[{j}]")

        around(sc.loop(k, "", f"{k} + {LANES} <= {end}", f"{k} += {LANES}"), block)
        around(sc.loop(k, "", f"{k} < {end}", f"{k} += 1"), lambda s: term(s, k, f"{lane}[({k} - {span.init}) % {LANES}]"))

    @staticmethod
    def threads(work: str, reduction: str | None, chunk: str | None = None) -> Threads:
        """An outermost loop's iterations may run on threads (``loop_ir.Threads``; the ``openmp`` pass decides
        whether they do): a nest of work ``work`` adding into ``reduction``, or a gather (``reduction`` None)
        dealt out in chunks of ``chunk`` iterations (about 1/32 of the loop; None: equal shares)."""
        return Threads(work, reduction, chunk)


@dataclass
class Chunks:
    """The C names of ``emit_chunked``'s plan: the reduction's length, the target's size, the chunks'
    length and number, the chunks a run and the runs, and the array of the runs' partial sums."""

    len: str
    gn: str
    chunk: str
    nch: str
    per: str
    npart: str
    part: str


def _pred_body(stmt: Stmt):
    """A statement's guard and body (``TRUE`` when it has none)."""
    return (stmt.body.pred, stmt.body.body) if isinstance(stmt.body, Guard) else (TRUE, stmt.body)


def _pred(stmt: Stmt):
    return _pred_body(stmt)[0]


def _fold(fn: str, terms: list[str]) -> str:
    """``fn(a, fn(b, ...))`` of C expressions (a binary macro such as ``tl_max``)."""
    return terms[0] if len(terms) == 1 else f"{fn}({terms[0]}, {_fold(fn, terms[1:])})"


def _tiled(dom, pos: int, name: str, size: int):
    """``dom`` with a new set dimension ``name`` at ``pos``: the tile (of ``size`` consecutive points) of
    its last dimension."""
    dom = dom.insert_dims(isl.dim_type.set, pos, 1).set_dim_name(isl.dim_type.set, pos, name)
    v = isl.affs_from_space(dom.get_space())
    last = v[dom.get_dim_name(isl.dim_type.set, dom.dim(isl.dim_type.set) - 1)]
    return dom & (v[name] * size).le_set(last) & last.lt_set(v[name] * size + size)


def between(dom, pos: int, lo: str, hi: str):
    """``dom`` where its dimension ``pos`` lies in ``[lo, hi)`` (``lo``, ``hi``: C names, parameters)."""
    dims = [f"tl_d{k}" for k in range(dom.dim(isl.dim_type.set))]
    cut = isl.Set.read_from_str(D.CTX, f"[{lo}, {hi}] -> {{ [{', '.join(dims)}] : {lo} <= {dims[pos]} < {hi} }}")
    return dom & cut


def unparen(c: str) -> str:
    """``c`` without the parentheses around the whole of it, if there are such."""
    if not (c.startswith("(") and c.endswith(")")):
        return c
    depth = 0
    for k, ch in enumerate(c):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and k < len(c) - 1:
            return c
    return c[1:-1]


def reads_along(e: Expr, v: IndexVar) -> bool:
    """Whether every array ``e`` reads is read at consecutive elements as ``v`` steps (``v`` in its last index
    only, with coefficient 1) or at one element whatever ``v`` is."""
    for n in walk(e):
        if isinstance(n, Access):
            index, _ = strip_accesses(n)
            if any(v in free_index_vars(a) for a in index[:-1]) or index[-1].coeff(v) not in (0, 1):
                return False
    return True


def lane_blockable(red: Reduce, moving) -> bool:
    """A reduction that lane blocking may run for several points of the ``moving`` variables at once:
    its domain does not move with them, its summand does (and depends on the summed variables), it has no
    nested reduction, and where its guard reads a relation it runs over a CSR row of one (a scatter-add's
    transpose: the row's entries are read once for all the lanes)."""
    summand = free_index_vars(red.body)
    return ((not has_relations(red.pred) or Sparse._csr_choice(red) is not None) and not has_reduce(red.body)
            and not any(v in moving for v in free_index_vars(red.pred))
            and any(v in moving for v in summand) and any(v in summand for v in red.vars))


def outer_reductions(body: Expr, guards: bool) -> list[Reduce]:
    """The reductions of ``body`` that no other reduction holds, reached through sums, products and
    calls (and brackets, if ``guards``: else only those evaluated unconditionally), each once."""
    out, seen, stack = [], set(), [body]
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, Reduce):
            out.append(e)
        elif isinstance(e, Guard) and guards:
            stack.append(e.body)
        elif isinstance(e, (Add, Mul)):
            stack += [e.right, e.left]
        elif isinstance(e, Call):
            stack += reversed(e.args)
    return out


def has_reduce(e: Expr) -> bool:
    return any(isinstance(n, Reduce) for n in walk(e))
