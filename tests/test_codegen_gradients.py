"""Compiled gradients of convolutions and stencils: boundary splitting (edge slabs and one interior slab
whose reductions have constant bounds), against the reference evaluator at the sizes where the slabs
appear, vanish and overlap.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import tensorlang as tl
from tensorlang.codegen import compile as tl_compile

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

CONV2D = """
x : [n + m - 1][n + m - 1]R
w : [m][m]R
z : [n][n]R
let f = gen(i:n, j:n) sum(a:m, b:m) x[i + a, j + b] * w[a, b] in
sum(i:n, j:n) (f[i, j] - z[i, j]) * (f[i, j] - z[i, j])
"""


def close(got, ref) -> bool:
    if isinstance(ref, tuple):
        return all(close(a, b) for a, b in zip(got, ref))
    got, ref = np.asarray(got, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    scale = max(1.0, float(np.abs(ref).max())) if ref.size else 1.0
    return got.shape == ref.shape and np.allclose(got, ref, rtol=1e-10, atol=1e-10 * scale)


def _output_part(k) -> str:
    """The C of the kernel's last statement (the gradient's output)."""
    body = k.source[k.source.index("void tl_kernel"):]
    return body[body.rindex("/* output"):]


M = 5


@pytest.mark.parametrize("n", [0, 1, M - 1, M, M + 1, 1000])
def test_deconvolution_gradient_in_x_is_split_into_edges_and_interior(n):
    """dx[k] = sum(i:m) [k < i + n and i <= k] * dX[k - i] * c[i]: the sum runs over all of c for
    m - 1 <= k < n; there the loop is lane-blocked with bounds 0 .. m, the edges keep max/min bounds."""
    e = tl.parse((EXAMPLES / "deconv_loss.tl").read_text())
    r = np.random.default_rng(n)
    ins = {"x": r.standard_normal(n + M - 1), "c": r.standard_normal(M), "z": r.standard_normal(n)}
    for wrt in ("x", ["c", "x"]):
        g = tl.grad(e, wrt)
        k = tl_compile(g)
        assert close(k(**ins), tl.evaluate(g, **ins))
    out = _output_part(tl_compile(tl.grad(e, "x")))
    assert "tl_lacc" in out  # the interior is lane-blocked
    assert re.search(r"for \(int64_t (tl_r\d+) = 0; \1 < m; \1 \+= 1\)", out)  # with constant bounds
    assert "tl_min" in out or "tl_max" in out  # the edges keep their bounds


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 12])
def test_two_dimensional_convolution_gradients(n):
    """The image gradient of a 2-D convolution loss is split in both dimensions; the kernel's gradient
    and both at once agree with the evaluator too."""
    m = 3
    e = tl.parse(CONV2D)
    r = np.random.default_rng(n)
    ins = {"x": r.standard_normal((n + m - 1, n + m - 1)), "w": r.standard_normal((m, m)),
           "z": r.standard_normal((n, n))}
    for wrt in ("x", "w", ["x", "w"]):
        g = tl.grad(e, wrt)
        assert close(tl_compile(g)(**ins), tl.evaluate(g, **ins)), wrt
    assert "tl_lacc" in _output_part(tl_compile(tl.grad(e, "x")))


@pytest.mark.parametrize("n", [0, 1, 2, 3, 50])
def test_stencil_adjoint_edges(n):
    """A 1-D three-point stencil's gradient: guards on the outer index only near both ends."""
    e = tl.parse("u : [n + 2]R\nsum(i:n) (u[i] - 2 * u[i + 1] + u[i + 2]) * (u[i] - 2 * u[i + 1] + u[i + 2])")
    g = tl.grad(e, "u")
    u = np.random.default_rng(n).standard_normal(n + 2)
    assert close(tl_compile(g)(u=u), tl.evaluate(g, u=u))


def test_reduction_guarded_by_the_outer_index_on_one_side():
    """``sum(j:m) [j <= i] * y[j]`` (a prefix sum): the interior is i >= m - 1, the edge i < m - 1; a
    guard whose interior is empty (``j < i - m``) leaves only edges."""
    for body, sizes in (("[j <= i] * y[j] * x[i]", [(0, 4), (3, 4), (4, 4), (9, 4), (40, 7)]),
                        ("[j + m < i] * y[j] * x[i]", [(0, 3), (5, 3), (20, 3)])):
        e = tl.parse(f"x : [n]R\ny : [m]R\ngen(i:n) sum(j:m) {body}")
        k = tl_compile(e)
        for n, m in sizes:
            r = np.random.default_rng(n + m)
            ins = {"x": r.standard_normal(n), "y": r.standard_normal(m)}
            assert close(k(**ins), tl.evaluate(e, **ins)), (body, n, m)


