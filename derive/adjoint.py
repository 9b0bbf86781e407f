"""The adjoint derivative by inner-product rewriting: Fig. 14-16, rules 6.14-6.29, on Tensor SSA.

The adjoint of a Tensor SSA program ``let X0 = E0 in ... in OUT`` for the inputs ``wrt`` is found by
rewriting ``<dy | D[program]>`` until every inner product has a differential of an input on its right.
The state of that rewriting is kept as data:

* ``pending[X]``: the inner products ``<e | dX>_[p]`` waiting for the statement of X, as
  ``Contribution``s (e is a generator over X's index space, p a predicate over it);
* ``adjoint``: the ``let``s made so far (the differentials dX, in the order they are made);
* ``gradient[x]``: the inner products that have reached an input.

6.14-6.16 start it: every statement gets its differential and the output's inner product splits over
its pairs.  Then the statements are visited from last to first (6.19, the reversal); a statement whose
differential no inner product mentions is dropped (6.20, 6.22), otherwise its inner products are
joined into one let (6.25) and the rule of its SSA form (6.21, 6.26-6.29) replaces
``<dX | D[E]>`` by inner products against the differentials of E's operands.  Finally the inner
products on each input are joined (6.17, 6.18) into the gradient.

The program's statements are the classes of ``normalize/statements.py``, one per SSA form.  The rules
are the named ``Rule``s of the table ``ADJOINT`` (in the order of the proofs' rows; ``proofs/`` reads the
table); a rule that transposes a form names the form's class (its ``kinds``), and ``TRANSPOSITIONS``, the
sub-table of those rules, finds a statement's rule by its class (``RuleTable.rules_for``, through the
MRO).  A new SSA form needs its class and its case of ``classify`` in ``normalize/statements.py``, one
rule here for the class (in ``ADJOINT``) and its check in ``proofs/derive_checks.py``.

Two things keep this cheap, as the paper requires.  Only *active* statements (those that depend on
``wrt``) are visited, so nothing is ever multiplied by a zero differential.  And the index equalities of
a contraction are solved, not enumerated: in 6.28 the generator over X0's indices takes the place of the
summed variables they equal, and sums left with one point are removed by the predicate module.
With ``check=sizes``, every rule application is verified not to raise the extended cost of Fig. 17.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from tensorlang.cost import cost, type_size
from tensorlang.errors import TensorLangError, UnsupportedError
from tensorlang.functions import vjp
from tensorlang.nodes import (
    TRUE, Add, Affine, Call, Exists, Expr, Guard, IndexVar, Let, Mul, Pair, PairType, Pred, Proj, Type, Var, box,
    compare, conj, disj, gens, guard, let_chain, strip_accesses, sums, tensor_dims, zero,
)
from tensorlang.normalize.statements import (
    Addition, BinaryContraction, Input, Map, MaxReduction, Operand, Statement, UnaryContraction, read, statements,
)
from tensorlang.predicates import simplify
from tensorlang.rules import Rule, RuleTable
from tensorlang.substitute import fresh_name, substitute_index, used_names
from tensorlang.traversal import free_vars

from .simplify import solve_sums


# ------------------------------------------------------------------------------------------------
# inner products


@dataclass(frozen=True)
class Contribution:
    """``<gen(dims) body | dX>_[pred]``: ``body`` and ``pred`` range over ``dims``, X's index space."""

    dims: tuple
    body: Expr
    pred: Pred
    rule: str

    def rename(self, new_dims) -> "Contribution":
        """The same contribution over ``new_dims``.  The old extents stay as a bracket: a statement over
        ``i0 < m`` may read ``X[i0]`` of an ``X`` with ``n`` elements, and contributes nothing at
        ``m <= t0 < n`` (the bracket is dropped by ``simplify`` where the new extents imply it)."""
        mapping = {old: Affine.var(new) for (old, _), (new, _) in zip(self.dims, new_dims)}
        extents = box((new, size) for (_, size), (new, _) in zip(self.dims, new_dims))
        return Contribution(tuple(new_dims), substitute_index(self.body, mapping),
                            conj(extents, substitute_index(self.pred, mapping)), self.rule)


