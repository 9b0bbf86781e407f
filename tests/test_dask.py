"""Kernels over Dask arrays (docs/dask.md): lazy collections computed blockwise, equal to the
kernel on whole arrays on every scheduler; the footprint of each block is the isl box and nothing more;
a LocalCluster of two worker processes runs graphs built here without building anything.

The deconvolution on the cluster runs at n = 2 * 10^5 and at n = 10^7 in chunks of 10^6 (about 8 s on an
idle machine).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tensorlang as tl
from tensorlang.codegen import dask_graph
from tensorlang.errors import ShapeError, UnsupportedError

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")

try:  # tests/ on sys.path (pytest's default for a folder without __init__.py)
    from strategies import program_and_inputs
    from test_codegen import close, collect
except ImportError:  # tests/ as a package
    from tests.strategies import program_and_inputs
    from tests.test_codegen import close, collect

ROOT = Path(__file__).resolve().parent.parent
DECONV = (ROOT / "examples" / "deconv_loss.tl").read_text()
STENCIL = ("u : [n + 2][n + 2]R\nsum(i:n, j:n) (4 * u[i + 1, j + 1] - u[i, j + 1] - u[i + 2, j + 1] - "
           "u[i + 1, j] - u[i + 1, j + 2]) * (4 * u[i + 1, j + 1] - u[i, j + 1] - u[i + 2, j + 1] - "
           "u[i + 1, j] - u[i + 1, j + 2])")


def random_chunks(extent: int, rng) -> tuple:
    """Chunks of ``extent`` elements: one of size 1 where possible, the rest uneven."""
    if extent == 0:
        return (0,)
    out, left = [], extent
    while left:
        c = int(min(left, rng.integers(1, max(2, extent // 2) + 1)))
        out.append(c)
        left -= c
    if out[0] > 1:
        out[:1] = [1, out[0] - 1]
    return tuple(out)


def lazy(value, rng):
    arr = np.asarray(value)
    return da.from_array(arr, chunks=tuple(random_chunks(d, rng) for d in arr.shape))


def computed(v, scheduler="sync"):
    if isinstance(v, tuple):
        return tuple(computed(x, scheduler) for x in v)
    return v.compute(scheduler=scheduler) if hasattr(v, "compute") else v


def deconv_inputs(n, m, rng):
    return {"x": rng.standard_normal(n + m - 1), "c": rng.standard_normal(m), "z": rng.standard_normal(n)}


# -- the core package does not need Dask ---------------------------------------------------------------


def test_import_tensorlang_does_not_import_dask():
    code = "import sys, tensorlang as tl; k = tl.compile(tl.parse('sum(i:n) x[i]', x='[n]R')); " \
           "import numpy as np; assert k(x=np.ones(3)) == 3; print(any(m.split('.')[0] in ('dask', " \
           "'distributed') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


# -- the deconvolution loss and its gradient, on every local scheduler ----------------------------------


@pytest.fixture(scope="module")
def deconv():
    loss = tl.parse(DECONV)
    return tl.compile(loss), tl.compile(tl.grad(loss, ["x", "c"]))


@pytest.mark.parametrize("scheduler", ["sync", "threads", "processes"])
def test_deconvolution_loss_and_gradient_on_local_schedulers(deconv, scheduler):
    loss, grad = deconv
    rng = np.random.default_rng(1)
    ins = deconv_inputs(300, 7, rng)
    lz = {"x": lazy(ins["x"], rng), "c": ins["c"], "z": lazy(ins["z"], rng)}
    value, g = loss(**lz), grad(**lz)
    assert isinstance(value, da.Array) and value.shape == ()
    assert isinstance(g, tuple) and all(isinstance(p, da.Array) for p in g)
    got_value, got_g = dask.compute(value, g, scheduler=scheduler)
    assert close(float(got_value), loss(**ins))
    assert close(got_g, grad(**ins))


def test_user_chunks_and_a_lazy_small_input(deconv):
    loss, grad = deconv
    rng = np.random.default_rng(2)
    ins = deconv_inputs(100, 4, rng)
    lz = {"x": ins["x"], "c": da.from_array(ins["c"], chunks=2), "z": ins["z"]}
    plan = grad.blocks(lz, chunks=7)
    for sp in plan.statements:
        for cut in sp.cuts:
            assert all(hi - lo == 7 for lo, hi in cut[:-1]) and 0 < cut[-1][1] - cut[-1][0] <= 7
    assert close(computed(plan.collection(lz)), grad(**ins))


def test_bad_inputs_are_shape_errors(deconv):
    loss, _ = deconv
    rng = np.random.default_rng(3)
    ins = deconv_inputs(20, 3, rng)
    with pytest.raises(ShapeError, match="declared shape"):
        loss(x=da.from_array(ins["x"]), c=ins["c"], z=da.from_array(ins["z"][:-1]))
    with pytest.raises(ShapeError, match="missing"):
        loss(x=da.from_array(ins["x"]), c=ins["c"])
    with pytest.raises(ShapeError, match="unknown input 'w'"):
        loss(x=da.from_array(ins["x"]), c=ins["c"], z=ins["z"], w=1)
    with pytest.raises(UnsupportedError, match="chunks"):
        loss.blocks({"x": da.from_array(ins["x"]), "c": ins["c"], "z": ins["z"]}, chunks=0)


# -- footprints: what each task reads is the isl box --------------------------------------------------


@pytest.fixture
def in_pieces(monkeypatch):
    """Blocks run in pieces (``codegen.blocks``, "Runs") at every size, not only where the windows they would
    join are large."""
    from tensorlang.codegen import blocks

    monkeypatch.setattr(blocks, "IN_PLACE", 1)


@pytest.fixture(params=["whole", "in pieces"])
def blocks_run(request):
    """Each test that takes it runs twice: blocks whole where their windows are small (the default), and in
    pieces at every size (``in_pieces``)."""
    if request.param == "in pieces":
        request.getfixturevalue("in_pieces")
    return request.param


def recorded_reads(kernel, inputs, monkeypatch, fuse=True):
    """``[(entry, sizes, {argument: shape})]`` of every run of a block program in ``kernel(**inputs)`` (its
    statements fused where they can be, or not), computed synchronously."""
    from tensorlang.codegen import dask_graph

    seen = []
    run = dask_graph.run_program

    def spy(library, sizes, args, pieces):
        shapes = {k: np.shape(v) for k, v in args.items()}
        shapes.update({k: np.block(grid).shape for k, grid in pieces.items()})
        seen.append((library.meta["entry"], sizes, shapes))
        return run(library, sizes, args, pieces)

    monkeypatch.setattr(dask_graph, "run_program", spy)
    value = computed(kernel.blocks(inputs, fuse=fuse).collection(inputs))
    return value, seen


def test_convolution_blocks_read_their_m_minus_1_halo(deconv, monkeypatch, in_pieces):
    loss, _ = deconv
    rng = np.random.default_rng(4)
    n, m = 1000, 9
    ins = deconv_inputs(n, m, rng)
    value, seen = recorded_reads(loss, {**ins, "x": da.from_array(ins["x"], chunks=100)}, monkeypatch)
    assert close(value, loss(**ins))
    conv = [(sizes, shapes) for _, sizes, shapes in seen if "x" in shapes]
    runs = sorted((sizes["blk_off"], sizes["blk_len"], shapes["x"][0]) for sizes, shapes in conv)
    # blocks cut where x is cut, [0, 100), ..., [900, 1000), each the runs [lo, lo + 100 - m + 1), which read
    # x's chunk [lo, lo + 100) itself, and [lo + 100 - m + 1, lo + 100), whose m - 1 halo crosses into the
    # next chunk (the last block's into x's last chunk, of 8)
    rims = [(lo + 100 - m + 1, m - 1, 2 * (m - 1)) for lo in range(0, 1000, 100)]
    interiors = [(lo, 100 - m + 1, 100) for lo in range(0, 1000, 100)]
    assert runs == sorted(rims + interiors)
    assert all(shapes["c"] == (m,) for _, shapes in conv)


def test_a_block_split_along_a_sum_reads_its_chunks_in_place(deconv, monkeypatch, in_pieces):
    """A block's interior run is given the chunk itself (no copy), and only its rim is joined."""
    from tensorlang.codegen import dask_graph

    loss, _ = deconv
    ins = deconv_inputs(400, 5, np.random.default_rng(14))
    x = da.from_array(ins["x"], chunks=((100, 100, 100, 104),))
    chunks = dask.compute(*x.to_delayed().ravel())
    given = []
    run = dask_graph.run_program

    def spy(library, sizes, args, pieces):
        given.extend(v for v in pieces.values() if not isinstance(v, list))
        return run(library, sizes, args, pieces)

    monkeypatch.setattr(dask_graph, "run_program", spy)
    value = loss(**{**ins, "x": x}).compute(scheduler="sync")
    assert close(float(value), loss(**ins))
    whole = [a for a in given if a.shape == (100,)]
    assert len(whole) == 3 and all(any(np.shares_memory(a, c) for c in chunks) for a in whole)


