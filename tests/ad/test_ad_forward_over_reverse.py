"""Forward over reverse (``ad.hvp``, ``ad.hessian``) through what the reverse code does besides calling rules:
``numpy.linalg`` rules differentiated by their forward rules, mutation (objects built inside f, list and dict
methods, attribute and item writes: the box store and its tangent), ``out=``, complex values and keyword
calls.  Each is checked against second central differences of f itself (``conftest.hvp_by_differences``),
which shares no code with the layer; what is still refused is an ``UnsupportedError`` naming the call."""
import dataclasses

import numpy as np
import pytest

from tensorlang import ad
from tensorlang.errors import UnsupportedError
from conftest import hvp_by_differences   # tests/ad is on the path (rootdir conftest)


def _check_hvp(f, args, seed=0):
    rng = np.random.default_rng(seed)
    vs = [rng.normal(size=a.shape) for a in args]
    got = ad.hvp(f, tuple(args), tuple(vs))
    for i, (g, want) in enumerate(zip(got, hvp_by_differences(f, list(args), vs))):
        assert g is not None, f"argument {i}: no Hessian-vector product"
        np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-5, err_msg=f"argument {i}")


def _check_hessian(f, x):
    got = np.reshape(ad.hessian(f)(x), (x.size, x.size))
    want = np.stack([hvp_by_differences(f, [x], [e.reshape(x.shape)])[0].ravel() for e in np.eye(x.size)])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


_RNG = np.random.default_rng(7)
_A = _RNG.normal(size=(3, 3)) + 3 * np.eye(3)
_STACK = _RNG.normal(size=(2, 3, 3)) + 3 * np.eye(3)
_B = _RNG.normal(size=3)


# -- numpy.linalg: forward rules (d log|det A| = tr(inv(A) dA), the sign's tangent 0) ---------------------------
LINALG = {
    "slogdet": (lambda a: np.linalg.slogdet(a)[1] ** 2 + np.linalg.slogdet(a)[0] * np.sum(a * a), [_A]),
    "slogdet of a stack, by attribute": (lambda a: np.sum(np.linalg.slogdet(a).logabsdet ** 3), [_STACK]),
    "slogdet of a negative determinant": (lambda a: np.linalg.slogdet(a)[1] * np.sum(a), [-_A]),
    "det and inv": (lambda a: np.linalg.det(a) ** 2 + np.sum(np.linalg.inv(a) ** 2), [_A]),
    "solve in both arguments": (lambda a, b: np.sum(np.linalg.solve(a, b) ** 2), [_A, _B]),
    "solve of a matrix": (lambda a, b: np.sum(np.linalg.solve(a, np.outer(b, b)) ** 2), [_A, _B]),
}


@pytest.mark.parametrize("name", list(LINALG))
def test_hvp_through_linalg(name):
    f, args = LINALG[name]
    _check_hvp(f, args)


def test_hessian_through_slogdet_is_minus_the_inverse_transposed_product():
    got = ad.hessian(lambda a: np.linalg.slogdet(a)[1])(_A)
    inv = np.linalg.inv(_A)
    # d2 log|det A| / dA_ij dA_kl = -inv(A)_li inv(A)_jk
    np.testing.assert_allclose(got, -np.einsum("li,jk->ijkl", inv, inv), rtol=1e-10, atol=1e-12)


def test_jvp_of_linalg_against_central_differences():
    t = _RNG.normal(size=(3, 3))
    for f in (np.linalg.inv, np.linalg.det, lambda a: np.linalg.slogdet(a)[1], lambda a: np.linalg.solve(a, _B)):
        got = ad.jvp(f, (_A,), (t,))[1]
        want = (f(_A + 1e-6 * t) - f(_A - 1e-6 * t)) / 2e-6
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


# -- mutation: the box store and its tangent ---------------------------------------------------------------------
class Layer:
    def __init__(self, w, scale):
        self.w = w
        self.scale = scale * 2.0

    def __call__(self, x):
        return self.scale * np.tanh(self.w * x)


@dataclasses.dataclass
class Pair:
    a: np.ndarray
    b: float


class Bag:
    pass


def _object_built_inside(x):
    layer = Layer(x * x, np.sum(x))
    return np.sum(layer(x) ** 2)


