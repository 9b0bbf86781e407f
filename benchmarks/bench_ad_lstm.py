"""The gradient of an LSTM written as users write it in NumPy (a Python loop over the steps; each step a
cell: ``z = W @ h + U @ x_t + b``, sigmoid and tanh gates, the state update), differentiated with
``ad.grad``: its time over the forward's, and the gradient's milliseconds per step, at 64, 256 and 1,024
steps (2 layers, hidden 14, input 14).  A per-step cost that grows with the number of steps means
something in the gradient is scanned or copied per step.

Run: ``python benchmarks/bench_ad_lstm.py`` (``--quick``: fewer rounds).  Forward and gradient are timed
interleaved, each its median round, in CPU time of this process (``time.process_time``: on a shared
machine the wall time also counts the time other jobs held the cores); the load average
(``os.getloadavg()``) is printed beside the figures.

A second table runs the same model four ways, each its gradient over its own forward and its gradient's
milliseconds per step: the NumPy cell differentiated by ``ad.grad``; the cell compiled as a tensorlang
kernel (``examples/lstm_cell.tl``) in the same Python loop, differentiated by ``ad.grad`` through the
kernel's compiled adjoint; PyTorch eager (``backward()``; its forward under ``no_grad``); and JAX, the loop a
``lax.scan``, forward and gradient ``jit``-compiled (compilation left out).  Every peer runs in one thread,
as ours does; a peer that is not installed is left out.
"""
from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")   # (before NumPy, PyTorch and JAX start their thread pools)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

import numpy as np  # noqa: E402

import tensorlang as tl  # noqa: E402
from tensorlang import ad  # noqa: E402

from harness import options  # noqa: E402

H = 14  # the hidden size; the input has as many entries
STEPS = (64, 256, 1024)


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def cell(W, U, b, h, c, x):
    z = W @ h + U @ x + b
    i = sigmoid(z[:H])
    f = sigmoid(z[H:2 * H])
    o = sigmoid(z[2 * H:3 * H])
    g = np.tanh(z[3 * H:])
    c = f * c + i * g
    h = o * np.tanh(c)
    return h, c


def loss(W1, U1, b1, W2, U2, b2, xs):
    h1 = c1 = h2 = c2 = np.zeros(H)
    total = 0.0
    for t in range(len(xs)):
        h1, c1 = cell(W1, U1, b1, h1, c1, xs[t])
        h2, c2 = cell(W2, U2, b2, h2, c2, h1)
        total = total + np.sum((h2 - xs[t]) ** 2)
    return total


GRADIENT = ad.grad(loss, argnums=(0, 1, 2, 3, 4, 5))

CELL = tl.compile(tl.parse((Path(__file__).resolve().parent.parent / "examples" / "lstm_cell.tl").read_text()))


def loss_compiled(W1, U1, b1, W2, U2, b2, xs):
    """``loss`` with the cell a compiled tensorlang kernel."""
    h1 = c1 = h2 = c2 = np.zeros(H)
    total = 0.0
    for t in range(len(xs)):
        h1, c1 = CELL(W=W1, U=U1, b=b1, h=h1, c=c1, x=xs[t])
        h2, c2 = CELL(W=W2, U=U2, b=b2, h=h2, c=c2, x=h1)
        total = total + np.sum((h2 - xs[t]) ** 2)
    return total


GRADIENT_COMPILED = ad.grad(loss_compiled, argnums=(0, 1, 2, 3, 4, 5))


def arguments(steps, seed=0):
    rng = np.random.default_rng(seed)
    params = [rng.normal(size=shape) * 0.3 for _ in range(2) for shape in ((4 * H, H), (4 * H, H), (4 * H,))]
    return (*params, rng.normal(size=(steps, H)))


def interleaved(f, g, rounds):
    """The median CPU times of ``f`` and ``g`` timed alternately over ``rounds`` rounds (the median, not the
    best: a round that no full garbage collection hit is not the cost a user sees)."""
    tf, tg = [], []
    for _ in range(rounds):
        t = time.process_time()
        f()
        tf.append(time.process_time() - t)
        t = time.process_time()
        g()
        tg.append(time.process_time() - t)
    return statistics.median(tf), statistics.median(tg)