def test_fused_stencil_gradient_blocks_read_their_two_cell_halo(monkeypatch):
    """The stencil's gradient fused into one block program per row block: the block ``[lo, hi)`` of the
    adjoint reads the residual's rows ``[lo - 2, hi)`` clipped to ``[0, n)``, computed in the block from
    ``u``'s rows ``[lo - 2, hi + 2)`` (clipped): one task per block, nothing else."""
    energy = tl.parse(STENCIL)
    grad = tl.compile(tl.grad(energy, "u"))
    n = 40
    u = np.random.default_rng(5).standard_normal((n + 2, n + 2))
    value, seen = recorded_reads(grad, {"u": da.from_array(u, chunks=(9, n + 2))}, monkeypatch)
    assert close(value, grad(u=u))
    assert len(seen) == 5  # rows [0, 9), ..., [36, 42): u's chunks, as the residual's rows
    for _, sizes, shapes in seen:
        lo, hi = sizes["blk_off"], sizes["blk_off"] + sizes["blk_len"]
        assert list(shapes) == ["u"]
        assert shapes["u"] == (min(hi, n) + 2 - max(lo - 2, 0), n + 2)


def _slicing_tasks(value) -> list:
    return [k for k in dict(value.__dask_graph__()) if isinstance(k, tuple) and k[0].startswith("tl-part-")]


