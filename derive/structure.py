"""Derivatives that keep their structure: the supports of a program's tensors, and the three rules that use
them so that a probed Jacobian or Hessian costs the work of its nonzeros.

A Jacobian is a derivative probed with one-hot tensors ``gen(k) [k = j]`` at every input index ``j``
(``derive/api.jacobian``).  Simplified, its let-bound tensors carry the loops of every output and input
index, and a product of a tangent (nonzero near the probe only) with a primal value is computed at every
point of them: the Hessian of a tridiagonal energy costs ``n^3``.  The brackets of the program state where
each tensor can be nonzero (its *support*); these rules make the cost model, and the kernel, see it:

* ``T1 support bracket``: a read of a let-bound tensor, and a sum of two operands, is bracketed by where it
  can be nonzero, when the brackets and loops around it do not already imply that: ``X[a] -> [S_X(a)] *
  X[a]`` (``S_X``: the support of X's value, at the index read), ``a + b -> [S_a or S_b] * (a + b)``.  A
  bracket never raises the cost (4.33, 4.34), and where it fails the operand is zero, so the meaning is
  the same; S6 then hoists the bracket out of the products around it, and the product is computed only
  where the tangent can be nonzero.
* ``T2 unread loop``: a let-bound ``gen(v:s)`` whose body does not read ``v`` (a primal value that one-hot
  probing spread over the probe's loops, the same at every probe) is stored once:
  ``let X = gen(u, v, w) e -> let X = gen(u, w) [0 < s] * e``, and every read ``X[a, b, c] -> X[a, c]``.  It
  costs a factor ``s`` less, and the reads the same.  The bracket (dropped where it always holds, and where
  ``e`` reads no tensor) keeps ``e`` unevaluated where it was before, when ``s = 0``: a read in it may be out
  of range there (``gen(j:n) x[0]``).
* ``T3 compress``: a let-bound tensor whose support is a band of constant width around its other loops (a
  tangent nonzero at the probe and its neighbours: ``i = j - 1 or i = j``) is split into the disjoint
  pieces of its support, each stored over fewer points (``Piece``: ``i = j - 1 + t`` with ``t < 2``, the
  loop ``i`` gone), and every read becomes the sum of the pieces' bracketed reads.  Each piece computes its
  value where the tensor's bracket held, and the sum over disjoint pieces adds nothing (4.24 counts an
  addition only where both operands' brackets hold), so the cost does not rise; the storage drops from the
  loops' product to the nonzeros (and the band's edges).

The support of an expression (``support``) is a predicate over the loops around it that holds wherever the
expression can be nonzero: a bracket's predicate and its operand's support, the intersection of a
product's operands' supports, the union of a sum's, the projection of a summation's body's support, the
support of a let-bound tensor at the index read; anything else (an input, a function call) can be nonzero
anywhere.  It is an over-approximation, so a bracket made from it never changes the value.
"""
from __future__ import annotations

import functools
from typing import Sequence

import numpy as np

from tensorlang.errors import UnsupportedError
from tensorlang.nodes import (
    FALSE, TRUE, Access, Add, Affine, Const, Expr, Gen, Guard, Let, Max, Mul, Or, Pred, RelAtom, Sum, Var, box, build_lets, conj,
    disj, gens, guard, let_chain, nonempty, walk, strip_accesses, strip_gens,
)
from tensorlang.predicates import implies, project
from tensorlang.predicates import simplify as simplify_pred
from tensorlang.rules import Rule, RuleTable
from tensorlang.substitute import rebuild, substitute_index
from tensorlang.traversal import free_index_vars, free_vars


