"""The gradient of an LSTM written as users write it in NumPy (a Python loop over the steps; each step a
cell: ``z = W @ h + U @ x_t + b``, sigmoid and tanh gates, the state update), differentiated with
``ad.grad``: its time over the forward's, and the gradient's milliseconds per step, at 64, 256 and 1,024
steps (2 layers, hidden 14, input 14).  A per-step cost that grows with the number of steps means
something in the gradient is scanned or copied per step.

Run: ``python benchmarks/bench_ad_lstm.py`` (``--quick``: fewer rounds).  Forward and gradient are timed
interleaved, each its median round, in CPU time of this process (``time.process_time``: on a shared
machine the wall time also counts the time other jobs held the cores); the load average
(``os.getloadavg()``) is printed beside the figures.
"""
from __future__ import annotations

import os
import statistics
import time

import numpy as np

from tensorlang import ad

from harness import options

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
    main(options(__doc__, "fewer rounds").parse_args().quick)
