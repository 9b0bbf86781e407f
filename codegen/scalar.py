"""The scalar printer: C expressions and conditions for one point of a loop nest.

One method per node kind (``_emit_<Class>``, found by ``tensorlang.dispatch``).  Black boxes are printed
once each as a C function from their SymPy body with SymPy's C99 code printer (so user-registered and
derived functions such as ``relu_d0`` work like built-ins); hash-consed subterms used more than once are
computed once into a local of the ``Scope`` (the C block being written).  A predicate becomes a C condition gisted against
what the scope knows (its isl context); relation atoms become CSR or mask lookups (``codegen.sparse``).
"""
from __future__ import annotations

from sympy.printing.c import C99CodePrinter

from tensorlang.dispatch import dispatch
from tensorlang.errors import UnsupportedError
from tensorlang.functions import lookup
from tensorlang.inputs import MAX_SIZE
from tensorlang.nodes import (
    Access, Add, Affine, And, Call, Const, Exists, Expr, FalsePred, Guard, IndexVar, Mul, Or, Pred, RelAtom,
    TruePred, Var,
)
from tensorlang.predicates import has_relations, over_approximation
from tensorlang.printer import affine_str

from . import domains as D
from .ir import Array, path_of
from .loop_ir import Block, Branch, Line, Loop
from .loops import cond_c

INT64_LIMIT = 2**63  # an extent's values beyond int64's range: computed in floating point, or refused

__all__ = ["ScalarPrinter", "Scope", "function_c", "literal"]


class _FnPrinter(C99CodePrinter):
    """SymPy's C99 printer; black-box bodies are evaluated in double, integers printed as doubles (so
    that ``fmax(0, u)`` is ``fmax(0.0, u)``, which C++/CUDA overload resolution needs)."""

    def _print_Integer(self, expr):
        return f"{int(expr)}.0"

    # NaN propagates through max, min and sign, as in NumPy and the evaluator (C's fmax/fmin drop a NaN)
    def _print_Max(self, expr):
        return self._fold("tl_fmax", expr.args)

    def _print_Min(self, expr):
        return self._fold("tl_fmin", expr.args)

    def _print_sign(self, expr):  # abs' derivative: NaN at NaN, as NumPy's sign
        return f"tl_sign({self._print(expr.args[0])})"

    def _fold(self, fn: str, args) -> str:
        out = self._print(args[0])
        for a in args[1:]:
            out = f"{fn}({out}, {self._print(a)})"
        return out


def function_c(name: str, cname: str, qual: str = "static inline") -> str:
    """A black box as a C function from its SymPy body (``spec.expr`` over ``spec.params``)."""
    spec = lookup(name)
    params = ", ".join(f"real a{k}" for k in range(spec.arity))
    conv = "".join(f" const double {p} = (double)a{k};" for k, p in enumerate(spec.params))
    body = _FnPrinter().doprint(spec.expr)
    if "Not supported" in body or "//" in body:
        raise UnsupportedError(f"function {name}: SymPy's C printer cannot print {spec.expr}")
    return f"{qual} real {cname}({params}) {{{conv} return (real)({body}); }}"


ZERO, ONE = "((real)0)", "((real)1)"   # the literals of 0 and 1 (``literal``)


def literal(value) -> str:
    """A constant as C: an integer that int64 holds as it is, anything else as the float64 the evaluator
    uses (``Const.real``: the nearest double, +-inf beyond the range)."""
    if isinstance(value, int) and -2**63 <= value < 2**63:
        return f"((real){value})"
    f = Const(value).real
    if f != f or f in (float("inf"), float("-inf")):
        return {True: "((real)NAN)"}.get(f != f, "((real)INFINITY)" if f > 0 else "(-(real)INFINITY)")
    return f"((real){f!r})"


def extent_range(a: Affine) -> tuple[int, int] | None:
    """The least and greatest value of an extent affine in the sizes, over every size the runtime accepts
    (``0 <= n <= MAX_SIZE``: the box ``domains.base_context`` states), exactly, in Python's integers;
    ``None`` for a form over index variables."""
    if any(isinstance(v, IndexVar) for v, _ in a.terms):
        return None
    return (a.const + sum(min(c, 0) for _, c in a.terms) * MAX_SIZE,
            a.const + sum(max(c, 0) for _, c in a.terms) * MAX_SIZE)


