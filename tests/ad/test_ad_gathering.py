"""Python functions with ``*args``, ``**kwargs``, keyword-only and positional-only parameters, differentiated in
every mode (each as its flat twin, ``flat``) against central differences of plain NumPy, called as users call
them: from differentiated code with positions and keywords, and from ``ad.grad`` with keyword arguments."""
import functools

import numpy as np
import pytest

from tensorlang import ad
from all_modes import central, check_modes   # (tests/ad is on the path)

X = np.array([0.3, -1.2, 2.0])


def energy(u, *, stiffness=2.0, mass=0.5):
    return stiffness * np.sum(np.diff(u) ** 2) + mass * np.sum(np.sin(u) ** 2)


def total(*parts):
    out = 0.0
    for p in parts:
        out = out + np.sum(p ** 2)
    return out


def weighted(u, **weights):
    out = weights["a"] * np.sum(u ** 3)
    for name, w in weights.items():
        if name != "a":
            out = out + w * np.sum(np.cos(u))
    return out + weights.get("missing", 0.5) * np.sum(u)


def everything(a, b=2.0, /, *rest, scale, shift=0.0, **opts):
    out = scale * np.sum(a * b) + shift
    for r in rest:
        out = out + np.sum(r * a)
    return out + sum(v * np.sum(a ** 2) for v in opts.values())


def test_keyword_only_parameters():
    check_modes(lambda u, s: energy(u) + energy(u, stiffness=s) + energy(u, mass=s, stiffness=s * s), X, 1.3)


def test_star_args_gather_arrays_and_numbers():
    check_modes(lambda u, y: total(u) + total(u, y, u * y) + total(), X, 0.7)


def test_star_star_kwargs():
    check_modes(lambda u, y: weighted(u, a=y) + weighted(u, a=2.0, b=y, c=y * y), X, 0.9)


def test_every_kind_of_parameter_at_once():
    check_modes(lambda u, y: everything(u, scale=y) + everything(u, y, u, u * y, scale=2.0, shift=y, p=y, q=3.0),
                X, 1.1)


def test_closures_and_lambdas_that_gather():
    def f(u, y):
        norm = lambda *vs, p=2: sum(np.sum(np.abs(v) ** p) for v in vs)   # noqa: E731

        def scaled(v, *, by):
            return v * by
        return norm(u, scaled(u, by=y)) + norm(u, p=3) * y
    check_modes(f, X, 1.4)


def test_called_from_ad_grad_with_keywords():
    g = ad.grad(energy)(X, stiffness=3.0)
    want = central(lambda u: energy(u, stiffness=3.0), (X,), 0, 1e-6)
    np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(ad.grad(energy)(X), central(energy, (X,), 0, 1e-6), rtol=1e-6, atol=1e-8)
    gs = ad.gradient(total, X, 2.0, X)
    np.testing.assert_allclose(gs[0], 2 * X)
    assert gs[1] == pytest.approx(4.0)
    np.testing.assert_allclose(gs[2], 2 * X)
    h = ad.hessian(energy)(X, mass=2.0)
    np.testing.assert_allclose(h, central(ad.grad(lambda u: energy(u, mass=2.0)), (X,), 0, 1e-5), rtol=1e-5,
                               atol=1e-6)


def test_a_call_that_does_not_fit_the_signature_is_python_s_error():
    with pytest.raises(TypeError, match="energy.*too many positional arguments"):
        ad.grad(lambda u: energy(u, 2.0))(X)


def test_star_arguments_in_calls_and_displays():
    """``f(*xs)``, ``f(a, *xs, k=v, **opts)``, ``np.add(*pair)``, ``(*xs, y)``, ``[*xs, y]`` (``lower.called_with``,
    ``lower.joined``), evaluated as Python evaluates them."""
    def model(u, a, b, *, scale=1.0):
        return scale * np.sum(np.sin(u * a) + b * u ** 2)

    def f(u, y):
        params = [y, 2.0 * y]
        opts = {"scale": y}
        stacked = (*params, y * y)
        listed = [u, *params]
        return (model(u, *params) + model(u, *params, **opts) + model(*(u, y), b=y, **{"scale": 3.0})
                + np.add(*[u, u * y]).sum() + stacked[2] * listed[2] + everything(u, *stacked, scale=y, **{"p": y}))
    check_modes(f, X, 0.7)


