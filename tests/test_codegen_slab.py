"""Gathers whose sums run row by row into slabs (``Schedule.emit_slab``): the same bits as the gather (each
element's terms added in the same order), the reference evaluator's values, at sizes from 0 and past a slab
(where the gather runs), the terms of ``SLAB_JAM`` values of the summed variable added in one pass over the slab
(``emit_jammed_terms``) at every remainder, and the GMM gradient's sums in slabs."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tensorlang as tl
from tensorlang.codegen import hoist
from tensorlang.codegen.schedule import BLOCK_LANES, SLAB, SLAB_JAM, Schedule
from tensorlang.nodes import Call
from oracles import close
from strategies import type_shape

ROOT = Path(__file__).resolve().parent.parent

PROGRAMS = {  # name: (source, whether its statement runs in slabs, sizes (n, m, p) tried)
    # (with partial sums factored and hoisted, ``codegen.hoist``, a sum that leaves out a loop of the target is
    # a binding of its own: "a guarded read" and "lane-blocked" then run no slab, and "a sum of the row" is left
    # a plain product, BLAS's; run without that too, below, they run in slabs)
    # a triangular sum (its domain moves with the target's last loop: one chain per element in the gather), read
    # along that loop: the mean's gradient of the GMM
    "triangular": ("A : [n][m][m]R\nx : [p][m]R\ngen(k:n, a:m) sum(i:p, b:m) [a < b] * x[i, b] * A[k, b, a]", True),
    # the outer products of the GMM's factor gradient, a difference read along the last loop
    "outer products": ("y : [p][n][m]R\nx : [p][m]R\nmu : [n][m]R\n"
                       "gen(k:n, a:m, b:m) sum(i:p) [b < a] * y[i, k, a] * (x[i, b] - mu[k, b])", True),
    # two sums, one that reads no variable of the slab (one number per row), under a bracket on the target
    "two sums and a bracket": ("x : [p][m]R\nw : [p][n]R\n"
                               "gen(k:n, a:m) [a < m - 1] * ((sum(i:p) x[i, a] * w[i, k]) * 2 + sum(i:p) w[i, k])",
                               True),
    # a sum that reads no variable of the slab, unbracketed: one number per row
    "a sum of the row": ("x : [p][m]R\nw : [p][n]R\ngen(k:n, a:m) (sum(i:p) x[i, a] * w[i, k]) * sum(i:p) w[i, k] * w[i, k]",
                         True),
    # the bracket keeps a read in range: at a = 0 the term reads x[-1], so it must not run there
    "a guarded read": ("x : [m]R\ny : [p][n]R\nz : [2]R\ngen(k:n, a:m + 1, b:2) [a >= 1] * sum(i:p) y[i, k] * x[a - 1] * z[b]",
                       True),
    # a gather of two loops that lane blocking runs: in slabs only where its last loop is too short for a block
    "lane-blocked": ("x : [m]R\ny : [p][n]R\ngen(k:n, a:m + 1) [a >= 1] * sum(i:p) y[i, k] * x[a - 1]", True),
    # a sum read along its own summed variable (the last index of A): the gather's innermost loop, not slabs
    "read along the sum": ("A : [n][m][p]R\nx : [p]R\ngen(k:n, a:m) sum(i:p) A[k, a, i] * x[i]", False),
}
SIZES = [(0, 0, 0), (1, 1, 1), (2, 3, 0), (3, 5, 4), (4, 7, 9)]


HOISTED_SUMS = {"a guarded read", "lane-blocked", "a sum of the row"}


def _run_both(expr, inputs, monkeypatch):
    """The kernel's result with slabs (as compiled) and with every statement a gather, and the slab form's source."""
    slab = tl.compile(expr)
    with monkeypatch.context() as m:
        m.setattr(Schedule, "slab_reductions", staticmethod(lambda *a: []))
        gather = tl.compile(expr)
    return slab(**inputs), gather(**inputs), slab.source


def _sums_in_place(monkeypatch):
    """Sums neither factored nor hoisted (``codegen.hoist``), as written: black boxes alone leave their loops."""
    monkeypatch.setattr(hoist, "factored", lambda lets, leaves: (lets, leaves))
    monkeypatch.setattr(hoist, "HOISTABLE", (Call,))


def _flat(v):
    return [u for w in v for u in _flat(w)] if isinstance(v, tuple) else [np.asarray(v)]


@pytest.mark.parametrize("sums_hoisted", [True, False])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_slabs_give_the_gathers_bits_and_the_evaluators_values(name, sums_hoisted, monkeypatch):
    src, in_slabs = PROGRAMS[name]
    if sums_hoisted:
        in_slabs = in_slabs and name not in HOISTED_SUMS
    else:
        _sums_in_place(monkeypatch)
    e = tl.parse(src)
    for k, (n, m, p) in enumerate(SIZES):
        sizes = {"n": n, "m": m, "p": p}
        rng = np.random.default_rng(k)
        inputs = {v: rng.normal(size=type_shape(t, sizes)) for v, t in e.free_vars.items()}
        got, gather, source = _run_both(e, inputs, monkeypatch)
        assert ("tl_slab" in source) == in_slabs
        assert all(np.array_equal(a, b) for a, b in zip(_flat(got), _flat(gather))), (name, sizes)
        assert close(got, tl.evaluate(e, **inputs)), (name, sizes)


@pytest.mark.parametrize("p", range(2 * SLAB_JAM + 2))
def test_jammed_terms_give_the_gathers_bits_at_every_remainder(p, monkeypatch):
    """``outer products`` sums over one variable, unbracketed: its terms run ``SLAB_JAM`` points at a time (each
    slab element loaded once per block), then the rest one by one, with the gather's bits."""
    e = tl.parse(PROGRAMS["outer products"][0])
    rng = np.random.default_rng(p)
    inputs = {"y": rng.normal(size=(p, 3, 5)), "x": rng.normal(size=(p, 5)), "mu": rng.normal(size=(3, 5))}
    got, gather, source = _run_both(e, inputs, monkeypatch)
    assert f"+ {SLAB_JAM} <= " in source and "tl_jacc" in source
    assert np.array_equal(got, gather) and close(got, tl.evaluate(e, **inputs))


