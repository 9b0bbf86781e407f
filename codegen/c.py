"""The C emitter: a small printer with one method per node kind (``_emit_<Class>``), over the statement
form of ``codegen.ir``, with loops from isl (``codegen.loops``).

Gather form.  A statement ``T[g] = [P] * b`` is one isl loop nest over the generator variables ``g``:
the part of the box where (the affine part of) ``P`` holds computes ``b``, the rest stores zero; isl
interleaves the two with tight bounds.  The outermost loop of each nest is parallel (OpenMP, when the
compiler has it, and only when the statement is big enough to pay for the threads).  A reduction
``sum(v) [p] * e`` accumulates into a local over its own isl nest (its guard is the domain: tight bounds,
equalities as assignments, ``if``s only for what does not depend on the summed variables); a scalar
statement whose value is a reduction runs that reduction in parallel with an OpenMP ``reduction``
clause (per-thread partial sums, no atomics).  Nothing is scattered; the only zero-filled memory is
the outputs' zero parts, written by the same nests.

Data relations: ``sum(j) [E(a, j + c) and q] * e`` over a 2-D relation iterates row ``a`` of ``E`` in CSR
form (``E(j + c, a)``: the CSR of the transpose), so it costs O(nnz); any other relation atom is a
binary search in a CSR row, or a lookup in a dense mask for 1-D and higher-dimensional relations.

Scalar expressions: black boxes are printed once each as a ``static inline`` C function from their
SymPy body with SymPy's C99 code printer (so user-registered and derived functions such as ``relu_d0``
work like built-ins); hash-consed subterms used more than once are computed once into a local.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

import islpy as isl
from sympy.printing.c import C99CodePrinter

from tensorlang.errors import UnsupportedError
from tensorlang.functions import lookup
from tensorlang.nodes import (
    TRUE, Access, Add, Affine, And, Call, Const, Exists, Expr, FalsePred, Guard, IndexVar, Mul, Or, RelAtom,
    TruePred, Var, box, conj, walk,
)
from tensorlang.predicates import has_relations, over_approximation
from tensorlang.traversal import free_index_vars

from . import domains as D
from .build import VECTOR_MATH_DECLS
from .ir import Array, Program, Reduce, Relation, Stmt
from .loops import Block, For, If, User, cond_c, loop_nest
from .lower import path_of

__all__ = ["CEmitter", "emit_c", "PRELUDE"]

INTERCHANGE_MAX_TARGET = 256  # elements of a target small enough to accumulate in place (L1)
PARALLEL_WORK = 1 << 21  # points times inner work below which a nest runs on one thread (~1 ms of work)
PARALLEL_CHUNKS = 32  # dynamic scheduling of gather loops: about this many chunks per loop
LANES = 8  # points of an innermost loop that lane blocking computes at once (two AVX2 vectors of doubles)

PRELUDE = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#define tl_min(a, b) ((a) < (b) ? (a) : (b))
#define tl_max(a, b) ((a) > (b) ? (a) : (b))
#define TL_WS_BYTES(n) (((size_t)((n) + 1) * sizeof(real) + 63) & ~(size_t)63)
static inline int64_t tl_floord(int64_t a, int64_t b) {
  int64_t q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
""" + VECTOR_MATH_DECLS.lstrip("\n") + r"""static inline int tl_csr_has(const int32_t *ptr, const int32_t *idx, int64_t r, int64_t c) {
  int64_t lo = ptr[r], hi = ptr[r + 1];
  while (lo < hi) { int64_t mid = (lo + hi) >> 1; if (idx[mid] < c) lo = mid + 1; else hi = mid; }
  return lo < ptr[r + 1] && idx[lo] == c;
}
"""