def test_dict_keys_carry_no_derivative():
    """``tuple(d)``/``list(d)`` of a dict whose values have tangents or gradients: its keys, which have none (the
    tangent was the tangent dict's keys, of another length where some values had none)."""
    def f(u, y):
        p = {"c": 3.0, "a": y, "b": u * y}
        names = tuple(p)
        return sum(np.sum(p[k] ** 2) for k in names) + np.sum(p[list(p)[2]] * u)
    check_modes(f, X, 0.7)


def test_a_keyword_given_twice_is_python_s_error():
    def f(u):
        opts = {"scale": 2.0}
        return energy(u, stiffness=1.0, **{"mass": 2.0}) + everything(u, scale=1.0, **opts)
    with pytest.raises(TypeError, match="everything.. got multiple values for keyword argument 'scale'"):
        ad.grad(f)(X)
    with pytest.raises(TypeError, match="multiple values for keyword argument 'scale'"):
        f(X)


class _Base:
    def __init__(self, w, *, b=0.0):
        self.w = w
        self.b = b


class _Forwarding(_Base):
    """The pattern of class hierarchies: the subclass takes what it does not name and hands it on."""

    def __init__(self, *args, gain=1.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.gain = gain

    def __call__(self, *xs, shift=0.0):
        return self.gain * sum(np.sum(self.w * x) for x in xs) + self.b + shift


def _decorated(f):
    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        return f(*args, **kwargs)
    return wrapper


@_decorated
def _decorated_energy(u, scale=1.0):
    return scale * np.sum(np.sin(u) ** 2)


def test_forwarding_constructors_decorators_and_callable_objects():
    """``super().__init__(*args, **kwargs)`` (the values it stores reach their gradients: the forwarded call's
    pullback runs although its result, None, has none), a class constructed with keywords, a callable object
    called with keywords, a function decorated with ``functools.wraps`` (its own ``*args``, not the signature
    of what it wraps)."""
    def f(u, y):
        model = _Forwarding(u * y, b=y, gain=2.0)
        return model(u, u ** 2, shift=y) ** 2 + _decorated_energy(u, scale=y) + _decorated_energy(u * y)
    check_modes(f, X, 0.7)


def _pushed(stack, *items, by=0.7):
    for item in items:
        stack.append(item * by)
    return stack


def test_a_list_handed_through_calls_that_append_to_it():
    check_modes(lambda u, y: (lambda s: np.sum(s[0] * s[1] + s[2]))(_pushed(_pushed([], u, u[::-1]), u ** 2, by=y)),
                X, 0.7)


def _parts(*xs, scale=1.0):
    acc = []
    for v in xs:
        acc.append(v * v * scale)
    return sum(np.sum(a) for a in acc)


def _threaded_loss(x, s):
    p = {"w": x * 1.0}
    p["w"] = p["w"] + s * x
    p["w"][0] = p["w"][0] * 2
    return _parts(x, p["w"], scale=s)


def test_from_many_threads():
    """Flat twins, star-arguments and the rewound containers of the box store, from four threads at once."""
    from concurrent.futures import ThreadPoolExecutor
    x = np.arange(1.0, 301.0) / 100

    def right(k):
        s = 0.5 + k / 100
        w = x * (1 + s)
        w[0] *= 2
        gw = 2 * w * s
        gw[0] *= 2
        return np.allclose(ad.grad(_threaded_loss)(x, s), 2 * x * s + gw * (1 + s))
    with ThreadPoolExecutor(4) as ex:
        assert sum(ex.map(right, range(40))) == 40