def test_a_gather_that_lane_blocking_runs_takes_slabs_only_below_a_block(monkeypatch):
    _sums_in_place(monkeypatch)
    lanes, triangle = (tl.compile(tl.parse(PROGRAMS[name][0])).source for name in ("lane-blocked", "triangular"))
    assert f") < {BLOCK_LANES}) {{" in lanes and f") < {BLOCK_LANES}) {{" not in triangle


def test_a_slab_too_large_for_the_stack_runs_the_gather():
    """A row of ``outer products`` has m^2 elements: past ``SLAB`` the kernel takes the gather (chosen at run time)."""
    src, _ = PROGRAMS["outer products"]
    e = tl.parse(src)
    m = int(SLAB ** 0.5) + 1
    rng = np.random.default_rng(5)
    inputs = {"y": rng.normal(size=(3, 2, m)), "x": rng.normal(size=(3, m)), "mu": rng.normal(size=(2, m))}
    assert close(tl.compile(e)(**inputs), tl.evaluate(e, **inputs))


@pytest.mark.parametrize("dims", [(7, 2, 3), (30, 5, 4)])
def test_the_gmm_gradients_sums_run_in_slabs_with_the_gathers_bits(dims, monkeypatch):
    e = tl.parse((ROOT / "examples" / "gmm.tl").read_text())
    a = tl.adjoint(e, wrt=["alpha", "mu", "q", "L"])
    n, m, b = dims
    rng = np.random.default_rng(1)
    inputs = {"x": rng.normal(size=(n, m)), "alpha": rng.normal(size=b), "mu": rng.normal(size=(b, m)),
              "q": rng.normal(size=(b, m)) * 0.1, "L": np.tril(rng.normal(size=(b, m, m)), -1) * 0.1, "dy": 1.0}
    got, gather, source = _run_both(a, inputs, monkeypatch)
    assert source.count("tl_slab") >= 2
    assert all(np.array_equal(x, y) for x, y in zip(_flat(got), _flat(gather)))
    assert close(got, tl.evaluate(a, **inputs))
