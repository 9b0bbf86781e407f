"""The arguments that ``ad.grad``'s ``argnums`` leaves out are not differentiated (``analysis.analyse``'s
``fixed``): their gradients are not computed, and a compiled kernel's adjoint is built in the inputs whose
gradients are read (``runtime.Jkw_read``).  Each case against central differences, on the first call and the
later ones (the installed code): where nothing can write a derivative into such an argument; where
something can (the function writes into it, a function it defines could, a closure's kernel), which keeps
it differentiated; and derivatives across the choice (the gradient in one argument differentiated in
another)."""
import numpy as np
import pytest

import tensorlang as tl
from tensorlang import ad

from conftest import central_difference as central

KERNEL = tl.compile(tl.parse("""
x : [n][d]R
w : [d]R
b : R
sum(i:n) log(1 + exp(b + sum(a:d) x[i, a] * w[a]))
"""))


def data_fit(w, b, x):
    """A model's loss: parameters first, the data last (the JAX user's ``loss(params, x)``)."""
    return KERNEL(x=x, w=w, b=b) + 0.5 * np.sum(w * w)


def written_into(w, buf):
    buf[:] = 2.0 * w   # a derivative written into the argument left out
    return np.sum(np.sin(buf) * w)


def through_a_closure(w, buf):
    def fill():
        buf[:] = w * w
    fill()
    return np.sum(buf) + np.sum(w)


def numpy_only(w, x):
    return np.sum(np.tanh(x @ w) ** 2) + np.sum(np.sum(x, axis=1) * np.sum(w))


def _inputs(seed=0, n=12, d=3):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(d), float(rng.standard_normal()), rng.standard_normal((n, d))


