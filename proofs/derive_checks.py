"""The checks behind ``proofs/specs_derive.py`` (imported when they run): the derivatives' obligations (section 6): rules 6.1-6.13 (Fig. 13), 6.14-6.29 (Fig. 14-16, with the
extended cost of Fig. 17) and the simplification rules S1-S8 (``derive/simplify.py``).

The rules of section 6 are the tables ``FORWARD``, ``ADJOINT`` and ``SIMPLIFY`` of ``derive/``, but not run
by the rewrite driver: the forward derivative is one rule per node kind, the adjoint a driver over the SSA
statements.  So each spec here is a ``CheckSpec`` that draws its own
programs from ``tests/strategies.py`` (black boxes from ``SMOOTH_FUNCTIONS``, sizes 1..5) and observes
the rules through hooks that cost nothing when off: ``forward(expr, sigma, trace=...)`` and
``Adjoint(..., on_step=...)``.

* **forward (6.1-6.13)**, on the Tensor SSA form of each program, for all differentiable inputs at once.
  Meaning: the whole derivative matches central finite differences (rtol 1e-4).  Cost (Theorem 6.1's
  argument, statement by statement): for each statement ``let X = E``, with the differentials of E's
  active operands in sigma, ``$(D[E]) <= 3 $(E)``; and ``$(D[program]) <= 4 $(program)``, each with
  M3's documented allowance of 6 units per point of a maximum's range (``_max_allowance``); at the
  program's input sizes and at a second random set of sizes.  Each rule's row counts the programs (and
  statements) it fired in.
* **adjoint (6.14-6.29)**: every application recorded by ``Adjoint.run`` is an instance.  Meaning: the
  rewriting state denotes ``<dy | D e(dx)>`` for random dx, dy; after every application its value,
  ``sum <gen(dims) [p] body | dX>`` over the pending and gradient inner products (dX the forward tangent
  of the SSA variable, or of the input, under dx) plus the term ``<dX | D[E]>_[p]`` being transposed, is
  compared with ``<dy | D e(dx)>`` (relative 1e-8).  After the last rule, the inner-product identity
  ``<dy | D e(dx)> = <D^T e(dy) | dx>`` on the returned program (row 6.17-6.18).  Cost: the extended cost
  of Fig. 17 (``ExtendedCost``) never rises, except by the documented 6.27 arity allowance (2(j-1) units
  per point for j > 1 active arguments of a scalar black box); on programs without data relations.
  6.22 and 6.23 are applied where an inner product is made: an inner product against the differential of
  an inactive variable or a constant is the zero and is never built (``Adjoint.contribute``), so the
  adjoint has no transposition step for a constant statement.  Their instances are the operands of
  transposed statements that are inactive (a constant statement: 6.23; anything else: 6.22); the
  obligation is that the dropped term is zero (the operand's forward tangent is 0) and dropping it costs
  nothing.
* **simplify (S1-S8)** on what the derivative rules produce (forward and adjoint programs, gradients with
  ``dy = 1``, Jacobians by one-hot probing): each recorded step is replayed on the whole program (the
  program before and after that one step, with the steps inside it already made); meaning on two random
  input sets (rtol 1e-6), cost (``tl.cost``) not rising at both sets' sizes.
"""
from __future__ import annotations

import math
import traceback

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import tensorlang as tl
from tensorlang.derive.adjoint import (
    ADJOINT, CONSTANT, GRADIENT, INACTIVE, INPUT, JOIN, TRANSPOSITIONS, Adjoint, ExtendedCost,
)
from tensorlang.derive.forward import FORWARD, Forward, forward
from tensorlang.derive.simplify import SIMPLIFY, simplify_program
from tensorlang.nodes import (
    Const, Guard, IndexVar, Let, Pair, PairType, R, RelType, Var, box, compare, conj, gens, guard, let_chain,
    tensor_dims,
)
from tensorlang.normalize import gen_pushout, let_lift, pair_elim, to_ssa
from tensorlang.normalize.statements import Constant, MaxReduction, classify, read
from tensorlang import predicates
from tensorlang.substitute import fresh_var, rebuild, substitute_vars
from tensorlang.traversal import free_vars
from tests.oracles import central_difference, inner, random_like
from tests.strategies import SMOOTH_FUNCTIONS, inputs_for, max_programs, scalar_programs
from tests.strategies import programs as program_strategy

