"""The package as a user meets it: its version, the examples it ships, ``python -m tensorlang.examples``, one
of its modules imported alone.
(The wheel itself is built, installed and run outside the clone by ``tests/installed/check.py``.)"""
import importlib.metadata
import subprocess
import sys
from pathlib import Path

import tensorlang as tl
from tensorlang import examples


def test_version_is_the_distributions():
    assert tl.__version__ == importlib.metadata.version("tensorlang")
    assert tl.__version__[0].isdigit()


def test_examples_parse_and_describe_themselves():
    assert "conv" in examples.names() and "deconv_loss" in examples.names()
    for name in examples.names():
        assert examples.describe(name)
        tl.parse(examples.source(name))
    assert examples.path("conv.tl") == examples.path("conv")
    assert examples.reference().name == "language.md" and examples.reference().exists()


def test_examples_tour_runs_one_program():
    out = subprocess.run([sys.executable, "-m", "tensorlang.examples", "skip_x1"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "== skip_x1: x[0] + x[2]" in out.stdout and "C kernel agrees" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "tensorlang.examples", "nope"], capture_output=True, text=True)
    assert bad.returncode == 2 and "there is no example 'nope'" in bad.stderr
    usage = subprocess.run([sys.executable, "-m", "tensorlang.examples", "--help"], capture_output=True, text=True)
    assert usage.returncode == 0 and "usage: python -m tensorlang.examples" in usage.stdout
    assert "deconv_loss" in usage.stdout and "no example" not in usage.stderr


def test_demo_tells_the_story_in_under_40_lines():
    demo = Path(__file__).resolve().parents[1] / "examples" / "demo.py"
    out = subprocess.run([sys.executable, str(demo)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) < 40
    for step in ("1. A tensorlang program", "2. Its gradient", "3. Certified", "L-BFGS-B", "tensorlang.ad"):
        assert any(step in line for line in lines), step


def test_dir_lists_the_public_names():
    listed = dir(tl)
    assert set(tl.__all__) <= set(listed) and {"ad", "examples", "__version__"} <= set(listed)
    for internal in ("api", "parser", "checker", "nodes", "PackageNotFoundError", "_version", "_api_all"):
        assert internal not in listed
    assert tl.examples.path("conv.tl").name == "conv.tl" and tl.ad.grad(lambda x: x * x)(3.0) == 6.0
    assert tl.nodes.Expr is tl.Expr  # the implementation's modules stay reachable by name


def test_nodes_imported_alone_print_compare_and_evaluate():
    """``from tensorlang.nodes import ...`` in a fresh interpreter: the package is imported first, and with it
    every module that installs what a node does (``nodes.OPERATIONS``) and what a kernel's derivatives are
    compiled from (``codegen.kernel.DERIVATIVES``)."""
    code = ("from tensorlang.nodes import Add, Call, Const\n"
            "e = Add(Const(1), Call('exp', (Const(0),)))\n"
            "from tensorlang.codegen.kernel import DERIVATIVES\n"
            "print(str(e), repr(e), e == Add(Const(1), Call('exp', (Const(0),))), e(),\n"
            "      callable(DERIVATIVES.adjoint))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "+", "exp(0)", "<Expr", "1", "+", "exp(0)>", "True", "2.0", "True"]
