"""Table 2 of "Don't Unroll Adjoint" (../shared/papers/000_*.txt) in Python: the plain forward, the
gradient by tensorlang.ad, and (when importable) JAX and PyTorch, all measured in one run.

Run: ``python benchmarks/bench_ad.py`` (``--quick`` for fewer repetitions).  Prints one row per
benchmark: forward time, gradient time (``ad.gradient(f, *args)``), their ratio, the same for the
function returned by ``ad.grad(f)`` (called as ``g(*args)``), Zygote's ratio from the paper, the bar (2x
Zygote's ratio), the first gradient of a fresh copy of the function (transform, emit, compile, run),
and the peers' gradient times where installed.

Forward, ``ad.gradient`` and ``ad.grad(f)`` are timed interleaved (forward, gradient, grad, forward, ...
in rounds), each keeping its best round, so that load from other jobs on a shared machine hits both alike; the ratio is the ratio
of the two best times, and "ratio (median)" the median of the per-round ratios, which shows how much
the load moved it.
"""
from __future__ import annotations

import linecache
import math
import textwrap
import timeit

import numpy as np

from tensorlang import ad

from harness import options

SOURCES = {
    "sincos": """
        def sincos(x):
            return math.sin(math.cos(x))
    """,
    "loop": """
        def loop(x, n):
            r = 1.0
            for _ in range(n):
                r *= x
            return r
    """,
    "logsumexp": """
        def logsumexp(x):
            m = np.max(x)
            return m + np.log(np.sum(np.exp(x - m)))
    """,
    "logistic regression": """
        def logistic(w, b):
            z = X @ w + b
            p = 1.0 / (1.0 + np.exp(-z))
            return -np.mean(Y * np.log(p) + (1.0 - Y) * np.log(1.0 - p))
    """,
    "2-layer MNIST MLP": """
        def mlp(W1, b1, W2, b2):
            h = np.tanh(W1 @ IMAGE + b1)
            z = W2 @ h + b2
            m = np.max(z)
            return m + np.log(np.sum(np.exp(z - m))) - z[LABEL]
    """,
}
ZYGOTE = {"sincos": 20.7 / 15.9, "loop": 29.5 / 4.17, "logsumexp": 1.26 / 0.96, "logistic regression": 17.6 / 4.67,
          "2-layer MNIST MLP": 207 / 27.7}
TORCH_ISSUE_US = {"sincos": 57, "loop": 21000, "logsumexp": 168, "logistic regression": 228,
                  "2-layer MNIST MLP": 507}

RNG = np.random.default_rng(0)
X = RNG.normal(size=(100, 10))
Y = (RNG.random(100) > 0.5).astype(float)
IMAGE = RNG.random(784)
LABEL = 3
ARGS = {
    "sincos": (1.0,),
    "loop": (1.0001, 1000),
    "logsumexp": (RNG.normal(size=1000),),
    "logistic regression": (RNG.normal(size=10) * 0.1, 0.0),
    "2-layer MNIST MLP": (RNG.normal(size=(100, 784)) * 0.05, np.zeros(100), RNG.normal(size=(10, 100)) * 0.1,
                          np.zeros(10)),
}
_FRESH = [0]


def fresh(name):
    """A new function object with a new code object from the benchmark's source (so nothing is cached)."""
    _FRESH[0] += 1
    src = textwrap.dedent(SOURCES[name])
    filename = f"<bench {name} {_FRESH[0]}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    env = {"math": math, "np": np, "X": X, "Y": Y, "IMAGE": IMAGE, "LABEL": LABEL}
    exec(compile(src, filename, "exec"), env)
    return next(v for k, v in env.items() if callable(v) and getattr(v, "__module__", 1) is None or
                k == src.split("(")[0].split()[-1])


def best(stmt, number, repeat):
    return min(timeit.repeat(stmt, number=number, repeat=repeat)) / number


