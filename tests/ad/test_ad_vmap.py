"""``ad.vmap`` against a Python loop over the batch (and ``jax.vmap`` where JAX is installed): elementwise
operations with batched, plain and scalar operands, reductions, matmul, einsum, indexing, ``in_axes`` and
``out_axes``, structured outputs, nested vmaps, its composition with ``ad.grad``/``ad.jacobian``/``ad.hessian``,
and the refusals (control flow on a batched value, a function without batch rule, ``out=``)."""
from __future__ import annotations

import numpy as np
import pytest

import tensorlang as tl
from tensorlang import ad
from oracles import differenced_jacobian
from tensorlang.errors import UnsupportedError

RNG = np.random.default_rng(7)


def _loop(f, args, in_axes=0, out_axes=0):
    """The oracle: ``f`` called on each example, the outputs stacked (leaf by leaf) along ``out_axes``."""
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    size = next(np.shape(a)[k] for a, k in zip(args, axes) if k is not None)
    outs = [f(*(a if k is None else np.take(a, i, axis=k) for a, k in zip(args, axes))) for i in range(size)]
    return _stacked(outs, out_axes)


def _stacked(outs, out_axes):
    first = outs[0]
    if isinstance(first, (tuple, list)):
        return type(first)(_stacked([o[k] for o in outs], out_axes) for k in range(len(first)))
    if isinstance(first, dict):
        return {k: _stacked([o[k] for o in outs], out_axes) for k in first}
    return np.stack([np.asarray(o) for o in outs], axis=out_axes)


def _same(got, want):
    if isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
    elif isinstance(want, dict):
        assert got.keys() == want.keys()
        for k in want:
            _same(got[k], want[k])
    else:
        assert np.shape(got) == np.shape(want), (np.shape(got), np.shape(want))
        assert np.asarray(got).dtype == np.asarray(want).dtype, (np.asarray(got).dtype, np.asarray(want).dtype)
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def check(f, *args, in_axes=0, out_axes=0):
    """``ad.vmap(f, in_axes, out_axes)(*args)`` equals the loop, and ``f`` ran once."""
    calls = []

    def counted(*a):
        calls.append(1)
        return f(*a)
    got = ad.vmap(counted, in_axes, out_axes)(*args)
    assert len(calls) == 1
    _same(got, _loop(f, args, in_axes, out_axes))
    return got


def _jax_check(f, jf, *args, in_axes=0):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    np.testing.assert_allclose(ad.vmap(f, in_axes)(*args), jax.vmap(jf, in_axes)(*args), rtol=1e-9, atol=1e-12)


# -- elementwise --------------------------------------------------------------------------------------------
def test_a_batch_of_scalars_plus_a_plain_vector_of_the_batch_size():
    xs = RNG.normal(size=3)   # B == 3 == the plain operand's length: NumPy's own broadcast would give (3,)
    got = check(lambda x: x + np.arange(3.0), xs)
    assert got.shape == (3, 3)


@pytest.mark.parametrize("b", [1, 3, 4])
def test_elementwise_with_batched_plain_and_scalar_operands(b):
    xs, ys, c = RNG.normal(size=(b, 3)), RNG.normal(size=(b,)), RNG.normal(size=(3, 3))
    check(lambda x, y: np.sin(x) * y + 2.0 - x / (1 + y ** 2), xs, ys)
    check(lambda x: c * x + np.maximum(x, 0.1) ** 2, xs)
    check(lambda y: c - y, ys)
    check(lambda x: np.where(x > 0, x, -2 * x) + np.clip(x, -0.5, 0.5), xs)
    check(lambda x, y: (x >= y) & (x < 1.0), xs, ys)


def test_float32_stays_float32():
    xs = RNG.normal(size=(4, 3)).astype(np.float32)
    check(lambda x: (x * 2.0, x[0] + 1, np.sum(x)), xs)
    check(ad.grad(lambda x: np.sum(np.sin(x) * 2.0)), xs)
    check(ad.hessian(lambda x: np.sum(np.sin(x) * x[0])), xs)


def test_random_broadcasts_of_batched_and_plain_operands():
    rng = np.random.default_rng(11)
    for _ in range(300):
        b = int(rng.integers(1, 4))
        full = tuple(int(v) for v in rng.choice([1, 2, 3], size=rng.integers(0, 4)))
        shapes = [full[len(full) - int(rng.integers(0, len(full) + 1)):] for _ in range(3)]
        shapes = [tuple(1 if rng.random() < 0.3 else n for n in s) for s in shapes]
        batched = [bool(rng.random() < 0.6) for _ in range(3)]
        batched[0] = True
        args = [rng.normal(size=(b, *s)) if m else rng.normal(size=s) for s, m in zip(shapes, batched)]
        axes = tuple(0 if m else None for m in batched)
        check(lambda u, v, w: np.where(u > v, u * w, np.maximum(v, w) - u), *args, in_axes=axes)


def test_elementwise_matches_jax():
    jnp = pytest.importorskip("jax.numpy")
    xs, c = RNG.normal(size=(3,)), np.arange(3.0)
    _jax_check(lambda x: np.exp(x) + c, lambda x: jnp.exp(x) + c, xs)


def test_a_plain_argument_and_in_axes():
    xs, w = RNG.normal(size=(4, 5)), RNG.normal(size=(4,))
    check(lambda w, x: x * w, w, xs, in_axes=(None, 1))
    check(lambda x: np.cumsum(x), xs, in_axes=1, out_axes=1)
    check(lambda x, y: x - y, xs, xs.T, in_axes=(0, 1))


# -- reductions ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["sum", "mean", "prod", "max", "min", "any", "all", "var", "std"])
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2), 1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions(name, axis, keepdims):
    xs = RNG.normal(size=(3, 2, 3, 4))
    check(lambda x: getattr(np, name)(x, axis=axis, keepdims=keepdims), xs)
    check(lambda x: getattr(x, name)(axis=axis, keepdims=keepdims), xs)


@pytest.mark.parametrize("name", ["argmax", "argmin", "cumsum", "sort", "argsort"])
@pytest.mark.parametrize("axis", [None, 0, -1])
def test_functions_along_an_axis(name, axis):
    xs = RNG.normal(size=(3, 2, 3))
    check(lambda x: getattr(np, name)(x, axis=axis), xs)


@pytest.mark.parametrize("axis", [None, 1, -1])
def test_argmax_keepdims(axis):
    check(lambda x: (np.argmax(x, axis=axis, keepdims=True), np.argmin(x, axis=axis, keepdims=True)),
          RNG.normal(size=(3, 2, 4)))


def test_ufunc_reduce_and_logsumexp():
    xs = RNG.normal(size=(5, 3, 4))
    check(lambda x: np.add.reduce(x, axis=-1), xs)

    def logsumexp(x):
        m = np.max(x, axis=-1, keepdims=True)
        return np.log(np.sum(np.exp(x - m), axis=-1)) + m[..., 0]
    check(logsumexp, xs)


