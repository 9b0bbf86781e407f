"""From any ``Expr`` to the statement form of ``codegen.ir``.

1. Normalise: ``gen_pushout(pair_elim(let_lift(e)))`` (sections 5.1-5.3): lets at the top, pairs only
   at the output and on inputs, generators only at the top of right-hand sides.
2. Eta-expand every right-hand side and output to a full generator nest over a *scalar* body
   (``t = A`` becomes ``t = gen(i, j) A[i, j]``), so every tensor access in a body is full.
3. Factor the products under runs of sums so that a partial sum leaves out a loop around it, and hoist
   (``codegen.hoist``) each black-box call and each sum out of the loops it does not read, into a binding
   of its own; then fuse (``codegen.fuse``): let-bound tensors used once, element by element (or cheap enough to
   recompute), are substituted into their use; what remains is one statement per binding.
4. Canonicalise each body: guards pulled out of products (``a * [p] * b`` is ``[p] * (a * b)``), nested
   sums merged into one ``Reduce`` whose predicate collects their guards, so that each reduction's
   domain is one isl set; a run of maxima into one ``MaxReduce``.
"""
from __future__ import annotations

import keyword
import re

from tensorlang.declarations import body_of
from tensorlang.errors import UnsupportedError
from tensorlang.nodes import (
    FALSE, TRUE, Access, Add, Affine, Call, Const, Expr, Gen, Guard, IndexVar, Max, Mul, Pair, PairType, Proj, R,
    RelType, Sum, TensorType, Type, Var, conj, let_chain, strip_maxes, tensor,
)
from tensorlang.traversal import free_vars, size_vars

from .ir import Array, MaxReduce, Program, Reduce, Relation, Stmt

__all__ = ["normalize", "lower", "canon", "C_RESERVED"]

C_RESERVED = set(keyword.kwlist) | {
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum", "extern",
    "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return", "short",
    "signed", "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void", "volatile",
    "while", "real", "min", "max", "floord", "exp", "log", "sin", "cos", "tan", "tanh", "sqrt", "pow",
    "fabs", "fmax", "fmin", "abs", "main", "sizes", "args", "acc", "int64_t", "int32_t", "size_t",
    "blockIdx", "threadIdx", "blockDim", "gridDim", "nvcc", "NULL", "bool", "true", "false", "class",
    "new", "delete", "this", "template", "namespace", "operator", "private", "public", "virtual",
}


def split_pairs(e: Expr) -> Expr:
    """``e`` with every tensor of pairs in its type split: ``[n](T0, T1)`` becomes the pair of
    ``gen(i:n) e[i].0`` and ``gen(i:n) e[i].1`` (the struct of arrays the evaluator returns), so every
    output the kernel writes is a tensor of reals.  A type without a tensor of pairs is left as it is."""
    if not _holds_tensor_of_pairs(e.type):
        return e
    t, dims = e.type, []
    while isinstance(t, TensorType):
        dims.append(t.size)
        t = t.elem
    loops = [IndexVar("s") for _ in dims]
    point = e
    for v in loops:
        point = Access(point, Affine.var(v))

    def component(k: int) -> Expr:
        out = Proj(k, point)
        for v, size in reversed(list(zip(loops, dims))):
            out = Gen(v, size, out)
        return split_pairs(out)

    return Pair(component(0), component(1))


def _holds_tensor_of_pairs(t: Type, under_tensor: bool = False) -> bool:
    if isinstance(t, TensorType):
        return _holds_tensor_of_pairs(t.elem, True)
    if isinstance(t, PairType):
        return under_tensor or _holds_tensor_of_pairs(t.first) or _holds_tensor_of_pairs(t.second)
    return False


def normalize(expr: Expr) -> Expr:
    """The gen-pushout normal form (let-lifted, pair-eliminated, generators at the top)."""
    from tensorlang.normalize import gen_pushout, let_lift, pair_elim

    return gen_pushout(pair_elim(let_lift(expr)))


# --------------------------------------------------------------------------------------------------
# paths: an input or a let variable under projections and accesses


def component_type(t: Type, projs) -> Type:
    """The type of the array that holds the component ``projs`` of a value of type ``t`` (struct of
    arrays: ``[n](R x [m]R)`` at ``(1,)`` is ``[n][m]R``)."""
    dims: list[Affine] = []
    projs = list(projs)
    while True:
        if isinstance(t, TensorType):
            dims.append(t.size)
            t = t.elem
        elif isinstance(t, PairType):
            t = t.first if projs.pop(0) == 0 else t.second
        else:
            return tensor(dims, t)


def components(t, projs=(), dims=()) -> list[tuple[tuple[int, ...], tuple[Affine, ...]]]:
    """Every ``(projections, dims)`` leaf of a value type: pairs as a struct of arrays (section 5.2)."""
    if isinstance(t, TensorType):
        return components(t.elem, projs, dims + (t.size,))
    if isinstance(t, PairType):
        return components(t.first, projs + (0,), dims) + components(t.second, projs + (1,), dims)
    return [(projs, dims)]


