"""Kernels on Dask beyond one worker and beyond a worker's memory: strong scaling, weak scaling, and a signal
ten times a worker's memory limit.

Strong scaling: the deconvolution loss and its gradient in ``c`` at n = 4 * 10^6 and 4 * 10^7, and the
gradient of the 2-D stencil energy on grids of as many cells, in 1, 2, 4 and 8 chunks (row blocks), on a
``LocalCluster`` of 1 and of 2 worker processes of one thread each, inputs made on the workers and persisted.
Against the same kernels on the whole NumPy arrays in this process, on one thread (the worker's: Dask's
workers run with ``OMP_NUM_THREADS=1``) and on every core (OpenMP): throughput over theirs, and two workers'
over one worker's.

Weak scaling: the work per worker fixed, on a ``LocalCluster`` of 1 and then 2 worker processes (one thread
each): the deconvolution loss and its gradient in ``c`` (``examples/kernel_fit.tl``) on 4 * 10^6 elements
per worker in two chunks each, and the gradient of the 2-D stencil energy of ``tests/test_dask.py`` on
about 4 * 10^6 cells per worker in row blocks of about 10^6 cells.  The inputs are made on the workers
(``da.random``) and persisted before timing; a row's time is the best of a few computations of the
outputs on the workers, of an array output one entry per block gathered (the 2-D gradient is as large as
the grid: gathering it to the client would time its transfer).  Beside it, the same kernels on the whole
NumPy arrays in this process.  Efficiency: the throughput per worker over one worker's (1.0: perfect
weak scaling).

Beyond memory: one worker with a memory limit of 512 MiB and a signal of 3.2 * 10^8 elements (``x`` and
``z``, 2.4 GiB each: ten times the limit), made chunk by chunk inside the graph (nothing persisted), in
chunks of 4 * 10^6, the loss and the gradient in ``c`` computed together.  The worker must not be killed
(Dask's memory manager may pause it, and move results to disk: ``stored`` counts those too); its peak
resident memory is reported, and the loss is checked against Dask's own
``map_overlap`` with ``np.convolve`` computed on the threaded scheduler in this process (code that shares
nothing with tensorlang's).

Standalone: ``python benchmarks/bench_dask_scaling.py [--quick]``; writes ``docs/dask_scaling.md`` with the
load average beside each row.  Take it when the machine is quiet: on two cores, a second worker competes
with the client, the scheduler and the first worker for the same two cores.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks"), str(ROOT / "tests")]

import tensorlang as tl  # noqa: E402
from harness import best, options  # noqa: E402
from bench_dask_memory import M, MB, start_sampler, stop_sampler  # noqa: E402
from test_dask import STENCIL  # noqa: E402

PER_WORKER = 4_000_000   # elements (cells) of work per worker
LIMIT = 512 * MB


def deconvolution(rng_seed: int, n: int, chunks: int):
    """``x`` (n + m - 1), ``z`` (n) in ``chunks`` aligned chunks made on the workers, and ``c``."""
    import dask.array as da

    size = -(-n // chunks)
    zc = tuple(min(size, n - k) for k in range(0, n, size))
    xc = zc[:-1] + (zc[-1] + M - 1,)
    rs = da.random.RandomState(rng_seed)
    return {"x": rs.standard_normal(n + M - 1, chunks=(xc,)), "z": rs.standard_normal(n, chunks=(zc,)),
            "c": np.random.default_rng(rng_seed).standard_normal(M)}


def stencil_grid(rng_seed: int, n: int, blocks: int):
    """``u``, an (n + 2) x (n + 2) grid made on the workers in ``blocks`` row blocks."""
    import dask.array as da

    rows = -(-(n + 2) // blocks)
    return {"u": da.random.RandomState(rng_seed).standard_normal((n + 2, n + 2), chunks=(rows, n + 2))}


def omp_threads(count: int) -> None:
    """The number of OpenMP threads of the kernels' parallel loops started from this thread."""
    import ctypes

    ctypes.CDLL("libgomp.so.1").omp_set_num_threads(count)


def on_workers(kernels, ins) -> None:
    """The kernels' results on ``ins`` computed on the workers, of an array result only its first entry of
    each block sent to the client: nothing large moves, and nothing is done to the results that this
    process's kernels do not do."""
    import dask

    results = [k(**ins) for k in kernels]
    dask.compute(*[r.map_blocks(_first, chunks=tuple((1,) * len(c) for c in r.chunks), dtype=r.dtype)
                   if r.ndim else r for r in results])


