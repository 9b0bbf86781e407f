"""Hypothesis strategies: random well-typed tensorlang programs, and inputs that match them.

One generator feeds every pass's property tests and ``proofs/`` (DESIGN.md, "Tests and proofs"), so it
aims to hit every construct of Fig. 3 in every combination the passes must handle:

* constants, ``+``, ``*`` (with ``a - b`` as ``a + (-1) * b``), black boxes kept inside their domains;
* pairs and projections: inputs of pair type (``p : ([n]R, R)``, the nested ``q : (R, ([m]R, R))``),
  outputs of pair type, intermediate tensors of pairs (``[n](R, R)``, never as inputs or outputs);
* ``gen`` over one and two dimensions, ``sum`` (also over two), partial accesses (``A[i] : [m]R``);
* accesses with affine indices: the loop variable whose range is the dimension, reversals
  ``x[n - 1 - i]``, shifts ``z[i + j]`` and correlations ``z[i - j + m - 1]`` into the padded
  ``z : [n + m - 1]R``, transposes (``A[i, j]`` under ``gen(j:m) gen(i:n)``, ``S[j, i]``), strides
  ``x[2 * i]``, constants ``A[0, i]`` and ``x[n - 1]``, variables of another range;
* Iverson guards with comparisons (all six operators, ``!=`` included), ``and``, ``or``, ``not``
  (pushed into the comparisons), ``exists``, data relations (``E : rel[n, m]``, ``U : rel[n]``),
  ``true``/``false``; guards around scalars, tensors and pairs;
* lets: scalar, tensor and pair valued, nested, inside ``gen``/``sum`` bodies (the section 2.3 shape,
  see ``nested_let_programs``), dead now and then;
* sharing: one subexpression object used twice (``e * e``, a tensor reduced twice), besides lets.

**Bounds by construction.**  Every access is in range at every point where it is evaluated, for all
sizes ``n, m >= 0``.  An index is either valid under its loop ranges alone (``i`` where ``i``'s range
is the dimension, ``s - 1 - i``, ``i + j`` and ``i - j + m - 1`` into ``[n + m - 1]``), or it comes
with the guard that makes it valid (``[1 <= i] * x[i - 1]``, ``[0 < n] * x[0]``, ``[j < n] * x[j]``
for ``j : m``, ``[2 * i < n] * x[2 * i]``).  That guard is left out where an enclosing Iverson bracket
already states it (a "fact"): ``[0 < n] * gen(j:m) (A[0, j] + ...)``, so guards that make deeper
accesses valid are exercised too.  Out-of-range points therefore occur only under false guards, which
the language leaves unevaluated.  Relation atoms only get in-range arguments (a loop variable of the
matching range, a reversal, or a variable bound by ``exists`` over the relation's dimension).

**Domains.**  Arguments at a function's ``positive`` positions are ``1 + e * e``, ``exp(tanh e)``,
``2 + cos e`` or ``0.5 + sigmoid e``; ``exp`` and ``tan`` get arguments bounded by a squashing function
(or an input scaled by 0.5), ``pow`` a positive base and a constant or bounded exponent.  Inputs are in
[-2, 2], so values stay finite and moderate.  ``SMOOTH_FUNCTIONS`` leaves out the non-differentiable
``relu abs max min`` for finite-difference checks.

**Determinism.**  The program is a function of Hypothesis's draws alone: no global random state, no
iteration over sets or dicts of objects; names come from a per-program counter (``i j k ...`` for
indices, ``t0 t1 ...`` for lets), so two programs built from the same draws are the same object.
Hypothesis itself also draws, now and then, literal constants it finds in the source of every loaded
local module, so that any edit anywhere in the package, or another set of imported modules, would
change derandomised draws; ``without_local_constants()`` turns that off (``tests/conftest.py`` for the
repeatable profile, ``python -m proofs`` always), and the draws depend on the strategies alone.

Public strategies: ``programs``, ``scalar_programs``, ``nested_let_programs``, ``max_programs``, ``program_and_inputs``,
``inputs_for``, ``values`` and ``sizes``; the input declarations are ``INPUTS``.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import tensorlang as tl
from tensorlang.functions import lookup
from tensorlang.nodes import (
    FALSE, TRUE, Access, Add, Affine, Call, Const, Exists, Expr, Gen, Guard, IndexMapType, IndexVar, Let, Max, Mul,
    Pair, PairType, Pred, Proj, R, RelAtom, RelType, SizeVar, Sum, TensorType, Type, Var, compare, conj, disj,
    has_pair, negate, tensor, walk,
)
from tensorlang.traversal import free_vars, value_inputs

__all__ = [
    "BUILTIN_FUNCTIONS", "SMOOTH_FUNCTIONS", "INPUTS", "programs", "scalar_programs", "nested_let_programs", "max_programs",
    "program_and_inputs", "inputs_for", "values", "sizes", "type_shape", "collect", "examples_and_gradients",
]

# --------------------------------------------------------------------------------------------------
# the fixed universe: sizes, types, inputs, functions

SIZE_NAMES = ("n", "m")
N = Affine.var(SizeVar("n"))
M = Affine.var(SizeVar("m"))
P = N + M - 1  # the padded length of a convolution's input

T_N = tensor([N])
T_M = tensor([M])
T_P = tensor([P])
T_NM = tensor([N, M])
T_MN = tensor([M, N])
T_NN = tensor([N, N])
T_RR = PairType(R, R)
T_NR = PairType(T_N, R)
T_RM = PairType(R, T_M)
T_NRR = TensorType(N, T_RR)  # an intermediate tensor of pairs (never an input or an output)

def without_local_constants() -> None:
    """Hypothesis draws no constants from the source of loaded modules (module docstring, Determinism)."""
    from hypothesis.internal.conjecture import providers

    if hasattr(providers, "_get_local_constants"):
        providers._get_local_constants = lambda: providers._local_constants


#: The inputs a program may use, in a fixed order: name -> type.
INPUTS: tuple[tuple[str, Type], ...] = (
    ("x", T_N),
    ("y", T_M),
    ("A", T_NM),
    ("z", T_P),
    ("S", T_NN),
    ("a", R),
    ("p", T_NR),
    ("q", PairType(R, PairType(T_M, R))),
    ("E", RelType((N, M))),
    ("U", RelType((N,))),
)

BUILTIN_FUNCTIONS = (
    "exp", "log", "sin", "cos", "tan", "tanh", "sqrt", "sigmoid", "relu", "abs", "recip", "pow", "max", "min",
)
#: Built-ins that are differentiable everywhere on the arguments the generator gives them.
SMOOTH_FUNCTIONS = tuple(f for f in BUILTIN_FUNCTIONS if f not in ("relu", "abs", "max", "min"))

_SQUASH = ("tanh", "sin", "cos", "sigmoid")  # bounded by 1 in absolute value
_CONSTANTS = (1, 2, 0.5, -1, 3, -0.5, 1.5, 0.25, -2, 1, 2, -1, 0)  # 0 (the symbolic zero) now and then
_POW_EXPONENTS = (2, 0.5, -1, 1.5, 3, -0.5)


# --------------------------------------------------------------------------------------------------
# generation context


@dataclass(frozen=True)
class _Config:
    pairs: bool
    relations: bool
    lets: bool
    functions: tuple[str, ...]
    inputs: tuple[Var, ...]  # the inputs this program may use (values and relations)

    @property
    def value_inputs(self) -> tuple[Var, ...]:
        return tuple(v for v in self.inputs if not isinstance(v.type, RelType))

    @property
    def relation_inputs(self) -> tuple[Var, ...]:
        return tuple(v for v in self.inputs if isinstance(v.type, RelType))


_INDEX_LETTERS = "ijkluvwr"


@dataclass
class _Names:
    """Fresh names for one program: unique, so no binder shadows another and printing needs no renaming."""

    indices: int = 0
    lets: int = 0

    def index(self) -> IndexVar:
        k = self.indices
        self.indices += 1
        if k < len(_INDEX_LETTERS):
            name = _INDEX_LETTERS[k]
        else:  # no "i<digits>", which the canonical index names use
            rest = _INDEX_LETTERS[1:]
            name = f"{rest[(k - 8) % len(rest)]}{(k - 8) // len(rest) + 2}"
        return IndexVar(name)

    def let(self, t: Type) -> Var:
        k = self.lets
        self.lets += 1
        return Var(f"t{k}", t)


@dataclass(frozen=True)
class _Ctx:
    cfg: _Config
    names: _Names = field(compare=False)
    indices: tuple = ()  # (IndexVar, Affine range) of the enclosing gen/sum/exists binders
    facts: tuple = ()  # predicates that hold here (from enclosing Iverson brackets)
    lets: tuple = ()  # let-bound Vars in scope, innermost last

    def with_index(self, var, size) -> "_Ctx":
        return replace(self, indices=self.indices + ((var, size),))

    def with_facts(self, facts) -> "_Ctx":
        return replace(self, facts=self.facts + tuple(facts)) if facts else self

    def with_let(self, var) -> "_Ctx":
        return replace(self, lets=self.lets + (var,))

    def holds(self, p: Pred) -> bool:
        return any(f is p for f in self.facts)


def _pick(draw, options):
    """One value of ``[(weight, value), ...]`` (integer weights); shrinks towards the first option."""
    options = [(w, v) for w, v in options if w > 0]
    if len(options) == 1:
        return options[0][1]
    k = draw(st.integers(0, sum(w for w, _ in options) - 1))
    for w, v in options:
        if k < w:
            return v
        k -= w
    raise AssertionError("unreachable")


def _chance(draw, num: int, den: int) -> bool:
    """True with probability num/den; shrinks towards True."""
    return draw(st.integers(0, den - 1)) < num


def _element(draw, seq):
    return seq[draw(st.integers(0, len(seq) - 1))]


# --------------------------------------------------------------------------------------------------
# affine indices and the guards that make them valid


def _lt(a, b) -> Pred:
    return compare("<", a, b)


def _le(a, b) -> Pred:
    return compare("<=", a, b)


def _index_candidates(ctx: _Ctx, size: Affine):
    """``(weight, index, required guards)`` for an access into a dimension of ``size`` here."""
    out = []
    for var, rng in ctx.indices:
        i = Affine.var(var)
        if rng is size:
            out += [
                (8, i, ()),
                (3, size - 1 - i, ()),
                (3, i - 1, (_le(1, i),)),
                (2, i + 1, (_lt(i + 1, size),)),
                (3, 2 * i, (_lt(2 * i, size),)),
            ]
        else:
            out.append((2, i, (_lt(i, size),)))
    if size is P:
        rn = [v for v, r in ctx.indices if r is N]
        rm = [v for v, r in ctx.indices if r is M]
        for i in rn:
            for j in rm:
                out += [(5, Affine.var(i) + Affine.var(j), ()), (3, Affine.var(i) - Affine.var(j) + M - 1, ())]
    out += [
        (2, Affine.const_(0), (_lt(0, size),)),
        (1, size - 1, (_lt(0, size),)),
        (1, Affine.const_(1), (_lt(1, size),)),
    ]
    return out


def _index(draw, ctx: _Ctx, size: Affine):
    """An index into a dimension of ``size`` and the guards still needed to keep it in range."""
    a, reqs = _pick(draw, [(w, (a, r)) for w, a, r in _index_candidates(ctx, size)])
    return a, tuple(r for r in reqs if not ctx.holds(r))


def _paths(t: Type, target: Type):
    """The ways of reaching ``target`` inside a value of type ``t``: tuples of ("acc", size) and ("proj", k)."""
    if t is target:
        return [()]
    out = []
    if isinstance(t, TensorType):
        out += [(("acc", t.size),) + p for p in _paths(t.elem, target)]
    elif isinstance(t, PairType):
        out += [(("proj", 0),) + p for p in _paths(t.first, target)]
        out += [(("proj", 1),) + p for p in _paths(t.second, target)]
    return out


def _navigate(draw, ctx: _Ctx, e: Expr, target: Type) -> Expr:
    """``e`` accessed and projected down to a value of type ``target``, guarded where indices need it."""
    paths = _paths(e.type, target)
    path = _element(draw, paths)
    reqs: list = []
    for step, arg in path:
        if step == "acc":
            a, need = _index(draw, ctx, arg)
            e = Access(e, a)
            reqs += [r for r in need if not any(r is q for q in reqs)]
        else:
            e = Proj(arg, e)
    return Guard(conj(*reqs), e) if reqs else e


# --------------------------------------------------------------------------------------------------
# predicates


def _affine_term(draw, ctx: _Ctx) -> Affine:
    """An affine form for a comparison: loop variables, sizes, constants and their combinations."""
    kinds = [(2, "n"), (2, "m"), (2, "const")]
    if ctx.indices:
        kinds = [(8, "i"), (2, "shift"), (2, "diff"), (1, "sum"), (1, "double"), (1, "reverse")] + kinds
    kind = _pick(draw, kinds)
    if kind == "n":
        return N
    if kind == "m":
        return M
    if kind == "const":
        return Affine.const_(_element(draw, (0, 1, 2, 3)))
    var, rng = _element(draw, ctx.indices)
    i = Affine.var(var)
    if kind == "i":
        return i
    if kind == "shift":
        return i + _element(draw, (1, 2, -1))
    if kind == "double":
        return 2 * i
    if kind == "reverse":
        return rng - 1 - i
    j = Affine.var(_element(draw, ctx.indices)[0])
    return i - j if kind == "diff" else i + j


_OPS = ("<", "<=", "==", "!=", ">", ">=")


def _comparison(draw, ctx: _Ctx) -> Pred:
    return compare(_element(draw, _OPS), _affine_term(draw, ctx), _affine_term(draw, ctx))


def _affine_pred(draw, ctx: _Ctx, depth: int) -> Pred:
    """A predicate of comparisons, and, or only (so that ``not`` applies to it)."""
    kind = _pick(draw, [(4, "cmp")] + ([(1, "and"), (1, "or")] if depth > 0 else []))
    if kind == "cmp":
        return _comparison(draw, ctx)
    parts = (_affine_pred(draw, ctx, depth - 1), _affine_pred(draw, ctx, depth - 1))
    return conj(*parts) if kind == "and" else disj(*parts)


def _rel_atom(draw, ctx: _Ctx) -> Pred:
    """``E(...)`` with in-range arguments; dimensions without a matching loop variable are bound by exists."""
    rel = _element(draw, ctx.cfg.relation_inputs)
    args, bound = [], []
    inner = ctx
    for size in rel.type.sizes:
        cands = [(3, Affine.var(v)) for v, r in ctx.indices if r is size]
        cands += [(1, size - 1 - Affine.var(v)) for v, r in ctx.indices if r is size]
        if cands and _chance(draw, 3, 4):
            args.append(_pick(draw, cands))
        else:
            k = ctx.names.index()
            bound.append((k, size))
            inner = inner.with_index(k, size)
            args.append(Affine.var(k))
    p = RelAtom(rel, tuple(args))
    if bound and _chance(draw, 1, 3):
        p = conj(p, _comparison(draw, inner))
    for k, size in reversed(bound):
        p = Exists(k, size, p)
    return p


def _pred(draw, ctx: _Ctx, depth: int) -> Pred:
    rel = ctx.cfg.relations and bool(ctx.cfg.relation_inputs)
    options = [(5, "cmp"), (4 if rel else 0, "rel"), (1, "const")]
    if depth > 0:
        options += [(3, "and"), (3, "or"), (3, "not"), (3, "exists")]
    kind = _pick(draw, options)
    if kind == "cmp":
        return _comparison(draw, ctx)
    if kind == "rel":
        return _rel_atom(draw, ctx)
    if kind == "const":
        return _pick(draw, [(1, TRUE), (1, FALSE)])
    if kind == "and":
        return conj(_pred(draw, ctx, depth - 1), _pred(draw, ctx, depth - 1))
    if kind == "or":
        return disj(_pred(draw, ctx, depth - 1), _pred(draw, ctx, depth - 1))
    if kind == "not":
        return negate(_affine_pred(draw, ctx, depth - 1))
    # exists(k:s) (a comparison mentioning k) [and more]
    k = ctx.names.index()
    size = _loop_size(draw)
    inner = ctx.with_index(k, size)
    kv = Affine.var(k)
    atom = compare(_element(draw, _OPS), _pick(draw, [(3, kv), (1, kv + 1), (1, 2 * kv)]), _affine_term(draw, inner))
    body = atom
    if _chance(draw, 1, 2):
        other = _pred(draw, inner, depth - 1)
        body = conj(atom, other) if _chance(draw, 2, 3) else disj(atom, other)
    return Exists(k, size, body)


def _facts_available(ctx: _Ctx):
    """Predicates an Iverson bracket may state so that accesses under it need no guard of their own."""
    out = [_lt(0, N), _lt(0, M), _lt(0, P)]
    for var, rng in ctx.indices:
        i = Affine.var(var)
        out += [_le(1, i), _lt(i + 1, rng)]
        out += [_lt(i, s) for s in (N, M, P) if s is not rng]
    return out


def _guard_pred(draw, ctx: _Ctx):
    """``(pred, facts)``: a predicate for an Iverson bracket and the facts it guarantees in its body."""
    kind = _pick(draw, [(4, "random"), (3, "enabling")])
    if kind == "random":
        return _pred(draw, ctx, 2), ()
    avail = _facts_available(ctx)
    facts = [_element(draw, avail)]
    if _chance(draw, 1, 3):
        f = _element(draw, avail)
        if not any(f is g for g in facts):
            facts.append(f)
    extra = _pred(draw, ctx, 1) if _chance(draw, 1, 4) else TRUE
    p = conj(*facts, extra)
    return p, tuple(facts)


# --------------------------------------------------------------------------------------------------
# expressions


def _loop_size(draw) -> Affine:
    return _pick(draw, [(5, N), (5, M), (1, P), (1, Affine.const_(2)), (1, 2 * N)])


def _const(draw) -> Expr:
    return Const(_element(draw, _CONSTANTS))


def _value_types(cfg: _Config, *, intermediate: bool):
    """Types a program, a let or a subexpression may have, with weights."""
    out = [(8, R), (3, T_N), (3, T_M), (2, T_NM), (1, T_MN), (1, T_NN), (1, T_P)]
    if cfg.pairs:
        out += [(1, T_RR), (1, T_NR), (1, T_RM)]
        if intermediate:
            out += [(1, T_NRR)]
        else:
            out += [(1, PairType(T_RR, T_N))]
    return out


def _expr(draw, ctx: _Ctx, t: Type, depth: int) -> Expr:
    if depth <= 0:
        return _leaf(draw, ctx, t)
    if t is R:
        return _scalar(draw, ctx, depth)
    if isinstance(t, TensorType):
        return _tensor_expr(draw, ctx, t, depth)
    return _pair_expr(draw, ctx, t, depth)


def _sources(ctx: _Ctx, t: Type):
    """Variables in scope (inputs and lets) from which a value of type t can be reached, with weights."""
    out = [(2, v) for v in ctx.cfg.value_inputs if _paths(v.type, t)]
    lets = [v for v in ctx.lets if _paths(v.type, t)]
    out += [(6 if k == len(lets) - 1 else 3, v) for k, v in enumerate(lets)]
    return out


def _leaf(draw, ctx: _Ctx, t: Type, calls: bool = True) -> Expr:
    sources = _sources(ctx, t)
    options = [(w, ("var", v)) for w, v in sources]
    if t is R:
        options = [(3, ("const", None))] + options
        if calls and ctx.cfg.functions:  # an elementwise map, e.g. exp(x[i]), log(1 + y[j] * y[j])
            options.append((4, ("call", None)))
    else:
        options.append((1 if sources else 4, ("build", None)))
    kind, v = _pick(draw, options)
    if kind == "const":
        return _const(draw)
    if kind == "call":
        fn = _element(draw, ctx.cfg.functions)
        return _apply(draw, ctx, fn, [_leaf(draw, ctx, R, calls=False) for _ in range(lookup(fn).arity)])
    if kind == "var":
        if t is R and v.type is not R and _chance(draw, 3, 4):
            return _reduce(draw, ctx, v)  # e.g. sum(i:n) x[i], or x[i] under a loop over i
        return _navigate(draw, ctx, v, t)
    if isinstance(t, TensorType):
        var = ctx.names.index()
        return Gen(var, t.size, _leaf(draw, ctx.with_index(var, t.size), t.elem))
    return Pair(_leaf(draw, ctx, t.first), _leaf(draw, ctx, t.second))


def _input_leaf(draw, ctx: _Ctx) -> Expr:
    """A scalar of magnitude at most 2: a constant or an entry of an input."""
    options = [(1, None)] + [(3, v) for v in ctx.cfg.value_inputs]
    v = _pick(draw, options)
    if v is None:
        return Const(_element(draw, (1, 0.5, -1, 2)))
    return _navigate(draw, ctx, v, R)


def _scalar(draw, ctx: _Ctx, depth: int) -> Expr:
    cfg = ctx.cfg
    kind = _pick(draw, [
        (1, "leaf"), (8, "add"), (8, "mul"), (4, "sum"), (4, "guard"), (2, "access"), (1, "share"), (2, "twice"),
        (2 if _padded(ctx) else 0, "conv"),
        (12 if cfg.functions else 0, "call"), (4 if cfg.lets else 0, "let"), (1 if cfg.pairs else 0, "proj"),
    ])
    d = depth - 1
    if kind == "leaf":
        return _leaf(draw, ctx, R)
    if kind == "add":
        a, b = _expr(draw, ctx, R, d), _expr(draw, ctx, R, d)
        return Add(a, Mul(Const(-1), b)) if _chance(draw, 1, 4) else Add(a, b)
    if kind == "mul":
        if _chance(draw, 1, 4):
            return Mul(_const(draw), _expr(draw, ctx, R, d))
        return Mul(_expr(draw, ctx, R, d), _expr(draw, ctx, R, d))
    if kind == "sum":
        k = ctx.names.index()
        size = _loop_size(draw)
        inner = ctx.with_index(k, size)
        if _chance(draw, 1, 4):  # sum(k:s, l:t)
            l = ctx.names.index()
            size2 = _loop_size(draw)
            return Sum(k, size, Sum(l, size2, _body(draw, inner.with_index(l, size2), R, d)))
        return Sum(k, size, _body(draw, inner, R, d))
    if kind == "guard":
        return _guard(draw, ctx, R, depth)
    if kind == "call":
        return _call(draw, ctx, depth)
    if kind == "let":
        return _let(draw, ctx, R, depth)
    if kind == "access":
        types = [(3, T_N), (3, T_M), (2, T_NM), (1, T_P), (1, T_MN)]
        if cfg.pairs:
            types.append((1, T_NRR))
        tt = _pick(draw, types)
        return _navigate(draw, ctx, _expr(draw, ctx, tt, d), R)
    if kind == "conv":
        return _conv(draw, ctx, d)
    if kind == "proj":
        pt = _pick(draw, [(2, T_RR), (2, T_NR), (1, T_RM)])
        return _navigate(draw, ctx, _expr(draw, ctx, pt, d), R)
    if kind == "share":  # one subexpression object used twice
        e = _expr(draw, ctx, R, d)
        how = _pick(draw, [(2, "sq"), (1, "scaled"), (1 if cfg.functions else 0, "call")])
        if how == "sq":
            return Mul(e, e)
        if how == "scaled":
            return Add(e, Mul(_const(draw), e))
        fn = _element(draw, cfg.functions)
        return Add(_apply(draw, ctx, fn, [e] * lookup(fn).arity), e)
    # twice: one tensor subexpression reduced twice, at different indices in general
    tt = _pick(draw, [(2, T_N), (2, T_M), (1, T_NM), (1, T_P)])
    te = _expr(draw, ctx, tt, d)
    a, b = _reduce(draw, ctx, te), _reduce(draw, ctx, te)
    return Mul(a, b) if _chance(draw, 1, 2) else Add(a, b)


def _padded(ctx: _Ctx):
    """The padded input ``z : [n + m - 1]R`` where this program may use it."""
    for v in ctx.cfg.value_inputs:
        if v.type is T_P:
            return v
    return None


def _conv(draw, ctx: _Ctx, depth: int) -> Expr:
    """A convolution or correlation term ``z[i + j] * e`` or ``z[i - j + m - 1] * e`` for ``i : n, j : m``,
    summing over whichever of i and j no enclosing loop provides."""
    z = _padded(ctx)
    loops = []
    i = _element(draw, [v for v, r in ctx.indices if r is N] or [None])
    j = _element(draw, [v for v, r in ctx.indices if r is M] or [None])
    if i is None:
        i = ctx.names.index()
        loops.append((i, N))
    if j is None:
        j = ctx.names.index()
        loops.append((j, M))
    inner = ctx
    for var, size in loops:
        inner = inner.with_index(var, size)
    ai, aj = Affine.var(i), Affine.var(j)
    index = ai + aj if _chance(draw, 1, 2) else ai - aj + M - 1
    body = Mul(Access(z, index), _expr(draw, inner, R, depth))
    for var, size in reversed(loops):
        body = Sum(var, size, body)
    return body


def _body(draw, ctx: _Ctx, t: Type, depth: int) -> Expr:
    """The body of a gen or sum: often a let (the let-lifting cases 5.6 and 5.7)."""
    if ctx.cfg.lets and depth > 0 and _chance(draw, 1, 5):
        return _let(draw, ctx, t, depth)
    return _expr(draw, ctx, t, depth)


def _tensor_expr(draw, ctx: _Ctx, t: TensorType, depth: int) -> Expr:
    cfg = ctx.cfg
    kind = _pick(draw, [
        (1, "leaf"), (6, "gen"), (2, "guard"), (1, "access"),
        (1 if cfg.lets else 0, "let"), (1 if cfg.pairs and not has_pair(t) else 0, "proj"),
    ])
    d = depth - 1
    if kind == "leaf":
        return _leaf(draw, ctx, t)
    if kind == "gen":
        var = ctx.names.index()
        return Gen(var, t.size, _body(draw, ctx.with_index(var, t.size), t.elem, d))
    if kind == "guard":
        return _guard(draw, ctx, t, depth)
    if kind == "let":
        return _let(draw, ctx, t, depth)
    if kind == "access":  # a row of a generated matrix, e.g. (gen(i:n) gen(j:m) ...)[k]
        outer = _pick(draw, [(1, N), (1, M)])
        return _navigate(draw, ctx, _expr(draw, ctx, TensorType(outer, t), d), t)
    other = _pick(draw, [(2, R), (1, T_N)])
    pt = PairType(t, other) if _chance(draw, 1, 2) else PairType(other, t)
    return _navigate(draw, ctx, _expr(draw, ctx, pt, d), t)


def _pair_expr(draw, ctx: _Ctx, t: PairType, depth: int) -> Expr:
    cfg = ctx.cfg
    kind = _pick(draw, [
        (2, "leaf"), (5, "pair"), (2, "guard"), (1 if cfg.lets else 0, "let"), (1 if t is T_RR else 0, "access"),
    ])
    d = depth - 1
    if kind == "leaf":
        return _leaf(draw, ctx, t)
    if kind == "pair":
        return Pair(_expr(draw, ctx, t.first, d), _expr(draw, ctx, t.second, d))
    if kind == "guard":
        return _guard(draw, ctx, t, depth)
    if kind == "let":
        return _let(draw, ctx, t, depth)
    return _navigate(draw, ctx, _expr(draw, ctx, T_NRR, d), t)  # an element of a tensor of pairs


def _guard(draw, ctx: _Ctx, t: Type, depth: int) -> Expr:
    p, facts = _guard_pred(draw, ctx)
    return Guard(p, _expr(draw, ctx.with_facts(facts), t, depth - 1))


def _let(draw, ctx: _Ctx, t: Type, depth: int, value_type: Type | None = None) -> Expr:
    vt = value_type or _pick(draw, _value_types(ctx.cfg, intermediate=True))
    value = _expr(draw, ctx, vt, depth - 1)
    var = ctx.names.let(vt)
    inner = ctx.with_let(var)
    if depth > 1 and _chance(draw, 1, 5):
        body = _let(draw, inner, t, depth - 1)  # let x = .. in let y = .. in ..
    else:
        body = _expr(draw, inner, t, depth - 1)
    if not any(v is var for v in free_vars(body)) and _chance(draw, 7, 8):
        body = _use(draw, inner, body, var)  # mostly live; dead lets now and then
    return Let(var, value, body)


# -- using and reducing values


def _reduce(draw, ctx: _Ctx, e: Expr) -> Expr:
    """A scalar that depends on ``e``: e's entries summed over, accessed at valid indices, projected."""
    t = e.type
    if t is R:
        return e
    if isinstance(t, TensorType):
        looped = any(r is t.size for _, r in ctx.indices)
        if _pick(draw, [(3 if looped else 1, True), (2, False)]):
            a, reqs = _index(draw, ctx, t.size)
            inner = _reduce(draw, ctx.with_facts(reqs), Access(e, a))
            return Guard(conj(*reqs), inner) if reqs else inner
        k = ctx.names.index()
        return Sum(k, t.size, _reduce(draw, ctx.with_index(k, t.size), Access(e, Affine.var(k))))
    how = _pick(draw, [(1, 0), (1, 1), (1, "both")])
    if how == "both":
        return Add(_reduce(draw, ctx, Proj(0, e)), _reduce(draw, ctx, Proj(1, e)))
    return _reduce(draw, ctx, Proj(how, e))


