"""NumPy rules called the ways users call them: every argument that carries a gradient (``initial``, the
right-hand side of ``solve``, numbers and lists among the arrays), NumPy's keyword names (``np.max(a=x)``),
axes by position (``x.min(1)``), ``order="F"``, ``axis=None``, ``where=``, ``out=``, methods, operands of
other shapes (``np.outer`` of matrices, ``np.kron`` of a number), complex values through ``abs`` and
``sign``; each against central differences of the function alone at first order (``ad.gradient``), in
forward mode (``ad.jvp``), forward over reverse (``ad.hvp``) and reverse over reverse (``ad.gradient`` of
a function that calls ``ad.gradient``).  Calls whose derivative the rules do not give (``np.max(x,
where=m)``, ``np.pad(x, 1, mode="mean")``, ufuncs with ``where=``) raise ``UnsupportedError`` naming
the cause, in every mode."""
import dataclasses
import functools

import numpy as np
import pytest
import scipy.special as sc

from tensorlang import ad
from tensorlang.errors import UnsupportedError


def _scaled(x, scale=1.0, shift=0.0):
    return np.sum((x * scale + shift) ** 3)


class _Model:
    @classmethod
    def cubed(cls, x, k=1.0):
        return np.sum(x ** 3) * k


def _flat_written(x, where):
    y = x * 1.0
    y.flat[where] = x.flat[0] ** 2
    return y


def _list_written(x):
    y = x * 1.0
    y[[0, 0]] = [x[1], x[2] ** 2]   # (a repeated index: the last write wins)
    return y


@dataclasses.dataclass
class _Scaled:
    a: np.ndarray
    scale: float = 1.0
    shift: list = dataclasses.field(default_factory=lambda: [0.5])
    scaled: np.ndarray = dataclasses.field(init=False)

    def __post_init__(self):   # (a field computed from the arguments: its gradient had been dropped)
        self.scaled = self.a * self.scale + self.shift[0]


def _post_init_energy(x):
    return np.sum(_Scaled(x, x[1]).scaled ** 3)


class _Computed:
    def __init__(self, w):
        self.w = w

    def __getattr__(self, name):   # (its Hessian-vector product had taken the attribute as linear in w)
        if name == "squared":
            return self.w ** 2
        raise AttributeError(name)


def _popped_and_inserted(items):
    first = items.pop(0)   # (reverse over reverse through pop and insert had been wrong: their recording's now)
    items.insert(1, first * 2)
    return items[0] * items[1] ** 2 + items[2]


RNG = np.random.default_rng(7)
X = RNG.uniform(0.3, 1.5, (2, 3)) * np.array([1, -1, 1])
X3 = RNG.uniform(0.3, 1.5, (2, 3, 2))
V = np.array([0.4, 0.9, 1.3])
W = np.array([1.1, -0.6, 0.8])
M = RNG.normal(size=(3, 3)) + 3 * np.eye(3)
MB = RNG.normal(size=(2, 3, 3)) + 3 * np.eye(3)
Z = V + 1j * W
MASK = np.array([[True, False, True], [False, True, True]])
H1, H2 = 1e-6, 2e-4


def _vec(a):
    return np.array(a, dtype=np.result_type(np.asarray(a).dtype, float))


def _like(v, a):
    if isinstance(a, np.ndarray):
        return v
    if isinstance(a, list):
        return [float(t) for t in v]
    return complex(v) if isinstance(a, complex) else float(v)


def _moved(args, vs, s):
    return [_like(_vec(a) + s * v, a) for a, v in zip(args, vs)]


def _differences(f, args, i):
    """The gradient in argument i from central differences (``dL/dx + i dL/dy`` for a complex one)."""
    x = _vec(args[i])
    g = np.zeros(x.shape, dtype=x.dtype)
    for k in np.ndindex(x.shape):
        for d in ([1.0, 1j] if x.dtype.kind == "c" else [1.0]):
            up, down = x.copy(), x.copy()
            up[k] += H1 * d
            down[k] -= H1 * d
            g[k] += d * (f(*args[:i], _like(up, args[i]), *args[i + 1:])
                         - f(*args[:i], _like(down, args[i]), *args[i + 1:])) / (2 * H1)
    return g


