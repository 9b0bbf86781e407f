"""How long normalisation takes: each pass and ``to_ssa`` on programs of a few dozen to a few thousand
nodes (``python benchmarks/bench_normalize.py``).

The programs are stacks of layers in the shape of the paper's section 2.3: a batched, gated layer
whose intermediate ``let`` sits inside the batch loop, so every pass has work to do::

    let h1 = gen(b:B) let a = gen(i:n) sum(j:n) W1[i, j] * h0[b, j] in gen(i:n) [i < n - 1] * tanh(a[i]) + a[i]
    in ...
"""
from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tensorlang as tl  # noqa: E402
from tensorlang.nodes import walk  # noqa: E402
from tensorlang.normalize import gen_pushout, let_lift, pair_elim, tensor_ssa, to_ssa  # noqa: E402

from harness import options  # noqa: E402


def layers(k: int, tag: str = "") -> str:
    """k layers; ``tag`` renames the inputs, so that programs share no nodes (and no memoised data)."""
    decls = [f"x{tag} : [B][n]R"] + [f"W{l} : [n][n]R" for l in range(1, k + 1)] + [f"c{l} : [n]R" for l in range(1, k + 1)]
    body = []
    prev = f"x{tag}"
    for l in range(1, k + 1):
        body.append(
            f"let h{l} = gen(b:B) let a = gen(i:n) (sum(j:n) W{l}[i, j] * {prev}[b, j]) + c{l}[i] in "
            f"gen(i:n) [i < n - 1] * tanh(a[i]) + (a[i], 2 * a[i]).1 in"
        )
        prev = f"h{l}"
    body.append(f"sum(b:B, i:n) {prev}[b, i] * {prev}[b, i]")
    return "\n".join(decls) + "\n" + "\n".join(body)


def nodes(e) -> int:
    return sum(1 for _ in walk(e))


def best_of(f, arg, repeat=3):
    best = float("inf")
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = f(arg)
        best = min(best, time.perf_counter() - t)
    return best, out


def main():
    print(f"{'layers':>6s} {'nodes':>6s} {'let_lift':>9s} {'pair_elim':>9s} {'pushout':>9s} {'ssa':>9s} "
          f"{'to_ssa':>9s} {'statements':>10s}")
    for k in (1, 4, 10, 20, 40):
        # to_ssa first, on a program that shares no node with anything before it (cold caches)
        fresh = tl.parse(layers(k, tag=f"_{k}"))
        t = time.perf_counter()
        out = to_ssa(fresh)
        total = time.perf_counter() - t
        # then each pass on its own (warm: nodes memoise their free variables, types, canonical forms)
        e = tl.parse(layers(k))
        t1, a = best_of(let_lift, e)
        t2, b = best_of(pair_elim, a)
        t3, c = best_of(gen_pushout, b)
        t4, d = best_of(tensor_ssa, c)
        statements = str(out).count("let X")
        print(f"{k:6d} {nodes(e):6d} {t1:9.4f} {t2:9.4f} {t3:9.4f} {t4:9.4f} {total:9.4f} {statements:10d}")


if __name__ == "__main__":
    options(__doc__).parse_args()
    main()
