"""The C emitter: the statements of a lowered ``Program`` (``codegen.ir``) as one C entry point, over
loop nests from isl (``codegen.loops``).

Gather form.  A statement ``T[g] = [P] * b`` is one isl loop nest over the generator variables ``g``:
the part of the box where (the affine part of) ``P`` holds computes ``b``, the rest stores zero; isl
interleaves the two with tight bounds.  A reduction ``sum(v) [p] * e`` accumulates into a local over its
own isl nest (its guard is the domain: tight bounds, equalities as assignments, ``if``s only for what
does not depend on the summed variables); a scalar statement whose value is a reduction runs that
reduction in parallel with an OpenMP ``reduction`` clause (per-thread partial sums, no atomics).
Nothing is scattered (but the values of a sparse Jacobian, written at their positions in its CSR data:
``codegen.scatter``); the only zero-filled memory is the outputs' zero parts, written by the same nests.
A statement that ``codegen.contract`` marked as a dense contraction is one ``tl_gemm`` or ``tl_gemv``
call.

``CEmitter`` joins the parts: the scalar printer (``codegen.scalar``), the schedule (interchange, lane
blocking, OpenMP: ``codegen.schedule``), relations (``codegen.sparse``), and the helpers' text
(``codegen.c_runtime``); what a target can do is its ``caps`` (``codegen.target.Capabilities``).
"""
from __future__ import annotations

import re

import islpy as isl

from tensorlang.nodes import (
    TRUE, Access, Add, Affine, Call, Expr, Guard, IndexVar, Mul, Node, Proj, RelAtom, Var, box, conj,
)
from tensorlang.predicates import has_relations, over_approximation
from tensorlang.substitute import rebuild
from tensorlang.traversal import free_index_vars

from . import domains as D
from .build import build_c, c_flags, load as load_library
from .c_runtime import BLAS_HELPERS, c_prelude
from .entry_caller import caller as entry_caller
from .groups import find_groups
from .ir import Array, MaxReduce, Program, Reduce, Stmt, path_of
from .lower import C_RESERVED
from .loops import User, loop_nest
from .runtime import Runner
from .scalar import ScalarPrinter, Scope, literal
from .loop_ir import print_c, scheduled
from .scatter import Positions, Scatter
from .schedule import (
    BLOCK_LANES, INTERCHANGE_MAX_TARGET, MAX, SLAB, SUM, Combine, Leaf, Schedule, between, has_reduce,
    outer_reductions,
)
from .sparse import Sparse
from .target import Capabilities

__all__ = ["CEmitter", "emit_c", "load"]



