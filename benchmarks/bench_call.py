"""The fixed cost of calling a compiled kernel: a small program (a squared distance of two vectors of 10
entries, and its gradient) called again and again with NumPy arrays, against the same expression in NumPy
and, where JAX is installed, a ``jax.jit``-compiled function called with JAX arrays (its result waited
for).  What is timed is one call, the best of many, so that the figures are the wrapper's (input checks,
size inference, output allocation, the ctypes call), not the arithmetic's.  Standalone:
``python benchmarks/bench_call.py``; prints a table (the load average beside it) for docs/codegen.md.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import tensorlang as tl  # noqa: E402
from harness import best, options  # noqa: E402

PROGRAM = "x : [n]R\ny : [n]R\nsum(i:n) (x[i] - y[i]) * (x[i] - y[i])"


def jax_calls(x, y):
    """``(loss, gradient)`` call times of the jit-compiled JAX functions, or None without JAX."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)
    loss = jax.jit(lambda x, y: jnp.sum((x - y) ** 2))
    grad = jax.jit(jax.grad(lambda x, y: jnp.sum((x - y) ** 2)))
    xj, yj = jnp.asarray(x), jnp.asarray(y)
    return (best(lambda: loss(xj, yj).block_until_ready(), repeat=3000),
            best(lambda: grad(xj, yj).block_until_ready(), repeat=3000))


def main() -> None:
    options(__doc__).parse_args()
    e = tl.parse(PROGRAM)
    loss, grad = tl.compile(e), tl.compile(tl.grad(e, "x"))
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=10), rng.normal(size=10)
    ours = (best(lambda: loss(x=x, y=y), repeat=3000), best(lambda: grad(x=x, y=y), repeat=3000))
    numpy = (best(lambda: np.sum((x - y) ** 2), repeat=3000), best(lambda: 2 * (x - y), repeat=3000))
    peer = jax_calls(x, y)
    print(f"load average {os.getloadavg()[0]:.2f}")
    print("| call | tensorlang kernel | NumPy expression | JAX jit | kernel / JAX |")
    print("| --- | --- | --- | --- | --- |")
    for k, what in enumerate(("loss", "gradient")):
        jax_text = f"{peer[k] * 1e6:.1f} µs | {ours[k] / peer[k]:.2f}" if peer else "- | -"
        print(f"| {what} (n = 10) | {ours[k] * 1e6:.1f} µs | {numpy[k] * 1e6:.1f} µs | {jax_text} |")


if __name__ == "__main__":
    main()