from .registry import RuleStats

# ------------------------------------------------------------------------------------------------
# shared helpers


def _draw(strategy, count: int, seed: int = 0) -> list:
    """``count`` programs with two input sets each (sizes 1..5 and 1..3, no zero sizes), deterministic."""
    out: list = []
    both = strategy.flatmap(lambda e: st.tuples(
        st.just(e), inputs_for(e, allow_zero=False), inputs_for(e, max_size=3, allow_zero=False)))

    @settings(max_examples=count, database=None, derandomize=True, deadline=None,
              suppress_health_check=list(HealthCheck), phases=[Phase.generate])
    @given(both)
    def collect_derive(item):  # (a name of its own: Hypothesis seeds a derandomized run by the test's name)
        out.append(item)

    if count > 0:
        collect_derive()
    return out[:count]


def _only(expr, env: dict) -> dict:
    names = set(expr.free_vars) | set(expr.sizes)
    return {k: v for k, v in env.items() if k in names}


def _evaluate(expr, env):
    return tl.evaluate(expr, **_only(expr, env))


def _cost(expr, env) -> int:
    return tl.cost(expr, **_only(expr, env))


def _sizes(expr, env) -> dict:
    return {k: env[k] for k in expr.sizes if k in env}


def _has_relations(expr) -> bool:
    return any(isinstance(v.type, RelType) for v in free_vars(expr))


def _show(e, limit=300) -> str:
    text = str(e).replace("\n", "; ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _close(a, b, rtol, atol) -> bool:
    if isinstance(a, tuple) or isinstance(b, tuple):
        return isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) and all(
            _close(x, y, rtol, atol) for x, y in zip(a, b))
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True))


def _differentiable(expr):
    return [v for v in free_vars(expr) if not isinstance(v.type, RelType)]


def _sigma(expr, wrt):
    sigma: dict = {}
    for v in wrt:
        sigma[v] = fresh_var("d" + v.name, v.type, avoid=[expr, *sigma.values()])
    return sigma


def _stats(names) -> dict:
    return {name: RuleStats(name, realises) for name, realises in names}


def _raised(exc) -> str:
    return f"raised {type(exc).__name__}: {exc} ({traceback.format_exc(limit=-2).splitlines()[-3].strip()})"


# ------------------------------------------------------------------------------------------------
# forward: 6.1-6.13


_FORWARD_ROWS = tuple((r.name, r.realises) for r in FORWARD)


def _forward_sources(programs_per_unit: int):
    return [
        (program_strategy(black_boxes=SMOOTH_FUNCTIONS), 3 * programs_per_unit),
        (_pair_outputs(), programs_per_unit),
        (max_programs(black_boxes=SMOOTH_FUNCTIONS), programs_per_unit),
    ]


def _pair_outputs():
    """Programs whose output is a pair (6.7 in SSA form: only outputs are pairs after pair elimination)."""
    part = program_strategy(max_depth=3, black_boxes=SMOOTH_FUNCTIONS, allow_pairs=False)
    return st.builds(Pair, part, part)


def check_forward(programs: int = 10, per_rule: int = 20):
    stats = _stats(_FORWARD_ROWS)
    items = []
    for k, (strategy, count) in enumerate(_forward_sources(programs)):
        items += _draw(strategy, count, seed=k)
    problems: list = []
    for expr, in1, in2 in items:
        try:
            _forward_program(expr, (in1, in2), stats, per_rule)
        except Exception as exc:  # noqa: BLE001
            problems.append(f"{_raised(exc)} on {_show(expr)}")
    return len(items), problems, stats


