"""Kernels under AddressSanitizer and UndefinedBehaviorSanitizer: a fixed set of programs (the examples
and programs that stress the edges: extents that are 0 or negative, strides, guards, CSR relations,
names that clash with C) and their gradients (Jacobians of the vector ones), built with ``TENSORLANG_SANITIZE=1`` and run at every size
0, 1, 2 and at random sizes, with relations dense and CSR, and the sparse Hessians of a few energies; every
result is also checked against the reference evaluator.  Any memory error or undefined behaviour ends the process with the sanitizer's
report; a wrong value makes it exit 1.

Run by ``tests/test_sanitizers.py`` in a subprocess that starts with the sanitizer runtime
(``codegen.build.SANITIZE_PRELOAD``); by hand:
``TENSORLANG_SANITIZE=1 LD_PRELOAD="$(cc -print-file-name=libasan.so) $(cc -print-file-name=libstdc++.so)"
ASAN_OPTIONS=detect_leaks=0 python tests/sanitized.py``.
"""
from __future__ import annotations

import glob
import os
import random
import sys

import numpy as np
import scipy.sparse as sp

import tensorlang as tl
from tensorlang.nodes import IndexMapType, R, RelType, TensorType, tensor_dims

PROGRAMS = [
    "x : [n]R; sum(i:n - 1) (x[i + 1] - x[i]) * (x[i + 1] - x[i])",
    "x : [n]R; sum(i:n - 2) relu(x[i] - 2 * x[i + 1] + x[i + 2]) * x[i + 1]",
    "x : [n]R; sum(i:n - 3) x[0] * x[i]",
    "x : [n]R; log(1 + sum(i:n) exp(x[i]))",
    "A : [n][m]R; sum(i:n, j:m) [i <= j] * A[i, j] * A[i, j]",
    "A : [n][m]R; x : [m]R; sum(i:n) (sum(j:m) A[i, j] * x[j]) * (sum(j:m) A[i, j] * x[j])",
    "x : [2*n]R; sum(i:n) x[2 * i] * x[2 * i + 1] + max(x[2 * i], 0.5)",
    "x : [n]R; sum(i:n) [exists(j:n) i = 2 * j] * x[i] * x[n - 1 - i]",
    "E : rel[n, n]; x : [n]R; sum(i:n) sum(j:n) [E(i, j)] * x[i] * x[j]",
    "E : rel[n, m]; y : [m]R; z : [n]R; sum(i:n) ((sum(j:m) [E(i, j)] * y[j]) - z[i]) * "
    "((sum(j:m) [E(i, j)] * y[j]) - z[i])",
    "E : rel[n, m]; A : [n][m]R; x : [m]R; sum(i:n) tanh(sum(j:m) [E(i, j)] * A[i, j] * x[j])",
    "M_PI : [n]R; linux : R; sum(tl_i:n) min(M_PI[tl_i], linux) * M_PI[tl_i] + 18446744073709551617 * linux",
    "x : [n]R; let s = sum(i:n) x[i] in s * s + abs(s) + sum(i:n - 1) [i < 99999999999999999999] * x[i]",
    # black boxes hoisted out of the loops they do not read: at n = 0 the hoisted exp would read x[-1], and at
    # n < 5 x[4], but each is guarded by its guards holding somewhere in its dropped loops; under a guard on
    # what it reads it stays in place
    "x : [n + m - 1]R; y : [n]R; sum(i:n, j:m) exp(x[j + n - 1]) * y[i]",
    "x : [m]R; y : [n]R; sum(i:n, j:m + 1) [j >= 1] * exp(x[j - 1]) * y[i]",
    "q : [m]R; x : [n]R; gen(i:n, k:m) exp(q[k]) * x[i] + log(1 + sum(j:n) exp(x[j]))",
    "x : [n]R; gen(i:n) [n >= 5] * exp(x[4]) * x[i]",
    # a Jacobian's value stored once for all probes (T2) reads x[0], and at n = 0 there is no probe
    "x : [n]R; gen(i:n) exp(tanh([0 < n] * x[0] - 1)) * x[i]",
    # sums run row by row into slabs (Schedule.emit_slab): a triangle, and a read kept in range by the bracket
    "A : [n][m][m]R; x : [p][m]R; gen(k:n, a:m) sum(i:p, b:m) [a < b] * x[i, b] * A[k, b, a]",
    "x : [m]R; y : [p][n]R; z : [2]R; gen(k:n, a:m + 1, b:2) [a >= 1] * sum(i:p) y[i, k] * x[a - 1] * z[b]",
    # partial sums (codegen.hoist): y[i - 1] taken out of the sum over j where some j < i, so at i = 0 it is not
    # read; a sum hoisted out of the points' loop under a bracket on the variable it reads
    "y : [n]R; x : [n]R; z : [m]R; gen(i:n, a:m) sum(j:n) [j < i] * y[i - 1] * x[j] * z[a]",
    "x : [m]R; y : [n]R; gen(i:n, a:m + 1) [a >= 1] * sum(j:n) y[j] * x[a - 1]",
]