# -- reductions into small targets, interchanged and summed in lanes ----------------------------------


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 7, 8, 9, 17, 40])
def test_kernel_gradient_of_a_two_dimensional_convolution_in_lanes(n):
    """dw[a, b] = sum(i:n, j:n) dX[i, j] * x[i + a, j + b] into a target of m^2 <= 256 elements: the image
    rows stream once (``for i: for a, b: for j``), each element's terms in 8 lanes over ``j``, combined
    by a fixed tree; the sizes where there is no row, no full block of lanes, one, and a remainder (the
    form is chosen at run time when the sum is at least 4 times longer than the target)."""
    e = tl.parse(CONV2D)
    for m in (2, 5):
        r = np.random.default_rng(n + m)
        ins = {"x": r.standard_normal((n + m - 1, n + m - 1)), "w": r.standard_normal((m, m)),
               "z": r.standard_normal((n, n))}
        for wrt in ("w", ["x", "w"]):
            g = tl.grad(e, wrt)
            k = tl_compile(g)
            assert close(k(**ins), tl.evaluate(g, **ins)), (m, wrt)
    assert "tl_tacc" in _output_part(k)  # the lanes


@pytest.mark.parametrize("n", [0, 1, M - 1, M, M + 1, 8, 9, 2 * 2048 + 9])
def test_deconvolution_gradient_in_a_short_kernel_in_tiles_of_lanes(n):
    """dc[k] = sum(i:n) dX[i] * x[i + k] with m = 3: the sum over ``i`` cut into tiles of ``REDUCE_TILE``
    points, each read once for the 3 elements; several tiles and a last partial one at 2 * 2048 + 9."""
    m = 3
    e = tl.parse((EXAMPLES / "deconv_loss.tl").read_text())
    r = np.random.default_rng(n)
    ins = {"x": r.standard_normal(n + m - 1), "c": r.standard_normal(m), "z": r.standard_normal(n)}
    g = tl.grad(e, "c")
    k = tl_compile(g)
    assert "tl_tacc" in _output_part(k) and "2048 * tl_x" in _output_part(k)  # lanes, tiles
    assert close(k(**ins), tl.evaluate(g, **ins))


_CONV_THREADS_SCRIPT = """
import hashlib
import sys
import numpy as np
import tensorlang as tl
n, m = 301, 5  # enough work for the image gradient and the forward to run on several threads
r = np.random.default_rng(5)
x, w, z = r.standard_normal((n + m - 1, n + m - 1)), r.standard_normal((m, m)), r.standard_normal((n, n))
e = tl.parse(open(sys.argv[1]).read())
dx, dw = tl.compile(tl.grad(e, ["x", "w"]))(x=x, w=w, z=z)
print(hashlib.sha256(dx.tobytes()).hexdigest(), dw.tobytes().hex())
"""


def test_kernel_gradient_in_lanes_is_the_same_with_any_number_of_threads(tmp_path):
    """The order of the lanes' additions depends on the sizes only: the same bits with 1 and 2 threads."""
    (tmp_path / "conv.tl").write_text(CONV2D)
    assert _same_with_1_and_2_threads(tmp_path, _CONV_THREADS_SCRIPT, tmp_path / "conv.tl")