def _forward_program(expr, input_sets, stats, per_rule) -> None:
    ssa = to_ssa(expr)
    wrt = _differentiable(ssa)
    sigma = _sigma(ssa, wrt)
    fired: list = []
    d = forward(ssa, sigma, trace=fired)
    names = set(fired)
    for name in fired:
        stats[name].seen += 1
    checking = [n for n in sorted(names) if stats[n].checked < per_rule]
    if not checking:
        return
    for n in checking:
        stats[n].checked += 1
    # meaning: central finite differences of the whole derivative
    inputs = input_sets[0]
    rng = np.random.default_rng(len(str(ssa)))
    direction = {v.name: random_like(inputs[v.name], rng) for v in wrt}
    tangents = {sigma[v].name: direction[v.name] for v in wrt}
    got = _evaluate(d, {**inputs, **tangents})
    want = central_difference(ssa, _only(ssa, inputs), direction)
    if not _close(got, want, 1e-4, 1e-5):
        for n in checking:
            stats[n].fail("meaning", f"D differs from finite differences: {got!r} vs {want!r}\n      program: {_show(ssa)}")
    # cost: Theorem 6.1, statement by statement (3x) and as a whole (4x)
    bindings, _ = let_chain(ssa)
    active: dict = dict(sigma)
    per_statement = []
    for var, value in bindings:
        local = {u: active[u] for u in free_vars(value) if u in active}
        rules: list = []
        dvalue = Forward(value, rules).d(value, local)
        if dvalue is not None:
            active[var] = Var("d" + var.name, var.type)
            per_statement.append((var, value, dvalue, set(rules)))
    inputs = frozenset(free_vars(ssa))
    for env in input_sets:
        sizes = _sizes(ssa, env) | {k: v for k, v in env.items()
                                    if k in ssa.free_vars and isinstance(ssa.free_vars[k], RelType)}
        allowances = 0
        for var, value, dvalue, rules in per_statement:
            before = _cost(Let(var, value, var), sizes)
            after = _cost(Let(active[var], dvalue, active[var]), sizes)
            allowance = _max_allowance(classify(var, value, inputs), sizes)
            allowances += allowance
            if after > 3 * before + allowance:
                for n in rules & set(checking):
                    stats[n].fail("cost", f"$(D[E]) = {after} > 3 $(E) + {allowance} = 3 * {before} + {allowance} at "
                                          f"{_sizes(ssa, env)} for {var.name} = {_show(value)}")
        whole, dwhole = _cost(ssa, sizes), _cost(d, sizes)
        if dwhole > 4 * whole + allowances:
            for n in checking:
                stats[n].fail("cost", f"$(D[e]) = {dwhole} > 4 $(e) + {allowances} = 4 * {whole} + {allowances} at "
                                      f"{_sizes(ssa, env)}: {_show(ssa)}")


def _max_allowance(stmt, sizes) -> int:
    """M3's documented allowance: 6 units per point of a maximum's range (the maximum again and the two
    sums of comparisons that give the maximisers' mean tangent), beyond Theorem 6.1's 3 $(E)."""
    if not isinstance(stmt, MaxReduction):
        return 0
    dims = stmt.dims + stmt.reduced
    return 6 * predicates.count(conj(box(dims), stmt.pred), tuple(v for v, _ in dims), sizes)


# ------------------------------------------------------------------------------------------------
# adjoint: 6.14-6.29


_ADJOINT_ROWS = tuple((r.name, r.realises) for r in ADJOINT)
_TRANSPOSING = tuple(r.name for r in TRANSPOSITIONS if r is not INPUT)


def _adjoint_sources(programs_per_unit: int):
    return [
        (program_strategy(black_boxes=SMOOTH_FUNCTIONS), 2 * programs_per_unit),
        (program_strategy(black_boxes=SMOOTH_FUNCTIONS, allow_relations=False), 2 * programs_per_unit),
        (scalar_programs(black_boxes=SMOOTH_FUNCTIONS, allow_relations=False), programs_per_unit),
        (_pair_outputs(), programs_per_unit),
        (max_programs(black_boxes=SMOOTH_FUNCTIONS), programs_per_unit),
    ]


def check_adjoint(programs: int = 10, per_rule: int = 20):
    stats = _stats(_ADJOINT_ROWS)
    items = []
    for k, (strategy, count) in enumerate(_adjoint_sources(programs)):
        items += _draw(strategy, count, seed=10 + k)
    problems: list = []
    for n, (expr, in1, _) in enumerate(items):
        try:
            _AdjointCheck(expr, in1, stats, per_rule, seed=n).run()
        except Exception as exc:  # noqa: BLE001
            problems.append(f"{_raised(exc)} on {_show(expr)}")
    return len(items), problems, stats