BLAS_HELPERS = r"""
/* dense contractions (codegen.contract): the BLAS routine handed over by the run time in tl_blas
   ({gemm, gemv, ilp64 flag}: NumPy's own OpenBLAS or SciPy's), otherwise tiled loops (i-k-j). */
typedef void (*tl_gemm64_t)(const char *, const char *, const int64_t *, const int64_t *, const int64_t *,
  const real *, const real *, const int64_t *, const real *, const int64_t *, const real *, real *, const int64_t *);
typedef void (*tl_gemm32_t)(const char *, const char *, const int32_t *, const int32_t *, const int32_t *,
  const real *, const real *, const int32_t *, const real *, const int32_t *, const real *, real *, const int32_t *);
typedef void (*tl_gemv64_t)(const char *, const int64_t *, const int64_t *, const real *, const real *,
  const int64_t *, const real *, const int64_t *, const real *, real *, const int64_t *);
typedef void (*tl_gemv32_t)(const char *, const int32_t *, const int32_t *, const real *, const real *,
  const int32_t *, const real *, const int32_t *, const real *, real *, const int32_t *);
#define TL_I32(v) ((v) <= 2147483647LL)
/* C[i*ldc + j] = alpha * sum_k X(i, k) Y(k, j) for i < M, j < N;
   X(i, k) = xt ? X[k*ldx + i] : X[i*ldx + k];  Y(k, j) = yt ? Y[j*ldy + k] : Y[k*ldy + j]. */
static void tl_gemm(void *const *blas, int64_t M, int64_t N, int64_t K, real alpha,
                    const real *restrict X, int xt, int64_t ldx, const real *restrict Y, int yt, int64_t ldy,
                    real *restrict C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) { for (int64_t i = 0; i < M; i++) for (int64_t j = 0; j < N; j++) C[i * ldc + j] = 0; return; }
  ldx = tl_max(ldx, 1); ldy = tl_max(ldy, 1); ldc = tl_max(ldc, 1);
  if (blas && blas[0]) {
    /* row-major C is column-major C^T = op(Y)^T op(X)^T */
    const char ta = yt ? 'T' : 'N', tb = xt ? 'T' : 'N';
    const real beta = 0;
    if (blas[2]) {
      ((tl_gemm64_t)blas[0])(&ta, &tb, &N, &M, &K, &alpha, Y, &ldy, X, &ldx, &beta, C, &ldc);
      return;
    }
    if (TL_I32(M) && TL_I32(N) && TL_I32(K) && TL_I32(ldx) && TL_I32(ldy) && TL_I32(ldc)) {
      const int32_t m = (int32_t)N, n = (int32_t)M, k = (int32_t)K;
      const int32_t a = (int32_t)ldy, b = (int32_t)ldx, c = (int32_t)ldc;
      ((tl_gemm32_t)blas[0])(&ta, &tb, &m, &n, &k, &alpha, Y, &a, X, &b, &beta, C, &c);
      return;
    }
  }
  real *yt_buf = NULL;
  if (yt) {  /* Y stored as Y[j][k]: transpose it once so the inner loop is contiguous */
    yt_buf = (real *)malloc(sizeof(real) * (size_t)(K * N));
    for (int64_t j = 0; j < N; j++) for (int64_t k = 0; k < K; k++) yt_buf[k * N + j] = Y[j * ldy + k];
    Y = yt_buf; ldy = N;
  }
  #pragma omp parallel for schedule(static) if((double)M * (double)N * (double)K >= 2097152.0)
  for (int64_t i0 = 0; i0 < M; i0 += 16) {
    const int64_t i1 = tl_min(i0 + 16, M);
    for (int64_t i = i0; i < i1; i++) for (int64_t j = 0; j < N; j++) C[i * ldc + j] = 0;
    for (int64_t j0 = 0; j0 < N; j0 += 512) {
      const int64_t j1 = tl_min(j0 + 512, N);
      for (int64_t k0 = 0; k0 < K; k0 += 128) {
        const int64_t k1 = tl_min(k0 + 128, K);
        for (int64_t i = i0; i < i1; i++) {
          real *restrict c = C + i * ldc;
          for (int64_t k = k0; k < k1; k++) {
            const real a = xt ? X[k * ldx + i] : X[i * ldx + k];
            const real *restrict y = Y + k * ldy;
            for (int64_t j = j0; j < j1; j++) c[j] += a * y[j];
          }
        }
      }
    }
    if (alpha != 1) for (int64_t i = i0; i < i1; i++) for (int64_t j = 0; j < N; j++) C[i * ldc + j] *= alpha;
  }
  free(yt_buf);
}
/* y[i] = alpha * sum_k X(i, k) v[k] for i < M;  X(i, k) = xt ? X[k*ldx + i] : X[i*ldx + k]. */
static void tl_gemv(void *const *blas, int64_t M, int64_t K, real alpha, const real *restrict X, int xt,
                    int64_t ldx, const real *restrict v, real *restrict y) {
  if (M <= 0) return;
  if (K <= 0) { for (int64_t i = 0; i < M; i++) y[i] = 0; return; }
  ldx = tl_max(ldx, 1);
  if (blas && blas[1]) {
    /* row-major X[i][k] is column-major K x M: y = op^T; X[k][i] is column-major M x K: y = op */
    const char t = xt ? 'N' : 'T';
    const real beta = 0;
    if (blas[2]) {
      const int64_t m = xt ? M : K, n = xt ? K : M, one = 1;
      ((tl_gemv64_t)blas[1])(&t, &m, &n, &alpha, X, &ldx, v, &one, &beta, y, &one);
      return;
    }
    if (TL_I32(M) && TL_I32(K) && TL_I32(ldx)) {
      const int32_t m = (int32_t)(xt ? M : K), n = (int32_t)(xt ? K : M), lda = (int32_t)ldx, one = 1;
      ((tl_gemv32_t)blas[1])(&t, &m, &n, &alpha, X, &lda, v, &one, &beta, y, &one);
      return;
    }
  }
  if (!xt) {
    #pragma omp parallel for schedule(static) if((double)M * (double)K >= 2097152.0)
    for (int64_t i = 0; i < M; i++) {
      real acc = 0;
      for (int64_t k = 0; k < K; k++) acc += X[i * ldx + k] * v[k];
      y[i] = alpha * acc;
    }
    return;
  }
  #pragma omp parallel for schedule(static) if((double)M * (double)K >= 2097152.0)
  for (int64_t i0 = 0; i0 < M; i0 += 1024) {
    const int64_t i1 = tl_min(i0 + 1024, M);
    for (int64_t i = i0; i < i1; i++) y[i] = 0;
    for (int64_t k = 0; k < K; k++) {
      const real a = v[k];
      const real *restrict x = X + k * ldx;
      for (int64_t i = i0; i < i1; i++) y[i] += x[i] * a;
    }
    if (alpha != 1) for (int64_t i = i0; i < i1; i++) y[i] *= alpha;
  }
}
"""


class _FnPrinter(C99CodePrinter):
    """SymPy's C99 printer; black-box bodies are evaluated in double, integers printed as doubles (so
    that ``fmax(0, u)`` is ``fmax(0.0, u)``, which C++/CUDA overload resolution needs)."""

    def _print_Integer(self, expr):
        return f"{int(expr)}.0"


def function_c(name: str, cname: str, qual: str = "static inline") -> str:
    """A black box as a C function from its SymPy body (``spec.expr`` over ``spec.params``)."""
    spec = lookup(name)
    params = ", ".join(f"real a{k}" for k in range(spec.arity))
    conv = "".join(f" const double {p} = (double)a{k};" for k, p in enumerate(spec.params))
    body = _FnPrinter().doprint(spec.expr)
    if "Not supported" in body or "//" in body:
        raise UnsupportedError(f"function {name}: SymPy's C printer cannot print {spec.expr}")
    return f"{qual} real {cname}({params}) {{{conv} return (real)({body}); }}"