def _index_space(t: Type, name: str = "t"):
    sizes, _ = tensor_dims(t)
    return tuple((IndexVar(f"{name}{k}"), s) for k, s in enumerate(sizes))


@dataclass
class AdjointState:
    """The term being rewritten (see the module docstring)."""

    statements: list[Statement]
    active: set = field(default_factory=set)  # ids of active SSA variables
    pending: dict = field(default_factory=dict)  # id(X) -> [Contribution]
    adjoint: list = field(default_factory=list)  # [(dX, value)]
    gradient: dict = field(default_factory=dict)  # (input, path) -> [Contribution]


class Adjoint:
    """One application of D^T to a Tensor SSA program, for the inputs ``wrt`` and cotangent ``dy``."""

    def __init__(self, program: Expr, wrt: Sequence[Var], dy: Expr, check: Mapping[str, int] | None = None,
                 on_step=None, with_value: bool = False):
        """``on_step``: optional ``callback(rule, adjoint, excess)`` called after every rule application
        (after the checked mode's check), with the state as it is then (``proofs/specs_derive.py``).
        ``with_value``: the result is the pair of the program's output and the gradients, the statements
        of the one computing the other (a kernel's value and gradient in one call)."""
        self.on_step, self.with_value = on_step, with_value
        self.program, self.wrt, self.dy = program, tuple(wrt), dy
        program_statements = statements(program)
        if any(isinstance(s, Input) and s.dims for s in program_statements):
            raise UnsupportedError("the adjoint of a tensor of pairs as an input is not supported")
        _, self.output = let_chain(program)
        self.state = AdjointState(program_statements)
        self.by_var = {id(s.var): s for s in program_statements}
        self.names = used_names([program, dy])  # grows with each differential made
        self.visited: set = set()  # ids of the statements transposed so far
        self.current = None  # (statement, predicate): the inner product <dX | D[E]>_[p] being transposed
        self.checker = None if check is None else ExtendedCost(self, dict(check))

    # the driver ----------------------------------------------------------------------------------

    def run(self) -> Expr:
        self._activity()
        START.fn(self)
        for stmt in reversed(self.state.statements):  # 6.19: last statement first
            contributions = self.state.pending.pop(id(stmt.var), [])
            if not contributions or id(stmt.var) not in self.state.active:
                UNUSED.fn(self, stmt)
                continue
            JOIN.fn(self, stmt, contributions)
        return GRADIENT.fn(self)

    def _activity(self) -> None:
        wrt = {id(v) for v in self.wrt}
        for s in self.state.statements:
            if isinstance(s, Input):
                live = id(s.base) in wrt
            else:
                live = any(id(o.var) in self.state.active for o in s.operands)
            if live:
                self.state.active.add(id(s.var))

    def _start(self) -> None:
        """6.14-6.16: <dy | D[OUT]> split over the output's pairs, one inner product per leaf."""
        # the leaves first to last, each cotangent projected when its leaf is reached (a loop: a recursive
        # closure over self would make the whole adjoint a reference cycle)
        stack = [(self.output, self.dy, None)]
        while stack:
            out, cot, k = stack.pop()
            cot = cot if k is None else _project(cot, k)
            if isinstance(out, Pair):
                stack += [(out.second, cot, 1), (out.first, cot, 0)]
            elif isinstance(out, Var) and id(out) in self.by_var:
                dims = _index_space(out.type)
                body = read(cot, [v for v, _ in dims])
                self.contribute(out, Contribution(dims, body, TRUE, "6.16 output"))
            else:
                raise UnsupportedError(f"the output of a Tensor SSA program must be variables, not {out!r}")

    def contribute(self, x: Var, c: Contribution) -> None:
        """Add an inner product on dX; on an inactive X (a constant, 6.23, or a variable that does not
        depend on wrt, 6.22) the differential is zero and so is the inner product."""
        if id(x) in self.state.active:
            self.state.pending.setdefault(id(x), []).append(c)

    # 6.25: join the inner products on one differential ------------------------------------------

    def join(self, x: Var, contributions: list[Contribution]):
        dims = _index_space(x.type)
        parts = [c.rename(dims) for c in contributions]
        variables = tuple(v for v, _ in dims)
        bounds = box(dims)
        parts = [Contribution(c.dims, c.body, simplify(c.pred, variables, bounds), c.rule) for c in parts]
        if len(parts) == 1 and parts[0].pred is TRUE and _is_read(parts[0].body, variables):
            return strip_accesses(parts[0].body)[1], TRUE, dims  # the differential is an existing variable (fix-up 1)
        acc, acc_pred = guard(parts[0].pred, parts[0].body), parts[0].pred
        for c in parts[1:]:
            left = acc if isinstance(acc, Guard) or acc_pred is TRUE else Guard(acc_pred, acc)
            acc, acc_pred = Add(left, guard(c.pred, c.body)), disj(acc_pred, c.pred)
        acc_pred = simplify(acc_pred, variables, bounds)
        dx = Var(fresh_name("d" + x.name, self.names), x.type)
        self.names.add(dx.name)
        self.state.adjoint.append((dx, gens(dims, acc)))
        return dx, acc_pred, dims

    # the rules of the SSA forms ------------------------------------------------------------------

    def transpose(self, stmt: Statement, dx: Var, pred: Pred, dims) -> None:
        """Replace <dx | D[E]>_[pred] (``pred`` over ``dims``, X's index space) by inner products on the
        differentials of E's operands: the rule of ``TRANSPOSITIONS`` for E's SSA form."""
        transposition(stmt).fn(self, stmt, dx, pred, dims)

    def at_statement(self, stmt: Statement, dx: Var, pred: Pred, dims):
        """``(pred, cot)``: the predicate over the statement's own generator variables, and a function
        making the cotangent ``dX[g]`` there."""
        pred = substitute_index(pred, {t: Affine.var(v) for (t, _), (v, _) in zip(dims, stmt.dims)})
        variables = tuple(v for v, _ in stmt.dims)
        return pred, lambda: read(dx, variables)

    def _contraction(self, stmt: Statement, o: Operand, others, dx: Var, pred: Pred, rule: str):
        """dX_k[t] = sum(g, s) [p and pred(g) and t = idx_k] * dY[g] * X_other[idx_other], with the
        equalities t = idx_k solved by substitution instead of summed over."""
        dims = _index_space(o.var.type)
        loops = stmt.dims + stmt.summed
        size_of = {id(v): s for v, s in loops}
        mapping: dict = {}
        eqs = []
        for (t, _), v in zip(dims, o.idx):
            if v in mapping:
                eqs.append(compare("=", t, mapping[v]))
            else:
                mapping[v] = Affine.var(t)
        left = tuple((v, s) for v, s in loops if v not in mapping)
        bounds = box((a.terms[0][0], size_of[id(v)]) for v, a in mapping.items())
        where = conj(substitute_index(conj(stmt.pred, pred, *eqs), mapping), bounds)
        factors = [read(dx, [mapping.get(v, Affine.var(v)) for v, _ in stmt.dims])]
        factors += [f.read(mapping) for f in others]
        body = factors[0] if len(factors) == 1 else Mul(factors[0], factors[1])
        variables = tuple(t for t, _ in dims)
        reach = simplify(_exists(left, conj(where, box(left))), variables)
        summed = solve_sums(left, where, body, dims)
        return Contribution(dims, summed, reach, rule)

    # 6.17, 6.18: the gradient ---------------------------------------------------------------------

    def finish(self) -> Expr:
        outputs = [self._gradient_of(w, w.type, ()) for w in self.wrt]
        out = outputs[-1]
        for g in reversed(outputs[:-1]):
            out = Pair(g, out)
        if self.with_value:
            out = Pair(self.output, out)
        return _let_chain_build(self.state.statements, self.state.adjoint, out)

    def _gradient_of(self, w: Var, t: Type, path: tuple) -> Expr:
        if isinstance(t, PairType):
            # a whole pair reached the input (an output that is an input of pair type): split it (6.17)
            for c in self.state.gradient.pop((id(w), path), []):
                for k, component in enumerate((t.first, t.second)):
                    dims = _index_space(component)
                    body = read(_project(c.body, k), [v for v, _ in dims])
                    part = Contribution(dims, body, c.pred, c.rule)
                    self.state.gradient.setdefault((id(w), path + (k,)), []).append(part)
            return Pair(self._gradient_of(w, t.first, path + (0,)), self._gradient_of(w, t.second, path + (1,)))
        contributions = self.state.gradient.get((id(w), path), [])
        if not contributions:
            return zero(t)
        dims = _index_space(t, "k")
        parts = [c.rename(dims) for c in contributions]
        variables = tuple(v for v, _ in dims)
        bounds = box(dims)
        acc, acc_pred = None, None
        for c in parts:
            p = simplify(c.pred, variables, bounds)
            term = guard(p, c.body)
            if acc is None:
                acc, acc_pred = term, p
            else:
                left = acc if isinstance(acc, Guard) or acc_pred is TRUE else Guard(acc_pred, acc)
                acc, acc_pred = Add(left, term), disj(acc_pred, p)
        return gens(dims, acc)

    def _applied(self, rule: Rule, excess=None) -> None:
        if self.current is not None and rule in TRANSPOSITIONS.rules:
            self.visited.add(id(self.current[0].var))
            self.current = None
        if self.checker is not None:
            self.checker.step(rule.name, excess)
        if self.on_step is not None:
            self.on_step(rule.name, self, excess)


