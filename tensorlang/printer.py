"""The text printer: nodes back to the syntax of docs/language.md.

``to_source(e)`` is a complete program (one declaration per input, then the expression, the lets that
lead it one per line) such that ``parse(to_source(e)) == e`` for every well-typed ``Expr``, however it
was built.  That takes three things beyond precedence:

* The parser's readings are inverted exactly: ``Add(a, Mul(Const(-1), b))`` prints as ``a - b`` and
  ``Add(a, Const(-2))`` as ``a - 2``; a product chain reads as factors folded from the right, so a
  left-nested ``Mul(Mul(a, b), c)`` gets parentheses and a bracket factor guards what follows it.
* Names are made unambiguous: an index variable takes its display name unless that name is already in
  scope, is an input or size name or a keyword, in which case it becomes ``i1``, ``i2``, ...; a let
  keeps its name unless it would rebind a name in scope; names that are keywords or not identifiers are
  written in backquotes (`` `sum` ``), which the parser reads as names.
* Binders (``let``, ``gen``, ``sum``, ``exists``) extend as far right as possible, so one is printed bare
  only where nothing follows it, and in parentheses elsewhere.

Output depends only on the term (not on hash seeds or object ids).  ``latex.py`` subclasses
``TextPrinter`` and overrides the spelling, not the structure.
"""
from __future__ import annotations

import re
from fractions import Fraction

from .nodes import (
    Access, Add, Affine, And, Call, Cmp, Const, Exists, Expr, FalsePred, Gen, Guard, IndexMapType, IndexVar, Let, Max,
    Mul, Or, Pair, PairType, Pred, Proj, RealType, RelAtom, RelType, SizeVar, Sum, TensorType, TruePred, Type, Var,
    OPERATIONS, walk,
)
from .declarations import body_of
from .dispatch import dispatch
from .traversal import free_index_vars, free_vars, size_vars

__all__ = ["affine_str", "type_str", "pred_str", "expr_str", "to_source", "TextPrinter", "KEYWORDS"]

_BINDER_WORDS = {Gen: "gen", Sum: "sum", Max: "max"}
_KEYWORD_FUNCTIONS = frozenset({"max", "min"})   # keywords that are also scalar functions: max(a, b)
KEYWORDS = frozenset({"let", "in", "gen", "sum", "max", "min", "exists", "and", "or", "not", "true", "false"})
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

# precedence levels of expressions, loosest first
BINDER, ADD, MUL, UNARY, POSTFIX = range(5)
# precedence levels of predicates
P_BINDER, P_OR, P_AND, P_ATOM = range(4)


def quote_name(name: str) -> str:
    """``name`` as the parser reads it back: bare if an identifier and not a keyword, else backquoted."""
    if _IDENT.match(name) and name not in KEYWORDS:
        return name
    escaped = name.replace("\\", "\\\\").replace("`", "\\`").replace("\n", "\\n")
    return f"`{escaped}`"


def _is_minus_one(e) -> bool:
    return isinstance(e, Const) and type(e.value) is int and e.value == -1


def _is_one(e) -> bool:
    return isinstance(e, Const) and type(e.value) is int and e.value == 1


def _is_chain(e) -> bool:
    return isinstance(e, (Mul, Guard))


def _is_negation(e) -> bool:
    """``Mul(Const(-1), x)`` printed as the unary ``-x`` (x not a product or a constant)."""
    return isinstance(e, Mul) and _is_minus_one(e.left) and not _is_chain(e.right) and not isinstance(e.right, Const)


def _minimum(e) -> bool:
    """``-max(i..) -b``: how ``min(i..) b`` is built (printed as written)."""
    if not (isinstance(e, Mul) and _is_minus_one(e.left) and isinstance(e.right, Max)):
        return False
    body = e.right
    while isinstance(body, Max):
        body = body.body
    return isinstance(body, Mul) and _is_minus_one(body.left)


def _is_recip(e) -> bool:
    return isinstance(e, Call) and e.fn == "recip" and len(e.args) == 1


class _Env:
    """The names in scope while printing: display names of bound variables, and the names taken."""

    __slots__ = ("names", "taken")

    def __init__(self, names: dict, taken: frozenset):
        self.names = names  # id(IndexVar or Var) -> display name
        self.taken = taken

    def bind(self, obj, name: str, shown: str | None = None) -> "_Env":
        """``obj`` bound to ``name``, printed as ``shown`` (default: ``name``)."""
        names = dict(self.names)
        names[id(obj)] = name if shown is None else shown
        return _Env(names, self.taken | {name})


