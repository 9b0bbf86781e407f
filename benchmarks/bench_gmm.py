"""The Gaussian mixture objective of GradBench's ``gmm`` written in the language (``examples/gmm.tl``): its
compiled kernel and compiled gradient in ``alpha``, ``mu``, ``q`` and ``L`` (``tl.adjoint``), each call's
best time in one thread, at n = 1,000 points and (d, k) = (10, 25) and (64, 50), the sizes GradBench's
evals use; the gradient's time over the forward's beside the certified ratio (``tl.cost`` of the adjoint over
the program's), and, where JAX is installed, ``jax.jit`` of the same objective and of its ``jax.grad`` in the
same run (float64, the result waited for).

Run: ``python benchmarks/bench_gmm.py``; the load average (``os.getloadavg()``) is printed beside the figures.
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")   # (before NumPy and JAX start their thread pools)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

import tensorlang as tl  # noqa: E402
from harness import best, options  # noqa: E402

PROGRAM = Path(__file__).resolve().parent.parent / "examples" / "gmm.tl"
WRT = ["alpha", "mu", "q", "L"]
SIZES = ((1000, 10, 25), (1000, 64, 50))


def inputs(n, d, k, seed=0):
    rng = np.random.default_rng(seed)
    return dict(x=rng.normal(size=(n, d)), alpha=rng.normal(size=k), mu=rng.normal(size=(k, d)),
                q=rng.normal(size=(k, d)) * 0.1, L=np.tril(rng.normal(size=(k, d, d)), -1) * 0.1)


def jax_runs(args):
    """``(forward, gradient)`` of the same objective under ``jax.jit``, or None without JAX."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)

    def objective(alpha, mu, q, L, x):
        Q = jnp.tril(L, -1) + jax.vmap(jnp.diag)(jnp.exp(q))
        y = jnp.einsum("kab,ikb->ika", Q, x[:, None, :] - mu[None, :, :])
        e = alpha[None, :] + q.sum(axis=1)[None, :] - 0.5 * jnp.sum(y * y, axis=2)
        return jnp.sum(jnp.log(jnp.sum(jnp.exp(e), axis=1))) - x.shape[0] * jnp.log(jnp.sum(jnp.exp(alpha)))

    fwd = jax.jit(objective)
    grad = jax.jit(jax.grad(objective, argnums=(0, 1, 2, 3)))
    a = [jnp.asarray(args[n]) for n in ("alpha", "mu", "q", "L", "x")]
    return (lambda: fwd(*a).block_until_ready(),
            lambda: [g.block_until_ready() for g in grad(*a)])


def main() -> None:
    e = tl.parse(PROGRAM.read_text())
    adjoint = tl.adjoint(e, wrt=WRT)
    forward, gradient = tl.compile(e), tl.compile(adjoint)
    dy = [v for v in adjoint.free_vars if v not in e.free_vars]
    print(f"load average {os.getloadavg()[0]:.2f}")
    print("| n, d, k | forward | gradient | gradient / forward | certified | JAX forward | JAX gradient "
          "| gradient / JAX's |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for n, d, k in SIZES:
        args = inputs(n, d, k)
        sizes = dict(n=n, m=d, B=k)
        certified = float(tl.cost(adjoint, **sizes) / tl.cost(e, **sizes))
        f = best(lambda: forward(**args), repeat=7, budget=10.0)
        g = best(lambda: gradient(**args, **{dy[0]: 1.0}), repeat=7, budget=10.0)
        peer = jax_runs(args)
        if peer is not None:
            jf, jg = (best(run, repeat=7, budget=10.0) for run in peer)
            jax_text = f"{jf * 1e3:.2f} ms | {jg * 1e3:.2f} ms | {g / jg:.2f}"
        else:
            jax_text = "- | - | -"
        print(f"| {n:,}, {d}, {k} | {f * 1e3:.2f} ms | {g * 1e3:.2f} ms | {g / f:.2f} | {certified:.2f} | {jax_text} |",
              flush=True)
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    options(__doc__).parse_args()
    main()