class Supports:
    """The supports of the let-bound tensors of one let chain: ``var -> (loop variables, predicate)``, for
    the tensors that are zero somewhere (a tensor that can be nonzero anywhere is not recorded)."""

    def __init__(self):
        self.of: dict[Var, tuple[tuple, Pred]] = {}

    def at(self, read: Expr) -> Pred:
        """The support of the read ``read`` (an access chain over a let-bound variable) at its index."""
        index, base = strip_accesses(read)
        known = self.of.get(base) if isinstance(base, Var) else None
        if known is None:
            return TRUE
        variables, pred = known
        if len(index) != len(variables):
            return TRUE   # a part of the tensor, not one element
        return substitute_index(pred, dict(zip(variables, index)))

    def learn(self, var: Var, loops: tuple, body: Expr) -> Pred:
        """The support of ``var``'s value ``gen(loops) body``, recorded where it is not everywhere."""
        s = support(body, loops, self)
        if s is not TRUE:
            self.of[var] = (tuple(v for v, _ in loops), s)
        return s


def _simplified(pred: Pred, dims: Sequence) -> Pred:
    if pred is TRUE or pred is FALSE:
        return pred
    try:
        return simplify_pred(pred, tuple(v for v, _ in dims), box(dims))
    except (UnsupportedError, ValueError):   # beyond isl's view (a relation without bounds): as it is
        return pred


def support(e: Expr, dims: Sequence, known: Supports) -> Pred:
    """A predicate over the loops ``dims`` (``(var, size)`` pairs) around ``e`` that holds wherever ``e``
    can be nonzero (see the module docstring).  A sum whose support reads a relation at its variable is
    not projected (``true``): such existentials grow at each rewrite."""
    return _support(e, dims, known, False)


def relation_support(e: Expr, dims: Sequence, known: Supports) -> Pred:
    """``support``, with a sum whose support reads a relation at its variable projected too
    (``project_relations``: an existential over the relation's data), as a sparse Jacobian's pattern needs."""
    return _support(e, dims, known, True)


def _support(e: Expr, dims: Sequence, known: Supports, relations: bool) -> Pred:
    """``support`` (``relation_support`` where ``relations``), by the form of ``e``."""
    if isinstance(e, Const):
        return FALSE if e.value == 0 else TRUE
    if isinstance(e, Guard):
        return _simplified(conj(e.pred, _support(e.body, dims, known, relations)), dims)
    if isinstance(e, Mul):
        left = _support(e.left, dims, known, relations)
        return FALSE if left is FALSE else _simplified(conj(left, _support(e.right, dims, known, relations)), dims)
    if isinstance(e, Add):
        left = _support(e.left, dims, known, relations)
        return TRUE if left is TRUE else _simplified(disj(left, _support(e.right, dims, known, relations)), dims)
    if isinstance(e, Sum):
        inner = tuple(dims) + ((e.var, e.size),)
        body = _support(e.body, inner, known, relations)
        if body is TRUE or body is FALSE:
            return body
        if _reads_a_relation_at(body, e.var):   # where the data of a relation allows: not projected
            if not relations:
                return TRUE
            try:
                return _simplified(project_relations(conj(body, box(((e.var, e.size),))), e.var,
                                                     tuple(v for v, _ in inner)), dims)
            except UnsupportedError:
                return TRUE
        try:
            return _simplified(project(conj(body, box(((e.var, e.size),))), e.var, tuple(v for v, _ in inner)),
                               dims)
        except UnsupportedError:
            return TRUE
    if isinstance(e, Access):
        return _simplified(known.at(e), dims)
    return TRUE   # an input, a call, a tensor built here (a gen): anywhere


def project_relations(pred: Pred, var, dims: tuple) -> Pred:
    """``exists var. pred`` for a ``pred`` that reads a relation at ``var``: in each of its disjuncts (each
    basic set of each affine part, with its relation literals), where one value of ``var`` at most satisfies
    it, that value put for ``var`` (``predicates.solve_unique``: ``i1 = j0 and E(i0, i1)`` is ``E(i0, j0)``);
    elsewhere projected as ``predicates.project`` does, an existential over the relation's data where its
    literals read ``var``."""
    from tensorlang.isl_sets import pairs, to_isl
    from tensorlang.predicates import from_isl, solve_unique
    import islpy as isl

    out = []
    for affine, literals in pairs(pred):
        for bs in to_isl(affine, dims).get_basic_sets():
            part = conj(from_isl(isl.Set.from_basic_set(bs), dims), *literals)
            solved = solve_unique(part, var, dims)
            out.append(project(part, var, dims) if solved is None else disj(*(guard for guard, _ in solved)))
    return disj(*out)