# energies whose sparse Hessians are compiled: the pieces in one sweep over the entries, the 2-D one's tangents in
# blocks of rows (several blocks at m = 3000; rows too long for a block at m = 8200), and the shapes tried
SPARSE_HESSIANS = [
    ("x : [n][m]R; sum(i:n, j:m) [i < n - 1 and j < m - 1] * ((x[i+1, j] - x[i, j]) * (x[i+1, j] - x[i, j]) + "
     "(x[i, j+1] - x[i, j]) * (x[i, j+1] - x[i, j])) * (x[i, j] * x[i, j] + 1)",
     [(0, 0), (0, 3), (1, 1), (2, 2), (5, 7), (6, 3000), (2, 8200)]),
    ("u : [n][n][n]R; sum(i:n, j:n, k:n) [i < n - 1] * (u[i+1, j, k] - u[i, j, k]) * (u[i+1, j, k] - u[i, j, k]) + "
     "u[i, j, k] * u[i, j, k] * u[i, j, k] * u[i, j, k]", [(0, 0, 0), (1, 1, 1), (3, 3, 3)]),
    ("x : [n]R; sum(i:n) [i < n - 1] * x[n - 1 - i] * x[n - 2 - i] * x[i] * x[i]", [(0,), (1,), (2,), (9,)]),
]

# sparse Jacobians over a relation (stored over its entries, the kernel reading positions by CSR entry, or
# looked up at each point, the kernel testing each position), at these (n, m)
RELATION_JACOBIANS = [
    ("E : rel[n, m]; A : [n][m]R; x : [m]R; gen(i:n) sum(j:m) [1 <= j and E(i, j - 1)] * A[i, j] * x[j] * x[j]", "x"),
    ("E : rel[n, m]; A : [n][m]R; x : [b][m]R; gen(k:b, i:n) sum(j:m) [E(i, j)] * A[i, j] * x[k, j]", "A"),
    ("E : rel[n, m]; x : [n]R; gen(i:n) [i < m and E(i, i)] * x[i] * x[i]", "x"),   # (not stored over entries)
]
RELATION_SIZES = [(0, 0), (1, 1), (3, 5), (40, 7)]

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def programs() -> list:
    out = [tl.parse(src) for src in PROGRAMS]
    out += [tl.parse(open(f).read(), filename=f) for f in sorted(glob.glob(os.path.join(EXAMPLES, "*.tl")))]
    return out


def inputs(expr, sizes: dict, rng: np.random.Generator, csr: bool) -> dict:
    def extent(a):
        return max(0, int(a.evaluate({v: sizes[v.name] for v in a.size_vars})))

    out = dict(sizes)
    for name, t in expr.free_vars.items():
        if isinstance(t, IndexMapType):
            length, points_to = extent(t.length), extent(t.extent)
            out[name] = rng.integers(0, points_to, length) if points_to else np.zeros(length, dtype=np.int64)
            continue
        if isinstance(t, RelType):
            dense = rng.random(tuple(extent(s) for s in t.sizes)) < 0.4
            out[name] = sp.csr_matrix(dense) if csr and dense.ndim == 2 else dense
            continue
        shape = []
        while isinstance(t, TensorType):
            shape.append(extent(t.size))
            t = t.elem
        assert t is R, f"{name}: only tensors of reals here"
        out[name] = rng.uniform(-2, 2, tuple(shape)) if shape else float(rng.uniform(-2, 2))
    return out


def close(got, ref) -> bool:
    got, ref = np.asarray(got, dtype=float), np.asarray(ref, dtype=float)
    return got.shape == ref.shape and bool(np.allclose(got, ref, rtol=1e-9, atol=1e-9, equal_nan=True))


def main(seed: int = 0) -> int:
    rng = np.random.default_rng(seed)
    pick = random.Random(seed)
    runs = bad = 0
    for primal in programs():
        reals = [n for n, t in primal.free_vars.items() if not isinstance(t, RelType)]
        kernels = [primal]
        if primal.type is R:
            kernels.append(tl.grad(primal, pick.choice(reals)))
        elif tensor_dims(primal.type)[1] is R:
            kernels.append(tl.jacobian(primal, pick.choice(reals)))
        for expr in kernels:
            kernel = tl.compile(expr)
            for choice in (0, 1, 2, None):
                sizes = {n: (pick.randrange(3, 9) if choice is None else choice) for n in primal.sizes}
                for csr in (False, True):
                    ins = inputs(primal, sizes, rng, csr)
                    ins = {k: v for k, v in ins.items() if k in expr.free_vars or k in expr.sizes}
                    with np.errstate(all="ignore"):
                        got, ref = kernel(**ins), tl.evaluate(expr, **ins)
                    runs += 1
                    if not close(got, ref):
                        bad += 1
                        print(f"differs from the evaluator: {expr} at {sizes}: {got} != {ref}")
    for src, shapes in SPARSE_HESSIANS:
        e = tl.parse(src)
        (wrt,) = e.free_vars
        H = tl.hessian(e, wrt, sparse=True)
        kernel = tl.compile(H)
        for shape in shapes:
            x = rng.uniform(-2, 2, shape)
            got, ref = kernel(**{wrt: x}), tl.evaluate(H, **{wrt: x})
            runs += 1
            if not (np.array_equal(got.indptr, ref.indptr) and np.array_equal(got.indices, ref.indices)
                    and close(got.data, ref.data)):
                bad += 1
                print(f"a sparse Hessian differs from the evaluator's: {src} at {shape}")
    for src, wrt in RELATION_JACOBIANS:
        e = tl.parse(src)
        J = tl.jacobian(e, wrt, sparse=True)
        kernel = tl.compile(J)
        for n, m in RELATION_SIZES:
            for csr in (False, True):
                ins = inputs(e, {k: v for k, v in {"n": n, "m": m, "b": 2}.items() if k in e.sizes}, rng, csr)
                got, ref = kernel(**ins), tl.evaluate(J, **ins)
                runs += 1
                if not (np.array_equal(got.indptr, ref.indptr) and np.array_equal(got.indices, ref.indices)
                        and close(got.data, ref.data)):
                    bad += 1
                    print(f"a sparse Jacobian over a relation differs from the evaluator's: {src} at {(n, m)}")
    print(f"sanitized runs: {runs}, differing: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