def _first(block):
    return block[(slice(0, 1),) * block.ndim]


def strong_rows(kernels, make, label, sizes, chunkings):
    """Rows of ``label``'s kernels at each size of ``sizes`` in each of ``chunkings`` on 1 and 2 workers:
    ``make(n, chunks)`` gives the inputs (Dask) and the work in elements."""
    from dask.distributed import Client, LocalCluster, wait

    local_times = {}
    for n in sizes:
        ins, work = make(n, 1)
        local = {k: (v.compute() if hasattr(v, "compute") else v) for k, v in ins.items()}
        omp_threads(1)
        one = best(lambda: [k(**local) for k in kernels], repeat=5)
        omp_threads(os.cpu_count())
        every = best(lambda: [k(**local) for k in kernels], repeat=5)
        local_times[n] = (one, every, work)
    out, by_one = [], {}
    for workers in (1, 2):
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                          dashboard_address=None) as cluster, Client(cluster) as client:
            for n in sizes:
                one, every, work = local_times[n]
                for chunks in chunkings:
                    ins, _ = make(n, chunks)
                    ins = {k: (client.persist(v) if hasattr(v, "compute") else v) for k, v in ins.items()}
                    wait([v for v in ins.values() if hasattr(v, "compute")])
                    t = best(lambda: on_workers(kernels, ins), repeat=5)
                    by_one.setdefault((n, chunks), t)
                    tasks = sum(len(dict(k(**ins).__dask_graph__())) for k in kernels)
                    out.append(f"| {label} | {n:,} | {chunks} | {workers} | {tasks} | {t * 1e3:.0f} | "
                               f"{work / t / 1e6:.0f} | {one / t:.2f}x | {every / t:.2f}x | "
                               f"{by_one[(n, chunks)] / t:.2f}x | {os.getloadavg()[0]:.1f} |")
                    print(out[-1], flush=True)
    return out, local_times


def weak_rows(kernels, make, sizes, label):
    """One row per number of workers: ``make(workers)`` gives the inputs (Dask) and the work in elements."""
    from dask.distributed import Client, LocalCluster, wait

    out, first = [], None
    for workers in (1, 2):
        ins, work = make(workers)
        local = {k: (v.compute() if hasattr(v, "compute") else v) for k, v in ins.items()}
        t_local = best(lambda: [k(**local) for k in kernels], repeat=5)
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                          dashboard_address=None) as cluster, Client(cluster) as client:
            ins = {k: (client.persist(v) if hasattr(v, "compute") else v) for k, v in ins.items()}
            wait(list(ins.values()))
            t = best(lambda: on_workers(kernels, ins), repeat=5)
        per_worker = work / t / workers
        first = first or per_worker
        out.append(f"| {label} | {workers} | {sizes(workers)} | {work / 1e6:.1f} | {t * 1e3:.0f} | "
                   f"{work / t / 1e6:.0f} | {per_worker / first:.2f} | {t_local * 1e3:.0f} | {t_local / t:.2f}x | "
                   f"{os.getloadavg()[0]:.1f} |")
        print(out[-1], flush=True)
    return out


