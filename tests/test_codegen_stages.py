"""Every stage of a compiled kernel prints (``Kernel.explain``), and targets come from one table."""
from __future__ import annotations

import pytest

import tensorlang as tl
from tensorlang.codegen.kernel import TARGETS, generate
from tensorlang.codegen.lower import lower
from tensorlang.codegen.loop_ir import PARALLEL_WORK
from tensorlang.errors import UnsupportedError


def test_explain_shows_the_program_its_normal_form_its_statements_and_the_source():
    e = tl.parse("gen(i:n) sum(j:m) x[i + j] * c[j]", x="[n + m - 1]R", c="[m]R")
    text = tl.compile(e).explain()
    assert [line for line in text.splitlines() if line.startswith("== ")] == [
        "== program", "== normal form", "== statements", "== loops", "== loops after openmp",
        "== loops after serial copies", "== c source"]
    assert "out0[i] = sum(j:m) x[i + j] * c[j]" in text
    assert generate(e, "c")[0].strip() in text


def test_explain_prints_the_loop_ir_after_each_pass():
    """The loops as emitted mark the loops whose iterations may run on threads; the openmp pass makes each an
    OpenMP loop with its schedule and work condition; after the serial-copies pass each parallel loop sits
    under its work condition, with a serial copy in the ``else``; a stage is printed alone by name.  For the
    CUDA target (no OpenMP: its threads are the grid's) the openmp pass leaves plain loops."""
    e = tl.parse("gen(i:n) sum(j:m) x[i + j] * c[j]", x="[n + m - 1]R", c="[m]R")
    k = tl.compile(e)
    marked = [line.strip() for line in k.explain(stage="loops").splitlines() if "[threads, work " in line]
    emitted, scheduled = k.explain(stage="loops after openmp"), k.explain(stage="loops after serial copies")
    assert "[threads" not in emitted + scheduled
    parallel = [line.strip() for line in emitted.splitlines() if "[parallel " in line]
    assert parallel and len(parallel) == len(marked) and all(", if (" in line for line in parallel)
    lines = [line.strip() for line in scheduled.splitlines()]
    at = [k for k, line in enumerate(lines) if "[parallel " in line]
    assert len(at) == len(parallel) and not any(", if (" in lines[k] for k in at)
    assert all(lines[k - 1].startswith("if (") and lines[k - 1].endswith(f">= {PARALLEL_WORK}") for k in at)
    assert k.explain(stage="c source") in k.explain()
    with pytest.raises(UnsupportedError, match="no stage 'schedule': the stages are"):
        k.explain(stage="schedule")


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


def _tanh_network(dims: list[str]) -> str:
    """h_l = tanh(W_l h_(l-1)) over layers of widths ``dims``; loss |h_k - y|^2."""
    lines = [f"x : [{dims[0]}]R", f"y : [{dims[-1]}]R"]
    lines += [f"W{l} : [{dims[l]}][{dims[l - 1]}]R" for l in range(1, len(dims))]
    prev = "x"
    for l in range(1, len(dims)):
        lines.append(f"let h{l} = gen(i:{dims[l]}) tanh(sum(j:{dims[l - 1]}) W{l}[i, j] * {prev}[j]) in")
        prev = f"h{l}"
    lines.append(f"sum(i:{dims[-1]}) ({prev}[i] - y[i]) * ({prev}[i] - y[i])")
    return "\n".join(lines)


@pytest.mark.parametrize("dims", [["n"] * 9, ["n", "m", "n", "m", "m", "n"]])
def test_statements_equal_but_for_their_arrays_share_one_function(dims):
    """A deep network's layers (and their adjoints) are the same statements on other arrays: each
    distinct one is one function; layers of other extents are not (results as the evaluator's)."""
    import numpy as np

    e = tl.parse(_tanh_network(dims))
    ws = [f"W{l}" for l in range(1, len(dims))]
    g = tl.grad(e, ws)
    if len(set(dims)) == 1:  # as many functions (declared, then defined) as for three layers
        shallow = tl.grad(tl.parse(_tanh_network(dims[:4])), ws[:3])
        assert generate(g, "c")[0].count("noinline") == generate(shallow, "c")[0].count("noinline") > 0
    rng = np.random.default_rng(0)
    size = {"n": 5, "m": 3}
    inputs = {"x": rng.normal(size=size[dims[0]]), "y": rng.normal(size=size[dims[-1]])}
    inputs |= {w: rng.normal(size=(size[dims[l + 1]], size[dims[l]])) * 0.7 for l, w in enumerate(ws)}
    def leaves(t):
        return [x for p in t for x in leaves(p)] if isinstance(t, tuple) else [t]

    got, want = leaves(tl.compile(g)(**inputs)), leaves(tl.evaluate(g, **inputs))
    assert len(got) == len(want) == len(ws)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
