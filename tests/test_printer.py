"""The text printer: ``str(expr)`` is a program that parses back to an equal expression, for parsed
programs and for terms built directly with the node constructors (as compiler passes build them)."""
import math
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tensorlang.errors import TypeCheckError
from tensorlang.nodes import (
    FALSE, R, TRUE, Access, Add, Affine, And, Call, Const, Exists, Expr, Gen, Guard, IndexVar, Let, Mul,
    Or, Pair, PairType, Proj, RelAtom, RelType, SizeVar, Sum, TensorType, Var, compare, conj, disj, negate,
    tensor,
)
from tensorlang.parser import parse
from tensorlang.printer import affine_str, expr_str, pred_str, to_source, type_str
from tensorlang.substitute import rebuild, substitute_vars

n, m = SizeVar("n"), SizeVar("m")
N, M = Affine.var(n), Affine.var(m)
x = Var("x", tensor([N]))
y = Var("y", R)
w = Var("w", R)
A = Var("A", tensor([N, M]))
pq = Var("pq", PairType(R, tensor([N])))
E = Var("E", RelType((N, M)))


def roundtrip(e: Expr) -> Expr:
    text = to_source(e)
    back = parse(text)
    assert back == e, f"\n{text}\n!=\n{to_source(back)}"
    assert to_source(back) == text  # printing is a fixed point
    return back


# --------------------------------------------------------------------------------------------------
# hand-written programs covering every construct

PROGRAMS = [
    # the paper's programs (section 2)
    "x : [n + m - 1]R\nc : [m]R\ngen(i:n) sum(j:m) x[i + j] * c[j]",
    "A : [n][n]R\nsum(i:n) A[i, i]",
    "x : R\ngen(i:n, j:n) [i = j] * x",
    "x : R\nlet A = gen(i:n, j:n) [i = j] * x in sum(k:n) A[k, k]",
    "x : [n]R\nlet A = gen(i:n, j:n) [i = j] * x[i] in sum(k:n) A[k, 0] * A[0, k]",
    "x : [n]R\nsum(i:n) [i != 1] * x[i]",
    "x : [n + m - 1]R\nc : [m]R\nz : [n]R\n"
    "let f = gen(i:n) sum(j:m) x[i + j] * c[j] in sum(i:n) (f[i] - z[i]) * (f[i] - z[i])",
    "x : R\ny : R\nlet a = 2 * x + 3 * y in let b = 4 * x + a in let z = 8 * x in let w = 5 * a + 6 * b in (z, w)",
    # arithmetic, signs and constants
    "y : R\nw : R\ny - w - 2 + -3 * y - -y - (2) - 0.5 + 1e-3 * 1e+300 - 1e999",
    "y : R\nw : R\n-(y + w) * -y * (y * w) / (y - w) / 2",
    "y : R\n(y * y) * y + y * (y * y) + -y * y + -(y * y) + -1 * y * y",
    "y : R\n-2 * y + -(2) - (-2) + 0.1 + 0.30000000000000004 + 5e-324",
    "y : R\nexp(y) + log(1 + y * y) * pow(y, 2) / max(y, min(y, 0)) + recip(y) + sigmoid(-y)",
    # brackets
    "x : [n]R\ngen(i:n) [i < 3] * x[i] + [i >= 2] * x[i] * [i < n - 1] * 2",
    "x : [n]R\nsum(i:n) ([i < 2]) * x[i] + [i = 0] + [i = 1] * [i = 2] + x[i] * [i > 1]",
    "x : [n]R\ngen(i:n) [i < 2] * gen(j:n) [j <= i] * x[j]",
    "x : [n]R\ny : R\n[0 < n] * ([1 < n] * (x, y)).0",
    # binders in operands, nested lets, shadowing-free reuse of names in sibling scopes
    "x : [n]R\ny : R\ny * sum(i:n) x[i] * sum(j:n) x[j] + y",
    "x : [n]R\n(sum(i:n) x[i]) * (sum(i:n) x[i]) + -sum(i:n) x[i]",
    "x : [n]R\nlet s = let t = sum(i:n) x[i] in t * t in [0 < n] * (gen(i:n) s * x[i])[0] + s",
    "x : [n]R\n(let t = gen(i:n) x[i] in t, gen(j:n) let u = x[j] in u * u)",
    # pairs, projections, annotations
    "pq : (R, [n]R)\nlet t : (R, [n]R) = pq in (t.0, gen(i:n) t.1[i] * t.0).1",
    "q : (R, ([m]R, R))\nq.1.0",
    # affine forms
    "A : [n][m]R\nx : [2*n + m]R\ngen(i:n, j:m) [0 <= i - j < m] * A[n - 1 - i, j] + x[2*i + j] + x[-i + n - 1 + j + n]",
    "x : [n]R\ngen(i:n) [2*i < n and 3*i + 1 >= n or i = n - 1] * x[n - 1 - i]",
    # predicates
    "E : rel[n, m]\nA : [n][m]R\ngen(i:n, j:m) [E(i, j) and i < j or not (i = j or i != 0)] * A[i, j]",
    "E : rel[n, m]\nx : [n]R\ngen(i:n) [exists(j:m) E(i, j) and j < 2] * x[i]",
    "E : rel[n, m]\nx : [n]R\ngen(i:n) [(exists(j:m, k:m) E(i, j) and E(i, k)) and i < 2] * x[i]",
    "x : [n]R\ngen(i:n) [true and (false or i < 1) and (i < 2 and i < 3)] * x[i]",
    "x : [n]R\ngen(i:n) [(0 < i < 2 or 1 < i) and 3 > i > 1 and (i = 1)] * x[i]",
    # unicode and quoted names
    "x : [n]R\n⊞(i:n) Σ(j:n) [i ≤ j ∧ ¬(i = 0) ∨ ∃(k:n) k ≠ i] * x[i] · x[j]",
    "`sum` : R\n`a b` : [n]R\n`sum` * sum(`in`:n) `a b`[`in`]",
]


