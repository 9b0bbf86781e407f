"""Run by ``tests/installed/check.py`` with the interpreter of a fresh virtual environment into which the
wheel was installed (not editable), from a directory outside the clone: every public module, called as
a user calls it.  ``argv[1]`` is the clone, which nothing may be imported from."""
import importlib
import importlib.metadata
import os
import pkgutil
import subprocess
import sys
import tempfile

import numpy as np

import tensorlang as tl
from tensorlang import ad

CLONE = os.path.realpath(sys.argv[1])
BIN = os.path.dirname(sys.executable)


def outside_clone(module) -> None:
    where = os.path.realpath(module.__file__)
    assert not where.startswith(CLONE + os.sep), f"{module.__name__} was imported from the clone: {where}"


def every_module() -> None:
    """Each module of the installed package imports (a subpackage left out of the wheel fails here)."""
    names = [m.name for m in pkgutil.walk_packages(tl.__path__, "tensorlang.") if not m.name.endswith("__main__")]
    for name in ("tensorlang.normalize", "tensorlang.derive", "tensorlang.derive.ad.rules", "tensorlang.codegen",
                 "tensorlang.examples"):
        assert name in names, f"{name} is not installed"
    for name in names:
        outside_clone(importlib.import_module(name))


def language() -> None:
    loss = tl.parse("x : [n]R; c : [n]R; sum(i:n) (x[i] - c[i]) * (x[i] - c[i])")
    g = tl.grad(loss, "x")
    x, c = np.arange(4.0), np.ones(4)
    assert np.allclose(tl.evaluate(g, x=x, c=c), 2 * (x - c))
    assert tl.cost(loss, n=4) > 0 and tl.certify(loss, "x", n=100).ok
    assert abs(tl.compile(loss)(x=x, c=c) - np.sum((x - c) ** 2)) < 1e-12
    with tempfile.TemporaryDirectory() as d:
        tl.export({"loss": loss}, "smoke_export", d)
        sys.path.insert(0, d)
        exported = importlib.import_module("smoke_export")
        assert abs(exported.loss(x=x, c=c) - np.sum((x - c) ** 2)) < 1e-12
        sys.path.remove(d)


def python_ad() -> None:
    def power(x, n):
        r = 1.0
        for _ in range(n):
            r *= x
        return r

    assert ad.gradient(power, 2.0, 3) == (12.0, None)
    # beyond the transform's orders a derivative is recorded, through the layer's own code (installed here in
    # site-packages, which is not the user's code to refuse): d^3/ds^3 of s^3 + 8 s^3
    cubes = lambda v: np.sum(v * v * v)   # noqa: E731
    third = ad.grad(ad.grad(ad.grad(lambda s: cubes(np.array([s, 2 * s])))))(0.5)
    assert abs(third - 54.0) < 1e-9, third


def command_line() -> None:
    run = [os.path.join(BIN, "tl-cost"), "--example", "conv", "--wrt", "x", "--size", "n=100", "--size", "m=4"]
    out = subprocess.run(run, capture_output=True, text=True)
    assert out.returncode == 0 and "ok" in out.stdout, out.stdout + out.stderr
    listing = subprocess.run([os.path.join(BIN, "tl-cost"), "--list-examples"], capture_output=True, text=True)
    assert "deconv_loss" in listing.stdout, listing.stdout + listing.stderr
    tour = subprocess.run([sys.executable, "-m", "tensorlang.examples", "trace"], capture_output=True, text=True)
    assert tour.returncode == 0 and "C kernel agrees" in tour.stdout, tour.stdout + tour.stderr
    from tensorlang.examples import reference
    assert "Iverson" in reference().read_text(encoding="utf-8")


def main() -> None:
    outside_clone(tl)
    assert tl.__version__ == importlib.metadata.version("tensorlang"), tl.__version__
    every_module()
    language()
    python_ad()
    command_line()
    print(f"the installed wheel works (tensorlang {tl.__version__}, from {os.path.dirname(tl.__file__)})")


if __name__ == "__main__":
    main()
