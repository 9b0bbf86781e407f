"""Peak memory of Dask workers running kernels blockwise, against the plan's block footprint.

The deconvolution loss and its gradient in ``c`` (``examples/kernel_fit.tl``), computed together in one
graph on a ``LocalCluster`` of 1 and 2 worker processes of one thread each (one task in flight per
worker), at n = 4 * 10^6 and 4 * 10^7 in 2, 8 and 32 chunks.  The signal and the observation are made
on the workers, chunk by chunk (``da.random``), inside the timed graph: nothing is persisted, so a
worker holds only what the graph still needs.  For contrast, Dask's own ``map_overlap`` computing the
same loss (a chunk of ``x`` with its ``m - 1`` halo, ``np.convolve``, the squared residual summed),
beside the tensorlang loss alone.

Each run gets a fresh ``LocalCluster`` with no memory limit (nothing spilled),
warmed by the same graph on a small signal (the libraries loaded).  Per worker: ``base``, its resident
memory after the warm-up (the process, Python, NumPy, Dask, the block libraries); ``peak``, its
high-water resident memory (``VmHWM``) after the run; ``stored``, the most bytes of task results
it held at once (``WorkerState.nbytes``, sampled every 2 ms); and the plan's block footprint (the
largest over the tasks of both kernels, ``plan.footprint()``) times the worker's threads.  The worker
with the highest peak is shown.

Standalone: ``python benchmarks/bench_dask_memory.py [--quick]`` prints a Markdown table with the load
average beside each row.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

import tensorlang as tl  # noqa: E402
from harness import options  # noqa: E402

M = 16
MB = 2 ** 20


def _rss() -> int:
    """This process's resident memory now, in bytes."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def start_sampler(dask_worker) -> None:
    """On a worker: note its resident memory now and sample the bytes it stores until stopped."""
    import gc
    import threading
    import time

    gc.collect()
    state = {"base": _rss(), "stored": 0, "stop": False}

    def sample():
        while not state["stop"]:
            state["stored"] = max(state["stored"], dask_worker.state.nbytes)
            time.sleep(0.002)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    dask_worker._tl_memory = (state, thread)


def stop_sampler(dask_worker) -> dict:
    """On a worker: its baseline, high-water resident memory and most bytes stored, in bytes."""
    state, thread = dask_worker._tl_memory
    state["stop"] = True
    thread.join()
    return {"base": state["base"], "stored": state["stored"], "peak": _high_water()}


def _high_water() -> int:
    """This process's high-water resident memory, in bytes: ``VmHWM``, that of its own address space.
    (``ru_maxrss`` is not: a worker started by fork and exec reports its parent's resident memory at the
    fork when that was higher, and a benchmark's client holding large arrays made every peak its own.)"""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def inputs(n: int, chunks: int, seed: int = 0):
    """``x`` (n + m - 1) and ``z`` (n) made chunk by chunk on the workers, in ``chunks`` aligned chunks
    (``x``'s last one ``m - 1`` longer), and ``c``."""
    import dask.array as da

    size = -(-n // chunks)
    zc = tuple(min(size, n - k) for k in range(0, n, size))
    xc = zc[:-1] + (zc[-1] + M - 1,)
    rs = da.random.RandomState(seed)
    return rs.standard_normal(n + M - 1, chunks=(xc,)), rs.standard_normal(n, chunks=(zc,)), \
        np.random.default_rng(seed).standard_normal(M)


def tensorlang_graph(kernels, n: int, chunks: int):
    """``kernels`` (the loss, or the loss and the gradient in ``c``) on fresh inputs, and the largest
    block footprint of their plans."""
    x, z, c = inputs(n, chunks)
    ins = {"x": x, "z": z, "c": c}
    return tuple(k(**ins) for k in kernels), max(k.blocks(ins).footprint().total for k in kernels)


def map_overlap_graph(n: int, chunks: int):
    """The loss with Dask's ``map_overlap``: each chunk of ``x`` with the ``m - 1`` elements after it (no
    footprint: the row shows the tensorlang loss's)."""
    import dask.array as da

    x, z, c = inputs(n, chunks)
    conv = da.map_overlap(lambda b: np.convolve(b, c[::-1], mode="valid"), x, depth={0: (0, M - 1)},
                          boundary="none", trim=False, chunks=z.chunks, dtype=np.float64)
    return (((conv - z) ** 2).sum(),), None


def measure(workers: int, graph, warm) -> dict:
    """The memory of the worker with the highest peak while ``graph`` is computed, after ``warm``, on a
    fresh cluster of ``workers`` processes."""
    import dask
    from dask.distributed import Client, LocalCluster

    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None, memory_limit=0) as cluster, Client(cluster) as client:
        dask.compute(*warm)
        client.run(start_sampler)
        dask.compute(*graph)
        report = client.run(stop_sampler)
    return max(report.values(), key=lambda r: r["peak"])