def _tuple_of(vs):
    out = vs[-1]
    for v in reversed(vs[:-1]):
        out = Pair(v, out)
    return out


def _untuple(value, count: int) -> list:
    out = []
    for _ in range(count - 1):
        first, value = value
        out.append(first)
    return out + [value]


def _path(value, path):
    for k in path:
        value = value[k]
    return value


def _all_zero(value) -> bool:
    if isinstance(value, tuple):
        return all(_all_zero(v) for v in value)
    return not np.any(np.asarray(value, dtype=float) != 0)


def _read_all(e, dims):
    return read(e, [v for v, _ in dims])


class _AdjointCheck:
    """One program: runs ``Adjoint`` with ``on_step`` and checks the state after every application."""

    def __init__(self, expr, inputs, stats, per_rule, seed):
        self.ssa = to_ssa(expr)
        self.stats, self.per_rule = stats, per_rule
        self.wrt = _differentiable(self.ssa)
        self.inputs = _only(self.ssa, inputs)
        rng = np.random.default_rng(seed)
        self.sigma = _sigma(self.ssa, self.wrt)
        self.dx = {v.name: random_like(inputs[v.name], rng) for v in self.wrt}
        bindings, self.output = let_chain(self.ssa)
        self.vars = [v for v, _ in bindings]
        names = [v.name for v in self.vars] + list(self.ssa.free_vars)
        if len(set(names)) != len(names):
            raise AssertionError("SSA names are not unique")
        # primal values and forward tangents of every SSA variable
        everything = _tuple_of(self.vars) if self.vars else None
        self.env = dict(self.inputs)
        self.tangent: dict = {}
        if self.vars:
            program = self.ssa
            chain = []
            while isinstance(program, Let):
                chain.append((program.var, program.value))
                program = program.body
            allout = everything
            for v, value in reversed(chain):
                allout = Let(v, value, allout)
            for v, val in zip(self.vars, _untuple(_evaluate(allout, self.env), len(self.vars))):
                self.env[v.name] = val
            tangents = {self.sigma[v].name: self.dx[v.name] for v in self.wrt}
            d_all = forward(allout, self.sigma)
            for v, val in zip(self.vars, _untuple(_evaluate(d_all, {**self.env, **tangents}), len(self.vars))):
                self.tangent[id(v)] = val
        self.output_value = _evaluate(self.ssa, self.env)
        self.dy = fresh_var("dy", self.ssa.type, avoid=[self.ssa])
        self.env[self.dy.name] = random_like(self.output_value, rng)
        d = forward(self.ssa, self.sigma)
        self.forward_value = _evaluate(d, {**self.env, **{self.sigma[v].name: self.dx[v.name] for v in self.wrt}})
        self.target = inner(self.env[self.dy.name], self.forward_value)
        self.sizes = _sizes(self.ssa, inputs)
        self.costed = not _has_relations(self.ssa)
        self.previous_value = self.target  # what the state denotes before each rule
        self.cache: dict = {}  # id(contribution) -> (value, contribution)
        self.evaluated = 0  # adjoint lets evaluated so far
        self.previous_pending: dict = {}
        self.last_cost = None
        self.per_program: dict = {}

    def run(self):
        self.adj = Adjoint(self.ssa, self.wrt, self.dy, on_step=self.step)
        self.extended = ExtendedCost(self.adj, self.sizes) if self.costed else None
        result = self.adj.run()
        # the inner-product identity on the returned program
        s = self.stats[GRADIENT.name]
        back = _evaluate(result, self.env)
        grads = [back]
        for _ in self.wrt[1:]:
            grads = list(grads[:-1]) + list(grads[-1])
        rhs = sum(inner(g, self.dx[v.name]) for g, v in zip(grads, self.wrt))
        if not self._same(rhs, self.target):
            s.fail("meaning", f"<dy | D e(dx)> = {self.target} but <D^T e(dy) | dx> = {rhs}: {_show(self.ssa)}")

    def _same(self, a, b, scale=0.0) -> bool:
        return abs(a - b) <= 1e-8 * max(1.0, abs(a), abs(b), scale)

    # the value of the state
    def _lets(self):
        for dx, value in self.adj.state.adjoint[self.evaluated:]:
            self.env[dx.name] = _evaluate(value, self.env)
            self.evaluated += 1

    def _inner(self, c, tangent) -> float:
        hit = self.cache.get(id(c))
        if hit is None:
            left = _evaluate(gens(c.dims, guard(c.pred, c.body)), self.env)
            hit = self.cache[id(c)] = (inner(left, tangent), c)
        return hit[0]

    def _input_tangent(self, key):
        ident, path = key
        (w,) = [w for w in self.wrt if id(w) == ident]
        return _path(self.dx[w.name], path)

    def value(self):
        self._lets()
        st_ = self.adj.state
        terms = []
        for x, group in st_.pending.items():
            for c in group:
                terms.append(self._inner(c, self.tangent[x]))
        for key, group in st_.gradient.items():
            for c in group:
                terms.append(self._inner(c, self._input_tangent(key)))
        current = self.adj.current
        if current is not None:
            stmt, dims, pred = current
            if len(st_.adjoint) > self._lets_at_last_step:  # 6.25 made the let dX
                dx = st_.adjoint[-1][0]
                left = _evaluate(gens(dims, guard(pred, _read_all(dx, dims))), self.env)
                terms.append(inner(left, self.tangent[id(stmt.var)]))
            else:  # 6.25 found the differential to be an existing variable: the one inner product, as it was
                for c in self.previous_pending.get(id(stmt.var), []):
                    terms.append(self._inner(c, self.tangent[id(stmt.var)]))
        return math.fsum(terms), sum(abs(t) for t in terms)

    _lets_at_last_step = 0

    def step(self, rule, adj, excess):
        s = self.stats[rule]
        s.seen += 1
        inferred = []
        if rule in _TRANSPOSING or rule == INPUT.name:
            stmt = self._transposed
            if rule in _TRANSPOSING:
                for o in stmt.operands:
                    if id(o.var) not in adj.state.active:
                        other = adj.by_var[id(o.var)]
                        rule_name = CONSTANT.name if isinstance(other, Constant) else INACTIVE.name
                        inferred.append((rule_name, o.var))
        if rule == JOIN.name:
            self._transposed = adj.current[0]
        try:
            value, scale = self.value()
            if not self._same(value, self.previous_value, scale):
                s.fail("meaning", f"the state denotes {value} after the rule, {self.previous_value} before "
                                  f"(<dy | D e(dx)> = {self.target}): {_show(self.ssa)}")
            self.previous_value = value
            for name, var in inferred:  # the dropped inner product is zero: the operand's tangent is
                r = self.stats[name]
                r.seen += 1
                r.checked += 1
                if not _all_zero(self.tangent[id(var)]):
                    r.fail("meaning", f"{var.name} is dropped as inactive but its tangent is not zero: {_show(self.ssa)}")
            s.checked += 1
            if self.extended is not None:
                now = self.extended.value()
                allowed = self.last_cost
                if allowed is not None:
                    allowed += self.extended.allowance(excess)
                if allowed is not None and now > allowed:
                    s.fail("cost", f"the extended cost rose from {allowed} to {now} at {self.sizes}: {_show(self.ssa)}")
                self.last_cost = now
        except Exception as exc:  # noqa: BLE001
            s.fail("meaning", f"{_raised(exc)}: {_show(self.ssa)}")
        self.previous_pending = {k: list(v) for k, v in adj.state.pending.items()}
        self._lets_at_last_step = len(adj.state.adjoint)


