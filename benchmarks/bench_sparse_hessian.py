"""Sparse Hessians (``tl.hessian(e, wrt, sparse=True)``) against the gradient of the same program and against
JAX, in one run: the 1-D finite-difference energy ``sum(i) [i < n - 1] (x[i+1] - x[i])^2 x[i]`` (tridiagonal,
3n - 2 nonzeros) at n = 10^3 ... 10^6 and the 2-D one of ``tests/test_sparse_jacobian.py`` on n x n grids
(about 5 nonzeros per row).  Where JAX is installed (``make bench`` installs it): ``jax.hessian`` (dense,
jit-compiled) where a dense Hessian fits, and colouring with JAX: the same colouring of the same pattern,
one ``jax.jvp`` of ``jax.grad`` per colour (``vmap``-ed and jit-compiled), the entries read out as
tensorlang.ad's sparse Hessian reads them.  Memory: the peak of the arrays allocated by the first Hessian call
at a size (``tracemalloc``, which NumPy reports to: the pattern, computed then, the kernel's outputs and
temporaries and the result), in bytes per nonzero, beside the largest resident set of this process, which
only grows.  Standalone: ``python benchmarks/bench_sparse_hessian.py [--quick]``; prints a table (the load
average beside it) for docs/derive.md and draws docs/sparse_hessian_bench.png (with matplotlib).
"""
from __future__ import annotations

import os
import resource
import sys
import tracemalloc
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks"), str(ROOT / "tests")]

import tensorlang as tl  # noqa: E402
from harness import best, options, pyplot, save_plot  # noqa: E402
from tensorlang.derive.ad.sparsity import Compressed  # noqa: E402
from test_sparse_jacobian import STENCIL_1D, STENCIL_2D  # noqa: E402


def jax_energies():
    """The two energies in JAX (float64), or None without JAX."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)

    def one(x):
        d = x[1:] - x[:-1]
        return jnp.sum(d * d * x[:-1])

    def two(x):
        dv, dh = x[1:, :-1] - x[:-1, :-1], x[:-1, 1:] - x[:-1, :-1]
        return jnp.sum((dv * dv + dh * dh) * (x[:-1, :-1] ** 2 + 1))

    return jax, jnp, {1: one, 2: two}


def jax_dense(peer, dim, x):
    jax, jnp, energies = peer
    hessian = jax.jit(jax.hessian(energies[dim]))
    xj = jnp.asarray(x)
    return best(lambda: hessian(xj).block_until_ready())


def jax_coloured(peer, dim, x, pattern):
    """One ``jvp`` of ``grad`` per colour of ``pattern`` (vmap-ed, jit-compiled), the entries read into CSR."""
    jax, jnp, energies = peer
    compressed = Compressed(pattern)
    seeds = jnp.asarray(np.stack([compressed.seed(c, x.shape) for c in range(compressed.count)]))
    grad = jax.grad(energies[dim])
    products = jax.jit(jax.vmap(lambda v, x: jax.jvp(grad, (x,), (v,))[1], in_axes=(0, None)))
    xj = jnp.asarray(x)

    def run():
        p = np.asarray(products(seeds, xj)).reshape(compressed.count, -1)
        return compressed.assemble(list(p))

    return best(run), compressed.count


def main() -> None:
    args = options(__doc__, quick="smaller sizes").parse_args()
    peer = jax_energies()
    rows = []
    cases = ((STENCIL_1D, (10**3, 10**4, 10**5) if args.quick else (10**3, 10**4, 10**5, 10**6), 1),
             (STENCIL_2D, (64, 128) if args.quick else (64, 128, 256, 512), 2))
    ours = []   # (ours first, every size, then JAX: the threads of JAX's pool, spinning after its work, would
    # otherwise hold the second core while our next kernel's OpenMP threads wait for it)
    for src, sizes, dim in cases:
        e = tl.parse(src)
        grad, hess = tl.compile(tl.grad(e, "x")), tl.compile(tl.hessian(e, "x", sparse=True))
        for n in sizes:
            x = np.random.default_rng(n).uniform(-1, 1, (n,) * dim)
            tracemalloc.start()
            h = hess(x=x)
            first_call = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            tg, th = best(lambda: grad(x=x)), best(lambda: hess(x=x))
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            ours.append((dim, x, h, tg, th, first_call, peak))
    for dim, x, h, tg, th, first_call, peak in ours:
        dense = jax_dense(peer, dim, x) if peer and x.size <= 4096 else None
        coloured = jax_coloured(peer, dim, x, h) if peer else (None, None)
        rows.append((f"{dim}-D", x.size, h.nnz, tg, th, dense, *coloured, first_call, peak))
    print(f"load average {os.getloadavg()[0]:.2f}")
    print("| energy | unknowns | nonzeros | gradient | sparse Hessian | Hessian / gradient | JAX dense Hessian "
          "| JAX coloured HVPs (colours) | first call's arrays | peak RSS |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for kind, size, nnz, tg, th, dense, col, colours, first_call, peak in rows:
        dense_text = f"{dense * 1e3:.3f} ms" if dense is not None else "-"
        col_text = f"{col * 1e3:.3f} ms ({colours})" if col is not None else "-"
        print(f"| {kind} | {size:,} | {nnz:,} | {tg * 1e3:.3f} ms | {th * 1e3:.3f} ms | {th / tg:.1f} | {dense_text} "
              f"| {col_text} | {first_call / 2**20:,.1f} MB ({first_call / nnz:.0f} B/nonzero) | {peak:,.0f} MB |")
    plot(rows)


def plot(rows) -> None:
    """Hessian time / gradient time against the number of unknowns, ours and colouring with JAX HVPs."""
    plt = pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(5.4, 3.6))
    for kind, marker in (("1-D", "o"), ("2-D", "s")):
        mine = [r for r in rows if r[0] == kind]
        ax.plot([r[1] for r in mine], [r[4] / r[3] for r in mine], marker + "-", label=f"{kind}: sparse Hessian")
        peer = [r for r in mine if r[6] is not None]
        if peer:
            ax.plot([r[1] for r in peer], [r[6] / r[3] for r in peer], marker + "--", alpha=0.6,
                    label=f"{kind}: colouring + JAX HVPs")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("unknowns")
    ax.set_ylabel("time / gradient kernel's time")
    save_plot(fig, ax, "sparse Hessians of finite-difference energies", ROOT / "docs" / "sparse_hessian_bench.png", 7)


if __name__ == "__main__":
    main()
