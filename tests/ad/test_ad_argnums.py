"""``ad.grad(f, argnums)``, ``ad.value_and_grad`` and ``has_aux`` against central differences, on the code that
the returned function runs from its second call on (straight-line code for functions of numbers, the cached
path of ``ad.gradient`` with the picking around it for arrays): int and tuple argnums (negative ones, any
order), keyword arguments, nested ``grad(grad(f))``, integers refused after the first call, other argument
types after it, errors showing the user's line, and calls from four threads at once (the first ones
included)."""
import math
import threading
import traceback

import numpy as np
import pytest

from tensorlang import ad
from tensorlang.errors import TypeCheckError

from conftest import central_difference as central


def scalars(x, y, n):
    return math.sin(x) * y * y + x ** n / (1.0 + y)


def arrays(w, b, x):
    return np.sum(np.tanh(x @ w + b) ** 2) + 0.5 * np.sum(w * w)


def d_scalars_dx(x, y, n):
    return math.cos(x) * y * y + n * x ** (n - 1) / (1.0 + y)


def with_defaults(x, y, scale=2.0):
    return scale * x * x * y + math.cos(y)


def aux_pair(x, y):
    return np.sum(x * x) * y, {"norm": float(np.sum(x * x))}


def logged(x):
    return math.log(x - 1.0) * x


RNG = np.random.default_rng(3)
W, B, X = RNG.normal(size=3), 0.3, RNG.normal(size=(5, 3))


def close(got, want):
    return np.allclose(got, want, rtol=1e-5, atol=1e-6)


CASES = [(scalars, (0.7, 1.3, 3)), (scalars, (-1.1, 0.4, 2)), (arrays, (W, B, X))]


@pytest.mark.parametrize("f, args", CASES, ids=["scalars", "scalars2", "arrays"])
@pytest.mark.parametrize("argnums", [0, 1, -2, (0, 1), (1, 0), (0,), (-2, 0)])
def test_picked_gradients_match_central_differences_on_every_call(f, args, argnums):
    g = ad.grad(f, argnums)
    vg = ad.value_and_grad(f, argnums)
    picks = (argnums,) if isinstance(argnums, int) else argnums
    want = tuple(central(f, args, i) for i in picks)
    for _ in range(3):   # the first call, then the code it installed
        got = g(*args)
        value, again = vg(*args)
        assert value == f(*args)
        for result in (got, again):
            assert len(result) == len(want) and all(map(close, result, want)) if isinstance(argnums, tuple) \
                else close(result, want[0])


def test_a_straight_line_function_gets_the_picked_gradients_only():
    g = ad.grad(scalars, argnums=(1, 0))
    g(0.7, 1.3, 3)
    assert g.__ad_source__ is not None and "while" not in g.__ad_source__
    assert g.__ad_source__.rstrip().splitlines()[-1].count(",") == 2   # two gradients returned, not three
    vg = ad.value_and_grad(scalars, argnums=1)
    vg(0.7, 1.3, 3)
    assert vg.__ad_source__ is not None
    assert type(g(0.7, 1.3, 3)[0]) is float and type(vg(0.7, 1.3, 3)[1]) is float


def test_other_argument_types_after_the_first_call():
    g = ad.grad(scalars, argnums=(0, 1))
    g(0.7, 1.3, 3)
    got = g(np.float64(0.7), 1.3, 3)   # not a float: handed over to the general path
    assert all(map(close, got, (central(scalars, (0.7, 1.3, 3), 0), central(scalars, (0.7, 1.3, 3), 1))))
    h = ad.grad(lambda x: np.sum(x * x))
    assert h(2.0) == 4.0
    assert close(h(np.array([1.0, 2.0])), [2.0, 4.0])
    assert close(h(np.array([1.0, 2.0], dtype=np.float32)), [2.0, 4.0])


def test_integers_in_picked_positions_are_refused_after_the_first_call():
    g = ad.grad(scalars, argnums=(0, 1))
    g(0.7, 1.3, 3)
    with pytest.raises(TypeCheckError, match=r"argument 1 \(y\) is an int"):
        g(0.7, 1, 3)
    vg = ad.value_and_grad(scalars)
    vg(0.7, 1.3, 3)
    with pytest.raises(TypeCheckError, match=r"argument 0 \(x\) is an int"):
        vg(1, 1.3, 3)
    a = ad.grad(arrays)
    a(W, B, X)
    with pytest.raises(TypeCheckError, match=r"argument 0 \(w\) is an array of dtype int64"):
        a(np.arange(3), B, X)
    assert close(a(W, B, X), central(arrays, (W, B, X), 0))


def test_keyword_arguments_are_passed_through_before_and_after_the_first_call():
    for g in (ad.grad(with_defaults), ad.grad(with_defaults, argnums=(0, 1))):
        first = g(1.5, 0.5, scale=3.0)   # keywords: nothing installed
        plain = g(1.5, 0.5)              # installs
        again = g(1.5, 0.5, scale=3.0)   # after installing: keywords still passed
        f3 = lambda x, y: with_defaults(x, y, scale=3.0)
        want3 = (central(f3, (1.5, 0.5), 0), central(f3, (1.5, 0.5), 1))
        want2 = (central(with_defaults, (1.5, 0.5), 0), central(with_defaults, (1.5, 0.5), 1))
        n = 1 if isinstance(first, float) else 2
        assert close(first, want3[:n] if n == 2 else want3[0]) and close(again, first)
        assert close(plain, want2[:n] if n == 2 else want2[0])
        assert close(g(1.5, 0.5, 3.0), first)    # the default given positionally: a float, not picked
    value, grad = ad.value_and_grad(with_defaults, argnums=1)(1.5, 0.5, scale=3.0)
    assert value == with_defaults(1.5, 0.5, scale=3.0) and close(grad, central(lambda y: with_defaults(1.5, y, 3.0),
                                                                               (0.5,), 0))
    a = ad.grad(arrays, argnums=(0, 1))
    a(W, B, X)
    got = a(W, B, x=X)
    assert close(got[0], central(arrays, (W, B, X), 0)) and close(got[1], central(arrays, (W, B, X), 1))
    with pytest.raises(TypeError, match="unexpected keyword argument 'sacle'"):
        ad.grad(with_defaults)(1.5, 0.5, sacle=3.0)