def beyond_memory(kernels, n: int, chunk: int):
    """The loss and gradient on a signal of ``n`` elements on one worker limited to ``LIMIT``: a row."""
    import dask
    import dask.array as da
    from dask.distributed import Client, LocalCluster

    ins = deconvolution(1, n, -(-n // chunk))
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None, memory_limit=LIMIT) as cluster, Client(cluster) as client:
        warm = deconvolution(2, 20_000, 4)
        dask.compute(*[k(**warm) for k in kernels])
        client.run(start_sampler)
        t = time.perf_counter()
        loss, grad = dask.compute(*[k(**ins) for k in kernels])
        t = time.perf_counter() - t
        (mem,) = client.run(stop_sampler).values()
        alive = len(client.scheduler_info()["workers"])
    c = ins["c"]
    conv = da.map_overlap(lambda b: np.convolve(b, c[::-1], mode="valid"), ins["x"], depth={0: (0, M - 1)},
                          boundary="none", trim=False, chunks=ins["z"].chunks, dtype=np.float64)
    reference = float((((conv - ins["z"]) ** 2).sum()).compute(scheduler="threads"))
    assert np.isclose(float(loss), reference, rtol=1e-9), (loss, reference)
    assert np.all(np.isfinite(grad)) and alive == 1
    signal = 2 * n * 8
    return (f"| {n:.1e} | {signal / 2 ** 30:.1f} GiB | {LIMIT / MB:.0f} MiB | {signal / LIMIT:.0f}x | "
            f"{-(-n // chunk)} | {t:.1f} s | {n / t / 1e6:.0f} | {mem['base'] / MB:.0f} | {mem['peak'] / MB:.0f} | "
            f"{mem['stored'] / MB:.0f} | {float(loss) / reference:.12f} | {os.getloadavg()[0]:.1f} |")


def main(quick: bool = False) -> str:
    loss = tl.parse((ROOT / "examples" / "kernel_fit.tl").read_text())
    deconv = tl.compile(loss), tl.compile(tl.grad(loss, "c"))
    stencil = (tl.compile(tl.grad(tl.parse(STENCIL), "u")),)
    side = {w: int(round((PER_WORKER * w) ** 0.5)) for w in (1, 2)}
    lines = [f"Load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores at the start; one thread per "
             "worker.", "", "## Strong scaling", "",
             "| program | size | chunks | workers | tasks | time (ms) | M elements/s | vs the kernel on 1 thread | "
             "vs the kernel on every core | over 1 worker | load |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    sizes = (4_000_000,) if quick else (4_000_000, 40_000_000)
    kernels_at = []
    for kernels, make, label in (
            (deconv, lambda n, k: (deconvolution(0, n, k), n), "deconvolution loss + gradient"),
            (stencil, lambda n, k: (stencil_grid(0, int(round(n ** 0.5)), k), int(round(n ** 0.5)) ** 2),
             "2-D stencil gradient")):
        rows, local = strong_rows(kernels, make, label, sizes, (1, 2, 4, 8))
        lines += rows
        kernels_at += [f"{label} at {n:,}: {one * 1e3:.0f} ms on 1 thread, {every * 1e3:.0f} ms on every core"
                       for n, (one, every, _) in local.items()]
    lines += ["", "The kernels on the whole NumPy arrays in this process: " + "; ".join(kernels_at) + ". `size`: "
              "the signal's length, or the grid's cells (a square grid, in row blocks). `over 1 worker`: one "
              "worker's time over this row's.", "", "## Weak scaling", "",
             "| program | workers | size | M elements | time (ms) | M elements/s | per worker, over one worker's | "
             "this process, NumPy inputs (ms) | vs this process | load |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    lines += weak_rows(deconv, lambda w: (deconvolution(0, PER_WORKER * w, 2 * w), PER_WORKER * w),
                       lambda w: f"n = {PER_WORKER * w:,}, {2 * w} chunks", "deconvolution loss + gradient")
    lines += weak_rows(stencil, lambda w: (stencil_grid(0, side[w], 4 * w), side[w] ** 2),
                       lambda w: f"{side[w]} x {side[w]}, {4 * w} row blocks", "2-D stencil gradient")
    lines += ["", "## A signal ten times a worker's memory", "",
              "| n | x and z | worker's limit | signal / limit | chunks | time | M elements/s | base (MiB) | "
              "peak (MiB) | stored (MiB) | loss / map_overlap's | load |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    lines.append(beyond_memory(deconv, 32_000_000 if quick else 320_000_000, 4_000_000))
    print(lines[-1], flush=True)
    lines += ["", "`base`: the worker's resident memory after a warm-up; `peak`: its high-water resident memory; "
              "`stored`: the most bytes of task results it held at once, in memory or moved to disk by Dask's "
              "memory manager (sampled every 2 ms)."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    args = options(__doc__, quick="a signal of 3.2 * 10^7 elements only (not beyond the memory limit)").parse_args()
    try:
        import dask.distributed  # noqa: F401
    except ImportError:
        print("skipped: Dask and distributed are not installed (pip install tensorlang[dask])")
    else:
        text = main(args.quick)
        print(text)
        if not args.quick:
            (ROOT / "docs" / "dask_scaling.md").write_text(
                "# Kernels on Dask: strong and weak scaling, and a signal beyond a worker's memory "
                "(generated by benchmarks/bench_dask_scaling.py)\n\n" + text)