class Scope:
    """A C block being built (``codegen.loop_ir``): the list its statements go into, the isl context (what is
    known here), the index variables bound here (outermost first), and cached values of subterms (visible
    in nested blocks).  ``child`` is a scope of its own in the same block; ``loop``, ``branch`` and ``block``
    open a nested one.  ``simd``: the block is (inside) a loop over lanes that the compiler vectorises, where
    no loop of lanes of its own may go."""

    def __init__(self, body, ctx, bound, parent=None, parallel_ok=True, simd=False):
        self.body = body
        self.ctx = ctx
        self.bound = bound
        self.cache: dict[int, str] = {}
        self.parent = parent
        self.parallel_ok = parallel_ok
        self.simd = simd

    def child(self, ctx=None, bound=None, body=None, parallel_ok=None, simd=False):
        return Scope(self.body if body is None else body, self.ctx if ctx is None else ctx,
                     self.bound if bound is None else bound, self,
                     self.parallel_ok if parallel_ok is None else parallel_ok, self.simd or simd)

    def line(self, text: str) -> None:
        self.body.append(Line(text))

    def loop(self, var: str, init: str, cond: str, step: str, threads=None, pragma=None, **kw) -> "Scope":
        """``for (init; cond; step) { ... }``: the scope of its body (``threads``: ``loop_ir.Threads``)."""
        node = Loop(var, init, cond, step, threads=threads, pragma=pragma)
        self.body.append(node)
        return self.child(body=node.body, simd=pragma == "omp simd", **kw)

    def branch(self, cond: str, orelse: bool = False, **kw):
        """``if (cond) { ... }``: the scope of its body, and with ``orelse`` that of its ``else`` too."""
        node = Branch(cond, [], [] if orelse else None)
        self.body.append(node)
        then = self.child(body=node.then, **kw)
        return (then, self.child(body=node.orelse)) if orelse else then

    def block(self, **kw) -> "Scope":
        """``{ ... }``: the scope of a block of its own (its locals)."""
        node = Block()
        self.body.append(node)
        return self.child(body=node.body, **kw)

    def lookup(self, node) -> str | None:
        s = self
        while s is not None:
            hit = s.cache.get(id(node))
            if hit is not None:
                return hit
            s = s.parent
        return None