def test_a_block_cuts_the_parts_of_other_chunks_where_they_live_unless_all_share_one_memory(deconv, in_pieces):
    """Where chunks live apart (several workers; Dask's process pool here), only a part of another chunk
    than the one a block reads most of is a slicing task of its own (cut where that chunk lives, so only the
    part travels); the parts of the block's own chunk (the rim's tail, ``z``'s parts) are cut in the block's
    task: the convolution loss in 10 chunks has 9 slicing tasks, the heads of x's next chunks.  Where every
    chunk is in one memory (the threaded scheduler, a cluster of one worker), each block's task cuts all its
    parts: no slicing task, one level of the graph fewer.  Both graphs give the loss."""
    import dask

    loss, _ = deconv
    ins = deconv_inputs(1000, 9, np.random.default_rng(16))
    lazy = {**ins, "x": da.from_array(ins["x"], chunks=100), "z": da.from_array(ins["z"], chunks=100)}
    with dask.config.set(scheduler="processes"):
        apart = loss(**lazy)
    together = loss(**lazy)

    parts = _slicing_tasks(apart)
    assert len(parts) == 9 and all(k[0] == parts[0][0] for k in parts)   # all of x
    assert _slicing_tasks(together) == []
    for value in (apart, together):
        assert close(float(value.compute(scheduler="sync")), loss(**ins))