@pytest.mark.parametrize("src", PROGRAMS)
def test_programs_round_trip(src):
    roundtrip(parse(src))


# --------------------------------------------------------------------------------------------------
# exact forms


def text(e):
    return expr_str(e)


def test_subtraction_and_negation_forms():
    a, b = y, w
    assert text(Add(a, Mul(Const(-1), b))) == "y - w"
    assert text(Add(a, Const(-2))) == "y - 2"
    assert text(Add(a, Mul(Const(-1), Const(2)))) == "y - (2)"
    assert text(Add(a, Mul(Const(-1), Const(-2)))) == "y - -2"
    assert text(Mul(Const(-1), a)) == "-y"
    assert text(Mul(Const(-1), Mul(a, b))) == "-1 * y * w"
    assert text(Mul(Const(-1), Add(a, b))) == "-(y + w)"
    assert text(Mul(Mul(Const(-1), a), b)) == "-y * w"
    assert text(Const(-2)) == "-2"
    assert text(Mul(Const(-1), Const(2))) == "-1 * 2"


def test_product_chains():
    a, b, c = y, w, Var("c", R)
    assert text(Mul(a, Mul(b, c))) == "y * w * c"
    assert text(Mul(Mul(a, b), c)) == "(y * w) * c"
    assert text(Mul(a, Call("recip", (b,)))) == "y / w"
    assert text(Mul(Call("recip", (b,)), a)) == "recip(w) * y"
    p = compare("<", 0, N)
    assert text(Guard(p, Mul(a, b))) == "[0 < n] * y * w"
    assert text(Guard(p, Const(1))) == "[0 < n]"
    assert text(Mul(a, Guard(p, Const(1)))) == "y * [0 < n]"
    assert text(Mul(Guard(p, a), b)) == "([0 < n] * y) * w"
    assert text(Guard(p, Add(a, b))) == "[0 < n] * (y + w)"
    assert text(Guard(p, Call("recip", (a,)))) == "[0 < n] * recip(y)"


def test_binders_print_bare_only_at_the_end():
    i = IndexVar("i")
    s = Sum(i, N, Access(x, Affine.var(i)))
    assert text(Add(s, y)) == "(sum(i:n) x[i]) + y"
    assert text(Add(y, s)) == "y + sum(i:n) x[i]"
    assert text(Add(Add(y, s), y)) == "y + (sum(i:n) x[i]) + y"
    assert text(Mul(Const(-1), s)) == "-sum(i:n) x[i]"
    assert text(Pair(s, s)) == "(sum(i:n) x[i], sum(i:n) x[i])"
    assert text(Access(Gen(i, N, Access(x, Affine.var(i))), Affine.const_(0))) == "(gen(i:n) x[i])[0]"