# -- shapes ----------------------------------------------------------------------------------------------------
def test_shape_functions():
    xs, p = RNG.normal(size=(3, 2, 3)), RNG.normal(size=(2, 3))
    check(lambda x: x.reshape(3, -1), xs)
    check(lambda x: np.reshape(x, 6), xs)
    check(lambda x: (x.T, np.transpose(x, (1, 0)), np.swapaxes(x, 0, 1), np.moveaxis(x, 0, -1)), xs)
    check(lambda x: (np.expand_dims(x, 1), np.expand_dims(x, (0, -1)), np.squeeze(x[:, :1]), x.ravel()), xs)
    check(lambda x: (np.concatenate([x, p], axis=1), np.concatenate([p, x]), np.stack([x, p], axis=-1)), xs)
    check(lambda x: (np.hstack([x, p]), np.vstack([x, p]), np.hstack([x[0], p[0]])), xs)
    check(lambda x: (np.broadcast_to(x[0], (4, 3)), np.zeros_like(x), np.ones_like(x), np.full_like(x, 2.5)), xs)
    check(lambda x: (np.outer(x[0], x[1]), np.outer(p[0], x[1]), np.trace(x[:, :2]), np.diagonal(x)), xs)
    check(lambda x: x.sum() + x.size + x.ndim + len(x) + x.shape[1], xs)


# -- contractions and linear algebra ------------------------------------------------------------------------------
@pytest.mark.parametrize("a_batched", [True, False])
@pytest.mark.parametrize("b_batched", [True, False])
@pytest.mark.parametrize("a_shape,b_shape", [((3,), (3,)), ((3,), (3, 4)), ((4, 3), (3,)), ((4, 3), (3, 2)),
                                             ((2, 4, 3), (3, 5)), ((3,), (2, 3, 4)), ((2, 4, 3), (2, 3, 5))])
def test_matmul_every_combination(a_batched, b_batched, a_shape, b_shape):
    if not (a_batched or b_batched):
        return
    b = 3   # a batch as long as a vector operand: a wrong alignment would not fail by shape
    a = RNG.normal(size=(b, *a_shape) if a_batched else a_shape)
    m = RNG.normal(size=(b, *b_shape) if b_batched else b_shape)
    axes = (0 if a_batched else None, 0 if b_batched else None)
    check(lambda u, v: u @ v, a, m, in_axes=axes)
    check(np.matmul, a, m, in_axes=axes)
    if len(a_shape) <= 2 and len(b_shape) <= 2:
        check(np.dot, a, m, in_axes=axes)


def test_einsum():
    xs, ys, p = RNG.normal(size=(4, 2, 3)), RNG.normal(size=(4, 3)), RNG.normal(size=(3, 5))
    check(lambda x, y: np.einsum("ij,j->i", x, y), xs, ys)
    check(lambda x: np.einsum("ij,jk", x, p), xs)
    check(lambda x: np.einsum("ij->", x), xs)
    check(lambda y: np.einsum("i,i", y, y), ys)
    check(lambda x: np.einsum("...j,jk->...k", x, p), xs)


def test_tensordot():
    xs, ys, p = RNG.normal(size=(4, 2, 3)), RNG.normal(size=(4, 3, 2)), RNG.normal(size=(3, 5))
    check(lambda x, y: (np.tensordot(x, np.swapaxes(y, 0, 1)), np.tensordot(x, y, axes=1),
                        np.tensordot(x, y, axes=([1, 0], [0, 1]))), xs, ys)
    check(lambda x: (np.tensordot(x, p, axes=(-1, 0)), np.tensordot(p, x, axes=([0], [1])), np.tensordot(x, p, 0)),
          xs)


def test_more_functions_of_axes():
    xs, p3 = RNG.normal(size=(4, 3, 3)), RNG.normal(size=3)
    check(lambda x: (np.pad(x, 1), np.pad(x, ((0, 1), (2, 0))), np.pad(x, (1, 2), mode="edge"),
                     np.pad(x, 2, mode="reflect"), np.pad(x, 1, constant_values=3.0),
                     np.take_along_axis(x, np.argsort(x, axis=0), axis=0), np.split(x, 3, axis=1),
                     np.array_split(x, [1], axis=-1)), xs)
    check(lambda x: (np.diff(x), np.diff(x, 2, axis=0), np.roll(x, 1), np.roll(x, -1, axis=1),
                     np.roll(x, (1, 2), (0, 1))), xs)
    check(lambda x: (np.tril(x), np.triu(x, 1), np.linalg.matrix_power(x, 3), np.cross(x, p3), np.cross(p3, x[0]),
                     np.inner(x, p3), np.inner(x[0], x), np.isclose(x, 0.5, atol=0.6), np.nan_to_num(x / x[0, 0])), xs)
    check(lambda x: (tuple(np.linalg.svd(x)), tuple(np.linalg.qr(x)), np.linalg.eigvals(x @ x.T)), xs)


def test_einsum_matches_jax():
    jnp = pytest.importorskip("jax.numpy")
    xs, p = RNG.normal(size=(4, 2, 3)), RNG.normal(size=(3, 5))
    _jax_check(lambda x: np.einsum("ij,jk->ik", x, p), lambda x: jnp.einsum("ij,jk->ik", x, p), xs)


def test_linalg():
    a = RNG.normal(size=(5, 3, 3))
    spd = a @ np.swapaxes(a, -1, -2) + 3 * np.eye(3)
    v, plain = RNG.normal(size=(5, 3)), RNG.normal(size=(3, 3)) + 3 * np.eye(3)
    check(lambda m: (np.linalg.inv(m), np.linalg.det(m), tuple(np.linalg.slogdet(m))), spd)
    check(lambda m: (np.linalg.cholesky(m), np.linalg.eigvalsh(m), np.linalg.eigh(m)[0]), spd)
    check(lambda m, b: (np.linalg.solve(m, b), np.linalg.solve(m, np.outer(b, b))), spd, v)
    check(lambda b: np.linalg.solve(plain, b), v)
    check(lambda m: np.linalg.solve(m, v[0]), spd)
    check(lambda m: (np.linalg.norm(m), np.linalg.norm(m, axis=1), np.linalg.norm(m[0]),
                     np.linalg.norm(m, keepdims=True), np.linalg.norm(m, "fro")), spd)


# -- indexing --------------------------------------------------------------------------------------------------------
def test_basic_and_advanced_indexing():
    xs = RNG.normal(size=(3, 4, 3, 5))
    i, mask = np.array([2, 0, 2]), np.array([True, False, True, True, False])
    check(lambda x: (x[1], x[:, 1:], x[..., 2], x[None, 1, ::-1], x[-1, ..., None]), xs)
    check(lambda x: (x[i], x[:, i], x[i, :, :2], x[[0, 1]], x[..., mask]), xs)
    check(lambda x: (x[i, 0], x[1, :, i], x[i, :, i], x[:, 0, i]), xs)   # adjacent or apart (result dims first)