def _combine(draw, ctx: _Ctx, e: Expr, scalar: Expr) -> Expr:
    """An expression of e's type that depends on both ``e`` and ``scalar``."""
    t = e.type
    if t is R:
        return Mul(e, scalar) if _chance(draw, 1, 3) else Add(e, scalar)
    if isinstance(t, TensorType):
        var = ctx.names.index()
        return Gen(var, t.size, _combine(draw, ctx.with_index(var, t.size), Access(e, Affine.var(var)), scalar))
    k = draw(st.integers(0, 1))
    parts = [Proj(0, e), Proj(1, e)]
    parts[k] = _combine(draw, ctx, parts[k], scalar)
    return Pair(*parts)


def _use(draw, ctx: _Ctx, e: Expr, var: Var) -> Expr:
    """``e`` changed so that it uses ``var``."""
    return _combine(draw, ctx, e, _reduce(draw, ctx, var))


# -- black boxes


def _bounded(draw, ctx: _Ctx, e: Expr) -> Expr:
    """A value in [-2, 2] (mostly [-1, 1]) that depends on e where a squashing function is allowed."""
    squash = [f for f in _SQUASH if f in ctx.cfg.functions]
    if squash:
        return Call(_element(draw, squash), (e,))
    return Mul(Const(0.5), _input_leaf(draw, ctx))


