"""The paper's programs of section 2 (examples/*.tl): each parses, evaluates like a NumPy reference,
costs what the paper says, and survives printing."""
from pathlib import Path

import numpy as np
import pytest

import tensorlang as tl

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
rng = np.random.default_rng(0)


def load(name):
    return tl.parse((EXAMPLES / f"{name}.tl").read_text(), filename=f"{name}.tl")


def correlate(x, c):
    n = len(x) - len(c) + 1
    return np.array([x[i:i + len(c)] @ c for i in range(n)])


def test_conv():
    x, c = rng.normal(size=12), rng.normal(size=4)
    np.testing.assert_allclose(load("conv")(x=x, c=c), correlate(x, c))
    assert tl.cost(load("conv"), n=9, m=4) == 9 * (2 * 4 - 1)


def test_deconv_loss():
    x, c, z = rng.normal(size=12), rng.normal(size=4), rng.normal(size=9)
    expected = np.sum((correlate(x, c) - z) ** 2)
    assert load("deconv_loss")(x=x, c=c, z=z) == pytest.approx(expected)


def test_trace_and_eye():
    A = rng.normal(size=(5, 5))
    assert load("trace")(A=A) == pytest.approx(np.trace(A))
    np.testing.assert_array_equal(load("eye")(x=2.5, n=4), 2.5 * np.eye(4))
    assert load("trace_eye")(x=1.5, n=6) == pytest.approx(9.0)
    assert tl.cost(load("trace"), n=7) == 6


def test_diag_dot():
    x = rng.normal(size=6)
    A = np.diag(x)
    assert load("diag_dot")(x=x) == pytest.approx(A[:, 0] @ A[0, :])


def test_skip_x1():
    x = rng.normal(size=7)
    assert load("skip_x1")(x=x) == pytest.approx(x.sum() - x[1])
    # n - 1 summands where i != 1: n - 2 additions
    assert tl.cost(load("skip_x1"), n=7) == 5


def test_batched_conv_grad():
    B, n, m = 3, 8, 4
    x, z, w = rng.normal(size=(B, n + m - 1)), rng.normal(size=(B, n)), rng.normal(size=m)
    expected = np.zeros(m)
    for k in range(B):
        dy = 2 * (correlate(x[k], w) - z[k])
        expected += np.array([x[k, j:j + n] @ dy for j in range(m)])
    np.testing.assert_allclose(load("batched_conv_grad")(x=x, z=z, w=w), expected)


def test_linear_zw():
    z, w = load("linear_zw")(x=1.5, y=-2.0)
    a = 2 * 1.5 + 3 * -2.0
    b = 4 * 1.5 + a
    assert (z, w) == pytest.approx((8 * 1.5, 5 * a + 6 * b))


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.tl")), ids=lambda p: p.stem)
def test_examples_round_trip(path):
    e = tl.parse(path.read_text())
    assert tl.parse(str(e)) == e


def test_newton_pde_converges_with_the_sparse_hessian():
    from examples import newton_pde

    out = newton_pde.main(n=48, verbose=False)
    assert out["residual"] < 1e-10 and out["steps"] <= 8
    # quadratic convergence: each of the last steps squares the residual, roughly
    assert out["history"][-1] < 1e-3 * out["history"][-2]