def test_batched_index_arrays_gather_per_example():
    xs, idx = RNG.normal(size=(3, 4, 5)), RNG.integers(0, 4, size=(3, 2))
    check(lambda x, j: (x[j], x[j, 1], x[:, j[0]], x[j, j]), xs, idx)
    check(lambda x, j: (x[j, ::2], x[1:, j], x[0, j], x[j[0], j[1]]), xs, idx)
    ys = RNG.normal(size=(3, 4, 2, 4))
    check(lambda y, j: (y[j[0], :, j[1]], y[:, 1, j], y[:, :, 0][j]), ys, idx)   # apart, and after a slice


def test_take_with_batched_indices():
    tables, idx = RNG.normal(size=(3, 5, 4)), np.array([[0, 3], [3, 3], [1, 2]])
    check(lambda w, j: (np.take(w, j, axis=-1), np.take(w, j), np.take(w, j, axis=0)), tables, idx)
    got = ad.vmap(lambda w: ad.vmap(lambda j: (np.take(w, j, axis=1), np.take(w, j)))(idx))(tables)
    _same(got, (np.stack([np.stack([np.take(w, j, axis=1) for j in idx]) for w in tables]),
                np.stack([np.stack([np.take(w, j) for j in idx]) for w in tables])))
    with pytest.raises(UnsupportedError, match="map the table too"):   # NumPy does not dispatch table[i]
        ad.vmap(lambda j: tables[0][j])(idx)


def _random_index(rng, shape):
    """A random index of an array of ``shape``: ints, slices, None, integer and boolean arrays, an Ellipsis."""
    index, d = [], 0
    while d < len(shape) and rng.random() < 0.8:
        n, r = shape[d], rng.integers(0, 6)
        entry = [int(rng.integers(-n, n)), slice(int(rng.integers(0, n)), None, int(rng.choice([1, 2, -1]))), None,
                 rng.integers(0, n, size=tuple(rng.integers(1, 3, size=rng.integers(0, 3)))), rng.random(n) > 0.5,
                 slice(None)][r]
        index.append(entry)
        d += entry is not None
    if rng.random() < 0.2:
        index.insert(int(rng.integers(0, len(index) + 1)), Ellipsis)
    return tuple(index)


def test_random_indices_read_and_written_as_the_loop_does():
    rng, read = np.random.default_rng(3), 0
    for _ in range(400):
        shape = tuple(int(v) for v in rng.integers(2, 5, size=rng.integers(1, 4)))
        xs, index = rng.normal(size=(int(rng.integers(1, 4)), *shape)), _random_index(rng, shape)
        try:
            target = xs[0][index].shape
        except IndexError:
            continue
        check(lambda x: x[index], xs)

        def write(x, v):
            y = x * 1.0
            y[index] = v
            return y
        tail = target[int(rng.integers(0, len(target) + 1)):]
        check(write, xs, rng.normal(size=(len(xs), *tail)))
        check(write, xs, rng.normal(size=tail), in_axes=(0, None))
        read += 1
    assert read > 300


def test_writes_at_batched_indices_and_their_gradients():
    xs, idx = RNG.normal(size=(3, 4, 5)), np.array([[0, 3], [3, 3], [1, 2]])

    def write(x, j):
        y = x * 1.0
        y[j, 1] = -1.0
        y[:, j[0]] = x[:, 0] * 2
        np.add.at(y, (j, slice(None)), 1.5)
        return y
    check(write, xs, idx)
    check(ad.grad(lambda x, j: np.sum(x[j, 1:] ** 2) + np.sum(np.take(x, j, axis=1) * x[0, 0])), xs, idx)


def test_vmap_of_grad_through_functions_that_move_entries():
    xs, c = RNG.normal(size=(4, 2, 3)), RNG.normal(size=(2, 3))

    def f(x):
        moved = (np.roll(x, 1) * c, np.flip(x, 1) * c, np.hstack([x, c]) ** 2, np.concatenate([x, x * c]),
                 np.transpose(x) @ c, np.reshape(x, 6) * c.ravel(), np.sort(x, axis=1) * c, np.diff(x, axis=1),
                 np.tril(x @ x.T), np.take(x, [2, 0], axis=1))
        return sum(np.sum(np.sin(m)) for m in moved)
    check(ad.grad(f), xs)
    check(ad.hessian(lambda x: f(x.reshape(2, 3))), xs.reshape(4, 6))


def test_item_assignment():
    xs = RNG.normal(size=(3, 4))

    def f(x):
        y = x * 2
        y[1] = 0.0
        y[2:] = x[:2] ** 2
        return y
    check(f, xs)


def test_in_place_operators_write_into_the_batch_as_numpy_writes_into_an_array():
    def f(x):
        y = x.copy()
        row = y[0]   # a view: the writes below show in y
        row *= 2
        row -= x[1]
        y[1:] += 1.0
        return y

    check(f, RNG.normal(size=(3, 2, 4)))
    with pytest.raises(UnsupportedError, match="out="):
        ad.vmap(lambda x: np.add(np.zeros(2), x, out=np.zeros(2)))(RNG.normal(size=(3, 2)))

    def plain_target(x):
        z = np.zeros(2)
        z += x
        return z
    with pytest.raises(UnsupportedError, match="x op= v"):
        ad.vmap(plain_target)(RNG.normal(size=(3, 2)))


# -- in_axes, out_axes, outputs, nesting -----------------------------------------------------------------------------
def test_structured_outputs_and_out_axes():
    xs = RNG.normal(size=(4, 3))
    check(lambda x: {"s": x.sum(), "pair": (x * 2, [x.max(), 1.0])}, xs)
    check(lambda x: np.outer(x, x), xs, out_axes=1)
    check(lambda x: 2.0, xs)


def test_nested_vmap():
    xs, ys = RNG.normal(size=(4, 3, 2)), RNG.normal(size=(5, 2))
    inner = ad.vmap(lambda x, y: np.sum(x * y) + x[0])
    got = ad.vmap(lambda x: ad.vmap(lambda y: inner(x, np.broadcast_to(y, (3, 2))))(ys))(xs)
    want = np.array([[[np.sum(x[k] * y) + x[k][0] for k in range(3)] for y in ys] for x in xs])
    _same(got, want)
    # an outer batched value captured by the inner function (a batch of a different size)
    got = ad.vmap(lambda x: ad.vmap(lambda y: x @ y)(ys))(xs)
    _same(got, np.einsum("bij,cj->bci", xs, ys))


# -- refusals --------------------------------------------------------------------------------------------------------
def test_control_flow_on_a_batched_value_is_refused():
    def f(x):
        if x.sum() > 0:
            return x
        return -x
    with pytest.raises(UnsupportedError, match="control flow"):
        ad.vmap(f)(RNG.normal(size=(3, 2)))
    for conv in (float, int, bool):
        with pytest.raises(UnsupportedError, match="control flow"):
            ad.vmap(lambda x: conv(x[0]))(RNG.normal(size=(3, 2)))