# ------------------------------------------------------------------------------------------------
# the rules (Fig. 14-16): the table ``ADJOINT``, in the order of the proofs' rows


def _adjoint_rule(name: str, *equations: str, form: type[Statement] | None = None):
    """Decorator: an adjoint rule as a named ``Rule`` (its function gets the ``Adjoint`` and the rule's
    operands; its docstring is the rule).  A transposition rule names the statement class it transposes
    (``form``, the rule's ``kinds``)."""
    def wrap(fn):
        return Rule(name, fn, () if form is None else (form,), (fn.__doc__ or "").strip(), equations=equations)

    return wrap


@_adjoint_rule("6.14-6.16 start", "6.14", "6.15", "6.16")
def start(adj: Adjoint) -> None:
    """<dy | D[OUT]>: every statement gets its differential, and the output's inner product splits over
    its pairs, one inner product per leaf."""
    adj._start()
    adj._applied(START)


@_adjoint_rule("6.25 join", "6.19", "6.25")
def join(adj: Adjoint, stmt: Statement, contributions) -> None:
    """The statements are visited last to first (6.19); the inner products on dX join into one let
    ``dX = gen(t) [p1] * e1 + [p2] * e2 ...`` (6.25), and the rule of X's SSA form transposes
    ``<dX | D[E]>``."""
    dx, pred, dims = adj.join(stmt.var, contributions)
    adj.current = (stmt, dims, pred)
    adj._applied(JOIN)
    adj.transpose(stmt, dx, pred, dims)


