"""Every NumPy rule, over Hypothesis-drawn shapes (broadcasting, 0-d, N-D, axis and keepdims variants),
against central differences: the gradient of ``sum(f(args) * w)`` for a random weight ``w``; float32
arguments get float32 gradients equal to the float64 ones; every rule differentiated again (second order): its
Hessian-vector product in all arguments against second central differences of the function itself."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tensorlang import ad

from conftest import central_difference   # tests/ad is on the path (rootdir conftest)

SETTINGS = settings(max_examples=6, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SHAPE = hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=3)
MATRIX_SHAPE = hnp.array_shapes(min_dims=2, max_dims=3, min_side=2, max_side=3)
POS, ANY_, UNIT, BIG = (0.3, 1.5), (-1.5, 1.5), (-0.8, 0.8), (1.2, 2.5)


def objective(out, w):
    """The scalar that is differentiated: ``sum(out * w)`` (summed over the items of a list of results)."""
    if isinstance(out, (list, tuple)):
        total = 0.0
        for o, wi in zip(out, w):
            total = total + np.sum(o * wi)
        return total
    return np.sum(out * w)


def weights(out, rng):
    if isinstance(out, (list, tuple)):
        return [rng.normal(size=np.shape(o)) for o in out]
    return rng.normal(size=np.shape(out))


# name: (function of the arrays, strategy of (shapes, options), value range)
def unary(fn, domain=ANY_):
    return fn, st.tuples(st.tuples(SHAPE), st.just({})), domain


def binary(fn, domain=ANY_):
    return fn, st.tuples(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3)
                         .map(lambda s: s.input_shapes), st.just({})), domain


def reduction(fn, domain=ANY_, keepdims=True):
    @st.composite
    def draw(data):
        shape = data(SHAPE)
        axis = data(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1))) if shape else None
        opts = {"axis": axis}
        if keepdims:
            opts["keepdims"] = data(st.booleans())
        return (shape,), opts
    return fn, draw(), domain


def with_shapes(fn, shapes, domain=ANY_, **opts):
    return fn, st.tuples(st.sampled_from(shapes), st.just(opts)), domain


def _draw(strategy):
    return st.composite(lambda draw: strategy(draw))()


def _matrix(data):
    n = data(st.integers(2, 3))
    batch = data(st.sampled_from([(), (2,)]))
    return (batch + (n, n),), {}


CASES = {
    **{name: unary(getattr(np, name)) for name in
       ["exp", "tanh", "sin", "cos", "negative", "square", "expm1", "arctan", "sinh", "cosh", "positive",
        "exp2", "sinc", "deg2rad", "rad2deg", "arcsinh"]},
    **{name: unary(getattr(np, name), POS) for name in
       ["log", "sqrt", "log1p", "log2", "log10", "reciprocal", "cbrt", "abs", "fabs", "real", "conj"]},
    "tan": unary(np.tan, UNIT), "arcsin": unary(np.arcsin, UNIT), "arccos": unary(np.arccos, UNIT),
    "arctanh": unary(np.arctanh, UNIT), "arccosh": unary(np.arccosh, BIG),
    **{name: binary(getattr(np, name)) for name in
       ["add", "subtract", "multiply", "maximum", "minimum", "arctan2", "logaddexp", "logaddexp2", "hypot",
        "fmax", "fmin"]},
    **{name: binary(getattr(np, name), POS) for name in ["divide", "power", "mod", "fmod"]},
    **{name: reduction(getattr(np, name)) for name in ["sum", "mean", "max", "min", "var", "std"]},
    "prod": reduction(np.prod),
    "cumsum": reduction(np.cumsum, keepdims=False),
    "cumprod": reduction(np.cumprod, POS, keepdims=False),
    "sort": reduction(np.sort, keepdims=False),
    "diff": with_shapes(np.diff, [((4,),), ((3, 4),)]),
    "diff_n2_axis0": with_shapes(lambda a: np.diff(a, 2, axis=0), [((4,),), ((4, 2),)]),
    "dot": with_shapes(np.dot, [((3,), (3,)), ((2, 3), (3,)), ((2, 3), (3, 2)), ((2, 2, 3), (4, 3, 2)), ((), (2,))]),
    "matmul": with_shapes(np.matmul, [((1, 2, 2), (3, 2, 1)), ((2,), (3, 2, 4)), ((3, 4, 2), (2,)), ((2, 3), (3,))]),
    "tensordot": with_shapes(np.tensordot, [((2, 3, 4), (3, 4, 2)), ((2, 3), (2, 3))]),
    "tensordot_axes": with_shapes(lambda a, b: np.tensordot(a, b, axes=([0], [1])), [((3, 2), (2, 3))]),
    "einsum_ij_jk": with_shapes(lambda a, b: np.einsum("ij,jk->ik", a, b), [((2, 3), (3, 4))]),
    "einsum_bij_bjk": with_shapes(lambda a, b: np.einsum("bij,bjk->bik", a, b), [((2, 2, 3), (2, 3, 2))]),
    "einsum_sum": with_shapes(lambda a: np.einsum("ij->j", a), [((3, 2),)]),
    "einsum_chain": with_shapes(lambda a, b: np.einsum("ij,jk,kl->il", a, b, a.T), [((2, 3), (3, 3))]),
    "einsum_implicit": with_shapes(lambda a, b: np.einsum("i,i", a, b), [((3,), (3,))]),
    "inner": with_shapes(np.inner, [((3,), (3,)), ((2, 3), (4, 3))]),
    "outer": with_shapes(np.outer, [((3,), (2,))]),
    "kron": with_shapes(np.kron, [((2,), (3,)), ((2, 2), (2, 3))]),
    "cross": with_shapes(np.cross, [((3,), (3,)), ((2, 3), (3,))]),
    "trace": with_shapes(np.trace, [((3, 3),), ((2, 3, 2),)]),
    "det": (np.linalg.det, _draw(_matrix), ANY_),
    "inv": (np.linalg.inv, _draw(_matrix), ANY_),
    "slogdet": (lambda a: np.linalg.slogdet(a)[1], _draw(_matrix), ANY_),
    # positive definite by Gershgorin (|entries| <= 1.5, n <= 3); NumPy reads one triangle of the argument
    "cholesky": (lambda a: np.linalg.cholesky(a + 6 * np.eye(a.shape[-1])), _draw(_matrix), ANY_),
    "cholesky_upper": (lambda a: np.linalg.cholesky(a + 6 * np.eye(a.shape[-1]), upper=True), _draw(_matrix), ANY_),
    "eigh": (lambda a: np.linalg.eigh(a), _draw(_matrix), ANY_),
    "eigh_upper": (lambda a: np.linalg.eigh(a, "U"), _draw(_matrix), ANY_),
    "eigvalsh": (lambda a: np.linalg.eigvalsh(a, UPLO="U"), _draw(_matrix), ANY_),
    "svd": (lambda a: np.linalg.svd(a), _draw(_matrix), ANY_),
    "svd_reduced": with_shapes(lambda a: np.linalg.svd(a, full_matrices=False), [((3, 2),), ((2, 3),), ((2, 3, 2),)]),
    "svd_values": with_shapes(lambda a: np.linalg.svd(a, False, False), [((3, 2),), ((2, 2, 3),)]),
    "svdvals": (np.linalg.svdvals, _draw(_matrix), ANY_),
    "pinv": with_shapes(np.linalg.pinv, [((3, 2),), ((2, 3),), ((2, 2),), ((2, 3, 2),)]),
    "solve": with_shapes(np.linalg.solve, [((3, 3), (3,)), ((2, 2), (2, 3)), ((2, 3, 3), (2, 3, 1))]),
    "roll": with_shapes(lambda a: np.roll(a, 1, axis=-1), [((3,),), ((2, 3),)]),
    "tile": with_shapes(lambda a: np.tile(a, (2, 1)), [((3,),), ((2, 2),)]),
    "repeat": with_shapes(lambda a: np.repeat(a, 2, axis=0), [((3,),), ((2, 2),)]),
    "flip": with_shapes(np.flip, [((3,),), ((2, 3),)]),
    "rot90": with_shapes(np.rot90, [((2, 3),)]),
    "tril": with_shapes(np.tril, [((3, 3),), ((2, 3),)]),
    "triu": with_shapes(lambda a: np.triu(a, 1), [((3, 3),)]),
    "diag": with_shapes(np.diag, [((3,),), ((3, 3),)]),
    "diagonal": with_shapes(np.diagonal, [((3, 3),), ((2, 3, 3),)]),
    "moveaxis": with_shapes(lambda a: np.moveaxis(a, 0, -1), [((2, 3, 2),)]),
    "swapaxes": with_shapes(lambda a: np.swapaxes(a, 0, 1), [((2, 3),)]),
    "broadcast_to": with_shapes(lambda a: np.broadcast_to(a, (2, 3)), [((3,),), ((1, 3),)]),
    "atleast_2d": with_shapes(np.atleast_2d, [((),), ((3,),)]),
    "atleast_3d": with_shapes(np.atleast_3d, [((3,),)]),
    "split": with_shapes(lambda a: np.split(a, 2), [((4,),), ((2, 3),)]),
    "array_split": with_shapes(lambda a: np.array_split(a, 2, axis=-1), [((3,),), ((2, 3),)]),
    "hstack": with_shapes(lambda a, b: np.hstack([a, b]), [((2,), (3,)), ((2, 1), (2, 2))]),
    "vstack": with_shapes(lambda a, b: np.vstack((a, b)), [((3,), (3,)), ((1, 2), (2, 2))]),
    "dstack": with_shapes(lambda a, b: np.dstack([a, b]), [((2,), (2,))]),
    "column_stack": with_shapes(lambda a, b: np.column_stack([a, b]), [((2,), (2,))]),
    "concatenate": with_shapes(lambda a, b: np.concatenate([a, b], axis=-1), [((2, 2), (2, 3))]),
    "stack": with_shapes(lambda a, b: np.stack([a, b], axis=1), [((2,), (2,))]),
    "pad": with_shapes(lambda a: np.pad(a, 1, constant_values=2.0), [((2,),), ((2, 2),)]),
    "pad_reflect": with_shapes(lambda a: np.pad(a, (1, 2), mode="reflect"), [((3,),)]),
    "append": with_shapes(np.append, [((2,), (3,)), ((2, 2), (3,))]),
    "select": with_shapes(lambda a, b: np.select([a > 0, b > 0], [a, b], 0.5), [((3,), (3,))]),
    "take": with_shapes(lambda a: np.take(a, [0, 2, 2]), [((3,),), ((2, 2),)]),
    "where": with_shapes(lambda a, b: np.where(a > 0, a, b), [((3,), (3,)), ((2, 3), (3,))]),
    "clip": with_shapes(lambda a: np.clip(a, a_min=-0.5, a_max=0.5), [((4,),)]),
    "transpose": with_shapes(lambda a: np.transpose(a, axes=(1, 0, 2)), [((2, 3, 2),)]),
    "reshape": with_shapes(lambda a: np.reshape(a, (-1,)), [((2, 3),)]),
    "linspace": with_shapes(lambda a, b: np.linspace(a, b, 4), [((), ()), ((2,), (2,))]),
    "full": with_shapes(lambda a: np.full((2, 3), a), [((),), ((3,),)]),
    "r_": with_shapes(lambda a, b: np.r_[a, b], [((2,), (3,))]),
    "c_": with_shapes(lambda a, b: np.c_[a, b], [((2,), (2,))]),
}


def _arrays(shapes, domain, rng):
    lo, hi = domain
    return [rng.uniform(lo, hi, size=s) * rng.choice([-1, 1], size=s) ** (domain == ANY_) for s in shapes]


def _closed(fn, w, n):
    """``args -> objective(fn(args), w)`` for n arguments (the transform takes no *args)."""
    if n == 1:
        return lambda a: objective(fn(a), w)
    return lambda a, b: objective(fn(a, b), w)


def _apply(fn, args, opts):
    return fn(*args, **opts) if opts else fn(*args)


@pytest.mark.parametrize("name", sorted(CASES))
def test_rule_first_order(name):
    fn, strategy, domain = CASES[name]

    @SETTINGS
    @given(strategy, st.integers(0, 2 ** 16))
    def run(drawn, seed):
        shapes, opts = drawn
        rng = np.random.default_rng(seed)
        args = _arrays(shapes, domain, rng)
        f = (lambda *a: fn(*a, **opts)) if opts else fn
        w = weights(f(*args), rng)
        F = _closed(_bind(fn, opts), w, len(args))
        got = ad.gradient(F, *args)
        for i, a in enumerate(args):
            want = central_difference(F, args, i)
            np.testing.assert_allclose(got[i], want, rtol=1e-5, atol=1e-6, err_msg=f"{name}: argument {i}")
            assert np.shape(got[i]) == np.shape(a)
        if all(np.ndim(a) for a in args):   # float32 in, float32 out, equal to the float64 gradient
            got32 = ad.gradient(F, *[a.astype(np.float32) for a in args])
            for g32, g in zip(got32, got):
                assert g32.dtype == np.float32, name
                np.testing.assert_allclose(g32, g, rtol=2e-3, atol=2e-3)
    run()


def _bind(fn, opts):
    if not opts:
        return fn
    axis, keepdims = opts.get("axis"), opts.get("keepdims")
    if keepdims is None:
        return lambda a: fn(a, axis=axis)
    return lambda a: fn(a, axis=axis, keepdims=keepdims)


def _second_difference(F, args, vs, h=2e-4):
    """The Hessian-vector product of F at ``args`` along ``vs``, entry by entry, from F alone: the mixed
    second central difference ``(F(x+hv+he) - F(x+hv-he) - F(x-hv+he) + F(x-hv-he)) / 4h^2`` (no AD)."""
    def at(s, i, k, t):
        moved = [a + s * h * v for a, v in zip(args, vs)]
        e = np.zeros(np.shape(args[i]))
        e[k] = t * h
        moved[i] = moved[i] + e
        return F(*moved)
    return [np.array([(at(1, i, k, 1) - at(1, i, k, -1) - at(-1, i, k, 1) + at(-1, i, k, -1)) / (4 * h * h)
                      for k in np.ndindex(np.shape(a))]).reshape(np.shape(a)) for i, a in enumerate(args)]


def _inner(grads, vs):
    total = 0.0
    for g, v in zip(grads, vs):
        total = total + np.sum(g * v)
    return total


def _hvp(F, vs):
    """``args -> <gradient of F at args, vs>``, whose gradient is the Hessian-vector product."""
    if len(vs) == 1:
        return lambda a: _inner(ad.gradient(F, a), vs)
    return lambda a, b: _inner(ad.gradient(F, a, b), vs)


@pytest.mark.parametrize("name", sorted(CASES))
def test_rule_second_order(name):
    """The Hessian-vector product in every argument (``ad.gradient`` of ``<ad.gradient(F), v>``) against
    the mixed second central difference of F itself; None (no dependence) must be a zero there.  Random
    points are away from kinks almost surely, where ``abs``, ``max``, ``maximum``, ``clip``, ``sort`` ...
    have a second derivative of 0, which is checked too."""
    fn, strategy, domain = CASES[name]

    @settings(SETTINGS, max_examples=3)
    @given(strategy, st.integers(0, 2 ** 16))
    def run(drawn, seed):
        shapes, opts = drawn
        rng = np.random.default_rng(seed)
        args = _arrays(shapes, domain, rng)
        g = _bind(fn, opts)
        w = weights(g(*args), rng)
        vs = [rng.normal(size=np.shape(a)) for a in args]
        F = _closed(g, w, len(args))
        got = ad.gradient(_hvp(F, vs), *args)
        want = _second_difference(F, args, vs)
        for i, (gi, wi) in enumerate(zip(got, want)):
            gi = np.zeros_like(wi) if gi is None else gi
            assert np.shape(gi) == np.shape(wi), f"{name}: argument {i}"
            np.testing.assert_allclose(gi, wi, rtol=1e-4, atol=1e-5, err_msg=f"{name}: argument {i}")
    run()


def test_docs_table_of_numpy_coverage_is_in_sync():
    from pathlib import Path

    from tensorlang.derive.ad.coverage import numpy_coverage
    text = (Path(__file__).resolve().parents[2] / "docs" / "ad.md").read_text()
    table = text.split("<!-- numpy-coverage -->\n")[1].split("<!-- /numpy-coverage -->")[0]
    assert table == numpy_coverage(), "regenerate the table in docs/ad.md from derive/ad/coverage.py"
