"""Statements fused into one block program per chunk (docs/dask.md, "Fused block programs"): the
deconvolution's loss and gradients and the 2-D stencil energy's gradient, on Dask inputs in several
chunkings (uneven ones, chunks smaller than the halo, one chunk), equal the single-machine kernel and a NumPy
oracle (``np.correlate``, slicing: no code shared with tensorlang); a fused plan makes one block task per
chunk where the unfused plan makes one per statement, and the statements fused into it are no keys of
the graph.
"""
from __future__ import annotations

import numpy as np
import pytest

import tensorlang as tl
from tensorlang import examples

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")

try:  # tests/ on sys.path (pytest's default for a folder without __init__.py)
    from oracles import close
    from test_dask import STENCIL, computed, generated_gradients, lazy_inputs
except ImportError:  # tests/ as a package
    from tests.oracles import close
    from tests.test_dask import STENCIL, computed, generated_gradients, lazy_inputs

N, M = 120, 6
# chunkings of x (N + M - 1 = 125 entries) and z (N = 120): even; uneven, with chunks of 3 and 1, smaller
# than the convolution's halo of M - 1; and chunks of 1 and 2 at the start of x, which cut the
# convolution's sum over j (x[i + j] follows j): the statement is then a sum across blocks and is not fused
CHUNKINGS = {
    "four": ((32, 32, 32, 29), (30, 30, 30, 30)),
    "uneven": ((7, 40, 3, 51, 24), (13, 1, 70, 36)),
    "small": ((1, 2, 1, 2) + (30,) * 3 + (29,), (2, 1) + (39,) * 3),
    "whole": ((N + M - 1,), (N,)),   # one block: the statements fused into it computed whole
}


def fused(plan) -> list:
    """``[(reader, [statements fused into it])]`` of a plan, by name."""
    return [(sp.stmt.var.name if sp.stmt.var is not None else "out", [m.var.name for m in sp.program.fused])
            for sp in plan.statements]


def block_tasks(*collections) -> int:
    """The number of block tasks (``run_block`` calls) in the graph of ``collections``."""
    from tensorlang.codegen.dask_graph import run_block

    graph: dict = {}
    for c in collections:
        graph.update(dict(c.__dask_graph__()))
    return sum(isinstance(t, tuple) and t and t[0] is run_block for t in graph.values())


def key_names(*collections) -> set:
    graph: dict = {}
    for c in collections:
        graph.update(dict(c.__dask_graph__()))
    return {k[0] if isinstance(k, tuple) else k for k in graph}


# -- the deconvolution ---------------------------------------------------------------------------------


def deconv_numpy(x, c, z):
    """The loss, its gradient in x and in c, by NumPy."""
    r = np.correlate(x, c, "valid") - z
    return float(r @ r), 2 * np.convolve(r, c), 2 * np.correlate(x, r, "valid")


@pytest.fixture(scope="module")
def deconv():
    loss = tl.parse(examples.source("deconv_loss"))
    fit = tl.parse(examples.source("kernel_fit"))
    return tl.compile(loss), tl.compile(tl.grad(loss, ["x", "c"])), tl.compile(tl.grad(fit, "c"))


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(21)
    return {"x": rng.standard_normal(N + M - 1), "c": rng.standard_normal(M), "z": rng.standard_normal(N)}


@pytest.mark.parametrize("chunking", sorted(CHUNKINGS))
def test_fused_deconvolution_loss_and_gradients(deconv, data, chunking):
    loss, grad, grad_c = deconv
    xc, zc = CHUNKINGS[chunking]
    lz = {"x": da.from_array(data["x"], chunks=(xc,)), "c": data["c"], "z": da.from_array(data["z"], chunks=(zc,))}
    value, (gx, gc), gc_only = dask.compute(loss(**lz), grad(**lz), grad_c(**lz))
    ref_value, ref_gx, ref_gc = deconv_numpy(data["x"], data["c"], data["z"])
    assert close(float(value), loss(**data)) and close(float(value), ref_value)
    assert close((gx, gc), grad(**data)) and close(gx, ref_gx) and close(gc, ref_gc)
    assert close(gc_only, grad_c(**data)) and close(gc_only, ref_gc)
    # the loss: the convolution f computed in the block of the sum; the gradient in c: the residual X8
    # and its double dX8 in the block of the sum; in x and c, dX8 has two readers and keeps its blocks
    assert fused(grad.blocks(lz)) == [("dX8", ["X8"]), ("out", []), ("out", [])]
    if chunking == "small":
        # x's chunks of 1 and 2 cut f's sum over j (x[i + j] follows j): f is a sum across blocks; and
        # the gradient's k0 (x[i0 + k0]) in 4, so dX8 would be computed 4 times over (RECOMPUTE)
        assert fused(loss.blocks(lz)) == [("f", []), ("out", [])]
        assert fused(grad_c.blocks(lz)) == [("dX8", ["X8"]), ("out", [])]
    else:
        assert fused(loss.blocks(lz)) == [("out", ["f"])]
        assert fused(grad_c.blocks(lz)) == [("out", ["X8", "dX8"])]


def test_fused_convolution_windows_grow_backwards(deconv, data):
    """The gradient in c, in chunks of 30: each block of the sum computes dX8 and X8 on the block's own
    range (no halo: dX8 reads X8 pointwise, the sum reads dX8 pointwise) from x's window with the
    convolution's M - 1 halo, and z's block."""
    _, _, grad_c = deconv
    lz = {"x": da.from_array(data["x"], chunks=30), "c": data["c"], "z": da.from_array(data["z"], chunks=30)}
    text = str(grad_c.blocks(lz))
    assert "X8, dX8 fused into out" in text
    assert f"i0 in [30, 60): c[0:{M}]  x[30:{60 + M - 1}]  z[30:60]; computing X8[30:60]  dX8[30:60]" in text