class CEmitter(Scatter, ScalarPrinter, Schedule, Sparse):
    """Emits one C translation unit with one entry point for a lowered ``Program``."""

    caps = Capabilities(restrict="restrict", openmp=True, blas=True, workspace=True, interchange=True,
                        function_qualifier="static inline")

    def __init__(self, prog: Program, namer, dtype: str = "float64", entry: str = "tl_kernel",
                 scatter: Positions | None = None):
        self.prog = prog
        self.scatter = scatter
        self.namer = namer
        self.names = D.Names(prog.size_cnames, namer)
        self.dtype = dtype
        self.real = "float" if dtype == "float32" else "double"
        self.entry = entry
        self.functions: dict[str, str] = {}
        self.inputs_by_key = {(id(a.key[0]), a.key[1]): a for a in prog.inputs}
        self.temps_by_var = {id(a.key): a for a in prog.temps}
        self.relations = {id(r.var): r for r in prog.relations}
        self.counter = 0
        self.chunk_spans: dict[int, tuple] = {}  # reductions emitted in chunks (Schedule.emit_chunked)
        self.base_ctx = D.base_context(prog.sizes, self.names)
        self._entry_text: str | None = None
        self._entry_names: tuple | None = None
        self.loop_ir: list[tuple[str, list]] = []  # each statement's (or group's) loop IR as emitted, by label

    def emit(self) -> str:
        """The whole translation unit (prelude, black boxes, entry point)."""
        return self.translation_unit([self])

    def emit_entry(self) -> str:
        """The entry point's definition (emitted once; fills ``self.functions`` and relation views)."""
        if self._entry_text is None:
            body: list[str] = []
            outlined: dict[str, tuple[str, str]] = {}  # the statements' functions: text -> (name, definition)
            # a statement's shape (``shape``) -> its function and its parameters by position in the
            # shape's arrays: statements of one shape are emitted (isl's loops built) once
            shapes: dict[tuple, tuple] = {}
            groups = self.groups()
            sweep = self.sweep()
            temps = self.sweep_temporaries(sweep) if sweep else []
            # (the outputs' sweep is emitted at the last one, with the temporaries only it reads)
            done: set[int] = {id(s) for s in sweep[:-1]} | {id(t) for t, _, _ in temps}
            for stmt in self.prog.stmts:
                if id(stmt) in done:
                    continue
                nodes: list = []
                if sweep and stmt is sweep[-1]:
                    label = f"{', '.join(s.target.label for s in sweep)}: one sweep over the entries"
                    if temps:
                        label += f", {', '.join(t.target.label for t, _, _ in temps)} in blocks of rows beside it"
                    body.append(f"  /* {label} */")
                    self.emit_sweep(sweep, temps, Scope(nodes, self.base_ctx, ()))
                    self.loop_ir.append((label, nodes))
                    lines = print_c(scheduled(nodes, self.caps))
                    # (with temporaries, which it writes, the sweep stays in the entry point as a group does)
                    call = None if temps else self.outlined(stmt, lines, outlined)
                    body += lines if call is None else [self.call(*call)]
                    continue
                group = groups.get(id(stmt))
                if group is not None:  # in chunks, in the entry point
                    label = f"{', '.join(s.target.label for s in group.stmts)}: in chunks"
                    body.append(f"  /* {label} */")
                    self.emit_group(group, Scope(nodes, self.base_ctx, ()))
                    self.loop_ir.append((label, nodes))
                    body += print_c(scheduled(nodes, self.caps))
                    done |= {id(s) for s in group.stmts}
                    continue
                body.append(f"  /* {stmt.target.label} */")
                key, arrays = self.shape(stmt)
                if key is not None and shapes.get(key) is not None:  # an equal statement's function
                    name, params = shapes[key]
                    body.append(self.call(name, [arrays[k].cname for k in params]))
                    continue
                self.emit_stmt(stmt, Scope(nodes, self.base_ctx, ()))
                self.loop_ir.append((stmt.target.label, nodes))
                lines = print_c(scheduled(nodes, self.caps))
                call = self.outlined(stmt, lines, outlined)
                body += lines if call is None else [self.call(*call)]
                names = [a.cname for a in arrays]
                if key is not None and call is not None and set(call[1]) <= set(names):
                    shapes[key] = (call[0], [names.index(w) for w in call[1]])
            self._entry_text = "\n".join([self.entry_function(body), *(d for _, d in outlined.values())])
        return self._entry_text

    def outlined(self, stmt: Stmt, lines: list[str], functions: dict) -> list[str]:
        """A statement's C as a call of a function of the arrays it reads and writes, when it reads no
        other local of the entry point (relation views, scalar temporaries, the BLAS table).
        Statements whose text is the same once their arrays, loop counters and index variables are
        named by order of first appearance (the layers of a deep network, each layer's adjoint) share
        one function, the first one's text: the compiler builds it once, and the source grows with the
        number of distinct statements, not with the program.  ``functions`` (that canonical text ->
        (name, definition)) collects the definitions, which follow the entry point (declared before it).
        ``(name, the arrays it is called with)``; ``None`` when the statement stays in the entry point."""
        words = _WORD.findall("\n".join(lines))
        arrays, locals_ = self.entry_names
        if any(w in locals_ for w in words):
            return None
        renames: dict[str, str] = {}
        params: list[str] = []
        sizes = [self.names.size(s) for s in self.prog.sizes]
        for w in words:
            if w in renames:
                continue
            if w in arrays:
                renames[w] = f"tl_p{len(params)}"
                params.append(w)
            elif _FRESH.fullmatch(w):  # the emitter's fresh names keep what they name (tl_acc, tl_lacc...)
                renames[w] = f"{_FRESH.fullmatch(w).group(1)}{len(renames) - len(params)}"
            elif w in self.namer.taken and w not in C_RESERVED and w not in sizes:  # index variables
                renames[w] = f"tl_v{len(renames) - len(params)}"

        def rename(line: str) -> str:
            # a pragma names no array, but its words may be spelled like one (an input called dynamic)
            pragma = line.lstrip().startswith("#pragma")
            return _WORD.sub(lambda m: m.group(0) if pragma and m.group(0) in arrays
                             else renames.get(m.group(0), m.group(0)), line)

        def signature(named) -> str:
            decls = [f"const int64_t {s}" for s in sizes]
            decls += [self.parameter_type(w, stmt.target) + f"{self.caps.restrict} {named(w)}" for w in params]
            return ", ".join(decls) or "void"

        key = signature(renames.get) + "\n" + "\n".join(rename(line) for line in lines)
        if key not in functions:
            # the function is the first such statement's text, with its own names
            name = f"{self.entry}_s{len(functions)}"
            head = f"static void __attribute__((noinline)) {name}({signature(str)})"
            self.functions[name] = head + ";"
            functions[key] = (name, head + " {\n" + "\n".join(lines) + "\n}")
        return functions[key][0], params

    def call(self, name: str, params: list[str]) -> str:
        """The entry point's call of a statement's function on the arrays ``params``."""
        return f"  {name}({', '.join([self.names.size(s) for s in self.prog.sizes] + params)});"

    def shape(self, stmt: Stmt) -> tuple:
        """``(key, arrays)``: ``stmt`` written with its arrays (``arrays``: target first, then by order of
        first appearance; each with its kind and extents) and its index variables (with their order)
        numbered, so that statements of one key are the same C but for their arrays (``emit_entry``
        emits the first one only).  ``(None, [])`` for a BLAS call or a statement that reads a relation."""
        if stmt.contraction is not None:
            return None, []
        found = [stmt.target]
        arrays: dict[int, int] = {id(stmt.target): 0}
        ivars: dict[int, int] = {}
        order: list[IndexVar] = []

        def node(e) -> object:
            if isinstance(e, (Access, Proj, Var)):
                p = path_of(e)
                if p is not None:
                    var, projs, idx = p
                    arr = self.temps_by_var.get(id(var)) if not projs else None
                    arr = arr or self.inputs_by_key.get((id(var), projs))
                    if arr is None:
                        raise _NoShape
                    if id(arr) not in arrays:
                        arrays[id(arr)] = len(found)
                        found.append(arr)
                    return ("A", arrays[id(arr)], tuple(node(i) for i in idx))
            if isinstance(e, IndexVar):
                if id(e) not in ivars:
                    ivars[id(e)] = len(order)
                    order.append(e)
                return ("v", ivars[id(e)])
            if isinstance(e, RelAtom):
                raise _NoShape
            if isinstance(e, Node):
                return (type(e).__name__, node(e.children))
            if isinstance(e, tuple):
                return tuple(node(c) for c in e)
            return type(e).__name__, repr(e)  # a constant: -0.0 is not 0.0, 1.0 is not True

        try:
            key = (node(stmt.vars), node(stmt.body))
        except _NoShape:
            return None, []
        ranks = tuple(sorted(range(len(order)), key=lambda k: order[k].sort_key()))
        return (key, ranks, tuple((a.kind, node(a.dims)) for a in found)), found

    def groups(self) -> dict:
        """The statement groups that run in chunks (``codegen.groups``), by their first statement: with
        a target that runs chunked reductions (C, not CUDA)."""
        if not self.caps.interchange:
            return {}
        scope = Scope([], self.base_ctx, ())

        def chunked(stmt: Stmt):
            """The reduction of a small target of a long reduction (its length has a size that the
            target's has not) that runs in chunks: ``emit_chunked``'s for a 1-D target and one sum, else
            interchanged (``emit_group``)."""
            pred, body = (stmt.body.pred, stmt.body.body) if isinstance(stmt.body, Guard) else (TRUE, stmt.body)
            if not self.interchangeable(pred, body) or \
                    (len(stmt.vars) == 1 and len(body.vars) == 1 and not self.chunkable(stmt, pred, body, scope)):
                return None
            sizes = {v.name for d in stmt.target.dims for v, _ in d.terms}
            return body if any(v.name not in sizes for s in body.sizes for v, _ in s.terms) else None

        return find_groups(self.prog, chunked)

    @property
    def entry_names(self) -> tuple[set, set]:
        """The entry point's arrays (pointers a statement's function can take) and its other locals."""
        if self._entry_names is None:
            arrays = {a.cname for a in self.prog.inputs + self.prog.output_arrays()}
            arrays |= {"tl_data"} if self.scatter is not None else set()
            arrays |= {a.cname for a in self.prog.temps if not a.is_scalar}
            others = {a.cname for a in self.prog.temps if a.is_scalar} | {"tl_ws", "tl_blas", "tl_args", "tl_sizes"}
            # every view a relation may be passed as (which ones are decided while emitting)
            others |= {r.cname + view for r in self.prog.relations for view in ("_ptr", "_idx", "_tptr", "_tidx", "_mask")}
            self._entry_names = (arrays, others)
        return self._entry_names

    def entry_function(self, body: list[str]) -> str:
        decls = self.declarations()
        frees: list[str] = []  # temporaries live in the caller's workspace
        src = [f"/* {self.entry}: generated by tensorlang.codegen from:\n{_comment(str(self.prog.expr))}\n*/"]
        src.append(f"void {self.entry}(const int64_t *tl_sizes, void **tl_args) {{")
        src += ["  " + d for d in decls]
        src += body
        src += frees
        src.append("}")
        return "\n".join(src)

    def prelude(self) -> str:
        return c_prelude(self.real)

    @classmethod
    def translation_unit(cls, emitters) -> str:
        """One translation unit holding the entry points of several kernels (same dtype)."""
        entries = [em.emit_entry() for em in emitters]
        functions: dict[str, str] = {}
        for em in emitters:
            functions.update(em.functions)
        prelude = emitters[0].prelude()
        if cls.caps.blas and any(em.blas_calls() for em in emitters):
            prelude += BLAS_HELPERS
        return "\n".join([prelude, *functions.values(), *entries]) + "\n"

    def target_meta(self) -> dict:
        """What the runner needs besides ``generate.program_meta`` (nothing, for C)."""
        return {}

    def blas_calls(self) -> bool:
        """Whether the entry point takes the BLAS table (after its outputs)."""
        return self.caps.blas and self.prog.blas

    def declarations(self) -> list[str]:
        return self.arg_declarations() + self.temp_declarations()

    def temp_declarations(self) -> list[str]:
        """Scalar temporaries are locals; the others are cut from the workspace the run time passes as
        the last argument (each ``TL_WS_BYTES`` long, 64-byte aligned) and reuses between calls, so a
        large temporary is not fresh memory (page faults) on every call."""
        out = []
        big = [a for a in self.prog.temps if not a.is_scalar]
        for a in self.prog.temps:
            if a.is_scalar:
                out.append(f"real {a.cname} = 0;")
        if big:
            out.append(f"char *tl_ws = (char *)tl_args[{self.n_args}];")
            for a in big:
                out.append(f"real *{self.caps.restrict} {a.cname} = (real *)tl_ws; "
                           f"tl_ws += TL_WS_BYTES({self.size_product(self.layout(a))});")
        return out

    def arg_declarations(self) -> list[str]:
        out = []
        for k, s in enumerate(self.prog.sizes):
            out.append(f"const int64_t {self.names.size(s)} = tl_sizes[{k}];")
        k = 0
        for a in self.prog.inputs:
            out.append(f"const real *{self.caps.restrict} {a.cname} = (const real *)tl_args[{k}];")
            k += 1
        for r in self.prog.relations:
            for name, flag, ctype in self.relation_views(r):
                out.append(f"const {ctype} *{self.caps.restrict} {name} = (const {ctype} *)tl_args[{k}];")
                k += 1
        out += self.output_declarations(k)
        k += len(self.prog.output_arrays()) + (self.scatter is not None)
        if self.blas_calls():
            out.append(f"void *const *tl_blas = (void *const *)tl_args[{k}];")
            k += 1
        self.n_args = k
        return out

    def emit_stmt(self, stmt: Stmt, scope: Scope) -> None:
        con = stmt.contraction
        if con is not None and self.blas_calls() and not self.scattered(stmt.target):
            self.emit_contraction(stmt, con, scope)
            return
        arr = stmt.target
        gv = stmt.vars
        pred, body = (stmt.body.pred, stmt.body.body) if isinstance(stmt.body, Guard) else (TRUE, stmt.body)
        if not gv:
            self.emit_scalar_stmt(arr, pred, body, scope)
            return
        stored = self.stored_over_entries(stmt)
        if stored is not None:
            self.emit_over_entries(stmt, stored, scope)
            return
        if self.caps.interchange and self.interchangeable(pred, body) and \
                not self.slabs_beat_interchange(stmt, pred, body):
            # small target, long reduction: chosen at run time (the sizes are symbolic)
            g, r = self.size_product(arr.dims), self.size_product(body.sizes)
            chunked = self.chunkable(stmt, pred, body, scope)
            if chunked:  # a block of lanes of elements, and few enough for every chunk's partial sums
                at, scope = scope.branch(f"({g}) <= {INTERCHANGE_MAX_TARGET} && ({g}) >= {BLOCK_LANES}", orelse=True)
                self.emit_chunked(stmt, pred, body, chunked, at)
            # a gather whose innermost loop is lane-blocked keeps its sums in registers: better, when
            # that loop has a block's worth of points
            lanes = f" && ({self.size_product(arr.dims[-1:])}) < {BLOCK_LANES}" if self.lane_blocked(gv, body) else ""
            interchanged, gather = scope.branch(f"({g}) <= {INTERCHANGE_MAX_TARGET} && ({r}) >= 4 * ({g}){lanes}",
                                                orelse=True)
            self.emit_interchanged(stmt, pred, body, interchanged)
            self.emit_rows(stmt, pred, body, gather)
            return
        self.emit_rows(stmt, pred, body, scope)

    def emit_rows(self, stmt: Stmt, pred, body, scope: Scope) -> None:
        """``T[g] = [P] * body`` as a gather, or row by row of its first loop with its sums into slabs
        (``emit_slab``) when a row's slab fits in ``SLAB`` elements and, where lane blocking serves the gather
        as well (``slab_beats_lanes``), its last loop is too short for a block (chosen at run time)."""
        reds = self.slab_reductions(stmt, pred, body) \
            if self.caps.interchange and not self.scattered(stmt.target) else []
        if not reds:
            self.emit_gather(stmt, pred, body, scope)
            return
        short = "" if self.slab_beats_lanes(stmt, reds) else \
            f" && ({self.size_product(stmt.target.dims[-1:])}) < {BLOCK_LANES}"
        slab, gather = scope.branch(f"({self.size_product(stmt.target.dims[1:])}) <= {SLAB}{short}", orelse=True)
        self.emit_slab(stmt, pred, body, reds, slab)
        self.emit_gather(stmt, pred, body, gather)

    def emit_gather(self, stmt: Stmt, pred, body, scope: Scope, window: tuple[str, str] | None = None) -> None:
        """``T[g] = [P] * body`` (see the module docstring); ``window``: C names ``(lo, hi)``, the points
        ``lo <= g0 < hi`` only (``g0`` the first variable)."""
        arr = stmt.target
        gv = stmt.vars
        names = self.names
        ranges = self.written(stmt)
        dom_all = D.domain(ranges, gv, scope.bound, names)
        dom_c = D.domain(conj(ranges, pred), gv, scope.bound, names)
        if window is not None:
            lo, hi = window
            dom_all, dom_c = between(dom_all, 0, lo, hi), between(dom_c, 0, lo, hi)
        dom_z = dom_all - dom_c
        its = [self.fresh("c") for _ in gv]
        pieces = self.split_by_reductions(self.split_by_guards(dom_c, body, gv, scope), body, gv, scope)
        bodies = {f"C{k}": b for k, (_, b) in enumerate(pieces)}
        stmts = [(f"C{k}", piece) for k, (piece, _) in enumerate(pieces)] + [("Z", dom_z)]
        tree = loop_nest(stmts, scope.ctx, its)
        if tree is None:
            return
        work = f"{self.size_product(arr.dims)} * ({self.body_work(body)})"
        exact = not has_relations(pred)

        def user(node: User, sc: Scope):
            for v, a in zip(gv, node.args):
                sc.line(f"const int64_t {names.var(v)} = {a};")
            at = [Affine.var(v) for v in gv]
            if node.name == "Z":
                sc.line(self.store(arr, at, "0", True))
                return
            known = node.domain if node.domain is not None else dom_c
            inner = sc.child(ctx=(D.lift_to_context(known) & sc.ctx), bound=sc.bound + gv, parallel_ok=False)
            cond = None if exact else self.pred(pred, inner)
            self.write_guarded(inner, cond, bodies[node.name], lambda value: self.store(arr, at, value, True))

        leaf = Leaf(user, gv, body if exact else None, dom_c, plain=("Z",), bodies=bodies if exact else {})
        self.emit_tree(tree, scope, leaf, parallel=scope.parallel_ok, work=work)

    def emit_contraction(self, stmt: Stmt, con, scope: Scope) -> None:
        """A statement marked by ``codegen.contract``: one ``tl_gemm``/``tl_gemv`` call."""
        arr = stmt.target

        def ld(a: Array) -> str:
            return f"(int64_t)({self.affine(self.layout(a)[-1])})"

        alpha = literal(con.alpha)
        m, k = f"(int64_t)({self.affine(con.m)})", f"(int64_t)({self.affine(con.k)})"
        if con.kind == "gemm":
            n = f"(int64_t)({self.affine(con.n)})"
            scope.line(f"tl_gemm(tl_blas, {m}, {n}, {k}, {alpha}, {con.x.cname}, {int(con.x_t)}, {ld(con.x)}, "
                       f"{con.y.cname}, {int(con.y_t)}, {ld(con.y)}, {arr.cname}, {ld(arr)});")
        else:
            scope.line(f"tl_gemv(tl_blas, {m}, {k}, {alpha}, {con.x.cname}, {int(con.x_t)}, {ld(con.x)}, "
                       f"{con.y.cname}, {arr.cname});")

    def split_by_guards(self, dom, body: Expr, gv, scope: Scope, limit: int = 16) -> list:
        """Index-set splitting: the domain cut by the affine guards inside the body (outside reductions)
        that depend on the generator variables, so that within each piece every such guard is constant
        and the loops carry no tests.  At most ``limit`` pieces; otherwise the domain whole."""
        preds = []
        stack, seen = [body], set()
        while stack:
            e = stack.pop()
            if id(e) in seen or isinstance(e, Reduce):
                continue
            seen.add(id(e))
            if isinstance(e, Guard):
                if not has_relations(e.pred) and any(v in free_index_vars(e.pred) for v in gv):
                    preds.append(e.pred)
                stack.append(e.body)
            elif isinstance(e, (Add, Mul)):
                stack += [e.left, e.right]
            elif isinstance(e, Call):
                stack += list(e.args)
        pieces = [dom]
        for p in preds[:10]:
            g = D.domain(p, gv, scope.bound, self.names)
            new = []
            for piece in pieces:
                for part in (piece & g, piece - g):
                    part = part.coalesce()
                    if not part.intersect_params(scope.ctx).is_empty():
                        new.append(part)
            if len(new) > limit:
                break
            pieces = new
        return pieces

    def split_by_reductions(self, pieces, body: Expr, gv, scope: Scope, limit: int = 16) -> list:
        """Boundary splitting: each piece of a gather's domain cut by the interior of each reduction in
        the body (outside other reductions) whose guard depends on the generator variables: the points
        where the guard holds over the reduction's whole box.  There the reduction is the same sum over
        its box with no guard (the piece's body says so), whose loops have constant bounds and which lane
        blocking and vectorisation take as in a forward convolution; the few edge points keep the
        guarded sum.  ``[(piece, body)]``, at most ``limit`` pieces."""
        out = [(piece, body) for piece in pieces]
        for red in _guarded_reductions(body, gv):
            inner = self.interior(red, gv, scope)
            full = Reduce(red.vars, red.sizes, TRUE, red.body)
            new = []
            for piece, b in out:
                for part, pb in ((piece & inner, _replaced(b, red, full)), (piece - inner, b)):
                    part = part.coalesce()
                    if not part.intersect_params(scope.ctx).is_empty():
                        new.append((part, pb))
            if len(new) > limit:
                break
            out = new
        return out

    def interior(self, red: Reduce, gv, scope: Scope):
        """The points of ``gv`` (an isl set over them) where ``red``'s guard holds at every point of its
        box: the box less the projection of the points of both boxes where the guard fails."""
        allv = tuple(gv) + tuple(red.vars)
        both = D.domain(box(zip(red.vars, red.sizes)), allv, scope.bound, self.names)
        held = D.domain(conj(box(zip(red.vars, red.sizes)), red.pred), allv, scope.bound, self.names)
        failing = (both - held).project_out(isl.dim_type.set, len(gv), len(red.vars))
        return D.domain(TRUE, gv, scope.bound, self.names) - failing

    def emit_scalar_stmt(self, arr: Array, pred, body: Expr, scope: Scope) -> None:
        cond = self.pred(pred, scope) if pred is not TRUE else None
        if cond == "0":
            scope.line(self.store(arr, [], "0"))
            return
        if cond is None:
            inner = scope.child().block()
            value = self.expr(body, inner)
            inner.line(self.store(arr, [], value))
            return
        inner, zero = scope.branch(cond, orelse=True,
                                   ctx=scope.ctx & D.params_set(over_approximation(pred), scope.bound, self.names))
        value = self.expr(body, inner)
        inner.line(self.store(arr, [], value))
        zero.line(self.store(arr, [], "0"))

    def _emit_Reduce(self, e: Reduce, scope: Scope) -> str:
        acc = self.fresh("acc")
        scope.line(f"real {acc} = 0;")
        if e.pred is TRUE and not any(v in free_index_vars(e.body) for v in e.vars):
            # a sum of a term that does not depend on the summed variables over a box: count * term
            count = self.size_product(e.sizes, "real")
            inner = scope.branch(f"({count}) > 0")
            inner.line(f"{acc} = ({count}) * {self.expr(e.body, inner)};")
            return acc
        csr = self._csr_choice(e)
        exact = not has_relations(e.pred)

        def add(inner: Scope, into: str = acc) -> None:
            if csr is not None:
                k, atom, transposed = csr
                self._csr_loop(into, e, atom, transposed, e.vars[k], e.sizes[k], inner)
            elif exact:
                inner.line(f"{into} += {self.expr(e.body, inner)};")
            else:
                self._filtered_add(into, e.pred, e.body, inner)

        self.reduce_nest(e, scope, add, None if csr is None else csr[0], acc,
                         blockable=csr is None and exact, acc=acc)
        return acc

    def _emit_MaxReduce(self, e: MaxReduce, scope: Scope) -> str:
        """``max(r..) body``: ``-INFINITY`` (the maximum of an empty box), then ``tl_fmax`` at every point of
        the box (NaN propagates, as in the evaluator); a top-level maximum of enough work in chunks on
        OpenMP's threads, each chunk in lanes (``emit_reassociated``); a maximum over one loop whose body
        reads along it, in lanes (``max_in_lanes``); else in sequential loops."""
        acc = self.fresh("max")
        scope.line(f"real {acc} = -(real)INFINITY;")

        def keep(inner: Scope, into: str = acc) -> None:
            inner.line(MAX.into(into, self.expr(e.body, inner)))

        self.reduce_nest(e, scope, keep, reduction=acc, combine=MAX)
        return acc

    def reduce_nest(self, e: Reduce | MaxReduce, scope: Scope, add, skip: int | None = None,
                    reduction: str | None = None, blockable: bool = False, acc: str | None = None,
                    lanes: int = 0, combine: Combine = SUM) -> None:
        """The loops of a reduction over its domain (less the variable at position ``skip``, which a CSR
        row binds), calling ``add(scope)`` (or ``add(scope, into)``) at each point; parallel with an
        OpenMP ``reduction`` clause on ``reduction`` where the scope allows it (a maximum, ``combine``
        ``MAX``: only in reassociated chunks, each chunk's lanes and the chunks combined by ``tl_fmax``); its
        innermost loop lane-blocked if ``blockable``.  A reduction that ``emit_chunked`` runs in chunks adds the terms
        of the current chunk into ``acc`` (of ``lanes`` lanes, or a scalar) in interleaved ways."""
        full = D.domain(conj(box(zip(e.vars, e.sizes)), e.pred), e.vars, scope.bound, self.names)
        dom = full if skip is None else full.project_out(isl.dim_type.set, skip, 1)
        bound_vars = tuple(v for k, v in enumerate(e.vars) if k != skip)
        tree = loop_nest([("S", dom)], scope.ctx, [self.fresh("r") for _ in bound_vars])
        if tree is None:
            return
        names = self.names

        def user(node: User, sc: Scope, into: str | None = None):
            for w, a in zip(bound_vars, node.args):
                sc.line(f"const int64_t {names.var(w)} = {a};")
            ctx = D.lift_to_context(node.domain if node.domain is not None else dom) & sc.ctx
            inner = sc.child(ctx=ctx, bound=sc.bound + bound_vars, parallel_ok=False)
            add(inner) if into is None else add(inner, into)

        leaf = Leaf(user, bound_vars, e.body if blockable else None, dom)
        if id(e) in self.chunk_spans:
            self.emit_ways(*self.chunk_spans[id(e)], scope, leaf, acc, lanes)
            return
        body_work = f"({self.body_work(e.body)})"
        if reduction is not None and scope.parallel_ok and self.caps.openmp and self.reassociable_nest(tree):
            sizes = [s for k, s in enumerate(e.sizes) if k != skip]
            self.emit_reassociated(tree, scope, leaf, reduction, self.size_product(sizes) + " * " + body_work,
                                   blocked=has_reduce(e.body) or self.has_max_in_lanes(e.body, e.vars),
                                   combine=combine)
            return
        if combine is MAX and self.max_in_lanes(e, scope) and self.reassociable(tree):
            self.emit_nest_in_lanes(tree, scope.block(), leaf, reduction, blocked=False, combine=MAX)
            return
        summed = combine is SUM   # (OpenMP's reduction clause of emit_tree adds)
        self.emit_tree(tree, scope, leaf, parallel=scope.parallel_ok and summed,
                       work=self.size_product(e.sizes[:1]) + " * " + body_work, reduction=reduction if summed else None)

    def _filtered_add(self, acc: str, pred, body, scope: Scope) -> None:
        cond = self.pred(pred, scope)
        if cond == "0":
            return
        if cond is None:
            scope.line(f"{acc} += {self.expr(body, scope)};")
            return
        inner = scope.branch(cond)
        inner.line(f"{acc} += {self.expr(body, inner)};")


