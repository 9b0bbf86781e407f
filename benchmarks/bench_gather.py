"""Reads through index arrays (gathers) and their scatter-add adjoints: the matrix factorisation loss of
``examples/factorisation.tl`` (observation o reads row ``user[o]`` of U and row ``item[o]`` of V) and its
compiled gradient in U and V, each call's best time in one thread, against the same loss written as its
users write it: NumPy (fancy indexing; the gradient by ``np.bincount`` per column, NumPy's fastest
scatter-add, ``np.add.at`` beside it), JAX (``jax.jit`` of the loss and of ``jax.grad``) and PyTorch
(eager, ``index_select`` and ``backward``) where they are installed.  The sizes grow the observations p
(the work should grow with p) and, at a fixed p, the users n (it should not grow with n).

Run: ``python benchmarks/bench_gather.py [--out docs/gather_bench.md]`` (the table, and beside it the plot of
the gradients' times, ``.png``); the load average is printed beside the figures.
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")   # (before NumPy, JAX and PyTorch start their thread pools)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

import tensorlang as tl  # noqa: E402
from harness import best, options, pyplot, save_plot  # noqa: E402

PROGRAM = Path(__file__).resolve().parent.parent / "examples" / "factorisation.tl"
K = 16
SIZES = ((10_000, 5_000, 100_000), (10_000, 5_000, 1_000_000), (1_000, 500, 1_000_000), (100_000, 50_000, 1_000_000))


def inputs(n, m, p, seed=0):
    rng = np.random.default_rng(seed)
    return dict(user=rng.integers(0, n, p), item=rng.integers(0, m, p), U=rng.normal(size=(n, K)),
                V=rng.normal(size=(m, K)), r=rng.normal(size=p))


def numpy_runs(a):
    user, item, U, V, r = (a[k] for k in ("user", "item", "U", "V", "r"))

    def loss():
        e = np.einsum("ij,ij->i", U[user], V[item]) - r
        return e @ e

    def gradient(scatter):
        e2 = 2 * (np.einsum("ij,ij->i", U[user], V[item]) - r)
        return scatter(user, e2[:, None] * V[item], U.shape), scatter(item, e2[:, None] * U[user], V.shape)

    def by_bincount(rows, vals, shape):
        return np.stack([np.bincount(rows, vals[:, j], shape[0]) for j in range(shape[1])], axis=1)

    def by_add_at(rows, vals, shape):
        out = np.zeros(shape)
        np.add.at(out, rows, vals)
        return out

    return loss, lambda: gradient(by_bincount), lambda: gradient(by_add_at)


def jax_runs(a):
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)

    def loss(U, V, user, item, r):
        e = jnp.sum(U[user] * V[item], axis=1) - r
        return e @ e

    f, g = jax.jit(loss), jax.jit(jax.grad(loss, argnums=(0, 1)))
    args = [jnp.asarray(a[k]) for k in ("U", "V", "user", "item", "r")]
    return (lambda: f(*args).block_until_ready(), lambda: [x.block_until_ready() for x in g(*args)])


def torch_runs(a):
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    U, V = (torch.tensor(a[k], requires_grad=True) for k in ("U", "V"))
    user, item, r = (torch.from_numpy(a[k]) for k in ("user", "item", "r"))

    def loss():
        e = (U.index_select(0, user) * V.index_select(0, item)).sum(1) - r
        return e @ e

    def gradient():
        U.grad = V.grad = None
        loss().backward()
        return U.grad, V.grad

    return (lambda: loss().item()), gradient


def main() -> None:
    ap = options(__doc__)
    ap.add_argument("--out", help="also write the table to this Markdown file")
    out = ap.parse_args().out
    e = tl.parse(PROGRAM.read_text())
    forward, gradient = tl.compile(e), tl.compile(tl.grad(e, wrt=["U", "V"]))
    load = os.getloadavg()
    lines = [f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, one thread, k = {K}, best of up to 7 calls",
             "",
             "| n users, m items, p observations | tensorlang loss | tensorlang gradient | gradient / loss | NumPy loss "
             "| NumPy gradient (bincount) | NumPy gradient (add.at) | JAX jit loss | JAX jit gradient | PyTorch loss "
             "| PyTorch gradient | our gradient / fastest peer's |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    print("\n".join(lines), flush=True)
    gradients: dict = {}
    for n, m, p in SIZES:
        a = inputs(n, m, p)
        ms = lambda fn: best(fn, repeat=7, budget=10.0) * 1e3  # noqa: E731
        loss, grad = ms(lambda: forward(**a)), ms(lambda: gradient(**a))
        np_loss, np_bincount, np_add_at = numpy_runs(a)
        peers = {"NumPy": (ms(np_loss), ms(np_bincount), best(np_add_at, repeat=2, budget=10.0) * 1e3)}
        for name, runs in (("JAX", jax_runs(a)), ("PyTorch", torch_runs(a))):
            peers[name] = tuple(ms(run) for run in runs) if runs is not None else None
        fastest = min(v[1] for v in peers.values() if v is not None)
        gradients[f"{n:,}, {m:,}, {p:,}"] = {"tensorlang": grad, **{k: v[1] for k, v in peers.items() if v is not None}}
        shown = lambda v: " | ".join(f"{t:.2f} ms" for t in v) if v is not None else "- | -"  # noqa: E731
        line = (f"| {n:,}, {m:,}, {p:,} | {loss:.2f} ms | {grad:.2f} ms | {grad / loss:.2f} | {shown(peers['NumPy'])} "
                f"| {shown(peers['JAX'])} | {shown(peers['PyTorch'])} | {grad / fastest:.2f} |")
        lines.append(line)
        print(line, flush=True)
    if out:
        Path(out).write_text("\n".join(lines) + "\n")
        plot(gradients, Path(out).with_suffix(".png"), load[0])


def plot(gradients: dict, path: Path, load: float) -> None:
    """Grouped bars: each size's gradient time per tool."""
    plt = pyplot()
    if plt is None:
        return
    tools = list(next(iter(gradients.values())))
    fig, ax = plt.subplots(figsize=(8, 3.6))
    width = 0.8 / len(tools)
    for k, tool in enumerate(tools):
        ax.bar([i + k * width for i in range(len(gradients))], [g.get(tool, 0) for g in gradients.values()],
               width, label=tool)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(gradients))], list(gradients), fontsize=7)
    ax.set_xlabel("n users, m items, p observations (k = 16)", fontsize=8)
    ax.set_ylabel("gradient in U and V, ms (best call)", fontsize=8)
    save_plot(fig, ax, f"factorisation gradient, one thread (load average {load:.2f})", path)


if __name__ == "__main__":
    main()
