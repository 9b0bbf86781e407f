"""The parser: every construct of docs/language.md builds the nodes the language decisions fix,
and every error is of the right kind and placed (line, column, caret) at the construct it is about."""
import pytest

from tensorlang.declarations import body_of
from tensorlang.errors import BoundsError, ParseError, TypeCheckError
from tensorlang.functions import define_function
from tensorlang.nodes import (
    FALSE, R, TRUE, Access, Add, Affine, And, Call, Cmp, Const, Exists, Gen, Guard, Let, Mul, Or, Pair,
    PairType, Proj, RelAtom, RelType, SizeVar, Sum, Var, tensor,
)
from tensorlang.parser import parse, parse_type

n, m = SizeVar("n"), SizeVar("m")
N, M = Affine.var(n), Affine.var(m)
x = Var("x", R)
y = Var("y", R)
z = Var("z", R)
v = Var("v", tensor([N]))
A = Var("A", tensor([N, M]))
Rel = Var("Rel", RelType((N, M)))
DECLS = dict(x="R", y="R", z="R", v="[n]R", A="[n][m]R", Rel="rel[n, m]")


def p(src, **decls):
    """The expression of ``src`` parsed with DECLS (the inputs every test may read) declared: without
    the declarations of the inputs it does not read."""
    return body_of(parse(src, **{**DECLS, **decls}))


def located(exc_type, src, line, column, **decls):
    """The error parsing ``src`` raises, checked to be of ``exc_type`` and placed at line:column."""
    with pytest.raises(exc_type) as info:
        p(src, **decls)
    err = info.value
    assert err.location is not None, err
    assert (err.location.line, err.location.column) == (line, column), str(err)
    text = str(err)
    assert text.startswith(f"<string>:{line}:{column}: ")
    source_line, caret = text.splitlines()[1:3]
    assert source_line.strip() == src.splitlines()[line - 1].strip()
    assert caret.index("^") - 4 == column - 1  # the caret sits under the column
    return err


def one(e):
    """The single index variable bound at the top of ``e`` and ``e``'s body."""
    return e.var, e.body


# --------------------------------------------------------------------------------------------------
# programs, declarations, comments


def test_declarations_comments_and_separators():
    src = """
    # a comment
    a : R      # trailing comment
    b : [n + 1]R; c : (R, [m]R)
    a +
      sum(i:n + 1)
        b[i]
      ;
    """
    e = parse(src)
    a, b = Var("a", R), Var("b", tensor([N + 1]))
    body = body_of(e)  # c is declared and not read: the program keeps its declaration
    assert isinstance(body, Add) and body.left is a and body.right.body is Access(b, Affine.var(body.right.var))
    assert e.free_vars == {"a": R, "b": tensor([N + 1]), "c": PairType(R, tensor([M]))}


def test_keyword_declarations_string_and_type():
    assert parse("sum(i:n) x[i]", x="[n]R").type is R
    assert parse("x", x=tensor([N + M - 1])).type is tensor([N + M - 1])
    # the same declaration both in the text and as an argument is fine
    assert parse("x : R\nx", x="R") is x


def test_parse_type():
    assert parse_type("[n][m]R") is tensor([N, M])
    assert parse_type("(R, [2*n]R)") is PairType(R, tensor([N * 2]))
    assert parse_type("rel[n, m]") is RelType((N, M))


def test_size_variables_are_inferred():
    e = p("gen(i:n + m) [0 < n] * v[0]")
    assert set(e.sizes) == {"n", "m"}


def test_constants():
    assert p("2") is Const(2) and type(p("2").value) is int
    assert p("0.5") is Const(0.5)
    assert p("1e-3") is Const(1e-3)
    assert p("2.5E+2") is Const(250.0)
    assert p("-2") is Const(-2)
    assert p("-(2)") is Mul(Const(-1), Const(2))


# --------------------------------------------------------------------------------------------------
# arithmetic


def test_addition_and_subtraction():
    assert p("x + y + z") is Add(Add(x, y), z)
    assert p("x - y") is Add(x, Mul(Const(-1), y))
    assert p("x - 2") is Add(x, Const(-2))
    assert p("x - 2.5") is Add(x, Const(-2.5))
    assert p("x + -2") is Add(x, Const(-2))
    assert p("x - y * z") is Add(x, Mul(Const(-1), Mul(y, z)))
    assert p("x - -2") is Add(x, Mul(Const(-1), Const(-2)))
    assert p("-x") is Mul(Const(-1), x)
    assert p("-x * y") is Mul(Mul(Const(-1), x), y)


