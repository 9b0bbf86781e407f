"""The deconvolution problem of section 2.1, end to end: fit a convolution kernel to a signal pair.

A known signal ``x`` is convolved with an unknown kernel ``c_true`` (m = 16 taps) and observed with
noise as ``z``.  The squared error of a candidate kernel ``c`` is the program in
``examples/kernel_fit.tl``.  The story, as ``make demo`` tells it:

1. parse the loss;
2. derive its gradient in ``c`` (``tl.grad``: the adjoint of section 6, simplified);
3. certify the gradient (``tl.certify``: the cost ratios of Theorems 6.1 and 6.35 at the fitting sizes);
4. compile the loss and the gradient to C (``tl.compile``), with the time each takes;
5. fit ``c`` from a random start with SciPy's L-BFGS-B, the compiled loss and gradient doing all the
   numerical work, and compare with the exact least-squares kernel.

Run: ``python examples/deconv_fit.py`` (about a second; ``main(n=..., m=...)`` for other sizes).
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

import tensorlang as tl

HERE = Path(__file__).resolve().parent


def synthetic_data(n: int, m: int, noise: float, rng):
    """A signal, a smooth kernel with some sign changes, and the noisy observation of their convolution."""
    x = rng.standard_normal(n + m - 1)
    t = np.linspace(-2.0, 2.0, m)
    c_true = np.exp(-t**2) * np.cos(3.0 * t)
    windows = np.lib.stride_tricks.sliding_window_view(x, m)  # windows[i] = x[i : i + m]
    z = windows @ c_true + noise * rng.standard_normal(n)
    return x, z, c_true, windows


def main(n: int = 100_000, m: int = 16, noise: float = 0.01, seed: int = 0, verbose: bool = True) -> dict:
    say = print if verbose else (lambda *a, **k: None)
    from scipy.optimize import minimize

    rng = np.random.default_rng(seed)
    say(f"== fitting a deconvolution kernel (section 2.1): n = {n}, m = {m}, noise {noise} " + "=" * 10)

    # 1. parse
    t0 = time.perf_counter()
    source = (HERE / "kernel_fit.tl").read_text()
    loss = tl.parse(source, filename="kernel_fit.tl")
    t_parse = time.perf_counter() - t0
    say("loss (examples/kernel_fit.tl):")
    say("  " + str(loss).replace("\n", "\n  "))

    # 2. derive
    t0 = time.perf_counter()
    gradient = tl.grad(loss, "c")
    t_grad = time.perf_counter() - t0
    say("gradient in c (tl.grad):")
    say("  " + str(gradient).replace("\n", "\n  "))

    # 3. certify
    t0 = time.perf_counter()
    cert = tl.certify(loss, "c", n=n, m=m)
    t_cert = time.perf_counter() - t0
    say(str(cert))

    # 4. compile (a warm build cache makes the build step a lookup; the timings say which it was)
    t0 = time.perf_counter()
    loss_k = tl.compile(loss)
    t_loss = time.perf_counter() - t0
    t0 = time.perf_counter()
    grad_k = tl.compile(gradient)
    t_gradk = time.perf_counter() - t0
    say(f"parse {t_parse * 1e3:.1f} ms, derive {t_grad * 1e3:.1f} ms, certify {t_cert * 1e3:.1f} ms")
    for name, k, t in (("loss", loss_k, t_loss), ("gradient", grad_k, t_gradk)):
        say(f"compile {name:8s} {t * 1e3:7.1f} ms  (generate {k.timings['generate_s'] * 1e3:.1f} ms, "
            f"C build or cache {k.timings['build_s'] * 1e3:.1f} ms)")

    # 5. fit
    x, z, c_true, windows = synthetic_data(n, m, noise, rng)
    calls = {"n": 0}

    def fun(c):
        calls["n"] += 1
        return loss_k(x=x, z=z, c=c), grad_k(x=x, z=z, c=c)

    c0 = rng.standard_normal(m)
    f0, g0 = fun(c0)
    # the compiled gradient agrees with the reference evaluator (a spot check at the start point)
    ref = tl.evaluate(gradient, x=x[:40 + m - 1], z=z[:40], c=c0)
    assert np.allclose(grad_k(x=x[:40 + m - 1], z=z[:40], c=c0), ref, rtol=1e-10)
    t0 = time.perf_counter()
    res = minimize(fun, c0, jac=True, method="L-BFGS-B", options={"maxiter": 500, "gtol": 1e-10})
    t_fit = time.perf_counter() - t0
    c_ls = np.linalg.lstsq(windows, z, rcond=None)[0]  # the exact minimiser, for comparison
    err_true = np.linalg.norm(res.x - c_true) / np.linalg.norm(c_true)
    err_ls = np.linalg.norm(res.x - c_ls) / np.linalg.norm(c_ls)
    per_eval = t_fit / max(calls["n"] - 1, 1)
    say(f"L-BFGS-B: {res.nit} iterations, {res.nfev} loss+gradient evaluations in {t_fit * 1e3:.1f} ms "
        f"({per_eval * 1e3:.2f} ms each); {res.message}")
    say(f"loss {f0:.6g} at the random start -> {res.fun:.6g} (noise floor n * noise^2 = {n * noise**2:.6g})")
    say(f"fit error |c - c_true| / |c_true| = {err_true:.2e}; |c - c_lstsq| / |c_lstsq| = {err_ls:.2e}")
    say("fitted kernel: " + np.array2string(res.x, precision=3, max_line_width=100))
    say("true kernel:   " + np.array2string(c_true, precision=3, max_line_width=100))
    return {"certificate": cert, "result": res, "error_true": err_true, "error_lstsq": err_ls,
            "compile_s": (t_loss, t_gradk), "fit_s": t_fit}


if __name__ == "__main__":
    main()
