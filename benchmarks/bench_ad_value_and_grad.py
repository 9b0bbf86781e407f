"""``ad.value_and_grad`` and ``ad.grad(has_aux=True)`` per call against ``ad.gradient`` and the forward, on
the rows of table 2 (``bench_ad.py``), in one process.

Per row: the forward ``f(*args)``, ``ad.gradient(f, *args)``, ``value_and_grad(f)(*args)`` and
``grad(f_aux, has_aux=True)(*args)``, where ``f_aux`` is the row's function with ``return value, 1.0``;
each returned function made and called twice before timing.  The four are timed in interleaved rounds
(21; ``--quick``: 7), each keeping its best round; printed: the best times, the ratios of the best times
against ``ad.gradient`` (in brackets the median of the per-round ratios), and the load average beside
each row.  Last, the cost of an empty ``with collector.paused():`` block.

Run: ``python benchmarks/bench_ad_value_and_grad.py [--quick]``.
"""
from __future__ import annotations

import linecache
import math
import os
import sys
import textwrap
import timeit

import numpy as np

import bench_ad as B
from tensorlang import ad, collector


def with_aux(name, f):
    """The row's function returning ``(value, 1.0)``, compiled from its source (so it can be transformed)."""
    lines = textwrap.dedent(B.SOURCES[name]).rstrip().split("\n")
    i = max(k for k, line in enumerate(lines) if "return " in line)
    head, expr = lines[i].split("return ", 1)
    lines[i] = f"{head}return ({expr}), 1.0"
    src = "\n".join(lines) + "\n"
    filename = f"<bench aux {name}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    env = {"math": math, "np": np, "X": B.X, "Y": B.Y, "IMAGE": B.IMAGE, "LABEL": B.LABEL}
    exec(compile(src, filename, "exec"), env)
    return env[f.__name__]


def rounds(fns, number, n):
    """Best time of each of ``fns`` over ``n`` interleaved rounds, and the median per-round ratio of each
    against the second."""
    best, ratios = [float("inf")] * len(fns), [[] for _ in fns]
    for _ in range(n):
        ts = [timeit.timeit(f, number=number) / number for f in fns]
        for i, t in enumerate(ts):
            best[i] = min(best[i], t)
            ratios[i].append(t / ts[1])
    return best, [sorted(r)[len(r) // 2] for r in ratios]


def main():
    n = 7 if "--quick" in sys.argv else 21
    print(f"{'row':22s} {'forward':>9s} {'gradient':>9s} {'v_and_g':>9s} {'has_aux':>9s} | v_and_g / gradient "
          f"(median) | has_aux / gradient (median) | v_and_g / forward | load")
    for name in B.SOURCES:
        f, args = B.fresh(name), B.ARGS[name]
        vg, ga = ad.value_and_grad(f), ad.grad(with_aux(name, f), has_aux=True)
        for _ in range(2):
            vg(*args), ga(*args), ad.gradient(f, *args)
        number = 20000 if name == "sincos" else 50 if name == "loop" else 1000
        best, med = rounds([lambda: f(*args), lambda: ad.gradient(f, *args), lambda: vg(*args),
                            lambda: ga(*args)], number, n)
        print(f"{name:22s} " + " ".join(f"{t * 1e6:8.3f}u" for t in best) +
              f" | {best[2] / best[1]:.2f} ({med[2]:.2f}) | {best[3] / best[1]:.2f} ({med[3]:.2f}) | "
              f"{best[2] / best[0]:.2f} | {os.getloadavg()[0]:.2f}")

    def paused():
        with collector.paused():
            pass

    t = min(timeit.repeat(paused, number=100000, repeat=5)) / 100000
    print(f"with collector.paused(): pass  {t * 1e6:.3f} us | load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