def _dataclass_built_inside(x):
    p = Pair(np.sin(x), np.sum(x) ** 2)
    return np.sum(p.a * p.b)


def _attributes_written(x):
    o = Bag()
    o.a = x * x
    o.b = np.cos(o.a)
    o.a = o.a * o.b
    return np.sum(o.a * x)


def _list_methods(x):
    xs = []
    for i in range(3):
        xs.append(x[i] * x[(i + 1) % 3])
    xs.insert(1, np.sin(x[0]))
    xs.extend([x[2] ** 3, x[1] * x[0]])
    last = xs.pop()
    first = xs.pop(0)
    return sum(v * v for v in xs) * last + first * x[1]


def _dict_update(x):
    d = {"a": x[0] * x[1]}
    d.update({"b": np.exp(x[2]), "c": x[0] ** 2})
    d["a"] = d["a"] * d["b"]
    return d["a"] * d["c"] + d["b"]


def _rnn_into_zeros(x):
    h = np.zeros(4)
    for t in range(1, 4):
        h[t] = np.tanh(0.5 * h[t - 1] + x[t - 1] * x[t % 3])
    return np.sum(h ** 2)


def _list_items_written(x):
    ys = [x[0], x[1], x[2]]
    for i in range(3):
        ys[i] = ys[i] * ys[(i + 1) % 3]
    return ys[0] * ys[1] + np.sin(ys[2])


def _helper_writes(x, out):
    out.append(np.sum(x * x))
    out.append(np.prod(x))


def _mutation_in_a_called_function(x):
    acc = []
    _helper_writes(x, acc)
    _helper_writes(np.sin(x), acc)
    return acc[0] * acc[1] + acc[2] * acc[3]


class Vec:
    def __init__(self, a):
        self.a = a

    def __mul__(self, other):
        return Vec(self.a * (other.a if isinstance(other, Vec) else other))

    def __add__(self, other):
        return Vec(self.a + other.a * other.a)


class Unit:
    def __init__(self, w, act=np.tanh):
        self.w = w
        self.act = act

    def __call__(self, x):
        return self.act(self.w * x)


def _user_operators(x):
    v = Vec(x) * Vec(np.sin(x)) + Vec(x * 2.0)
    return np.sum(v.a ** 2)


def _dataclass_by_keywords(x):
    return np.sum(Pair(a=x * x, b=np.sum(x)).a * Pair(x, b=2.0).b)


def _held_callable_and_default(x):
    return np.sum(Unit(x * x)(x) ** 2)


def _sequence_operators(x):
    xs = [x[0], x[1]] + [x[2] * x[0]]
    ys = xs * 2
    return ys[0] * ys[4] + ys[2] * ys[3]


def _in_place_through_a_view(x):
    y = np.zeros(4)
    y[1:] = x * x
    v = y[1:]
    v *= 3
    return np.sum(y * y)


def _in_place_operators(x):
    y = x.copy()
    y[0] = y[1] * y[2]
    y *= x
    y += np.sin(y)
    return np.sum(y ** 2)


def _builtins_over_an_array(x):
    return max(x) * min(x) + sum(sorted(x)[:2]) * x[0] + max(x, key=abs) * x[1]


def _checkpointed(x):
    return ad.checkpoint(lambda y: np.sum(np.sin(y) * y), x) * np.sum(x)


MUTATION = {
    "an object built inside f, __init__ writing its fields": _object_built_inside,
    "a dataclass built inside f": _dataclass_built_inside,
    "attributes written and read again": _attributes_written,
    "list append, insert, extend, pop": _list_methods,
    "dict update and item writes": _dict_update,
    "an RNN written into np.zeros": _rnn_into_zeros,
    "list items written": _list_items_written,
    "a called function appending to a list": _mutation_in_a_called_function,
    "user __mul__/__add__ building objects": _user_operators,
    "a dataclass built with keywords": _dataclass_by_keywords,
    "a callable held by an object, a default argument of __init__": _held_callable_and_default,
    "list + list, list * int": _sequence_operators,
    "an in-place operator through a view": _in_place_through_a_view,
    "in-place operators on a copy": _in_place_operators,
    "max, min, sorted (with a key) over an array": _builtins_over_an_array,
    "ad.checkpoint": _checkpointed,
}