def test_row_blocks_write_their_pieces_into_their_slab(monkeypatch, in_pieces):
    """The fused stencil gradient's row blocks (split along a generator, no sum) run as an interior handed
    ``u``'s chunk itself and two-row rims, each writing its rows of the block's slab in place."""
    from tensorlang.codegen import dask_graph

    grad = tl.compile(tl.grad(tl.parse(STENCIL), "u"))
    n = 40
    u = np.random.default_rng(15).standard_normal((n + 2, n + 2))
    lazy = da.from_array(u, chunks=(12, n + 2))
    chunks = dask.compute(*lazy.to_delayed().ravel())
    written, given = [], []
    run = dask_graph.run_program

    def spy(library, sizes, args, pieces, into=None):
        written.append(into is not None)
        given.extend(v for v in pieces.values() if not isinstance(v, list))
        return run(library, sizes, args, pieces, into)

    monkeypatch.setattr(dask_graph, "run_program", spy)
    value = grad(u=lazy).compute(scheduler="sync")
    assert np.array_equal(value, grad(u=u))
    assert all(written) and len(written) > len(lazy.chunks[0])  # blocks in pieces, each piece in place
    assert sum(any(a is c or np.shares_memory(a, c) and a.shape == c.shape for c in chunks) for a in given) >= 2


def test_stencil_blocks_read_their_one_cell_border(monkeypatch):
    energy = tl.parse(STENCIL)
    grad = tl.compile(tl.grad(energy, "u"))
    n = 40
    u = np.random.default_rng(5).standard_normal((n + 2, n + 2))
    value, seen = recorded_reads(grad, {"u": da.from_array(u, chunks=(9, n + 2))}, monkeypatch, fuse=False)
    assert close(value, grad(u=u))
    first = [(s, sh) for _, s, sh in seen if "u" in sh]
    assert first
    for sizes, shapes in first:  # the residual's block of rows [lo, lo + B) reads u's rows [lo, lo + B + 2)
        assert shapes["u"] == (sizes["blk_len"] + 2, n + 2)
    last = [(s, sh) for _, s, sh in seen if any(k.startswith("dX") for k in sh)]
    assert last
    for sizes, shapes in last:  # the adjoint's block of rows [lo, hi) of u reads dX's rows [lo - 2, hi)
        lo, hi = sizes["blk_off"], sizes["blk_off"] + sizes["blk_len"]
        (name, shape), = ((k, v) for k, v in shapes.items() if k.startswith("dX"))
        assert shape == (min(hi, n) - max(lo - 2, 0), n)


def test_stencil_tiles_read_their_one_cell_border(monkeypatch, in_pieces):
    energy = tl.parse(STENCIL)
    value_k = tl.compile(energy)
    n = 40
    u = np.random.default_rng(6).standard_normal((n + 2, n + 2))
    value, seen = recorded_reads(value_k, {"u": da.from_array(u, chunks=(11, 16))}, monkeypatch)
    assert close(float(value), value_k(u=u))
    # u's 4 x 3 chunks cut the sum over i and j into tiles, each run as its interior and rims
    assert sum(sizes["blk_len"] * sizes["blk_len_1"] for _, sizes, _ in seen) == n * n
    for _, sizes, shapes in seen:  # the tile [i0, i0 + B0) x [j0, j0 + B1) reads u[i0 : i0 + B0 + 2, j0 : j0 + B1 + 2]
        assert shapes["u"] == (sizes["blk_len"] + 2, sizes["blk_len_1"] + 2)


def test_plan_prints_the_footprints(deconv):
    loss, _ = deconv
    x = da.from_array(np.zeros(103), chunks=((50, 53),))
    text = str(loss.blocks({"x": x, "c": np.zeros(4), "z": np.zeros(100)}))
    assert "i in [0, 50): x[0:53]  c[0:4]" in text
    assert "partial sums, added" in text


