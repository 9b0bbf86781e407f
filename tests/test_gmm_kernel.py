"""The Gaussian mixture objective of GradBench's ``gmm`` written in the language (``examples/gmm.tl``): its
kernel and its compiled gradient against NumPy and central differences, and the gradient's C computing each
black box (``exp``) at the loop depth of the value it belongs to, as the certificate counts it: the softmax
weight of a point and a component is computed once, never again inside the loops over pairs of dimensions;
and GradBench's objective taking each point's maximum once (``tl_fmax`` counted)."""
import ctypes
import re
from pathlib import Path

import numpy as np
import pytest

import tensorlang as tl
from tensorlang.codegen import build
from tensorlang.codegen.c import load

from oracles import differenced_jacobian

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "gmm.tl"
WRT = ["alpha", "mu", "q", "L"]


def objective_numpy(x, alpha, mu, q, L):
    """The same objective in NumPy (the oracle shares no code with tensorlang)."""
    Q = np.tril(L, -1) + np.stack([np.diag(np.exp(qk)) for qk in q])
    y = np.einsum("kab,ikb->ika", Q, x[:, None, :] - mu[None, :, :])
    e = alpha[None, :] + q.sum(axis=1)[None, :] - 0.5 * np.sum(y * y, axis=2)
    return np.sum(np.log(np.sum(np.exp(e), axis=1))) - len(x) * np.log(np.sum(np.exp(alpha)))


@pytest.fixture(scope="module")
def gmm():
    e = tl.parse(EXAMPLE.read_text())
    rng = np.random.default_rng(2)
    n, m, B = 7, 5, 3
    inputs = dict(x=rng.normal(size=(n, m)), alpha=rng.normal(size=B), mu=rng.normal(size=(B, m)),
                  q=rng.normal(size=(B, m)) * 0.3, L=rng.normal(size=(B, m, m)) * 0.3)
    return e, inputs


def test_the_kernel_and_its_compiled_gradient_against_numpy(gmm):
    e, inputs = gmm
    assert tl.compile(e)(**inputs) == pytest.approx(objective_numpy(**inputs), rel=1e-12)
    adjoint = tl.adjoint(e, wrt=WRT)
    dy = [v for v in adjoint.free_vars if v not in inputs]
    grads = tl.compile(adjoint)(**inputs, **{dy[0]: 1.0})
    for k, name in enumerate(WRT):
        got = grads
        for _ in range(k):
            got = got[1]
        got = got[0] if k < len(WRT) - 1 else got

        def f(v, name=name):
            return objective_numpy(**dict(inputs, **{name: v.reshape(inputs[name].shape)}))
        want = differenced_jacobian(f, inputs[name].ravel(), 1e-6)[0].reshape(inputs[name].shape)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7, err_msg=name)


def counted(kernel, definition: str):
    """``(runner, calls)``: ``kernel``'s C with a counter added to the function whose definition opens with
    ``definition`` (a regular expression), built and loaded; ``calls.value`` is the calls made so far."""
    found = re.search(definition, kernel.source)
    assert found is not None
    counting = (kernel.source[:found.start()] + "long long tl_calls = 0;\n"
                + kernel.source[found.start():found.end()] + " tl_calls += 1;" + kernel.source[found.end():])
    runner = load(counting, kernel.meta, tl.TensorLangError)[0]
    return runner, ctypes.c_longlong.in_dll(build.load(build.build_c(counting)), "tl_calls")


def test_the_gradient_computes_each_exp_where_its_value_lives(gmm):
    """The compiled gradient's C run with ``exp`` counting its calls. Each value is computed once, over the
    variables it reads, in the forward part and again in the gradient's: ``exp(q)`` per component and
    dimension, the softmax weight per point and component, ``exp(alpha)`` per component: 2 (n B + B m + B)
    calls.  Before black boxes were hoisted out of the loops they do not read, ``exp(q)`` was evaluated per
    point too and the softmax weight again inside the loops over the triangular factor's entries: 399 calls
    here, growing as n B m^2."""
    e, inputs = gmm
    runner, calls = counted(tl.compile(tl.adjoint(e, wrt=WRT)), r"static inline real tl_f_exp\(real a0\) \{")
    dy = [v for v in tl.adjoint(e, wrt=WRT).free_vars if v not in inputs]
    runner(**inputs, **{dy[0]: 1.0})
    n, m = inputs["x"].shape
    B = len(inputs["alpha"])
    assert 0 < calls.value <= 2 * (n * B + B * m + B), calls.value