class _NoShape(Exception):
    """A statement that ``CEmitter.shape`` does not key."""


_WORD = re.compile(r"\b[A-Za-z_]\w*\b")
_FRESH = re.compile(r"(tl_[a-z]+)\d+")  # the emitter's fresh names (ScalarPrinter.fresh)


def _guarded_reductions(body: Expr, gv) -> list[Reduce]:
    """The reductions of ``body`` outside other reductions whose guard is affine and depends on ``gv``."""
    return [e for e in outer_reductions(body, guards=True)
            if not has_relations(e.pred) and any(v in free_index_vars(e.pred) for v in gv)][:4]


def _replaced(e: Expr, old: Expr, new: Expr) -> Expr:
    if e is old:
        return new
    return rebuild(e, lambda c: _replaced(c, old, new) if isinstance(c, Expr) else c) if e.children else e


def _comment(text: str) -> str:
    return "\n".join("   " + line.replace("*/", "* /") for line in text.splitlines())


def emit_c(prog: Program, namer, dtype: str = "float64", entry: str = "tl_kernel") -> str:
    return CEmitter(prog, namer, dtype, entry).emit()


def load(source: str, meta: dict, error, sanitize: bool = False) -> tuple[Runner, str, list[str]]:
    """The ``Target.load`` of C: the library built (cached) with the flags of ``codegen.build.c_flags``
    and loaded in-process, its runner (calling the entry point through ``entry_caller`` where it is built, and
    through ctypes for a sanitized kernel), its path and those flags."""
    flags = c_flags(sanitize=sanitize)
    library = build_c(source, flags=flags)
    caller = None if sanitize else entry_caller()
    return Runner(meta, load_library(library, sanitize), error=error, caller=caller), library, flags