# ------------------------------------------------------------------------------------------------
# simplification: S1-S8


_SIMPLIFY_ROWS = tuple((r.name, r.realises) for r in SIMPLIFY)


def _unsimplified(expr, inputs):
    """(label, program, extra inputs) for what the derivative calls hand to ``simplify_program``."""
    from tensorlang.derive.adjoint import adjoint_ssa

    ssa = to_ssa(expr)
    wrt = _differentiable(ssa)
    sigma = _sigma(ssa, wrt)
    rng = np.random.default_rng(len(str(ssa)))
    out = [("forward", forward(ssa, sigma), {sigma[v].name: random_like(inputs[v.name], rng) for v in wrt})]
    dy = fresh_var("dy", ssa.type, avoid=[ssa])
    a = adjoint_ssa(ssa, wrt, dy)
    out.append(("adjoint", a, {dy.name: random_like(_evaluate(ssa, inputs), rng)}))
    if ssa.type is R:
        out.append(("grad", substitute_vars(simplify_program(a), {dy: Const(1)}), {}))
    if len(wrt) == 1 or ssa.type is R:
        var = wrt[0]
        out_sizes, out_elem = tensor_dims(ssa.type)
        in_sizes, in_elem = tensor_dims(var.type)
        if out_elem is R and in_elem is R and len(out_sizes) + len(in_sizes) <= 2:
            d = simplify_program(forward(ssa, {var: sigma[var]}))
            js = [IndexVar(f"j{k}") for k in range(len(in_sizes))]
            ks = [IndexVar(f"k{k}") for k in range(len(in_sizes))]
            ins = [IndexVar(f"i{k}") for k in range(len(out_sizes))]
            one_hot = gens(list(zip(ks, in_sizes)), Guard(conj(*(compare("=", k, j) for k, j in zip(ks, js))), Const(1)))
            entry = substitute_vars(d, {sigma[var]: one_hot})
            for i in ins:
                entry = entry[i]
            jac = gens(list(zip(ins, out_sizes)) + list(zip(js, in_sizes)), entry)
            out.append(("jacobian", gen_pushout(pair_elim(let_lift(jac))), {}))
    return out