def _positive(draw, ctx: _Ctx, e: Expr) -> Expr:
    fns = ctx.cfg.functions
    how = _pick(draw, [
        (3, "square"), (1 if "exp" in fns else 0, "exp"),
        (1 if "cos" in fns else 0, "cos"), (1 if "sigmoid" in fns else 0, "sigmoid"),
    ])
    if how == "square":
        return Add(Const(1), Mul(e, e))
    if how == "exp":
        return Call("exp", (_bounded(draw, ctx, e),))
    if how == "cos":
        return Add(Const(2), Call("cos", (e,)))
    return Add(Const(0.5), Call("sigmoid", (e,)))


def _apply(draw, ctx: _Ctx, fn: str, args: list) -> Expr:
    """``fn(args)`` with each argument brought into the function's domain."""
    spec = lookup(fn)
    out = []
    for k, arg in enumerate(args):
        if k in spec.positive:
            arg = _positive(draw, ctx, arg)
        elif fn in ("exp", "tan"):
            arg = _bounded(draw, ctx, arg)
        elif fn == "pow" and k == 1:
            arg = Const(_element(draw, _POW_EXPONENTS)) if _chance(draw, 2, 3) else _bounded(draw, ctx, arg)
        out.append(arg)
    return Call(fn, tuple(out))


