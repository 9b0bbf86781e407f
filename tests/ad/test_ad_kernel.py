"""A compiled tensorlang Kernel called inside a Python function is a tensorlang.ad primitive whose
pullback is its compiled adjoint (tl.adjoint + tl.compile), built on first use; a loop body compiled as a
kernel (the LSTM cell of examples/lstm_cell.tl) is passed its arrays without copies."""
import types
from pathlib import Path

import numpy as np
import pytest

import tensorlang as tl
from tensorlang import ad
from tensorlang.codegen import compile as tl_compile
from tensorlang.derive.api import grad

EXAMPLES = Path(__file__).resolve().parent.parent.parent / "examples"


@pytest.fixture(scope="module")
def conv():
    e = tl.parse((EXAMPLES / "deconv_loss.tl").read_text())
    return e, tl_compile(e)


def test_gradient_through_the_conv_loss_kernel(conv, fd):
    e, k = conv
    rng = np.random.default_rng(0)
    n, m = 30, 4
    x, c, z = rng.standard_normal(n + m - 1), rng.standard_normal(m), rng.standard_normal(n)

    def f(c, x):
        return 0.5 * k(x=x, c=c, z=z) + np.sum(np.sin(c))

    assert k.adjoint_kernels is None and k.value_grad_kernels is None  # nothing built before a gradient
    gc, gx = ad.gradient(f, c, x)
    # against the reference evaluator of tl.grad
    assert np.allclose(gc, 0.5 * tl.evaluate(grad(e, "c"), x=x, c=c, z=z) + np.cos(c), rtol=1e-10)
    assert np.allclose(gx, 0.5 * tl.evaluate(grad(e, "x"), x=x, c=c, z=z), rtol=1e-10)
    # against central finite differences
    assert np.allclose(gc, fd(f, (c, x), 0), rtol=1e-6, atol=1e-6)
    assert np.allclose(gx, fd(f, (c, x), 1), rtol=1e-6, atol=1e-6)


def test_the_adjoint_kernel_is_built_once_in_the_inputs_whose_gradients_are_read(conv, monkeypatch):
    """``x`` is not among the arguments differentiated: no derivative flows into it, so the adjoint built is
    the one in ``c`` and ``z`` alone (``runtime.Jkw_read``), once for every call and size: for this scalar
    kernel, the kernel of its value and gradient (``Kernel.value_and_grad``), which the forward pass calls
    in place of the kernel.  The kernel is a module global, as a user's model usually is: a call of one is
    assumed to write nothing (the entries check that the name is still bound to it); a closure's kernel gets
    the adjoint in every input."""
    global CONV
    e, k = conv
    CONV = k
    from tensorlang.codegen.kernel import DERIVATIVES

    builds = []
    real = DERIVATIVES.value_and_grad
    monkeypatch.setattr(DERIVATIVES, "value_and_grad", lambda *a, **kw: builds.append(a[1]) or real(*a, **kw))
    k.adjoint_kernels = k.value_grad_kernels = None
    rng = np.random.default_rng(1)

    def f(c, z, x):
        return CONV(x=x, c=c, z=z) ** 2

    k(x=np.arange(12.0), c=np.ones(4), z=np.ones(9))
    assert k.value_grad_kernels is None and not builds  # calling the kernel builds nothing
    for n in (9, 9, 5):  # new inputs, new sizes: the same compiled adjoint
        c, z, x = rng.standard_normal(4), rng.standard_normal(n), rng.standard_normal(n + 3)
        gc, gz = ad.grad(f, argnums=(0, 1))(c, z, x)
        value = tl.evaluate(e, x=x, c=c, z=z)
        assert np.allclose(gc, 2 * value * tl.evaluate(grad(e, "c"), x=x, c=c, z=z), rtol=1e-10)
        assert np.allclose(gz, 2 * value * tl.evaluate(grad(e, "z"), x=x, c=c, z=z), rtol=1e-10)
    assert builds == [["c", "z"]] and list(k.value_grad_kernels) == [("c", "z")] and k.adjoint_kernels is None
    assert "tl_kernel" in k.value_and_grad(("c", "z")).source and k.value_and_grad(("c", "z")).wrt == ["c", "z"]
    # z left out too: the adjoint in c alone
    gc_only = ad.grad(f, argnums=0)(c, z, x)
    assert np.allclose(gc_only, gc, rtol=1e-12)
    assert builds == [["c", "z"], ["c"]]

    def g(c, z, x):   # (k is a closure's: what it is bound to when g runs is not checked)
        return k(x=x, c=c, z=z) ** 2

    assert np.allclose(ad.grad(g, argnums=0)(c, z, x), gc, rtol=1e-12)
    assert builds == [["c", "z"], ["c"], ["x", "c", "z"]]