def _reads_a_relation_at(p: Pred, var) -> bool:
    """Whether a relation atom of ``p`` is indexed by ``var``: its projection over ``var`` would be an
    existential over the relation's data, which no loop bound can use and which grows at each rewrite."""
    return any(isinstance(a, RelAtom) and any(arg.coeff(var) for arg in a.args) for a in walk(p))


# T1 -----------------------------------------------------------------------------------------------


def _bracketed(e: Expr, dims: tuple, context: Pred, known: Supports) -> Expr:
    """``e`` with its reads of let-bound tensors and its sums bracketed by their supports where the loops
    ``dims`` and the brackets ``context`` around them do not imply it (T1)."""
    if isinstance(e, Access):
        s = known.at(e)
        return e if s is TRUE or _implied(context, s, dims) else Guard(s, e)
    if isinstance(e, Guard):
        return guard(e.pred, _bracketed(e.body, dims, conj(context, e.pred), known))
    if isinstance(e, Add):
        out = Add(_bracketed(e.left, dims, context, known), _bracketed(e.right, dims, context, known))
        s = support(out, dims, known)
        return out if s is TRUE or _implied(context, s, dims) else Guard(s, out)
    if isinstance(e, (Sum, Gen, Max)):
        inner = dims + ((e.var, e.size),)
        return type(e)(e.var, e.size, _bracketed(e.body, inner, context, known))
    return rebuild(e, lambda c: _bracketed(c, dims, context, known) if isinstance(c, Expr) else c)


def _implied(context: Pred, s: Pred, dims) -> bool:
    try:
        return implies(conj(box(dims), context), s, tuple(v for v, _ in dims))
    except (UnsupportedError, ValueError):   # beyond isl's view: no bracket
        return True


def _support_brackets(e: Expr, trace=None) -> Expr:
    bindings, out = let_chain(e)
    known = Supports()
    kept = []
    for var, value in bindings:
        loops, body = strip_gens(value)
        new_body = _bracketed(body, tuple(loops), TRUE, known)
        known.learn(var, tuple(loops), new_body)
        kept.append((var, value if new_body is body else gens(loops, new_body)))
    loops, body = strip_gens(out)
    new_out = _bracketed(body, tuple(loops), TRUE, known)
    result = build_lets(kept, out if new_out is body else gens(loops, new_out))
    if trace is not None and result != e:
        trace.append((SUPPORT_BRACKET.name, e, result))
    return result


# T2 -----------------------------------------------------------------------------------------------


def _drop_unread_loops(e: Expr, trace=None) -> Expr:
    bindings, out = let_chain(e)
    slots = [value for _, value in bindings] + [out]
    for j, (var, _) in enumerate(bindings):
        loops, body = strip_gens(slots[j])
        read = free_index_vars(body)
        keep = [k for k, (v, _) in enumerate(loops) if v in read]
        if len(keep) == len(loops) or not _all_full_reads(slots[j + 1:], var, len(loops)):
            continue
        kept = [loops[k] for k in keep]
        if any(isinstance(n, Access) for n in walk(body)):  # a read there may be out of range
            body = guard(simplify_pred(nonempty(s for k, (_, s) in enumerate(loops) if k not in keep),
                                       [v for v, _ in kept]), body)
        slots[j] = gens(kept, body)
        new_var = Var(var.name, slots[j].type)
        for s in range(j + 1, len(slots)):
            slots[s] = _replace_reads(slots[s], var, lambda index, new_var=new_var, keep=keep:
                                      _read(new_var, [index[k] for k in keep]))
        bindings[j] = (new_var, slots[j])
    result = build_lets([(var, slots[s]) for s, (var, _) in enumerate(bindings)], slots[-1])
    if trace is not None and result is not e:
        trace.append((UNREAD_LOOP.name, e, result))
    return result