def interleaved(f, g, h, number, rounds):
    """Best times of ``f``, ``g`` and ``h`` timed alternately, and the medians of the per-round ratios
    g/f and h/f."""
    bf = bg = bh = float("inf")
    ratios, ratios_h = [], []
    for _ in range(rounds):
        tf = timeit.timeit(f, number=number) / number
        tg = timeit.timeit(g, number=number) / number
        th = timeit.timeit(h, number=number) / number
        bf, bg, bh = min(bf, tf), min(bg, tg), min(bh, th)
        ratios.append(tg / tf)
        ratios_h.append(th / tf)
    ratios.sort()
    ratios_h.sort()
    return bf, bg, ratios[len(ratios) // 2], bh, ratios_h[len(ratios_h) // 2]


def first_gradient(name):
    f = fresh(name)
    t = timeit.default_timer()
    ad.gradient(f, *ARGS[name])
    return timeit.default_timer() - t


def torch_gradient(name):
    try:
        import torch
    except ImportError:
        return None
    t = {k: torch.tensor(v) for k, v in (("X", X), ("Y", Y), ("IMAGE", IMAGE))}

    def make():
        if name == "sincos":
            return (torch.tensor(1.0, dtype=torch.float64, requires_grad=True),), lambda x: torch.sin(torch.cos(x))
        if name == "loop":
            def loop(x):
                r = torch.tensor(1.0, dtype=torch.float64)
                for _ in range(1000):
                    r = r * x
                return r
            return (torch.tensor(1.0001, dtype=torch.float64, requires_grad=True),), loop
        if name == "logsumexp":
            return (torch.tensor(ARGS[name][0], requires_grad=True),), lambda x: torch.logsumexp(x, 0)
        if name == "logistic regression":
            def logistic(w, b):
                p = torch.sigmoid(t["X"] @ w + b)
                return -torch.mean(t["Y"] * torch.log(p) + (1 - t["Y"]) * torch.log(1 - p))
            return (torch.tensor(ARGS[name][0], requires_grad=True),
                    torch.tensor(0.0, dtype=torch.float64, requires_grad=True)), logistic

        def mlp(W1, b1, W2, b2):
            z = W2 @ torch.tanh(W1 @ t["IMAGE"] + b1) + b2
            return torch.logsumexp(z, 0) - z[LABEL]
        return tuple(torch.tensor(a, requires_grad=True) for a in ARGS[name]), mlp

    args, f = make()

    def grad():
        return torch.autograd.grad(f(*args), args)
    return best(grad, *_reps(name))


def jax_gradient(name, jit):
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)
    fs = {
        "sincos": lambda x: jnp.sin(jnp.cos(x)),
        "loop": lambda x: jax.lax.fori_loop(0, 1000, lambda i, r: r * x, 1.0),
        "logsumexp": lambda x: jax.nn.logsumexp(x),
        "logistic regression": lambda w, b: -jnp.mean(Y * jax.nn.log_sigmoid(X @ w + b)
                                                      + (1 - Y) * jax.nn.log_sigmoid(-(X @ w + b))),
        "2-layer MNIST MLP": lambda W1, b1, W2, b2: (lambda z: jax.nn.logsumexp(z) - z[LABEL])(
            W2 @ jnp.tanh(W1 @ IMAGE + b1) + b2),
    }
    args = ARGS[name][:1] if name == "loop" else ARGS[name]
    g = jax.grad(fs[name], argnums=tuple(range(len(args))))
    if jit:
        g = jax.jit(g)
    jax.block_until_ready(g(*args))
    return best(lambda: jax.block_until_ready(g(*args)), *_reps(name))


QUICK = False  # --quick


def _reps(name):
    n = {"sincos": 20000, "loop": 100, "logsumexp": 2000, "logistic regression": 2000, "2-layer MNIST MLP": 300}[name]
    return (max(n // 10, 1), 3) if QUICK else (n // 4, 25)


def fmt(seconds):
    if seconds is None:
        return "-"
    us = seconds * 1e6
    return f"{us:.3g} µs" if us < 1000 else f"{us / 1000:.3g} ms"


def main():
    rows = []
    for name in SOURCES:
        f = fresh(name)
        args = ARGS[name]
        ad.gradient(f, *args)
        g = ad.grad(f)
        g(*args)
        fwd, grad, median, gfn, gmedian = interleaved(lambda: f(*args), lambda: ad.gradient(f, *args),
                                                      lambda: g(*args), *_reps(name))
        first = min(first_gradient(name) for _ in range(3))
        rows.append((name, fwd, grad, grad / fwd, median, gfn, gfn / fwd, gmedian, ZYGOTE[name], first,
                     torch_gradient(name), jax_gradient(name, False), jax_gradient(name, True)))
    head = ("benchmark", "forward", "tensorlang.ad", "ratio", "ratio (median)", "ad.grad(f)", "grad ratio",
            "grad ratio (median)", "Zygote ratio", "bar (2x)", "ok", "ok (grad)", "first gradient", "PyTorch",
            "PyTorch (issue)", "JAX", "JAX jit")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name, fwd, grad, ratio, median, gfn, gratio, gmedian, zyg, first, torch_t, jax_t, jit_t in rows:
        ok = ratio <= 2 * zyg and grad * 1e6 < TORCH_ISSUE_US[name] and first < 0.1
        gok = gratio <= 2 * zyg and gfn * 1e6 < TORCH_ISSUE_US[name] and first < 0.1
        print(f"| {name} | {fmt(fwd)} | {fmt(grad)} | {ratio:.2f} | {median:.2f} | {fmt(gfn)} | {gratio:.2f} | "
              f"{gmedian:.2f} | {zyg:.2f} | {2 * zyg:.2f} | {'yes' if ok else 'no'} | {'yes' if gok else 'no'} | "
              f"{fmt(first)} | {fmt(torch_t)} | {TORCH_ISSUE_US[name]} µs | "
              f"{fmt(jax_t)} | {fmt(jit_t)} |")


if __name__ == "__main__":
    QUICK = options(__doc__, "fewer repetitions").parse_args().quick
    main()