def test_a_function_without_batch_rule_is_refused_by_name():
    with pytest.raises(UnsupportedError, match="no batching rule for numpy.*kron"):
        ad.vmap(lambda x: np.kron(x, x))(RNG.normal(size=(3, 2, 2)))
    with pytest.raises(UnsupportedError, match="no batching rule for numpy.add.accumulate"):
        ad.vmap(lambda x: np.add.accumulate(x))(RNG.normal(size=(3, 2)))
    with pytest.raises(UnsupportedError, match="plain NumPy array"):
        ad.vmap(lambda x: np.asarray(x))(RNG.normal(size=(3, 2)))
    with pytest.raises(UnsupportedError, match="plain NumPy array"):
        ad.vmap(lambda x: np.array([x, x]))(RNG.normal(size=(3, 2)))


def test_forms_that_would_mix_the_batch_are_refused():
    xs = RNG.normal(size=(3, 4))
    with pytest.raises(UnsupportedError, match="where with one argument"):
        ad.vmap(lambda x: np.where(x > 0))(xs)
    with pytest.raises(UnsupportedError, match="matmul with axes"):
        ad.vmap(lambda x: np.matmul(x[:, None], x[None], axes=[(0, 1), (0, 1), (0, 1)]))(xs)
    with pytest.raises(tl.errors.TypeCheckError, match="int"):   # as ad.grad refuses an int array
        ad.vmap(ad.grad(lambda x: np.sum(x * 1.5)))(np.arange(6).reshape(3, 2))


def test_out_is_refused():
    with pytest.raises(UnsupportedError, match="out="):
        ad.vmap(lambda x: np.exp(x, out=np.empty(2)))(RNG.normal(size=(3, 2)))
    with pytest.raises(UnsupportedError, match="out="):
        ad.vmap(lambda x: np.sum(x, axis=0, out=np.empty(())))(RNG.normal(size=(3, 2)))


# -- composition with tensorlang.ad ----------------------------------------------------------------------------------
def _mlp_loss(params, x, y):
    w1, b1, w2, b2 = params
    h = np.tanh(x @ w1 + b1)
    out = h @ w2 + b2
    return np.mean((out - y) ** 2) + 0.01 * np.sum(w1 * w1)


def _mlp_data(b=6):
    params = (RNG.normal(size=(3, 5)), RNG.normal(size=5), RNG.normal(size=(5, 2)), RNG.normal(size=2))
    return params, RNG.normal(size=(b, 3)), RNG.normal(size=(b, 2))


def test_vmap_of_grad_per_example_gradients_of_an_mlp():
    params, xs, ys = _mlp_data()
    check(ad.grad(_mlp_loss), params, xs, ys, in_axes=(None, 0, 0))
    check(ad.grad(_mlp_loss, argnums=(0, 1)), params, xs, ys, in_axes=(None, 0, 0))
    check(ad.value_and_grad(_mlp_loss, argnums=1), params, xs, ys, in_axes=(None, 0, 0))


def test_vmap_of_grad_matches_jax():
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    jax.config.update("jax_enable_x64", True)
    params, xs, ys = _mlp_data()

    def jloss(params, x, y):
        w1, b1, w2, b2 = params
        out = jnp.tanh(x @ w1 + b1) @ w2 + b2
        return jnp.mean((out - y) ** 2) + 0.01 * jnp.sum(w1 * w1)
    got = ad.vmap(ad.grad(_mlp_loss), in_axes=(None, 0, 0))(params, xs, ys)
    want = jax.vmap(jax.grad(jloss), in_axes=(None, 0, 0))(params, xs, ys)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12)


def _residual(point, camera, xp=np):
    """A bundle-adjustment-like residual: ``point`` rotated about z and translated by ``camera``, projected
    (``xp``: NumPy, or ``jax.numpy`` for the oracle)."""
    angle, tx, ty, tz, focal, skew = camera
    x = xp.cos(angle) * point[0] - xp.sin(angle) * point[1] + tx
    y = xp.sin(angle) * point[0] + xp.cos(angle) * point[1] + ty
    z = point[2] + tz
    return xp.stack([focal * x / z + skew * y, focal * y / z]) - xp.array([0.5, -0.25])


def _observations(n=50):
    points = RNG.normal(size=(n, 3)) + np.array([0.0, 0.0, 5.0])
    return points, np.column_stack([RNG.normal(size=(n, 4)) * 0.3, 1 + RNG.random((n, 1)), RNG.normal(size=(n, 1))])


def test_vmap_of_jacobian_over_observations():
    points, cameras = _observations()
    check(ad.jacobian(_residual), points, cameras)
    check(ad.jacobian(_residual, argnums=(0, 1)), points, cameras)
    check(ad.jacobian(_residual, argnums=1), points, cameras[0], in_axes=(0, None))


def test_vmap_of_jacobian_and_hessian_match_jax():
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    jax.config.update("jax_enable_x64", True)
    points, cameras = _observations()
    got = ad.vmap(ad.jacobian(_residual, argnums=(0, 1)))(points, cameras)
    want = jax.vmap(jax.jacfwd(lambda p, c: _residual(p, c, jnp), argnums=(0, 1)))(points, cameras)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12)
    xs = RNG.normal(size=(6, 3))
    got = ad.vmap(ad.hessian(lambda x: np.sum(np.sin(x) * x[::-1])))(xs)
    want = jax.vmap(jax.hessian(lambda x: jnp.sum(jnp.sin(x) * x[::-1])))(xs)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_vmap_of_hessian():
    def f(x):
        return np.sum(np.sin(x) * x[::-1]) + np.sum(x ** 3) * x[0] + np.exp(x[1] / (2 + x[2] ** 2))

    check(ad.hessian(f), RNG.normal(size=(4, 3)))
    check(ad.hessian(lambda x, w: np.tanh(x @ w).sum()), RNG.normal(size=(5, 3)), RNG.normal(size=(3, 2)),
          in_axes=(0, None))


def test_a_rule_that_branches_on_the_values_is_refused_under_vmap():
    # np.prod's second-order rule checks its argument for zeros: a branch on a batched value
    with pytest.raises(UnsupportedError, match="control flow"):
        ad.vmap(ad.hessian(lambda x: np.prod(x) ** 2))(RNG.normal(size=(4, 3)))


def test_other_derivatives_under_vmap():
    xs, v = RNG.normal(size=(5, 3)), RNG.normal(size=3)

    def f(x):
        return np.sum(np.sin(x) * x ** 2)
    check(lambda x: ad.jvp(f, (x,), (v,)), xs)
    check(lambda x: ad.hvp(f, (x,), (v,)), xs)
    check(ad.value_and_grad(lambda x: (f(x), x * 2), has_aux=True), xs)
    check(lambda x: ad.pullback(lambda z: np.sin(z) * 2, x)[1](np.ones(3)), xs)
    check(ad.jacobian(lambda x: np.cumsum(x) * x, mode="reverse"), xs)
    check(ad.grad(ad.grad(lambda x: np.sin(x) * x ** 3)), xs[:, 0])
    with pytest.raises(UnsupportedError, match="sparse=True"):
        ad.vmap(ad.jacobian(np.sin, sparse=True))(xs)


def test_grad_of_a_vmapped_function():
    params, xs, ys = _mlp_data()
    batched = ad.vmap(_mlp_loss, in_axes=(None, 0, 0))
    got = ad.grad(lambda p: np.sum(batched(p, xs, ys)))(params)
    want = ad.grad(lambda p: sum(_mlp_loss(p, xs[i], ys[i]) for i in range(len(xs))))(params)
    _same(got, want)


