"""Every primitive of the registry, in every mode its record claims, against central differences.

For each example of ``primitive_examples`` (a function ``fn`` of one float or float array and a point),
the loss ``<w, fn(x)>`` (fixed random weights; a complex result's real and imaginary parts both weighed)
is differentiated by reverse mode (``ad.grad``) and forward mode (``ad.jvp``), both checked against a
central difference of the loss along a random direction; its gradient is then differentiated again by
forward over reverse (``ad.jvp`` of ``ad.grad``) and reverse over reverse (``ad.grad`` of
``<ad.grad(loss), u>``), both checked against central differences of the (checked) gradient.  A mode the
record refuses must raise the refusal's ``UnsupportedError`` by name, never a wrong number."""
import numpy as np
import pytest

from tensorlang import ad
from tensorlang.derive.ad.registry import REGISTRY
from tensorlang.derive.ad.registry import primitive as record
from tensorlang.errors import UnsupportedError

from primitive_examples import EXAMPLES, NO_EXAMPLE   # (tests/ad is on the path)


def _weights(y, rng):
    """Fixed weights shaped like ``y`` (a structure of numbers and arrays; complex weights for complex ones)."""
    if isinstance(y, (tuple, list)):
        return tuple(_weights(v, rng) for v in y)
    w = rng.uniform(0.5, 1.5, np.shape(y))
    if np.iscomplexobj(y):
        w = w + 1j * rng.uniform(0.5, 1.5, np.shape(y))
    return w if np.ndim(y) else w[()]


def combine(y, w):
    """The real number ``<w, y>`` (``Re(conj(w) y)`` for complex ``y``)."""
    if isinstance(y, (tuple, list)):
        s = 0.0
        for k in range(len(w)):
            s = s + combine(y[k], w[k])
        return s
    return np.sum(np.real(np.conj(w) * y))


def _loss(fn, w):
    def loss(x):
        return combine(fn(x), w)
    return loss


def _direction(x, rng):
    d = rng.uniform(-1.0, 1.0, np.shape(x))
    return d if np.ndim(x) else float(d)


def _difference(f, x, v, h):
    return (np.asarray(f(x + h * v)) - np.asarray(f(x - h * v))) / (2 * h)


def _step(x):
    return 1e-6 * max(1.0, float(np.max(np.abs(x))))


def _cases():
    for key, examples in EXAMPLES.items():
        for k, (fn, x) in enumerate(examples):
            yield pytest.param(key, fn, x, id=f"{record(key).name if record(key) else key}-{k}")


def _run(mode, key, thunk):
    """``thunk()``, or None where ``key``'s record refuses ``mode`` and the call raised that refusal.  Where the
    record refuses the mode, the entry point may still reach the derivative through a recording of the function
    (``tower``: reverse over reverse through ``map``, whose rule the transform does not differentiate again): its
    value is then returned, to be checked as a claimed mode's is."""
    refused = record(key).refused.get(mode)
    if refused is None:
        try:
            return thunk()
        except Exception as e:
            raise AssertionError(f"{mode} mode, which the record of {record(key).name} claims: "
                                 f"{type(e).__name__}: {e}") from e
    try:
        return thunk()
    except UnsupportedError:
        return None


@pytest.mark.parametrize("key, fn, x", list(_cases()))
def test_primitive_in_every_mode(key, fn, x):
    modes = record(key).modes()
    rng = np.random.default_rng(3)
    y = fn(x)
    loss = _loss(fn, _weights(y, rng))
    v, u = _direction(x, rng), _direction(x, rng)
    h = _step(x)
    slope = float(_difference(loss, x, v, h))
    tol = dict(rtol=2e-5, atol=2e-6 * max(1.0, abs(slope)))
    grad = ad.grad(loss)
    if "reverse" in modes:
        g = _run("reverse", key, lambda: grad(x))
        if g is not None:
            np.testing.assert_allclose(np.sum(np.asarray(g) * v), slope, **tol, err_msg="reverse mode")
    if "forward" in modes:
        got = _run("forward", key, lambda: ad.jvp(loss, (x,), (v,)))
        if got is not None:
            np.testing.assert_allclose(got[0], loss(x), rtol=1e-12, atol=1e-12, err_msg="forward mode's value")
            np.testing.assert_allclose(got[1], slope, **tol, err_msg="forward mode")
    curvature = _difference(grad, x, u, h * 10)
    tol = dict(rtol=1e-4, atol=1e-5 * max(1.0, float(np.max(np.abs(curvature)))))
    if "forward over reverse" in modes:
        got = _run("forward over reverse", key, lambda: ad.jvp(grad, (x,), (u,)))
        if got is not None:
            np.testing.assert_allclose(got[1], curvature, **tol, err_msg="forward over reverse")
    if "reverse over reverse" in modes:
        got = _run("reverse over reverse", key, lambda: ad.grad(lambda z: np.sum(grad(z) * u))(x))
        if got is not None:
            np.testing.assert_allclose(got, curvature, **tol, err_msg="reverse over reverse")


def _public(key) -> bool:
    """Whether ``key`` is a function or method users call (NumPy, SciPy, math, builtins, operator)."""
    if isinstance(key, tuple):
        return key[0] in (np.ndarray, list, dict, complex)
    module = getattr(key, "__module__", None) or ""
    if getattr(key, "__name__", "").startswith("_"):
        return False
    return module.split(".")[0] in ("numpy", "scipy", "math", "builtins", "_operator", "operator", "dataclasses") \
        or type(key).__module__ == "numpy" and type(key).__name__ == "ufunc"


def test_every_public_primitive_has_examples():
    missing = sorted(record(k).name for k, r in list(REGISTRY.items())
                     if _public(k) and r.reverse is not None and not r.nondiff and k not in EXAMPLES
                     and k not in NO_EXAMPLE)
    assert not missing, f"primitives without an example in tests/ad/primitive_examples.py: {missing}"


def test_a_record_says_how_each_mode_is_derived():
    sin = record(np.sin)
    assert sin.reverse is not None and sin.forward is not None
    assert set(sin.modes()) == {"reverse", "forward", "reverse over reverse", "forward over reverse"}
    assert record(np.sort).how("forward") == "its pullback, transposed"
    assert record(np.zeros_like).nondiff
    assert "forward over reverse" in str(ad.primitive(np.sin)) and ad.primitive(lambda x: x) is None


def test_writing_an_index_writes_the_record():
    from tensorlang.derive.ad.registry import RULES

    def twice(x):
        return 2 * x

    def rule(x):
        return 2 * x, lambda dy: (2 * dy,)
    RULES[twice] = rule
    try:
        assert record(twice).reverse is rule
        assert ad.grad(lambda x: twice(x) * x)(3.0) == 12.0
    finally:
        del RULES[twice]
    assert record(twice).reverse is None and twice not in RULES