def test_products_fold_from_the_right():
    assert p("x * y * z") is Mul(x, Mul(y, z))
    assert p("(x * y) * z") is Mul(Mul(x, y), z)
    assert p("x · y") is Mul(x, y)
    assert p("x / y") is Mul(x, Call("recip", (y,)))
    assert p("x / y * z") is Mul(x, Mul(Call("recip", (y,)), z))
    assert p("x + y * z") is Add(x, Mul(y, z))


def test_iverson_brackets_guard_the_rest_of_the_product():
    lt = Cmp("<", Affine.const_(0), N)
    assert p("[0 < n] * x * y") is Guard(lt, Mul(x, y))
    assert p("x * [0 < n] * y") is Mul(x, Guard(lt, y))
    assert p("[0 < n]") is Guard(lt, Const(1))
    assert p("x * [0 < n]") is Mul(x, Guard(lt, Const(1)))
    assert p("[0 < n] * [0 < m] * x") is Guard(lt, Guard(Cmp("<", Affine.const_(0), M), x))
    assert p("([0 < n]) * x") is Mul(Guard(lt, Const(1)), x)
    # brackets guard values of any type
    assert p("[0 < n] * v") is Guard(lt, v)
    assert p("[0 < n] * x + y") is Add(Guard(lt, x), y)


def test_calls():
    assert p("exp(x)") is Call("exp", (x,))
    assert p("pow(x, 2) + max(x, y)") is Add(Call("pow", (x, Const(2))), Call("max", (x, y)))
    define_function("test_parser_softplus", lambda u: u * u)
    assert p("test_parser_softplus(x)") is Call("test_parser_softplus", (x,))


def test_pairs_and_projections():
    pr = Var("pr", PairType(R, PairType(R, tensor([N]))))
    e = parse("pr : (R, (R, [n]R))\n(pr.0, [0 < n] * pr.1.1[0])")
    assert isinstance(e, Pair)
    assert e.first is Proj(0, pr)
    assert e.second.body is Access(Proj(1, Proj(1, pr)), Affine.const_(0))
    assert p("(x, y).1") is Proj(1, Pair(x, y))


# --------------------------------------------------------------------------------------------------
# binders


def test_gen_and_sum():
    e = p("gen(i:n) sum(j:m) A[i, j] * x")
    i, body = one(e)
    assert isinstance(e, Gen) and e.size is N and isinstance(body, Sum)
    j = body.var
    assert body.body is Mul(Access(Access(A, Affine.var(i)), Affine.var(j)), x)


def test_multi_variable_binders_and_unicode():
    assert p("gen(i:n, j:m) A[i, j]") == p("gen(i:n) gen(j:m) A[i][j]")
    assert p("⊞(i:n) Σ(j:m) A[i, j] · x") == p("gen(i:n) sum(j:m) A[i, j] * x")
    assert p("∑(j:m) [0 < n] * A[0, j]") == p("sum(j:m) [0 < n] * A[0, j]")
    assert p("sum(i:n, j:m) A[i, j]") == p("sum(i:n) sum(j:m) A[i, j]")


def test_binder_bodies_extend_to_the_right():
    e = p("sum(i:n) v[i] + 1")
    assert isinstance(e, Sum) and isinstance(e.body, Add)
    e = p("(sum(i:n) v[i]) + 1")
    assert isinstance(e, Add) and isinstance(e.left, Sum)
    e = p("x * sum(i:n) v[i] + 1")
    assert isinstance(e, Mul) and e.left is x and isinstance(e.right.body, Add)
    e = p("x + -sum(i:n) v[i]")
    assert e.right.left is Const(-1) and isinstance(e.right.right, Sum)


def test_let():
    e = p("let t = x * y in t + t")
    t = Var("t", R)
    assert e is Let(t, Mul(x, y), Add(t, t))
    e2 = p("let t : R = x * y in t + t")
    assert e2 is e
    e3 = p("let w : [n]R = gen(i:n) v[i] in let u = w in [0 < n] * u[0]")
    assert e3.var.type is tensor([N])
    # the value of a let may itself be a let
    assert p("let a = let b = x in b in a").value.body is Var("b", R)


