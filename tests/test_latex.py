"""The paper's notation for notebooks: ``expr._repr_latex_()``."""
import tensorlang as tl
from tensorlang.latex import GEN, to_latex
from tensorlang.nodes import Affine, Gen, IndexVar, SizeVar, Var, tensor
from tensorlang.parser import parse


def test_convolution():
    e = parse("x : [n + m - 1]R\nc : [m]R\ngen(i:n) sum(j:m) x[i + j] * c[j]")
    assert to_latex(e) == GEN + r"_{i=0}^{n - 1} \sum_{j=0}^{m - 1} x[i + j] \cdot c[j]"
    assert e._repr_latex_() == r"$\displaystyle " + to_latex(e) + "$"


def test_iverson_brackets_lets_and_predicates():
    e = parse("x : R\nlet A = gen(i:n, j:n) [i = j] * x in sum(k:n) A[k, k]")
    tex = to_latex(e)
    assert (r"\begin{aligned}&\text{let } A = " + GEN + "_{i=0}^{n - 1} " + GEN + r"_{j=0}^{n - 1} [i = j] \cdot x \text{ in} \\ "
            r"&\sum_{k=0}^{n - 1} A[k, k]\end{aligned}") == tex
    e = parse("E : rel[n, n]\nx : [n]R\ngen(i:n) [i != 0 or exists(j:n) E(i, j) and i <= j] * x[i]")
    assert to_latex(e) == GEN + r"_{i=0}^{n - 1} [i \neq 0 \vee \exists_{j=0}^{n - 1} E(i, j) \wedge i \leq j] \cdot x[i]"


def test_pairs_calls_and_signs():
    e = parse("p : (R, [n]R)\n(exp(p.0) - sqrt(p.0 * p.0) / 2, gen(i:n) -p.1[i])")
    tex = to_latex(e)
    assert r"\pi_0 p" in tex and r"\exp\left(" in tex and r"\sqrt{" in tex
    assert r"\left(\pi_1 p\right)[i]" in tex
    assert "(" in tex and "-" in tex


def test_renamed_indices_and_names():
    x = Var("dx", tensor([Affine.var(SizeVar("n"))]))
    i1, i2 = IndexVar("i"), IndexVar("i")
    n = Affine.var(SizeVar("n"))
    e = Gen(i1, n, Gen(i2, n, x[i1] * x[i2]))
    tex = to_latex(e)
    assert tex == GEN + "_{i=0}^{n - 1} " + GEN + r"_{i_{1}=0}^{n - 1} \mathit{dx}[i] \cdot \mathit{dx}[i_{1}]"


def test_leading_lets_one_per_line_and_nested_lets_inline():
    g = tl.grad(tl.parse("x : [n + m - 1]R; c : [m]R; z : [n]R\n"
                         "let f = gen(i:n) sum(j:m) x[i + j] * c[j] in sum(i:n) (f[i] - z[i]) * (f[i] - z[i])"), "x")
    tex = to_latex(g)
    assert tex.startswith(r"\begin{aligned}&\text{let } ") and tex.endswith(r"\end{aligned}")
    rows = tex[len(r"\begin{aligned}"):-len(r"\end{aligned}")].split(r" \\ ")
    assert len(rows) == str(g).count("let ") + 1 and all(r.startswith("&") for r in rows)
    assert all(r.endswith(r"\text{ in}") for r in rows[:-1]) and "let" not in rows[-1]
    inner = to_latex(tl.parse("x : R; (let y = x * x in y) + 1"))
    assert "aligned" not in inner and r"\text{let } y" in inner


def test_generator_is_a_large_operator_with_limits():
    tex = to_latex(tl.parse("x : [n]R; gen(i:n) x[i]"))
    assert tex == r"\mathop{\vcenter{\Large\boxplus}}\limits_{i=0}^{n - 1} x[i]"
    assert "$" not in GEN  # a notebook's $...$ must not end inside it


def test_negation_is_a_minus_sign():
    e = tl.parse("z : [n]R; gen(i:n) z[i] * -1")
    assert to_latex(e) == GEN + "_{i=0}^{n - 1} -z[i]"
    d = tl.parse("x : R; z : R; x + z * -1")
    assert to_latex(d) == "x - z"
    assert to_latex(tl.parse("x : R; -x")) == "-x" and to_latex(tl.parse("x : R; 2 * -1")) == "2 \\cdot -1"


def test_bounds_are_the_first_and_last_values_of_the_index():
    """``i:n`` runs over 0 .. n-1: the bound above the operator is n - 1, not n (which reads as n + 1 terms)."""
    e = parse("x : [n + m - 1]R; y : [2]R; (sum(i:n + m - 1) x[i]) + sum(j:2) y[j]")
    assert to_latex(e) == r"\left(\sum_{i=0}^{m + n - 2} x[i]\right) + \sum_{j=0}^{1} y[j]"
    assert str(e).endswith("(sum(i:m + n - 1) x[i]) + sum(j:2) y[j]")  # the text keeps the size
