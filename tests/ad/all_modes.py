"""The check of a rule in every mode against central differences computed here with plain NumPy (no code
of tensorlang.ad): the gradient (``ad.gradient``), the tangent (``ad.jvp``), and at second order the
Hessian (``ad.hessian``, forward over reverse) and a Hessian-vector product by reverse over reverse
(``ad.grad`` of ``ad.grad``), both against central differences of the gradient."""
import numpy as np

from tensorlang import ad


def central(f, args, i, h):
    """The central differences of ``f`` in each entry of real ``args[i]``: shape ``args[i].shape + f's``; for a
    complex ``args[i]``, those in the real parts plus ``1j`` times those in the imaginary parts (the
    gradient of a real ``f`` in ``rules.complexes``' convention)."""
    x = np.asarray(args[i])
    out = np.zeros(x.shape + np.shape(f(*args)), dtype=x.dtype if np.iscomplexobj(x) else float)
    for step in ((1.0, 1j) if np.iscomplexobj(x) else (1.0,)):
        for k in np.ndindex(x.shape):
            e = np.zeros_like(x)
            e[k] = h * step
            up, down = list(args), list(args)
            up[i], down[i] = x + e, x - e
            if np.ndim(args[i]) == 0:
                up[i], down[i] = up[i][()], down[i][()]
            out[k] += (1 if step == 1.0 else 1j) * (np.asarray(f(*up)) - np.asarray(f(*down))) / (2 * h)
    return out


def _gradients(loss, args):
    got = ad.gradient(loss, *args)
    return [np.zeros(np.shape(a)) if g is None else g for g, a in zip(got, args)]


def _grad_in(loss, i):
    return lambda *a: _gradients(loss, a)[i]


def _hvp(loss, n, i, v):
    """The Hessian-vector product in argument ``i`` by reverse over reverse (``n`` arguments)."""
    g = ad.grad(loss, argnums=i)
    if n == 1:
        return ad.grad(lambda x: np.sum(g(x) * v))
    if n == 2:
        return ad.grad(lambda x, y: np.sum(g(x, y) * v), argnums=i)
    return ad.grad(lambda x, y, z: np.sum(g(x, y, z) * v), argnums=i)


def check_modes(loss, *args, second=True, twice_reverse=True, rtol=1e-6, atol=1e-7, h=1e-6, rtol2=1e-5, atol2=1e-6):
    """``loss`` (a real number of ``args``) in every mode against central differences: the gradient and the
    tangent along random directions of every argument; unless ``second`` is False, for each real argument
    the Hessian and (unless ``twice_reverse`` is False) the Hessian-vector product by reverse over reverse."""
    rng = np.random.default_rng(7)
    grads = _gradients(loss, args)
    expected = [central(loss, args, i, h) for i in range(len(args))]
    for i, (g, e) in enumerate(zip(grads, expected)):
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, err_msg=f"gradient of argument {i}")
    vs = [rng.standard_normal(np.shape(a)) + (1j * rng.standard_normal(np.shape(a)) if np.iscomplexobj(a) else 0)
          for a in args]
    ty = ad.jvp(loss, tuple(args), tuple(vs))[1]
    want = sum(np.sum(np.real(np.conj(e) * v)) for e, v in zip(expected, vs))
    np.testing.assert_allclose(ty, want, rtol=rtol, atol=atol, err_msg="tangent")
    if not second:
        return
    for i, a in enumerate(args):
        if np.iscomplexobj(a):
            continue
        hess = central(_grad_in(loss, i), args, i, 1e-5)   # [k] = d grad / d x_k
        np.testing.assert_allclose(ad.hessian(loss, argnums=i)(*args), hess, rtol=rtol2, atol=atol2,
                                   err_msg=f"Hessian in argument {i}")
        if not twice_reverse:
            continue
        v = rng.standard_normal(np.shape(a))
        hv = _hvp(loss, len(args), i, v)(*args)
        hv = np.zeros(np.shape(a)) if hv is None else hv
        np.testing.assert_allclose(hv, np.tensordot(v, hess, np.ndim(v)), rtol=rtol2, atol=atol2,
                                   err_msg=f"reverse over reverse in argument {i}")