def test_affine_forms():
    i, j = IndexVar("i"), IndexVar("j")
    I, J = Affine.var(i), Affine.var(j)
    assert affine_str(N + M - 1) == "m + n - 1"
    assert affine_str(N * 2) == "2*n"
    assert affine_str(I - J) == "i - j"
    assert affine_str(N - 1 - I) == "n - i - 1"
    assert affine_str(-I - J) == "-i - j"
    assert affine_str(Affine.const_(-3)) == "-3"
    assert affine_str(I * -2 + 1) == "-2*i + 1"


def test_types_and_declarations():
    assert type_str(tensor([N, N + 1])) == "[n][n + 1]R"
    assert type_str(RelType((N, M))) == "rel[n, m]"
    i, j = IndexVar("i"), IndexVar("j")
    e = Gen(i, N, Gen(j, M, Guard(RelAtom(E, (Affine.var(i), Affine.var(j))), Access(Access(A, Affine.var(i)), Affine.var(j)))))
    src = to_source(e)
    assert src.splitlines()[:2] == ["E : rel[n, m]", "A : [n][m]R"]
    assert list(e.free_vars) == ["E", "A"]
    roundtrip(e)


def test_comparison_chains():
    i = IndexVar("i")
    I = Affine.var(i)
    p = conj(compare("<=", 0, I - 1), compare("<", I - 1, M))
    assert pred_str(p) == "0 <= i - 1 < m"
    assert pred_str(compare(">", I, 2)) == "2 < i"
    assert pred_str(disj(compare("=", I, 0), FALSE)) == "i = 0"


# --------------------------------------------------------------------------------------------------
# terms compiler passes build: names that clash, lets that shadow, odd names and constants


def test_index_variables_with_the_same_name_are_renamed():
    i1, i2 = IndexVar("i"), IndexVar("i")
    e = Gen(i1, N, Sum(i2, N, Mul(Access(x, Affine.var(i1)), Access(x, Affine.var(i2)))))
    assert text(e) == "gen(i:n) sum(i1:n) x[i] * x[i1]"
    roundtrip(e)
    # an index variable named like an input, a size or a keyword
    k1, k2, k3 = IndexVar("x"), IndexVar("n"), IndexVar("sum")
    e = Sum(k1, N, Sum(k2, N, Sum(k3, N, Access(x, Affine.var(k1)) * Access(x, Affine.var(k2)) * Access(x, Affine.var(k3)))))
    assert text(e) == "sum(x1:n, n1:n, i:n) (x[x1] * x[n1]) * x[i]"  # Python * nests to the left
    roundtrip(e)


def test_canonical_index_names():
    from tensorlang.alpha import canonical

    e = parse("x : [n]R\ngen(i:n) sum(j:n) sum(k:n) x[i] * x[j] * x[k]")
    roundtrip(canonical(e))


def test_shadowing_lets_get_fresh_names():
    t = Var("t", R)
    inner = Let(t, Mul(t, t), Add(t, y))
    e = Let(t, y, inner)
    src = to_source(e)
    assert src == "y : R\nlet t = y in\nlet t1 = t * t in\nt1 + y"  # the leading lets one per line
    assert let_canonical(parse(src)) == let_canonical(e)
    # a let named like an input it uses
    e = Let(y, Add(y, Const(1)), Mul(y, y))
    src = to_source(e)
    assert src == "y : R\nlet y1 = y + 1 in\ny1 * y1"
    assert let_canonical(parse(src)) == let_canonical(e)
    # a let named like a size variable
    nv = Var("n", R)
    e = Let(nv, y, Gen(IndexVar("i"), N, nv))
    assert let_canonical(parse(to_source(e))) == let_canonical(e)


def test_keyword_and_odd_names():
    for name in ("in", "sum", "true", "a b", "x'", "", "back`tick\\", "R", "rel", "exp"):
        v = Var(name, R)
        roundtrip(Add(v, Mul(v, y)))
        roundtrip(Let(Var(name + "!", R), v, Var(name + "!", R)))
    roundtrip(Gen(IndexVar("not an identifier"), N, y))
    s = SizeVar("in")
    roundtrip(Var("v", tensor([Affine.var(s)])))