def _check(f, args, argnums):
    g = ad.grad(f, argnums=argnums)
    picks = (argnums,) if isinstance(argnums, int) else argnums
    for call in range(3):   # the first call, then the installed code
        got = g(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
        got = (got,) if isinstance(argnums, int) else got
        for i, gi in zip(picks, got):
            want = central(lambda *a: f(*[x.copy() if isinstance(x, np.ndarray) else x for x in a]), args, i)
            assert np.allclose(gi, want, rtol=1e-6, atol=1e-6), (f.__name__, argnums, call, i)


@pytest.mark.parametrize("argnums", [0, 1, 2, (0, 1), (0, 2), (1, 2), (0, 1, 2), (2, 0)])
def test_a_kernel_called_with_data(argnums):
    _check(data_fit, _inputs(), argnums)


def test_the_kernel_adjoint_is_built_in_the_parameters_alone():
    """(The kernel is a scalar's: its adjoint is compiled with its value, ``Kernel.value_and_grad``.)"""
    KERNEL.value_grad_kernels = None
    w, b, x = _inputs(1)
    ad.grad(data_fit, argnums=(0, 1))(w, b, x)
    ad.grad(data_fit, argnums=(0, 1))(w, b, x)
    assert [set(wrt) for wrt in KERNEL.value_grad_kernels] == [{"w", "b"}]
    ad.gradient(data_fit, w, b, x)   # every argument: the adjoint in every input
    assert [set(wrt) for wrt in KERNEL.value_grad_kernels] == [{"w", "b"}, {"x", "w", "b"}]


@pytest.mark.parametrize("f", [written_into, through_a_closure])
def test_an_argument_written_into_keeps_its_derivative(f):
    rng = np.random.default_rng(2)
    _check(f, (rng.standard_normal(5), np.zeros(5)), 0)


@pytest.mark.parametrize("argnums", [0, 1, (1, 0)])
def test_numpy_code(argnums):
    rng = np.random.default_rng(3)
    _check(numpy_only, (rng.standard_normal(3), rng.standard_normal((6, 3))), argnums)


def test_the_gradient_in_one_argument_differentiated_in_another():
    """d/dx of grad_w f(w, x): x is left out of the inner gradient, whose value still depends on it."""
    w, b, x = _inputs(4, n=5, d=2)
    inner = ad.grad(data_fit, argnums=0)
    inner(w, b, x)   # installed

    def mixed(x):
        return np.sum(np.sin(inner(w, b, x)))

    got = ad.grad(mixed)(x)
    assert np.allclose(got, central(mixed, (x,), 0), rtol=1e-5, atol=1e-6)
    inner_np = ad.grad(numpy_only, argnums=0)
    v = np.random.default_rng(5).standard_normal((4, 2))

    def mixed_np(v):
        return np.sum(inner_np(w, v) ** 2)

    assert np.allclose(ad.grad(mixed_np)(v), central(mixed_np, (v,), 0), rtol=1e-5, atol=1e-6)


def test_value_and_grad_and_has_aux_pick_the_same_way():
    w, b, x = _inputs(6)
    value, (gw, gb) = ad.value_and_grad(data_fit, argnums=(0, 1))(w, b, x)
    value, (gw, gb) = ad.value_and_grad(data_fit, argnums=(0, 1))(w, b, x)
    assert np.isclose(value, data_fit(w, b, x))
    assert np.allclose(gw, central(data_fit, (w, b, x), 0), rtol=1e-6)
    assert np.allclose(gb, central(data_fit, (w, b, x), 1), rtol=1e-6)


XDATA = np.random.default_rng(8).standard_normal((7, 3))


def global_data(w):
    """The data a module global, the offset a constant: neither differentiated, whatever the entry point."""
    return KERNEL(x=XDATA, w=w, b=0.3) * np.sum(w)


def test_constants_and_globals_given_to_a_kernel_at_second_order():
    """``ad.gradient`` of it builds no adjoint in the constant ``b`` (the global array is differentiated: a
    global may hold a derivative written by code the function calls); ``ad.hessian`` (forward over reverse)
    and ``ad.grad(ad.grad)`` (reverse over reverse) differentiate that call again, in every input."""
    w = np.random.default_rng(9).standard_normal(3)
    KERNEL.value_grad_kernels = None
    g = ad.gradient(global_data, w)[0]
    assert np.allclose(g, central(global_data, (w,), 0), rtol=1e-6)
    assert [set(wrt) for wrt in KERNEL.value_grad_kernels] == [{"x", "w"}]
    gradient = lambda w: ad.gradient(global_data, w)[0]   # noqa: E731
    by_differences = np.array([central(lambda w: gradient(w)[i], (w,), 0) for i in range(3)])
    assert np.allclose(ad.hessian(global_data)(w), by_differences, rtol=1e-5, atol=1e-6)
    v = np.random.default_rng(10).standard_normal(3)
    assert np.allclose(ad.hvp(global_data, (w,), (v,))[0], by_differences @ v, rtol=1e-5, atol=1e-6)
    second = ad.grad(lambda w: np.sum(np.sin(ad.grad(global_data)(w))))
    assert np.allclose(second(w), central(lambda w: np.sum(np.sin(gradient(w))), (w,), 0), rtol=1e-5, atol=1e-6)


def test_four_threads_build_one_restricted_adjoint(monkeypatch):
    """Four threads take the first gradients of a fresh copy of ``data_fit`` at once: each right, and one
    adjoint kernel built (in ``w`` and ``b``, with the kernel's value), whichever thread builds it."""
    import threading
    import types

    from tensorlang.codegen.kernel import DERIVATIVES

    KERNEL.value_grad_kernels = None
    fresh = types.FunctionType(data_fit.__code__, data_fit.__globals__, "data_fit")
    g = ad.grad(fresh, argnums=(0, 1))
    builds, errors = [], []
    real = DERIVATIVES.value_and_grad
    barrier = threading.Barrier(4)

    def work(seed):
        try:
            w, b, x = _inputs(seed)
            barrier.wait()
            for _ in range(3):
                gw, gb = g(w, b, x)
                assert np.allclose(gw, central(data_fit, (w, b, x), 0), rtol=1e-6)
                assert np.isclose(gb, central(data_fit, (w, b, x), 1), rtol=1e-6)
        except BaseException as err:   # (reported in the test's thread)
            errors.append(err)

    monkeypatch.setattr(DERIVATIVES, "value_and_grad", lambda *a, **kw: builds.append(a[1]) or real(*a, **kw))
    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert [set(w) for w in builds] == [{"w", "b"}]
