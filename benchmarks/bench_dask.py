"""Kernels on Dask against the single-machine kernel: the deconvolution loss and its gradient in ``c``
(``examples/kernel_fit.tl``), computed together in one graph, on Dask's threaded scheduler and on a
``LocalCluster`` of 1 and 2 worker processes (one thread each) in 1 to 32 chunks, against the compiled
kernels called on the whole NumPy arrays in this process.  Per row: the time to build the graph of one
call (both kernels), its number of tasks, the time to compute it, and the overhead per task (a program
of almost no work, ``sum(i:n) x[i]``, in as many chunks of 1,000 elements: its time over its tasks);
then the same graph with every statement as blocks of its own (``kernel.blocks(inputs, fuse=False)``):
its tasks, its time (its runs alternating with the fused graph's), and the fused graph's speed-up over
it.  In one chunk no statement is split, so nothing is fused and the two graphs are the same: their
ratio shows the noise of the measurement.
Standalone: ``python benchmarks/bench_dask.py [n]``; writes ``docs/dask_bench.md``, keeping the part of
it from ``## Before`` on (figures measured on earlier versions).

The inputs are persisted before timing, so a timed graph moves windows and results, not the signal
from the client.  Times are the best of a few runs; the machine is shared, so read the ratios (measured
in one run) rather than the absolute figures, and the load average printed beside each row.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

import tensorlang as tl  # noqa: E402
from harness import best as best_of, options  # noqa: E402

REPEATS = 5
HISTORY = "## Before"


def best(fn) -> float:
    """The best of ``REPEATS`` runs after a warming one (the first run puts the libraries on the workers)."""
    return best_of(fn, REPEATS, budget=float("inf"))


def best_alternating(*fns) -> list[float]:
    """The best of ``REPEATS`` runs of each of ``fns``, run in turn (so a change of the machine's load
    falls on all of them alike), after a warming run of each."""
    times: list = [[] for _ in fns]
    for fn in fns:
        fn()
    for _ in range(REPEATS):
        for fn, ts in zip(fns, times):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
    return [min(ts) for ts in times]


def tasks(*collections) -> int:
    """The number of tasks in the graph of ``collections`` (persisted inputs count as one each)."""
    graph: dict = {}
    for c in collections:
        graph.update(dict(c.__dask_graph__()))
    return len(graph)


def rows(label: str, chunkings, n: int, m: int, x, z, c, kernels, t_local: float, scheduler=None):
    """One table row per number of chunks, on ``scheduler`` (None: the current client)."""
    import dask
    import dask.array as da

    loss_k, grad_k, tiny = kernels
    kw = {} if scheduler is None else {"scheduler": scheduler}
    for chunks in chunkings:
        size = -(-n // chunks)
        xd = da.from_array(x, chunks=size).persist(**kw)
        zd = da.from_array(z, chunks=size).persist(**kw)
        ins = {"x": xd, "z": zd, "c": c}
        build = lambda: (loss_k(**ins), grad_k(**ins))  # noqa: E731
        unfused = lambda: tuple(k.blocks(ins, fuse=False).collection(ins) for k in (loss_k, grad_k))  # noqa: E731
        t_build = best(build)
        t, t_unfused = best_alternating(lambda: dask.compute(*build(), **kw), lambda: dask.compute(*unfused(), **kw))
        xt = da.from_array(np.ones(chunks * 1000), chunks=1000).persist(**kw)
        t_tiny = best(lambda: tiny(x=xt).compute(**kw))
        yield (f"| {label} | {chunks} | {t_build * 1e3:.1f} | {tasks(*build())} | {t * 1e3:.0f} | "
               f"{n / t / 1e6:.0f} | {t_local / t:.2f}x | {t_tiny / tasks(tiny(x=xt)) * 1e3:.2f} | "
               f"{tasks(*unfused())} | {t_unfused * 1e3:.0f} | {t_unfused / t:.2f}x | {os.getloadavg()[0]:.1f} |")


def main(n: int = 4_000_000, m: int = 16) -> str:
    from dask.distributed import Client, LocalCluster

    loss = tl.parse((ROOT / "examples" / "kernel_fit.tl").read_text())
    loss_k, grad_k = tl.compile(loss), tl.compile(tl.grad(loss, "c"))
    rng = np.random.default_rng(0)
    x, z, c = rng.standard_normal(n + m - 1), rng.standard_normal(n), rng.standard_normal(m)
    t_local = best(lambda: (loss_k(x=x, z=z, c=c), grad_k(x=x, z=z, c=c)))
    kernels = (loss_k, grad_k, tl.compile(tl.parse("x : [n]R\nsum(i:n) x[i]")))
    lines = [f"# Kernels on Dask: deconvolution loss + gradient, n = {n:,}, m = {m}", "",
             f"Single-machine kernels (loss and gradient, NumPy inputs, this process): {t_local * 1e3:.0f} ms "
             f"({n / t_local / 1e6:.0f} M elements/s); load average {os.getloadavg()[0]:.1f} on "
             f"{os.cpu_count()} cores.", "",
             "| scheduler | chunks | graph (ms/call) | tasks | time (ms) | M elements/s | vs single machine | "
             "overhead/task (ms) | unfused tasks | unfused time (ms) | fused vs unfused | load |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    common = (n, m, x, z, c, kernels, t_local)
    for line in rows("threads", (1, 2, 4, 8, 32), *common, scheduler="threads"):
        lines.append(line)
        print(line, flush=True)
    for workers in (1, 2):
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                          dashboard_address=None) as cluster, Client(cluster):
            for line in rows(f"{workers} worker{'s' * (workers > 1)}", (1, 2, 4, 8, 32), *common):
                lines.append(line)
                print(line, flush=True)
    lines += ["", "`graph`: building the lazy collections of one call of both kernels (the plan is cached). "
              "`vs single machine`: the single-machine time over the Dask time (above 1: Dask is faster). "
              "`overhead/task`: a graph of `sum(i:n) x[i]` over as many chunks of 1,000 elements, its time "
              "divided by its number of tasks. `unfused`: the same graph with every statement as blocks of its "
              "own (`kernel.blocks(inputs, fuse=False)`), its runs alternating with the fused graph's; `fused vs "
              "unfused`: its time over the fused graph's (above 1: fusing is faster; in 1 chunk nothing is split "
              "nor fused, the graphs are the same and the ratio is the noise). `load`: the load average "
              "(1 minute) after the row."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    ap = options(__doc__)
    ap.add_argument("n", type=int, nargs="?", default=4_000_000, help="the signal's length (4,000,000)")
    text = main(ap.parse_args().n)
    print(text)
    out = ROOT / "docs" / "dask_bench.md"
    old = out.read_text() if out.exists() else ""
    out.write_text(text + ("\n" + old[old.index(HISTORY):] if HISTORY in old else ""))