def _call(draw, ctx: _Ctx, depth: int) -> Expr:
    fn = _element(draw, ctx.cfg.functions)
    args = [_expr(draw, ctx, R, depth - 1) for _ in range(lookup(fn).arity)]
    return _apply(draw, ctx, fn, args)


# --------------------------------------------------------------------------------------------------
# programs


def _config(draw, allow_pairs, allow_relations, allow_black_boxes, allow_lets, black_boxes) -> _Config:
    menu = []
    for name, t in INPUTS:
        if has_pair(t) and not allow_pairs:
            continue
        if isinstance(t, RelType) and not allow_relations:
            continue
        if _chance(draw, 2, 3):
            menu.append(Var(name, t))
    if not any(not isinstance(v.type, RelType) for v in menu):
        menu.insert(0, Var("x", T_N))
    if allow_relations and not any(isinstance(v.type, RelType) for v in menu) and _chance(draw, 1, 2):
        menu.append(Var("E", RelType((N, M))))
    fns = tuple(black_boxes if black_boxes is not None else BUILTIN_FUNCTIONS) if allow_black_boxes else ()
    for f in fns:
        lookup(f)  # unknown names fail here, not deep inside a draw
    return _Config(allow_pairs, allow_relations, allow_lets, fns, tuple(menu))


