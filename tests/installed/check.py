"""``make test``'s check of the package as a user installs it: build the wheel, install it (not
editable, with its declared dependencies and nothing else) into a fresh virtual environment, and run
``smoke.py`` there from a directory outside the clone, then the examples of some documentation pages
(``DOC_PAGES``, by ``tests/doc_blocks.py``).

Before any of that, the wheel must hold every Python file of the folders that install as packages,
each at its installed path (``derive/ad/rules/math.py`` as ``tensorlang/derive/ad/rules/math.py``),
and the package data (grammar, example programs, the language reference).  Exit status 0 when all
holds; the failing step's output otherwise.  Dependencies come from pip's cache when it has them.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

CLONE = Path(__file__).resolve().parents[2]
# the folders of the clone and the names they install under (the oracle for setup.py's search)
INSTALLED_AS = {"tensorlang": "tensorlang", "normalize": "tensorlang/normalize", "derive": "tensorlang/derive",
                "codegen": "tensorlang/codegen", "examples": "tensorlang/examples"}
# the pages whose examples run again with the wheel (all of them run with the editable install in
# tests/test_docs_run.py; docs/dask.md needs the dask extra, which this environment leaves out)
DOC_PAGES = ["README.md", "docs/language.md", "docs/derive.md", "docs/ad.md", "docs/ad_internals.md"]
DATA = ["tensorlang/grammar.lark", "tensorlang/examples/conv.tl", "tensorlang/examples/tour.ipynb",
        "tensorlang/docs/language.md"]


def step(what: str, cmd: list, **kw) -> None:
    start = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"{what} failed ({' '.join(map(str, cmd))}):\n{r.stdout}\n{r.stderr}")
    print(f"  {what}: {time.perf_counter() - start:.1f} s")
    return r


def missing_from(wheel: Path) -> list[str]:
    names = set(zipfile.ZipFile(wheel).namelist())
    want = list(DATA)
    for folder, installed in INSTALLED_AS.items():
        for f in (CLONE / folder).rglob("*.py"):
            if "__pycache__" not in f.parts:
                want.append(f"{installed}/{f.relative_to(CLONE / folder).as_posix()}")
    return [w for w in want if w not in names]


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="tl-wheel-") as tmp:
        tmp = Path(tmp)
        print("the installed package:")
        source = tmp / "source"  # a clean copy: no build/ or *.egg-info left by an earlier (editable) build
        shutil.copytree(CLONE, source, ignore=shutil.ignore_patterns(".git", ".venv*", "build", "dist", "*.egg-info",
                                                                     "__pycache__", ".hypothesis", ".tl_cache", ".pytest_cache"))
        step("build the wheel", [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", tmp / "dist", source])
        (wheel,) = (tmp / "dist").glob("tensorlang-*.whl")
        missing = missing_from(wheel)
        if missing:
            sys.exit(f"the wheel {wheel.name} lacks {', '.join(missing)}")
        # the environment gets no pip of its own (this pip installs into it: --python), and no module is
        # byte-compiled ahead (--no-compile; SymPy's and SciPy's took three quarters of the install)
        step("make a fresh virtual environment", [sys.executable, "-m", "venv", "--without-pip", tmp / "venv"])
        python = tmp / "venv" / "bin" / "python"
        step("install the wheel and its dependencies",
             [sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-compile", wheel])
        away = tmp / "elsewhere"
        away.mkdir()
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        shutil.copy(Path(__file__).with_name("smoke.py"), away)
        r = step("run the smoke script outside the clone", [python, "smoke.py", CLONE], cwd=away, env=env)
        print("  " + r.stdout.strip())
        # the documentation's examples, as a user of the wheel copies them (tl-cost from its bin/)
        shutil.copy(CLONE / "tests" / "doc_blocks.py", away)
        env["PATH"] = str(python.parent) + os.pathsep + env.get("PATH", "")
        step("run the examples of " + ", ".join(DOC_PAGES) + " outside the clone",
             [python, "doc_blocks.py", *(CLONE / page for page in DOC_PAGES)], cwd=away, env=env)


if __name__ == "__main__":
    main()