def test_fused_plans_have_one_block_task_per_chunk_and_no_intermediate_keys(deconv, data):
    loss, grad, grad_c = deconv
    k = 4
    lz = {"x": da.from_array(data["x"], chunks=32), "c": data["c"], "z": da.from_array(data["z"], chunks=30)}
    plans = {fuse: (loss.blocks(lz, fuse=fuse), grad_c.blocks(lz, fuse=fuse)) for fuse in (True, False)}
    made = {fuse: [p.collection(lz) for p in plans[fuse]] for fuse in plans}
    assert block_tasks(*made[True]) == 2 * k  # one block program per chunk for each kernel
    assert block_tasks(*made[False]) == 2 * k + 3 * k  # f, the sum; X8, dX8, the sum
    assert len(dict(made[True][0].__dask_graph__())) < len(dict(made[False][0].__dask_graph__()))
    names = {fuse: key_names(*made[fuse]) for fuse in made}
    for var in ("f", "X8", "dX8"):
        assert any(n.startswith(f"tl-{var}-") for n in names[False])
        assert not any(n.startswith(f"tl-{var}-") for n in names[True])
    assert close(dask.compute(*made[True]), dask.compute(*made[False]))
    grad_plan = grad.blocks(lz)
    assert block_tasks(*grad_plan.collection(lz)) == 3 * k  # dX8 (X8 in it), the gradients in x and c
    assert block_tasks(*grad.blocks(lz, fuse=False).collection(lz)) == 4 * k


# -- the 2-D stencil -----------------------------------------------------------------------------------


def stencil_numpy(u):
    """The 5-point stencil energy's gradient by NumPy."""
    r = 4 * u[1:-1, 1:-1] - u[:-2, 1:-1] - u[2:, 1:-1] - u[1:-1, :-2] - u[1:-1, 2:]
    g = np.zeros_like(u)
    g[1:-1, 1:-1] += 8 * r
    g[:-2, 1:-1] -= 2 * r
    g[2:, 1:-1] -= 2 * r
    g[1:-1, :-2] -= 2 * r
    g[1:-1, 2:] -= 2 * r
    return g


S = 30  # u is (S + 2) x (S + 2)
STENCIL_CHUNKINGS = {  # chunks of u, and whether the residual X16 and its double are fused into the gradient
    "rows": (((8, 8, 8, 8), (S + 2,)), True),
    "tiles": (((11, 5, 16), (7, 25)), True),
    "uneven": (((1, 13, 2, 16), (20, 1, 11)), True),
    "rows of one": (((1,) * (S + 2), (S + 2,)), False),  # a halo of 2 rows per row: 3x recomputed
    "whole": (((S + 2,), (S + 2,)), True),  # one block, X16 and dX16 computed whole in it
}
FUSED = [("out", ["X16", "dX16"])]
UNFUSED = [("dX16", ["X16"]), ("out", [])]  # dX16 reads X16 pointwise: nothing recomputed


@pytest.fixture(scope="module")
def stencil_grad():
    return tl.compile(tl.grad(tl.parse(STENCIL), "u"))


@pytest.mark.parametrize("chunking", sorted(STENCIL_CHUNKINGS))
def test_fused_stencil_gradient(stencil_grad, chunking):
    chunks, fuses = STENCIL_CHUNKINGS[chunking]
    u = np.random.default_rng(22).standard_normal((S + 2, S + 2))
    lz = {"u": da.from_array(u, chunks=chunks)}
    got = stencil_grad(**lz).compute()
    assert close(got, stencil_grad(u=u)) and close(got, stencil_numpy(u))
    plan = stencil_grad.blocks(lz)
    assert fused(plan) == (FUSED if fuses else UNFUSED)
    if fuses:
        assert block_tasks(got_lazy := stencil_grad(**lz)) == len(plan.statements[0].blocks)
        assert not any(n.startswith(("tl-X16-", "tl-dX16-")) for n in key_names(got_lazy))


# -- generated programs' gradients, fused wherever they can be -------------------------------------------


def test_gradients_of_generated_programs_fused_wherever_they_can_be(monkeypatch):
    """With any recomputation allowed (``RECOMPUTE`` unbounded), every statement that can be fused is,
    in random chunkings and in blocks of 1 to 3 elements: the results equal the kernel's."""
    from tensorlang.codegen import blocks

    monkeypatch.setattr(blocks, "RECOMPUTE", float("inf"))
    rng = np.random.default_rng(23)
    plans = fused_plans = 0
    for g, ins in generated_gradients(120, 30):
        k = tl.compile(g)
        lz = lazy_inputs(g, ins, rng)
        ref = k(**ins)
        for plan in (k.blocks(lz), k.blocks(lz, chunks=int(rng.integers(1, 4)))):
            plans += 1
            fused_plans += any(sp.program.fused for sp in plan.statements)
            assert close(computed(plan.collection(lz)), ref), f"{g}\n{plan}"
    # few gradients fuse: most intermediates have two readers or are scalars, and blocks of 1 to 3
    # elements cut a statement's summations too (it is then a sum across blocks)
    assert fused_plans >= 2, (fused_plans, plans)