def test_array_outputs_pair_inputs_and_relations():
    sp = pytest.importorskip("scipy.sparse")
    e = tl.parse("gen(i:n) (sum(j:m) [E(i, j)] * A[i, j] * p.0[j]) + p.1", E="rel[n, m]", A="[n][m]R",
                 p="([m]R, R)")
    k = tl_compile(e)
    rng = np.random.default_rng(2)
    mask = rng.random((5, 4)) < 0.5
    E = sp.csr_matrix(mask)
    A, y, s = rng.standard_normal((5, 4)), rng.standard_normal(4), 0.7
    w = rng.standard_normal(5)

    def f(A, y, s):
        return np.dot(w, np.tanh(k(E=E, A=A, p=(y, s))))

    gA, gy, gs = ad.gradient(f, A, y, s)
    u = w * (1 - np.tanh((mask * A) @ y + s) ** 2)
    assert np.allclose(gA, np.outer(u, y) * mask, rtol=1e-10)
    assert np.allclose(gy, (mask * A).T @ u, rtol=1e-10)
    assert gs == pytest.approx(u.sum(), rel=1e-10)
    # the relation (and a size passed by name) get no gradient
    y_out, back = k.__ad_pullback__(E=E, A=A, p=(y, s), n=5)
    grads = back(np.ones(5))
    assert grads[0] is None and grads[3] is None
    assert np.allclose(grads[1], np.outer(np.ones(5), y) * mask)


def test_kernel_inside_a_loop_and_a_branch(conv, fd):
    e, k = conv
    rng = np.random.default_rng(3)
    x, z = rng.standard_normal(20), rng.standard_normal(17)

    def f(c):
        total = 0.0
        for step in range(3):
            if step % 2 == 0:
                total = total + k(x=x * (step + 1), c=c, z=z)
            else:
                total = total - 0.1 * k(x=x, c=c * 2, z=z)
        return total

    c = rng.standard_normal(4)
    (g,) = ad.gradient(f, c)
    assert np.allclose(g, fd(f, (c,), 0), rtol=1e-6, atol=1e-5)


def test_positional_arguments_are_refused(conv):
    _, k = conv
    with pytest.raises(tl.TensorLangError, match="by name"):
        k.__ad_pullback__(np.zeros(3))
    with pytest.raises(tl.TensorLangError, match=r"by name.*kernel\(x=\.\.\., c=\.\.\."):
        k(np.zeros(3))


@pytest.fixture(scope="module")
def around_a_kernel():
    """A function around a compiled kernel, and the same function in NumPy alone (the oracle)."""
    kernel = tl.compile(tl.parse("x : [n]R\na : [n]R\ngen(i:n) [0 < i] * x[i] * x[i - 1] * a[i] + sin(x[i])"))

    def f(x, a):
        y = kernel(x=x, a=a)
        return np.sum(y * y) + np.sum(np.exp(x[:-1]) * y[1:])

    def f_numpy(x, a):
        y = np.sin(x) + np.concatenate([[0.0], x[1:] * x[:-1] * a[1:]])
        return np.sum(y * y) + np.sum(np.exp(x[:-1]) * y[1:])
    return f, f_numpy


def test_second_derivatives_by_forward_over_reverse_go_through_a_kernel(around_a_kernel):
    """ad.hessian (dense and sparse), ad.hvp and ad.jacobian(ad.grad(f)) of a function around a compiled
    kernel: the tangent of the kernel's pullback is the compiled derivative of its adjoint.  The oracle is the
    same function written in NumPy, its Hessian by nested central differences (no tensorlang code)."""
    from oracles import differenced_jacobian

    f, f_numpy = around_a_kernel

    rng = np.random.default_rng(0)
    x, a = rng.normal(size=6), rng.normal(size=6)
    in_x = differenced_jacobian(lambda x: differenced_jacobian(lambda x: f_numpy(x, a), x, 1e-4), x, 1e-4)
    in_a = differenced_jacobian(lambda a: differenced_jacobian(lambda a: f_numpy(x, a), a, 1e-4), a, 1e-4)
    np.testing.assert_allclose(ad.hessian(f)(x, a), in_x, atol=1e-5)
    np.testing.assert_allclose(ad.hessian(f, argnums=1)(x, a), in_a, atol=1e-5)
    np.testing.assert_allclose(ad.jacobian(ad.grad(f))(x, a), in_x, atol=1e-5)
    sparse = ad.hessian(f, sparse=True)(x, a)
    assert sparse.nnz == 16   # tridiagonal
    np.testing.assert_allclose(sparse.toarray(), in_x, atol=1e-5)
    t = rng.normal(size=6)
    np.testing.assert_allclose(ad.hvp(f, (x, a), (t, np.zeros(6)))[0], in_x @ t, atol=1e-5)


