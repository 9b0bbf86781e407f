"""The parser: program text (docs/language.md) to a checked ``Expr``.

Two steps.  Lark's LALR parser (``grammar.lark``) turns the text into a parse tree with positions; the
elaborator below walks the tree once, resolving names in scope and building hash-consed nodes, and
places every error it meets at the construct it is about (``FILE:line:col``, the line, a caret).
Finally ``tensorlang.checker.check`` proves the accesses in bounds.

Elaboration follows the language's decisions (docs/language.md):

* A product chain is a list of factors folded from the right: a bracket factor ``[p]`` guards the
  product of everything to its right (``[p] * a * b`` is ``Guard(p, Mul(a, b))``), other factors
  multiply right-associatively, ``/ b`` contributes ``recip(b)``, and a bracket at the end of a chain
  (or alone) is ``[p] * 1``.
* ``a - b`` is ``a + (-1) * b``, except that ``a - 2`` is ``a + (-2)``; ``-2`` is the constant ``-2`` and
  ``-e`` otherwise ``(-1) * e``.
* A name in a size, a loop bound or an index that is bound nowhere is a size variable; size variables
  are global, so a name used as a size cannot also be bound (as an input, a let or an index variable)
  anywhere in the program.  A name means one thing in one scope: rebinding a name in scope is an error.
* ``and``/``or`` keep the structure written (``(p and q) and r`` stays nested; a chain
  ``0 <= i - j < m`` contributes its comparisons to the enclosing conjunction), so that printing and
  parsing again gives the same predicate for any predicate built by the node constructors.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Callable

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from .errors import ParseError, SourceLocation, TensorLangError, TypeCheckError
from .declarations import declare
from .functions import is_function, lookup
from .nodes import (
    FALSE, R, TRUE, Access, Add, Affine, And, Call, Const, Exists, Expr, Gen, Guard, IndexMapType, IndexVar, Let,
    Max, Mul, Or, Pair, PairType, Pred, Proj, RelAtom, RelType, SizeVar, Sum, TensorType, Type, Var, compare,
    negate, type_size_vars,
)
from .spelling import did_you_mean

__all__ = ["parse", "parse_type"]

_LARK: Lark | None = None


def _lark() -> Lark:
    global _LARK
    if _LARK is None:
        _LARK = Lark.open(
            "grammar.lark", rel_to=__file__, parser="lalr", propagate_positions=True,
            start=["start", "type_start"], maybe_placeholders=True,
        )
    return _LARK


def parse(src: str, filename: str = "<string>", **decls) -> Expr:
    """Parse and check a program: declarations, then one expression.

    ``decls`` add declarations: ``parse("sum(i:n) x[i]", x="[n]R")``; a value is a type in the syntax
    of the language or a ``Type``.  Returns the checked ``Expr``; raises ``ParseError`` for text that
    does not follow the grammar and ``TypeCheckError`` (or ``BoundsError`` from the checker) for
    programs that do not make sense, each with ``FILE:line:col`` and a caret.
    """
    from .checker import check

    if not isinstance(src, str):
        raise TypeError(f"parse expects program text (a str), not {type(src).__name__}")
    elab = _Elaborator(src, filename)
    for name, spec in decls.items():
        elab.declare_external(name, spec)
    tree = _parse_tree(src, filename, "start")
    expr = elab.program(tree)
    try:
        return check(expr)
    except TensorLangError as err:
        node = getattr(err, "node", None)
        if err.location is None and node is not None:
            raise err.at(elab.location_of(node)) from None
        raise


def parse_type(src: str, filename: str = "<type>") -> Type:
    """A type in the syntax of the language: ``R``, ``[n + 1]R``, ``(R, [n]R)``, ``rel[n, m]``."""
    elab = _Elaborator(src, filename)
    return elab.type(_parse_tree(src, filename, "type_start").children[0])


# --------------------------------------------------------------------------------------------------
# syntax errors


def _parse_tree(src: str, filename: str, start: str) -> Tree:
    try:
        return _lark().parse(src, start=start)
    except UnexpectedInput as err:
        raise _syntax_error(err, src, filename) from None


_WORDS = {
    "RPAR": "')'", "RSQB": "']'", "COMMA": "','", "COLON": "':'", "EQ": "'='", "IN": "'in'",
    "_SEMI": "';'", "PROJ": "'.0' or '.1'", "LBRACK": "'['", "LPAR": "'('", "PLUS": "'+'", "MINUS": "'-'",
    "STAR": "'*'", "SLASH": "'/'", "AND": "'and'", "OR": "'or'", "NOT": "'not'", "NAME": "a name",
    "INT": "an integer", "FLOAT": "a number", "REAL_T": "'R'", "REL": "'rel'", "$END": "the end of the program",
}
_UNICODE_TWINS = {"GEN_U", "SUM_U", "EXISTS_U", "AND_U", "OR_U", "NOT_U", "LE_U", "GE_U", "NE_U", "QNAME", "EQEQ"}
_CMP = {"LT", "LE", "EQ", "GT", "GE", "NE"}
# groups of expected tokens that read better as one word; the first that fits wins
_GROUPS = [
    ({"GEN", "SUM", "MAX", "MIN", "LET", "NAME", "INT", "FLOAT", "LPAR", "MINUS", "LBRACK"}, "an expression"),
    ({"TRUE", "FALSE", "EXISTS", "NOT", "NAME", "INT", "LPAR", "MINUS"}, "a predicate"),
    ({"REAL_T", "REL", "LBRACK", "LPAR"}, "a type (R, [n]T, (T0, T1) or rel[n, ...])"),
    ({"NAME", "INT", "FLOAT", "MINUS", "LPAR"}, "an affine expression (an index or a size)"),
    ({"NAME", "INT", "MINUS", "LPAR"}, "an affine expression (an index or a size)"),
    (_CMP, "a comparison (<, <=, =, !=, >, >=)"),
    ({"PLUS", "MINUS", "STAR", "SLASH"}, "an operator"),
    ({"PLUS", "MINUS", "STAR"}, "'+', '-' or '*'"),
    ({"AND", "OR"}, "'and' or 'or'"),
]
_AFFINE_HINT = (
    "indices and sizes are affine: index and size variables, integer constants, + and -, and "
    "multiplication by an integer constant"
)


@dataclass(frozen=True)
class _Mistake:
    """A common mistake and its right form (docs/language.md, "Common mistakes"): ``matches`` sees the
    unexpected token, the tokens the parser would have taken there and the source text before it."""

    name: str
    matches: Callable[[Token, set, str], bool]
    hint: str


def _after_word(before: str, word: str) -> bool:
    head = before.rstrip()
    return head.endswith(word) and not (head[:-len(word)][-1:].isalnum() or head[:-len(word)][-1:] == "_")


_POWER = "there is no power operator: write x[i] * x[i], or pow(x[i], 2) for a positive base"
_MISTAKES = [
    _Mistake("matrix type", lambda tok, acc, before: tok.type == "COMMA" and "COMMA" not in acc and "RSQB" in acc
             and _in_type(before),
             "a matrix is [n][m]R: one bracket per dimension, not [n, m]R"),
    _Mistake("power", lambda tok, acc, before: tok.type == "STAR" and before.endswith("*"), _POWER),
    _Mistake("relation parentheses", lambda tok, acc, before: tok.type == "LPAR" and _after_word(before, "rel"),
             "a relation is declared with square brackets: R : rel[n, m]"),
    _Mistake("binding", lambda tok, acc, before: "COLON" in acc and tok.type in ("IN", "EQ", "COMMA", "RPAR")
             and _binder_open(before), "a binding is written index:size, as in sum(i:n), with i = 0 .. n-1"),
    _Mistake("let without in", lambda tok, acc, before: tok.type == "_SEMI" and "IN" in acc,
             "a let is an expression: let y = e0 in e1"),
    _Mistake("condition", lambda tok, acc, before: tok.type == "NAME" and tok.value == "if",
             "a condition is an Iverson bracket that multiplies: [i > 0] * x[i]"),
    _Mistake("bracket factor", lambda tok, acc, before: "STAR" in acc and tok.type in ("NAME", "LPAR", "INT", "FLOAT")
             and before.rstrip().endswith("]"), "a bracket is a factor of a product: [p] * e"),
    _Mistake("max or min as a name", lambda tok, acc, before: acc == {"LPAR"} and tok.type != "LPAR"
             and (_after_word(before, "max") or _after_word(before, "min")),
             "max and min are keywords, max(i:n) e and max(a, b): a variable of that name is written in "
             "backquotes, `max`"),
    _Mistake("real type", lambda tok, acc, before: "REAL_T" in acc and tok.type == "NAME"
             and tok.value in ("Real", "real", "float", "double", "float64", "float32"), "the real type is written R"),
]
# characters the grammar has no use for, and what to write instead
_CHAR_HINTS = {"^": _POWER, "&": "a conjunction is written 'and'", "|": "a disjunction is written 'or'",
               "!": "a negation is written 'not p'; 'not equal' is !="}


# the keywords a misspelling may have meant, by the token the parser would take for each
_KEYWORDS = {"LET": "let", "IN": "in", "GEN": "gen", "SUM": "sum", "MAX": "max", "MIN": "min", "EXISTS": "exists",
             "AND": "and", "OR": "or", "NOT": "not", "TRUE": "true", "FALSE": "false"}
_BINDER_OPEN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(\s*[A-Za-z_][A-Za-z0-9_]*\s*$")
_LAST_WORD = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s+$")


def _close_keyword(word: str, keywords) -> str | None:
    """The keyword a name most likely misspells: two letters swapped (``gne``, ``ni``), or close by
    ``difflib``'s measure (``summ``, ``exist``); None for a keyword itself and for one-letter names."""
    if len(word) < 2 or word in _KEYWORDS.values():
        return None
    swapped = [k for k in keywords if sorted(k) == sorted(word)]
    if swapped:
        return swapped[0]
    close = difflib.get_close_matches(word, list(keywords), n=1, cutoff=0.6)
    return close[0] if close else None