def _replace_all(e, done: dict):
    """``e`` with every node whose id is in ``done`` replaced (outermost first)."""
    hit = done.get(id(e))
    if hit is not None:
        return hit[1]
    if not _is_expr(e):
        return e
    return rebuild(e, lambda c: _replace_all(c, done) if _is_expr(c) else c)


def _is_expr(c) -> bool:
    from tensorlang.nodes import Expr

    return isinstance(c, Expr)


def _subterm_ids(e) -> set:
    from tensorlang.nodes import walk

    return {id(n) for n in walk(e)}


def _whole_steps(program, trace):
    """Replay one ``simplify_program`` round: ``(rule, whole before, whole after)`` per recorded step, or
    ``(rule, None, None)`` for a step made inside a node another step creates (checked as part of that
    step).  ``trace`` holds the round's steps in the order made (inner steps first)."""
    ids = _subterm_ids(program)
    # S6 simplifies the product it makes under the hoisted bracket: the steps made inside it rely on
    # that bracket, so they are checked as part of the S6 step (recorded after them)
    folded: set = set()
    for k, (rule, before, _) in enumerate(trace):
        if rule.startswith("S6") and id(before) in ids:
            inside = _subterm_ids(before)
            for j in range(k - 1, -1, -1):
                if id(trace[j][1]) in inside:
                    folded.add(j)
    done: dict = {}
    current = program
    for k, (rule, before, after) in enumerate(trace):
        if id(before) not in ids or k in folded:
            yield rule, None, None
            continue
        done[id(before)] = (before, after)
        new = _replace_all(program, done)
        yield rule, current, new
        current = new


def _chain_steps(program, trace):
    """S3 and S4 work on the top-level let chain, innermost let first: the whole program before a step is
    the chain's lets above the rewritten one around the recorded ``before``."""
    chain = []
    e = program
    while isinstance(e, Let):
        chain.append(e)
        e = e.body
    for rule, before, after in trace:
        k = next((j for j, node in enumerate(chain) if isinstance(before, Let) and node.var is before.var), None)
        if k is None:
            yield rule, None, None
            continue
        wb, wa = before, after
        for node in reversed(chain[:k]):
            wb, wa = Let(node.var, node.value, wb), Let(node.var, node.value, wa)
        yield rule, wb, wa


