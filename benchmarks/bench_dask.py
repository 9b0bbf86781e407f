"""Kernels on Dask against the single-machine kernel: the deconvolution loss and its gradient in ``c``
(``examples/kernel_fit.tl``), computed together in one graph, on a ``LocalCluster`` of 1 and 2 worker
processes (one thread each) in 2, 8 and 32 chunks, against the compiled kernels called on the whole
NumPy arrays in this process; and the overhead per task (a program of almost no work in many blocks).
Standalone: ``python benchmarks/bench_dask.py [n]``; writes ``docs/dask_bench.md``.

The inputs are persisted on the workers before timing, so a timed graph moves windows and results, not
the signal from the client.  Times are the best of a few runs; the machine is shared, so read the
ratios (measured in one run) rather than the absolute figures.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

import tensorlang as tl  # noqa: E402
from harness import best as best_of, options  # noqa: E402

REPEATS = 3


def best(fn) -> float:
    """The best of ``REPEATS`` runs after a warming one (the first run puts the libraries on the workers)."""
    return best_of(fn, REPEATS, budget=float("inf"))


def tasks(*collections) -> int:
    """The number of tasks in the graph of ``collections`` (persisted inputs count as one each)."""
    graph: dict = {}
    for c in collections:
        graph.update(dict(c.__dask_graph__()))
    return len(graph)


def main(n: int = 4_000_000, m: int = 16) -> str:
    import dask
    import dask.array as da
    from dask.distributed import Client, LocalCluster

    loss = tl.parse((ROOT / "examples" / "kernel_fit.tl").read_text())
    loss_k, grad_k = tl.compile(loss), tl.compile(tl.grad(loss, "c"))
    rng = np.random.default_rng(0)
    x, z, c = rng.standard_normal(n + m - 1), rng.standard_normal(n), rng.standard_normal(m)
    t_local = best(lambda: (loss_k(x=x, z=z, c=c), grad_k(x=x, z=z, c=c)))
    tiny = tl.compile(tl.parse("x : [n]R\nsum(i:n) x[i]"))
    lines = [f"# Kernels on Dask: deconvolution loss + gradient, n = {n:,}, m = {m}", "",
             f"Single-machine kernels (loss and gradient, NumPy inputs, this process): {t_local * 1e3:.0f} ms "
             f"({n / t_local / 1e6:.0f} M elements/s).", "",
             "| workers | chunks | time (ms) | M elements/s | vs single machine | tasks | overhead/task (ms) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for workers in (1, 2):
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                          dashboard_address=None) as cluster, Client(cluster):
            for chunks in (2, 8, 32):
                size = -(-n // chunks)
                xd = da.from_array(x, chunks=size).persist()
                zd = da.from_array(z, chunks=size).persist()
                graph = lambda: dask.compute(loss_k(x=xd, z=zd, c=c), grad_k(x=xd, z=zd, c=c))  # noqa: E731
                t = best(graph)
                ntasks = tasks(loss_k(x=xd, z=zd, c=c), grad_k(x=xd, z=zd, c=c))
                xt = da.from_array(np.ones(chunks * 1000), chunks=1000).persist()
                tiny_graph = lambda: tiny(x=xt).compute()  # noqa: E731
                t_tiny = best(tiny_graph)
                tiny_tasks = tasks(tiny(x=xt))
                lines.append(f"| {workers} | {chunks} | {t * 1e3:.0f} | {n / t / 1e6:.0f} | "
                             f"{t_local / t:.2f}x | {ntasks} | {t_tiny / tiny_tasks * 1e3:.2f} |")
                print(lines[-1], flush=True)
    lines += ["", f"Load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores.",
              "", "`vs single machine`: the single-machine time over the Dask time (above 1: Dask is faster). "
              "`overhead/task`: a graph of `sum(i:n) x[i]` over as many chunks of 1,000 elements, its time "
              "divided by its number of tasks. Both include building the graph on the client (the plan "
              "and its footprints are cached; the tasks are made anew at each call)."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    ap = options(__doc__)
    ap.add_argument("n", type=int, nargs="?", default=4_000_000, help="the signal's length (4,000,000)")
    text = main(ap.parse_args().n)
    print(text)
    (ROOT / "docs" / "dask_bench.md").write_text(text)