def _misspelt_keyword(tok: Token, accepts: set, before: str) -> str | None:
    """A hint where the unexpected token, or the name just before it, reads as a misspelt keyword:
    ``ni`` where ``in`` may come, ``gne(i:n)`` (a name called with ``i:`` is a binder), ``lte y = ...``."""
    if tok.type == "NAME":
        word = _close_keyword(tok.value, [k for t, k in _KEYWORDS.items() if t in accepts])
        if word is not None:
            return f"{tok.value!r} is not a keyword; did you mean {word!r}?"
    opened = _BINDER_OPEN.search(before) if tok.type == "COLON" else None
    if opened is not None:
        word = _close_keyword(opened.group(1), ["gen", "sum", "max", "min", "exists"])
        if word is not None:
            return f"{opened.group(1)!r} is not a keyword; did you mean {word!r}?"
    last = _LAST_WORD.search(before) if tok.type == "NAME" else None
    if last is not None and _close_keyword(last.group(1), ["let"]) == "let":
        return f"{last.group(1)!r} is not a keyword; did you mean 'let'?"
    return None


def _in_type(before: str) -> bool:
    """Whether the text before ends inside a declaration's type: ``name : [...`` on the current line."""
    line = before.rsplit("\n", 1)[-1].rsplit(";", 1)[-1]
    return ":" in line and "(" not in line.split(":", 1)[0] and "=" not in line