# --------------------------------------------------------------------------------------------------
# eta-expansion


def index_into(e: Expr, a: Affine) -> Expr:
    """``e[a]`` with the access pushed through guards and generators."""
    if isinstance(e, Guard):
        return Guard(e.pred, index_into(e.body, a))
    if isinstance(e, Gen):
        from tensorlang.substitute import substitute_index

        return substitute_index(e.body, {e.var: a})
    return Access(e, a)


def full_nest(value: Expr) -> tuple[tuple[IndexVar, ...], tuple[Affine, ...], Expr]:
    """A right-hand side as ``(generator vars, sizes, scalar body)``."""
    vars_: list[IndexVar] = []
    sizes: list[Affine] = []
    body = value
    while True:
        if isinstance(body, Gen):
            vars_.append(body.var)
            sizes.append(body.size)
            body = body.body
        elif isinstance(body, Guard) and isinstance(body.body.type, TensorType):
            # [p] * (tensor): push the guard under a fresh generator
            v = IndexVar("e")
            vars_.append(v)
            sizes.append(body.type.size)
            body = index_into(body, Affine.var(v))
        elif isinstance(body.type, TensorType):
            v = IndexVar("e")
            vars_.append(v)
            sizes.append(body.type.size)
            body = index_into(body, Affine.var(v))
        else:
            break
    if body.type is not R:
        raise UnsupportedError(f"cannot compile a right-hand side of type {value.type} (after normalisation)")
    return tuple(vars_), tuple(sizes), body


# --------------------------------------------------------------------------------------------------
# canonical bodies


def _strip(e: Expr):
    if isinstance(e, Guard):
        return e.pred, e.body
    return TRUE, e


def _guard(p, e: Expr) -> Expr:
    if p is TRUE:
        return e
    if p is FALSE:
        return Const(0)
    if isinstance(e, Guard):
        return _guard(conj(p, e.pred), e.body)
    return Guard(p, e)


def canon(e: Expr, memo: dict | None = None) -> Expr:
    """Guards pulled out of products, nested sums merged into ``Reduce`` nodes (memoised on identity)."""
    memo = {} if memo is None else memo
    hit = memo.get(id(e))
    if hit is not None:
        return hit
    if isinstance(e, (Const, Var, Access, Proj)):
        out = e
    elif isinstance(e, Add):
        out = Add(canon(e.left, memo), canon(e.right, memo))
    elif isinstance(e, Mul):
        pa, a = _strip(canon(e.left, memo))
        pb, b = _strip(canon(e.right, memo))
        out = _guard(conj(pa, pb), Mul(a, b))
    elif isinstance(e, Call):
        out = Call(e.fn, tuple(canon(a, memo) for a in e.args))
    elif isinstance(e, Guard):
        out = _guard(e.pred, canon(e.body, memo))
    elif isinstance(e, Sum):
        p, b = _strip(canon(e.body, memo))
        if isinstance(b, Const) and b.value == 0:
            out = Const(0)
        elif isinstance(b, Reduce):
            out = Reduce((e.var,) + b.vars, (e.size,) + b.sizes, conj(p, b.pred), b.body)
        else:
            out = Reduce((e.var,), (e.size,), p, b)
        out = _shared_reduce(out, memo)
    elif isinstance(e, Max):
        dims, b = strip_maxes(e)
        out = MaxReduce(tuple(v for v, _ in dims), tuple(s for _, s in dims), canon(b, memo))
    elif isinstance(e, (Reduce, MaxReduce)):
        out = e
    else:
        raise UnsupportedError(f"cannot compile a {type(e).__name__} inside a scalar body: {e!r}")
    memo[id(e)] = out
    return out


_CANON_VARS: list[IndexVar] = []


def _shared_reduce(r: Expr, memo: dict) -> Expr:
    """An earlier ``Reduce`` equal to ``r`` up to the names of its summed variables, or ``r``: the
    loss ``sum(i) (sum(j) x[i + j] c[j] - z[i]) * (sum(k) x[i + k] c[k] - z[i])`` computes its
    convolution once (the emitter computes a node once per scope)."""
    if not isinstance(r, Reduce):
        return r
    from tensorlang.substitute import substitute_index

    while len(_CANON_VARS) < len(r.vars):
        _CANON_VARS.append(IndexVar(f"tl_canon{len(_CANON_VARS)}"))
    mapping = dict(zip(r.vars, _CANON_VARS))
    key = ("alpha", tuple(r.sizes), substitute_index(r.pred, mapping), substitute_index(r.body, mapping))
    table = memo.setdefault("alpha", {})
    try:
        return table.setdefault(key, r)
    except TypeError:  # unhashable: no sharing
        return r


# --------------------------------------------------------------------------------------------------
# names