@pytest.mark.parametrize("name", list(MUTATION))
def test_hvp_through_mutation(name):
    _check_hvp(MUTATION[name], [np.array([0.3, -0.5, 0.8])])


@pytest.mark.parametrize("name", ["an object built inside f, __init__ writing its fields",
                                  "an RNN written into np.zeros"])
def test_hessian_through_mutation(name):
    _check_hessian(MUTATION[name], np.array([0.3, -0.5, 0.8]))


def test_hvp_through_mutation_leaves_no_boxes_behind():
    x, v = np.array([0.3, -0.5, 0.8]), np.array([1.0, 2.0, -1.0])
    first = ad.hvp(_rnn_into_zeros, (x,), (v,))[0]
    ad.hvp(_list_methods, (x,), (v,))
    np.testing.assert_array_equal(ad.hvp(_rnn_into_zeros, (x,), (v,))[0], first)
    np.testing.assert_allclose(ad.gradient(_rnn_into_zeros, x)[0],
                               [(_rnn_into_zeros(x + 1e-6 * e) - _rnn_into_zeros(x - 1e-6 * e)) / 2e-6
                                for e in np.eye(3)], rtol=1e-6, atol=1e-9)


# -- out=: the functional result written into the array --------------------------------------------------------------
def _out_multiply(x):
    y = np.empty_like(x)
    np.multiply(x, x, out=y)
    return np.sum(y * x)


def _out_add_and_tuple(x):
    y = np.zeros(3)
    np.add(np.sin(x), x * x, out=y)
    z = np.empty(3)
    np.exp(y, out=(z,))
    return np.sum(z * y)


def _out_written_again(x):
    y = np.ones(3)
    np.multiply(y, x, out=y)
    np.multiply(y, x, out=y)
    return np.sum(y * np.cos(x))


OUT = {"np.multiply(x, x, out=y)": _out_multiply, "a ufunc into out=(z,)": _out_add_and_tuple,
       "out= the same array as an input": _out_written_again}


@pytest.mark.parametrize("name", list(OUT))
def test_hvp_through_out(name):
    _check_hvp(OUT[name], [np.array([0.3, -0.5, 0.8])])


# -- closures: the generated code's closure factories, differentiated again -------------------------------------------
def _lambda_twice(x):
    g = lambda y: np.sin(y * x)   # noqa: E731
    return np.sum(g(x) * g(2.0 * x))


def _recursive_closure(x):
    def prod(n):
        return x[0] if n == 0 else x[n % 3] * prod(n - 1)
    return prod(4)


def _closure_factory(x):
    def make(a):
        return lambda y: a * y * y
    return make(x[0])(x[1]) + make(x[2])(x[0])


def _nested_def_with_default(x):
    scale = x * 2.0

    def inner(y, k=3.0):
        return np.sum(np.tanh(scale * y) * k)
    return inner(x) + inner(x * x, 1.5)


def _map_of_a_lambda(x):
    s = np.sum(x)
    return sum(map(lambda v: v * s * v, [x[0], x[1], x[2]]))


CLOSURES = {"a lambda called twice": _lambda_twice, "a recursive closure": _recursive_closure,
            "closures made by a factory": _closure_factory, "a nested def with a default": _nested_def_with_default,
            "map of a lambda": _map_of_a_lambda}


@pytest.mark.parametrize("name", list(CLOSURES))
def test_hvp_through_closures(name):
    _check_hvp(CLOSURES[name], [np.array([0.3, -0.5, 0.8])])


# -- keyword calls: arrays passed by NumPy's parameter names ----------------------------------------------------------
KEYWORDS = {
    "np.hstack(tup=...)": lambda x: np.sum(np.hstack(tup=[x, x * x]) ** 2),
    "np.stack(arrays=...)": lambda x: np.sum(np.stack(arrays=[x, x * x], axis=1) ** 3),
    "np.roll(a=..., shift=...)": lambda x: np.sum(np.roll(a=x * x, shift=1) * x),
    "np.tile(reps=..., A=...)": lambda x: np.sum(np.tile(reps=2, A=x * x) * np.tile(x, 2)),
    "np.reshape(..., shape=...)": lambda x: np.sum(np.reshape(x * x, shape=(3, 1)) ** 2),
    "x.astype(np.float64)": lambda x: np.sum(x.astype(np.float64) ** 3),
}