@_adjoint_rule("6.20 unused differential", "6.20", "6.24")
def unused(adj: Adjoint, stmt: Statement) -> None:
    """A statement whose differential no inner product mentions (or that does not depend on wrt) is
    dropped."""
    adj.visited.add(id(stmt.var))
    adj._applied(UNUSED)


@_adjoint_rule("6.21 input", form=Input)
def input_(adj: Adjoint, stmt: Statement, dx: Var, pred: Pred, dims) -> None:
    """<dX | D[x]>_[p] with x an input differentiated: an inner product on the gradient of x."""
    if any(stmt.base is w for w in adj.wrt):
        c = Contribution(dims, read(dx, [v for v, _ in dims]), pred, INPUT.name)
        adj.state.gradient.setdefault((id(stmt.base), stmt.path), []).append(c)
    adj._applied(INPUT)


# 6.22 and 6.23 are applied where an inner product is made: on an inactive variable or a constant it
# is the zero, and ``Adjoint.contribute`` never builds it
INACTIVE = Rule("6.22 inactive operand", Adjoint.contribute, doc="<e | dY> = 0 for Y that does not depend on wrt")
CONSTANT = Rule("6.23 constant", Adjoint.contribute, doc="<e | dC> = 0 for a constant C")


@_adjoint_rule("6.26 addition", form=Addition)
def addition(adj: Adjoint, stmt: Statement, dx: Var, pred: Pred, dims) -> None:
    """<dX | D[[p1] Y1[g] + [p2] Y2[g]]>_[p] = <dX | dY1>_[p and p1] + <dX | dY2>_[p and p2]."""
    pred, cot = adj.at_statement(stmt, dx, pred, dims)
    for p, o in zip(stmt.term_preds, stmt.operands):
        adj.contribute(o.var, Contribution(stmt.dims, cot(), conj(p, pred), ADDITION.name))
    adj._applied(ADDITION)