def _output_type(draw, cfg: _Config, scalar_output):
    if scalar_output is True:
        return R
    types = _value_types(cfg, intermediate=False)
    if scalar_output is False:
        types = [(w, t) for w, t in types if t is not R]
    return _pick(draw, types)


def _depth(draw, max_depth: int) -> int:
    """A nesting depth in 0..max_depth, mostly near the top (shrinks towards 1)."""
    if max_depth <= 0:
        return 0
    if max_depth == 1:
        return _pick(draw, [(4, 1), (1, 0)])
    return _pick(draw, [(6, 2), (2, 1), (1, 0)] + [(4 * k, k) for k in range(3, max_depth + 1)])


def _ensure_input(draw, ctx: _Ctx, e: Expr) -> Expr:
    """``e`` itself, or e made to depend on an input when it has none (derivatives need one)."""
    if value_inputs(e):
        return e
    var = _element(draw, ctx.cfg.value_inputs)
    return _use(draw, ctx, e, var)


def _start(draw, scalar_output, *flags) -> tuple[_Ctx, Type]:
    """A program's context (its configuration, from ``_config``'s ``flags``, and fresh names) and output type."""
    cfg = _config(draw, *flags)
    return _Ctx(cfg, _Names()), _output_type(draw, cfg, scalar_output)