def _all_full_reads(slots, var: Var, rank: int) -> bool:
    return all(_full_reads(s, var, rank) for s in slots)


def _full_reads(e, var: Var, rank: int) -> bool:
    """Whether every read of ``var`` in ``e`` gives all ``rank`` indices."""
    if not isinstance(e, Expr) or var not in free_vars(e):
        return True
    if isinstance(e, Access) or e is var:
        index, base = strip_accesses(e)
        if base is var:
            return len(index) == rank
    return all(_full_reads(c, var, rank) for c in _children(e))


def _children(e: Expr):
    for c in e.children:
        yield from (c if isinstance(c, tuple) else (c,))


def _replace_reads(e, var: Var, element):
    """``e`` with every read of the element ``index`` of ``var`` (an access chain over it) replaced by
    ``element(index)``."""
    if not isinstance(e, Expr) or var not in free_vars(e):
        return e
    if isinstance(e, Access):
        index, base = strip_accesses(e)
        if base is var:
            return element(index)
    return rebuild(e, lambda c: _replace_reads(c, var, element))


def _read(tensor: Expr, index: Sequence) -> Expr:
    """``tensor[index[0]]...[index[-1]]``."""
    for a in index:
        tensor = Access(tensor, a)
    return tensor


# T3 -----------------------------------------------------------------------------------------------

MAX_WIDTH = 16   # the widest band stored as offsets rather than as a whole loop


class Piece:
    """One disjoint part of a tensor's support, stored compactly: ``pred`` (over the tensor's loop variables)
    is the part; ``loops`` the loops of its storage (the loops it keeps, then an offset ``t:w`` for each
    loop it stores as a band ``v = lo + t``); ``at`` each original loop variable as an affine form of the
    storage's loops (for the value); ``index(a)`` the storage index of the tensor's element ``a``."""

    def __init__(self, pred: Pred, loops: tuple, at: dict, offsets: dict):
        self.pred, self.loops, self.at, self.offsets = pred, loops, at, offsets

    def index(self, variables: tuple, a: Sequence) -> list:
        subst = dict(zip(variables, a))
        out = []
        for v, _ in self.loops:
            if v in self.offsets:
                d, lo = self.offsets[v]
                out.append(subst[d] - lo.substitute(subst))
            else:
                out.append(subst[v])
        return out

    def in_storage_order(self, variables: tuple) -> Piece:
        """This piece with its loops ordered for the tensor's storage: each by the innermost of the tensor's
        loops (``variables``) whose value it takes part in, so that a loop that stands for an inner index
        of the tensor (and of what it reads at that index, row by row) stays inner."""
        def depth(loop) -> int:
            v, _ = loop
            return max((k for k, d in enumerate(variables) if self.at[d].coeff(v) != 0), default=-1)

        return Piece(self.pred, tuple(sorted(self.loops, key=depth)), self.at, self.offsets)

    def value(self, body: Expr) -> Expr:
        """The piece's storage of the tensor ``gen(variables) body``: ``body`` where the piece holds, over
        the piece's loops."""
        return gens(self.loops, substitute_index(guard(self.pred, body), self.at))


