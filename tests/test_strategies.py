"""Sanity tests of the random-program generator (tests/strategies.py) itself.

The generator is the input of every later property test, so it is checked on its own terms: programs are
well typed, inputs match them, every construct of the language appears, generation is deterministic in
Hypothesis's draws, and every access is in range and every black box in its domain where evaluated.  The
last is checked by a small independent interpreter (``naive_evaluate``, one Python step per element) that
fails on an out-of-range access, an out-of-domain argument or a non-finite value; it is also an oracle
for the reference evaluator once that exists.
"""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings

from tensorlang.checker import check
from tensorlang.evaluate import evaluate
from tensorlang.nodes import (
    Access, And, Call, Cmp, Const, Exists, Expr, Gen, Guard, IndexVar, Let, Node, Or, Pair, PairType, Proj, R,
    RelAtom, RelType, Sum, TensorType, Var, walk,
)
from tensorlang.parser import parse

try:  # tests/ on sys.path (pytest's default for a folder without __init__.py)
    from interpreter import leaves, naive_evaluate
    from strategies import (
        BUILTIN_FUNCTIONS, INPUTS, SMOOTH_FUNCTIONS, nested_let_programs, program_and_inputs, programs,
        scalar_programs, sizes, type_shape,
    )
except ImportError:  # tests/ as a package
    from tests.interpreter import leaves, naive_evaluate
    from tests.strategies import (
        BUILTIN_FUNCTIONS, INPUTS, SMOOTH_FUNCTIONS, nested_let_programs, program_and_inputs, programs,
        scalar_programs, sizes, type_shape,
    )

FAST = settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
# deterministic runs for the statistical checks (coverage), so they cannot flake
SAMPLE = settings(
    max_examples=400, deadline=None, database=None, derandomize=True, phases=[Phase.generate],
    suppress_health_check=list(HealthCheck),
)
INPUT_TYPES = dict(INPUTS)


def _allclose(a, b) -> bool:
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(_allclose(x, y) for x, y in zip(a, b))
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and np.allclose(a, b, rtol=1e-9, atol=1e-9)


# --------------------------------------------------------------------------------------------------
# types and inputs


def _no_tensor_of_pairs(t) -> bool:
    if isinstance(t, TensorType):
        return not isinstance(t.elem, PairType) and _no_tensor_of_pairs(t.elem)
    if isinstance(t, PairType):
        return _no_tensor_of_pairs(t.first) and _no_tensor_of_pairs(t.second)
    return True


@FAST
@given(programs())
def test_programs_are_well_typed_over_declared_inputs(expr):
    assert isinstance(expr, Expr)
    assert not isinstance(expr.type, RelType) and _no_tensor_of_pairs(expr.type)
    free = expr.free_vars
    assert free, "every program reads an input"
    assert any(not isinstance(t, RelType) for t in free.values())
    for name, t in free.items():
        assert INPUT_TYPES[name] is t
    assert set(expr.sizes) <= {"n", "m"}


@FAST
@given(scalar_programs())
def test_scalar_programs_have_type_R(expr):
    assert expr.type is R


@FAST
@given(programs(scalar_output=False))
def test_non_scalar_outputs(expr):
    assert expr.type is not R