def _lit(value) -> str:
    if isinstance(value, Fraction):
        value = float(value)
    if isinstance(value, int):
        return f"((real){value})"
    f = float(value)
    if f != f or f in (float("inf"), float("-inf")):
        return {True: "((real)NAN)"}.get(f != f, "((real)INFINITY)" if f > 0 else "(-(real)INFINITY)")
    return f"((real){f!r})"


class _Scope:
    """A C block being written: its lines, indentation, the isl context (what is known here), the index
    variables bound here (outermost first), and cached values of subterms (visible in nested blocks)."""

    def __init__(self, lines, indent, ctx, bound, parent=None, parallel_ok=True):
        self.lines = lines
        self.indent = indent
        self.ctx = ctx
        self.bound = bound
        self.cache: dict[int, str] = {}
        self.parent = parent
        self.parallel_ok = parallel_ok

    def child(self, ctx=None, bound=None, indent_by=1, lines=None, parallel_ok=None):
        return _Scope(self.lines if lines is None else lines, self.indent + indent_by,
                      self.ctx if ctx is None else ctx, self.bound if bound is None else bound, self,
                      self.parallel_ok if parallel_ok is None else parallel_ok)

    def line(self, text: str) -> None:
        self.lines.append("  " * self.indent + text)

    def lookup(self, node) -> str | None:
        s = self
        while s is not None:
            hit = s.cache.get(id(node))
            if hit is not None:
                return hit
            s = s.parent
        return None


@dataclass
class _Leaf:
    """What a loop nest runs at each of its points (``run(node, scope)``), with what lane blocking needs
    to know of it: the index variables the point's coordinates bind, the body whose reductions may be
    computed for several points at once (``None``: none may), the isl statements (by name) that do not
    run that body, and the nest's domain, for leaves isl gives none."""

    run: Callable
    vars: tuple = ()
    body: Expr | None = None
    domain: object = None
    plain: tuple = ()

    def __call__(self, node: User, sc: _Scope) -> None:
        self.run(node, sc)

    def body_at(self, node: User) -> Expr | None:
        return None if node.name in self.plain else self.body


