"""Partial sums computed at the loop depth where their indices live (``codegen.hoist``): ``factored`` takes the
factors that do not read a summed variable out of its sum, and ``hoisted`` makes a sum that leaves out a loop
around it a binding of its own.  Each kernel against the reference evaluator (which shares no code with the
C), at sizes where the sums and the guards that keep reads in range are empty, and the statements it runs."""
from __future__ import annotations

import numpy as np
import pytest

import tensorlang as tl
from test_codegen_gradients import close

TRIANGLE = "f : [p][n][m]R\nL : [n][m][m]R\ngen(k:n, a:m) sum(i:p, b:m) [b < a] * f[i, k, b] * L[k, b, a]"

PROGRAMS = {
    # the gradient of a batch of triangular products: O(p n m^2) written, O(p n m + n m^2) run
    "triangle": (TRIANGLE, lambda p, n, m: dict(f=(p, n, m), L=(n, m, m))),
    # y[i - 1] is read only where some j < i: taken out of the sum over j, it is guarded by 1 <= i
    "read kept in range by the sum's bracket": ("y : [n]R\nx : [n]R\nz : [m]R\n"
                                                "gen(i:n, a:m) sum(j:n) [j < i] * y[i - 1] * x[j] * z[a]",
                                                lambda p, n, m: dict(y=(n,), x=(n,), z=(m,))),
    # a sum that leaves out the points' loop, under a bracket on the variable it reads
    "hoisted under a bracket on what it reads": ("x : [m]R\ny : [n]R\ngen(i:n, a:m + 1) [a >= 1] * sum(j:n) y[j] * x[a - 1]",
                                                 lambda p, n, m: dict(x=(m,), y=(n,))),
    # a sum inside a sum that leaves out the outer one's variable, and a maximum that leaves out a point's
    "nested and a maximum": ("A : [n][m]R\nx : [m + 1]R\ny : [n]R\n"
                             "gen(i:n) (sum(k:n) x[m] * sum(j:m) x[j] * A[k, j]) * y[i] - max(j:m) x[j]",
                             lambda p, n, m: dict(A=(n, m), x=(m + 1,), y=(n,))),
}

SIZES = [(0, 0, 0), (0, 2, 3), (3, 0, 2), (2, 3, 0), (1, 1, 1), (4, 3, 5), (7, 5, 9)]


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_kernel_agrees_with_the_evaluator(name):
    src, shapes = PROGRAMS[name]
    e = tl.parse(src)
    kernel = tl.compile(e)
    rng = np.random.default_rng(3)
    for p, n, m in SIZES:
        if name == "nested and a maximum" and m == 0:
            continue   # (a maximum over nothing is -inf: the evaluator and the kernel agree, but not close())
        inputs = {k: rng.normal(size=s) for k, s in shapes(p, n, m).items()}
        assert close(kernel(**inputs), tl.evaluate(e, **inputs)), (name, p, n, m)


def test_the_triangles_partial_sum_is_a_binding_over_the_variables_it_reads():
    statements = tl.compile(tl.parse(TRIANGLE)).explain("statements")
    binding = next(line for line in statements.splitlines() if line.startswith("sum_h["))
    assert binding.startswith("sum_h[k][b] = ") and "sum(i:p) f[i, k, b]" in binding, statements
    out = next(line for line in statements.splitlines() if line.startswith("out0["))
    assert "sum(b:m)" in out and "sum(i" not in out and "sum_h[k, b]" in out, statements


def test_a_factor_taken_out_of_a_sum_is_guarded_by_the_sums_bracket():
    statements = tl.compile(tl.parse(PROGRAMS["read kept in range by the sum's bracket"][0])).explain("statements")
    out = next(line for line in statements.splitlines() if line.startswith("out0["))
    guard = out[len("out0[i][a] = "):out.index("]", len("out0[i][a] = ")) + 1]
    assert "1 <= i" in guard and "y[i - 1]" in out and "sum(" not in out, statements


def test_a_sum_that_reads_every_loop_stays_in_place():
    statements = tl.compile(tl.parse("A : [n][m]R\nx : [m]R\ngen(i:n) sum(j:m) A[i, j] * x[j]")).explain("statements")
    assert "sum_h" not in statements


def test_the_gmm_gradients_partial_sums_leave_the_loops_they_do_not_read():
    """In the GMM objective's adjoint, the mean's gradient ``sum(i:n, b:m) [a < b] * dy[i, k, b] * L[k, b, a]``
    and the sum over the points of the softmax weights inside ``gen(k, a)`` are computed once per ``(k, b)`` and
    per ``k``."""
    from pathlib import Path

    e = tl.parse((Path(__file__).resolve().parent.parent / "examples" / "gmm.tl").read_text())
    statements = tl.compile(tl.adjoint(e, wrt=["alpha", "mu", "q", "L"])).explain("statements")
    lines = statements.splitlines()
    assert any(line.startswith("sum_h1[k0][i2] = ") and "sum(i0:n)" in line for line in lines), statements
    out1 = next(line for line in lines if line.startswith("out1["))
    assert "sum(i0:n, i2:m)" not in out1 and "sum_h1[k0, i2]" in out1, statements
