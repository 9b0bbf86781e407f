"""Benchmarks of compiled kernels (issue 6): tensorlang's C backend against hand-written NumPy and, when
importable, JAX (jit) and PyTorch.  Standalone: ``python benchmarks/bench_codegen.py [--quick]``.

For every program: the forward kernel and the gradient kernel (``tl.grad``, compiled), timed as the
best of a few runs; ratios are from this one run.  The time from parsing to the first compiled gradient
is measured with an empty build cache.  Results are printed as a table and written to
``docs/codegen_bench.md``; a log-log plot of time against n goes to ``docs/codegen_bench.png`` when
matplotlib is importable.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import tensorlang as tl  # noqa: E402
from tensorlang.codegen import compile as tl_compile  # noqa: E402


def best(fn, repeat: int = 15, budget: float = 2.0) -> float:
    """The best of up to ``repeat`` runs within ``budget`` seconds (this machine is shared: the minimum
    is the least disturbed run)."""
    fn()
    times = []
    start = time.perf_counter()
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
        if time.perf_counter() - start > budget:
            break
    return min(times)


def grad_fn():
    try:
        from tensorlang.derive.api import grad
    except ImportError:
        return None
    return grad


# -- programs -------------------------------------------------------------------------------------------

PROGRAMS = {
    "conv loss (m=16)": dict(
        src=(ROOT / "examples" / "deconv_loss.tl").read_text(), wrt="c", sizes=lambda n: {"n": n, "m": 16},
        ns=[10_000, 100_000, 1_000_000, 2_000_000],
        inputs=lambda n, r: {"x": r.standard_normal(n + 15), "c": r.standard_normal(16), "z": r.standard_normal(n)},
        # the best hand-written NumPy found: a strided window view times c (BLAS gemv), and its transpose
        numpy=lambda d: float(np.sum((_win(d["x"]) @ d["c"] - d["z"]) ** 2)),
        numpy_grad=lambda d: 2 * ((_win(d["x"]) @ d["c"] - d["z"]) @ _win(d["x"])),
    ),
    "matrix-product loss": dict(
        src="A : [n][n]R\nB : [n][n]R\nC : [n][n]R\nsum(i:n, j:n) ((sum(k:n) A[i, k] * B[k, j]) - C[i, j]) * "
            "((sum(k:n) A[i, k] * B[k, j]) - C[i, j])",
        wrt="A", sizes=lambda n: {"n": n}, ns=[64, 128, 256, 512, 1024],
        inputs=lambda n, r: {"A": r.standard_normal((n, n)), "B": r.standard_normal((n, n)),
                             "C": r.standard_normal((n, n))},
        numpy=lambda d: float(np.sum((d["A"] @ d["B"] - d["C"]) ** 2)),
        numpy_grad=lambda d: 2 * (d["A"] @ d["B"] - d["C"]) @ d["B"].T,
    ),
    "2-D stencil energy": dict(
        src="u : [n + 2][n + 2]R\nsum(i:n, j:n) (4 * u[i + 1, j + 1] - u[i, j + 1] - u[i + 2, j + 1] - "
            "u[i + 1, j] - u[i + 1, j + 2]) * (4 * u[i + 1, j + 1] - u[i, j + 1] - u[i + 2, j + 1] - "
            "u[i + 1, j] - u[i + 1, j + 2])",
        wrt="u", sizes=lambda n: {"n": n}, ns=[64, 256, 1024, 2048],
        inputs=lambda n, r: {"u": r.standard_normal((n + 2, n + 2))},
        numpy=lambda d: float(np.sum(_lap(d["u"]) ** 2)),
        numpy_grad=lambda d: _lap_adj(2 * _lap(d["u"])),
    ),
    "softmax cross-entropy": dict(
        src="x : [n]R\ny : [n]R\nlet s = sum(i:n) exp(x[i]) in sum(i:n) y[i] * (log(s) - x[i])",
        wrt="x", sizes=lambda n: {"n": n}, ns=[1_000, 100_000, 1_000_000],
        inputs=lambda n, r: {"x": r.standard_normal(n), "y": r.dirichlet(np.ones(n))},
        numpy=lambda d: float(np.sum(d["y"] * (np.log(np.sum(np.exp(d["x"]))) - d["x"]))),
        numpy_grad=lambda d: np.exp(d["x"]) / np.sum(np.exp(d["x"])) * np.sum(d["y"]) - d["y"],
    ),
    "diag dot: dot(A[:,0], A[0,:]), A = diag(x)": dict(
        src=(ROOT / "examples" / "diag_dot.tl").read_text(), wrt="x", sizes=lambda n: {"n": n},
        ns=[2**8, 2**10, 2**12, 2**14],
        inputs=lambda n, r: {"x": r.standard_normal(n)},
        numpy=lambda d: float(np.diag(d["x"])[:, 0] @ np.diag(d["x"])[0, :]),
        numpy_grad=None,
    ),
    "3 traces of diag(x)": dict(
        src="x : [n]R\nlet A = gen(i:n, j:n) [i = j] * x[i] in (sum(i:n) A[i, i]) * (sum(i:n) A[i, i] * A[i, i])"
            " * (sum(i:n) 2 * A[i, i])",
        wrt="x", sizes=lambda n: {"n": n}, ns=[2**8, 2**10, 2**12, 2**14],
        inputs=lambda n, r: {"x": r.standard_normal(n)},
        numpy=lambda d: float(np.trace(np.diag(d["x"])) * np.trace(np.diag(d["x"]) ** 2)
                              * np.trace(2 * np.diag(d["x"]))),
        numpy_grad=None,
    ),
    "sum that skips x[1]": dict(
        src=(ROOT / "examples" / "skip_x1.tl").read_text(), wrt="x", sizes=lambda n: {"n": n},
        ns=[2**8, 2**10, 2**12, 2**14],
        inputs=lambda n, r: {"x": r.standard_normal(n)},
        numpy=lambda d: float(np.sum(d["x"]) - d["x"][1]),
        numpy_grad=lambda d: np.where(np.arange(d["x"].size) == 1, 0.0, 1.0),
    ),
}


def _win(x, m=16):
    return np.lib.stride_tricks.sliding_window_view(x, m)


def _lap(u):
    return 4 * u[1:-1, 1:-1] - u[:-2, 1:-1] - u[2:, 1:-1] - u[1:-1, :-2] - u[1:-1, 2:]


def _lap_adj(r):
    g = np.zeros((r.shape[0] + 2, r.shape[1] + 2))
    g[1:-1, 1:-1] += 4 * r
    g[:-2, 1:-1] -= r
    g[2:, 1:-1] -= r
    g[1:-1, :-2] -= r
    g[1:-1, 2:] -= r
    return g


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="the two smallest sizes only")
    args = ap.parse_args()
    grad = grad_fn()
    rng = np.random.default_rng(0)
    rows = []
    plot = {}
    latency = {}
    for name, p in PROGRAMS.items():
        # parse to first compiled gradient, with an empty build cache
        with tempfile.TemporaryDirectory() as cache:
            old = os.environ.get("TENSORLANG_CACHE")
            os.environ["TENSORLANG_CACHE"] = cache
            t = time.perf_counter()
            expr = tl.parse(p["src"])
            gexpr = grad(expr, p["wrt"]) if grad else None
            gk = tl_compile(gexpr) if gexpr is not None else None
            latency[name] = time.perf_counter() - t
            fk = tl_compile(expr)
            if old is None:
                del os.environ["TENSORLANG_CACHE"]
            else:
                os.environ["TENSORLANG_CACHE"] = old
        ns = p["ns"][:2] if args.quick else p["ns"]
        for n in ns:
            d = p["inputs"](n, rng)
            sz = p["sizes"](n)
            ins = {k: v for k, v in d.items() if k in expr.free_vars}
            ins.update({k: v for k, v in sz.items() if k in expr.sizes})
            gins = {k: v for k, v in d.items() if gexpr is not None and k in gexpr.free_vars}
            gins.update({k: v for k, v in sz.items() if gexpr is not None and k in gexpr.sizes})
            f_val = fk(**ins)
            assert np.allclose(f_val, p["numpy"](d), rtol=1e-8), name
            t_f = best(lambda: fk(**ins))
            t_g = best(lambda: gk(**gins)) if gk is not None else float("nan")
            if gk is not None and p["numpy_grad"] is not None:
                assert np.allclose(gk(**gins), p["numpy_grad"](d), rtol=1e-6, atol=1e-8), name
            t_np = best(lambda: p["numpy"](d), budget=5.0)
            t_npg = best(lambda: p["numpy_grad"](d), budget=5.0) if p["numpy_grad"] else float("nan")
            rows.append((name, n, t_f, t_g, t_g / t_f, t_np, t_npg, t_f / t_np, t_g / t_npg))
            plot.setdefault(name, []).append((n, t_f, t_g))
            print(f"{name:45s} n={n:>9d}  fwd {t_f*1e3:9.3f} ms  grad {t_g*1e3:9.3f} ms  grad/fwd {t_g/t_f:6.2f}"
                  f"  numpy {t_np*1e3:9.3f} ms  numpy grad {t_npg*1e3:9.3f} ms", flush=True)
    peers = []
    for mod in ("jax", "torch"):
        try:
            __import__(mod)
            peers.append(mod)
        except ImportError:
            pass
    lines = ["| program | n | fwd (ms) | grad (ms) | grad/fwd | NumPy fwd (ms) | NumPy grad (ms) | fwd/NumPy | "
             "grad/NumPy grad |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, n, tf, tg, r, tnp, tnpg, a, b in rows:
        lines.append(f"| {name} | {n} | {tf*1e3:.3f} | {tg*1e3:.3f} | {r:.2f} | {tnp*1e3:.3f} | {tnpg*1e3:.3f} | "
                     f"{a:.2f} | {b:.2f} |")
    lines += ["", "| program | parse to first compiled gradient (s, empty cache) |", "|---|---:|"]
    lines += [f"| {k} | {v:.3f} |" for k, v in latency.items()]
    lines += ["", f"Peers importable in this run: {', '.join(peers) or 'none (JAX and PyTorch not installed)'}."]
    from tensorlang.codegen.runtime import blas_table

    lines += [f"BLAS for dense contractions: {blas_table(np.float64)[1]}; "
              f"load average at the end of the run: {os.getloadavg()[0]:.2f} (2 cores, shared)."]
    text = "\n".join(lines)
    print(text)
    out = ROOT / "docs" / "codegen_bench.md"
    out.parent.mkdir(exist_ok=True)
    out.write_text("# Code generation benchmarks (generated by benchmarks/bench_codegen.py)\n\n" + text + "\n")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not importable: table only")
        return
    fig, ax = plt.subplots(figsize=(8, 6))
    for name, pts in plot.items():
        ns_, tf, tg = zip(*pts)
        ax.loglog(ns_, tf, "o-", label=f"{name} fwd")
        ax.loglog(ns_, tg, "s--", label=f"{name} grad")
    ax.set_xlabel("n")
    ax.set_ylabel("time (s)")
    ax.legend(fontsize=6)
    fig.savefig(ROOT / "docs" / "codegen_bench.png", dpi=120)


if __name__ == "__main__":
    main()