def _constraints(bs, dims: tuple) -> list[tuple[Affine, bool]] | None:
    """The constraints of an isl basic set over ``dims`` as ``(affine, is_equality)`` (``affine >= 0`` or
    ``= 0``); None when it has integer divisions."""
    from tensorlang.isl_sets import val_int
    from tensorlang.nodes import SizeVar
    import islpy as isl

    if bs.dim(isl.dim_type.div):
        return None
    params = [bs.get_dim_name(isl.dim_type.param, k) for k in range(bs.dim(isl.dim_type.param))]
    out = []
    for c in bs.get_constraints():
        terms = [(d, val_int(c.get_coefficient_val(isl.dim_type.set, k))) for k, d in enumerate(dims)]
        terms += [(SizeVar(p), val_int(c.get_coefficient_val(isl.dim_type.param, k))) for k, p in enumerate(params)]
        out.append((Affine.of(terms, val_int(c.get_constant_val())), c.is_equality()))
    return out


def _band(pred: Pred, d, rest: tuple, loops: tuple) -> tuple[Affine, int] | None:
    """A lower bound ``lo`` of ``d`` affine in ``rest`` (and the sizes) with ``lo <= d < lo + w`` on ``pred``
    for the least constant ``w <= MAX_WIDTH`` among the lower bounds ``pred`` states, or None."""
    from tensorlang.isl_sets import to_isl
    from tensorlang.nodes import IndexVar, compare

    dims = (d, *rest)
    try:
        s = to_isl(pred, dims)
    except (UnsupportedError, ValueError):
        return None
    best = None
    for bs in s.get_basic_sets():
        cons = _constraints(bs, dims)
        if cons is None:
            return None
        for affine, equality in cons:
            c = affine.coeff(d)
            if abs(c) != 1 or (c == -1 and not equality):
                continue
            lo = (affine - Affine.var(d) * c) * (-c)   # d = lo (equality) or d >= lo
            t = IndexVar("t")
            shifted = substitute_index(pred, {d: lo + Affine.var(t)})
            for w in range(1, MAX_WIDTH + 1):
                if best is not None and w >= best[1]:
                    break
                if implies(conj(box(loops), shifted), compare("<", t, w), (t, *rest)):
                    best = (lo, w)
                    break
    return best


def pieces(pred: Pred, loops: tuple) -> list[Piece] | None:
    """The support ``pred`` of a tensor with loops ``loops`` as disjoint pieces, each stored over fewer
    points where a loop is a band of constant width in the others (innermost loops first); None when no
    piece stores fewer loops than the tensor.  Two splittings are tried, the pieces of the support as isl
    coalesces it (a tridiagonal band is one piece) and those of its disjuncts as written (a stencil's arms,
    whose hull is no band): the one that stores fewer points, then the one with fewer pieces."""
    from tensorlang.isl_sets import is_exact, over_approximation, to_isl

    variables = tuple(v for v, _ in loops)
    affine = pred if is_exact(pred) else over_approximation(pred)
    try:
        disjuncts = [to_isl(conj(d, box(loops)), variables)
                     for d in (affine.parts if isinstance(affine, Or) else (affine,))]
    except (UnsupportedError, ValueError):
        return None
    union = functools.reduce(lambda a, b: a.union(b), disjuncts)
    candidates = [c for c in (_split(union.coalesce(), loops), _split(union, loops)) if c is not None]
    if not candidates:
        return None
    return min(candidates, key=lambda c: (_stored(c), len(c)))


def _stored(parts: list[Piece], size: int = 1000) -> int:
    """The points the pieces store with every size variable at ``size``."""
    from tensorlang.nodes import SizeVar

    def extent(a: Affine) -> int:
        return a.evaluate({v: size for v in a.variables if isinstance(v, SizeVar)})

    return sum(int(np.prod([extent(s) for _, s in p.loops], dtype=object)) for p in parts)