def test_derivatives_of_a_function_that_calls_a_vmapped_one():
    xs, w = RNG.normal(size=(4, 3)), RNG.normal(size=3)
    mapped = ad.vmap(lambda w, x: np.sin(x * w).sum(), in_axes=(None, 0))
    rows = np.stack([ad.grad(lambda w: np.sin(xs[i] * w).sum())(w) for i in range(4)])
    _same(ad.jacobian(lambda w: mapped(w, xs))(w), rows)   # (forward mode: its pullback transposed)
    _same(ad.jvp(lambda w: mapped(w, xs), (w,), (np.ones(3),))[1], rows @ np.ones(3))
    # forward over reverse through the vmapped function: of the recording of its gradient (``tower``)
    _same(ad.hessian(lambda w: np.sum(mapped(w, xs)))(w), np.diag(-np.sum(xs * xs * np.sin(xs * w), axis=0)))


def test_grad_through_vmap_with_in_axes_out_axes_and_indexed_reads():
    xs, w = RNG.normal(size=(3, 5)), RNG.normal(size=(3, 2))

    def per_column(w, x):
        return np.outer(np.sin(x[:2]) * x[1], w[0] + x[0]) + x[2] * w[1]   # reads of entries: indexed cotangents
    mapped = ad.vmap(per_column, in_axes=(None, 1), out_axes=1)

    def loss(w, xs):
        return np.sum(mapped(w, xs) ** 2)
    want = ad.grad(lambda w, xs: sum(np.sum(per_column(w, xs[:, i]) ** 2) for i in range(5)), argnums=(0, 1))(w, xs)
    _same(ad.grad(loss, argnums=(0, 1))(w, xs), want)


def test_grad_through_vmap_of_a_closure_with_gradients_is_refused():
    xs, c = RNG.normal(size=(4, 3)), RNG.normal(size=3)
    with pytest.raises(UnsupportedError, match="captures values that have gradients"):
        ad.grad(lambda c: np.sum(ad.vmap(lambda x: x * c)(xs)))(c)


def test_arguments_that_are_tuples_and_dicts_are_mapped_leaf_by_leaf():
    xs, ys = RNG.normal(size=(4, 3)), RNG.normal(size=4)
    got = ad.vmap(lambda d: d["a"] * d["b"][0])({"a": xs, "b": (ys,)})
    _same(got, np.stack([xs[i] * ys[i] for i in range(4)]))


def test_a_compiled_kernel_called_with_a_batch_is_refused():
    kernel = tl.compile(tl.parse("x : [n]R\ngen(i:n) sin(x[i]) * x[i]"))
    with pytest.raises(UnsupportedError, match="kernel.*gen over the batch"):
        ad.vmap(lambda x: kernel(x=x))(RNG.normal(size=(3, 4)))


def _loop_sum(x, w):
    s = 0.0
    for i in range(len(x)):
        s = s + x[i] * w[i] ** 2
    return s


def _appended(x, w):
    out = []
    for i in range(x.shape[0]):
        out.append(np.sin(x[i]) * w[i])
    return np.sum(np.stack(out)) + np.max(x * w)


def _written(x, w):
    y = np.zeros(4) + x
    y[1] = x[2] * w[0]
    h = x.copy()
    h[0] = h[0] * 3
    return np.sum(y ** 2) + h.sum() * w[0]


def _selected(x, w):
    return np.sum(np.where(x > 0, x * w, np.exp(x))) + np.linalg.norm(x) \
        + x @ np.linalg.solve(np.eye(4) * 2 + np.outer(w, w), np.asarray(x))


@pytest.mark.parametrize("f", [_loop_sum, _appended, _written, _selected])
@pytest.mark.parametrize("argnums", [0, 1])
def test_vmap_of_grad_through_loops_lists_item_writes_and_rules_given_as_code(f, argnums):
    xs, w = RNG.normal(size=(5, 4)), RNG.normal(size=4)
    check(ad.grad(f, argnums=argnums), xs, w, in_axes=(0, None))


@pytest.mark.parametrize("f,refused", [(_loop_sum, None), (_appended, None), (_written, "item write"),
                                       (_selected, "control flow")])
def test_vmap_of_hessian_through_the_same(f, refused):
    xs, w = RNG.normal(size=(5, 4)), RNG.normal(size=4)
    if refused is None:
        check(ad.hessian(f), xs, w, in_axes=(0, None))
    else:   # an item write into a batch under forward over reverse; np.linalg.norm's rule branches on its value
        with pytest.raises(UnsupportedError, match=refused):
            ad.vmap(ad.hessian(f), in_axes=(0, None))(xs, w)


def test_np_array_of_batched_values_is_their_stack():
    f = ad.grad(lambda x: np.sum(np.array([x[0], x[1] * 2]) ** 2))
    x = RNG.normal(size=(3, 2))
    np.testing.assert_allclose(ad.vmap(f)(x), np.stack([2 * x[:, 0], 8 * x[:, 1]], axis=1), rtol=1e-14)


@pytest.mark.parametrize("k", [1, 2, 3, 5, 7, 8, 12])
def test_sums_over_each_examples_small_trailing_axes_are_numpys_bit_for_bit(k):
    """A sum over a short trailing axis is added slice by slice (``rules.batching._short_sum``, from 1 to 7
    entries; NumPy's own reduction beyond): the bits of ``np.sum`` on each example, in every form."""
    x = RNG.normal(size=(50, k)) * 10.0 ** RNG.uniform(-6, 6, size=(50, k))
    m = RNG.normal(size=(50, 2, k)) * 10.0 ** RNG.uniform(-6, 6, size=(50, 2, k))
    for f, a in ((np.sum, x), (np.sum, x.astype(np.float32)), (lambda v: v.sum(), x),
                 (lambda v: np.add.reduce(v), x),
                 (lambda v: np.sum(v, axis=-1, keepdims=True), x), (lambda v: np.sum(v, axis=1), m),
                 (lambda v: np.sum(v, axis=(0, 1)), m) if k <= 3 else (np.sum, x)):
        got, want = ad.vmap(f)(a), _loop(f, (a,))
        assert np.shape(got) == np.shape(want) and np.array_equal(got, want)


