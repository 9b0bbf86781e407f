"""Every documented example runs as written: the ```python and ```console blocks of README.md and of
each page of docs/ run, in order within their page, in a fresh directory outside the clone, and what a
block shows (``# -> value``, a following ```text block, a command's output) is what it gives.  The
conventions are ``doc_blocks.py``'s (CONTRIBUTING.md, "Examples in the documentation"); the installed
wheel runs some of the pages too (``tests/installed/check.py``)."""
import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from doc_blocks import blocks, matches, runnable

CLONE = Path(__file__).resolve().parents[1]
RUNNER = Path(__file__).with_name("doc_blocks.py")
PAGES = [p for p in [CLONE / "README.md", *sorted((CLONE / "docs").glob("*.md"))]
         if runnable(p.read_text(encoding="utf-8"))]
NEEDS = {"dask.md": "dask"}  # a page about an optional extra runs where the extra is installed


def run_pages(pages, where: Path) -> subprocess.CompletedProcess:
    shutil.copy(RUNNER, where)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")  # tl-cost, as installed
    return subprocess.run([sys.executable, "doc_blocks.py", *map(str, pages)], cwd=where, env=env,
                          capture_output=True, text=True, timeout=600)


def test_pages_are_found():
    names = {p.name for p in PAGES}
    assert {"README.md", "ad.md", "language.md", "derive.md", "dask.md"} <= names, names


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_page_runs_as_written(page, tmp_path):
    if page.name in NEEDS and importlib.util.find_spec(NEEDS[page.name]) is None:
        pytest.skip(f"{page.name} needs the optional {NEEDS[page.name]}")
    where = tmp_path / "reader"
    where.mkdir()
    assert not where.resolve().is_relative_to(CLONE)
    r = run_pages([page], where)
    assert r.returncode == 0, f"{r.stderr[-6000:]}\n--- its output:\n{r.stdout[-3000:]}"


# -- the conventions themselves ---------------------------------------------------------------------


def test_shown_values_match_as_rounded_with_ellipses():
    assert matches("(0.2842, -0.455)", "(0.28420000000000006, -0.45499999999999996)")
    assert not matches("(0.2842, -0.455)", "(0.2843, -0.455)")
    assert matches("array([1410., -480., 0.])", "array([ 1410.00000001,  -480.,     0.])")
    assert matches("Piecewise((2*m*n + 5*n - 1, (m >= 1) & (n >= 1)), ...)",
                   "Piecewise((2*m*n + 5*n - 1, (m >= 1) & (n >= 1)), (6*n - 1, Eq(m, 0) & (n >= 1)), (0, True))")
    assert not matches("Piecewise((2*m*n + 5*n - 1, ...)", "Piecewise((2*m*n + 5*n + 1, (m >= 1)))")
    assert not matches("31000", "31001") and matches("31000", "31000")
    assert not matches("i1", "i 1") and not matches("(12.0, None)", "(12.0, None, None)")


def test_blocks_outputs_and_skips():
    page = textwrap.dedent("""\
        ```python
        print(1 + 1)
        ```

        ```text
        2
        ```

        ```text
        not an output: a python block does not come right before it
        ```
          ```python
          # not run
          ```
        ```console
        $ echo hi
        hi
        ```
        """)
    found = blocks(page)
    assert [b.lang for b in found] == ["python", "text", "python", "console"]
    assert found[0].output is not None and found[0].output.text == "2\n" and found[0].line == 2
    assert [b.lang for b in runnable(page)] == ["python", "console"]


def test_a_page_that_shows_a_wrong_value_fails(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(textwrap.dedent("""\
        ```python
        import math

        def f(x):
            return x * x

        f(3)            # -> 9
        math.sqrt(2)    # -> 1.4142  # a remark
        f(
            2)
        # -> 4
        print("a", "b")
        ```
        ```text
        a b
        ```

        ```python
        f(4)  # -> 15
        ```
        """))
    where = tmp_path / "run"
    where.mkdir()
    r = run_pages([page], where)
    assert r.returncode == 1
    assert f"{page}:19: f(4)" in r.stderr and "the page shows: 15" in r.stderr and "it gives:       16" in r.stderr
    page.write_text(page.read_text().replace("# -> 15", "# -> 16"))
    assert run_pages([page], where).returncode == 0
    page.write_text(page.read_text().replace("a b\n```", "a c\n```"))
    r = run_pages([page], where)
    assert r.returncode == 1 and "is not what the block above prints" in r.stderr


def test_an_error_names_the_page_and_line(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("text\n\n```python\nx = 1\nopen('examples/conv.tl')\n```\n")
    where = tmp_path / "run"
    where.mkdir()
    r = run_pages([page], where)
    assert r.returncode == 1 and f"{page}:5: open('examples/conv.tl')" in r.stderr
    assert "FileNotFoundError" in r.stderr