@pytest.mark.parametrize("name", list(KEYWORDS))
def test_gradient_and_hvp_through_keyword_calls(name, check):
    f = KEYWORDS[name]
    x, v = np.array([0.3, -0.5, 0.8]), np.array([1.0, 2.0, -1.0])
    check(f, x)
    _check_hvp(f, [x])
    # reverse over reverse too: the gradient of <grad f, v>
    got, = ad.gradient(lambda y: np.sum(ad.gradient(f, y)[0] * v), x)
    np.testing.assert_allclose(got, hvp_by_differences(f, [x], [v])[0], rtol=1e-4, atol=1e-5)


# -- still refused: a clear error naming the call ---------------------------------------------------------------------
class Grid:
    def __init__(self):
        self.cells = {}

    def __setitem__(self, key, value):
        self.cells[key] = value

    def __getitem__(self, key):
        return self.cells[key]


def test_threads_are_refused_by_name():
    from concurrent.futures import ThreadPoolExecutor

    def f(w):
        with_pool = ThreadPoolExecutor(2)
        out = sum(with_pool.map(lambda x: np.sum(np.tanh(w * x) ** 2), [np.array([1.0, 2.0]), np.array([0.5, -1.0])]))
        with_pool.shutdown()
        return out

    w = np.array([0.3, -0.2])
    with pytest.raises(UnsupportedError, match=r"through the method ThreadPoolExecutor\.map is not supported"):
        ad.hvp(f, (w,), (w,))


def test_hvp_of_a_function_that_takes_a_gradient():
    """A third derivative, which the transform refuses in forward over reverse: of the recordings (``tower``).
    f is 3 sum(x^3), whose Hessian is diag(18 x)."""
    def f(x):
        return ad.gradient(lambda y: np.sum(y ** 3), x)[0] @ x

    x, v = np.array([0.3, -0.5, 0.8]), np.array([1.0, 2.0, -1.0])
    np.testing.assert_allclose(ad.hvp(f, (x,), (v,))[0], 18 * x * v, rtol=1e-12)


def test_item_write_into_a_user_container():
    """Forward over reverse refuses it (``second``): of the recordings (``tower``).  f is sum(x^3)."""
    def f(x):
        g = Grid()
        g[0] = x * x
        return np.sum(g[0] * x)

    x, v = np.array([0.3, -0.5]), np.array([1.0, 2.0])
    np.testing.assert_allclose(ad.gradient(f, x)[0], 3 * x * x)
    np.testing.assert_allclose(ad.hvp(f, (x,), (v,))[0], 6 * x * v, rtol=1e-12)


# -- complex values: paper 002's convention (the gradient of a real loss in z = x + iy is dL/dx + i dL/dy) -----------
def _complex_hvp_by_differences(f, z, v, h=2e-4):
    """The derivative of ``grad f`` along ``v`` in the convention: entry k is ``d<grad f, v>/dx_k + i
    d<grad f, v>/dy_k``, from mixed second central differences of f along ``v`` and the entry's real and
    imaginary directions."""
    out = np.zeros(z.shape, complex)
    for k in np.ndindex(z.shape):
        for unit in (1.0, 1j):
            def at(s, t):
                moved = z + s * h * v
                moved[k] += t * h * unit
                return f(moved)
            out[k] += unit * (at(1, 1) - at(1, -1) - at(-1, 1) + at(-1, -1)) / (4 * h * h)
    return out


COMPLEX = {
    "|sin(z) z|^2": lambda z: np.sum(np.abs(np.sin(z) * z) ** 2),
    "Re(log(z) z)": lambda z: np.real(np.sum(np.log(z) * z)),
    "|outer(z, z) @ z|^2": lambda z: np.sum(np.abs(np.outer(z, z) @ z) ** 2),
    "angle(z) |z|": lambda z: np.sum(np.angle(z) * np.abs(z)),
    "Im(z conj(z^2))": lambda z: np.sum(np.imag(z * np.conj(z * z))),
    "Re(exp(z) / (z + 2))": lambda z: np.sum(np.real(np.exp(z) / (z + 2.0))),
    "a list of complex values written": lambda z: np.real(_complex_list(z)),
}


