"""Run the ```python blocks of Markdown pages as a reader would, and compare what they show.

    python doc_blocks.py PAGE.md [PAGE.md ...]

The conventions (CONTRIBUTING.md, "Examples in the documentation"):

- Every ```` ```python ```` block of a page runs, in the order of the page, all of a page's blocks in
  one namespace (a later block may use the names of an earlier one), in the current directory.  A
  block whose first line is ``# not run`` is skipped; a block fenced otherwise (```` ```text ````,
  ```` ```sh ````, none) is not run.
- ``expression  # -> shown``: the line's expression is evaluated and ``shown`` must read as its
  ``repr`` (as the interpreter echoes it), or as what the line printed when it printed something.
  A remark may follow the shown text after ``  # ``.  The ``# ->`` goes on the last line of a
  statement that spans several, or on a comment line of its own right below the statement.
- A ```` ```console ```` block is commands (``$ tl-cost ...``), each followed by what it prints; they
  run with the shell, in the same directory.
- A ```` ```text ```` block right after a ```` ```python ```` block (nothing but blank lines between)
  is what the Python block prints.
- Shown text is compared token by token, whitespace aside; ``...`` stands for any text; a shown number
  matches a value that rounds to it at the digits shown (``0.2842`` matches ``0.28420000000000006``).

Exit status 0 when every page runs and shows what it says; 1 otherwise, with the page, the line and
the difference.  The pages run in this process, one after another, so run it from a fresh directory
(``tests/test_docs_run.py`` copies it into a temporary directory outside the clone, as
``tests/installed/check.py`` does for the installed wheel).  ``tensorlang`` and the commands it
installs (``tl-cost``) must be on the path of the interpreter and the shell.
"""
from __future__ import annotations

import ast
import contextlib
import io
import linecache
import re
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

FENCE = re.compile(r"^(\s*)```(\w*)\s*$")
SHOWN = re.compile(r"#\s*->\s?(.*?)(?:\s{2,}#.*)?$")
TOKEN = re.compile(r"\.\.\.|[A-Za-z_]\w*|[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|\S")
NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?$")


@dataclass
class Block:
    lang: str
    line: int  # the page's line of the block's first line of code (1-based)
    text: str
    output: "Block | None" = field(default=None)  # the ```text block that shows what it prints


def blocks(page: str) -> list[Block]:
    """The fenced blocks of a Markdown text, with their languages and positions; a ```text block right
    after a ```python block becomes its ``output``."""
    lines = page.split("\n")
    found: list[Block] = []
    gap_after: dict[int, bool] = {}  # index of a block -> only blank lines between it and the next
    i = 0
    last_end = None
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang = m.group(1), m.group(2)
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        body = [ln[len(indent):] if ln.startswith(indent) else ln.lstrip() for ln in lines[i + 1:j]]
        if found and last_end is not None:
            gap_after[len(found) - 1] = all(not ln.strip() for ln in lines[last_end + 1:i])
        found.append(Block(lang, i + 2, "\n".join(body) + "\n"))
        last_end = j
        i = j + 1
    out = []
    for k, b in enumerate(found):
        if b.lang == "text" and k > 0 and found[k - 1].lang == "python" and gap_after.get(k - 1):
            found[k - 1].output = b
            continue
        out.append(b)
    return out


def tokens(text: str) -> list[str]:
    return TOKEN.findall(text)


def _decimals(shown: str) -> int:
    mantissa, _, exponent = shown.lower().partition("e")
    digits = len(mantissa.partition(".")[2])
    return digits - int(exponent or 0)


def _same_token(shown: str, actual: str) -> bool:
    if shown == actual:
        return True
    if NUMBER.match(shown) and NUMBER.match(actual):
        return abs(float(shown) - float(actual)) <= 0.5000001 * 10.0 ** -_decimals(shown) + 1e-12 * abs(float(actual))
    return False


def matches(shown: str, actual: str) -> bool:
    """Whether ``actual`` reads as ``shown``: token by token, ``...`` any run of tokens, numbers rounded
    to the digits shown."""
    want, have = tokens(shown), tokens(actual)
    if sys.modules.get("numpy") is not None and int(sys.modules["numpy"].__version__.split(".")[0]) < 2:
        have = tokens(re.sub(r"np\.(?:float|int|complex)\d+\(([^()]*)\)", r"\1", actual))
        want = tokens(re.sub(r"np\.(?:float|int|complex)\d+\(([^()]*)\)", r"\1", shown))
    memo: dict = {}

    def go(i: int, j: int) -> bool:
        if (i, j) in memo:
            return memo[i, j]
        if i == len(want):
            r = j == len(have)
        elif want[i] == "...":
            r = any(go(i + 1, k) for k in range(j, len(have) + 1))
        else:
            r = j < len(have) and _same_token(want[i], have[j]) and go(i + 1, j + 1)
        memo[i, j] = r
        return r

    return go(0, 0)


class Failure(Exception):
    pass