@st.composite
def programs(
    draw,
    max_depth: int = 4,
    allow_pairs: bool = True,
    allow_relations: bool = True,
    allow_black_boxes: bool = True,
    allow_lets: bool = True,
    scalar_output: bool | None = None,
    black_boxes: tuple[str, ...] | None = None,
) -> Expr:
    """Random well-typed programs over the inputs of ``INPUTS``, every access in range by construction.

    ``scalar_output``: ``True`` for output type ``R``, ``False`` for a tensor or pair output, ``None`` for
    either.  ``black_boxes``: the functions to use (default ``BUILTIN_FUNCTIONS``; pass
    ``SMOOTH_FUNCTIONS`` for finite-difference checks).  Every program reads at least one real-valued
    input.  Outputs are ``R``, ``[s]R``, ``[s][t]R`` or pairs of these; never a tensor of pairs.
    """
    ctx, t = _start(draw, scalar_output, allow_pairs, allow_relations, allow_black_boxes, allow_lets, black_boxes)
    depth = _depth(draw, max_depth)
    return _ensure_input(draw, ctx, _expr(draw, ctx, t, depth))


def scalar_programs(**options):
    """``programs(**options)`` with output type ``R`` (for gradients)."""
    return programs(scalar_output=True, **options)


@st.composite
def nested_let_programs(
    draw,
    max_depth: int = 3,
    allow_pairs: bool = True,
    allow_relations: bool = True,
    allow_black_boxes: bool = True,
    scalar_output: bool | None = None,
    black_boxes: tuple[str, ...] | None = None,
) -> Expr:
    """The let-lifting stress case: lets nested inside ``gen``/``sum`` bodies, their values depending on
    the loop variables, as in the batched gradient of the paper's section 2.3::

        sum(k:n) let t0 = gen(i:m) ... A[k, i] ... in gen(j:m) ... t0[j] ...

    One or two binders (``gen`` or ``sum``) around a chain of one to three lets (values of any type,
    sometimes themselves lets), each used by what follows it.
    """
    ctx, t = _start(draw, scalar_output, allow_pairs, allow_relations, allow_black_boxes, True, black_boxes)
    e = _nested(draw, ctx, t, max(max_depth, 1), draw(st.integers(1, 2)))
    return _ensure_input(draw, ctx, e)


