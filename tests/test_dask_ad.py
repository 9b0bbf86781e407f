"""``tensorlang.ad`` around compiled kernels called on Dask arrays (docs/dask.md, "Gradients of Python
code"): the gradient of a function that calls a kernel on Dask inputs and returns a lazy 0-d array or a
computed number is a Dask array in the chunks of a Dask argument and a NumPy array for a NumPy one, the
kernel's adjoint running blockwise; it equals the gradient on in-memory NumPy data and central finite
differences of a NumPy-only loss (``np.convolve``: no code shared with tensorlang); SciPy's L-BFGS-B fit
on Dask data reaches the in-memory fit.  The threaded scheduler (Dask's default) runs the graphs.
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import tensorlang as tl
from tensorlang import ad, examples
from tensorlang.errors import ShapeError, TensorLangError, UnsupportedError

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
optimize = pytest.importorskip("scipy.optimize")

N, M = 40, 5
LAM = 0.3
# chunkings of x (N + M - 1 = 44 entries) and z (N = 40): one chunk, two chunks, uneven chunks (one of size 1)
CHUNKINGS = {"one": ((44,), (40,)), "two": ((22, 22), (20, 20)), "uneven": ((1, 20, 3, 17, 3), (13, 1, 26))}


@pytest.fixture(scope="module")
def loss_k():
    return tl.compile(tl.parse(examples.source("deconv_loss")))


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    return {"x": rng.standard_normal(N + M - 1), "c": rng.standard_normal(M), "z": rng.standard_normal(N)}


def lazy(data, chunking):
    cx, cz = CHUNKINGS[chunking]
    return da.from_array(data["x"], chunks=(cx,)), da.from_array(data["z"], chunks=(cz,))


# -- the oracle: NumPy only ------------------------------------------------------------------------------


def ref_loss(x, c, z):
    """The deconvolution loss of examples/deconv_loss.tl: sum_i (sum_j x[i + j] c[j] - z[i])^2."""
    r = np.convolve(np.asarray(x, dtype=float), np.asarray(c, dtype=float)[::-1], "valid") - z
    return float(r @ r)


def central(fun, p, h=1e-6):
    """Central finite differences of scalar ``fun`` at NumPy vector ``p``."""
    out = np.empty(p.size)
    for i in range(p.size):
        e = np.zeros(p.size)
        e[i] = h
        out[i] = (fun(p + e) - fun(p - e)) / (2 * h)
    return out


def close(a, b, tol=1e-5):
    scale = max(1.0, float(np.max(np.abs(b))))
    assert np.max(np.abs(np.asarray(a) - b)) <= tol * scale, (a, b)


# -- gradients in a NumPy parameter: NumPy arrays --------------------------------------------------------


@pytest.mark.parametrize("chunking, form", [(chunking, "lazy") for chunking in CHUNKINGS]
                         + [("uneven", form) for form in ("float", "compute", "compute_sync")])
def test_the_gradient_in_a_numpy_parameter_is_numpy(loss_k, data, chunking, form):
    xd, zd = lazy(data, chunking)
    value = {"lazy": lambda y: y, "float": float, "compute": lambda y: y.compute(),
             "compute_sync": lambda y: y.compute(scheduler="sync")}[form]

    def f(c):
        return value(loss_k(x=xd, c=c, z=zd))

    g = ad.grad(f)(data["c"])
    assert type(g) is np.ndarray and g.shape == (M,)
    in_memory = ad.grad(lambda c: loss_k(x=data["x"], c=c, z=data["z"]))(data["c"])
    close(g, in_memory, 1e-12)
    close(g, central(lambda c: ref_loss(data["x"], c, data["z"]), data["c"]))


ARITHMETIC = {  # name -> (f of the kernel's value y and the parameter c, the same of the oracle's)
    "scaled_plus_ridge": lambda y, c: 0.5 * y + LAM * np.sum(c ** 2),
    "squared": lambda y, c: y ** 2 / 100.0,
    "quotient": lambda y, c: y / (1.0 + np.sum(c ** 2)),
    "negated_difference": lambda y, c: np.sum(c) - y,
    "power_of_lazy": lambda y, c: (y + 1.0) ** 0.5,
}


@pytest.mark.parametrize("name", ARITHMETIC)
def test_arithmetic_around_the_kernel_differentiates(loss_k, data, name):
    xd, zd = lazy(data, "uneven")
    h = ARITHMETIC[name]

    def f(c):
        return h(loss_k(x=xd, c=c, z=zd), c)

    value, g = ad.value_and_grad(f)(data["c"])
    assert type(g) is np.ndarray
    close(float(value), h(ref_loss(data["x"], data["c"], data["z"]), data["c"]), 1e-10)
    close(g, central(lambda c: h(ref_loss(data["x"], c, data["z"]), c), data["c"]))


# -- gradients in a Dask argument: Dask arrays in its chunks ---------------------------------------------


@pytest.mark.parametrize("chunking", CHUNKINGS)
def test_the_gradient_in_a_dask_argument_is_dask_in_its_chunks(loss_k, data, chunking):
    xd, zd = lazy(data, chunking)

    def f(x):
        return 2.0 * loss_k(x=x, c=data["c"], z=zd) + LAM * np.sum(x * x)

    g = ad.grad(f)(xd)
    assert isinstance(g, da.Array) and g.chunks == xd.chunks
    got = g.compute()
    close(got, central(lambda x: 2.0 * ref_loss(x, data["c"], data["z"]) + LAM * x @ x, data["x"]))
    in_memory = ad.grad(lambda x: 2.0 * loss_k(x=x, c=data["c"], z=data["z"]) + LAM * np.sum(x * x))(data["x"])
    close(got, in_memory, 1e-12)


def test_gradients_in_a_dask_and_a_numpy_argument_together(loss_k, data):
    xd, zd = lazy(data, "uneven")
    gx, gc = ad.grad(lambda x, c: loss_k(x=x, c=c, z=zd), argnums=(0, 1))(xd, data["c"])
    assert isinstance(gx, da.Array) and gx.chunks == xd.chunks and type(gc) is np.ndarray
    close(gx.compute(), central(lambda x: ref_loss(x, data["c"], data["z"]), data["x"]))
    close(gc, central(lambda c: ref_loss(data["x"], c, data["z"]), data["c"]))


def test_a_numpy_argument_made_a_dask_array_inside_the_function(loss_k, data):
    _, zd = lazy(data, "two")

    def f(x):
        return float(loss_k(x=da.from_array(x, chunks=7), c=data["c"], z=zd))

    g = ad.grad(f)(data["x"])
    assert type(g) is np.ndarray
    close(g, central(lambda x: ref_loss(x, data["c"], data["z"]), data["x"]))


def test_a_scalar_times_a_dask_array_sums_its_gradient(loss_k, data):
    xd, zd = lazy(data, "uneven")
    g = ad.grad(lambda s: loss_k(x=s * xd, c=data["c"], z=zd))(1.5)
    close(g, central(lambda s: ref_loss(s[0] * data["x"], data["c"], data["z"]), np.array([1.5])))


# -- SciPy: the fit on Dask data reaches the in-memory fit -----------------------------------------------


def test_lbfgs_with_dask_data_and_numpy_parameters_fits_as_in_memory(loss_k, data):
    rng = np.random.default_rng(3)
    c_true = rng.standard_normal(M)
    z = np.convolve(data["x"], c_true[::-1], "valid") + 0.01 * rng.standard_normal(N)
    xd, zd = da.from_array(data["x"], chunks=(20, 24)), da.from_array(z, chunks=(13, 27))

    def fun(c, x, z):
        return 0.5 * loss_k(x=x, c=c, z=z) + 1e-3 * np.sum(c ** 2)

    on_dask = optimize.minimize(fun, np.zeros(M), args=(xd, zd), jac=ad.grad(fun), method="L-BFGS-B")
    in_memory = optimize.minimize(fun, np.zeros(M), args=(data["x"], z), jac=ad.grad(fun), method="L-BFGS-B")
    assert on_dask.success and in_memory.success
    close(on_dask.x, in_memory.x, 1e-8)
    x = data["x"]   # the normal equations (W^T W + 2e-3 I) c = W^T z of the convolution matrix W[i, j] = x[i + j]
    gram = np.array([[x[a:a + N] @ x[b:b + N] for b in range(M)] for a in range(M)])
    rhs = np.array([x[a:a + N] @ z for a in range(M)])
    close(on_dask.x, np.linalg.solve(gram + 2e-3 * np.eye(M), rhs), 1e-4)


def test_lbfgs_in_a_dask_argument_fits_as_in_memory(loss_k, data):
    z = data["z"]
    zd = da.from_array(z, chunks=(13, 27))

    def fun_dask(x):   # the argument made a Dask array: its gradient comes back as NumPy, like x
        return 0.5 * float(loss_k(x=da.from_array(x, chunks=(1, 43)), c=data["c"], z=zd)) + LAM * np.sum(x ** 2)

    def fun_numpy(x):
        return 0.5 * loss_k(x=x, c=data["c"], z=z) + LAM * np.sum(x ** 2)

    x0 = np.zeros(N + M - 1)
    on_dask = optimize.minimize(ad.value_and_grad(fun_dask), x0, jac=True, method="L-BFGS-B")
    in_memory = optimize.minimize(ad.value_and_grad(fun_numpy), x0, jac=True, method="L-BFGS-B")
    assert on_dask.success and in_memory.success
    close(on_dask.x, in_memory.x, 1e-6)
    assert np.linalg.norm(central(lambda x: 0.5 * ref_loss(x, data["c"], z) + LAM * x @ x, on_dask.x)) < 1e-3


# -- what is refused, by name ----------------------------------------------------------------------------


def test_a_lazy_output_that_is_not_a_scalar_is_named(loss_k, data):
    xd, _ = lazy(data, "two")
    with pytest.raises(TensorLangError, match=r"returned a Dask array of shape \(44,\) and dtype float64"):
        ad.grad(lambda s: xd * s)(1.0)


def test_dask_functions_without_rules_and_lazy_matmul_are_refused_by_name(data):
    xd, _ = lazy(data, "two")
    with pytest.raises(UnsupportedError, match=r"Register a rule with `@ad\.rule\(dask\.array\.core\.Array\.sum\)`"):
        ad.grad(lambda s: (xd * s).sum())(1.0)
    x5 = da.from_array(data["x"][:M], chunks=2)
    with pytest.raises(UnsupportedError, match=r"Array\.__matmul__"):
        ad.grad(lambda c: float(x5 @ c))(data["c"])


def test_compute_of_a_collection_that_is_not_an_array_is_refused():
    two = dask.delayed(np.float64(2.0))
    with pytest.raises(UnsupportedError, match=r"\.compute\(\) of a Dask array, not of a Delayed"):
        ad.grad(lambda s: s * two.compute())(1.0)


def test_a_dask_array_of_unknown_shape_is_refused_by_name():
    x = da.from_array(np.arange(10.0), chunks=3)
    masked = x[x > 2]
    with pytest.raises(ShapeError, match=r"unknown shape \(nan,\).*x\.compute_chunk_sizes\(\)"):
        ad.grad(lambda s: np.sum(masked * s))(2.0)


def test_importing_tensorlang_ad_does_not_import_dask():
    code = ("import sys, numpy as np, tensorlang.ad as ad; ad.grad(lambda x: np.sum(x * x))(np.ones(2)); "
            "print(any(m.split('.')[0] in ('dask', 'distributed') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