def _same_with_1_and_2_threads(tmp_path, script_text: str, *args) -> bool:
    """Whether the last line a script prints is the same with 1 and with 2 OpenMP threads."""
    import os
    import subprocess
    import sys

    script = tmp_path / "threads.py"
    script.write_text(script_text)
    results = []
    for threads in ("1", "2"):
        env = {**os.environ, "OMP_NUM_THREADS": threads, "OMP_DYNAMIC": "false"}
        r = subprocess.run([sys.executable, str(script), *map(str, args)], env=env, capture_output=True, text=True,
                           timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        results.append(r.stdout.strip().splitlines()[-1])
    return results[0] == results[1]


# -- reassociated reductions --------------------------------------------------------------------------

_THREADS_SCRIPT = """
import sys
import numpy as np
import tensorlang as tl
n = 2 ** 21 + 3  # past the work at which a loop runs on several threads, with a remainder
r = np.random.default_rng(7)
x, y = r.standard_normal(n), r.standard_normal(n)
c, z = r.standard_normal(16), r.standard_normal(n - 15)
deconv = tl.parse(open(sys.argv[1]).read())
out = [tl.compile(tl.parse("x : [n]R\\nsum(i:n) exp(x[i])"))(x=x),
       tl.compile(tl.parse("x : [n]R\\ny : [n]R\\nsum(i:n) x[i] * y[i]"))(x=x, y=y),
       tl.compile(deconv)(x=x, c=c, z=z)]
out += list(tl.compile(tl.grad(deconv, "c"))(x=x, c=c, z=z))  # 16 sums of length n, in chunks
dc, dx = tl.compile(tl.grad(deconv, ["c", "x"]))(x=x, c=c, z=z)  # a group: dX, dc and dx in chunks
out += list(dc) + [float(np.frombuffer(dx.tobytes(), dtype=np.int64).sum() % 1000003)]
a = r.standard_normal((1100, 2003))  # sums over rows, past the work at which they run on several threads
sum2d = tl.compile(tl.parse("x : [n][k]R\\nsum(i:n, j:k) x[i, j] * x[i, j]"))
out += [sum2d(x=a), sum2d(x=np.stack([x, y], axis=1))]  # long rows; many short rows
out.append(tl.compile(tl.parse("x : [n]R\\ny : [n]R\\nsum(i:n, j:n) [j <= i] * x[i] * y[j]"))(x=x[:2100], y=y[:2100]))
conv2d = tl.parse(CONV2D)
out.append(tl.compile(conv2d)(x=a[:602, :602], w=c[:9].reshape(3, 3), z=a[500:1100, 700:1300]))
print(repr([float(v) for v in out]))
"""
_CONV2D = """x : [n + m - 1][n + m - 1]R
w : [m][m]R
z : [n][n]R
let f = gen(i:n, j:n) sum(a:m, b:m) x[i + a, j + b] * w[a, b] in
sum(i:n, j:n) (f[i, j] - z[i, j]) * (f[i, j] - z[i, j])"""
_THREADS_SCRIPT = f"CONV2D = {_CONV2D!r}\n" + _THREADS_SCRIPT


def test_long_sums_are_the_same_with_any_number_of_threads(tmp_path):
    """A long sum is cut into chunks by its length only (a sum over several indices by rows of its first
    one), each chunk summed in lanes (the terms of each innermost loop, lane blocking running the
    reductions they hold) and the chunks added in order: the same bits with 1 and 2 threads, and within
    rounding of the evaluator."""
    assert _same_with_1_and_2_threads(tmp_path, _THREADS_SCRIPT, EXAMPLES / "deconv_loss.tl")


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 4095, 4096, 4097, 40000])
def test_reassociated_sums_agree_with_the_evaluator(n):
    """Chunks, full lane blocks and remainders at the sizes where each appears."""
    e = tl.parse("x : [n]R\ny : [n]R\nsum(i:n) exp(x[i]) * y[i]")
    ins = {"x": np.random.default_rng(n).standard_normal(n), "y": np.random.default_rng(n + 1).standard_normal(n)}
    k = tl_compile(e)
    assert "% 8]" in k.source  # the reassociated form
    assert close(k(**ins), tl.evaluate(e, **ins))


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 17, 40])
@pytest.mark.parametrize("src", ["x : [n][k]R\nsum(i:n, j:k) x[i, j] * x[i, j]",
                                 "x : [n][k]R\nsum(i:n, j:k) [j <= i] * exp(x[i, j])",
                                 "x : [n][k]R\nsum(i:n, j:k) [i + j < k] * x[i, j] * x[i, j]",
                                 "x : [n][k]R\ny : [n]R\nsum(i:n) y[i] * sum(j:k) x[i, j]",
                                 _CONV2D.replace("n + m - 1][n + m - 1", "n + m - 1][k + m - 1")
                                 .replace("[n][n]R", "[n][k]R").replace("gen(i:n, j:n)", "gen(i:n, j:k)")
                                 .replace("sum(i:n, j:n)", "sum(i:n, j:k)")])
def test_sums_over_several_indices_are_reassociated_by_rows(src, n):
    """A scalar sum over a nest of loops runs in chunks of rows, each innermost loop's terms into lanes
    (with lane-blocked convolutions inside, and inner bounds that depend on the row): no remainder, one
    block, a remainder, and blocks and rows of both kinds, against the evaluator."""
    e = tl.parse(src)
    r = np.random.default_rng(n)
    k = n + 3
    ins = {"x": r.standard_normal((n, k)), "y": r.standard_normal(n)} if "y :" in src else {"x": r.standard_normal((n, k))}
    if "w :" in src:
        ins = {"x": r.standard_normal((n + 2, k + 2)), "w": r.standard_normal((3, 3)), "z": r.standard_normal((n, k))}
    kernel = tl_compile(e)
    assert "tl_part" in kernel.source and "% 8]" in kernel.source  # chunks of rows, terms into lanes
    assert close(kernel(**ins), tl.evaluate(e, **ins))


# -- small targets of long reductions, in chunks --------------------------------------------------------