@st.composite
def max_programs(draw, black_boxes: tuple[str, ...] | None = None, allow_lets: bool = True) -> Expr:
    """Programs with a maximum or a minimum (``min(k) e`` is ``-max(k) -e``) of a drawn scalar body that
    reads ``x[k]`` or ``A[i, k]``: scalar outputs, rows of a matrix (``gen(i:n) max(k:m) ..``), a sum of
    minima (k-means), a bracket inside the body (a value, 0 where false) or around the maximum, lets in
    the body now and then.  No relations and no pairs; real inputs in [-2, 2] make ties unlikely except
    where the body is constant over the range (every entry equal: a tie that keeps its derivative)."""
    body = draw(programs(max_depth=2, scalar_output=True, allow_pairs=False, allow_relations=False,
                         allow_lets=allow_lets, black_boxes=black_boxes))
    k, i = IndexVar("k"), IndexVar("i")
    x, A = Var("x", T_N), Var("A", T_NM)
    rows = draw(st.booleans())
    entry = A[Affine.var(i)][Affine.var(k)] if rows else x[Affine.var(k)]
    size = M if rows else N
    how = draw(st.integers(0, 3))
    e = (entry * body, entry + body, entry, Mul(entry, entry) + body)[how]
    if draw(st.booleans()):
        e = Guard(compare("<", Affine.var(k), size - 1) if draw(st.booleans()) else compare("!=", Affine.var(k), 0), e)
    if allow_lets and draw(st.booleans()):
        t = Var("t_max", R)
        e = Let(t, e, Mul(t, t) + t)
    minimum = draw(st.booleans())
    red = Max(k, size, Mul(Const(-1), e) if minimum else e)
    red = Mul(Const(-1), red) if minimum else red
    if not rows:
        return red + body if draw(st.booleans()) else red
    out = Gen(i, N, red)
    if draw(st.booleans()):
        j = IndexVar("j")
        return Sum(j, N, Mul(out[Affine.var(j)], out[Affine.var(j)]))
    return out


def _nested(draw, ctx: _Ctx, t: Type, depth: int, binders: int) -> Expr:
    if binders > 0:
        if isinstance(t, TensorType):
            var = ctx.names.index()
            return Gen(var, t.size, _nested(draw, ctx.with_index(var, t.size), t.elem, depth, binders - 1))
        if t is R:
            k = ctx.names.index()
            size = _pick(draw, [(1, N), (1, M)])
            return Sum(k, size, _nested(draw, ctx.with_index(k, size), R, depth, binders - 1))
        if isinstance(t, PairType):
            i = _element(draw, (0, 1))
            parts = [t.first, t.second]
            built = [None, None]
            built[i] = _nested(draw, ctx, parts[i], depth, binders)
            built[1 - i] = _expr(draw, ctx, parts[1 - i], depth - 1)
            return Pair(*built)
    lets = draw(st.integers(1, 3))
    return _let_chain(draw, ctx, t, depth, lets)


def _let_chain(draw, ctx: _Ctx, t: Type, depth: int, lets: int) -> Expr:
    if lets == 0:
        return _expr(draw, ctx, t, depth)
    vt = _pick(draw, [(3, T_N), (2, T_M), (2, R), (1, T_NM)] + ([(1, T_NR), (1, T_NRR)] if ctx.cfg.pairs else []))
    if _chance(draw, 1, 4):
        value = _let(draw, ctx, vt, depth)  # a let in a let's value
    else:
        value = _expr(draw, ctx, vt, depth)
    var = ctx.names.let(vt)
    inner = ctx.with_let(var)
    body = _let_chain(draw, inner, t, depth, lets - 1)
    if not any(v is var for v in free_vars(body)):
        body = _use(draw, inner, body, var)
    return Let(var, value, body)


# --------------------------------------------------------------------------------------------------
# sizes and inputs


@st.composite
def sizes(draw, names=SIZE_NAMES, max_size: int = 5, allow_zero: bool = True) -> dict[str, int]:
    """Values for size variables: mostly 1..max_size (shrinking towards 1), 0 now and then (about 1 in 17)."""
    out = {}
    for name in names:
        k = draw(st.integers(0, 33 if allow_zero else 31))
        out[name] = 0 if k >= 32 else 1 + k % max_size
    return out


