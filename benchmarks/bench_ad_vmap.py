"""Per-observation Jacobians by batching: ``ad.vmap(ad.jacobian(residual, argnums=(0, 1, 2)))`` over the 31,843
observations of GradBench's first bundle-adjustment problem (``ba1``: 49 cameras, 7,776 points), ``residual`` one
observation's two reprojection errors written as a user writes it for one observation (Rodrigues' rotation with its
zero-angle case by ``np.where``, perspective division, radial distortion), against JAX's ``vmap(jacrev)`` and
``vmap(jacfwd)`` of the same function (compiled by ``jit``, the compilation left out) and against the Python loop
of ``ad.jacobian`` over the observations (timed on a slice and scaled).

Run: ``python benchmarks/bench_ad_vmap.py`` (``--quick``: fewer rounds).  Each figure is the best of its rounds,
in one thread, the rounds of the batched runs interleaved (each round runs each of them once, so that a slower
spell of a shared machine falls on all of them alike), the load average (``os.getloadavg()``) printed beside them;
every result is checked against the others before it is timed.
"""
from __future__ import annotations

import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")   # (before NumPy and JAX start their thread pools)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

import numpy as np  # noqa: E402

from tensorlang import ad  # noqa: E402

from harness import options  # noqa: E402

OBSERVATIONS = 31_843   # ba1's
LOOP_SLICE = 500        # the observations the Python loop is timed on


def residual(cam, X, w, feat, xp=np):
    """The reprojection error of one observation: camera ``cam`` (11 parameters), point ``X``, weight ``w``."""
    rot = cam[0:3]
    Xc = X - cam[3:6]
    sqtheta = xp.sum(rot * rot)
    zero = sqtheta == 0
    theta = xp.sqrt(xp.where(zero, 1.0, sqtheta))
    k = rot / theta
    cos, sin = xp.cos(theta), xp.sin(theta)
    rotated = Xc * cos + xp.cross(k, Xc) * sin + k * (xp.sum(k * Xc) * (1.0 - cos))
    Xcam = xp.where(zero, Xc + xp.cross(rot, Xc), rotated)
    proj = Xcam[0:2] / Xcam[2]
    rsq = xp.sum(proj * proj)
    distorted = proj * (1.0 + cam[9] * rsq + cam[10] * rsq * rsq)
    return w * (distorted * cam[6] + cam[7:9] - feat)


def observations(p: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    cams = np.concatenate([rng.normal(scale=0.1, size=(p, 3)), rng.normal(size=(p, 3)),
                           rng.uniform(400, 600, (p, 1)), rng.normal(size=(p, 2)), rng.normal(scale=1e-3, size=(p, 2))],
                          axis=1)
    X = rng.normal(size=(p, 3)) + np.array([0.0, 0.0, 8.0])
    return cams, X, rng.uniform(0.5, 1.5, p), rng.normal(size=(p, 2))


def interleaved(runs, rounds: int) -> list:
    """The best time of each of ``runs`` over ``rounds`` rounds, each round running each once in turn."""
    times = [[] for _ in runs]
    for _ in range(rounds):
        for run, got in zip(runs, times):
            t = time.perf_counter()
            run()
            got.append(time.perf_counter() - t)
    return [min(t) for t in times]


def jax_runs(args):
    """JAX's ``(vmap(jacrev), vmap(jacfwd))`` under ``jit``, each returning its three blocks, or None."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)
    f = lambda cam, X, w, feat: residual(cam, X, w, feat, jnp)   # noqa: E731
    a = [jnp.asarray(x) for x in args]
    out = []
    for jac in (jax.jacrev, jax.jacfwd):
        g = jax.jit(jax.vmap(jac(f, argnums=(0, 1, 2))))
        g(*a)[0].block_until_ready()   # (compiled here, not timed)
        out.append(lambda g=g: [b.block_until_ready() for b in g(*a)])
    return out


def main() -> None:
    rounds = 5 if options(__doc__, "fewer rounds").parse_args().quick else 15
    args = observations(OBSERVATIONS)
    batched = ad.vmap(ad.jacobian(residual, argnums=(0, 1, 2)))
    ours = batched(*args)
    one = ad.jacobian(residual, argnums=(0, 1, 2))
    for i in (0, 1, OBSERVATIONS - 1):   # every block against the function's own Jacobian at that observation
        for got, want in zip(ours, one(*(a[i] for a in args))):
            np.testing.assert_allclose(got[i], want, rtol=1e-10, atol=1e-12)
    print(f"load average {os.getloadavg()[0]:.2f}")
    sliced = [a[:LOOP_SLICE] for a in args]
    t_loop = interleaved([lambda: [one(*(a[i] for a in sliced)) for i in range(LOOP_SLICE)]], 1)[0]
    names = ["tensorlang.ad: `ad.vmap(ad.jacobian(residual))`"]
    runs = [lambda: batched(*args)]
    peers = jax_runs(args)
    for name, run in zip(("JAX: `jit(vmap(jacrev(residual)))`", "JAX: `jit(vmap(jacfwd(residual)))`"), peers or ()):
        for got, want in zip(ours, run()):
            np.testing.assert_allclose(got, np.asarray(want), rtol=1e-9, atol=1e-9)
        names.append(name)
        runs.append(run)
    times = interleaved(runs, rounds)
    t_ours = times[0]
    rows = [(names[0], t_ours),
            (f"tensorlang.ad: a Python loop of `ad.jacobian` (timed on {LOOP_SLICE}, scaled)",
             t_loop * OBSERVATIONS / LOOP_SLICE), *zip(names[1:], times[1:])]
    print(f"\nThe Jacobian of each of {OBSERVATIONS:,} observations' reprojection errors (2 x 15), "
          f"load average {os.getloadavg()[0]:.2f}\n")
    print("| how | time | over `ad.vmap(ad.jacobian)` |")
    print("| --- | --- | --- |")
    for name, t in rows:
        print(f"| {name} | {t * 1e3:,.1f} ms | {t / t_ours:.2f} |")


if __name__ == "__main__":
    main()