def _along(f, args, vs, h):
    return (f(*_moved(args, vs, h)) - f(*_moved(args, vs, -h))) / (2 * h)


def _inner(gs, vs):
    total = 0.0
    for g, v in zip(gs, vs):
        total = total + np.real(np.sum(np.conj(v) * g))
    return total


def _directions(args):
    rng = np.random.default_rng(3)
    vs = []
    for a in args:
        v = rng.normal(size=np.shape(a))
        vs.append(v + 1j * rng.normal(size=np.shape(a)) if _vec(a).dtype.kind == "c" else v)
    return vs


def _second(f, vs, n):
    """``args -> <ad.gradient(f, *args), vs>``, whose gradient is the Hessian-vector product."""
    if n == 1:
        return lambda a: _inner(ad.gradient(f, a), vs)
    return lambda a, b: _inner(ad.gradient(f, a, b), vs)


def _check(got, want, args, label):
    for i, (g, w, a) in enumerate(zip(got, want, args)):
        assert g is not None, f"{label}: argument {i} has no gradient"
        assert np.shape(g) == np.shape(a), f"{label}: argument {i} has shape {np.shape(g)}"
        np.testing.assert_allclose(np.asarray(g, dtype=w.dtype), w, rtol=2e-4, atol=2e-5,
                                   err_msg=f"{label}: argument {i}")


def run(mode, f, args):
    vs = _directions(args)
    tangents = [_like(v, a) for v, a in zip(vs, args)]
    if mode == "grad":
        _check(ad.gradient(f, *args), [_differences(f, args, i) for i in range(len(args))], args, mode)
        return
    if mode == "jvp":
        ty = ad.jvp(f, tuple(args), tuple(tangents))[1]
        np.testing.assert_allclose(ty, _along(f, args, vs, H1), rtol=2e-4, atol=2e-5)
        return
    want = [_differences(lambda *b: _along(f, list(b), vs, H2), args, i) for i in range(len(args))]
    if mode == "hvp":
        _check(ad.hvp(f, tuple(args), tuple(tangents)), want, args, mode)
    else:
        _check(ad.gradient(_second(f, tangents, len(args)), *args), want, args, mode)