@pytest.mark.parametrize("flag, excluded", [
    ("allow_pairs", (Pair, Proj)),
    ("allow_relations", (RelAtom,)),
    ("allow_black_boxes", (Call,)),
    ("allow_lets", (Let,)),
])
def test_flags_exclude_constructs(flag, excluded):
    @settings(max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(programs(**{flag: False}))
    def check(expr):
        for node in walk(expr):
            assert not isinstance(node, excluded)
        if flag == "allow_pairs":
            assert all(not isinstance(t, PairType) for t in expr.free_vars.values())
        if flag == "allow_relations":
            assert all(not isinstance(t, RelType) for t in expr.free_vars.values())

    check()


@FAST
@given(programs(black_boxes=SMOOTH_FUNCTIONS))
def test_black_box_selection(expr):
    for node in walk(expr):
        if isinstance(node, Call):
            assert node.fn in SMOOTH_FUNCTIONS


@FAST
@given(program_and_inputs())
def test_inputs_match_the_program(pair):
    expr, inputs = pair
    free = expr.free_vars
    assert set(inputs) == set(free) | set(expr.sizes)
    size_values = {name: inputs[name] for name in expr.sizes}
    for name in expr.sizes:
        assert isinstance(inputs[name], int) and 0 <= inputs[name] <= 5

    def check(value, t):
        if t is R:
            assert isinstance(value, np.float64) and -2 <= value <= 2
        elif isinstance(t, PairType):
            assert isinstance(value, tuple) and len(value) == 2
            check(value[0], t.first)
            check(value[1], t.second)
        elif isinstance(t, RelType):
            assert value.dtype == np.bool_
            assert value.shape == tuple(s.evaluate({v: size_values[v.name] for v in s.size_vars}) for s in t.sizes)
        else:
            assert value.dtype == np.float64 and value.shape == type_shape(t, size_values)
            assert np.all(np.isfinite(value)) and np.all(np.abs(value) <= 2)

    for name, t in free.items():
        check(inputs[name], t)


@settings(max_examples=300, deadline=None, database=None, derandomize=True, phases=[Phase.generate])
@given(sizes())
def test_sizes_hit_the_edges(size_values):
    assert set(size_values) == {"n", "m"}
    assert all(0 <= v <= 5 for v in size_values.values())
    _SIZES_SEEN.update(size_values.values())


_SIZES_SEEN: set = set()


def test_sizes_cover_zero_one_and_max():
    _SIZES_SEEN.clear()
    test_sizes_hit_the_edges()
    assert {0, 1, 5} <= _SIZES_SEEN


# --------------------------------------------------------------------------------------------------
# bounds, domains and finiteness, by the independent interpreter


@settings(max_examples=120, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(program_and_inputs(max_size=3))
def test_accesses_in_range_and_values_finite(pair):
    expr, inputs = pair
    naive_evaluate(expr, inputs)


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(program_and_inputs(max_size=3, exprs=nested_let_programs()))
def test_nested_let_programs_evaluate(pair):
    expr, inputs = pair
    naive_evaluate(expr, inputs)


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(program_and_inputs(max_size=2, max_depth=6))
def test_deeper_programs_evaluate(pair):
    expr, inputs = pair
    naive_evaluate(expr, inputs)


@FAST
@given(nested_let_programs())
def test_nested_let_programs_nest_lets_in_loops(expr):
    loops = [n for n in walk(expr) if isinstance(n, (Gen, Sum))]
    assert any(isinstance(m, Let) for loop in loops for m in walk(loop.body))


# --------------------------------------------------------------------------------------------------
# coverage over a sample


def _features(expr) -> set:
    """Names of the constructs and patterns a program exhibits."""
    out = set()
    parents = Counter()
    for node in walk(expr):
        out.add(type(node).__name__)
        for child in node.children:
            for c in child if isinstance(child, tuple) else (child,):
                if isinstance(c, (Expr,)) and not isinstance(c, (Var, Const)):
                    parents[id(c)] += 1
        if isinstance(node, Cmp):
            out.add(f"cmp {node.op}")
        if isinstance(node, Call):
            out.add(f"call {node.fn}")
        if isinstance(node, Let):
            t = node.value.type
            out.add("let R" if t is R else "let tensor" if isinstance(t, TensorType) else "let pair")
            if isinstance(node.body, Let) or isinstance(node.value, Let):
                out.add("nested let")
        if isinstance(node, (Gen, Sum)):
            if any(isinstance(n, Let) for n in walk(node.body)):
                out.add(f"let in {type(node).__name__}")
            if isinstance(node, Gen) and isinstance(node.body, Gen):
                out.add("gen 2-d")
            if isinstance(node, Sum) and isinstance(node.body, Sum):
                out.add("sum 2-d")
        if isinstance(node, Guard):
            if isinstance(node.type, TensorType):
                out.add("guard tensor")
            if isinstance(node.type, PairType):
                out.add("guard pair")
            if isinstance(node.pred, Exists) or (isinstance(node.pred, (And, Or)) and any(
                    isinstance(q, Exists) for q in node.pred.parts)):
                out.add("guard exists")
        if isinstance(node, Access):
            a = node.index
            idx = a.index_vars
            if a.is_const:
                out.add("index const")
            elif len(idx) == 2 and all(c == 1 for v, c in a.terms if v in idx):
                out.add("index i + j")
            elif len(idx) == 2:
                out.add("index i - j")
            elif len(idx) == 1 and a.coeff(idx[0]) == -1:
                out.add("index reversed")
            elif len(idx) == 1 and a.coeff(idx[0]) == 2:
                out.add("index strided")
            elif len(idx) == 1 and a.const == -1 and not a.size_vars:
                out.add("index shifted")
            if isinstance(node.type, TensorType):
                out.add("partial access")
            if not isinstance(node.tensor, (Var, Access, Proj)):
                out.add("access of expression")
        if isinstance(node, Proj) and isinstance(node.pair.type.first if node.index == 0 else node.pair.type.second,
                                                 TensorType):
            out.add("proj tensor")
    if any(count >= 2 for count in parents.values()):
        out.add("shared subterm")
    for t in expr.free_vars.values():
        if isinstance(t, PairType):
            out.add("input pair")
        if isinstance(t, RelType):
            out.add("input relation")
    if isinstance(expr.type, PairType):
        out.add("output pair")
    if isinstance(expr.type, TensorType):
        out.add("output tensor")
    if expr.type is R:
        out.add("output R")
    return out


EXPECTED = {
    # every construct of Fig. 3
    "Var", "Const", "Add", "Mul", "Call", "Pair", "Proj", "Gen", "Sum", "Access", "Guard", "Let",
    "Cmp", "And", "Or", "Exists", "RelAtom",
    "cmp <", "cmp <=", "cmp =", "cmp !=",
    # the patterns the passes must handle
    "let R", "let tensor", "let pair", "nested let", "let in Gen", "let in Sum", "gen 2-d", "sum 2-d",
    "guard tensor", "guard pair", "guard exists",
    "index const", "index i + j", "index i - j", "index reversed", "index strided", "index shifted",
    "partial access", "access of expression", "proj tensor", "shared subterm",
    "input pair", "input relation", "output pair", "output tensor", "output R",
} | {f"call {f}" for f in BUILTIN_FUNCTIONS}


def test_every_construct_appears_over_a_sample():
    seen: Counter = Counter()
    node_counts: list = []

    @SAMPLE
    @given(programs())
    def collect(expr):
        seen.update(_features(expr))
        node_counts.append(sum(1 for _ in walk(expr)))

    collect()
    missing = EXPECTED - set(seen)
    assert not missing, f"never generated: {sorted(missing)}"
    # varied sizes: tiny programs and programs of a few dozen nodes
    assert min(node_counts) <= 3 and max(node_counts) >= 30
    assert np.median(node_counts) >= 5


def _signature(x):
    """A node as nested tuples, with index variables by name (so equal signatures print alike)."""
    if isinstance(x, IndexVar):
        return ("index", x.name)
    if isinstance(x, Node):
        return (type(x).__name__,) + tuple(_signature(v) for v in x.children)
    if isinstance(x, tuple):
        return tuple(_signature(v) for v in x)
    return (type(x).__name__, x)


def test_generation_is_deterministic_in_the_draws():
    def run():
        out = []

        @settings(max_examples=30, deadline=None, database=None, derandomize=True, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck))
        @given(program_and_inputs())
        def collect(pair):
            out.append(pair)

        collect()
        return out

    first, second = run(), run()
    assert len(first) == len(second)
    for (e1, in1), (e2, in2) in zip(first, second):
        assert e1 == e2 and _signature(e1) == _signature(e2)  # the same names too
        assert sorted(in1) == sorted(in2)
        for name in in1:
            for a, b in zip(leaves(in1[name]), leaves(in2[name])):
                assert a.dtype == b.dtype and np.array_equal(a, b)


# --------------------------------------------------------------------------------------------------
# against the lead's modules, once they exist


@settings(max_examples=80, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(program_and_inputs(max_size=3))
def test_reference_evaluator_agrees_and_is_finite(pair):
    expr, inputs = pair
    got = evaluate(expr, **inputs)
    want = naive_evaluate(expr, inputs)
    for leaf in leaves(got):
        assert np.all(np.isfinite(leaf))
    assert _allclose(got, want)


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(programs())
def test_bounds_checker_accepts_every_program(expr):
    check(expr)


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(programs())
def test_programs_print_and_parse_back(expr):
    assert parse(str(expr)) == expr