@pytest.mark.parametrize("m", [5, 16, 17])
@pytest.mark.parametrize("n", [0, 1, 4, 5, 6, 4095, 4096, 4097, 3 * 4096 + 5])
def test_small_target_reductions_run_in_chunks(n, m):
    """dc[k] = sum(i:n) dX[i] * x[i + k] (the deconvolution's gradient in c) for m >= 8: chunks of i,
    each element summed in 4 interleaved ways (full lane blocks of k and the k left over), the chunks
    added in order (m = 5: the interchanged form, except beside dX); with the residual dX computed
    chunk by chunk beside it (and beside dx, the gradient in x): at the sizes where chunks, ways,
    blocks, remainders and the windows of dX appear and vanish, against the evaluator."""
    e = tl.parse((EXAMPLES / "deconv_loss.tl").read_text())
    r = np.random.default_rng(n + m)
    ins = {"x": r.standard_normal(n + m - 1), "c": r.standard_normal(m), "z": r.standard_normal(n)}
    for wrt in ("c", "x", ["c", "x"]):
        g = tl.grad(e, wrt)
        k = tl_compile(g)
        assert "in chunks" in k.source and ("tl_part" in k.source or wrt == "x")
        assert close(k(**ins), tl.evaluate(g, **ins)), wrt


def test_chunked_reductions_are_the_same_bits_with_and_without_lane_blocking():
    """The lane-blocked elements and the ones left over add their terms in the same order."""
    from tensorlang.codegen.c import CEmitter
    from tensorlang.codegen.schedule import BLOCK_LANES

    e = tl.grad(tl.parse((EXAMPLES / "deconv_loss.tl").read_text()), "c")
    r = np.random.default_rng(3)
    n, m = 20000, 19
    ins = {"x": r.standard_normal(n + m - 1), "c": r.standard_normal(m), "z": r.standard_normal(n)}
    blocked = tl_compile(e)(**ins)
    try:
        CEmitter.lanes = 0
        plain = tl_compile(e)
    finally:
        CEmitter.lanes = BLOCK_LANES
    assert "tl_lacc" not in plain.source
    assert np.array_equal(plain(**ins), blocked)


GROUPS = {  # a temporary read by gathers at a window of its index, and by a reduction into a small target
    # (name: source, inputs, the input to differentiate in when the program is a scalar)
    "conv read twice": ("x : [n + 2]R\nc : [3]R\nlet f = gen(i:n) sum(j:3) x[i + j] * c[j] in "
                        "gen(k:n) sum(j:3) [j <= k] * f[k - j] * exp(f[k])", ["x", "c"], None),
    "tanh deconvolution": ("x : [n + 2]R\nc : [3]R\nlet f = gen(i:n) tanh(sum(j:3) x[i + j] * c[j]) in "
                           "sum(i:n) f[i] * f[i] * x[i]", ["x", "c"], ["x", "c"]),
    "forward window": ("x : [n + 4]R\nlet f = gen(i:n + 4) sum(j:2) tanh(x[i]) * x[i] in "
                       "(gen(k:n) sum(j:5) f[k + j] * f[k + j], gen(g:4) sum(i:n) f[i + g] * x[i])", ["x"], None),
}


@pytest.mark.parametrize("name", sorted(GROUPS))
@pytest.mark.parametrize("n", [0, 1, 2, 3, 4095, 4096, 4097, 2 * 4096 + 3])
def test_temporaries_computed_in_chunks_with_their_readers(name, n):
    """Programs whose temporary is read in windows (behind and ahead of the chunk) by gathers and by a
    chunked reduction: the group's result (and its gradient's) equals the evaluator's."""
    src, inputs, wrt = GROUPS[name]
    e = tl.parse(src)
    r = np.random.default_rng(n)
    sizes = {"x": n + (2 if "n + 2]R" in src else 4), "c": 3}
    ins = {a: r.standard_normal(sizes[a]) for a in inputs}
    for prog in (e,) if wrt is None else (e, tl.grad(e, wrt)):
        k = tl_compile(prog)
        assert close(k(**ins), tl.evaluate(prog, **ins)), (name, n)


def test_a_group_whose_chunks_are_too_long_runs_statement_by_statement():
    """n = 1.1e6, m = 256: the reduction's 32 chunks are longer than the group's buffer, so dX, dc and
    dx run one after another; against NumPy's correlations."""
    e = tl.grad(tl.parse((EXAMPLES / "deconv_loss.tl").read_text()), ["c", "x"])
    r = np.random.default_rng(5)
    n, m = 1_100_000, 256
    x, c, z = r.standard_normal(n + m - 1), r.standard_normal(m), r.standard_normal(n)
    dX = 2 * (np.correlate(x, c, "valid") - z)
    dc, dx = tl_compile(e)(x=x, c=c, z=z)
    assert close(dc, np.correlate(x, dX, "valid")) and close(dx, np.convolve(dX, c, "full"))