class Namer:
    """Unique C identifiers: sizes keep their names where possible, everything else gets a suffix.  A
    program's name that C or its library may define as a macro (``M_PI``, ``INFINITY``, ``linux``,
    ``_Bool``: macro-like or reserved) gets a trailing ``_``, and one that starts with ``tl_`` (the
    kernel's own names) a leading ``u``."""

    def __init__(self):
        self.taken: set[str] = set(C_RESERVED)
        self.index: dict[int, str] = {}

    def fresh(self, base: str) -> str:
        base = re.sub(r"\W", "_", base) or "v"
        if base[0].isdigit():
            base = "v" + base
        if base.startswith("tl_"):
            base = "u" + base
        if _macro_like(base):
            base += "_"
        name = base
        k = 0
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        return name

    def size(self, name: str) -> str:
        return self.fresh(name if not re.fullmatch(r".*_\d+", name) else "sz_" + name)

    def var(self, v: IndexVar) -> str:
        name = self.index.get(id(v))
        if name is None:
            name = self.fresh(v.name + "_")
            self.index[id(v)] = name
        return name


# lower-case names that C, its library or the compiler define as macros
_LOWER_MACROS = frozenset({
    "linux", "unix", "i386", "errno", "stdin", "stdout", "stderr", "assert", "isnan", "isinf", "isfinite",
    "isnormal", "signbit", "fpclassify", "isgreater", "isgreaterequal", "isless", "islessequal",
    "islessgreater", "isunordered", "offsetof", "alloca", "major", "minor", "makedev", "setjmp", "va_arg",
    "va_start", "va_end", "va_copy", "static_assert", "noreturn", "alignas", "alignof", "complex",
    "imaginary",
})


def _macro_like(name: str) -> bool:
    """Whether a name may be a macro: reserved (a leading underscore), upper case (``M_PI``, ``NAN``,
    ``INT64_MAX``; one letter, like a matrix ``A``, is not), or a known lower-case macro."""
    return (name.startswith("_") or name in _LOWER_MACROS
            or (len(name) > 1 and name.upper() == name and any(c.isalpha() for c in name)))


# --------------------------------------------------------------------------------------------------
# lowering


def lower(expr: Expr, fuse_lets: bool = True, contractions: bool = True,
          stored_reductions: bool = False) -> tuple[Program, Namer]:
    """The statement form of any ``Expr`` (see the module docstring); ``contractions``: mark plain dense
    contractions for BLAS (``codegen.contract``); ``stored_reductions``: a scalar let whose value is a
    reduction is never fused into its reader (``codegen.fuse``)."""
    from .fuse import fuse
    from .hoist import factored, hoisted, reductions_apart

    bindings, out = let_chain(normalize(split_pairs(body_of(expr))))  # every input of expr is an argument
    namer = Namer()
    sizes = [s.name for s in size_vars(expr)]
    for s in size_vars(out):
        if s.name not in sizes:
            sizes.append(s.name)
    size_cnames = {s: namer.size(s) for s in sizes}

    lets = []  # (var, gen vars, gen sizes, body)
    for var, value in bindings:
        gv, gs, body = full_nest(value)
        lets.append([var, gv, gs, body])

    leaves: list = []

    def out_tree(e):
        if isinstance(e, Pair):
            return (out_tree(e.first), out_tree(e.second))
        if isinstance(e.type, PairType):  # a pair-valued input returned whole: its two components
            return out_tree(Pair(Proj(0, e), Proj(1, e)))
        gv, gs, body = full_nest(e)
        leaves.append([None, gv, gs, body])
        return len(leaves) - 1

    shape = out_tree(out)
    if fuse_lets:
        lets, leaves = fuse(*hoisted(*factored(lets, leaves)), stored_reductions=stored_reductions)
    if stored_reductions:
        lets, leaves = reductions_apart(lets, leaves)

    # inputs (value components) and relations
    inputs: list[Array] = []
    relations: list[Relation] = []
    for v in free_vars(expr):
        if isinstance(v.type, RelType):
            relations.append(Relation(v, namer.fresh(v.name), tuple(v.type.sizes)))
        else:
            for projs, dims in components(v.type):
                label = v.name + "".join(f".{k}" for k in projs)
                inputs.append(Array(namer.fresh(label.replace(".", "_")), dims, "input", (v, projs), label))

    stmts: list[Stmt] = []
    temps: list[Array] = []
    let_arrays: dict[int, Array] = {}
    memo: dict = {}
    for var, gv, gs, body in lets:
        arr = Array(namer.fresh(var.name), gs, "temp", var, var.name)
        temps.append(arr)
        let_arrays[id(var)] = arr
        stmts.append(Stmt(arr, gv, canon(body, memo)))
    out_arrays = []
    for k, (_, gv, gs, body) in enumerate(leaves):
        arr = Array(namer.fresh(f"out{k}"), gs, "output", k, f"output {k}")
        out_arrays.append(arr)
        stmts.append(Stmt(arr, gv, canon(body, memo)))

    def build(s):
        if isinstance(s, tuple):
            return tuple(build(p) for p in s)
        return out_arrays[s]

    prog = Program(expr, sizes, inputs, relations, stmts, build(shape), temps, size_cnames, let_arrays)
    if contractions:
        from .contract import extract_contractions

        extract_contractions(prog, namer)
    return prog, namer