def test_indices_are_affine_forms():
    e = p("gen(i:n) [i < n - 1] * v[2 * (i + 1) - i - 1]")
    assert e.body.body.index is Affine.var(e.var) + 1
    e = p("gen(i:n) v[n - 1 - i]")
    assert e.body.index is N - 1 - Affine.var(e.var)
    e = p("gen(i:n) v[-i + n - 1]")
    assert e.body.index is N - 1 - Affine.var(e.var)


# --------------------------------------------------------------------------------------------------
# predicates


def test_comparisons():
    e = p("gen(i:n) [i > 0] * [i >= 1] * [i == 2] * [i ≠ 3] * [i ≤ 4] * [i ≥ 5] * v[i]")
    i = Affine.var(e.var)
    zero = Affine.const_(0)
    preds = []
    g = e.body
    while isinstance(g, Guard):
        preds.append(g.pred)
        g = g.body
    assert preds == [
        Cmp("<", zero, i), Cmp("<=", Affine.const_(1), i), Cmp("=", i, Affine.const_(2)),
        Cmp("!=", i, Affine.const_(3)), Cmp("<=", i, Affine.const_(4)), Cmp("<=", Affine.const_(5), i),
    ]


def test_chained_comparisons_are_conjunctions():
    e = p("gen(i:n, j:m) [0 <= i - j < m and i = 1] * A[i, j]")
    i, j = Affine.var(e.var), Affine.var(e.body.var)
    d = i - j
    assert e.body.body.pred is And((Cmp("<=", Affine.const_(0), d), Cmp("<", d, M), Cmp("=", i, Affine.const_(1))))
    e = p("gen(i:n) [0 <= i < n] * v[i]")
    assert e.body.pred is And((Cmp("<=", Affine.const_(0), Affine.var(e.var)), Cmp("<", Affine.var(e.var), N)))


def test_and_or_not_true_false():
    e = p("gen(i:n) [i < 1 or i < 2 and i < 3 or true] * v[i]")
    i = Affine.var(e.var)
    c = [Cmp("<", i, Affine.const_(k)) for k in (1, 2, 3)]
    assert e.body.pred is Or((c[0], And((c[1], c[2])), TRUE))
    e = p("gen(i:n) [(i < 1 ∨ i < 2) ∧ false] * v[i]")
    i = Affine.var(e.var)
    c = [Cmp("<", i, Affine.const_(k)) for k in (1, 2, 3)]
    assert e.body.pred is And((Or((c[0], c[1])), FALSE))
    e = p("gen(i:n) [not (i < 1 and i = 2)] * v[i]")
    i = Affine.var(e.var)
    assert e.body.pred is Or((Cmp("<=", Affine.const_(1), i), Cmp("!=", i, Affine.const_(2))))
    assert p("gen(i:n) [¬ i < 1] * v[i]") == p("gen(i:n) [1 <= i] * v[i]")


def test_relations_and_exists():
    e = p("gen(i:n, j:m) [Rel(i, j)] * A[i, j]")
    i, j = e.var, e.body.var
    assert e.body.body.pred is RelAtom(Rel, (Affine.var(i), Affine.var(j)))
    e = p("gen(i:n) [exists(j:m) Rel(i, j) and j < 2] * v[i]")
    ex = e.body.pred
    assert isinstance(ex, Exists) and ex.size is M and isinstance(ex.body, And)
    assert p("gen(i:n) [∃(j:m) Rel(i, j)] * v[i]") == p("gen(i:n) [exists(j:m) Rel(i, j)] * v[i]")
    e = p("[exists(i:n, j:m) Rel(i, j)]")
    assert isinstance(e.pred, Exists) and isinstance(e.pred.body, Exists)


def test_quoted_names():
    s = Var("sum", R)
    assert parse("`sum` : R\n`sum` * 2") is Mul(s, Const(2))
    odd = Var("a b`c", R)
    assert parse("`a b\\`c` : R; `a b\\`c`") is odd


def test_paper_programs():
    conv = parse("x : [n + m - 1]R\nc : [m]R\ngen(i:n) sum(j:m) x[i + j] * c[j]")
    assert conv.type is tensor([N])
    diag = parse("x : [n]R\nlet A = gen(i:n, j:n) [i = j] * x[i] in sum(k:n) A[k, 0] * A[0, k]")
    assert diag.type is R