def test_constants_round_trip_exactly():
    for value in (0, 1, -1, 7, -7, 10**30, 0.1, -0.1, 1e-300, 5e-324, 1e300, 2.5e16, math.inf, -math.inf,
                  1 / 3, -0.0):
        roundtrip(Add(y, Const(value)))
        roundtrip(Mul(Const(value), y))
        roundtrip(Add(y, Mul(Const(-1), Const(value))))
        roundtrip(Const(value))
    assert "1 / 3" in text(Const(Fraction(1, 3)))  # a Fraction prints as a division (not exact)


def test_raw_predicates_keep_their_structure():
    i = IndexVar("i")
    I = Affine.var(i)
    a, b, c = compare("<", I, 1), compare("<", I, 2), compare("=", I, 3)
    for p in (And((TRUE, a)), And((a, a)), And((And((a, b)), c)), And((a, And((b, c)))), Or((Or((a, b)), c)),
              Or((a, Or((b, c)))), And((Or((a, b)), Or((b, c)))), Or((And((a, b)), FALSE)),
              And((Exists(IndexVar("j"), M, TRUE), a)), And((a, Exists(IndexVar("j"), M, FALSE))),
              And((compare("<", I, I + 1), compare("<", I + 1, N), compare("<", N, N + 1)))):
        roundtrip(Gen(i, N, Guard(p, Access(x, I))))


def test_output_is_deterministic():
    src = "x : [n]R\ngen(i:n) sum(j:n) [i < j] * x[i] * x[j] + sum(k:n) x[k]"
    first = to_source(parse(src))
    for _ in range(3):
        assert to_source(parse(src)) == first
    assert str(parse(src)) == first


# --------------------------------------------------------------------------------------------------
# random well-typed terms built with the node constructors

FUNCTIONS = ("exp", "log", "sin", "tanh", "sqrt", "sigmoid", "relu", "abs", "recip", "pow", "max", "min")
INPUTS = (x, y, w, A, pq, Var("u", tensor([N + M])))
RANGES = (N, M, N + M, N * 2 + 1)
NAMES = ("i", "j", "k", "i1", "x", "n")  # index names that clash: the printer must rename


def let_canonical(e, depth=0):
    """``e`` with every let variable renamed by its let depth, so that terms equal up to the names of
    lets compare equal."""
    if not isinstance(e, Expr):
        return e
    if isinstance(e, Let):
        new = Var(f"%let{depth}", e.var.type)
        body = substitute_vars(e.body, {e.var: new})
        return Let(new, let_canonical(e.value, depth), let_canonical(body, depth + 1))
    return rebuild(e, lambda c: let_canonical(c, depth))