@_adjoint_rule("6.27 map", form=Map)
def map_(adj: Adjoint, stmt: Statement, dx: Var, pred: Pred, dims) -> None:
    """<dX | D[[q] f(Y1[g], ...)]>_[p] = sum_k <f_k(Y[g]...) * dX[g] | dYk>_[p and q] (``functions.vjp``)."""
    pred, cot = adj.at_statement(stmt, dx, pred, dims)
    args = [o.read() for o in stmt.operands]
    live = [k for k, o in enumerate(stmt.operands) if id(o.var) in adj.state.active]
    for k in live:
        body = vjp(stmt.fn, k, args, cot())
        adj.contribute(stmt.operands[k].var, Contribution(stmt.dims, body, conj(stmt.pred, pred), MAP.name))
    # The paper's D^T f(X, dY) is one black box with a tuple value; ours are scalar-valued, so
    # j > 1 live arguments cost j black boxes and j inner products where the forward had one.
    excess = (2 * len(live) - 2, stmt.dims, conj(stmt.pred, pred)) if len(live) > 1 else None
    adj._applied(MAP, excess)


def _contraction_rule(rule: Rule, adj: Adjoint, stmt: Statement, dx: Var, pred: Pred, dims) -> None:
    pred, _ = adj.at_statement(stmt, dx, pred, dims)
    for k, o in enumerate(stmt.operands):
        if id(o.var) in adj.state.active:
            others = [f for j, f in enumerate(stmt.operands) if j != k]
            adj.contribute(o.var, adj._contraction(stmt, o, others, dx, pred, rule.name))
    adj._applied(rule)


@_adjoint_rule("6.28 binary contraction", form=BinaryContraction)
def binary_contraction(adj: Adjoint, stmt: Statement, dx: Var, pred: Pred, dims) -> None:
    """<dX | D[sum(s) [q] Y1[a] * Y2[b]]>_[p]: on dY1, ``dY1[t] = sum [q and p and t = a] dX[g] * Y2[b]``
    with the equalities solved (and the same on dY2)."""
    _contraction_rule(BINARY, adj, stmt, dx, pred, dims)


@_adjoint_rule("6.29 unary contraction", form=UnaryContraction)
def unary_contraction(adj: Adjoint, stmt: Statement, dx: Var, pred: Pred, dims) -> None:
    """<dX | D[sum(s) [q] Y[a]]>_[p]: ``dY[t] = sum [q and p and t = a] dX[g]``, the equalities solved."""
    _contraction_rule(UNARY, adj, stmt, dx, pred, dims)