# --------------------------------------------------------------------------------------------------
# syntax errors


def test_parse_error_at_end():
    err = located(ParseError, "x +", 1, 4)
    assert "unexpected end of the program" in err.message
    assert "expected an expression" in err.message


def test_parse_error_names_what_was_expected():
    err = located(ParseError, "gen(i:n x", 1, 9)
    assert "expected" in err.message and "')'" in err.message
    err = located(ParseError, "let t = x t", 1, 11)
    assert "'in'" in err.message


def test_parse_error_on_a_later_line():
    src = "x : R\ny : R\nx + * y"
    err = located(ParseError, src, 3, 5)
    assert "'*'" in err.message


def test_parse_error_bad_character():
    err = located(ParseError, "x @ y", 1, 3)
    assert "'@'" in err.message


def test_parse_error_non_affine_syntax_in_index():
    err = located(TypeCheckError, "v[1.5]", 1, 3)
    assert "1.5 is not an integer" in err.message
    err = located(TypeCheckError, "gen(i:n) v[v[i]]", 1, 12)  # a read through v, which is no index array
    assert "affine" in err.message and "v : [p]index[n]" in err.message


def test_parse_error_missing_type():
    err = located(ParseError, "w : \nw", 2, 1)
    assert "a type" in err.message


def test_empty_program():
    with pytest.raises(ParseError):
        parse("  # nothing\n")


# --------------------------------------------------------------------------------------------------
# scope, type and affinity errors


def test_undeclared_variable():
    err = located(TypeCheckError, "x + q", 1, 5)
    assert "undeclared variable q" in err.message


def test_undeclared_variable_suggests_the_closest_value_in_scope():
    err = located(TypeCheckError, "c : [n]R; sum(i:n) cc[i]", 1, 20)
    assert err.message == "undeclared variable cc; did you mean 'c'?"
    err = located(TypeCheckError, "let total = x in totl + 1", 1, 18)
    assert err.message.endswith("did you mean 'total'?")
    err = located(TypeCheckError, "gen(ij:n) x * ijk", 1, 15)  # an index variable is not a value
    assert err.message == "undeclared variable ijk"


@pytest.mark.parametrize("src, column, meant", [
    ("gne(i:n) x", 6, "gen"),
    ("smu(i:n) x", 6, "sum"),
    ("summ(i:n, j:m) A[i, j]", 7, "sum"),
    ("lte y = x in y", 5, "let"),
    ("let y = x ni y", 11, "in"),
    ("sum(i:n) [i > 0 adn i < 3] * x", 17, "and"),
    ("sum(i:n) [i < 1 ro i > 3] * x", 17, "or"),
    ("sum(i:n) [exist(j:n) i < j] * x", 18, "exists"),
])
def test_misspelt_keyword_gets_a_did_you_mean(src, column, meant):
    err = located(ParseError, src, 1, column)
    assert err.message.endswith(f"is not a keyword; did you mean {meant!r}?)"), err.message


def test_a_name_far_from_every_keyword_gets_no_keyword_hint():
    for src in ("y y", "frob(i:n) x", "foo y = x in y"):
        with pytest.raises(ParseError) as info:
            p(src)
        assert "keyword" not in info.value.message, info.value.message


def test_rebinding_is_an_error():
    err = located(TypeCheckError, "let x = 1 in x", 1, 5)
    assert "x" in err.message and "already bound" in err.message
    err = located(TypeCheckError, "gen(i:n) sum(i:m) A[i, 0]", 1, 14)
    assert "i" in err.message
    err = located(TypeCheckError, "gen(i:n, i:n) x", 1, 10)
    located(TypeCheckError, "let t = x in let t = y in t", 1, 18)
    with pytest.raises(TypeCheckError) as info:
        parse("a : R\na : R\na")
    assert (info.value.location.line, info.value.location.column) == (2, 1)


def test_size_variable_cannot_be_bound():
    err = located(TypeCheckError, "gen(n:m) v[n]", 1, 5)
    assert "size variable" in err.message
    err = located(TypeCheckError, "(gen(i:n) x, let n = 1 in n)", 1, 18)
    assert "size variable" in err.message
    err = located(TypeCheckError, "k : R\ngen(i:k) x", 2, 7)
    assert "data value" in err.message


def test_name_out_of_scope():
    err = located(TypeCheckError, "(gen(i:n) v[i], v[i])", 1, 19)
    assert "not in scope" in err.message