def torch_runs(args):
    """PyTorch eager's ``(forward, gradient)`` of ``loss`` on ``args``, or None where it is not installed."""
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    params = [torch.tensor(a, requires_grad=True) for a in args[:6]]
    xs = torch.tensor(args[6])

    def run(W1, U1, b1, W2, U2, b2):
        h1 = c1 = h2 = c2 = torch.zeros(H, dtype=torch.float64)
        total = 0.0
        for t in range(len(xs)):
            h1, c1 = torch_cell(torch, W1, U1, b1, h1, c1, xs[t])
            h2, c2 = torch_cell(torch, W2, U2, b2, h2, c2, h1)
            total = total + torch.sum((h2 - xs[t]) ** 2)
        return total

    def forward():
        with torch.no_grad():
            return float(run(*params))

    def gradient():
        for p in params:
            p.grad = None
        run(*params).backward()
        return [p.grad for p in params]

    return forward, gradient


def torch_cell(torch, W, U, b, h, c, x):
    z = W @ h + U @ x + b
    i, f, o = torch.sigmoid(z[:H]), torch.sigmoid(z[H:2 * H]), torch.sigmoid(z[2 * H:3 * H])
    c = f * c + i * torch.tanh(z[3 * H:])
    return o * torch.tanh(c), c


def jax_runs(args):
    """JAX's ``(forward, gradient)`` of ``loss`` (the loop a ``lax.scan``), jit-compiled and run once (so
    compilation is left out), or None where JAX is not installed."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)

    def cell(W, U, b, h, c, x):
        z = W @ h + U @ x + b
        i, f, o = jax.nn.sigmoid(z[:H]), jax.nn.sigmoid(z[H:2 * H]), jax.nn.sigmoid(z[2 * H:3 * H])
        c = f * c + i * jnp.tanh(z[3 * H:])
        return o * jnp.tanh(c), c

    def run(params, xs):
        W1, U1, b1, W2, U2, b2 = params

        def step(state, x):
            h1, c1, h2, c2 = state
            h1, c1 = cell(W1, U1, b1, h1, c1, x)
            h2, c2 = cell(W2, U2, b2, h2, c2, h1)
            return (h1, c1, h2, c2), jnp.sum((h2 - x) ** 2)

        zero = jnp.zeros(H)
        return jnp.sum(jax.lax.scan(step, (zero, zero, zero, zero), xs)[1])

    params, xs = [jnp.asarray(a) for a in args[:6]], jnp.asarray(args[6])
    fwd, grad = jax.jit(run), jax.jit(jax.grad(run))
    fwd(params, xs).block_until_ready()
    jax.block_until_ready(grad(params, xs))
    return (lambda: fwd(params, xs).block_until_ready()), (lambda: jax.block_until_ready(grad(params, xs)))


def peers(quick=False):
    """The second table (see the module docstring)."""
    print(f"\n{'steps':>6} {'way':<28} {'forward ms':>11} {'gradient ms':>12} {'grad/fwd':>9} {'grad ms/step':>13} "
          f"{'load':>6}")
    for steps in STEPS:
        args = arguments(steps)
        ways = [("NumPy cell, ad.grad", lambda: loss(*args), lambda: GRADIENT(*args)),
                ("compiled cell, ad.grad", lambda: loss_compiled(*args), lambda: GRADIENT_COMPILED(*args))]
        for name, made in (("PyTorch eager", torch_runs(args)), ("JAX lax.scan, jit", jax_runs(args))):
            if made is not None:
                ways.append((name, *made))
        rounds = (3 if quick else 7) if steps >= 1024 else (5 if quick else 11)
        for name, fwd, grad in ways:
            grad()
            f, g = interleaved(fwd, grad, rounds)
            print(f"{steps:>6} {name:<28} {f * 1e3:>11.2f} {g * 1e3:>12.2f} {g / f:>9.1f} {g / steps * 1e3:>13.3f} "
                  f"{os.getloadavg()[0]:>6.2f}", flush=True)


def main(quick=False):
    print(f"{'steps':>6} {'forward ms':>11} {'gradient ms':>12} {'grad/fwd':>9} {'grad ms/step':>13} {'load':>6}")
    for steps in STEPS:
        args = arguments(steps)
        GRADIENT(*args)
        rounds = (3 if quick else 7) if steps >= 1024 else (5 if quick else 15)
        fwd, grad = interleaved(lambda: loss(*args), lambda: GRADIENT(*args), rounds)
        print(f"{steps:>6} {fwd * 1e3:>11.2f} {grad * 1e3:>12.1f} {grad / fwd:>9.1f} {grad / steps * 1e3:>13.3f} "
              f"{os.getloadavg()[0]:>6.2f}", flush=True)


if __name__ == "__main__":
    quick = options(__doc__, "fewer rounds").parse_args().quick
    main(quick)
    peers(quick)