class CEmitter:
    """Emits one C translation unit with one entry point for a lowered ``Program``."""

    real = "double"
    restrict = "restrict"
    openmp = True
    lanes = LANES  # lane blocking of innermost loops (0: none)
    uses_blas = True  # contractions marked by codegen.contract become tl_gemm/tl_gemv calls

    def __init__(self, prog: Program, namer, dtype: str = "float64", entry: str = "tl_kernel"):
        self.prog = prog
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
        self.base_ctx = D.base_context(prog.sizes, self.names)

    # ---------------------------------------------------------------------------------------------
    # helpers

    def fresh(self, base: str) -> str:
        self.counter += 1
        return f"tl_{base}{self.counter}"

    def affine(self, a: Affine) -> str:
        parts = []
        for v, c in a.terms:
            name = self.names.var(v) if isinstance(v, IndexVar) else self.names.size(v.name)
            parts.append(name if c == 1 else f"{c} * {name}")
        if a.const or not parts:
            parts.append(str(a.const))
        return "(" + " + ".join(parts) + ")" if len(parts) > 1 else parts[0]

    def linear(self, dims, idx) -> str:
        """The row-major offset of ``idx`` in an array of extents ``dims`` (64-bit)."""
        if not idx:
            return "0"
        out = self.affine(idx[0])
        for d, a in zip(dims[1:], idx[1:]):
            out = f"({out}) * {self.affine(d)} + {self.affine(a)}"
        return out

    @staticmethod
    def layout(arr: Array):
        """The extents an array is stored with: a temporary matrix's rows are padded by 8 elements, so
        that a power-of-two row length does not make neighbouring rows alias in the caches (a 25x
        slowdown of the 2-D stencil's gradient at n = 2048 without it)."""
        if arr.kind == "temp" and len(arr.dims) >= 2:
            return arr.dims[:-1] + (arr.dims[-1] + 8,)
        return arr.dims

    def array_ref(self, arr: Array, idx) -> str:
        if arr.kind == "temp" and arr.is_scalar:
            return arr.cname
        return f"{arr.cname}[{self.linear(self.layout(arr), idx)}]"

    def size_product(self, sizes) -> str:
        if not sizes:
            return "1"
        return " * ".join(f"(int64_t)({self.affine(s)})" for s in sizes)

    # ---------------------------------------------------------------------------------------------
    # the translation unit

    def emit(self) -> str:
        """The whole translation unit (prelude, black boxes, entry point)."""
        return self.translation_unit([self])

    def emit_entry(self) -> str:
        """The entry point's definition (emitted once; fills ``self.functions`` and relation views)."""
        if getattr(self, "_entry_text", None) is None:
            body: list[str] = []
            top = _Scope(body, 1, self.base_ctx, ())
            for stmt in self.prog.stmts:
                top.line(f"/* {stmt.target.label} */")
                self.emit_stmt(stmt, top)
            self._entry_text = self.entry_function(body)
        return self._entry_text

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
        return PRELUDE.replace("#include <math.h>", "#include <math.h>\ntypedef %s real;" % self.real)

    @classmethod
    def translation_unit(cls, emitters) -> str:
        """One translation unit holding the entry points of several kernels (same dtype)."""
        entries = [em.emit_entry() for em in emitters]
        functions: dict[str, str] = {}
        for em in emitters:
            functions.update(em.functions)
        prelude = emitters[0].prelude()
        if cls.uses_blas and any(em.blas_calls() for em in emitters):
            prelude += BLAS_HELPERS
        return "\n".join([prelude, *functions.values(), *entries]) + "\n"

    def blas_calls(self) -> bool:
        """Whether the entry point takes the BLAS table (after its outputs)."""
        return self.uses_blas and bool(getattr(self.prog, "blas", False))

    def declarations(self) -> list[str]:
        return self.arg_declarations() + self.temp_declarations()

    uses_workspace = True  # non-scalar temporaries are carved from a workspace argument (after the rest)

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
                out.append(f"real *{self.restrict} {a.cname} = (real *)tl_ws; "
                           f"tl_ws += TL_WS_BYTES({self.size_product(self.layout(a))});")
        return out

    def arg_declarations(self) -> list[str]:
        out = []
        for k, s in enumerate(self.prog.sizes):
            out.append(f"const int64_t {self.names.size(s)} = tl_sizes[{k}];")
        k = 0
        for a in self.prog.inputs:
            out.append(f"const real *{self.restrict} {a.cname} = (const real *)tl_args[{k}];")
            k += 1
        for r in self.prog.relations:
            for name, flag, ctype in self.relation_views(r):
                out.append(f"const {ctype} *{self.restrict} {name} = (const {ctype} *)tl_args[{k}];")
                k += 1
        for a in self.prog.output_arrays():
            out.append(f"real *{self.restrict} {a.cname} = (real *)tl_args[{k}];")
            k += 1
        if self.blas_calls():
            out.append(f"void *const *tl_blas = (void *const *)tl_args[{k}];")
            k += 1
        self.n_args = k
        return out

    @staticmethod
    def relation_views(r: Relation):
        """The C arrays a relation is passed as, in argument order: ``(name, view, type)``."""
        out = []
        if r.csr:
            out += [(r.cname + "_ptr", "csr_ptr", "int32_t"), (r.cname + "_idx", "csr_idx", "int32_t")]
        if r.csc:
            out += [(r.cname + "_tptr", "csc_ptr", "int32_t"), (r.cname + "_tidx", "csc_idx", "int32_t")]
        if r.dense:
            out += [(r.cname + "_mask", "dense", "unsigned char")]
        return out

    # ---------------------------------------------------------------------------------------------
    # statements

    def emit_stmt(self, stmt: Stmt, scope: _Scope) -> None:
        con = getattr(stmt, "contraction", None)
        if con is not None and self.blas_calls():
            self.emit_contraction(stmt, con, scope)
            return
        arr = stmt.target
        gv = stmt.vars
        pred, body = (stmt.body.pred, stmt.body.body) if isinstance(stmt.body, Guard) else (TRUE, stmt.body)
        if not gv:
            self.emit_scalar_stmt(arr, pred, body, scope)
            return
        if self.interchange and self.interchangeable(pred, body):
            # small target, long reduction: chosen at run time (the sizes are symbolic)
            g, r = self.size_product(arr.dims), self.size_product(body.sizes)
            # a gather whose innermost loop is lane-blocked keeps its sums in registers: better, when
            # that loop has a block's worth of points
            lanes = f" && ({self.size_product(arr.dims[-1:])}) < {self.lanes}" if self.lane_blocked(gv, body) else ""
            scope.line(f"if (({g}) <= {INTERCHANGE_MAX_TARGET} && ({r}) >= 4 * ({g}){lanes}) {{")
            self.emit_interchanged(stmt, pred, body, scope.child())
            scope.line("} else {")
            self.emit_gather(stmt, pred, body, scope.child())
            scope.line("}")
            return
        self.emit_gather(stmt, pred, body, scope)

    interchange = True  # reductions into small targets run with the target's loops innermost

    @staticmethod
    def interchangeable(pred, body) -> bool:
        """``T[g] = [P] * sum(r) [Q] * e`` with affine guards and ``e`` depending on ``r``."""
        if not isinstance(body, Reduce) or has_relations(pred) or has_relations(body.pred):
            return False
        return any(v in free_index_vars(body.body) for v in body.vars)

    def lane_blocked(self, gv, red: Reduce) -> bool:
        """Whether the gather ``T[gv] = red`` has its innermost loop (over ``gv[-1]``) lane-blocked (as
        ``lane_reductions`` decides for it)."""
        return bool(self.lanes) and _lane_blockable(red, gv[-1:])

    def emit_interchanged(self, stmt: Stmt, pred, red: Reduce, scope: _Scope) -> None:
        """``T[g] = sum(r) e`` as ``T = 0; for r: for g: T[g] += e``: the reduction's loops outside, the
        target's inside.  Every element still sums its terms in the order of ``r`` (the same result as
        the gather form), but the chains of additions of different elements interleave (and vectorise)
        instead of running one after another, each a long chain of dependent additions: the gradient
        of the convolution loss in ``c`` (16 sums of length n) is one pass over the data instead of m.
        Used when the target is small (it stays in L1); sequential."""
        arr = stmt.target
        gv = stmt.vars
        names = self.names
        scope.line(f"memset({arr.cname}, 0, sizeof(real) * (size_t)({self.size_product(self.layout(arr))}));")
        allv = tuple(red.vars) + tuple(gv)
        full = conj(box(zip(gv, arr.dims)), pred, box(zip(red.vars, red.sizes)), red.pred)
        dom = D.domain(full, allv, scope.bound, names)
        its = [self.fresh("x") for _ in allv]
        tree = loop_nest([("S", dom)], scope.ctx, its)
        if tree is None:
            return

        def user(node: User, sc: _Scope):
            for v, a in zip(allv, node.args):
                sc.line(f"const int64_t {names.var(v)} = {a};")
            ref = self.array_ref(arr, [Affine.var(v) for v in gv])
            known = node.domain if node.domain is not None else dom
            inner = sc.child(ctx=(D.lift_to_context(known) & sc.ctx), bound=sc.bound + allv, indent_by=0,
                             parallel_ok=False)
            sc.line(f"{ref} += {self.expr(red.body, inner)};")

        self.emit_tree(tree, scope, user, parallel=False)

    def emit_gather(self, stmt: Stmt, pred, body, scope: _Scope) -> None:
        arr = stmt.target
        gv = stmt.vars
        names = self.names
        ranges = box(zip(gv, arr.dims))
        dom_all = D.domain(ranges, gv, scope.bound, names)
        dom_c = D.domain(conj(ranges, pred), gv, scope.bound, names)
        dom_z = dom_all - dom_c
        its = [self.fresh("c") for _ in gv]
        pieces = self.split_by_guards(dom_c, body, gv, scope)
        stmts = [(f"C{k}", piece) for k, piece in enumerate(pieces)] + [("Z", dom_z)]
        tree = loop_nest(stmts, scope.ctx, its)
        if tree is None:
            return
        work = f"{self.size_product(arr.dims)} * ({self.body_work(body)})"
        exact = not has_relations(pred)

        def user(node: User, sc: _Scope):
            for v, a in zip(gv, node.args):
                sc.line(f"const int64_t {names.var(v)} = {a};")
            ref = self.array_ref(arr, [Affine.var(v) for v in gv])
            if node.name == "Z":
                sc.line(f"{ref} = 0;")
                return
            known = node.domain if node.domain is not None else dom_c
            inner = sc.child(ctx=(D.lift_to_context(known) & sc.ctx), bound=sc.bound + gv, indent_by=0,
                             parallel_ok=False)
            cond = None if exact else self.pred(pred, inner)
            if cond is None:
                value = self.expr(body, inner)
                sc.line(f"{ref} = {value};")
            elif cond == "0":
                sc.line(f"{ref} = 0;")
            else:
                sc.line(f"if ({cond}) {{")
                sub = inner.child()
                value = self.expr(body, sub)
                sub.line(f"{ref} = {value};")
                sc.line(f"}} else {ref} = 0;")

        leaf = _Leaf(user, gv, body if exact else None, dom_c, plain=("Z",))
        self.emit_tree(tree, scope, leaf, parallel=scope.parallel_ok, work=work)

    def emit_contraction(self, stmt: Stmt, con, scope: _Scope) -> None:
        """A statement marked by ``codegen.contract``: one ``tl_gemm``/``tl_gemv`` call."""
        arr = stmt.target

        def ld(a: Array) -> str:
            return f"(int64_t)({self.affine(self.layout(a)[-1])})"

        alpha = _lit(con.alpha)
        m, k = f"(int64_t)({self.affine(con.m)})", f"(int64_t)({self.affine(con.k)})"
        if con.kind == "gemm":
            n = f"(int64_t)({self.affine(con.n)})"
            scope.line(f"tl_gemm(tl_blas, {m}, {n}, {k}, {alpha}, {con.x.cname}, {int(con.x_t)}, {ld(con.x)}, "
                       f"{con.y.cname}, {int(con.y_t)}, {ld(con.y)}, {arr.cname}, {ld(arr)});")
        else:
            scope.line(f"tl_gemv(tl_blas, {m}, {k}, {alpha}, {con.x.cname}, {int(con.x_t)}, {ld(con.x)}, "
                       f"{con.y.cname}, {arr.cname});")

    def split_by_guards(self, dom, body: Expr, gv, scope: _Scope, limit: int = 16) -> list:
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

    def emit_scalar_stmt(self, arr: Array, pred, body: Expr, scope: _Scope) -> None:
        ref = self.array_ref(arr, [])
        cond = self.pred(pred, scope) if pred is not TRUE else None
        if cond == "0":
            scope.line(f"{ref} = 0;")
            return
        if cond is None:
            sc = scope.child(indent_by=0)
            sc.line("{")
            inner = sc.child()
            value = self.expr(body, inner)
            inner.line(f"{ref} = {value};")
            sc.line("}")
            return
        scope.line(f"if ({cond}) {{")
        inner = scope.child(ctx=scope.ctx & D.params_set(over_approximation(pred), scope.bound, self.names))
        value = self.expr(body, inner)
        inner.line(f"{ref} = {value};")
        scope.line(f"}} else {ref} = 0;")

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

    def emit_tree(self, tree, scope: _Scope, user, parallel: bool = False, work: str = "0",
                  reduction: str | None = None) -> None:
        if isinstance(tree, Block):
            for c in tree.children:
                self.emit_tree(c, scope, user, parallel, work, reduction)
        elif isinstance(tree, For):
            if tree.degenerate:
                scope.line("{")
                inner = scope.child()
                inner.line(f"const int64_t {tree.var} = {tree.init};")
                self.emit_tree(tree.body, inner, user, parallel, work, reduction)
                scope.line("}")
                return
            reds = self.lane_reductions(tree, user)
            if reds:
                self.emit_lane_blocked(tree, reds, scope, user, parallel and tree.outermost, work, reduction)
                return
            self.for_header(tree, scope, parallel and tree.outermost, work, reduction)
            self.emit_tree(tree.body, scope.child(), user, False, work, reduction)
            scope.line("}")
        elif isinstance(tree, If):
            scope.line(f"if ({tree.cond}) {{")
            self.emit_tree(tree.then, scope.child(), user, parallel, work, reduction)
            if tree.orelse is not None:
                scope.line("} else {")
                self.emit_tree(tree.orelse, scope.child(), user, parallel, work, reduction)
            scope.line("}")
        elif isinstance(tree, User):
            scope.line("{")
            user(tree, scope.child())
            scope.line("}")
        else:
            raise TypeError(tree)

    def for_header(self, tree: For, scope: _Scope, parallel: bool, work: str, reduction: str | None) -> None:
        """The ``for`` line of a loop (with its OpenMP pragma when it is a parallel outermost loop)."""
        cond = _unparen(tree.cond)
        if parallel and self.openmp:
            self.parallel_pragma(scope, work, reduction, self.chunk(tree) if reduction is None else None)
        scope.line(f"for (int64_t {tree.var} = {tree.init}; {cond}; {tree.var} += {tree.inc}) {{")

    @staticmethod
    def trip(tree: For) -> str | None:
        """The loop's trip count as C (``None`` when it is not evident from the loop's header)."""
        m = re.fullmatch(rf"{re.escape(tree.var)} (<=?) (.+)", _unparen(tree.cond))
        if m is None or tree.inc != "1" or _unparen(f"({m.group(2)})") != m.group(2):
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
        if not self.lanes or not isinstance(node, User) or not isinstance(leaf, _Leaf):
            return []
        body = leaf.body_at(node)
        if body is None or self.trip(tree) is None:
            return []
        moving = self.moving_vars(tree, node, leaf)
        out, seen, stack = [], set(), [body]
        while stack:
            e = stack.pop()
            if id(e) in seen:
                continue
            seen.add(id(e))
            if isinstance(e, Reduce):
                if _lane_blockable(e, moving):
                    out.append(e)
            elif isinstance(e, (Add, Mul)):
                stack += [e.right, e.left]
            elif isinstance(e, Call):
                stack += reversed(e.args)
        return out

    @staticmethod
    def moving_vars(tree: For, node: User, leaf: _Leaf) -> tuple[IndexVar, ...]:
        """The leaf's variables whose coordinates change with the loop ``tree``."""
        it = re.compile(rf"\b{re.escape(tree.var)}\b")
        return tuple(v for v, a in zip(leaf.vars, node.args) if it.search(a))

    def emit_lane_blocked(self, tree: For, reds, scope: _Scope, leaf: _Leaf, parallel: bool, work: str,
                          reduction: str | None) -> None:
        """Lane blocking (register blocking, "unroll and jam"): the innermost loop runs ``lanes``
        consecutive points at a time.  Each reduction in ``reds`` runs once per block, its summand in a
        vectorisable loop over the lanes adding into one accumulator per lane; then the rest of the body
        runs point by point on the accumulators.  Every point's sum adds its terms in the same order as
        without blocking and the points finish in order, so the result is the same bit for bit: only
        the dependent chains of additions of neighbouring points interleave (the convolution's 16-tap
        sums run 3.5x faster).  The iterations left over after the last full block run unblocked."""
        nb, b = self.fresh("nb"), self.fresh("b")
        scope.line("{")
        sc = scope.child()
        sc.line(f"const int64_t {nb} = tl_max(0, {self.trip(tree)}) / {self.lanes};")
        if parallel and self.openmp:
            chunk = None if reduction else f"tl_max(1, {nb} / {PARALLEL_CHUNKS})"
            self.parallel_pragma(sc, work, reduction, chunk)
        sc.line(f"for (int64_t {b} = 0; {b} < {nb}; {b} += 1) {{")
        self.emit_lanes(tree, f"({tree.init}) + {b} * {self.lanes}", reds, sc.child(), leaf)
        sc.line("}")
        rest = For(tree.var, f"({tree.init}) + {nb} * {self.lanes}", tree.cond, tree.inc, tree.body)
        self.for_header(rest, sc, False, work, reduction)
        self.emit_tree(tree.body, sc.child(), leaf, False, work, reduction)
        sc.line("}")
        scope.line("}")

    def emit_lanes(self, tree: For, first: str, reds, sc: _Scope, leaf: _Leaf) -> None:
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
        outer = sc.child(ctx=D.lift_to_context(fixed_known) & sc.ctx, bound=sc.bound + fixed, indent_by=0,
                         parallel_ok=False)
        point_ctx = D.lift_to_context(known)

        def point(s: _Scope) -> None:
            s.line(f"const int64_t {it} = {base} + {lane};")
            for v, a in zip(leaf.vars, node.args):
                if v in moving:
                    s.line(f"const int64_t {names.var(v)} = {a};")

        accs = []
        for red in reds:
            acc = self.fresh("lacc")
            accs.append(acc)
            outer.line(f"real {acc}[{self.lanes}] = {{0}};")

            def add(inner: _Scope, red=red, acc=acc) -> None:
                inner.line("#pragma omp simd")
                inner.line(f"for (int {lane} = 0; {lane} < {self.lanes}; {lane} += 1) {{")
                ln = inner.child(ctx=inner.ctx & point_ctx, bound=inner.bound + moving)
                point(ln)
                ln.line(f"{acc}[{lane}] += {self.expr(red.body, ln)};")
                inner.line("}")

            self.reduce_nest(red, outer, add)
        sc.line(f"for (int {lane} = 0; {lane} < {self.lanes}; {lane} += 1) {{")
        pt = sc.child()
        point(pt)
        for red, acc in zip(reds, accs):
            pt.cache[id(red)] = f"{acc}[{lane}]"
        pt.line("{")
        leaf(node, pt.child())
        pt.line("}")
        sc.line("}")

    def parallel_pragma(self, scope: _Scope, work: str, reduction: str | None, chunk: str | None = None) -> None:
        """Gather loops (every element written by one iteration) are scheduled dynamically in chunks of
        about 1/32 of the loop, so that on a shared machine a thread that is descheduled does not make
        the others wait for its half at the barrier (the result does not depend on the schedule);
        reductions keep a static schedule, so their per-thread partial sums are reproducible."""
        red = f" reduction(+:{reduction})" if reduction else ""
        sched = f"dynamic, {chunk}" if chunk is not None else "static"
        scope.line(f"#pragma omp parallel for schedule({sched}){red} if(({work}) >= {PARALLEL_WORK})")

    # ---------------------------------------------------------------------------------------------
    # scalar expressions

    def expr(self, e: Expr, scope: _Scope) -> str:
        hit = scope.lookup(e)
        if hit is not None:
            return hit
        out = getattr(self, "_emit_" + type(e).__name__)(e, scope)
        if isinstance(e, (Add, Mul, Call)):
            name = self.fresh("t")
            scope.line(f"const real {name} = {out};")
            out = name
        scope.cache[id(e)] = out
        return out

    def _emit_Const(self, e: Const, scope) -> str:
        return _lit(e.value)

    def _emit_Var(self, e: Var, scope) -> str:
        return self._path(e, scope)

    def _emit_Access(self, e: Access, scope) -> str:
        return self._path(e, scope)

    _emit_Proj = _emit_Access

    def _path(self, e: Expr, scope) -> str:
        p = path_of(e)
        if p is None:
            raise UnsupportedError(f"cannot compile the access {e!r}")
        var, projs, idx = p
        arr = self.temps_by_var.get(id(var)) if not projs else None
        if arr is None:
            arr = self.inputs_by_key.get((id(var), projs))
        if arr is None:
            raise UnsupportedError(f"no array for {e!r}")
        if len(idx) != len(arr.dims):
            raise UnsupportedError(f"partial access {e!r} in a scalar body")
        return self.array_ref(arr, idx)

    def _emit_Add(self, e: Add, scope) -> str:
        return f"{self.expr(e.left, scope)} + {self.expr(e.right, scope)}"

    def _emit_Mul(self, e: Mul, scope) -> str:
        return f"{self.expr(e.left, scope)} * {self.expr(e.right, scope)}"

    def _emit_Call(self, e: Call, scope) -> str:
        cname = "tl_f_" + "".join(ch if ch.isalnum() else "_" for ch in e.fn)
        if e.fn not in self.functions:
            self.functions[e.fn] = function_c(e.fn, cname, self.function_qualifier)
        args = ", ".join(self.expr(a, scope) for a in e.args)
        return f"{cname}({args})"

    function_qualifier = "static inline"

    def _emit_Guard(self, e: Guard, scope: _Scope) -> str:
        cond = self.pred(e.pred, scope)
        if cond is None:
            return self.expr(e.body, scope)
        if cond == "0":
            return "((real)0)"
        name = self.fresh("g")
        scope.line(f"real {name} = 0;")
        scope.line(f"if ({cond}) {{")
        known = D.params_set(over_approximation(e.pred), scope.bound, self.names)
        inner = scope.child(ctx=scope.ctx & known)
        value = self.expr(e.body, inner)
        inner.line(f"{name} = {value};")
        scope.line("}")
        return name

    def _emit_Reduce(self, e: Reduce, scope: _Scope) -> str:
        acc = self.fresh("acc")
        scope.line(f"real {acc} = 0;")
        if e.pred is TRUE and not any(v in free_index_vars(e.body) for v in e.vars):
            # a sum of a term that does not depend on the summed variables over a box: count * term
            count = self.size_product(e.sizes)
            scope.line(f"if (({count}) > 0) {{")
            inner = scope.child()
            inner.line(f"{acc} = (real)({count}) * {self.expr(e.body, inner)};")
            scope.line("}")
            return acc
        csr = self._csr_choice(e)
        exact = not has_relations(e.pred)

        def add(inner: _Scope) -> None:
            if csr is not None:
                k, atom, transposed = csr
                self._csr_loop(acc, e, atom, transposed, e.vars[k], e.sizes[k], inner)
            elif exact:
                inner.line(f"{acc} += {self.expr(e.body, inner)};")
            else:
                self._filtered_add(acc, e.pred, e.body, inner)

        self.reduce_nest(e, scope, add, None if csr is None else csr[0], acc,
                         blockable=csr is None and exact)
        return acc

    def reduce_nest(self, e: Reduce, scope: _Scope, add, skip: int | None = None,
                    reduction: str | None = None, blockable: bool = False) -> None:
        """The loops of a reduction over its domain (less the variable at position ``skip``, which a CSR
        row binds), calling ``add(scope)`` at each point; parallel with an OpenMP ``reduction`` clause on
        ``reduction`` where the scope allows it; its innermost loop lane-blocked if ``blockable``."""
        full = D.domain(conj(box(zip(e.vars, e.sizes)), e.pred), e.vars, scope.bound, self.names)
        dom = full if skip is None else full.project_out(isl.dim_type.set, skip, 1)
        bound_vars = tuple(v for k, v in enumerate(e.vars) if k != skip)
        tree = loop_nest([("S", dom)], scope.ctx, [self.fresh("r") for _ in bound_vars])
        if tree is None:
            return
        names = self.names

        def user(node: User, sc: _Scope):
            for w, a in zip(bound_vars, node.args):
                sc.line(f"const int64_t {names.var(w)} = {a};")
            ctx = D.lift_to_context(node.domain if node.domain is not None else dom) & sc.ctx
            add(sc.child(ctx=ctx, bound=sc.bound + bound_vars, indent_by=0, parallel_ok=False))

        leaf = _Leaf(user, bound_vars, e.body if blockable else None, dom)
        work = self.size_product(e.sizes[:1]) + " * " + f"({self.body_work(e.body)})"
        self.emit_tree(tree, scope, leaf, parallel=scope.parallel_ok, work=work, reduction=reduction)

    def _filtered_add(self, acc: str, pred, body, scope: _Scope) -> None:
        cond = self.pred(pred, scope)
        if cond == "0":
            return
        if cond is None:
            scope.line(f"{acc} += {self.expr(body, scope)};")
            return
        scope.line(f"if ({cond}) {{")
        inner = scope.child()
        inner.line(f"{acc} += {self.expr(body, inner)};")
        scope.line("}")

    # ---------------------------------------------------------------------------------------------
    # relations

    def _csr_choice(self, e: Reduce):
        """``(position of the summed variable, atom, transposed)`` when a conjunct ``E(a, v + c)`` (or
        ``E(v + c, a)``) of the reduction's guard lets ``v`` run over one CSR row of a 2-D relation."""
        parts = e.pred.parts if isinstance(e.pred, And) else (e.pred,)
        for atom in parts:
            if not isinstance(atom, RelAtom) or len(atom.args) != 2:
                continue
            for k in reversed(range(len(e.vars))):
                v = e.vars[k]
                a0, a1 = atom.args
                if a1.coeff(v) == 1 and a0.coeff(v) == 0:
                    return k, atom, False
                if a0.coeff(v) == 1 and a1.coeff(v) == 0:
                    return k, atom, True
        return None

    def _csr_loop(self, acc, e: Reduce, atom: RelAtom, transposed: bool, v: IndexVar, vs: Affine, scope):
        rel = self.relations[id(atom.rel)]
        a0, a1 = atom.args
        row, col = (a1, a0) if transposed else (a0, a1)
        if transposed:
            rel.csc = True
            ptr, idx = rel.cname + "_tptr", rel.cname + "_tidx"
            nrows = rel.dims[1]
        else:
            rel.csr = True
            ptr, idx = rel.cname + "_ptr", rel.cname + "_idx"
            nrows = rel.dims[0]
        shift = col - Affine.var(v)  # col = v + shift
        r = self.fresh("row")
        p = self.fresh("p")
        vname = self.names.var(v)
        scope.line(f"const int64_t {r} = {self.affine(row)};")
        scope.line(f"if ({r} >= 0 && {r} < {self.affine(nrows)})")
        scope.line(f"for (int64_t {p} = {ptr}[{r}]; {p} < {ptr}[{r} + 1]; {p}++) {{")
        inner = scope.child(bound=scope.bound + (v,))
        inner.line(f"const int64_t {vname} = (int64_t){idx}[{p}] - {self.affine(shift)};")
        parts = e.pred.parts if isinstance(e.pred, And) else (e.pred,)
        rest = conj(box([(v, vs)]), *[q for q in parts if q is not atom])
        self._filtered_add(acc, rest, e.body, inner)
        scope.line("}")

    # ---------------------------------------------------------------------------------------------
    # predicates as C conditions

    def pred(self, p, scope: _Scope) -> str | None:
        """``p`` as a C condition at this point (``None``: always true here; ``"0"``: never)."""
        if isinstance(p, TruePred):
            return None
        if isinstance(p, FalsePred):
            return "0"
        approx = D.params_set(over_approximation(p), scope.bound, self.names)
        c = cond_c(approx, scope.ctx)
        if not has_relations(p) or c == "0":
            return c
        return self._rel_pred(p, scope)

    def _rel_pred(self, p, scope: _Scope) -> str | None:
        if not has_relations(p):
            return self.pred(p, scope)
        if isinstance(p, RelAtom):
            return self._member(p)
        if isinstance(p, And):
            parts = [self._rel_pred(q, scope) for q in p.parts]
            if "0" in parts:
                return "0"
            parts = [q for q in parts if q is not None]
            return "(" + " && ".join(parts) + ")" if parts else None
        if isinstance(p, Or):
            parts = [self._rel_pred(q, scope) for q in p.parts]
            if any(q is None for q in parts):
                return None
            parts = [q for q in parts if q != "0"]
            return "(" + " || ".join(parts) + ")" if parts else "0"
        if isinstance(p, Exists):
            found = self.fresh("ex")
            scope.line(f"int {found} = 0;")
            vname = self.names.var(p.var)
            scope.line(f"for (int64_t {vname} = 0; {vname} < {self.affine(p.size)} && !{found}; {vname}++) {{")
            inner = scope.child(bound=scope.bound + (p.var,))
            cond = self.pred(p.body, inner)
            if cond is None:
                inner.line(f"{found} = 1;")
            elif cond != "0":
                inner.line(f"if ({cond}) {found} = 1;")
            scope.line("}")
            return found
        raise UnsupportedError(f"predicate {p}")

    def _member(self, atom: RelAtom) -> str:
        rel = self.relations[id(atom.rel)]
        args = [self.affine(a) for a in atom.args]
        bounds = " && ".join(f"{a} >= 0 && {a} < {self.affine(d)}" for a, d in zip(args, rel.dims))
        if len(args) == 2:
            rel.csr = True
            return f"({bounds} && tl_csr_has({rel.cname}_ptr, {rel.cname}_idx, {args[0]}, {args[1]}))"
        rel.dense = True
        lin = self.linear(rel.dims, list(atom.args))
        return f"({bounds} && {rel.cname}_mask[{lin}])"


def _unparen(c: str) -> str:
    """``c`` without the parentheses around the whole of it, if there are such."""
    if not (c.startswith("(") and c.endswith(")")):
        return c
    depth = 0
    for k, ch in enumerate(c):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and k < len(c) - 1:
            return c
    return c[1:-1]


def _lane_blockable(red: Reduce, moving) -> bool:
    """A reduction that lane blocking may run for several points of the ``moving`` variables at once:
    its domain does not move with them, its summand does (and depends on the summed variables), and it
    has no relation and no nested reduction."""
    summand = free_index_vars(red.body)
    return (not has_relations(red.pred) and not _has_reduce(red.body)
            and not any(v in moving for v in free_index_vars(red.pred))
            and any(v in moving for v in summand) and any(v in summand for v in red.vars))


def _has_reduce(e: Expr) -> bool:
    return any(isinstance(n, Reduce) for n in walk(e))


def _comment(text: str) -> str:
    return "\n".join("   " + line.replace("*/", "* /") for line in text.splitlines())


def emit_c(prog: Program, namer, dtype: str = "float64", entry: str = "tl_kernel") -> str:
    return CEmitter(prog, namer, dtype, entry).emit()