def test_gradbench_objective_takes_each_points_maximum_once():
    """GradBench's objective (``tensorlang.gradbench.gmm.MIXTURE``: the points' term, the weights' log-sum-exp
    and the Wishart prior) shifts each point's log-sum-exp by its maximum over the components, ``s[i]``, read
    both outside and inside ``sum(j:k)``.  Its C run with ``tl_fmax`` counting its calls: each point's maximum
    once, ``k`` terms and the seven of its lanes' tree, as the certificate counts it, and the weights' maximum
    once.  When fusion substituted ``s`` into the sum, the points run in blocks of lanes took their maximum
    again for every component: 5,311 calls here, against at most 760."""
    from tensorlang.gradbench.gmm import MIXTURE

    runner, calls = counted(tl.compile(tl.parse(MIXTURE)), r"static inline double tl_fmax\(double a, double b\) \{")
    rng = np.random.default_rng(4)
    n, d, k = 37, 3, 12   # (16 points and more: the sum over the points then runs in blocks of lanes)
    inputs = dict(x=rng.normal(size=(n, d)), alpha=rng.normal(size=k), mu=rng.normal(size=(k, d)),
                  q=rng.normal(size=(k, d)) * 0.3, L=np.tril(rng.normal(size=(k, d, d)) * 0.3, -1))
    gamma, m = 1.3, 2.0
    got = runner(**inputs, gamma=gamma, m=m)
    assert 0 < calls.value <= (n + 1) * (k + 8), calls.value
    prior = 0.5 * gamma ** 2 * (np.sum(np.exp(2 * inputs["q"])) + np.sum(inputs["L"] ** 2)) - m * np.sum(inputs["q"])
    assert got == pytest.approx(objective_numpy(**inputs) - prior, rel=1e-12)


@pytest.mark.parametrize("d", [3, 17])
def test_the_tools_triangles_either_way_and_their_gradient(d):
    """``tensorlang.gradbench.gmm`` unpacks the packed triangles by a product up to ``PRODUCT_UNPACKING_MAX``
    and by a gather beyond: the objective is the one whose triangles a 0/1 matrix built here from NumPy's
    ``triu_indices`` (the lower triangle's entries by columns) puts in place, and the gradient in the packed
    entries is the central difference."""
    from tensorlang.gradbench import gmm as tool

    tool.define()
    rng = np.random.default_rng(d)
    n, k = 30, 3
    P = tool.unpacking(d)
    assert P.ndim == (2 if d <= tool.PRODUCT_UNPACKING_MAX else 1)
    l = rng.normal(size=(k, d * (d - 1) // 2)) * 0.1
    cols, rows = np.triu_indices(d, 1)   # (col, row) of the lower triangle, in the packed order
    placed = np.zeros((len(cols), d * d))
    placed[np.arange(len(cols)), rows * d + cols] = 1.0
    args = (rng.normal(size=k), rng.normal(size=(k, d)), rng.normal(size=(k, d)) * 0.1, l, rng.normal(size=(n, d)),
            0.0, 1.0, P)
    assert tool.objective(*args) == pytest.approx(tool.objective(*args[:7], placed), rel=1e-13)
    gl = tool._GRADIENT(*args)[3]
    direction = rng.normal(size=l.shape)
    h = 1e-6
    moved = lambda t: tool.objective(*args[:3], l + t * direction, *args[4:])  # noqa: E731
    assert np.isclose(np.sum(gl * direction), (moved(h) - moved(-h)) / (2 * h), rtol=1e-6)