@_adjoint_rule("M4 max", form=MaxReduction)
def maximum(adj: Adjoint, stmt: Statement, dx: Var, pred: Pred, dims) -> None:
    """<dX | D[[q] * max(r) Y[g, r]]>_[p] = <equal(Y[g, r], X[g]) * W[g] | dY>_[p and q] with
    ``W = gen(g) [p and q and 0 < |r|] * dX[g] * recip(sum(r) equal(Y[g, r], X[g]))``: the cotangent split
    equally among the maximising entries (the transpose of M3, the mean of their tangents).  W costs
    about 2 units per point of the range and the inner product 2 more, where the forward derivative of the
    statement costs about 6."""
    pred, cot = adj.at_statement(stmt, dx, pred, dims)
    (operand,) = stmt.operands
    g = tuple(v for v, _ in stmt.dims)
    hit = Call("equal", (operand.read(), read(stmt.var, g)))
    nonempty = conj(*(compare("<", 0, size) for _, size in stmt.reduced))
    per_maximiser = Call("recip", (sums(stmt.reduced, hit),))   # 1 / the number of maximising entries
    share = gens(stmt.dims, guard(conj(stmt.pred, pred, nonempty), Mul(cot(), per_maximiser)))
    w = Var(fresh_name("w" + stmt.var.name, adj.names), share.type)
    adj.names.add(w.name)
    adj.state.adjoint.append((w, share))
    adj.contribute(operand.var, Contribution(stmt.dims + stmt.reduced, Mul(hit, read(w, g)), conj(stmt.pred, pred),
                                             MAXIMUM.name))
    adj._applied(MAXIMUM)


@_adjoint_rule("6.17-6.18 gradient", "6.17", "6.18")
def gradient(adj: Adjoint) -> Expr:
    """The inner products on each input join into its gradient; the gradients pair up as the output."""
    program = adj.finish()
    # 6.17 may raise the cost and the output's predicates are dropped here: the proof of Theorem 6.35
    # absorbs both in an allowance of 2 $(T_I), the size of the inputs differentiated
    adj._applied(GRADIENT, ("inputs", tuple(w.type for w in adj.wrt)))
    return program


START, JOIN, UNUSED, INPUT = start, join, unused, input_
ADDITION, MAP, BINARY, UNARY, MAXIMUM = addition, map_, binary_contraction, unary_contraction, maximum
GRADIENT = gradient
ADJOINT = RuleTable("adjoint", [START, JOIN, UNUSED, INPUT, INACTIVE, CONSTANT, ADDITION, MAP, BINARY, UNARY,
                                MAXIMUM, GRADIENT],
                    doc="Fig. 14-16 (and M4 for a maximum): the adjoint by inner-product rewriting")
TRANSPOSITIONS = RuleTable("adjoint transpositions", [r for r in ADJOINT if r.kinds],
                           doc="the rule of each SSA form, found by the statement's class")


def transposition(stmt: Statement) -> Rule:
    """The rule that transposes a statement of ``stmt``'s SSA form."""
    found = TRANSPOSITIONS.rules_for(stmt)
    if not found:
        raise UnsupportedError(f"no adjoint rule for the SSA form {type(stmt).__name__}")
    return found[0]


def _exists(dims, pred: Pred) -> Pred:
    """``exists(dims) pred``, binding fresh variables (the summed ones stay free elsewhere)."""
    for v, s in reversed(tuple(dims)):
        fresh = v.fresh()
        pred = Exists(fresh, s, substitute_index(pred, {v: Affine.var(fresh)}))
    return pred


def _project(e: Expr, k: int) -> Expr:
    return (e.first if k == 0 else e.second) if isinstance(e, Pair) else Proj(k, e)


def _is_read(e: Expr, variables) -> bool:
    """``Y[v0, v1, ...]``: a whole variable (or projection of one) read at exactly ``variables``."""
    idx, e = strip_accesses(e)
    while isinstance(e, Proj):
        e = e.pair
    return isinstance(e, Var) and len(idx) == len(variables) and all(
        a is Affine.var(v) for a, v in zip(idx, variables)
    )


def _let_chain_build(statements, adjoint, out: Expr) -> Expr:
    """The lets (primal then adjoint) that ``out`` needs, innermost first; unused ones dropped (6.20)."""
    bindings = [(s.var, s.value) for s in statements] + list(adjoint)
    needed = {id(v) for v in free_vars(out)}
    kept = []
    for var, value in reversed(bindings):
        if id(var) in needed:
            kept.append((var, value))
            needed.update(id(v) for v in free_vars(value))
    for var, value in kept:
        out = Let(var, value, out)
    return out