def _complex_list(z):
    ws = []
    for i in range(3):
        ws.append(z[i] * z[(i + 1) % 3])
    return ws[0] * np.conj(ws[1]) + abs(ws[2]) ** 2


@pytest.mark.parametrize("name", list(COMPLEX))
def test_hvp_of_complex_values(name):
    f = COMPLEX[name]
    z = np.array([0.3 + 0.4j, -0.5 + 0.2j, 0.8 - 0.6j])
    v = np.array([1.0 - 0.5j, 0.2 + 1.0j, -0.7 + 0.3j])
    got, = ad.hvp(f, (z,), (v,))
    np.testing.assert_allclose(got, _complex_hvp_by_differences(f, z, v), rtol=1e-4, atol=1e-5)


def test_hvp_of_a_real_input_mixed_with_complex_values_is_real():
    f = lambda x: np.sum(np.abs(np.exp(1j * x) * (x + 2j)) ** 2)   # noqa: E731
    x, v = np.array([0.3, -0.5, 0.8]), np.array([1.0, 2.0, -1.0])
    got, = ad.hvp(f, (x,), (v,))
    assert got.dtype.kind == "f"
    np.testing.assert_allclose(got, hvp_by_differences(f, [x], [v])[0], rtol=1e-4, atol=1e-5)


def test_a_closure_called_with_keywords_keeps_the_tangent_of_what_it_captures():
    """Forward over reverse through ``g(x, c=3.0)``, ``g`` a closure over ``x``: the tangent of the captured ``x``
    was dropped (the Hessian of ``x * x`` came out 1.0, half of it; 18 of 20 wrong Hessians of a campaign)."""
    import numpy as np
    from tensorlang import ad

    def f(x):
        g = lambda z, c=1.0: z * x * c   # noqa: E731
        return g(x, c=3.0)

    def h(v):
        def inner(z, scale=0.5):
            return np.sum(np.sin(z * v) * scale)
        return inner(v, scale=2.0) + inner(v[::-1])

    assert ad.hessian(f)(0.7) == 6.0 and ad.jvp(ad.grad(f), (0.7,), (1.0,))[1] == 6.0
    v, t = np.array([0.3, -0.5, 0.8]), np.array([1.0, 0.2, -0.4])
    g = ad.grad(h)
    np.testing.assert_allclose(ad.hessian(h)(v) @ t, (g(v + 1e-6 * t) - g(v - 1e-6 * t)) / 2e-6, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(ad.jvp(g, (v,), (t,))[1], ad.hessian(h)(v) @ t, rtol=1e-12, atol=1e-14)


class _Point:
    def __init__(self, x, y=1.0):
        self.x, self.y = x, y

    @property
    def xy(self):
        return self.x * self.y

    @xy.setter
    def xy(self, v):
        self.x = v * v


def test_a_property_and_its_setter_in_forward_over_reverse():
    """A property's getter and setter are code: forward over reverse differentiates them as code (the getter's
    pullback was taken as linear, its second derivative lost: the Hessian of ``Pt(x).sq`` was 0; a setter's
    value was written as an attribute of the tangent: the Hessian of ``x^2 * x`` through it came out 1.4 for
    4.2).  Against reverse over reverse and central differences."""
    from tensorlang import ad

    def getter(x):
        return _Point(x, x).xy

    def setter(x):
        p = _Point(1.0, x)
        p.xy = x
        return p.xy * x   # x^4

    def in_a_loop(x):
        p, acc = _Point(x, 1.0), 0.0
        for _ in range(3):
            acc = acc + p.xy
            p.y = p.y + x
        return acc   # x + x(1 + x) + x(1 + 2x) = 3x + 3x^2

    for f, want in ((getter, lambda x: 2.0), (setter, lambda x: 12 * x * x), (in_a_loop, lambda x: 6.0)):
        for x in (0.7, -1.3):
            g = ad.grad(f)
            assert ad.hessian(f)(x) == pytest.approx(want(x), rel=1e-12)
            assert ad.jvp(g, (x,), (1.0,))[1] == pytest.approx(want(x), rel=1e-12)
            assert ad.grad(g)(x) == pytest.approx(want(x), rel=1e-12)
            assert (g(x + 1e-6) - g(x - 1e-6)) / 2e-6 == pytest.approx(want(x), rel=1e-6)