@pytest.mark.parametrize("wrt", ["x and c", "x"])
def test_a_block_task_allocates_its_footprint(deconv, wrt, blocks_run):
    """The footprint the plan gives each run of a block is what the run allocates: its windows (cut here
    afresh, as a task joins them), its result and its temporaries, traced while one run goes alone.  A
    block run in pieces holds the windows and workspace of its largest run and its result: the runs' sum
    and one run's partial result, or the slab its runs write their rows into."""
    import tracemalloc

    from tensorlang.codegen.build import load
    from tensorlang.codegen.runtime import Runner

    grad = deconv[1] if wrt == "x and c" else tl.compile(tl.grad(tl.parse(DECONV), "x"))
    n, m, size = 200_000, 16, 50_000
    rng = np.random.default_rng(5)
    values = deconv_inputs(n, m, rng)
    plan = grad.blocks({"x": da.from_array(values["x"], chunks=size), "c": values["c"],
                        "z": da.from_array(values["z"], chunks=size)})
    if wrt == "x and c" and blocks_run == "whole":  # the block of dX8 with X8 fused into it: x, z, c read
        assert plan.footprint().total == 3 * size * 8 + m * 8 + (m - 1) * 8
    elif blocks_run == "whole":  # the gradient's block with X8 and dX8 fused into it: dX8's window (a 15 halo)
        assert plan.footprint().temporaries >= (size + m - 1) * 8
    for sp in plan.statements:
        if sp.stmt.var is not None:  # an intermediate's values do not change what its readers allocate
            values[sp.stmt.var.name] = rng.standard_normal(sp.shape)
        library = sp.program.library
        loaded = load(library._materialise())
        for k, j in [(k, j) for k in (0, 1, len(sp.blocks) - 1) for j in range(len(sp.runs[k]))]:
            run = Runner(library.meta, loaded)  # a runner per run: no output or workspace pooled yet
            sizes = {s: v for s, v in sp.sizes[k][j].items() if s in library.meta["sizes"]}
            windows = {v: sp.runs[k][j][1].get(v) for v in sp.program.windows}
            tracemalloc.start()
            args = {}
            for v in sp.program.reads:  # what the task is given: not X8, computed in it
                if v in windows:
                    box = tuple(slice(a, b) for a, b in windows[v])
                    args[sp.program.windows[v][0].name] = np.array(values[v.name][box])
                else:
                    args[v.name] = np.array(values[v.name])
            out = run(**args, **sizes)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            fp = sp.run_footprints[k][j]
            assert sum(a.nbytes for a in args.values()) == fp.inputs
            assert np.asarray(out).nbytes == fp.outputs or (np.ndim(out) == 0 and fp.outputs == 8)
            assert fp.total <= peak <= fp.total + 64 * 1024, (sp.stmt.var, k, fp, peak)
            del out, args
        for prints, whole in zip(sp.run_footprints, sp.footprints):
            largest = max(prints, key=lambda f: f.inputs + f.temporaries)
            result = (2 * largest.outputs if any(s.kind == "sum" for s in sp.program.splits)
                      else sum(f.outputs for f in prints)) if len(prints) > 1 else largest.outputs
            assert whole.total == largest.inputs + largest.temporaries + result
    assert blocks_run == "whole" or any(len(runs) > 1 for sp in plan.statements for runs in sp.runs)


# -- a plan's graph is made once and named after each call's inputs ------------------------------------


def test_a_reused_graph_gives_what_a_fresh_one_does_for_new_values(deconv, monkeypatch):
    """The second call with inputs of the same chunks (an optimiser's loop) plans nothing and makes no
    task: it names the plan's tasks after its inputs; on new values it gives what a kernel compiled
    afresh gives, and two calls computed in one graph keep their own values."""
    from tensorlang.codegen import block_programs, dask_graph

    loss, grad = deconv
    rng = np.random.default_rng(12)
    chunks = ((40, 1, 59, 33),)
    first, second = deconv_inputs(130, 4, rng), deconv_inputs(130, 4, rng)
    lazy_first = {"x": da.from_array(first["x"], chunks=chunks), "c": first["c"], "z": first["z"]}
    lazy_second = {"x": da.from_array(second["x"], chunks=chunks), "c": second["c"], "z": second["z"]}
    value, g = loss(**lazy_first), grad(**lazy_first)
    made = []
    monkeypatch.setattr(block_programs, "footprint", lambda *a, **k: made.append("footprint"))
    monkeypatch.setattr(dask_graph.Graph, "__init__", lambda *a, **k: made.append("graph"))
    value2, g2 = loss(**lazy_second), grad(**lazy_second)
    assert not made
    assert loss.blocks(lazy_first).graph() is loss.blocks(lazy_second).graph()
    monkeypatch.undo()
    fresh_loss = tl.compile(tl.parse(DECONV))
    fresh = tl.compile(tl.grad(tl.parse(DECONV), ["x", "c"]))
    (v1, v2, f2), (g1, gg2, fg2) = dask.compute((value, value2, fresh_loss(**lazy_second)),
                                                (g, g2, fresh(**lazy_second)))
    assert close(float(v1), loss(**first)) and close(g1, grad(**first))
    assert close(float(v2), loss(**second)) and close(gg2, grad(**second))
    assert np.array_equal(v2, f2) and all(np.array_equal(a, b) for a, b in zip(gg2, fg2))
    assert g2[0].chunks == lazy_second["x"].chunks