def test_index_variable_is_not_a_value():
    err = located(TypeCheckError, "gen(i:n) i", 1, 10)
    assert "index variable i" in err.message


def test_non_affine_index():
    err = located(TypeCheckError, "gen(i:n, j:m) A[i * j, j]", 1, 17)
    assert "not affine" in err.message and "i * j" in err.message


def test_data_value_in_index():
    err = located(TypeCheckError, "v[x]", 1, 3)
    assert "x is a data value" in err.message
    located(TypeCheckError, "gen(i:x) y", 1, 7)


def test_range_depends_on_index():
    err = located(TypeCheckError, "gen(i:n) gen(j:i) x", 1, 16)
    assert "range of j" in err.message


def test_arity_and_unknown_function():
    err = located(TypeCheckError, "x + exp(x, y)", 1, 5)
    assert "exp takes 1 argument" in err.message
    err = located(TypeCheckError, "x + frobnicate(x)", 1, 5)
    assert "frobnicate" in err.message and "did you mean" not in err.message
    err = located(TypeCheckError, "x + exq(x)", 1, 5)
    assert err.message.endswith("did you mean 'exp'?")


def test_not_on_relation_or_exists():
    err = located(TypeCheckError, "gen(i:n, j:m) [not Rel(i, j)] * A[i, j]", 1, 16)
    assert "not" in err.message
    located(TypeCheckError, "gen(i:n) [not exists(j:m) Rel(i, j)] * v[i]", 1, 11)


def test_scalar_operands():
    err = located(TypeCheckError, "x + v", 1, 5)
    assert "[n]R" in err.message
    located(TypeCheckError, "v * x", 1, 1)
    located(TypeCheckError, "x * [0 < n] * v", 1, 5)
    located(TypeCheckError, "-v", 1, 2)
    located(TypeCheckError, "exp(v)", 1, 5)
    located(TypeCheckError, "sum(i:n) v", 1, 10)
    located(TypeCheckError, "x / v", 1, 5)


def test_access_and_projection_errors():
    err = located(TypeCheckError, "x[0]", 1, 3)
    assert "R" in err.message
    located(TypeCheckError, "gen(i:n) v[i, i]", 1, 15)
    err = located(TypeCheckError, "x.0", 1, 2)
    assert "pair" in err.message
    err = located(TypeCheckError, "(x, y).2", 1, 7)
    assert ".0 and .1" in err.message


def test_relation_misuse():
    err = located(TypeCheckError, "Rel + x", 1, 1)
    assert "relation" in err.message
    located(TypeCheckError, "Rel(0, 0)", 1, 1)
    err = located(TypeCheckError, "[exp(0)] * x", 1, 2)
    assert "relation" in err.message
    located(TypeCheckError, "[x(0)] * x", 1, 2)
    located(TypeCheckError, "[Rel(0)] * x", 1, 2)


def test_let_annotation_is_checked():
    err = located(TypeCheckError, "let t : [n]R = x in t", 1, 16)
    assert "[n]R" in err.message


def test_bad_declared_type():
    located(TypeCheckError, "w : rel[n]\nw + x", 2, 1)
    with pytest.raises(TypeCheckError):
        parse("x", x=42)
    with pytest.raises(ParseError) as info:
        parse("x", x="[n]")
    assert info.value.location.filename == "<declaration of x>"


def test_bounds_errors_are_located():
    err = located(BoundsError, "gen(i:n)\n  v[i + 1]", 2, 5)
    assert "v[i + 1]" in err.message


def test_a_constant_index_within_a_padded_size_needs_no_loop():
    """``x : [n + 3]R; x[0]``: 0 < n + 3 for every size n >= 0, with no loop around to say n >= 0."""
    import tensorlang as tl

    assert tl.evaluate(parse("w : [n + 3]R\nw[0] + w[2]"), w=[1.0, 2.0, 3.0]) == 4.0
    located(BoundsError, "w : [n + 3]R\nw[3]", 2, 3)


def test_a_program_too_deep_for_the_recursion_limit_is_reported_not_a_crash():
    import tensorlang as tl
    from tensorlang.errors import TensorLangError

    src = "x : [n + 3]R\n" + " + ".join(f"x[{j % 3}]" for j in range(30_000))
    with pytest.raises(TensorLangError, match="nested too deeply"):
        tl.parse(src)
