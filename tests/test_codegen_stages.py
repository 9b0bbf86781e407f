"""Every stage of a compiled kernel prints (``Kernel.explain``), and targets come from one table."""
from __future__ import annotations

import pytest

import tensorlang as tl
from tensorlang.codegen.kernel import TARGETS, generate
from tensorlang.codegen.lower import lower
from tensorlang.errors import UnsupportedError


def test_explain_shows_the_program_its_normal_form_its_statements_and_the_source():
    e = tl.parse("gen(i:n) sum(j:m) x[i + j] * c[j]", x="[n + m - 1]R", c="[m]R")
    text = tl.compile(e).explain()
    assert [line for line in text.splitlines() if line.startswith("== ")] == [
        "== program", "== normal form", "== statements", "== c source"]
    assert "out0[i] = sum(j:m) x[i + j] * c[j]" in text
    assert generate(e, "c")[0].strip() in text


def test_the_statement_form_prints_contractions_and_temporaries():
    e = tl.parse("gen(i:n, j:n) sum(k:m) A[i, k] * A[j, k]", A="[n][m]R")
    prog, _ = lower(e)
    assert str(prog).splitlines() == ["sizes n, m", "input A[n][m]  (A)",
                                      "out0[i][j] = gemm: sum(k:m) A[i, k] * A[j, k]", "output out0"]


def test_targets_declare_their_capabilities():
    assert set(TARGETS) == {"c", "cuda"}
    assert TARGETS["c"].caps.openmp and TARGETS["c"].caps.blas
    assert not TARGETS["cuda"].caps.openmp and not TARGETS["cuda"].caps.workspace
    with pytest.raises(UnsupportedError, match="unknown target 'opencl'"):
        tl.compile(tl.parse("x", x="R"), target="opencl")