class ScalarPrinter:
    """Scalar expressions and predicates as C, for an emitter that has ``names`` (``domains.Names``),
    ``caps`` (``target.Capabilities``), the arrays by key (``inputs_by_key``, ``temps_by_var``) and a
    ``functions`` table of the black boxes it printed."""

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

    def _extent(self, a: Affine, r, ctype: str) -> str:
        """An extent as a factor of type ``ctype``; one whose range leaves int64 (``n + 10^19``) is computed
        in floating point where the product is (a count), and refused by name where it is not."""
        if r is None or -INT64_LIMIT <= r[0] and r[1] < INT64_LIMIT:
            return f"({ctype})({self.affine(a)})"
        if ctype != "real":
            raise UnsupportedError(f"the extent {affine_str(a)} reaches {r[1] if r[1] >= INT64_LIMIT else r[0]} at "
                                   f"some sizes, beyond a kernel's 64-bit index arithmetic; tl.evaluate computes "
                                   f"with it exactly")
        terms = [f"{c} * (real){self.names.size(v.name)}" for v, c in a.terms]
        return "(" + " + ".join(terms + [literal(a.const)]) + ")"

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
        slowdown of the 2-D stencil's gradient at n = 2048 without it).  A row of a few constant elements
        (a band's offsets, ``t:2``) is not padded: it cannot alias, and padding it would multiply the
        array's memory traffic.  Nor is a temporary of three or more dimensions: its rows are a batch's
        small vectors (the GMM gradient's ``[n][B][m]`` values at m = 10, whose padding made 80% more
        memory to write and read)."""
        last = arr.dims[-1] if arr.dims else None
        if arr.kind == "temp" and len(arr.dims) == 2 and not (last.is_const and last.const < 64):
            return arr.dims[:-1] + (last + 8,)
        return arr.dims

    def array_ref(self, arr: Array, idx) -> str:
        if arr.kind == "temp" and arr.is_scalar:
            return arr.cname
        return f"{arr.cname}[{self.linear(self.layout(arr), idx)}]"

    def store(self, arr: Array, idx, value: str) -> str:
        """The C statement that writes ``value`` at ``idx`` of ``arr``."""
        return f"{self.array_ref(arr, idx)} = {value};"

    def size_product(self, sizes, ctype: str = "int64_t") -> str:
        """The number of points of a box of extents ``sizes``, in ``ctype`` (``real`` for a count that
        scales a value: no product of sizes wraps there); an extent that may be negative at some sizes
        (``n - 1``) counts as 0 there, as an empty loop does, and one that is never positive (``n - 10^19``)
        makes the product the constant 0."""
        ranges = [extent_range(s) for s in sizes]
        if any(r is not None and r[1] <= 0 for r in ranges):
            return "0"
        if not sizes:
            return "1"
        factors = (self._extent(s, r, ctype) for s, r in zip(sizes, ranges))
        return " * ".join(f if r is not None and r[0] >= 0 else f"tl_max({f}, 0)" for f, r in zip(factors, ranges))

    # ---------------------------------------------------------------------------------------------
    # scalar expressions

    def expr(self, e: Expr, scope: Scope) -> str:
        hit = scope.lookup(e)
        if hit is not None:
            return hit
        out = dispatch(self, "_emit_", e, scope)
        if isinstance(e, (Add, Mul, Call)):
            name = self.fresh("t")
            scope.line(f"const real {name} = {out};")
            out = name
        scope.cache[id(e)] = out
        return out

    def _emit_Const(self, e: Const, scope) -> str:
        return literal(e.value)

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
        """``a + b``; a term that is zero here (a bracket false at this point, a constant 0) is left out: so
        the sum is the other term exactly, but for the sign of a zero (``-0.0 + 0`` is ``+0.0``)."""
        left, right = self.expr(e.left, scope), self.expr(e.right, scope)
        if right == ZERO:
            return left
        return right if left == ZERO else f"{left} + {right}"

    def _emit_Mul(self, e: Mul, scope) -> str:
        """``a * b``; a factor 1 is left out (exactly: ``1 * b`` is ``b``, NaN and infinities included)."""
        left, right = self.expr(e.left, scope), self.expr(e.right, scope)
        if right == ONE:
            return left
        return right if left == ONE else f"{left} * {right}"

    def _emit_Call(self, e: Call, scope) -> str:
        cname = "tl_f_" + "".join(ch if ch.isalnum() else "_" for ch in e.fn)
        if e.fn not in self.functions:
            self.functions[e.fn] = function_c(e.fn, cname, self.caps.function_qualifier)
        args = ", ".join(self.expr(a, scope) for a in e.args)
        return f"{cname}({args})"

    def _emit_Guard(self, e: Guard, scope: Scope) -> str:
        cond = self.pred(e.pred, scope)
        if cond is None:
            return self.expr(e.body, scope)
        if cond == "0":
            return ZERO
        name = self.fresh("g")
        scope.line(f"real {name} = 0;")
        known = D.params_set(over_approximation(e.pred), scope.bound, self.names)
        inner = scope.branch(cond, ctx=scope.ctx & known)
        value = self.expr(e.body, inner)
        inner.line(f"{name} = {value};")
        return name

    def write_guarded(self, scope: Scope, cond: str | None, body, write) -> None:
        """The C statement ``write(value)`` of ``body``'s value where ``cond`` holds (a C condition from
        ``pred``: None, everywhere; ``"0"``, nowhere), and of 0 where it does not."""
        if cond == "0":
            scope.line(write("0"))
        elif cond is None:
            scope.line(write(self.expr(body, scope)))
        else:
            then, zero = scope.branch(cond, orelse=True)
            then.line(write(self.expr(body, then)))
            zero.line(write("0"))

    # ---------------------------------------------------------------------------------------------
    # predicates as C conditions

    def pred(self, p, scope: Scope) -> str | None:
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

    def _rel_pred(self, p, scope: Scope) -> str | None:
        """A condition with relation atoms (``_rel_<Class>``), None where it holds everywhere."""
        if not has_relations(p):
            return self.pred(p, scope)
        return dispatch(self, "_rel_", p, scope)

    def _rel_RelAtom(self, p: RelAtom, scope: Scope) -> str | None:
        return self._member(p)

    def _rel_And(self, p: And, scope: Scope) -> str | None:
        parts = [self._rel_pred(q, scope) for q in p.parts]
        if "0" in parts:
            return "0"
        parts = [q for q in parts if q is not None]
        return "(" + " && ".join(parts) + ")" if parts else None

    def _rel_Or(self, p: Or, scope: Scope) -> str | None:
        parts = [self._rel_pred(q, scope) for q in p.parts]
        if any(q is None for q in parts):
            return None
        parts = [q for q in parts if q != "0"]
        return "(" + " || ".join(parts) + ")" if parts else "0"

    def _rel_Exists(self, p: Exists, scope: Scope) -> str | None:
        found = self.fresh("ex")
        scope.line(f"int {found} = 0;")
        vname = self.names.var(p.var)
        inner = scope.loop(vname, f"int64_t {vname} = 0", f"{vname} < {self.affine(p.size)} && !{found}", f"{vname}++",
                           bound=scope.bound + (p.var,))
        cond = self.pred(p.body, inner)
        if cond is None:
            inner.line(f"{found} = 1;")
        elif cond != "0":
            inner.line(f"if ({cond}) {found} = 1;")
        return found

    def _rel_Pred(self, p: Pred, scope: Scope) -> str | None:
        raise UnsupportedError(f"predicate {p}")