def _shown_at(source_lines: list[str], stmt: ast.stmt) -> str | None:
    """The text after ``# ->`` on the statement's last line, or on a comment line right below it."""
    below = source_lines[stmt.end_lineno] if stmt.end_lineno < len(source_lines) else ""
    if below.lstrip().startswith("#"):
        m = SHOWN.match(below.strip())
        if m:
            return m.group(1).strip()
    last = source_lines[stmt.end_lineno - 1]
    if "#" not in last:
        return None
    try:  # the comment, found by the tokenizer so that a '#' in a string is not one
        import tokenize

        comments = [t.string for t in tokenize.generate_tokens(io.StringIO(last + "\n").readline)
                    if t.type == tokenize.COMMENT]
    except (tokenize.TokenError, SyntaxError, IndentationError):
        comments = ["#" + last.split("#", 1)[1]]
    for comment in comments:
        m = SHOWN.match(comment)
        if m:
            return m.group(1).strip()
    return None


def run_block(block: Block, path: str, namespace: dict) -> None:
    """Run one block statement by statement, checking each ``# ->`` and the ```text output."""
    source_lines = block.text.split("\n")
    try:
        tree = ast.parse(block.text, filename=path)
    except SyntaxError as exc:
        raise Failure(f"{path}:{block.line - 1 + (exc.lineno or 1)}: {exc.msg}") from None
    printed = io.StringIO()
    for stmt in tree.body:
        shown = _shown_at(source_lines, stmt)
        line = block.line + stmt.lineno - 1
        code = ast.get_source_segment(block.text, stmt) or ""
        moved = ast.increment_lineno(stmt, block.line - 1)  # tracebacks name the page's lines
        here = io.StringIO()
        try:
            with contextlib.redirect_stdout(here):
                if isinstance(stmt, ast.Expr):
                    value = eval(compile(ast.Expression(moved.value), path, "eval"), namespace)
                else:
                    exec(compile(ast.Module([moved], type_ignores=[]), path, "exec"), namespace)
                    value = None
        except Exception:
            raise Failure(f"{path}:{line}: {code.splitlines()[0] if code else ''}\n{traceback.format_exc()}") from None
        printed.write(here.getvalue())
        sys.stdout.write(here.getvalue())
        if shown is None:
            continue
        if not isinstance(stmt, ast.Expr):
            raise Failure(f"{path}:{line}: '# ->' shows the value of an expression, and this line is a statement")
        actual = here.getvalue().strip() if here.getvalue() else repr(value)
        if not matches(shown, actual):
            raise Failure(f"{path}:{line}: {code.splitlines()[-1].split('#')[0].strip()}\n"
                          f"  the page shows: {shown}\n  it gives:       {actual}")
    if block.output is not None and not matches(block.output.text, printed.getvalue()):
        raise Failure(f"{path}:{block.output.line - 1}: the ```text block is not what the block above prints\n"
                      f"--- the page shows:\n{block.output.text}--- it prints:\n{printed.getvalue()}")


def runnable(page: str) -> list[Block]:
    return [b for b in blocks(page) if b.lang in ("python", "console") and not b.text.lstrip().startswith("# not run")]


def run_console(block: Block, path: str) -> None:
    """Run each ``$ command`` of a ```console block with the shell; the lines below it, up to the next
    command, are what it prints (standard output and error together)."""
    lines = block.text.split("\n")
    starts = [k for k, ln in enumerate(lines) if ln.startswith("$ ")] + [len(lines)]
    for a, b in zip(starts, starts[1:]):
        command, shown = lines[a][2:], "\n".join(lines[a + 1:b])
        r = subprocess.run(command, shell=True, capture_output=True, text=True)
        sys.stdout.write(r.stdout + r.stderr)
        if shown.strip() and not matches(shown, r.stdout + r.stderr):
            raise Failure(f"{path}:{block.line + a}: $ {command}\n--- the page shows:\n{shown}\n"
                          f"--- it prints (exit status {r.returncode}):\n{r.stdout}{r.stderr}")


def python_view(page: str, chosen: list[Block]) -> list[str]:
    """The page as a Python file: the blocks' code at their own lines, every other line blank.  It is
    what ``linecache`` serves for the page, so that tracebacks show the page's lines and
    ``tensorlang.ad`` finds the source of a function a block defines."""
    view = [""] * (page.count("\n") + 1)
    for b in chosen:
        if b.lang != "python":
            continue
        for k, text in enumerate(b.text.split("\n")[:-1]):
            view[b.line - 1 + k] = text
    return [ln + "\n" for ln in view]


def run_page(path: str) -> int:
    """Run a page's Python blocks in one fresh namespace; the number of blocks run."""
    page = Path(path).read_text(encoding="utf-8")
    chosen = runnable(page)
    view = python_view(page, chosen)
    linecache.cache[path] = (sum(map(len, view)), None, view, path)  # no mtime: never reread from disk
    namespace = {"__name__": "__main__", "__file__": path}
    for block in chosen:
        if block.lang == "console":
            run_console(block, path)
        else:
            run_block(block, path, namespace)
    return len(chosen)


def main(argv: list[str]) -> int:
    status = 0
    for path in argv:
        start = time.perf_counter()
        try:
            count = run_page(path)
        except Failure as exc:
            print(f"FAILED {exc}", file=sys.stderr)
            status = 1
            continue
        print(f"ok {path}: {count} blocks in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