# ------------------------------------------------------------------------------------------------
# the extended cost of Fig. 17, for the checked mode


class ExtendedCost:
    """The cost of the rewriting state (Fig. 17) at given sizes, checked never to rise."""

    def __init__(self, adj: Adjoint, sizes: dict):
        self.adj, self.sizes = adj, sizes
        self.memo: dict = {}  # id(node) -> (node, cost): nodes are immutable
        self.last: int | None = None
        self.history: list[tuple[str, int]] = []

    def value(self) -> int:
        from .forward import forward

        st = self.adj.state
        total = 0
        for s in st.statements:
            if not isinstance(s, Input):
                total += self._cost(Let(s.var, s.value, s.var))
        if self.adj.current is not None:  # <dX | D[E]>_[p] for the statement being transposed
            _, dims, pred = self.adj.current
            total += self._count(dims, pred)
        differentials = {id(s.var): Var("d" + s.var.name, s.var.type) for s in st.statements if id(s.var) in st.active}
        for s in st.statements:  # let dX = D[E] for the active statements not yet transposed
            if id(s.var) in st.active and id(s.var) not in self.adj.visited and not isinstance(s, Input):
                sigma = {o.var: differentials[id(o.var)] for o in s.operands if id(o.var) in differentials}
                total += self._cost(forward(s.value, sigma))
        for _, value in st.adjoint:
            total += self._cost(value)
        for group in list(st.pending.values()) + list(st.gradient.values()):
            for c in group:
                total += self._count(c.dims, c.pred) + self._cost(gens(c.dims, guard(c.pred, c.body)))
        return total

    def allowance(self, excess) -> int:
        """The documented rise a rule application may make (see ``step``)."""
        if excess is None:
            return 0
        if excess[0] == "inputs":
            return 2 * sum(type_size(t, self.sizes) for t in excess[1])
        k, dims, p = excess
        return k * self._count(dims, p)

    def _cost(self, e: Expr) -> int:
        """Exact cost at the sizes, memoised on the (immutable) node."""
        hit = self.memo.get(id(e))
        if hit is None:
            names = {*e.sizes, *e.free_vars}  # a statement mentions some of the program's sizes
            hit = (e, cost(e, **{k: v for k, v in self.sizes.items() if k in names}))
            self.memo[id(e)] = hit
        return hit[1]

    def _count(self, dims, pred: Pred) -> int:
        from tensorlang.predicates import count

        domain = conj(box(dims), pred)
        hit = self.memo.get(id(domain))
        if hit is None:
            hit = (domain, count(domain, tuple(v for v, _ in dims), self.sizes))
            self.memo[id(domain)] = hit
        return hit[1]

    def step(self, rule: str, excess=None) -> None:
        """Record the cost after ``rule``.  Two documented allowances: ``excess = (k, dims, p)`` allows k
        units per point of p (the arity allowance of 6.27); ``excess = ("inputs", types)`` allows
        2 $(T_I) for 6.17-6.18 (the proof of Theorem 6.35).  Nothing else may raise the cost."""
        now = self.value()
        self.history.append((rule, now))
        if self.last is not None:
            self.last += self.allowance(excess)
        if self.last is not None and now > self.last:
            raise TensorLangError(
                f"rule {rule} raised the extended cost (Fig. 17) from {self.last} to {now} at {self.sizes}"
            )
        self.last = now


def adjoint_ssa(program: Expr, wrt: Sequence[Var], dy: Expr, check: Mapping[str, int] | None = None,
                with_value: bool = False) -> Expr:
    """D^T of a Tensor SSA program for ``wrt`` with cotangent ``dy``: an input variable of the program's
    type, or (``tl.grad`` of a scalar program) the constant 1; with ``with_value``, paired with the
    program's own value, computed by the statements the two share."""
    return Adjoint(program, wrt, dy, check, with_value=with_value).run()