def test_a_function_with_defaults_called_with_fewer_arguments_after_the_first_call():
    g = ad.grad(with_defaults, argnums=1)
    assert close(g(1.5, 0.5, 3.0), central(lambda y: with_defaults(1.5, y, 3.0), (0.5,), 0))
    assert close(g(1.5, 0.5), central(lambda y: with_defaults(1.5, y), (0.5,), 0))


def test_has_aux():
    x = np.array([1.0, -2.0, 0.5])
    for _ in range(2):
        (value, aux), (gx, gy) = ad.value_and_grad(aux_pair, argnums=(0, 1), has_aux=True)(x, 1.5)
        assert value == aux_pair(x, 1.5)[0] and aux == {"norm": 5.25}
        assert close(gx, 3.0 * x) and close(gy, 5.25)
        g, aux = ad.grad(aux_pair, has_aux=True)(x, 1.5)
        assert close(g, 3.0 * x) and aux == {"norm": 5.25}
    scalar = ad.grad(lambda x, k=1.0: (k * x * x, x + k), has_aux=True)
    for _ in range(2):
        assert scalar(2.0, k=4.0) == pytest.approx((16.0, 6.0)) and scalar(2.0) == pytest.approx((4.0, 3.0))
    with pytest.raises(Exception, match="must return a pair"):
        ad.grad(logged, has_aux=True)(3.0)


def test_nested_grad_after_the_inner_function_installed_its_code():
    inner = ad.grad(scalars)
    inner(0.7, 1.3, 3)   # the inner function runs its installed straight-line code from now on
    outer = ad.grad(inner)
    for _ in range(2):   # central differences of the first derivative in closed form
        assert close(outer(0.7, 1.3, 3), central(d_scalars_dx, (0.7, 1.3, 3), 0))
    mixed = ad.grad(inner, argnums=1)
    assert close(mixed(0.7, 1.3, 3), central(d_scalars_dx, (0.7, 1.3, 3), 1))
    a = ad.grad(lambda w: np.sum(np.sin(w) ** 2))
    a(W)
    h = ad.grad(lambda w: np.sum(a(w) * W))   # an installed grad(f) inside a differentiated function
    assert close(h(W), central(lambda w: np.sum(2 * np.sin(w) * np.cos(w) * W), (W,), 0))


def test_errors_show_the_users_line_on_every_path():
    for g, bad in ((ad.grad(logged), 0.5), (ad.value_and_grad(logged), 0.5),
                   (ad.grad(lambda x: math.log(np.sum(x) - 10.0) * 2.0), np.ones(3))):
        g(bad * 0 + 20.0)   # installs
        with pytest.raises(ValueError) as info:
            g(bad)
        shown = "".join(traceback.format_exception(info.value))
        assert "<tensorlang" not in shown and "runtime.py" not in shown
        assert traceback.extract_tb(info.value.__traceback__)[-1].filename == __file__


def test_names_and_wrapped():
    g = ad.grad(scalars, argnums=(0, 1))
    vg = ad.value_and_grad(arrays)
    for _ in range(2):
        assert g.__qualname__ == "grad(scalars)" and g.__wrapped__ is scalars and g.__name__ == "grad(scalars)"
        assert vg.__qualname__ == "value_and_grad(arrays)" and vg.__wrapped__ is arrays
        assert ad.grad(scalars, has_aux=True).__qualname__ == "grad(scalars, has_aux=True)"
        g(0.7, 1.3, 3)
        vg(W, B, X)


def _vg_grads(result):
    return result[1] if isinstance(result[1], tuple) else (result[1],)


@pytest.mark.parametrize("make, args, picks, grads", [
    (lambda: ad.grad(scalars, argnums=(0, 1)), lambda k: (0.1 * k + 0.2, 1.0 + 0.1 * k, 2), (0, 1), tuple),
    (lambda: ad.grad(arrays), lambda k: (W * (k + 1), B, X), (0,), lambda r: (r,)),
    (lambda: ad.value_and_grad(arrays, argnums=(0, 1)), lambda k: (W * (k + 1), B, X), (0, 1), _vg_grads),
    (lambda: ad.value_and_grad(scalars), lambda k: (0.1 * k + 0.2, 1.0 + 0.1 * k, 2), (0,), _vg_grads),
], ids=["grad scalars", "grad arrays", "value_and_grad arrays", "value_and_grad scalars"])
def test_four_threads_share_one_function_from_its_first_call_on(make, args, picks, grads):
    g = make()
    f = g.__wrapped__
    start = threading.Barrier(4)
    results, errors = {}, []

    def work(k):
        try:
            start.wait()
            results[k] = [grads(g(*args(k))) for _ in range(50)]
        except Exception as err:   # (reported below)
            errors.append(err)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for k in range(4):
        want = tuple(central(f, args(k), i) for i in picks)
        for got in results[k]:
            assert len(got) == len(want) and all(map(close, got, want))