def _split(s, loops: tuple) -> list[Piece] | None:
    """``pieces`` of the isl set ``s`` made disjoint (None where no piece is smaller than the tensor)."""
    from tensorlang.nodes import IndexVar
    from tensorlang.predicates import from_isl
    import islpy as isl

    variables = tuple(v for v, _ in loops)
    out, smaller = [], False
    for bs in s.make_disjoint().get_basic_sets():
        part = from_isl(isl.Set.from_basic_set(bs), variables)
        current = part
        kept = list(loops)
        at = {v: Affine.var(v) for v in variables}
        offsets = {}
        for k in reversed(range(len(loops))):
            d, _ = loops[k]
            rest = tuple((v, s_) for v, s_ in kept if v is not d)
            band = _band(current, d, tuple(v for v, _ in rest), rest)
            if band is None:
                continue
            lo, w = band
            size = dict(loops)[d]
            if any(v in offsets for v in lo.index_vars) or (w > 1 and size.is_const and size.const <= w):
                continue
            t = IndexVar("t")
            value = lo + Affine.var(t) if w > 1 else lo
            current = substitute_index(current, {d: value})
            at = {v: a.substitute({d: value}) for v, a in at.items()}
            kept = [(t, Affine.const_(w)) if v is d else (v, s_) for v, s_ in kept] if w > 1 else rest
            if w > 1:
                offsets[t] = (d, lo)
            smaller = True
        out.append(Piece(part, tuple(kept), at, offsets))
    return out if smaller else None


def _compress(e: Expr, trace=None) -> Expr:
    bindings, out = let_chain(e)
    slots = [value for _, value in bindings] + [out]
    known = Supports()
    new_bindings = []
    for j, (var, _) in enumerate(bindings):
        loops, body = strip_gens(slots[j])
        loops = tuple(loops)
        s = known.learn(var, loops, body) if loops else TRUE
        parts = None if s is TRUE or s is FALSE else pieces(s, loops)
        if parts is None or not _all_full_reads(slots[j + 1:], var, len(loops)):
            new_bindings.append((var, slots[j]))
            continue
        variables = tuple(v for v, _ in loops)
        made = []
        for k, piece in enumerate(parts):
            piece = piece.in_storage_order(variables)
            value = piece.value(body)
            part_var = Var(f"{var.name}_{k}", value.type)
            made.append((part_var, piece))
            new_bindings.append((part_var, value))

        def read_pieces(index, made=made, variables=variables):
            """The element ``index`` of the tensor: the sum of its pieces' bracketed reads."""
            terms = [guard(substitute_index(piece.pred, dict(zip(variables, index))),
                           _read(part_var, piece.index(variables, index))) for part_var, piece in made]
            return functools.reduce(Add, terms)
        for s_ in range(j + 1, len(slots)):
            slots[s_] = _replace_reads(slots[s_], var, read_pieces)
    result = build_lets(new_bindings, slots[-1])
    if trace is not None and result is not e:
        trace.append((COMPRESS.name, e, result))
    return result


SUPPORT_BRACKET = Rule("T1 support bracket", _support_brackets, (Let,), "reads and sums bracketed by their "
                       "supports (see the module docstring); on the let chain", root=True)
UNREAD_LOOP = Rule("T2 unread loop", _drop_unread_loops, (Let,), "a let-bound gen's loop that its body does not "
                   "read is dropped, and the index of every read of it", root=True)
COMPRESS = Rule("T3 compress", _compress, (Let,), "a let-bound tensor whose support "
                "has loops of constant width stored as pieces over fewer loops (see Piece)", root=True)
STRUCTURE = RuleTable("structure", [SUPPORT_BRACKET, UNREAD_LOOP, COMPRESS],
                      doc="the rules that keep a probed derivative's structure, none raising the cost")


def keep_structure(expr: Expr, trace: list | None = None) -> Expr:
    """T2, then T1 and the simplification rules, to a fixed point: a probed derivative whose tensors have
    no loops they do not read and whose work is bracketed by where it can be nonzero."""
    from .simplify import simplify_program

    while True:
        new = simplify_program(SUPPORT_BRACKET.fn(UNREAD_LOOP.fn(expr, trace), trace), trace)
        new = simplify_program(COMPRESS.fn(new, trace), trace)
        if new is expr or new == expr:
            return new
        expr = new