def test_another_chunking_gets_its_own_graph(deconv):
    """Same sizes, other chunks (or an input in NumPy instead of Dask): another plan and graph, and the
    results follow the new chunks."""
    loss, grad = deconv
    rng = np.random.default_rng(13)
    ins = deconv_inputs(90, 5, rng)
    graphs = []
    for chunks in (((30, 30, 34),), ((10, 84),), ((94,),)):
        lz = {**ins, "x": da.from_array(ins["x"], chunks=chunks)}
        graphs.append(grad.blocks(lz).graph())
        gx, gc = dask.compute(*grad(**lz))
        assert close((gx, gc), grad(**ins))
        assert grad(**lz)[0].chunks == chunks  # the gradient in x is cut where x is
        assert close(float(loss(**lz).compute()), loss(**ins))
    lz = {**ins, "x": da.from_array(ins["x"], chunks=((10, 84),)), "z": da.from_array(ins["z"], chunks=30)}
    graphs.append(grad.blocks(lz).graph())  # z in Dask now
    assert close(dask.compute(*grad(**lz)), grad(**ins))
    assert len({id(g) for g in graphs}) == len(graphs)


# -- generated programs and their gradients, random chunkings -------------------------------------------


def test_relation_atoms_outside_their_extent_are_clipped_from_the_window():
    # E(n - i1 - 1, i1 - k0 + m - 1) reads columns below 0 and past m for some k0: such atoms hold nowhere,
    # so the block's window of E is clipped to E's extent (it was a negative window start)
    g = tl.parse("E : rel[n, m]\ny : [m]R\n"
                 "gen(k0:m + n - 1) sum(i1:n) [E(n - i1 - 1, i1 - k0 + m - 1)]"
                 " * (1 + [2*i1 + m <= 2*k0 + 1] * -y[2*i1 - 2*k0 + 2*m - 2])")
    k = tl.compile(g)
    rng = np.random.default_rng(3)
    ins = {"E": rng.random((4, 4)) < 0.6, "y": rng.standard_normal(4)}
    lz = {"E": ins["E"], "y": da.from_array(ins["y"], chunks=((1, 2, 1),))}
    plan = k.blocks(lz, chunks=2)
    assert "E[2:4, -" not in str(plan) and "E[2:3, 0:1]" in str(plan)
    assert close(computed(plan.collection(lz)), k(**ins))


def lazy_inputs(expr, ins, rng):
    out = {}
    for name, value in ins.items():
        t = expr.free_vars.get(name)
        if isinstance(value, np.ndarray) and value.ndim and t is not None and "rel" not in str(t):
            out[name] = lazy(value, rng)
        else:
            out[name] = value
    return out


def _check_blockwise(k, expr, ins, rng) -> tuple:
    """``k`` on lazy inputs with random chunks, blocks following them and blocks of 1 to 3 elements,
    against ``k`` on the whole arrays; returns how many statements the second plan split, and how many
    blocks of both plans run in pieces."""
    lz = lazy_inputs(expr, ins, rng)
    ref = k(**ins)
    assert close(computed(k(**lz)), ref), str(expr)
    plan = k.blocks(lz, chunks=int(rng.integers(1, 4)))
    assert close(computed(plan.collection(lz)), ref), f"{expr}\n{plan}"
    pieces = sum(len(runs) > 1 for p in (k.blocks(lz), plan) for sp in p.statements for runs in sp.runs)
    return sum(bool(sp.program.splits) for sp in plan.statements), pieces


def _with_loops(cases: list, count: int) -> list:
    """The first ``count`` cases whose program has a loop (the smallest draws are single accesses)."""
    return [(e, ins) for e, ins in cases if "sum(" in str(e) or "gen(" in str(e)][:count]