def test_a_jacobian_in_several_arguments_is_each_arguments_jacobian_by_one_pullback_per_output_entry():
    """Arguments of 11, 3 and 1 entries and an output of 2: the two pullbacks give all three (the one of 1 entry
    too, though it alone would take forward mode), equal to each argument's Jacobian and to forward mode's."""
    def r(cam, X, w):
        return w * np.stack([cam[0] * X[0] + np.sin(cam[5] * X[1]), cam[10] * np.exp(X[2]) - cam[3] * X[0]])

    args = (RNG.normal(size=11), RNG.normal(size=3), 0.7)
    together = ad.jacobian(r, argnums=(0, 1, 2))(*args)
    forward = ad.jacobian(r, argnums=(0, 1, 2), mode="forward")(*args)
    for i, (got, fwd) in enumerate(zip(together, forward)):
        np.testing.assert_allclose(got, ad.jacobian(r, argnums=i)(*args), rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(got, fwd, rtol=1e-12, atol=1e-14)
    batched = ad.vmap(ad.jacobian(r, argnums=(0, 1, 2)))(*(np.stack([a, 2 * a]) for a in map(np.asarray, args)))
    for got, one in zip(batched, together):
        np.testing.assert_allclose(got[0], one, rtol=1e-13, atol=1e-15)


# -- found by a differential campaign: random functions of copies, writes, in-place operators and reshapes under
# ad.vmap, ad.vmap(ad.grad), ad.vmap(ad.jacobian) and ad.grad of a vmapped function, against the loop --------------
def _by_differences(f, xs):
    """Per example, the Jacobian of ``f`` by central differences (the gradient for a scalar ``f``)."""
    rows = [differenced_jacobian(f, x) for x in xs]
    return np.stack([r.reshape(np.shape(f(x)) + x.shape) for r, x in zip(rows, xs)])


CAMPAIGN = {
    "ravel in Fortran order": lambda x: np.ravel(np.outer(x, x), "F")[:5] * x[0],
    "reshape in Fortran order": lambda x: np.sin(x.reshape((2, 2), order="F")).ravel() * x,
    "an in-place operator on a batch": lambda x: _plus_twice(x) ** 2,
    "a copy written into": lambda x: np.sin(_copy_written(x)),
    "np.tile": lambda x: np.tile(np.sin(x), 2)[1:6] * x[0],
    "np.append": lambda x: np.append(x * x, x[:2]) + 1.0,
}


def _plus_twice(x):
    y = x * 1.0
    y += 2.0 * np.sin(x)
    return y


def _copy_written(x):
    y = np.exp(0.1 * x).copy()
    y[0] = y[1] * 2.0
    return y


@pytest.mark.parametrize("name", list(CAMPAIGN))
def test_functions_a_differential_campaign_found_refused_or_raising(name):
    """Each raised a raw TypeError (ravel's order, a batch's copy in forward mode), or was refused with a
    message about tensorlang's own code (x += v on a batch under ad.grad or ad.jacobian, a write into a batch in
    forward mode), or had no batching rule (np.tile, np.append); now each is right in every composition."""
    f = CAMPAIGN[name]
    xs = RNG.uniform(-1, 1, (3, 4))
    check(f, xs)
    jac = ad.vmap(ad.jacobian(f))(xs)
    _same(jac, _loop(ad.jacobian(f), (xs,)))
    assert np.allclose(jac, _by_differences(f, xs), atol=1e-7)
    loss = lambda x: np.sum(f(x) ** 2)   # noqa: E731
    grads = ad.vmap(ad.grad(loss))(xs)
    assert np.allclose(grads, _by_differences(loss, xs), atol=1e-7)
    assert np.allclose(ad.grad(lambda xs: np.sum(ad.vmap(loss)(xs)))(xs), grads)


def test_reshape_in_an_order_that_follows_memory_is_refused_by_name():
    with pytest.raises(UnsupportedError, match="order='K'"):
        ad.vmap(lambda x: np.ravel(x, "K"))(RNG.normal(size=(3, 2, 2)))


def test_the_batch_is_innermost_in_memory_and_a_mapped_argument_is_a_copy():
    """The rules lay a batch of small examples out with the batch innermost (so that NumPy's inner loop runs along
    the batch); the values are the loop's whatever the caller's layout, and a write into a mapped argument stays
    inside the call, as with ``jax.vmap``."""
    xs, p3 = RNG.normal(size=(40, 3)), RNG.normal(size=3)

    def f(x):
        y = x * p3 + 1.0          # a plain operand that alone would lay the result out per example
        y += x                    # in place, with a batched operand
        return np.stack([y, np.cross(x, p3), np.cross(y, x), np.zeros_like(x)]), np.cross(x[:2], p3[:2])

    for layout in (xs, np.asfortranarray(xs), xs[:, ::-1]):
        got = ad.vmap(f)(layout)
        want = _loop(f, (layout,))
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-14, atol=1e-14)
        assert got[0].strides[0] == got[0].itemsize   # (the batch innermost)

    def writes(x):
        x[0] = 5.0
        return x * 2.0

    for batch in (xs, RNG.normal(size=(5, 40))):   # (small examples laid out anew, large ones as they come)
        before = batch.copy()
        np.testing.assert_array_equal(ad.vmap(writes)(batch)[:, 0], 10.0)
        np.testing.assert_array_equal(batch, before)
    big = ad.vmap(lambda x: x * p3[0] + x)(RNG.normal(size=(5, 40)))
    assert big.flags.c_contiguous   # (an example of more than SMALL_EXAMPLE entries keeps C order)
    with pytest.raises(UnsupportedError, match="numpy.cross"):   # (cross's other axes: no rule, named)
        ad.vmap(lambda x: np.cross(x, p3, axisa=0))(xs)