def _binder_open(before: str) -> bool:
    """Whether the text before ends in ``gen(``, ``sum(`` or ``exists(`` and a name."""
    head = before.rstrip().rsplit("(", 1)[0]
    return any(_after_word(head, w) for w in ("gen", "sum", "max", "min", "exists", "⊞", "Σ", "∑", "∃"))


def _describe(tok: Token) -> str:
    if tok.type == "$END":
        return "end of the program"
    if tok.type in ("NAME", "QNAME"):
        return f"name {tok.value}" if tok.type == "QNAME" else f"name '{tok.value}'"
    if tok.type in ("INT", "FLOAT"):
        return f"number {tok.value}"
    return f"'{tok.value}'"


def _join(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _expected_words(accepts: set[str]) -> list[str]:
    left = set(accepts) - _UNICODE_TWINS
    words = []
    for group, word in _GROUPS:
        if group <= left:
            words.append(word)
            left -= group
    words.extend(sorted(_WORDS.get(t, t.lower()) for t in left))
    return words


def _syntax_error(err: UnexpectedInput, src: str, filename: str) -> ParseError:
    if isinstance(err, UnexpectedToken):
        tok = err.token
        try:
            accepts = set(err.interactive_parser.accepts())
        except Exception:  # pragma: no cover - the interactive parser is best effort
            accepts = set(err.expected)
        if tok.type == "$END":
            end = getattr(tok, "end_pos", None)
            loc = SourceLocation.from_offset(src, end if end is not None else len(src), filename)
        else:
            loc = SourceLocation(src, tok.line, tok.column, filename)
        msg = f"unexpected {_describe(tok)}"
        words = _expected_words(accepts)
        if words:
            msg += f"; expected {_join(words)}"
        affine_start = "INT" in accepts and "GEN" not in accepts and "TRUE" not in accepts
        affine_rest = accepts <= ({"COMMA", "PLUS", "MINUS", "STAR", "RSQB", "RPAR"} | _CMP | _UNICODE_TWINS)
        before = src[:tok.start_pos] if tok.start_pos is not None else ""
        mistake = next((m for m in _MISTAKES if m.matches(tok, accepts, before)), None)
        keyword = None if mistake is not None else _misspelt_keyword(tok, accepts, before)
        if mistake is not None:
            msg += f" ({mistake.hint})"
        elif keyword is not None:
            msg += f" ({keyword})"
        elif tok.type in ("FLOAT", "LBRACK", "SLASH", "LPAR", "PROJ") and (affine_start or affine_rest):
            msg += f" ({_AFFINE_HINT})"
        return ParseError(msg, loc)
    if isinstance(err, UnexpectedCharacters):
        loc = SourceLocation(src, err.line, err.column, filename)
        char = src[err.pos_in_stream] if err.pos_in_stream < len(src) else ""
        hint = _CHAR_HINTS.get(char)
        return ParseError(f"unexpected character {char!r}" + (f" ({hint})" if hint else ""), loc)
    loc = SourceLocation(src, getattr(err, "line", 1) or 1, getattr(err, "column", 1) or 1, filename)
    return ParseError(str(err).splitlines()[0], loc)


# --------------------------------------------------------------------------------------------------
# elaboration


@dataclass
class _Binding:
    kind: str  # "input", "relation", "let" or "index"
    obj: object  # the Var or IndexVar
    loc: SourceLocation | None

    def describe(self, name: str) -> str:
        what = {
            "input": f"the input {name} : {getattr(self.obj, 'type', '')}",
            "relation": f"the relation {name} : {getattr(self.obj, 'type', '')}",
            "let": f"the let variable {name}",
            "index": f"the index variable {name}",
        }[self.kind]
        verb = "declared" if self.kind in ("input", "relation") else "bound"
        return what + (f" ({verb} at {self.loc.line}:{self.loc.column})" if self.loc else "")


_KIND_WORDS = {"input": "an input", "relation": "a relation", "let": "a let variable", "index": "an index variable"}

_CMP_OPS = {
    "LT": "<", "LE": "<=", "LE_U": "<=", "EQ": "=", "EQEQ": "=", "GT": ">", "GE": ">=", "GE_U": ">=",
    "NE": "!=", "NE_U": "!=",
}


def _unquote(tok: Token) -> str:
    if tok.type != "QNAME":
        return str(tok)
    body, out, k = tok[1:-1], [], 0
    while k < len(body):
        c = body[k]
        if c == "\\" and k + 1 < len(body):
            k += 1
            c = {"n": "\n"}.get(body[k], body[k])
        out.append(c)
        k += 1
    return "".join(out)


def _left_spine(tree: Tree, data: str) -> list:
    """The operands and operators of a left-nested chain ``((a op b) op c)``: ``[a, op, b, op, c]``."""
    items = []
    while isinstance(tree, Tree) and tree.data == data:
        left, op, right = tree.children
        items += [right, op]
        tree = left
    items.append(tree)
    return items[::-1]


def _is_literal(tree) -> bool:
    return isinstance(tree, Tree) and tree.data in ("int", "float")


class _Elaborator:
    """Walks a parse tree once, with a scope, building nodes."""

    def __init__(self, text: str, filename: str):
        self.text = text
        self.filename = filename
        self.scope: dict[str, _Binding] = {}
        self.bound: dict[str, _Binding] = {}  # every name bound so far, anywhere (first binding)
        self.sizes: dict[str, SourceLocation | None] = {}  # size variables, with their first use
        self.external: dict[str, Type] = {}  # declarations given as keyword arguments
        self._locations: dict[int, SourceLocation] = {}
        self._keep: list = []  # keeps located nodes alive, so their ids stay unique

    # -- locations ---------------------------------------------------------------------------------

    def loc(self, item) -> SourceLocation | None:
        if isinstance(item, Token) and item.line is not None:
            return SourceLocation(self.text, item.line, item.column, self.filename)
        if isinstance(item, Tree) and not item.meta.empty:
            return SourceLocation(self.text, item.meta.line, item.meta.column, self.filename)
        return None

    def snippet(self, first, last=None) -> str:
        """The source text from the start of ``first`` to the end of ``last`` (default: ``first``)."""
        last = first if last is None else last
        try:
            start = first.start_pos if isinstance(first, Token) else first.meta.start_pos
            end = last.end_pos if isinstance(last, Token) else last.meta.end_pos
        except AttributeError:
            return "this expression"
        text = " ".join(self.text[start:end].split())
        return text if len(text) <= 40 else text[:37] + "..."

    def error(self, message: str, where) -> TypeCheckError:
        return TypeCheckError(message, self.loc(where))

    def located(self, where, build: Callable, *args):
        """``build(*args)``, with a constructor's error placed at ``where``; remembers the location."""
        loc = self.loc(where)
        try:
            node = build(*args)
        except TensorLangError as err:
            raise err.at(loc) from None
        if loc is not None and id(node) not in self._locations:
            self._locations[id(node)] = loc
            self._keep.append(node)
        return node

    def location_of(self, node) -> SourceLocation | None:
        return self._locations.get(id(node))

    # -- names and scopes ---------------------------------------------------------------------------

    def name(self, tree: Tree) -> str:
        return _unquote(tree.children[0])

    def bind(self, name: str, kind: str, obj, where) -> None:
        old = self.scope.get(name)
        if old is not None:
            raise self.error(f"{name} is already bound here: it is {old.describe(name)}", where)
        if name in self.sizes:
            use = self.sizes[name]
            at = f" (at {use.line}:{use.column})" if use else ""
            raise self.error(
                f"{name} is used as a size variable{at}, so it cannot also be bound as "
                f"{_KIND_WORDS[kind]}", where
            )
        binding = _Binding(kind, obj, self.loc(where))
        self.scope[name] = binding
        self.bound.setdefault(name, binding)

    def unbind(self, name: str) -> None:
        del self.scope[name]

    def check_in_scope(self, name: str, tree: Tree) -> None:
        """Raise when ``name``, not in scope at ``tree``, is bound elsewhere in the program."""
        if name in self.bound:
            raise self.error(f"{name} is not in scope here: it is {self.bound[name].describe(name)}", tree)

    def value_name(self, tree: Tree) -> Var:
        name = self.name(tree)
        b = self.scope.get(name)
        if b is None:
            if name in self.sizes:
                raise self.error(f"{name} is a size variable, not a value; declare an input to use it", tree)
            self.check_in_scope(name, tree)
            values = [n for n, b in self.scope.items() if b.kind in ("input", "let")]
            raise self.error(f"undeclared variable {name}{did_you_mean(name, values)}", tree)
        if b.kind == "index":
            raise self.error(
                f"the index variable {name} is not a value: use it in an index or a predicate, "
                f"as in x[{name}] or [{name} < n]", tree
            )
        if b.kind == "relation":
            if isinstance(b.obj.type, IndexMapType):
                raise self.error(f"{name} is an index array, read only inside an index, as in x[{name}[i]], or in a "
                                 f"predicate, as in [{name}(i, c)] (that is, {name}[i] = c)", tree)
            raise self.error(
                f"{name} is a relation, used only inside a predicate, as in [{name}(i, j)] * e", tree
            )
        return b.obj

    def affine_name(self, tree: Tree) -> Affine:
        name = self.name(tree)
        b = self.scope.get(name)
        if b is None:
            self.check_in_scope(name, tree)
            self.sizes.setdefault(name, self.loc(tree))
            return Affine.var(SizeVar(name))
        if b.kind == "index":
            return Affine.var(b.obj)
        if isinstance(getattr(b.obj, "type", None), IndexMapType):
            raise self.error(f"{name} is an index array: read one of its indices as {name}[i]", tree)
        raise self.error(
            f"{name} is a data value, not an index: it is {b.describe(name)}; indices and sizes are affine "
            f"in index and size variables", tree
        )

    def gather(self, tree, gathers: list | None) -> Affine:
        """``g[a]`` in an index, ``g : [p]index[n]``: a new index variable ``c`` standing for ``g[a]``,
        recorded in ``gathers`` as ``(c, n, g(a, c), tree)``; the access it stands in becomes
        ``sum(c:n) [g(a, c)] * access`` (``e_access``), a sum of the one term where ``c = g[a]``."""
        name_tree, index_tree = tree.children
        name = self.name(name_tree)
        b = self.scope.get(name)
        if b is None or not isinstance(getattr(b.obj, "type", None), IndexMapType):
            what = f"it is {b.describe(name)}" if b is not None else "it is not declared"
            raise self.error(f"{self.snippet(tree)} in an index reads an index array, but {what}; an index is "
                             f"affine (index and size variables, integer constants, + and -, * by a constant) or "
                             f"reads an index array declared as {name} : [p]index[n] (p indices, each in [0, n))",
                             name_tree)
        if gathers is None:
            raise self.error(f"{self.snippet(tree)} reads the index array {name}, which may stand only in the index "
                             f"of a tensor access, as in x[{name}[i]]", tree)
        index = self.affine(index_tree, gathers)
        var = IndexVar(self.fresh_index_name(f"{name}_"))
        gathers.append((var, b.obj.type.extent, self.located(tree, RelAtom, b.obj, (index, Affine.var(var))), tree))
        return Affine.var(var)

    def fresh_index_name(self, base: str) -> str:
        """``base`` followed by the first number that names nothing in scope and no size."""
        k = 0
        while f"{base}{k}" in self.scope or f"{base}{k}" in self.sizes:
            k += 1
        return f"{base}{k}"

    # -- programs and declarations -----------------------------------------------------------------

    def declare_external(self, name: str, spec) -> None:
        if isinstance(spec, str):
            text, filename = self.text, self.filename
            self.text, self.filename = spec, f"<declaration of {name}>"
            try:
                t = self.type(_parse_tree(spec, self.filename, "type_start").children[0])
            finally:
                self.text, self.filename = text, filename
        elif isinstance(spec, Type):
            t = spec
            for s in type_size_vars(t):
                if s.name in self.scope:
                    raise TypeCheckError(f"{s.name} is used as a size variable in the type of {name} and declared")
                self.sizes.setdefault(s.name, None)
        else:
            raise TypeCheckError(f"the declaration of {name} must be a type (like '[n]R') or a Type, not {spec!r}")
        self.bind(name, "relation" if isinstance(t, RelType) else "input", Var(name, t), None)
        self.external[name] = t

    def program(self, tree: Tree) -> Expr:
        *decls, body = tree.children
        for d in decls:
            name_tree, type_tree = d.children
            name = self.name(name_tree)
            t = self.type(type_tree)
            if name in self.external and self.external.pop(name) is t:
                continue  # the same declaration given both as an argument and in the text
            self.bind(name, "relation" if isinstance(t, RelType) else "input", Var(name, t), name_tree)
        declared = [b.obj for b in self.scope.values() if b.kind in ("input", "relation")]
        return declare(self.expr(body), declared)

    # -- types -------------------------------------------------------------------------------------

    def type(self, tree) -> Type:
        kind = tree.data
        if kind == "real_type":
            return R
        if kind == "tensor_type":
            size_tree, elem_tree = tree.children
            size = self.affine(size_tree)
            if size.index_vars:
                raise self.error(f"a tensor size depends on sizes only, not on the index variable "
                                 f"{size.index_vars[0].name}", size_tree)
            if elem_tree.data == "index_type":
                return self.located(tree, IndexMapType, (size, self.range_size("an index array", elem_tree.children[1])))
            elem = self.type(elem_tree)
            if isinstance(elem, IndexMapType):
                raise self.error(f"an index array has one dimension: [p]index[n] holds p indices in [0, n); "
                                 f"give each column of a table of indices its own array", tree)
            return self.located(size_tree, TensorType, size, elem)
        if kind == "pair_type":
            first, second = tree.children
            return self.located(tree, PairType, self.type(first), self.type(second))
        if kind == "rel_type":
            sizes = tuple(self.affine(a) for a in tree.children[1:])
            return self.located(tree, RelType, sizes)
        if kind == "index_type":
            raise self.error("an index array has a length: g : [p]index[n] holds p indices, each in [0, n)", tree)
        raise AssertionError(kind)  # pragma: no cover

    # -- affine indices ----------------------------------------------------------------------------

    def affine(self, tree, gathers: list | None = None) -> Affine:
        """The affine form of ``tree``; reads of index arrays (``g[i]``) are allowed where ``gathers`` is a
        list (in an access's index), and recorded there (see ``gather``)."""
        kind = tree.data
        if kind == "aname":
            return self.affine_name(tree.children[0])
        if kind == "agather":
            return self.gather(tree, gathers)
        if kind == "aint":
            return Affine.const_(int(tree.children[0]))
        if kind == "afloat":
            raise self.error(f"{tree.children[0]} is not an integer: {_AFFINE_HINT}", tree)
        if kind == "aneg":
            return -self.affine(tree.children[1], gathers)
        if kind in ("aadd", "asub"):
            left, _, right = tree.children
            a, b = self.affine(left, gathers), self.affine(right, gathers)
            return a + b if kind == "aadd" else a - b
        if kind == "amul":
            left, _, right = tree.children
            a, b = self.affine(left, gathers), self.affine(right, gathers)
            if a.is_const:
                return b * a.const
            if b.is_const:
                return a * b.const
            raise self.error(
                f"the index {self.snippet(tree)} is not affine: it multiplies {a!r} by {b!r}; an index may "
                f"only be multiplied by an integer constant", tree
            )
        raise AssertionError(kind)  # pragma: no cover

    def range_size(self, var_name: str, tree) -> Affine:
        size = self.affine(tree)
        if size.index_vars:
            raise self.error(
                f"the range of {var_name} depends on the index variable {size.index_vars[0].name}; "
                f"ranges may only use size variables", tree
            )
        return size

    # -- expressions -------------------------------------------------------------------------------

    def expr(self, tree) -> Expr:
        return getattr(self, "e_" + tree.data)(tree)

    def scalar(self, e: Expr, what: str, first, last=None) -> None:
        if e.type is not R:
            raise self.error(f"{what} must be a scalar, but {self.snippet(first, last)} has type {e.type}", first)

    def e_var(self, tree) -> Expr:
        return self.value_name(tree.children[0])

    def literal(self, tree):
        return int(tree.children[0]) if tree.data == "int" else float(tree.children[0])

    def e_int(self, tree) -> Expr:
        return Const(self.literal(tree))

    e_float = e_int

    def e_paren(self, tree) -> Expr:
        return self.expr(tree.children[1])

    def e_pair(self, tree) -> Expr:
        _, first, second = tree.children
        return self.located(tree, Pair, self.expr(first), self.expr(second))

    def e_add(self, tree) -> Expr:
        items = _left_spine(tree, "add")
        first = items[0]
        acc = self.expr(first)
        for k in range(1, len(items), 2):
            op, right = items[k], items[k + 1]
            self.scalar(acc, f"the left operand of {op}", first, items[k - 1])
            if op.type == "MINUS" and _is_literal(right):
                r = Const(-self.literal(right))
            else:
                r = self.expr(right)
                self.scalar(r, f"the right operand of {op}", right)
                if op.type == "MINUS":
                    r = Mul(Const(-1), r)
            acc = self.located(op, Add, acc, r)
        return acc

    def e_neg(self, tree) -> Expr:
        op, operand = tree.children
        if _is_literal(operand):
            return Const(-self.literal(operand))
        e = self.expr(operand)
        self.scalar(e, "the operand of unary -", operand)
        return self.located(op, Mul, Const(-1), e)

    def e_mul(self, tree) -> Expr:
        items = _left_spine(tree, "mul")
        factors = []  # (is_bracket, value, tree), in source order
        for k in range(0, len(items), 2):
            op, t = (items[k - 1] if k else None), items[k]
            if isinstance(t, Tree) and t.data == "bracket" and (op is None or op.type == "STAR"):
                factors.append((True, self.pred(t.children[1]), t))
                continue
            value = self.expr(t)
            if op is not None and op.type == "SLASH":
                self.scalar(value, "a divisor", t)
                value = self.located(op, Call, "recip", (value,))
            factors.append((False, value, t))
        acc, acc_tree = None, None
        for is_bracket, value, t in reversed(factors):
            if is_bracket:
                acc = self.located(t, Guard, value, Const(1) if acc is None else acc)
            elif acc is None:
                acc = value
            else:
                self.scalar(value, "a factor of *", t)
                self.scalar(acc, "a factor of *", acc_tree, items[-1])
                acc = self.located(t, Mul, value, acc)
            acc_tree = t
        return acc

    def e_bracket(self, tree) -> Expr:
        return self.located(tree, Guard, self.pred(tree.children[1]), Const(1))

    def e_call(self, tree) -> Expr:
        name_tree, *arg_trees = tree.children
        arg_trees = [a for a in arg_trees if a is not None]
        # ``max``/``min`` are keywords (binders); called with values they are the scalar functions
        name = str(name_tree) if isinstance(name_tree, Token) else self.name(name_tree)
        b = None if isinstance(name_tree, Token) else self.scope.get(name)
        if b is not None and b.kind == "relation":
            raise self.error(f"{name} is a relation, used only inside a predicate, as in [{name}(i, j)] * e", name_tree)
        if b is not None:
            raise self.error(f"{name} is {b.describe(name)}, not a function", name_tree)
        try:
            spec = lookup(name)
        except TypeCheckError as err:
            raise err.at(self.loc(name_tree)) from None
        if len(arg_trees) != spec.arity:
            raise self.error(f"{name} takes {spec.arity} argument(s), got {len(arg_trees)}", name_tree)
        args = []
        for k, a in enumerate(arg_trees):
            e = self.expr(a)
            self.scalar(e, f"argument {k + 1} of {name}", a)
            args.append(e)
        return self.located(name_tree, Call, name, tuple(args))

    def e_access(self, tree) -> Expr:
        base_tree, _, *index_trees = tree.children
        e = self.expr(base_tree)
        gathers: list = []
        for k, t in enumerate(index_trees):
            index = self.affine(t, gathers)
            if not isinstance(e.type, TensorType):
                extra = " (more indices than the tensor has dimensions)" if k else ""
                raise self.error(f"cannot index {self.snippet(base_tree)} of type {e.type}{extra}", t)
            e = self.located(t, Access, e, index)
        if gathers and e.type is not R:
            raise self.error(f"{self.snippet(tree)} reads through an index array, so it must be a scalar: index "
                             f"every dimension (it has type {e.type})", tree)
        for var, size, atom, where in reversed(gathers):  # the read written innermost (h in g[h[i]]) outermost
            e = self.located(where, Sum, var, size, self.located(where, Guard, atom, e))
        return e

    def e_proj(self, tree) -> Expr:
        base_tree, tok = tree.children
        k = int(tok[1:])
        if k not in (0, 1):
            raise self.error(f"a pair has the components .0 and .1, not .{k}", tok)
        return self.located(tok, Proj, k, self.expr(base_tree))

    def binders(self, bindings: Tree) -> list[tuple[IndexVar, Affine, str]]:
        """Elaborate ``(i:n, j:m)``, binding each variable in turn; the caller unbinds them."""
        out = []
        for b in bindings.children:
            name_tree, size_tree = b.children
            name = self.name(name_tree)
            size = self.range_size(name, size_tree)
            var = IndexVar(name)
            self.bind(name, "index", var, name_tree)
            out.append((var, size, name))
        return out

    def _loop(self, tree, node_type, elaborate=None):
        """``gen``, ``sum`` or ``exists`` (``node_type``) over the binders of ``tree``, the body elaborated
        by ``elaborate`` (default: as an expression) with them in scope."""
        kw, bindings, body_tree = tree.children
        vars_ = self.binders(bindings)
        body = (elaborate or self.expr)(body_tree)
        for _, _, name in vars_:
            self.unbind(name)
        for var, size, name in reversed(vars_):
            if node_type is Sum:
                self.scalar(body, f"the body of sum({name})", body_tree)
            body = self.located(kw, node_type, var, size, body)
        return body

    def e_gen(self, tree) -> Expr:
        return self._loop(tree, Gen)

    def e_sum(self, tree) -> Expr:
        return self._loop(tree, Sum)

    def e_maxred(self, tree) -> Expr:
        """``max(i:n, ..) e``, and ``min(i:n, ..) e`` as ``-max(i:n, ..) -e``."""
        kw, bindings, body_tree = tree.children
        vars_ = self.binders(bindings)
        body = self.expr(body_tree)
        for _, _, name in vars_:
            self.unbind(name)
        self.scalar(body, f"the body of {kw}({vars_[-1][2]})", body_tree)
        negate = kw.type == "MIN"
        if negate:
            body = self.located(kw, Mul, Const(-1), body)
        for var, size, _ in reversed(vars_):
            body = self.located(kw, Max, var, size, body)
        return self.located(kw, Mul, Const(-1), body) if negate else body

    def e_let(self, tree) -> Expr:
        kw, name_tree, type_tree, _, value_tree, _, body_tree = tree.children
        name = self.name(name_tree)
        value = self.expr(value_tree)
        t = value.type
        if type_tree is not None:
            t = self.type(type_tree)
            if value.type is not t:
                raise self.error(f"let {name} : {t} is bound to a value of type {value.type}", value_tree)
        var = Var(name, t)
        self.bind(name, "let", var, name_tree)
        body = self.expr(body_tree)
        self.unbind(name)
        return self.located(kw, Let, var, value, body)

    # -- predicates --------------------------------------------------------------------------------

    def pred(self, tree) -> Pred:
        return getattr(self, "p_" + tree.data)(tree)

    def p_ptrue(self, tree) -> Pred:
        return TRUE

    def p_pfalse(self, tree) -> Pred:
        return FALSE

    def p_pparen(self, tree) -> Pred:
        return self.pred(tree.children[1])

    def p_por(self, tree) -> Pred:
        parts = [self.pred(t) for t in _left_spine(tree, "por")[::2]]
        return self.located(tree, Or, tuple(parts))

    def p_pand(self, tree) -> Pred:
        parts: list[Pred] = []
        for t in _left_spine(tree, "pand")[::2]:
            parts.extend(self.chain(t) if t.data == "chain" else [self.pred(t)])
        return self.located(tree, And, tuple(parts))

    def p_chain(self, tree) -> Pred:
        parts = self.chain(tree)
        return parts[0] if len(parts) == 1 else self.located(tree, And, tuple(parts))

    def chain(self, tree) -> list[Pred]:
        """The comparisons of ``a0 op a1 op a2 ...``: ``a0 op a1``, ``a1 op a2``, ..."""
        kids = tree.children
        operands = [self.affine(t) for t in kids[0::2]]
        parts = []
        for k, op_tree in enumerate(kids[1::2]):
            op = _CMP_OPS[op_tree.children[0].type]
            parts.append(self.located(op_tree, compare, op, operands[k], operands[k + 1]))
        return parts

    def p_pnot(self, tree) -> Pred:
        kw, operand = tree.children
        return self.located(kw, negate, self.pred(operand))

    def p_exists(self, tree) -> Pred:
        return self._loop(tree, Exists, self.pred)

    def p_relatom(self, tree) -> Pred:
        name_tree, *arg_trees = tree.children
        arg_trees = [a for a in arg_trees if a is not None]
        name = self.name(name_tree)
        b = self.scope.get(name)
        if b is None:
            hint = " (a function is used in expressions, not in predicates)" if is_function(name) else ""
            raise self.error(f"undeclared relation {name}{hint}; declare it as {name} : rel[n, ...]", name_tree)
        if b.kind != "relation":
            raise self.error(f"{name} is not a relation: it is {b.describe(name)}", name_tree)
        args = tuple(self.affine(a) for a in arg_trees)
        return self.located(name_tree, RelAtom, b.obj, args)
