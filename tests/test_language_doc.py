"""docs/language.md as a user reads it: its programs parse, its error output is what the parser prints,
and each common mistake of its table gets a hint naming the right form, which parses."""
import re
from pathlib import Path

import pytest

import tensorlang as tl

DOC = Path(__file__).resolve().parents[1] / "docs" / "language.md"
BLOCKS = [text for lang, text in re.findall(r"```(\w*)\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S) if not lang]
DECLS = {"x": "[n]R", "A": "[n][n]R"}  # for the one-line examples, which use x and A undeclared


def test_programs_parse():
    programs = [b for b in BLOCKS if not b.startswith("<string>")]
    assert len(programs) >= 3
    for block in programs:
        try:
            tl.parse(block)
        except tl.ParseError:  # a block of one-line examples: each line is a program over DECLS
            for line in filter(str.strip, block.splitlines()):
                tl.parse(line.split("#")[0], **DECLS)


def test_error_output_is_what_the_parser_prints():
    shown = [b for b in BLOCKS if b.startswith("<string>")]
    assert shown
    for block in shown:
        with pytest.raises(tl.TensorLangError) as err:
            tl.parse(block.splitlines()[1].strip())
        assert str(err.value) == block.rstrip("\n")


# the table of common mistakes: what a user may write, the hint, and the right form (which parses)
MISTAKES = [
    ("A : [n, m]R; sum(i:n, j:m) A[i, j]", "[n][m]R", "A : [n][m]R; sum(i:n, j:m) A[i, j]"),
    ("x : [n]R; sum(i:n) x[i] ** 2", "x[i] * x[i]", "x : [n]R; sum(i:n) x[i] * x[i]"),
    ("x : [n]R; sum(i:n) x[i] ^ 2", "pow(x[i], 2)", "x : [n]R; sum(i:n) pow(x[i], 2)"),
    ("R : rel(n, m); x : [m]R; gen(i:n) sum(j:m) [R(i, j)] * x[j]", "rel[n, m]",
     "R : rel[n, m]; x : [m]R; gen(i:n) sum(j:m) [R(i, j)] * x[j]"),
    ("x : [n]R; sum(i in n) x[i]", "sum(i:n)", "x : [n]R; sum(i:n) x[i]"),
    ("x : [n]R; sum(i = 0:n) x[i]", "sum(i:n)", "x : [n]R; sum(i:n) x[i]"),
    ("x : [n]R; sum(i, n) x[i]", "sum(i:n)", "x : [n]R; sum(i:n) x[i]"),
    ("x : R; let y = x * x; y * y", "let y = e0 in e1", "x : R; let y = x * x in y * y"),
    ("x : [n]R; sum(i:n) [i != 1] x[i]", "[p] * e", "x : [n]R; sum(i:n) [i != 1] * x[i]"),
    ("x : [n]R; sum(i:n) x[i] if i > 0", "[i > 0] * x[i]", "x : [n]R; sum(i:n) [i > 0] * x[i]"),
    ("x : [n]R; sum(i:n) [i > 0 && i < 3] * x[i]", "'and'", "x : [n]R; sum(i:n) [i > 0 and i < 3] * x[i]"),
    ("x : [n]R; sum(i:n) [i < 1 || i > 3] * x[i]", "'or'", "x : [n]R; sum(i:n) [i < 1 or i > 3] * x[i]"),
    ("x : [n]R; sum(i:n) [!(i = 1)] * x[i]", "not p", "x : [n]R; sum(i:n) [not i = 1] * x[i]"),
    ("x : Real; x * x", "written R", "x : R; x * x"),
    ("x : [n]float; sum(i:n) x[i]", "written R", "x : [n]R; sum(i:n) x[i]"),
]


@pytest.mark.parametrize("wrong, hint, right", MISTAKES, ids=[m[0] for m in MISTAKES])
def test_common_mistake_gets_the_right_form(wrong, hint, right):
    with pytest.raises(tl.ParseError) as err:
        tl.parse(wrong, filename="mistake.tl")
    message = str(err.value)
    assert hint in message
    assert re.match(r"mistake\.tl:1:\d+: ", message) and message.splitlines()[-1].strip() == "^"
    tl.parse(right)