ALL = ("grad", "jvp", "hvp", "rr")
# name: (function, arguments, modes); each was a wrong derivative or a raw exception in some mode
CASES = {
    "sum_initial": (lambda x, a: np.sin(np.sum(x, initial=a)), [X, 0.7], ALL),
    "sum_initial_constant": (lambda x: np.sin(np.sum(x, axis=1, initial=1.0)).sum(), [X], ALL),
    "sum_where": (lambda x: np.sum(np.sin(np.sum(x, axis=1, where=MASK))), [X], ("grad", "jvp", "hvp")),
    "sum_where_all": (lambda x: np.sin(np.sum(x, where=MASK)), [X], ("grad", "jvp", "hvp")),
    "mean_where": (lambda x: np.sin(np.mean(x, where=MASK)), [X], ALL),
    "mean_where_axis": (lambda x: np.sum(np.sin(np.mean(x, axis=0, where=MASK))), [X], ALL),
    "sum_keyword_a": (lambda x: np.sum(np.sin(np.sum(a=x, axis=0))), [X], ALL),
    "max_keyword_a": (lambda x: np.max(a=x) ** 2, [X], ("grad", "hvp", "rr")),
    "max_initial_wins": (lambda x, a: np.max(x, initial=a) ** 2 + np.sum(x ** 3), [X, 3.0], ALL),
    "max_initial_loses": (lambda x: np.max(x, initial=0.0) ** 3, [X], ALL),
    "max_initial_axis": (lambda x, a: np.sum(np.max(x, axis=1, initial=a) ** 3), [X, 0.9], ALL),
    "max_initial_by_position": (lambda x, a: np.sum(np.max(x, 0, None, False, a) ** 3), [X, 0.9], ALL),
    "min_method_initial": (lambda x, a: np.sum(x.min(axis=0, initial=a) ** 3), [X, -0.5], ALL),
    "method_max_initial": (lambda x, a: x.max(initial=a) ** 2 + np.sum(x ** 3), [X, 1.0], ALL),
    "sum_method_initial": (lambda x, a: np.sin(x.sum(axis=1, initial=a)).sum(), [X, 0.7], ALL),
    "clip_method_min_argument": (lambda x, a: np.sum(x.clip(min=a) ** 3), [X, 0.2], ALL),
    "clip_method_both_arguments": (lambda x, a: np.sum(x.clip(-a, max=a) ** 3), [X, 0.9], ALL),
    "clip_keyword_a_min_argument": (lambda x, a: np.sum(np.clip(x, a_min=a, a_max=None) ** 3), [X, 0.2], ALL),
    "diagonal_method": (lambda m: np.sum(m.diagonal(offset=-1) ** 3), [M], ALL),
    "swapaxes_method": (lambda x: np.sum(np.sin(x.swapaxes(0, 1)) * np.arange(6).reshape(3, 2)), [X], ALL),
    "repeat_method": (lambda x: np.sum(x.repeat(2, axis=1) ** 3), [X], ALL),
    "take_method": (lambda x: np.sum(x.take([0, 2, 2], axis=1) ** 3), [X], ALL),
    "round_method": (lambda x: np.sum(x.round(2) * x ** 2), [X], ALL),
    "astype_keyword_dtype": (lambda x: np.sum(x.astype(dtype=np.float64) ** 3), [X], ALL),
    "trapezoid_list_x": (lambda y: np.trapezoid(y ** 2, x=[0.0, 0.5, 2.0]), [V], ALL),
    "full_like_keyword_fill_value": (lambda x, a: np.sum(np.full_like(x, fill_value=a) * x), [X, 0.7], ALL),
    "stack_keyword_arrays": (lambda a, b: np.sum(np.stack(arrays=[a, b], axis=1) ** 3), [V, W], ALL),
    "dot_keyword_b": (lambda a, b: np.sum(np.dot(a, b=b) ** 2), [X, V], ALL),
    "solve_keywords": (lambda a, b: np.sum(np.linalg.solve(a=a, b=b) ** 2), [M, V], ALL),
    "builtin_sum_start": (lambda x, a: sum([x[0], x[1]], start=a) ** 2, [V, 0.7], ALL),
    "partial_keyword": (lambda x, a: functools.partial(_scaled, scale=a)(x), [V, 0.7], ALL),
    "partial_of_partial": (lambda x, a: functools.partial(functools.partial(_scaled, x), a)(shift=a), [V, 0.7], ALL),
    "classmethod_keyword": (lambda x, a: _Model.cubed(x, k=a), [V, 0.7], ALL),
    "softmax_axis": (lambda x: np.sum(sc.softmax(x, axis=1) * np.arange(6).reshape(2, 3)), [X], ALL),
    "log_softmax": (lambda x: np.sum(sc.log_softmax(x) * np.arange(6).reshape(2, 3)), [X], ALL),
    "object_array": (lambda x: np.sum(np.array([x[0], x[1] * x[2]], dtype=object) * np.array([1.0, 2.0])) ** 2,
                     [V], ALL),
    "zip_strict": (lambda x: sum(a * b * a for a, b in zip(x, W, strict=True)), [V], ALL),
    "float64_of_entry": (lambda x: np.float64(x[0]) ** 2 * x[1] + np.sum(np.float64(x) ** 3), [V], ALL),
    "mT_attribute": (lambda x: np.sum(x.mT @ x * np.arange(9).reshape(3, 3)), [X], ALL),
    "iterating_flat": (lambda x: sum(v ** 3 * (i + 1) for i, v in enumerate(x.flat)), [X], ALL),
    "writing_flat_item": (lambda x: np.sum(_flat_written(x, 1) ** 2), [X], ALL),
    "writing_flat_slice_of_transpose": (lambda x: np.sum(_flat_written(x.T, slice(1, 4)) ** 2 * np.arange(6)
                                                         .reshape(3, 2)), [X], ALL),
    "list_into_repeated_index": (lambda x: np.sum(_list_written(x) ** 3), [V], ALL),
    "item_by_tuple": (lambda x: x.item((1, 2)) ** 3 * x[0, 0], [X], ALL),
    "dataclass_post_init": (lambda x: _post_init_energy(x), [V], ALL),
    "dataclass_post_init_keywords": (lambda x: np.sum(_Scaled(x, scale=x[0]).scaled ** 2), [V], ALL),
    "class_getattr": (lambda x: np.sum(_Computed(x).squared * x), [V], ALL),
    "list_pop_and_insert": (lambda x: _popped_and_inserted(list(x)), [V], ALL),
    "max_axis_by_position": (lambda x: np.sum(np.max(x, 0) ** 2), [X], ALL),
    "min_method_axis_by_position": (lambda x: np.sum(x.min(1) ** 2), [X], ALL),
    "max_keepdims_by_position": (lambda x: np.sum(x.max(1, None, True) * x), [X], ALL),
    "reshape_order_F": (lambda x: np.sum(np.sin(np.reshape(x, (3, 2), order="F")) * np.arange(6).reshape(3, 2)),
                        [X], ALL),
    "reshape_method_order_F": (lambda x: np.sum(np.sin(x.reshape(-1, order="F")) * np.arange(6)), [X], ALL),
    "ravel_order_F": (lambda x: np.sum(np.sin(np.ravel(x, order="F")) * np.arange(6)), [X], ALL),
    "ravel_keyword_a": (lambda x: np.sum(np.ravel(a=x) * np.arange(6) * x.ravel()), [X], ("grad", "hvp", "rr")),
    "squeeze_keyword_a": (lambda x: np.sum(np.squeeze(a=x[None], axis=0) ** 3), [X], ("grad", "hvp", "rr")),
    "expand_dims_keyword_a": (lambda x: np.sum(np.expand_dims(a=x, axis=0) ** 3), [X], ("grad", "hvp", "rr")),
    "concatenate_axis_none": (lambda x, y: np.sum(np.sin(np.concatenate((x, y), axis=None)) * np.arange(9)),
                              [X, V], ALL),
    "concatenate_list_with_number": (lambda x, a: np.sum(np.concatenate([x, [a, 1.0]]) ** 3), [V, 0.7], ALL),
    "where_one_argument": (lambda x: np.sum(x[np.where(x > 0)] ** 3), [X], ALL),
    "outer_of_matrices": (lambda a, b: np.sum(np.outer(a, b) ** 2), [X, V], ALL),
    "outer_of_number": (lambda a, b: np.sum(np.outer(a, b) ** 2), [0.5, V], ALL),
    "kron_of_number": (lambda a, b: np.sum(np.kron(a, b) ** 2), [0.5, V], ALL),
    "solve_stack_one_right_hand_side": (lambda a, b: np.sum(np.linalg.solve(a, b) ** 2), [MB, V], ALL),
    "solve_right_hand_side": (lambda b: np.sum(np.linalg.solve(M, b) ** 2), [V], ALL),
    "clip_method_max": (lambda x: np.sum(x.clip(max=0.5) ** 2), [X], ALL),
    "transpose_method": (lambda x: np.sum(np.sin(x.transpose()) * np.arange(6).reshape(3, 2)), [X], ALL),
    "sum_out": (lambda x: np.sum(np.sum(x, axis=0, out=np.empty(3)) ** 2), [X], ("grad", "jvp", "hvp")),
    "sum_method_out": (lambda x: np.sum(x.sum(axis=0, out=np.empty(3)) ** 2), [X], ("grad", "jvp", "hvp")),
    "minimum_with_list": (lambda x: np.sum(np.minimum(x, [0.5, 0.6, 0.7]) ** 2), [V], ALL),
    "r_with_number": (lambda x, a: np.sum(np.r_[x, a, 1.0] ** 3), [V, 0.3], ALL),
    "dot_with_list": (lambda x: np.dot(x, [1.0, 2.0, 3.0]) ** 2, [V], ALL),
    "complex_abs": (lambda z: np.sum(np.abs(z) ** 2), [Z], ALL),
    "complex_abs_of_product": (lambda z: np.sum(np.abs(z * z + 1)), [Z], ALL),
    "complex_abs_of_conj_method": (lambda z: np.sum(np.abs(z.conj() * Z)), [Z], ALL),
    "astype_int_times_x": (lambda x: np.sum(x.astype(int) * np.sin(x)), [X], ALL),
    "ufunc_dtype": (lambda x: np.sum(np.multiply(x, np.sin(x), dtype=np.float64)), [X], ALL),
    "complex_real_of_view": (lambda z: np.sum(np.real(z) * np.imag(z) ** 2), [Z], ALL),
    "complex_sign": (lambda z: np.sum(np.real(np.sign(z) * W)), [Z], ALL),
}