def test_generated_programs_on_random_chunkings(blocks_run):
    """At these sizes blocks run whole; with ``IN_PLACE`` at 1, a block split along a sum whose windows
    cross chunk edges runs in pieces."""
    cases = _with_loops(collect(program_and_inputs(max_size=7, allow_zero=False), 80), 24)
    rng = np.random.default_rng(6)
    split, pieces = zip(*(_check_blockwise(tl.compile(expr), expr, ins, rng) for expr, ins in cases))
    assert sum(s > 0 for s in split) >= len(cases) // 4, split  # the splitting is exercised
    assert sum(pieces) >= 4 if blocks_run == "in pieces" else sum(pieces) == 0, pieces


def generated_gradients(drawn: int, count: int):
    """``(gradient, its inputs)`` of the first ``count`` generated scalar programs with a loop (of ``drawn``
    drawn) that have an input other than a relation, in every such input."""
    cases = _with_loops(collect(program_and_inputs(allow_pairs=False, scalar_output=True, max_size=7,
                                                   allow_zero=False), drawn), count)
    for expr, ins in cases:
        wrt = [n for n, t in expr.free_vars.items() if "rel" not in str(t)]
        if wrt:
            g = tl.grad(expr, wrt)
            yield g, {name: v for name, v in ins.items() if name in g.free_vars or name in g.sizes}


def test_gradients_of_generated_programs_on_random_chunkings(in_pieces):
    rng = np.random.default_rng(7)
    split = 0  # gradients with a split statement
    pieces = 0  # blocks run in pieces
    for g, ins in generated_gradients(60, 12):
        s, p = _check_blockwise(tl.compile(g), g, ins, rng)
        split, pieces = split + (s > 0), pieces + p
    assert split >= 12 // 2 and pieces >= 4, (split, pieces)


# -- a LocalCluster of two worker processes ------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as c, distributed.Client(c) as client:
        yield client


def _deconvolution_on_cluster(client, deconv, n, chunk, m=16):
    loss, grad = deconv
    state = da.random.RandomState(8)
    x = state.standard_normal(n + m - 1, chunks=chunk)
    z = state.standard_normal(n, chunks=chunk)
    c = np.random.default_rng(8).standard_normal(m)
    value, (gx, gc) = dask.compute(loss(x=x, c=c, z=z), grad(x=x, c=c, z=z))  # one graph
    assert len(client.scheduler_info()["workers"]) == 2
    xs, zs = dask.compute(x, z)
    assert close(float(value), loss(x=xs, c=c, z=zs))
    assert close((gx, gc), grad(x=xs, c=c, z=zs))


def test_deconvolution_on_two_worker_processes(cluster, deconv):
    _deconvolution_on_cluster(cluster, deconv, 200_000, 20_000)


def test_deconvolution_at_ten_million_on_two_worker_processes(cluster, deconv):
    _deconvolution_on_cluster(cluster, deconv, 10_000_000, 1_000_000)


def test_stencil_energy_gradient_on_two_worker_processes(cluster):
    energy = tl.parse(STENCIL)
    value_k, grad_k = tl.compile(energy), tl.compile(tl.grad(energy, "u"))
    n = 300
    u = da.random.RandomState(9).standard_normal((n + 2, n + 2), chunks=(64, 128))  # tiles
    value, g = dask.compute(value_k(u=u), grad_k(u=u))
    assert _slicing_tasks(grad_k(u=u))   # chunks live apart: halos cut where their chunks are
    us = u.compute()
    assert close(float(value), value_k(u=us))
    assert close(g, grad_k(u=us))