def _simplify_rounds(program):
    """``simplify_program`` round by round, each phase with its own trace: [(phase input, steps)]."""
    from tensorlang.derive.simplify import DEAD_LET, INLINE
    from tensorlang.rules import ScopedDriver

    out = []
    expr = program
    while True:
        t1, t2, t3 = [], [], []
        p1 = ScopedDriver(SIMPLIFY, t1).run(expr)
        p2 = INLINE.fn(p1, t2)
        p3 = DEAD_LET.fn(p2, t3)
        out += [(list(_whole_steps(expr, t1))), list(_chain_steps(p1, t2)), list(_chain_steps(p2, t3))]
        if p3 is expr:
            break
        expr = p3
    final = simplify_program(program)
    if final != expr:
        raise AssertionError("the replayed rounds do not end where simplify_program does")
    return out


def check_simplify(programs: int = 10, per_rule: int = 20):
    stats = _stats(_SIMPLIFY_ROWS)
    items = _draw(program_strategy(black_boxes=SMOOTH_FUNCTIONS), 3 * programs, seed=20)
    items += _draw(scalar_programs(black_boxes=SMOOTH_FUNCTIONS), programs, seed=21)
    items += _draw(max_programs(black_boxes=SMOOTH_FUNCTIONS), programs, seed=23)
    for fixed in _fixed_programs():  # each once, so that their instances (S7's, mostly) are always there
        items += _draw(st.just(fixed), 1, seed=22)
    problems: list = []
    for expr, in1, in2 in items:
        try:
            cases = _unsimplified(expr, in1)
        except Exception as exc:  # noqa: BLE001
            problems.append(f"{_raised(exc)} on {_show(expr)}")
            continue
        for label, program, extra in cases:
            envs = [{**in1, **extra}]
            # the second input set has other sizes: redraw the extra inputs to match
            try:
                second = _resized(program, in2, extra)
                envs.append(second)
            except Exception:  # noqa: BLE001 - one input set is enough where the shapes cannot follow
                pass
            try:
                rounds = _simplify_rounds(program)
            except Exception as exc:  # noqa: BLE001
                problems.append(f"{label}: {_raised(exc)} on {_show(program)}")
                continue
            per_program: dict = {}
            cache: dict = {}
            for steps in rounds:
                for rule, before, after in steps:
                    s = stats[rule]
                    s.seen += 1
                    if before is None or s.checked >= per_rule or per_program.get(rule, 0) >= 2:
                        continue
                    per_program[rule] = per_program.get(rule, 0) + 1
                    s.checked += 1
                    try:
                        _check_step(s, before, after, envs, cache, label)
                    except Exception as exc:  # noqa: BLE001
                        s.fail("meaning", f"{label}: {_raised(exc)}\n      before: {_show(before)}")
    return len(items), problems, stats


def _fixed_programs() -> list:
    """The paper's examples (``examples/*.tl``) and sums of scaled reads, whose gradients fold constants."""
    import glob
    import os

    root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
    out = [tl.parse(open(f).read(), filename=f) for f in sorted(glob.glob(os.path.join(root, "*.tl")))]
    out.append(tl.parse("sum(i:n) 2 * x[i] + 3 * x[i]", x="[n]R"))
    out.append(tl.parse("sum(i:n) 0.5 * (x[i] * x[i]) + x[i] * 2", x="[n]R"))
    # a sparse product: its adjoint's sum over a relation makes the bracket around it redundant (S8)
    out.append(tl.parse("sum(i:n) ((sum(j:m) [E(i, j)] * y[j]) - z[i]) * ((sum(j:m) [E(i, j)] * y[j]) - z[i])",
                        E="rel[n, m]", y="[m]R", z="[n]R"))
    return out


def _resized(program, inputs, extra):
    rng = np.random.default_rng(11)
    env = dict(inputs)
    for v in free_vars(program):
        if v.name in extra:
            shape_value = _zeros_of(v.type, inputs)
            env[v.name] = random_like(shape_value, rng)
    return env


def _zeros_of(t, sizes):
    if isinstance(t, PairType):
        return (_zeros_of(t.first, sizes), _zeros_of(t.second, sizes))
    dims, _ = tensor_dims(t)
    if not dims:
        return 0.0
    return np.zeros(tuple(a.evaluate({v: sizes[v.name] for v in a.size_vars}) for a in dims))