@pytest.mark.parametrize("name,mode", [(n, m) for n, (_, _, modes) in CASES.items() for m in modes])
def test_rule_arguments(name, mode):
    f, args, _ = CASES[name]
    run(mode, f, [a.copy() if isinstance(a, np.ndarray) else a for a in args])


def test_float32_gradients_and_hessian_vector_products_of_keyword_calls_stay_float32():
    x = X.astype(np.float32)
    for f in (lambda x: np.sum(np.sin(np.sum(x, axis=1, where=MASK))), lambda x: np.sin(np.mean(x, where=MASK)),
              lambda x: np.sum(np.sin(x.reshape(-1, order="F")) * np.arange(6)), lambda x: np.sum(x.min(1) ** 2)):
        g, = ad.gradient(f, x)
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, ad.gradient(f, X)[0], rtol=1e-3, atol=1e-3)
        h, = ad.hvp(f, (x,), (np.ones_like(x),))
        assert h.dtype == np.float32
        np.testing.assert_allclose(h, ad.hvp(f, (X,), (np.ones_like(X),))[0], rtol=1e-3, atol=1e-3)


REFUSED = {
    "max_where": (lambda x: np.max(x, where=MASK, initial=-9.0) ** 2, "where"),
    "prod_initial": (lambda x: np.prod(x, initial=2.0), "initial"),
    "var_where": (lambda x: np.var(x, where=MASK), "where"),
    "multiply_where": (lambda x: np.sum(np.multiply(x, 2.0, where=MASK, out=np.zeros((2, 3)))), "where|out="),
    "pad_mean": (lambda x: np.sum(np.pad(x, 1, mode="mean") * np.arange(20).reshape(4, 5)), "mean"),
    "pad_linear_ramp": (lambda x: np.sum(np.pad(x, 1, mode="linear_ramp", end_values=0.5) ** 2), "linear_ramp"),
    "pad_reflect_odd": (lambda x: np.sum(np.pad(x, 1, mode="reflect", reflect_type="odd") ** 2), "odd"),
    "iterating_ndenumerate": (lambda x: sum(v * i[1] for i, v in np.ndenumerate(x)) ** 2, "ndenumerate|as_sequence"),
    "reshape_order_A": (lambda x: np.sum(np.reshape(x, -1, order="A") * np.arange(6)), "order"),
}


@pytest.mark.parametrize("name,mode", [(n, m) for n in REFUSED for m in ALL])
def test_refused(name, mode):
    f, cause = REFUSED[name]
    with pytest.raises(UnsupportedError, match=cause):
        run(mode, f, [X.copy()])


@pytest.mark.parametrize("mode", ["grad", "jvp"])
def test_an_attribute_of_an_array_without_a_rule_is_refused(mode):
    """``x[:, :2].base`` (an attribute that holds the entries of another array): its gradient had been dropped, as
    that of ``x.mT`` (now a rule) was, a wrong derivative with no error; refused by name once a gradient reaches it."""
    with pytest.raises(UnsupportedError, match="the attribute base of an array"):
        run(mode, lambda x: np.sum(x[:, :2].base ** 2), [X.copy()])