class _Gen:
    """Draws random well-typed expressions; every access is in range by construction."""

    def __init__(self, draw, shadow: bool):
        self.draw = draw
        self.shadow = shadow

    def pick(self, options):
        return options[self.draw(st.integers(0, len(options) - 1))]

    def affine(self, scope):
        terms = [(v, self.draw(st.integers(-2, 2))) for v, _ in scope] + [(n, self.draw(st.integers(-1, 2)))]
        return Affine.of(terms, self.draw(st.integers(-3, 3)))

    def pred(self, scope, depth):
        k = self.draw(st.integers(0, 7 if depth > 0 else 2))
        if k == 0:
            return compare(self.pick(("<", "<=", "=", "!=", ">", ">=", "==")), self.affine(scope), self.affine(scope))
        if k == 1:
            return self.pick((TRUE, FALSE))
        if k == 2:
            fits = [(v, s) for v, s in scope if s is N] + [(None, None)]
            v, _ = self.pick(fits)
            first = Affine.var(v) if v is not None else Affine.const_(0)
            return RelAtom(E, (first, self.affine(scope)))
        if k == 3:
            parts = tuple(self.pred(scope, depth - 1) for _ in range(self.draw(st.integers(2, 3))))
            return self.pick((And, Or))(parts)
        if k == 4:
            parts = [self.pred(scope, depth - 1) for _ in range(2)]
            return self.pick((conj, disj))(*parts)
        if k == 5:
            try:
                return negate(self.pred(scope, depth - 1))
            except TypeCheckError:  # 'not' of a relation atom or an exists is not in the language
                return TRUE
        var = IndexVar(self.pick(NAMES))
        size = self.pick(RANGES)
        return Exists(var, size, self.pred(scope + ((var, size),), depth - 1))

    def index_into(self, size, scope):
        """An index in range ``[0, size)`` at every point of ``scope``, or None."""
        fits = [v for v, s in scope if s is size]
        if not fits:
            return None
        v = Affine.var(self.pick(fits))
        return self.pick((v, size - 1 - v))

    def value_of(self, t, scope, lets, depth):
        """An expression of type ``t``."""
        candidates = [v for v in INPUTS + lets if v.type is t]
        if depth <= 0 or self.draw(st.integers(0, 5)) == 5:
            if t is R:
                return self.pick((Const(self.draw(st.sampled_from((0, 1, -1, 2, 0.5, -2.5, 1e-3)))),) + tuple(candidates))
            if candidates:
                return self.pick(candidates)
        d = depth - 1
        if t is R:
            k = self.draw(st.integers(0, 9))
            if k == 0:
                return Add(self.value_of(R, scope, lets, d), self.value_of(R, scope, lets, d))
            if k == 1:
                return Mul(self.value_of(R, scope, lets, d), self.value_of(R, scope, lets, d))
            if k == 2:
                return Add(self.value_of(R, scope, lets, d), Mul(Const(-1), self.value_of(R, scope, lets, d)))
            if k == 3:
                from tensorlang.functions import lookup

                fn = self.pick(FUNCTIONS)
                return Call(fn, tuple(self.value_of(R, scope, lets, d) for _ in range(lookup(fn).arity)))
            if k == 4:
                var, size = IndexVar(self.pick(NAMES)), self.pick(RANGES)
                return Sum(var, size, self.value_of(R, scope + ((var, size),), lets, d))
            if k == 5:
                size = self.pick(RANGES)
                tensor_value = self.value_of(TensorType(size, R), scope, lets, d)
                index = self.index_into(size, scope)
                if index is None:
                    var = IndexVar(self.pick(NAMES))
                    return Sum(var, size, Access(tensor_value, Affine.var(var)))
                return Access(tensor_value, index)
            if k == 6:
                return Proj(0, self.value_of(PairType(R, tensor([N])), scope, lets, d))
            if k == 7:
                return Const(self.draw(st.one_of(st.integers(-10, 10), st.floats(allow_nan=False))))
        if isinstance(t, TensorType):
            k = self.draw(st.integers(0, 3))
            if k == 0 and t is tensor([N]) and self.draw(st.booleans()):
                return Proj(1, self.value_of(PairType(R, t), scope, lets, d))
            if k == 1 and t is tensor([M]):
                index = self.index_into(N, scope)
                if index is not None:
                    return Access(A, index)
            var = IndexVar(self.pick(NAMES))
            return Gen(var, t.size, self.value_of(t.elem, scope + ((var, t.size),), lets, d))
        k = self.draw(st.integers(0, 3))
        if isinstance(t, PairType) and k < 2:
            return Pair(self.value_of(t.first, scope, lets, d), self.value_of(t.second, scope, lets, d))
        if k == 2:
            return Guard(self.pred(scope, 2), self.value_of(t, scope, lets, d))
        return self.let(t, scope, lets, d)

    def let(self, t, scope, lets, depth):
        vt = self.pick((R, tensor([N]), PairType(R, tensor([N]))))
        value = self.value_of(vt, scope, lets, depth)
        names = ["a", "b", "c"]
        if not self.shadow:
            names = [s for s in names if all(v.name != s for v in lets)]
            if not names:
                return self.value_of(t, scope, lets, depth)
        else:
            names += ["y", "n", "in"]
        var = Var(self.pick(names), vt)
        return Let(var, value, self.value_of(t, scope, lets + (var,), depth))


@st.composite
def terms(draw, shadow=False):
    gen = _Gen(draw, shadow)
    t = draw(st.sampled_from((R, R, tensor([N]), PairType(R, tensor([N + 1])), tensor([N, M]))))
    e = gen.value_of(t, (), (), draw(st.integers(3, 9)))
    if draw(st.booleans()):
        e = Guard(gen.pred((), 2), e)
    return e


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(terms())
def test_random_terms_round_trip(e):
    roundtrip(e)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(terms(shadow=True))
def test_random_terms_with_shadowing_lets_round_trip_up_to_let_names(e):
    back = parse(to_source(e))
    assert let_canonical(back) == let_canonical(e), to_source(e)