def test_reverse_over_reverse_goes_through_a_kernel(around_a_kernel):
    """``ad.grad`` of a function of ``ad.grad`` (reverse over reverse) around a compiled kernel: the kernel's
    pullback is its adjoint kernel, differentiated again by the adjoint of the adjoint program.  The oracle
    is the same function in NumPy, differentiated by nested central differences (no tensorlang code); the
    Hessian by forward over reverse (another path through the kernel) agrees too."""
    from oracles import differenced_jacobian

    f, f_numpy = around_a_kernel

    def grad_numpy(x, a, i):
        return differenced_jacobian(lambda v: f_numpy(*((v, a) if i == 0 else (x, v))), (x, a)[i], 1e-5)[0]

    rng = np.random.default_rng(3)
    x, a, w = rng.normal(size=6), rng.normal(size=6), rng.normal(size=6)
    for i in (0, 1):   # the gradient in x and in a, each differentiated again in both
        def g(x, a):
            return np.sum(w * ad.grad(f, argnums=i)(x, a) ** 2)

        def g_numpy(x, a):
            return np.sum(w * grad_numpy(x, a, i) ** 2)

        got = ad.grad(g, argnums=(0, 1))(x, a)
        for j in (0, 1):
            want = differenced_jacobian(lambda v: g_numpy(*((v, a) if j == 0 else (x, v))), (x, a)[j], 1e-3)[0]
            np.testing.assert_allclose(got[j], want, rtol=1e-4, atol=1e-4, err_msg=f"gradient {i}, then {j}")
    # the same second derivative by forward over reverse: d/dx sum(w * g_x^2) = 2 H (w * g_x)
    gx = ad.grad(f)(x, a)
    np.testing.assert_allclose(ad.grad(lambda x: np.sum(w * ad.grad(f)(x, a) ** 2))(x),
                               2 * ad.hessian(f)(x, a) @ (w * gx), rtol=1e-9)


def test_reverse_over_reverse_through_a_kernel_with_a_pair_and_sizes():
    """The LSTM cell (six inputs, a pair out) in a two-step loop, differentiated twice in reverse; and a
    kernel whose pair result is written into after the call is refused by name, not differentiated wrongly."""
    from oracles import differenced_jacobian

    m = types.ModuleType("lstm_twice")
    m.CELL = tl.compile(tl.parse((EXAMPLES / "lstm_cell.tl").read_text()))
    ad.define(LSTM, m.__dict__)
    rng = np.random.default_rng(5)
    args = [*(rng.normal(size=s) * 0.5 for _ in range(2) for s in ((16, 4), (16, 4), (16,))), rng.normal(size=(2, 4))]

    W1, U1, _, W2, U2, b2, xs = args

    def g(b1):
        return np.sum(ad.grad(m.loss, argnums=2)(W1, U1, b1, W2, U2, b2, xs) ** 2)

    def g_numpy(b1):
        inner = differenced_jacobian(lambda b: lstm_numpy(*args[:2], b, *args[3:]), b1, 1e-5)[0]
        return np.sum(inner ** 2)

    want = differenced_jacobian(g_numpy, args[2], 1e-3)[0]
    np.testing.assert_allclose(ad.grad(g)(args[2]), want, rtol=1e-4, atol=1e-4)

    def written(b1):
        h, c = m.CELL(W=W1, U=U1, b=b1, h=np.zeros(4), c=np.zeros(4), x=xs[0])
        c *= 2.0
        return np.sum(h * c)

    with pytest.raises(tl.UnsupportedError, match="writes into an array a call returned.*second derivative"):
        ad.grad(lambda b: np.sum(ad.grad(written)(b) ** 2))(args[2])


LSTM = """
import numpy as np

H = 4

def loss(W1, U1, b1, W2, U2, b2, xs):
    h1 = c1 = h2 = c2 = np.zeros(H)
    total = 0.0
    for t in range(len(xs)):
        h1, c1 = CELL(W=W1, U=U1, b=b1, h=h1, c=c1, x=xs[t])
        h2, c2 = CELL(W=W2, U=U2, b=b2, h=h2, c=c2, x=h1)
        total = total + np.sum((h2 - xs[t]) ** 2)
    return total
"""