def test_block_runners_keep_idle_outputs_within_their_worker_memory_limit():
    """The block programs of a process keep idle output buffers (``runtime.Arguments.output``) in one pool,
    of at most ``POOL_SHARE``-th of their worker's memory limit: Dask's memory manager counts them."""
    import distributed
    from tensorlang.codegen.runtime import PHYSICAL_MEMORY

    grad_k = tl.compile(tl.grad(tl.parse(STENCIL), "u"))
    u = da.random.RandomState(12).standard_normal((402, 402), chunks=(100, 402))
    assert close(grad_k(u=u).compute(scheduler="sync"), grad_k(u=u.compute()))   # in this process: no limit
    assert grad_k._runner.pool_budget == 0   # the kernel's own runner: two per size
    unlimited = min(PHYSICAL_MEMORY // 32, 1 << 30)
    assert {r.pool_budget for r in dask_graph._RUNNERS.values()} == {unlimited}
    assert {id(r.out_pool) for r in dask_graph._RUNNERS.values()} == {id(dask_graph._SLABS)}   # one budget
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None, memory_limit="1GiB") as c, distributed.Client(c) as client:
        assert close(grad_k(u=u).compute(), grad_k(u=u.compute()))
        assert not _slicing_tasks(grad_k(u=u))   # one worker: every chunk in one memory
        ((limit, budgets),) = client.run(lambda dask_worker: (
            dask_worker.memory_manager.memory_limit,
            [r.pool_budget for r in __import__("tensorlang.codegen.dask_graph", fromlist=["_"])._RUNNERS.values()])
        ).values()
    assert limit == 1 << 30 and budgets
    assert budgets == [min(unlimited, limit // dask_graph.POOL_SHARE)] * len(budgets)
    if unlimited > limit // dask_graph.POOL_SHARE:   # (a machine of more than 4 GiB)
        assert budgets[0] < unlimited


def test_sparse_least_squares_gradient_with_a_scipy_sparse_relation():
    import scipy.sparse as sparse

    src = ("E : rel[n, m]\ny : [m]R\nz : [n]R\n"
           "sum(i:n) (sum(j:m) [E(i, j)] * y[j] - z[i]) * (sum(j:m) [E(i, j)] * y[j] - z[i])")
    loss = tl.parse(src)
    value_k, grad_k = tl.compile(loss), tl.compile(tl.grad(loss, ["y", "z"]))
    rng = np.random.default_rng(10)
    n, m = 400, 300
    E = sparse.random(n, m, density=0.02, format="csr", random_state=10)
    y, z = rng.standard_normal(m), rng.standard_normal(n)
    lz = {"E": E, "y": y, "z": da.from_array(z, chunks=((1, 150, 249),))}
    assert "E[0:1, 0:300]" in str(value_k.blocks(lz))  # the block's rows of the relation, all its columns
    value, g = dask.compute(value_k(**lz), grad_k(**lz))
    assert close(float(value), value_k(E=E, y=y, z=z))
    assert close(g, grad_k(E=E, y=y, z=z))


def test_a_block_program_runs_where_nothing_can_be_built(deconv, tmp_path):
    """What a worker gets: a pickled block library, run in a fresh process whose C compiler fails and
    whose build cache is empty; it loads the shipped bytes and builds nothing."""
    import pickle

    loss, _ = deconv
    rng = np.random.default_rng(11)
    ins = deconv_inputs(50, 4, rng)
    plan = loss.blocks({**ins, "x": da.from_array(ins["x"], chunks=20)}, fuse=False)  # f by blocks of its own
    sp = plan.statements[0]
    sizes = {**plan.sizes, "blk_off": 0, "blk_len": 20, "lo_x_0": 0, "len_x_0": 23, "lo_c_0": 0, "len_c_0": 4}
    payload = tmp_path / "task.pkl"
    payload.write_bytes(pickle.dumps((sp.program.library, sizes, {"x": ins["x"][:23], "c": ins["c"]})))
    code = ("import pickle, sys, numpy as np; lib, sizes, args = pickle.load(open(sys.argv[1], 'rb')); "
            "wanted = set(lib.meta['sizes']); "
            "print(float(np.sum(lib.runner()(**args, **{k: v for k, v in sizes.items() if k in wanted}))))")
    env = {**os.environ, "CC": "false", "TENSORLANG_CACHE": str(tmp_path / "empty-cache"),
           "TMPDIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code, str(payload)], capture_output=True, text=True,
                         timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    f = np.array([ins["x"][i:i + 4] @ ins["c"] for i in range(20)])
    assert np.isclose(float(out.stdout), f.sum(), rtol=1e-12)
    assert not (tmp_path / "empty-cache").exists() or not any((tmp_path / "empty-cache").iterdir())
    assert list(tmp_path.glob("tensorlang-dask-*/*.so"))  # the shipped bytes, written to the local cache
