"""Newton's method on a nonlinear 2-D energy with the sparse Hessian that ``tl.hessian(..., sparse=True)`` gives.

The energy of a field ``u`` on an n x n grid (examples/newton_pde.tl): the squared differences of neighbours
(a Laplacian), and a reaction term of Ginzburg-Landau type with a convex potential,

    E(u) = sum_ij 1/2 |grad u|^2 + h^2 (u^2 / 2 + u^4 / 4 - f u),

whose minimiser solves the nonlinear PDE ``-lap u + u + u^3 = f`` (natural boundary conditions).  Each Newton
step solves ``H(u) d = -g(u)`` with SciPy's sparse direct solver: ``g`` is the compiled gradient
(``tl.grad``), ``H`` the compiled sparse Hessian, a ``scipy.sparse.csr_array`` with about 5 nonzeros per row,
computed at the cost of its nonzeros (a dense Hessian of a 512 x 512 grid would take 550 GB).

Run: ``python examples/newton_pde.py`` (n = 512, about half a minute; ``main(n=...)`` for other sizes).
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

import tensorlang as tl

HERE = Path(__file__).resolve().parent


def main(n: int = 512, tol: float = 1e-10, verbose: bool = True) -> dict:
    say = print if verbose else (lambda *a, **k: None)
    from scipy.sparse.linalg import spsolve

    energy = tl.parse((HERE / "newton_pde.tl").read_text(), filename="newton_pde.tl")
    t0 = time.perf_counter()
    gradient = tl.compile(tl.grad(energy, "u"))
    hessian = tl.compile(tl.hessian(energy, "u", sparse=True))
    value = tl.compile(energy)
    say(f"derived and compiled the energy, its gradient and its sparse Hessian in {time.perf_counter() - t0:.1f} s")

    h = 1.0 / (n - 1)
    s = np.linspace(0.0, 1.0, n)
    f = 50.0 * np.outer(np.sin(np.pi * s), np.cos(2 * np.pi * s))
    inputs = {"f": f, "h2": h * h}
    u = np.zeros((n, n))
    history = []
    for step in range(20):
        g = gradient(u=u, **inputs)
        residual = float(np.linalg.norm(g))
        history.append(residual)
        say(f"  step {step}: E = {value(u=u, **inputs):.10f}, |g| = {residual:.3e}")
        if residual < tol:
            break
        t1 = time.perf_counter()
        H = hessian(u=u, **inputs)
        t2 = time.perf_counter()
        u = u - spsolve(H.tocsc(), g.ravel()).reshape(n, n)
        say(f"          Hessian {H.shape[0]:,} x {H.shape[1]:,}, {H.nnz:,} nonzeros in {1e3 * (t2 - t1):.1f} ms; "
            f"solved in {time.perf_counter() - t2:.2f} s")
    return {"steps": len(history) - 1, "residual": history[-1], "history": history, "u": u}


if __name__ == "__main__":
    main()