VIEWS = {"reshape": lambda x: x.reshape(-1), "reshape to pairs": lambda x: np.reshape(x, (x.size // 2, 2)),
         "reshape in Fortran order": lambda x: np.reshape(x, (2, x.size // 2), order="F"), "ravel": np.ravel,
         "T": lambda x: x.T, "swapaxes": lambda x: np.swapaxes(x, 0, -1), "slice": lambda x: x[1:],
         "step": lambda x: x[::2], "expand_dims": lambda x: np.expand_dims(x, 0),
         "squeeze": lambda x: np.squeeze(x[None]), "moveaxis": lambda x: np.moveaxis(x, 0, -1),
         "split": lambda x: np.split(x, 2)[1], "flip": np.flip, "atleast_2d": np.atleast_2d}


@pytest.mark.parametrize("shape", [(6,), (4, 6), (2, 3, 2)])
@pytest.mark.parametrize("view", sorted(VIEWS))
def test_a_write_through_a_view_of_an_example_reaches_it_exactly_where_numpys_does(view, shape):
    """With the batch innermost, a reshape or ravel of an example is still a view exactly where NumPy's of one
    example is (``batching.batch_last``), so a write through it reaches the example as in the loop."""
    xs = np.arange(5.0 * np.prod(shape)).reshape(5, *shape)

    def f(x):
        y = x * 1.0
        v = VIEWS[view](y)
        v[(0,) * v.ndim] = -100.0
        v += 0.5
        return y

    np.testing.assert_array_equal(ad.vmap(f)(xs), _loop(f, (xs,)))


def _write_through(view):
    def f(x):
        w = x.copy()
        v = VIEWS[view](w)
        v[(0,) * v.ndim] = x[-1] * x[1]
        v *= 1.5
        return np.sum(w * x)
    return f


def _owner_written_view_read(x):
    w = x.copy()
    v = w[1:]
    w[1] = x[0] * x[2]
    return np.sum(v * x[1:])


def _owner_written_in_place_view_read(x):
    w = x * 2.0
    v = w.reshape(-1)
    w *= x
    return np.sum(v * x)


SHARED = {**{f"a write through {name}": _write_through(name) for name in sorted(VIEWS)},
          "an array written after a view of it was taken": _owner_written_view_read,
          "an array written in place after a view of it was taken": _owner_written_in_place_view_read}
DERIVATIVES = {"vmap of grad": lambda f, xs: ad.vmap(ad.grad(f))(xs),
               "vmap of reverse jacobian": lambda f, xs: ad.vmap(ad.jacobian(f))(xs),
               "vmap of forward jacobian": lambda f, xs: ad.vmap(ad.jacobian(f, mode="forward"))(xs),
               "grad of a sum of vmap": lambda f, xs: ad.grad(lambda z: np.sum(ad.vmap(f)(z)))(xs),
               "jvp of vmap": lambda f, xs: np.stack([ad.jvp(ad.vmap(f), (xs,), (np.tile(e, (len(xs), 1)),))[1]
                                                       for e in np.eye(xs.shape[1])], axis=1)}


@pytest.mark.parametrize("derivative", sorted(DERIVATIVES))
@pytest.mark.parametrize("name", sorted(SHARED))
def test_a_derivative_through_a_write_into_memory_batches_share_is_right_or_refused(name, derivative):
    """tensorlang.ad follows writes through views of NumPy's arrays, not of batches: under a derivative, a write
    into a batch whose memory another batch holds (through a view of it, or into the array a view was taken of)
    is refused by name (``Batched.__ad_written__``); the rest agree with central differences.  (Each of these
    gave a wrong derivative with no error before.)"""
    f, xs = SHARED[name], RNG.normal(size=(3, 4))
    try:
        got = DERIVATIVES[derivative](f, xs)
    except UnsupportedError as e:
        assert "shares its memory" in str(e)
        return
    np.testing.assert_allclose(got, _by_differences(f, xs), atol=1e-7)


def test_a_write_into_a_batch_no_other_batch_shares_is_differentiated():
    """An entry read from a batch is a copy (NumPy reads one as a scalar), so reading entries does not make the
    batch shared, and writes into it are differentiated in every mode (against central differences)."""
    def f(x):
        y = np.exp(0.1 * x).copy()
        y[0] = y[1] * 2.0 + x[2]
        y *= x[0]
        return np.sum(y ** 2)

    xs = RNG.normal(size=(4, 3))
    for run in DERIVATIVES.values():
        np.testing.assert_allclose(run(f, xs), _by_differences(f, xs), atol=1e-7)


def test_an_entry_read_from_a_batch_keeps_its_value_after_a_write_as_numpys_scalar_does():
    def f(x):
        y = x * 1.0
        a, b = y[1], y[1, 0]
        y[1] = 5.0
        return a + b

    check(f, RNG.normal(size=(3, 2, 2)))


def test_forward_mode_inside_vmap_writes_a_batchs_tangent_where_every_name_of_it_sees_it():
    """A tangent that is the same for every example (a plain one given to ``ad.jvp`` inside ``ad.vmap``, or made
    from values that are not batched) is made a batch of its own (``ir.own_tangent``), so that a write into the
    batch through another name of it (``np.atleast_1d`` returns its argument) writes the tangent every name
    holds."""
    xs, p, e = RNG.normal(size=(4, 3)), np.array([0.5, -1.0, 2.0]), np.array([1.0, 0.0, 0.0])

    def g(x):
        w = x.copy()
        v = np.atleast_1d(w)
        v *= 1.5
        return np.sum(w * x)

    def h(x, q):
        y = x * 0.0 + q
        v = np.atleast_1d(y)
        v *= 2.0
        return np.sum(y * q * x)

    got = ad.vmap(lambda x: ad.jvp(g, (x,), (e,))[1])(xs)
    np.testing.assert_allclose(got, _by_differences(g, xs)[:, 0], atol=1e-7)
    got = ad.vmap(lambda x: ad.jvp(lambda q: h(x, q), (p,), (e,))[1])(xs)
    want = [differenced_jacobian(lambda q: h(x, q), p)[0, 0] for x in xs]
    np.testing.assert_allclose(got, want, atol=1e-7)


def test_nested_vmaps_refuse_a_write_into_shared_memory_and_differentiate_the_rest():
    """The batches of an inner vmap hold the outer one's; a batch that a view held only while a rule ran is not
    shared (``batching.Memory`` counts the live batches)."""
    def shared(x):
        w = x.copy()
        v = w[1:]
        v[0] = x[0] * x[2]
        return np.sum(w * x)

    def own(x):
        w = np.exp(0.1 * x).copy()
        w[0] = w[1] * x[2]
        return np.sum(w * x)

    xs = RNG.normal(size=(2, 3, 3))
    for run in (lambda f: ad.vmap(ad.vmap(ad.grad(f)))(xs),
                lambda f: ad.vmap(ad.grad(lambda z: np.sum(ad.vmap(f)(z))))(xs),
                lambda f: ad.vmap(ad.vmap(ad.jacobian(f, mode="forward")))(xs)):
        with pytest.raises(UnsupportedError, match="shares its memory"):
            run(shared)
        want = np.stack([_by_differences(own, row) for row in xs])
        np.testing.assert_allclose(run(own), want, atol=1e-7)


def test_differentiating_a_vmapped_function_leaves_no_box_in_the_callers_store():
    """The vmapped function's pullback runs in a store of its own: ``ad.jvp`` of ``ad.vmap(f)`` for an ``f`` that
    writes left the written batch in the process's store, where a later gradient could meet it."""
    from tensorlang.derive.ad import context

    def f(x):
        y = np.exp(0.1 * x).copy()
        y[0] = y[1] * 2.0 + x[2]
        return np.sum(y ** 2)

    xs = RNG.normal(size=(4, 3))
    ad.jvp(ad.vmap(f), (xs,), (xs,))
    ad.grad(lambda z: np.sum(ad.vmap(f)(z)))(xs)
    with pytest.raises(UnsupportedError):
        ad.jvp(ad.vmap(_owner_written_view_read), (xs,), (xs,))
    assert not context.current().store.boxes


def test_the_gradient_of_a_loop_over_a_mapped_array_is_an_array_batch():
    """``for i, v in enumerate(x)`` over a mapped ``x``: the gradient of that iteration is the batch of arrays, as
    for a NumPy array (it came back as a Python list of the entries' batches, transposed; with a ``break`` the
    gradient became None and the call was refused)."""
    X = np.array([[0.3, -0.5, 0.8, 0.2], [0.1, 0.4, -0.3, 0.9], [1.0, 0.2, 0.5, -0.7]])

    def g(x):
        s = 0.0
        for i, v in enumerate(x):
            if i == 3:
                break
            s = s + v * v * (i + 1)
        return s

    got = ad.vmap(ad.grad(g))(X)
    assert type(got) is np.ndarray
    np.testing.assert_allclose(got, np.stack([ad.grad(g)(x) for x in X]), rtol=1e-14)
    np.testing.assert_allclose(got, 2 * X * np.array([1.0, 2.0, 3.0, 0.0]), rtol=1e-14)


def test_a_batch_written_into_a_plain_array_is_refused_by_name():
    """``v = np.zeros(2); v[0] = x[0]`` under ``ad.vmap``: NumPy asks the batch for ``float()`` and raised its own
    ``ValueError`` from the refusal; the refusal is raised, naming the write and the way out, also where the vmapped
    function is differentiated."""
    X = np.array([[0.3, -0.5], [0.1, 0.4]])

    def f(x):
        v = np.zeros(2)
        v[0] = x[0] * 2.0
        return np.sum(v * v)

    for run in (ad.vmap(f), ad.vmap(ad.grad(f)), ad.grad(lambda Z: np.sum(ad.vmap(f)(Z))), ad.jacobian(ad.vmap(f)),
                lambda Z: ad.jvp(ad.vmap(f), (Z,), (Z,))):
        with pytest.raises(UnsupportedError, match=r"written into an entry of a plain NumPy array .*np.zeros_like"):
            run(X)

    def made_from_the_batch(x):
        v = np.zeros_like(x)
        v[0] = x[0] * 2.0
        return np.sum(v * v)

    np.testing.assert_allclose(ad.vmap(ad.grad(made_from_the_batch))(X), [[2.4, 0.0], [0.8, 0.0]], rtol=1e-14)


COMPLEX_INSIDE = {
    "abs": lambda x: np.abs(x[0] + 1j * x[1]),
    "real": lambda x: np.real(x[0] + 1j * x[1]) * x[1],
    "imag": lambda x: np.imag(1j * x[1] * x[0]),
    "quotient": lambda x: np.real(1 / (x[0] + 2j)) + np.angle(x[1] + 1j * x[0]),
    "product": lambda x: np.sum(np.real(x * (1 + 1j)) * np.abs(x - 1j)),
}


@pytest.mark.parametrize("name", sorted(COMPLEX_INSIDE))
def test_per_example_gradients_through_complex_values_are_real(name):
    """A real function of real arguments through complex values: its batched gradient is real and each example's
    is ``ad.grad``'s (complex and wrong, or a raw casting error, before: the batch's complex gradient was not
    projected on the real argument)."""
    f = COMPLEX_INSIDE[name]
    xs = np.array([[0.3, 0.8], [0.1, -0.4], [1.2, 0.5]])
    got = ad.vmap(ad.grad(f))(xs)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, np.stack([ad.grad(f)(x) for x in xs]), rtol=1e-12, atol=1e-12)
    for x, g in zip(xs, got):
        want = [(f(x + 1e-6 * e) - f(x - 1e-6 * e)) / 2e-6 for e in np.eye(2)]
        np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-8)


def _flattened_then_written(x):
    y = x.reshape(2, 2).flatten()
    y[0] = 5.0
    return np.sum(x * x) + y[1] * y[0] + x.reshape(2, 2).ravel("F")[1] * x.reshape(2, 2).flatten(order="C")[2]


def test_flatten_copies_under_vmap_and_takes_an_order():
    # (under ad.vmap x.flatten() was a view: writing into it wrote into x, a wrong value with no error; and
    # flatten(order=...) was a raw TypeError)
    batch = np.arange(12.0).reshape(3, 4) + 1
    np.testing.assert_allclose(ad.vmap(_flattened_then_written)(batch), [_flattened_then_written(b.copy()) for b in batch])
    np.testing.assert_allclose(ad.vmap(ad.grad(_flattened_then_written))(batch),
                               [ad.grad(_flattened_then_written)(b.copy()) for b in batch])


def _written_after_it_was_read(x):
    p = x * 0.7
    r = np.sum(p ** 2)   # (the power's pullback reads p as it was here)
    p[1] = p[1] * 3.0
    return np.sum(p ** 2) + r


def _result_written_after_it_was_read(x):
    y = np.exp(x)
    s = np.sum(y)   # (exp's pullback reads its result as it was here)
    y[1] = 0.0
    y *= 2
    return s + np.sum(y * x)


@pytest.mark.parametrize("f", [_written_after_it_was_read, _result_written_after_it_was_read])
def test_a_batch_written_after_a_pullback_kept_it_under_vmap(f):
    # (a batch was not copied on capture, and a result written afterwards not kept for its pullback: vmap of
    # grad read the written values, -14.1 for -11.8, with no error)
    batch = np.stack([np.array([0.3, -1.2, 0.8, 0.5]), np.array([0.1, 0.2, -0.3, 0.4])])
    np.testing.assert_allclose(ad.vmap(ad.grad(f))(batch), [ad.grad(f)(b.copy()) for b in batch])
    np.testing.assert_allclose(ad.vmap(f)(batch), [f(b.copy()) for b in batch])


def _scaled_in_place(arr, s):
    arr *= s
    return arr


def _a_call_returns_what_it_wrote(x):
    z = x * 1.0
    r = np.sum(z ** 2)
    w = _scaled_in_place(z, 0.7)
    _scaled_in_place(w, 2.0)
    return np.sum(z * x) + np.sum(w) + r


@pytest.mark.parametrize("f", [_a_call_returns_what_it_wrote, lambda x: sum(x, 0.7 * x)[1],
                               lambda x: np.sum(sum(x, 0.7 * x) ** 2), lambda x: np.sum(sum([x, x ** 2], 1.0) ** 2)],
                         ids=["returned after a write", "sum of rows onto a start", "sum squared", "sum of a list"])
def test_calls_that_write_and_the_builtin_sum_under_vmap(f):
    # (the builtin sum of a batch's rows gave a list as its gradient, [1, 1] for [1, 1.7, 1, 1], with no error)
    batch = np.stack([np.array([0.3, -1.2, 0.8, 0.5]), np.array([0.1, 0.2, -0.3, 0.4])])
    np.testing.assert_allclose(ad.vmap(ad.grad(f))(batch), [ad.grad(f)(b.copy()) for b in batch])
    np.testing.assert_allclose(ad.vmap(f)(batch), [f(b.copy()) for b in batch])


def test_abs_in_forward_mode_under_vmap_and_a_view_of_a_plain_array_refused_by_name():
    # (ad.jvp of np.abs of a batch recursed without end; a write through a view of an array that is not batched,
    # whose gradient is, was a raw AttributeError)
    batch = np.stack([np.array([0.3, -1.2, 0.8, 0.5]), np.array([0.1, 0.2, -0.3, 0.4])])
    f = lambda x: np.sum(np.abs(x) * x) + np.sum(abs(x))
    np.testing.assert_allclose(ad.vmap(lambda x: ad.jvp(f, (x,), (np.ones(4),))[1])(batch),
                               [ad.jvp(f, (b,), (np.ones(4),))[1] for b in batch])
    np.testing.assert_allclose(ad.vmap(ad.hessian(f))(batch), [ad.hessian(f)(b) for b in batch])

    def written_through_a_view(x, y):
        z = x * 1.0
        v = z[1:3]
        z = z * y
        v[0] = 5.0
        return np.sum(z) + np.sum(v)

    with pytest.raises(UnsupportedError, match="a write through a view of an array that is not batched"):
        ad.vmap(ad.grad(written_through_a_view), in_axes=(None, 0))(batch[0], np.array([0.7, 0.4]))
