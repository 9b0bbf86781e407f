"""The paper's notation (Fig. 3) in LaTeX, for ``Expr._repr_latex_`` in notebooks.

``\\boxplus_{i=0}^{n-1} e``, ``\\sum_{j=0}^{m-1} e`` (an index's first and last values),
``[p] \\cdot e``, ``\\pi_0 e``, ``\\text{let } x = e_0 \\text{ in } e_1``, ``\\wedge \\vee \\exists``,
accesses ``x[i + j]``.  The structure (precedence, parentheses, names made unambiguous) is the text
printer's; the spelling differs, and three things read better than in text:

* ``⊞`` is a large operator with its limits below and above, as ``Σ`` is (``GEN``);
* the lets that lead a program are one per line (an ``aligned`` block), not one long line;
* a product with the constant ``-1`` (``x * -1``, as derivatives build them) prints as ``-x``.
"""
from __future__ import annotations

import re

from .declarations import body_of
from .nodes import OPERATIONS, Const, Mul
from .printer import UNARY, TextPrinter
from .substitute import rebuild

__all__ = ["to_latex", "LatexPrinter"]

_GREEK = frozenset(
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi pi rho sigma tau upsilon "
    "phi chi psi omega Gamma Delta Theta Lambda Xi Pi Sigma Upsilon Phi Psi Omega".split()
)
_FUNCTIONS = {"exp": r"\exp", "log": r"\log", "sin": r"\sin", "cos": r"\cos", "tan": r"\tan",
              "tanh": r"\tanh", "max": r"\max", "min": r"\min"}
_SPECIAL = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "_": r"\_", "$": r"\$", "&": r"\&",
            "#": r"\#", "%": r"\%", "^": r"\textasciicircum{}", "~": r"\textasciitilde{}"}


def _escape(text: str) -> str:
    return "".join(_SPECIAL.get(c, c) for c in text)


#: the generator symbol: ``\\boxplus`` at about the size of a displayed ``\\sum``, centred on the math axis
#: (``\\vcenter``), limits below and above.  MathJax and KaTeX read ``\\vcenter``'s argument as math; LaTeX
#: itself would want ``\\vcenter{\\hbox{$...$}}``, whose inner ``$`` would end a notebook's ``$...$``.
GEN = r"\mathop{\vcenter{\Large\boxplus}}\limits"


class LatexPrinter(TextPrinter):
    TIMES = r" \cdot "
    DIVIDE = " / "
    AND = r" \wedge "
    OR = r" \vee "
    CMP = {"<": "<", "<=": r"\leq", "=": "=", "!=": r"\neq"}
    TRUE = r"\text{true}"
    FALSE = r"\text{false}"
    PROJ_LEVEL = UNARY  # \pi_0 e is a prefix operator

    def name(self, name: str) -> str:
        m = re.fullmatch(r"([A-Za-z]+)(\d+)", name)
        if m:  # x1 -> x_{1}
            return f"{self.name(m.group(1))}_{{{m.group(2)}}}"
        if name in _GREEK:
            return "\\" + name
        if len(name) == 1 and name.isalpha():
            return name
        if re.fullmatch(r"[A-Za-z]\w*", name):
            return r"\mathit{" + _escape(name) + "}"
        return r"\text{" + _escape(name) + "}"

    def paren(self, s: str) -> str:
        return r"\left(" + s + r"\right)"

    def number(self, value) -> str:
        text = super().number(value)
        if text in ("1e999", "-1e999"):
            return text.replace("1e999", r"\infty")
        if text == "nan":
            return r"\text{NaN}"
        m = re.fullmatch(r"(-?[\d.]+)e([+-]?)0*(\d+)", text)
        if m:
            sign = "-" if m.group(2) == "-" else ""
            return rf"{m.group(1)} \times 10^{{{sign}{m.group(3)}}}"
        return text

    def coeff_term(self, coeff: int, name: str) -> str:
        return name if coeff == 1 else f"{coeff} {name}"

    def proj(self, k: int, operand: str) -> str:
        return rf"\pi_{k} {operand}"

    def call(self, fn: str, args: list[str]) -> str:
        if fn in _FUNCTIONS:
            return _FUNCTIONS[fn] + self.paren(", ".join(args))
        if fn == "sqrt" and len(args) == 1:
            return r"\sqrt{" + args[0] + "}"
        if fn == "abs" and len(args) == 1:
            return r"\left|" + args[0] + r"\right|"
        if fn == "recip" and len(args) == 1:
            return r"\frac{1}{" + args[0] + "}"
        if fn == "pow" and len(args) == 2:
            return "{" + self.paren(args[0]) + "}^{" + args[1] + "}"
        head = self.name(fn) if len(fn) == 1 else r"\operatorname{" + _escape(fn) + "}"
        return head + self.paren(", ".join(args))

    def let(self, name: str, value: str, body: str) -> str:
        return rf"\text{{let }} {name} = {value} \text{{ in }} {body}"

    def extent(self, size, env) -> str:
        """The last value of the index, as the bound above the operator: ``n - 1`` for ``i:n``."""
        return self.affine(size - 1, env)

    def loop(self, kind: str, bindings: list[tuple[str, str]], body: str) -> str:
        symbol = {"gen": GEN, "sum": r"\sum", "max": r"\max", "min": r"\min", "exists": r"\exists"}[kind]
        return "".join(f"{symbol}_{{{n}=0}}^{{{s}}} " for n, s in bindings) + body

    def let_line(self, name: str, value: str) -> str:
        return rf"\text{{let }} {name} = {value} \text{{ in}}"


def _is_minus_one(e) -> bool:
    return isinstance(e, Const) and e.value == -1


def _negations_first(e, memo: dict):
    """``e`` with every ``x * -1`` (x not a constant) turned into ``-1 * x``, which prints as ``-x``."""
    if id(e) not in memo:
        out = rebuild(e, lambda c: _negations_first(c, memo))
        if isinstance(out, Mul) and _is_minus_one(out.right) and not isinstance(out.left, Const):
            out = Mul(out.right, out.left)
        memo[id(e)] = (e, out)  # e is kept alive with its id
    return memo[id(e)][1]


def to_latex(e) -> str:
    """``e`` in the paper's notation, without surrounding ``$``."""
    from .nodes import Pred

    printer = LatexPrinter(e)
    if isinstance(e, Pred):
        return printer.pred(e, printer.root_env)
    lines = printer.lines(_negations_first(body_of(e), {}), printer.root_env)
    if len(lines) == 1:
        return lines[0]
    return r"\begin{aligned}" + r" \\ ".join("&" + line for line in lines) + r"\end{aligned}"


OPERATIONS.install(to_latex=to_latex)
