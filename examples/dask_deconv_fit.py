"""The deconvolution fit of ``make demo`` (``examples/deconv_fit.py``) on a signal that no worker can hold:
a ``dask.distributed.LocalCluster`` of two worker processes, each with a ``memory_limit``, and a signal
ten times that limit.

* The signal ``x`` is a Dask array of random numbers (generated chunk by chunk, never whole); the
  observation ``z`` is its convolution with the true kernel plus noise, computed by the compiled
  convolution itself on Dask arrays (a lazy collection, recomputed chunk by chunk where needed).
* SciPy's L-BFGS-B drives the fit: each evaluation is ONE Dask graph (``dask.compute`` of the compiled
  loss and the compiled gradient called with Dask inputs) whose tasks run the block programs of both;
  only the 16 coefficients of ``c`` and the partial sums cross back to the client.
* The exact least-squares kernel is computed the same way (the normal equations ``W^T W c = W^T z``, two
  more tensorlang programs on Dask arrays) to compare with.

The default: n = 10^7 (x and z are 80 MB each), workers with ``memory_limit="8MiB"`` (the data a worker
may hold; see the comment at ``LocalCluster``), chunks of 5 * 10^5 (4 MB).  Run:
``python examples/dask_deconv_fit.py`` (``--n``, ``--chunk``, ``--memory-limit`` to change the sizes).  Not part of ``make test``; ``tests/test_dask.py`` runs the same graphs smaller.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

import tensorlang as tl

HERE = Path(__file__).resolve().parent
CONV = "x : [n + m - 1]R\nc : [m]R\ngen(i:n) sum(j:m) x[i + j] * c[j]"
GRAM = "x : [n + m - 1]R\ngen(a:m, b:m) sum(i:n) x[i + a] * x[i + b]"
CROSS = "x : [n + m - 1]R\nz : [n]R\ngen(a:m) sum(i:n) x[i + a] * z[i]"


def main(n: int = 10_000_000, m: int = 16, chunk: int = 500_000, memory_limit: str = "8MiB",
         noise: float = 0.01, seed: int = 0, verbose: bool = True) -> dict:
    import dask
    import dask.array as da
    from dask.distributed import Client, LocalCluster
    from dask.utils import parse_bytes
    from scipy.optimize import minimize

    say = print if verbose else (lambda *a, **k: None)
    loss = tl.parse((HERE / "kernel_fit.tl").read_text(), filename="kernel_fit.tl")
    loss_k, grad_k = tl.compile(loss), tl.compile(tl.grad(loss, "c"))
    conv_k, gram_k = tl.compile(tl.parse(CONV)), tl.compile(tl.parse(GRAM))
    cross_k = tl.compile(tl.parse(CROSS))
    limit = parse_bytes(memory_limit)
    say(f"== deconvolution fit on Dask: n = {n:,} ({8 * (n + m - 1) / 1e6:,.0f} MB for x, the same for z), "
        f"m = {m}, chunks of {chunk:,}; 2 workers with memory_limit {limit / 2**20:.0f} MiB each "
        f"(x is {8 * n / limit:.0f}x one worker's limit)")
    # The limit is enforced on the data a worker holds (Dask spills what exceeds 60% of it to disk).  A
    # worker process needs about 150 MB for Python, NumPy, Dask and this package before it holds any
    # data, so the thresholds that compare the whole process's size with the limit (spill at 70%, pause
    # at 80%, restart at 95%) are off: with them, a limit below that size would stop the workers at start.
    with dask.config.set({"distributed.worker.memory.pause": False, "distributed.worker.memory.spill": False,
                          "distributed.worker.memory.terminate": False}), \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit=memory_limit,
                      host="127.0.0.1", dashboard_address=None) as cluster, Client(cluster):
        x = da.random.RandomState(seed).standard_normal(n + m - 1, chunks=chunk)
        t = np.linspace(-2.0, 2.0, m)
        c_true = np.exp(-t**2) * np.cos(3.0 * t)
        z = conv_k(x=x, c=c_true) + noise * da.random.RandomState(seed + 1).standard_normal(n, chunks=chunk)
        say("the loss's plan (the footprint of every block, from isl):")
        say("  " + "\n  ".join(str(loss_k.blocks({"x": x, "z": z, "c": c_true})).splitlines()[:6]) + "\n  ...")

        evaluations = []

        def fun(c):
            t0 = time.perf_counter()
            f, g = dask.compute(loss_k(x=x, z=z, c=c), grad_k(x=x, z=z, c=c))  # one graph
            evaluations.append(time.perf_counter() - t0)
            say(f"  evaluation {len(evaluations):2d}: loss {float(f):.6g} ({evaluations[-1]:.1f} s)")
            return float(f), np.asarray(g, dtype=np.float64)

        c0 = np.random.default_rng(seed).standard_normal(m)
        t0 = time.perf_counter()
        res = minimize(fun, c0, jac=True, method="L-BFGS-B", options={"maxiter": 50, "gtol": 1e-9})
        t_fit = time.perf_counter() - t0
        gram, cross = dask.compute(gram_k(x=x, n=n, m=m), cross_k(x=x, z=z))
        c_ls = np.linalg.solve(gram, cross)
    err_true = np.linalg.norm(res.x - c_true) / np.linalg.norm(c_true)
    err_ls = np.linalg.norm(res.x - c_ls) / np.linalg.norm(c_ls)
    say(f"L-BFGS-B: {res.nit} iterations, {res.nfev} loss+gradient graphs in {t_fit:.1f} s "
        f"({t_fit / max(res.nfev, 1):.2f} s each, {n / (t_fit / max(res.nfev, 1)) / 1e6:.1f} M elements/s); "
        f"{res.message}")
    say(f"fit error |c - c_true| / |c_true| = {err_true:.2e}; |c - c_lstsq| / |c_lstsq| = {err_ls:.2e}")
    return {"result": res, "error_true": err_true, "error_lstsq": err_ls, "fit_s": t_fit}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--chunk", type=int, default=500_000)
    ap.add_argument("--memory-limit", default="8MiB")
    args = ap.parse_args()
    main(n=args.n, chunk=args.chunk, memory_limit=args.memory_limit)