def lstm_numpy(W1, U1, b1, W2, U2, b2, xs):
    """The same loss in NumPy alone: the oracle shares no code with the kernel or tensorlang.ad."""
    def cell(W, U, b, h, c, x):
        z = W @ h + U @ x + b
        s = 1 / (1 + np.exp(-z))
        c = s[4:8] * c + s[:4] * np.tanh(z[12:])
        return s[8:12] * np.tanh(c), c
    h1 = c1 = h2 = c2 = np.zeros(4)
    total = 0.0
    for x in xs:
        h1, c1 = cell(W1, U1, b1, h1, c1, x)
        h2, c2 = cell(W2, U2, b2, h2, c2, h1)
        total += np.sum((h2 - x) ** 2)
    return total


def test_a_loop_body_compiled_as_a_kernel_is_differentiated_without_copies(fd):
    """``ad.grad`` of a Python loop that calls the compiled LSTM cell (a pair in, a pair out) agrees with
    central differences of the NumPy loss in all six parameters; the kernel, which writes nothing, is
    given the parameters as they are (no copy per step), guarded by its binding: rebinding the name to a
    function that writes into its argument between gradients is seen."""
    m = types.ModuleType("lstm_case")
    m.CELL = tl.compile(tl.parse((EXAMPLES / "lstm_cell.tl").read_text()))
    ad.define(LSTM, m.__dict__)
    rng = np.random.default_rng(7)
    args = (*(rng.normal(size=s) * 0.5 for _ in range(2) for s in ((16, 4), (16, 4), (16,))),
            rng.normal(size=(6, 4)))
    assert m.loss(*args) == pytest.approx(lstm_numpy(*args), rel=1e-12)
    code = str(ad.code_adjoint(m.loss, *args))
    assert "_ad_snap" not in code and "_ad_cut" not in code
    got = ad.grad(m.loss, argnums=(0, 1, 2, 3, 4, 5))(*args)
    for i in range(6):
        np.testing.assert_allclose(got[i], fd(lstm_numpy, args, i), rtol=1e-6, atol=1e-7, err_msg=f"argument {i}")
    kernel = m.CELL

    def writing_cell(W, U, b, h, c, x):   # the kernel's value, after writing into its argument h
        y = kernel(W=W, U=U, b=b, h=h.copy(), c=c, x=x)
        h *= 0.0
        return y

    m.CELL = writing_cell
    again = ad.grad(m.loss)(*args)
    np.testing.assert_allclose(again, fd(m.loss, args, 0), rtol=1e-6, atol=1e-7)


SCALAR_EXAMPLES = [p for p in sorted(EXAMPLES.glob("*.tl")) if tl.parse(p.read_text()).type is tl.nodes.R]


@pytest.mark.parametrize("path", SCALAR_EXAMPLES, ids=lambda p: p.stem)
def test_a_scalar_kernels_value_and_gradient_in_one_call_are_the_evaluators(path):
    """``Kernel.value_and_grad``: one program computes the value and the gradient at the cotangent 1, their
    statements shared; on every scalar example, against the evaluator of the program and of ``tl.grad``."""
    from hypothesis import HealthCheck, given, settings

    from tests.oracles import close, differentiable_inputs
    from tests.strategies import inputs_for

    e = tl.parse(path.read_text())
    wrt = tuple(differentiable_inputs(e))
    k = tl_compile(e)

    @settings(max_examples=3, database=None, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
    @given(inputs_for(e, max_size=6, allow_zero=False))
    def check(inputs):
        with np.errstate(all="ignore"):
            value, gradient = k.value_and_grad(wrt)(**inputs)
            assert close(value, tl.evaluate(e, **inputs))
            assert close(gradient, tl.evaluate(grad(e, list(wrt)), **inputs))

    check()


def test_the_pullback_scales_the_gradient_at_one_and_gives_fresh_arrays(conv):
    """The forward pass of a scalar kernel computes its gradient at the cotangent 1; the pullback scales it
    by the cotangent (the adjoint is linear in it), gives zeros for none, and never the same array twice."""
    e, k = conv
    rng = np.random.default_rng(8)
    x, c, z = rng.standard_normal(13), rng.standard_normal(4), rng.standard_normal(10)
    want = tl.evaluate(grad(e, "c"), x=x, c=c, z=z)
    y, back = k.__ad_pullback_read__(("c",), x=x, c=c, z=z)
    assert np.isclose(y, tl.evaluate(e, x=x, c=c, z=z), rtol=1e-12)
    first = back(1.0)[1]
    assert np.allclose(first, want, rtol=1e-12)
    again = back(1.0)[1]
    assert again is not first and np.array_equal(again, first)
    assert np.allclose(back(-2.5)[1], -2.5 * want, rtol=1e-12)
    assert np.array_equal(back(None)[1], np.zeros(4))
    assert back(1.0)[0] is None and back(1.0)[2] is None   # x and z: not read
    assert np.allclose(ad.grad(lambda c: 3.0 * k(x=x, c=c, z=z))(c), 3.0 * want, rtol=1e-12)