def _affine_value(a: Affine, size_values) -> int:
    return a.evaluate({v: size_values[v.name] for v in a.size_vars})


def type_shape(t: Type, size_values) -> tuple[int, ...]:
    """The leading array shape of a tensor type at the given sizes: ``[n][m]R -> (n, m)``."""
    shape = []
    while isinstance(t, TensorType):
        shape.append(_affine_value(t.size, size_values))
        t = t.elem
    return tuple(shape)


def _sizes_in(expr: Expr):
    """Every size (affine in size variables) that appears in expr's binders and types."""
    out = []

    def of_type(t):
        if isinstance(t, TensorType):
            out.append(t.size)
            of_type(t.elem)
        elif isinstance(t, PairType):
            of_type(t.first)
            of_type(t.second)
        elif isinstance(t, RelType):
            out.extend(t.sizes)

    for node in walk(expr):
        if isinstance(node, (Gen, Sum, Exists)):
            out.append(node.size)
        if isinstance(node, Expr):
            of_type(node.type)
    return out


# Values in [-2, 2] on a grid of 1e-4, spread evenly: Hypothesis's own floats favour 0.0 and other "simple"
# values, and an input of zeros hides most bugs.  The shrink target (0) maps to 1.0.
_FLOATS = st.integers(0, 40000).map(lambda k: ((k + 30000) % 40001) / 10000 - 2.0)


def values(t: Type, size_values, elements=None):
    """A strategy for a value of type ``t`` at the given sizes, in the evaluator's conventions: ``R`` a
    ``np.float64``, ``[s]...R`` a float64 array, a pair a tuple, ``rel[...]`` a boolean array, ``[p]index[n]`` an
    int64 array of ``p`` indices in ``[0, n)`` (the caller makes ``n`` positive where ``p`` is).  A tensor
    of pairs (never an input the generator makes) is a pair of tensors (struct of arrays)."""
    elements = _FLOATS if elements is None else elements
    if t is R:
        return elements.map(np.float64)
    if isinstance(t, IndexMapType):
        length, extent = (_affine_value(s, size_values) for s in t.sizes)
        return hnp.arrays(np.int64, (length,), elements=st.integers(0, max(extent - 1, 0)), fill=st.nothing())
    if isinstance(t, RelType):
        return hnp.arrays(np.bool_, tuple(_affine_value(s, size_values) for s in t.sizes), fill=st.nothing())
    if isinstance(t, PairType):
        return st.tuples(values(t.first, size_values, elements), values(t.second, size_values, elements))
    shape = type_shape(t, size_values)
    elem = t
    while isinstance(elem, TensorType):
        elem = elem.elem
    if elem is R:
        return hnp.arrays(np.float64, shape, elements=elements, fill=st.nothing())
    # [s](T0, T1) as ([s]T0, [s]T1)
    dims = []
    u = t
    while isinstance(u, TensorType):
        dims.append(u.size)
        u = u.elem
    return st.tuples(values(tensor(dims, u.first), size_values, elements),
                     values(tensor(dims, u.second), size_values, elements))


@st.composite
def inputs_for(draw, expr: Expr, size_values=None, max_size: int = 5, allow_zero: bool = True) -> dict:
    """Inputs for ``expr``: every free variable by name (see ``values``) and every size by name."""
    names = tuple(expr.sizes)
    if size_values is None:
        size_values = draw(sizes(names, max_size=max_size, allow_zero=allow_zero))
        # a size like n + m - 1 must not be negative: raise zero sizes to 1, in order, until none is
        needed = _sizes_in(expr)
        index_arrays = [t for t in expr.free_vars.values() if isinstance(t, IndexMapType)]
        for name in names:
            if all(_affine_value(a, size_values) >= 0 for a in needed) and all(
                    _affine_value(t.extent, size_values) > 0 or _affine_value(t.length, size_values) == 0
                    for t in index_arrays):  # an index array needs somewhere to point
                break
            if size_values[name] == 0:
                size_values[name] = 1
    else:
        size_values = dict(size_values)
    out = {}
    for name, t in expr.free_vars.items():
        out[name] = draw(values(t, size_values))
    for name in names:
        out[name] = size_values[name]
    return out


@st.composite
def program_and_inputs(
    draw,
    max_depth: int = 4,
    allow_pairs: bool = True,
    allow_relations: bool = True,
    allow_black_boxes: bool = True,
    allow_lets: bool = True,
    scalar_output: bool | None = None,
    black_boxes: tuple[str, ...] | None = None,
    *,
    max_size: int = 5,
    allow_zero: bool = True,
    exprs=None,
):
    """``(expr, inputs)``: a program of ``programs(...)`` (or of the strategy ``exprs``) and its inputs
    (``inputs_for``): arrays in [-2, 2], relations as boolean arrays, and the sizes by name."""
    if exprs is None:
        exprs = programs(max_depth, allow_pairs, allow_relations, allow_black_boxes, allow_lets, scalar_output,
                         black_boxes)
    expr = draw(exprs)
    return expr, draw(inputs_for(expr, max_size=max_size, allow_zero=allow_zero))


def collect(strategy, n: int) -> list:
    """``n`` deterministic draws of a Hypothesis strategy (derandomised, no database), for tests that run
    many cases at once (one batch compiled into one library, one report of every failure)."""
    cases: list = []

    @settings(max_examples=n, database=None, derandomize=True, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def run(case):
        cases.append(case)

    run()
    return cases


def examples_and_gradients() -> list:
    """``(label, program)`` for each program of ``examples/``, and for its gradient in each input where it
    has one (a real scalar value: not a relation's, not a non-scalar program's)."""
    out = []
    for path in sorted((Path(__file__).resolve().parent.parent / "examples").glob("*.tl")):
        e = tl.parse(path.read_text())
        out.append((path.stem, e))
        for name in e.free_vars:
            try:
                out.append((f"{path.stem} d/d{name}", tl.grad(e, name)))
            except tl.TensorLangError:
                continue
    return out
