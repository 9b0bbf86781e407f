"""The fixed cost of calling a compiled kernel: a small program (a squared distance of two vectors of 10
entries, and its gradient) called again and again with NumPy arrays, against the same expression in NumPy
and, where JAX is installed, a ``jax.jit``-compiled function called with JAX arrays (its result waited
for).  What is timed is one call, the best of many, so that the figures are the wrapper's (input checks,
size inference, output allocation, the ctypes call), not the arithmetic's.  A second table puts the call
beside its compiled entry point called alone (its arguments laid out once), and beside the same call with the
entry point called through ctypes instead of ``codegen.entry_caller``'s extension: the deconvolution loss at
n = m = 16, and the LSTM cell of ``examples/lstm_cell.tl`` (six inputs, BLAS, temporaries, a pair out) with
its adjoint (a pair in).  Standalone: ``python benchmarks/bench_call.py``; prints the tables (the load average
beside them) for docs/codegen.md.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import ctypes  # noqa: E402

import tensorlang as tl  # noqa: E402
from tensorlang.codegen.runtime import address, blas_table  # noqa: E402
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


def c_alone(kernel, inputs: dict) -> float:
    """The best time of ``kernel``'s compiled entry point called with the arguments of ``inputs`` laid out
    once (what a call costs without its Python)."""
    runner = kernel._runner
    size_arr, args, outs = runner.prepare(inputs)
    addrs = [address(a) for a in args + outs]
    if runner.meta.get("blas"):
        addrs.append(ctypes.addressof(blas_table(runner.dtype)[0]))
    workspace = runner._workspace(size_arr) if runner.meta.get("workspace") else None   # (held while timed)
    if workspace is not None:
        addrs.append(workspace[1])
    table, sizes = (ctypes.c_void_p * len(addrs))(*addrs), address(size_arr)
    return best(lambda: runner.fn(sizes, table), repeat=3000)


def against_the_c() -> None:
    rng = np.random.default_rng(1)
    deconv = tl.compile(tl.parse((ROOT / "examples" / "deconv_loss.tl").read_text()))
    cell = tl.compile(tl.parse((ROOT / "examples" / "lstm_cell.tl").read_text()))
    k = 14
    cell_inputs = dict(W=rng.normal(size=(4 * k, k)), U=rng.normal(size=(4 * k, k)), b=rng.normal(size=4 * k),
                       h=rng.normal(size=k), c=rng.normal(size=k), x=rng.normal(size=k))
    back = cell.__ad_pullback__(**cell_inputs)[1]
    back((np.ones(k), np.ones(k)))   # (builds the adjoint kernel)
    adjoint = cell.adjoint()
    adjoint_inputs = dict(cell_inputs, **{adjoint.dy_name: (np.ones(k), np.ones(k))})
    cases = [("deconvolution loss (n = m = 16)", deconv,
              dict(x=rng.normal(size=31), c=rng.normal(size=16), z=rng.normal(size=16))),
             ("LSTM cell (n = 14)", cell, cell_inputs), ("its adjoint (dy a pair)", adjoint, adjoint_inputs)]
    print(f"\nload average {os.getloadavg()[0]:.2f}")
    print("| kernel | call | entry point alone | the call's own cost | call, the entry point through ctypes |")
    print("| --- | --- | --- | --- | --- |")
    for what, kernel, inputs in cases:
        call, alone = best(lambda: kernel(**inputs), repeat=3000), c_alone(kernel, inputs)
        caller, kernel._runner._caller = kernel._runner._caller, None   # (ctypes, as where the extension is not built)
        by_ctypes = best(lambda: kernel(**inputs), repeat=3000)
        kernel._runner._caller = caller
        print(f"| {what} | {call * 1e6:.1f} µs | {alone * 1e6:.1f} µs | {(call - alone) * 1e6:.1f} µs "
              f"| {by_ctypes * 1e6:.1f} µs |")


if __name__ == "__main__":
    main()
    against_the_c()