def row(label, workers, n, chunks, mem, footprint) -> str:
    extra = mem["peak"] - mem["base"]
    fp = "-" if footprint is None else f"{footprint / MB:.0f}"
    ratio = "-" if footprint is None else f"{extra / footprint:.2f}"
    within = "-" if footprint is None else f"{(extra - mem['stored']) / footprint:.2f}"
    return (f"| {label} | {workers} | {n:.0e} | {chunks} | {fp} | {mem['base'] / MB:.0f} | "
            f"{mem['peak'] / MB:.0f} | {extra / MB:.0f} | {mem['stored'] / MB:.0f} | {ratio} | {within} | "
            f"{os.getloadavg()[0]:.1f} |")


def main(sizes=(4_000_000, 40_000_000), chunkings=(2, 8, 32)) -> str:
    loss = tl.parse((ROOT / "examples" / "kernel_fit.tl").read_text())
    kernels = tl.compile(loss), tl.compile(tl.grad(loss, "c"))
    x, z, c = (a.compute() if hasattr(a, "compute") else a for a in inputs(20_000, 4))
    mine = map_overlap_graph(20_000, 4)[0][0].compute(scheduler="sync")
    assert np.isclose(mine, kernels[0](x=x, z=z, c=c)), "map_overlap computes the same loss"
    lines = [f"Load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores at the start; m = {M}; "
             "one thread per worker (one task in flight); MiB.", "",
             "| graph | workers | n | chunks | footprint | base | peak | peak - base | stored | "
             "(peak - base) / footprint | (peak - base - stored) / footprint | load |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for line in lines:
        print(line, flush=True)
    for workers in (1, 2):
        for n in sizes:
            for chunks in chunkings:
                for label, ks in (("tensorlang loss + gradient", kernels), ("tensorlang loss", kernels[:1])):
                    graph, footprint = tensorlang_graph(ks, n, chunks)
                    mem = measure(workers, graph, tensorlang_graph(ks, 20_000, chunks)[0])
                    lines.append(row(label, workers, n, chunks, mem, footprint))
                    print(lines[-1], flush=True)
                mem = measure(workers, map_overlap_graph(n, chunks)[0], map_overlap_graph(20_000, chunks)[0])
                lines.append(row("Dask map_overlap loss", workers, n, chunks, mem, footprint))
                print(lines[-1], flush=True)
    lines += ["", "`footprint`: the largest block footprint of the kernels' plans (what one block task "
              "reads, writes and uses as temporaries), times the worker's one thread; a map_overlap row "
              "shows the tensorlang loss's. `base`: the worker's resident memory after the warm-up; `peak`: "
              "its high-water resident memory; `stored`: the most bytes of task results it held at once. "
              "The worker with the highest peak is shown."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    ap = options(__doc__, quick="n = 4 * 10^6 only")
    args = ap.parse_args()
    try:
        import dask.distributed  # noqa: F401
    except ImportError:
        print("skipped: Dask and distributed are not installed (pip install tensorlang[dask])")
    else:
        print(main(sizes=(4_000_000,) if args.quick else (4_000_000, 40_000_000)))
