"""Sparse Hessians (``tl.hessian(e, wrt, sparse=True)``) against the gradient of the same program, in one
run: the 1-D finite-difference energy ``sum(i) [i < n - 1] (x[i+1] - x[i])^2 x[i]`` (tridiagonal, 3n - 2
nonzeros) at n = 10^3 ... 10^6 and the 2-D one of ``tests/test_sparse_jacobian.py`` on n x n grids (about 7
nonzeros per row); where JAX is installed, ``jax.hessian`` (dense) of the same 1-D energy, jit-compiled, at the
sizes a dense Hessian fits.  Standalone: ``python benchmarks/bench_sparse_hessian.py [--quick]``; prints a
table (the load average beside it) to paste into docs/derive.md.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks"), str(ROOT / "tests")]

import tensorlang as tl  # noqa: E402
from harness import best, options  # noqa: E402
from test_sparse_jacobian import STENCIL_1D, STENCIL_2D  # noqa: E402


def _jax_dense(n: int):
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)

    def energy(x):
        d = x[1:] - x[:-1]
        return jnp.sum(d * d * x[:-1])

    hessian = jax.jit(jax.hessian(energy))
    x = jnp.asarray(np.random.default_rng(0).uniform(-1, 1, n))
    return best(lambda: hessian(x).block_until_ready())


def main() -> None:
    args = options(__doc__, quick="smaller sizes").parse_args()
    rows = []
    for src, sizes, shape in ((STENCIL_1D, (10**3, 10**4, 10**5) if args.quick else (10**3, 10**4, 10**5, 10**6),
                               lambda n: (n,)),
                              (STENCIL_2D, (64, 128) if args.quick else (64, 128, 256, 512), lambda n: (n, n))):
        e = tl.parse(src)
        grad, hess = tl.compile(tl.grad(e, "x")), tl.compile(tl.hessian(e, "x", sparse=True))
        for n in sizes:
            x = np.random.default_rng(n).uniform(-1, 1, shape(n))
            h = hess(x=x)
            tg, th = best(lambda: grad(x=x)), best(lambda: hess(x=x))
            jax_time = _jax_dense(n) if len(shape(n)) == 1 and n <= 4000 else None
            rows.append((f"{len(shape(n))}-D", x.size, h.nnz, tg, th, jax_time))
    print(f"load average {os.getloadavg()[0]:.2f}")
    print("| energy | unknowns | nonzeros | gradient | sparse Hessian | Hessian / gradient | JAX dense Hessian |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for kind, size, nnz, tg, th, tj in rows:
        jax_text = f"{tj * 1e3:.3f} ms" if tj is not None else "-"
        print(f"| {kind} | {size:,} | {nnz:,} | {tg * 1e3:.3f} ms | {th * 1e3:.3f} ms | {th / tg:.1f} | {jax_text} |")


if __name__ == "__main__":
    main()
