"""The paper's notation for notebooks: ``expr._repr_latex_()``."""
from tensorlang.latex import to_latex
from tensorlang.nodes import Affine, Gen, IndexVar, SizeVar, Var, tensor
from tensorlang.parser import parse


def test_convolution():
    e = parse("x : [n + m - 1]R\nc : [m]R\ngen(i:n) sum(j:m) x[i + j] * c[j]")
    assert to_latex(e) == r"\boxplus_{i=0}^{n} \sum_{j=0}^{m} x[i + j] \cdot c[j]"
    assert e._repr_latex_() == "$" + to_latex(e) + "$"


def test_iverson_brackets_lets_and_predicates():
    e = parse("x : R\nlet A = gen(i:n, j:n) [i = j] * x in sum(k:n) A[k, k]")
    tex = to_latex(e)
    assert r"\text{let } A = \boxplus_{i=0}^{n} \boxplus_{j=0}^{n} [i = j] \cdot x \text{ in } \sum_{k=0}^{n} A[k, k]" == tex
    e = parse("E : rel[n, n]\nx : [n]R\ngen(i:n) [i != 0 or exists(j:n) E(i, j) and i <= j] * x[i]")
    assert to_latex(e) == r"\boxplus_{i=0}^{n} [i \neq 0 \vee \exists_{j=0}^{n} E(i, j) \wedge i \leq j] \cdot x[i]"


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
    assert tex == r"\boxplus_{i=0}^{n} \boxplus_{i_{1}=0}^{n} \mathit{dx}[i] \cdot \mathit{dx}[i_{1}]"