def _check_step(s, before, after, envs, cache, label):
    for env in envs:
        def val(e):
            key = (id(e), id(env))
            if key not in cache:
                cache[key] = (_evaluate(e, env), e)
            return cache[key][0]

        a, b = val(before), val(after)
        if not _close(a, b, 1e-6, 1e-8):
            s.fail("meaning", f"{label}: values differ: {a!r} vs {b!r}\n      before: {_show(before)}\n"
                              f"      after:  {_show(after)}")
            return
        ca, cb = _cost(before, env), _cost(after, env)
        if cb > ca:
            s.fail("cost", f"{label}: cost rises from {ca} to {cb} at {_sizes(before, env)}\n"
                           f"      before: {_show(before)}\n      after:  {_show(after)}")
            return


# ------------------------------------------------------------------------------------------------
# structure: T1-T3


def _structure_cases(expr) -> list:
    """(label, simplified probed Jacobian) for each Jacobian that ``tl.jacobian`` and ``tl.hessian`` would
    structure: of the program in each real input where it has at most two indices in all, and of its
    gradient (the Hessian) for a scalar program."""
    from tensorlang.declarations import body_of
    from tensorlang.derive.api import grad, probed_jacobian

    out = []
    out_sizes, out_elem = tensor_dims(expr.type)
    for var in _differentiable(expr):
        in_sizes, in_elem = tensor_dims(var.type)
        if out_elem is not R or in_elem is not R:
            continue
        if len(out_sizes) + len(in_sizes) <= 2:
            out.append((f"jacobian in {var.name}", probed_jacobian(expr, var)))
        if expr.type is R and len(in_sizes) <= 2:
            g = grad(expr, var.name)
            out.append((f"hessian in {var.name}", probed_jacobian(body_of(g), var)))
    return out


def check_structure(programs: int = 10, per_rule: int = 20):
    """Every application of T1-T3 while ``keep_structure`` runs on the Jacobians and Hessians of drawn
    programs and of stencil energies: the same value on two input sets, and a cost that does not rise."""
    from tensorlang.derive.structure import STRUCTURE, keep_structure

    rows = tuple((r.name, r.realises) for r in STRUCTURE)
    stats = _stats(rows)
    items = _draw(program_strategy(black_boxes=SMOOTH_FUNCTIONS), 2 * programs, seed=30)
    items += _draw(scalar_programs(black_boxes=SMOOTH_FUNCTIONS), 2 * programs, seed=31)
    for fixed in _stencils():
        items += _draw(st.just(fixed), 1, seed=32)
    problems: list = []
    for expr, in1, in2 in items:
        try:
            cases = _structure_cases(expr)
        except Exception as exc:  # noqa: BLE001
            problems.append(f"{_raised(exc)} on {_show(expr)}")
            continue
        for label, program in cases:
            trace: list = []
            try:
                keep_structure(program, trace)
            except Exception as exc:  # noqa: BLE001
                problems.append(f"{label}: {_raised(exc)} on {_show(program)}")
                continue
            cache: dict = {}
            for rule, before, after in trace:
                s = stats.get(rule)
                if s is None:
                    continue
                s.seen += 1
                if s.checked >= per_rule:
                    continue
                s.checked += 1
                try:
                    _check_step(s, before, after, [in1, in2], cache, label)
                except Exception as exc:  # noqa: BLE001
                    s.fail("meaning", f"{label}: {_raised(exc)}\n      before: {_show(before)}")
    return len(items), problems, stats


def _stencils() -> list:
    """Energies whose Hessians are banded: a 1-D and a 2-D finite-difference energy, a convolution."""
    return [
        tl.parse("x : [n]R\nsum(i:n) [i < n - 1] * (x[i+1] - x[i]) * (x[i+1] - x[i]) * x[i]"),
        tl.parse("x : [n][m]R\nsum(i:n, j:m) [i < n - 1 and j < m - 1] * ((x[i+1, j] - x[i, j]) * (x[i+1, j] - x[i, j])"
                 " + (x[i, j+1] - x[i, j]) * (x[i, j+1] - x[i, j])) * (x[i, j] * x[i, j] + 1)"),
        tl.parse("x : [n]R\nw : [3]R\nsum(i:n - 2) exp(sum(k:3) w[k] * x[i + k])"),
        tl.parse("x : [n]R\ngen(i:n) [0 < i] * x[i] * x[i - 1]"),
    ]