class TextPrinter:
    """Prints expressions, predicates, affine forms and types in the surface syntax."""

    # spelling; latex.py overrides these
    TIMES = " * "
    DIVIDE = " / "
    PLUS = " + "
    MINUS = " - "
    NEG = "-"
    AND = " and "
    OR = " or "
    CMP = {"<": "<", "<=": "<=", "=": "=", "!=": "!="}
    TRUE = "true"
    FALSE = "false"
    PROJ_LEVEL = POSTFIX

    def __init__(self, root=None):
        reserved: set[str] = set()
        # index variables also avoid every let name, so that lets keep their names where possible
        self.index_avoid: set[str] = set()
        if isinstance(root, (Expr, Pred)):
            reserved.update(v.name for v in free_vars(root))
            reserved.update(s.name for s in size_vars(root))
            reserved.update(v.name for v in free_index_vars(root))
            self.index_avoid.update(n.var.name for n in walk(root) if isinstance(n, Let))
        self.root_env = _Env({}, frozenset(reserved))

    # -- names -------------------------------------------------------------------------------------

    def name(self, name: str) -> str:
        return quote_name(name)

    def var_name(self, v, env: _Env) -> str:
        shown = env.names.get(id(v))
        return shown if shown is not None else self.name(v.name)

    def fresh(self, name: str, env: _Env, default: str, avoid=frozenset()) -> str:
        """``name`` if it is a free identifier here, else ``stem1``, ``stem2``, ... (stem: name less digits)."""
        taken = env.taken | avoid if avoid else env.taken
        base = name if _IDENT.match(name) and name not in KEYWORDS else default
        if base not in taken:
            return base
        stem = base.rstrip("0123456789") or default
        k = 1
        while f"{stem}{k}" in taken:
            k += 1
        return f"{stem}{k}"

    def index_name(self, var: IndexVar, env: _Env) -> str:
        return self.fresh(var.name, env, "i", self.index_avoid)

    def let_name(self, var: Var, env: _Env) -> str:
        """The let's own name unless that would rebind a name in scope."""
        if var.name not in env.taken:
            return var.name
        return self.fresh(var.name, env, "t")

    # -- text helpers ------------------------------------------------------------------------------

    def paren(self, s: str) -> str:
        return f"({s})"

    def number(self, value) -> str:
        if isinstance(value, Fraction):
            return self.paren(f"{value.numerator}{self.DIVIDE}{value.denominator}")
        if isinstance(value, float):
            if value != value:
                return "nan"
            if value in (float("inf"), float("-inf")):
                return "1e999" if value > 0 else "-1e999"
            return repr(float(value))
        return repr(int(value))

    # -- affine forms and types --------------------------------------------------------------------

    def coeff_term(self, coeff: int, name: str) -> str:
        return name if coeff == 1 else f"{coeff}*{name}"

    def affine(self, a: Affine, env: _Env) -> str:
        # index variables first, then sizes, each by displayed name; a positive term leads
        terms = sorted(((isinstance(v, SizeVar), self.var_name(v, env), c) for v, c in a.terms))
        if terms and terms[0][2] < 0:
            pos = next((k for k, t in enumerate(terms) if t[2] > 0), None)
            if pos is not None:
                terms.insert(0, terms.pop(pos))
        out = ""
        for k, (_, name, c) in enumerate(terms):
            if k == 0:
                out = self.NEG + self.coeff_term(-c, name) if c < 0 else self.coeff_term(c, name)
            else:
                out += (self.MINUS if c < 0 else self.PLUS) + self.coeff_term(abs(c), name)
        if not terms:
            return str(a.const)
        if a.const:
            out += (self.MINUS if a.const < 0 else self.PLUS) + str(abs(a.const))
        return out

    def type(self, t: Type, env: _Env) -> str:
        return dispatch(self, "_print_", t, env, True)

    def _print_RealType(self, t: RealType, env: _Env, open_: bool) -> str:
        return "R"

    def _print_TensorType(self, t: TensorType, env: _Env, open_: bool) -> str:
        return f"[{self.affine(t.size, env)}]{self.type(t.elem, env)}"

    def _print_PairType(self, t: PairType, env: _Env, open_: bool) -> str:
        return f"({self.type(t.first, env)}, {self.type(t.second, env)})"

    def _print_RelType(self, t: RelType, env: _Env, open_: bool) -> str:
        return "rel[" + ", ".join(self.affine(s, env) for s in t.sizes) + "]"

    def _print_IndexMapType(self, t: IndexMapType, env: _Env, open_: bool) -> str:
        return f"[{self.affine(t.length, env)}]index[{self.affine(t.extent, env)}]"

    # -- expressions -------------------------------------------------------------------------------

    def level(self, e: Expr) -> int:
        """The precedence of ``e`` as printed (``_level_<Class>``)."""
        return dispatch(self, "_level_", e)

    def _level_Expr(self, e: Expr) -> int:
        return POSTFIX

    def _level_Let(self, e: Let) -> int:
        return BINDER

    _level_Gen = _level_Sum = _level_Max = _level_Let

    def _level_Add(self, e: Add) -> int:
        return ADD

    def _level_Guard(self, e: Guard) -> int:
        return MUL

    def _level_Mul(self, e: Mul) -> int:
        return BINDER if _minimum(e) else UNARY if _is_negation(e) else MUL

    def _level_Const(self, e: Const) -> int:
        return UNARY if self.number(e.value).startswith("-") else POSTFIX

    def _level_Proj(self, e: Proj) -> int:
        return self.PROJ_LEVEL

    def expr(self, e: Expr, env: _Env, need: int = BINDER, open_: bool = True) -> str:
        """``e`` printed where an expression of precedence ``need`` is expected; ``open_`` says whether
        nothing follows, so that a binder may be printed without parentheses."""
        level = self.level(e)
        if level == BINDER:
            text = dispatch(self, "_print_", e, env, open_)
            return text if open_ and need <= UNARY else self.paren(text)
        if level < need:
            return self.paren(dispatch(self, "_print_", e, env, True))
        return dispatch(self, "_print_", e, env, open_)

    def _print_Mul(self, e: Mul | Guard, env: _Env, open_: bool) -> str:
        if _minimum(e):  # -max(i..) -b, as min(i..) b is built
            bindings, negated, inner = self.run_of(e.right, env)
            return self.loop("min", bindings, self.expr(negated.right, inner))
        if _is_negation(e):
            return self.NEG + self.expr(e.right, env, UNARY, open_)
        return self.chain(e, env, open_)

    _print_Guard = _print_Mul

    def _print_Var(self, e: Var, env: _Env, open_: bool) -> str:
        return self.var_name(e, env)

    def _print_Const(self, e: Const, env: _Env, open_: bool) -> str:
        return self.number(e.value)

    def _print_Access(self, e: Access, env: _Env, open_: bool) -> str:
        indices = []
        while isinstance(e, Access):
            indices.append(self.affine(e.index, env))
            e = e.tensor
        return self.access(self.expr(e, env, POSTFIX, False), indices[::-1])

    def _print_Proj(self, e: Proj, env: _Env, open_: bool) -> str:
        return self.proj(e.index, self.expr(e.pair, env, POSTFIX, False))

    def _print_Pair(self, e: Pair, env: _Env, open_: bool) -> str:
        return self.pair(self.expr(e.first, env), self.expr(e.second, env))

    def _print_Call(self, e: Call, env: _Env, open_: bool) -> str:
        return self.call(e.fn, [self.expr(a, env) for a in e.args])

    def access(self, base: str, indices: list[str]) -> str:
        return f"{base}[{', '.join(indices)}]"

    def proj(self, k: int, operand: str) -> str:
        return f"{operand}.{k}"

    def pair(self, first: str, second: str) -> str:
        return f"({first}, {second})"

    def call(self, fn: str, args: list[str]) -> str:
        return f"{fn if fn in _KEYWORD_FUNCTIONS else self.name(fn)}({', '.join(args)})"

    def _print_Add(self, e: Add, env: _Env, open_: bool) -> str:
        # a left-nested sum a + b + c is a loop here, not a recursion
        spine = []
        while isinstance(e, Add):
            spine.append(e.right)
            e = e.left
        out = self.expr(e, env, ADD, False)
        for k, r in enumerate(reversed(spine)):
            last = open_ and k == len(spine) - 1
            if isinstance(r, Mul) and _is_minus_one(r.left):
                x = r.right
                if isinstance(x, Const) and not self.number(x.value).startswith("-"):
                    # `a - 2` would read as Add(a, Const(-2))
                    out += self.MINUS + self.paren(self.number(x.value))
                else:
                    out += self.MINUS + self.expr(x, env, MUL, last)
            elif isinstance(r, Const) and self.number(r.value).startswith("-"):
                out += self.MINUS + self.number(r.value)[1:]
            else:
                out += self.PLUS + self.expr(r, env, MUL, last)
        return out

    def chain(self, e: Expr, env: _Env, open_: bool) -> str:
        """A product chain: factors folded from the right, brackets guarding what follows them."""
        out = []  # (operator, text)
        prev_plain = False  # whether the previous factor was an expression (so `/ b` reads well)
        while True:
            if isinstance(e, Guard):
                out.append((self.TIMES, self.bracket(self.pred(e.pred, env))))
                e = e.body
                prev_plain = False
                if _is_one(e):
                    break
                continue
            if isinstance(e, Mul) and not _is_negation(e):
                out.append(self.factor(e.left, env, prev_plain, False))
                e, prev_plain = e.right, True
                continue
            out.append(self.factor(e, env, prev_plain, open_))
            break
        return out[0][1] + "".join(op + text for op, text in out[1:])

    def factor(self, f: Expr, env: _Env, prev_plain: bool, open_: bool) -> tuple[str, str]:
        if prev_plain and _is_recip(f):
            return self.DIVIDE, self.expr(f.args[0], env, UNARY, open_)
        return self.TIMES, self.expr(f, env, UNARY, open_)

    def relation(self, name: str, args: list[str]) -> str:
        return f"{self.name(name)}({', '.join(args)})"

    def bracket(self, p: str) -> str:
        return f"[{p}]"

    def let_parts(self, e: Let, env: _Env) -> tuple[str, str, _Env]:
        """The let's name as shown, its value printed, and the scope of its body."""
        value = self.expr(e.value, env)
        name = self.let_name(e.var, env)
        shown = self.name(name)
        return shown, value, env.bind(e.var, name, shown)

    def extent(self, size: Affine, env: _Env) -> str:
        """A binder's range as written: its size ``n`` for ``i:n``."""
        return self.affine(size, env)

    def _print_Let(self, e: Let, env: _Env, open_: bool) -> str:
        shown, value, inner = self.let_parts(e, env)
        return self.let(shown, value, self.expr(e.body, inner))

    def _print_Gen(self, e: Gen | Sum | Max, env: _Env, open_: bool) -> str:
        """A run of generators (or of sums, or of maxima) as one binder: ``gen(i:n, j:m) e``."""
        bindings, body, env = self.run_of(e, env)
        return self.loop(_BINDER_WORDS[type(e)], bindings, self.expr(body, env))

    _print_Sum = _print_Max = _print_Gen

    def run_of(self, e: Gen | Sum | Max, env: _Env) -> tuple[list, Expr, _Env]:
        """The bindings ``(name, extent)`` of a run of binders of ``e``'s class, the body under them and the
        names in scope there."""
        kind = type(e)
        bindings = []
        while type(e) is kind:
            name = self.index_name(e.var, env)
            shown = self.name(name)
            bindings.append((shown, self.extent(e.size, env)))
            env = env.bind(e.var, name, shown)
            e = e.body
        return bindings, e, env

    def let(self, name: str, value: str, body: str) -> str:
        return f"let {name} = {value} in {body}"

    def let_line(self, name: str, value: str) -> str:
        """A leading let on a line of its own (``lines``)."""
        return f"let {name} = {value} in"

    def lines(self, e: Expr, env: _Env) -> list[str]:
        """The leading lets of ``e``, one line each, then its body (a let nested inside an expression stays
        inline)."""
        out = []
        while isinstance(e, Let):
            shown, value, env = self.let_parts(e, env)
            out.append(self.let_line(shown, value))
            e = e.body
        return out + [self.expr(e, env)]

    def loop(self, kind: str, bindings: list[tuple[str, str]], body: str) -> str:
        return f"{kind}(" + ", ".join(f"{n}:{s}" for n, s in bindings) + f") {body}"

    # -- predicates --------------------------------------------------------------------------------

    def pred_level(self, p: Pred) -> int:
        """The precedence of ``p`` as printed (``_level_<Class>``)."""
        return dispatch(self, "_level_", p)

    def _level_Pred(self, p: Pred) -> int:
        return P_ATOM

    def _level_Exists(self, p: Exists) -> int:
        return P_BINDER

    def _level_Or(self, p: Or) -> int:
        return P_OR if len(p.parts) > 1 else P_ATOM

    def _level_And(self, p: And) -> int:
        return P_AND if len(p.parts) > 1 else P_ATOM

    def pred(self, p: Pred, env: _Env, need: int = P_BINDER, open_: bool = True) -> str:
        level = self.pred_level(p)
        if level == P_BINDER:
            text = dispatch(self, "_print_", p, env, open_)
            return text if open_ else self.paren(text)
        if level < need:
            return self.paren(dispatch(self, "_print_", p, env, True))
        return dispatch(self, "_print_", p, env, open_)

    def _print_Or(self, p: Or, env: _Env, open_: bool) -> str:
        if not p.parts:
            return self.FALSE
        return self.OR.join(self.pred(q, env, P_AND, open_ and k == len(p.parts) - 1) for k, q in enumerate(p.parts))

    def _print_Cmp(self, p: Cmp, env: _Env, open_: bool) -> str:
        return f"{self.affine(p.lhs, env)} {self.CMP[p.op]} {self.affine(p.rhs, env)}"

    def _print_RelAtom(self, p: RelAtom, env: _Env, open_: bool) -> str:
        return self.relation(p.rel.name, [self.affine(a, env) for a in p.args])

    def _print_TruePred(self, p: TruePred, env: _Env, open_: bool) -> str:
        return self.TRUE

    def _print_FalsePred(self, p: FalsePred, env: _Env, open_: bool) -> str:
        return self.FALSE

    def _print_And(self, p: And, env: _Env, open_: bool) -> str:
        """``p and q and ...``; consecutive comparisons ``a < b``, ``b < c`` print as ``a < b < c``."""
        if not p.parts:
            return self.TRUE
        parts = p.parts
        out = ""
        prev = None
        for k, q in enumerate(parts):
            if isinstance(q, Cmp) and isinstance(prev, Cmp) and prev.rhs is q.lhs:
                out += f" {self.CMP[q.op]} {self.affine(q.rhs, env)}"
            else:
                out += (self.AND if k else "") + self.pred(q, env, P_ATOM, open_ and k == len(parts) - 1)
            prev = q
        return out

    def _print_Exists(self, p: Exists, env: _Env, open_: bool) -> str:
        bindings = []
        while isinstance(p, Exists):
            name = self.index_name(p.var, env)
            shown = self.name(name)
            bindings.append((shown, self.extent(p.size, env)))
            env = env.bind(p.var, name, shown)
            p = p.body
        return self.loop("exists", bindings, self.pred(p, env))

    # -- programs ----------------------------------------------------------------------------------

    def program(self, e: Expr) -> str:
        lines = [f"{self.name(v.name)} : {self.type(v.type, self.root_env)}" for v in free_vars(e)]
        lines += self.lines(body_of(e), self.root_env)
        return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# the functions nodes.py calls


def affine_str(a: Affine) -> str:
    printer = TextPrinter()
    return printer.affine(a, printer.root_env)


def type_str(t: Type) -> str:
    printer = TextPrinter()
    return printer.type(t, printer.root_env)


def pred_str(p: Pred) -> str:
    printer = TextPrinter(p)
    return printer.pred(p, printer.root_env)


def expr_str(e: Expr) -> str:
    """The expression alone (no declarations)."""
    printer = TextPrinter(e)
    return printer.expr(body_of(e), printer.root_env)


def to_source(e: Expr) -> str:
    """A complete program: one declaration ``name : type`` per input, in ``e.free_vars`` order, then
    the expression, its leading lets one per line (newlines are whitespace to the parser).
    ``parse(to_source(e)) == e``."""
    return TextPrinter(e).program(e)


OPERATIONS.install(affine_str=affine_str, type_str=type_str, pred_str=pred_str, expr_str=expr_str, to_source=to_source)
