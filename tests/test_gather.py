"""Reads through index arrays (``g : [p]index[n]``, ``x[g[i]]``): parsing, printing and the errors a newcomer
meets; values against NumPy's fancy indexing (evaluator and compiled C); gradients against NumPy's
``np.add.at`` scatter-add and central differences; the cost in proportion to the reads; the runtime's checks
of the index arrays themselves."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tensorlang as tl
from tensorlang import BoundsError, ShapeError, TypeCheckError
from tensorlang.nodes import IndexMapType
from tensorlang.parser import parse_type

from tests.oracles import central_difference

FACTORISATION = (Path(__file__).resolve().parent.parent / "examples" / "factorisation.tl").read_text()


def factorisation_inputs(rng, n=7, m=5, k=3, p=40):
    return dict(user=rng.integers(0, n, p), item=rng.integers(0, m, p), U=rng.standard_normal((n, k)),
                V=rng.standard_normal((m, k)), r=rng.standard_normal(p))


def numpy_factorisation(user, item, U, V, r):
    """The loss and its gradients in U and V, written as a NumPy user writes them."""
    err = np.einsum("ij,ij->i", U[user], V[item]) - r
    gU, gV = np.zeros_like(U), np.zeros_like(V)
    np.add.at(gU, user, 2 * err[:, None] * V[item])
    np.add.at(gV, item, 2 * err[:, None] * U[user])
    return err @ err, gU, gV


# ------------------------------------------------------------------------------------------------ syntax


def test_a_read_is_the_sum_of_its_one_term_and_prints_back():
    e = tl.parse("g : [p]index[n]\nx : [n][k]R\ngen(i:p, j:k) x[g[i], j]")
    text = str(e)
    assert text.splitlines()[0] == "g : [p]index[n]"
    assert "sum(g_0:n) [g(i, g_0)] * x[g_0, j]" in text
    assert tl.parse(text) == e
    assert e.free_vars["g"] == parse_type("[p]index[n]")
    assert isinstance(e.free_vars["g"], IndexMapType)


def test_reads_nest_and_combine_with_affine_indices():
    src = "g : [p]index[n]\nh : [q]index[p]\nx : [n + 1]R\ngen(i:q) x[g[h[i]] + 1] * x[g[h[i]]]"
    e = tl.parse(src)
    assert tl.parse(str(e)) == e
    rng = np.random.default_rng(0)
    g, h, x = rng.integers(0, 6, 9), rng.integers(0, 9, 11), rng.standard_normal(7)
    want = x[g[h] + 1] * x[g[h]]
    np.testing.assert_allclose(e(g=g, h=h, x=x), want)
    np.testing.assert_allclose(tl.compile(e)(g=g, h=h, x=x), want)


def test_two_index_arrays_in_one_access():
    e = tl.parse("a : [p]index[n]\nb : [q]index[m]\nx : [n][m]R\ngen(i:p, j:q) x[a[i], b[j]]")
    rng = np.random.default_rng(1)
    a, b, x = rng.integers(0, 4, 6), rng.integers(0, 3, 5), rng.standard_normal((4, 3))
    np.testing.assert_allclose(tl.compile(e)(a=a, b=b, x=x), x[np.ix_(a, b)])


def test_an_index_array_is_also_a_relation_in_predicates():
    e = tl.parse("g : [p]index[n]\ngen(i:p, c:n) [g(i, c)]")  # g(i, c): g[i] = c, the one-hot rows
    g = np.array([2, 0, 1, 2])
    np.testing.assert_array_equal(e(g=g, n=3), np.eye(3)[g])
    with pytest.raises(ShapeError, match="n cannot be inferred"):  # its values do not give its extent
        e(g=g)


@pytest.mark.parametrize("src, fragment, line, column", [
    ("g : [p]R\nx : [n]R\nsum(i:p) x[g[i]]", "declared as g : [p]index[n]", 3, 12),
    ("x : [n]R\nsum(i:p) x[g[i]]", "it is not declared", 2, 12),
    ("g : [p]index[n]\nsum(i:p) g[i]", "g is an index array, read only inside an index", 2, 10),
    ("g : [p]index[n]\nx : [n]R\nsum(i:p) x[g]", "read one of its indices as g[i]", 3, 12),
    ("g : [p]index[n]\nx : [n][2]R\nsum(i:p) x[g[i]]", "must be a scalar: index every dimension", 3, 10),
    ("g : [p]index[n]\nx : [n]R\nsum(i:p) [g[i] = 2] * x[i]", "may stand only in the index of a tensor access",
     3, 11),
    ("g : [p][2]index[n]\nx : [n]R\nx[0]", "an index array has one dimension", 1, 5),
    ("g : index[n]\nx : [n]R\nx[0]", "an index array has a length", 1, 5),
])
def test_mistakes_are_named_where_they_are(src, fragment, line, column):
    with pytest.raises(TypeCheckError) as info:
        tl.parse(src)
    err = info.value
    assert fragment in err.message
    assert (err.location.line, err.location.column) == (line, column), str(err)


def test_a_read_of_an_index_array_is_proved_in_bounds():
    with pytest.raises(BoundsError) as info:
        tl.parse("g : [p]index[n]\nx : [n]R\nsum(i:p) x[g[i + 1]]")
    assert "g[i + 1] may be read at i = 0 with p = 1, outside [0, p)" in info.value.message
    tl.parse("g : [p]index[n]\nx : [n]R\nsum(i:p) [i < p - 1] * x[g[i + 1]]")  # guarded: in range
    with pytest.raises(BoundsError) as info:
        tl.parse("g : [p]index[n]\nx : [n]R\nsum(i:p) x[g[i] + 1]")
    assert "x[g_0 + 1] may be read" in info.value.message and "g_0 stands for g[i]" in info.value.message


# ------------------------------------------------------------------------------------------------ values


@pytest.mark.parametrize("seed", range(3))
def test_the_loss_and_its_gradients_are_numpys(seed):
    rng = np.random.default_rng(seed)
    inputs = factorisation_inputs(rng)
    loss, gU, gV = numpy_factorisation(**inputs)
    e = tl.parse(FACTORISATION)
    grad = tl.grad(e, wrt=["U", "V"])
    np.testing.assert_allclose(e(**inputs), loss)
    np.testing.assert_allclose(tl.compile(e)(**inputs), loss)
    for got in (grad(**inputs), tl.compile(grad)(**inputs)):
        np.testing.assert_allclose(got[0], gU, atol=1e-12)
        np.testing.assert_allclose(got[1], gV, atol=1e-12)


def test_the_gradient_is_the_central_difference():
    rng = np.random.default_rng(5)
    inputs = factorisation_inputs(rng)
    e = tl.parse(FACTORISATION)
    gU, gV = tl.compile(tl.grad(e, wrt=["U", "V"]))(**inputs)
    dU, dV = rng.standard_normal(gU.shape), rng.standard_normal(gV.shape)
    fd = central_difference(e, inputs, {"U": dU, "V": dV})
    assert np.isclose(np.sum(gU * dU) + np.sum(gV * dV), fd, rtol=1e-7)


def test_the_adjoint_of_a_gather_is_a_scatter_add():
    e = tl.parse("g : [p]index[n]\nx : [n][k]R\ngen(i:p, j:k) x[g[i], j]")
    adjoint = tl.adjoint(e, wrt="x")
    assert str(adjoint).splitlines()[-1] == "gen(k0:n, k1:k) sum(i0:p) [g(i0, k0)] * dy[i0, k1]"
    rng = np.random.default_rng(2)
    g, x, dy = rng.integers(0, 6, 50), rng.standard_normal((6, 4)), rng.standard_normal((50, 4))
    want = np.zeros_like(x)
    np.add.at(want, g, dy)
    np.testing.assert_allclose(tl.compile(adjoint)(g=g, x=x, dy=dy), want)
    # the forward derivative and the adjoint agree (the inner-product identity)
    dx = rng.standard_normal(x.shape)
    forward = tl.derivative(e, wrt="x")(g=g, x=x, dx=dx)
    assert np.isclose(np.sum(forward * dy), np.sum(dx * want))


def test_the_cost_counts_reads_not_the_extent():
    e = tl.parse(FACTORISATION)
    rng = np.random.default_rng(3)
    costs = {}
    for n, p in [(10, 1000), (1000, 1000), (10, 2000)]:
        costs[n, p] = tl.cost(e, **factorisation_inputs(rng, n=n, m=n, k=4, p=p))
    assert costs[10, 1000] == costs[1000, 1000]  # the number of users and items plays no part
    assert costs[10, 2000] == 2 * costs[10, 1000] + 1  # linear in the reads (one sum's start less)
    cert = tl.certify(e, ["U", "V"], **factorisation_inputs(rng))
    assert cert.ok


# ------------------------------------------------------------------------------------------------ inputs


@pytest.mark.parametrize("run", ["evaluate", "compiled"])
@pytest.mark.parametrize("bad, fragment", [
    (lambda g: g + 7, "index array user holds 12 at position 0, outside [0, 7)"),
    (lambda g: -g - 1, "outside [0, 7)"),
    (lambda g: g.astype(float), "must hold integers, got dtype float64"),
    (lambda g: g > 2, "must hold integers, got dtype bool"),
    (lambda g: g[:, None], "must be one-dimensional (one index per row), got shape (40, 1)"),
])
def test_bad_index_arrays_are_refused_by_name(run, bad, fragment):
    inputs = factorisation_inputs(np.random.default_rng(4))
    inputs["user"] = bad(inputs["user"])
    e = tl.parse(FACTORISATION)
    call = e if run == "evaluate" else tl.compile(e)
    with pytest.raises(ShapeError) as info:
        call(**inputs)
    assert fragment in str(info.value)


def test_a_length_that_disagrees_with_the_other_inputs_is_a_shape_error():
    inputs = factorisation_inputs(np.random.default_rng(4))
    inputs["user"] = inputs["user"][:-1]
    for call in (tl.parse(FACTORISATION), tl.compile(tl.parse(FACTORISATION))):
        with pytest.raises(ShapeError, match="user"):
            call(**inputs)


def test_lists_of_ints_are_index_arrays():
    e = tl.parse("g : [p]index[n]\nx : [n]R\ngen(i:p) x[g[i]]")
    np.testing.assert_allclose(tl.compile(e)(g=[2, 0, 2], x=np.array([1.0, 2.0, 3.0])), [3.0, 1.0, 3.0])


def test_dask_inputs_give_the_in_memory_loss_and_gradients():
    """On Dask inputs the blockwise plan reads an index array as the relation it is (a block of the users cuts
    it into windows that hold no entry for some observations): the same values as in memory, chunked
    along the observations, the users or both, the index array itself a Dask array or not."""
    da = pytest.importorskip("dask.array")
    import dask

    inputs = factorisation_inputs(np.random.default_rng(4), n=23, m=9, k=5, p=300)
    loss, grad = tl.compile(tl.parse(FACTORISATION)), tl.compile(tl.grad(tl.parse(FACTORISATION), wrt=["U", "V"]))
    want_loss, want_grad = loss(**inputs), grad(**inputs)
    chunked = [dict(r=da.from_array(inputs["r"], chunks=70)),
               dict(U=da.from_array(inputs["U"], chunks=(6, 5)), V=da.from_array(inputs["V"], chunks=(4, 2))),
               dict(user=da.from_array(inputs["user"], chunks=100), U=da.from_array(inputs["U"], chunks=(10, 5)),
                    r=da.from_array(inputs["r"], chunks=120))]
    with dask.config.set(scheduler="synchronous"):
        for lazy in chunked:
            given = {**inputs, **lazy}
            assert np.isclose(loss(**given).compute(), want_loss)
            for got, want in zip(grad(**given), want_grad):
                np.testing.assert_allclose(got.compute(), want, atol=1e-12)
    bad = {**inputs, **chunked[0], "user": inputs["user"] + 23}
    with pytest.raises(ShapeError, match=r"index array user holds \d+ at position 0, outside \[0, 23\)"):
        loss(**bad)


def test_ad_grad_of_python_around_a_kernel_with_index_arrays():
    """A model fit written in Python around the compiled loss: ``ad.grad`` passes the index arrays along."""
    from tensorlang import ad

    rng = np.random.default_rng(6)
    inputs = factorisation_inputs(rng)
    kernel = tl.compile(tl.parse(FACTORISATION))

    user, item, r = inputs["user"], inputs["item"], inputs["r"]

    def fit(U, V):
        return kernel(user=user, item=item, U=U, V=V, r=r) + 0.1 * np.sum(U * U)

    gU, gV = ad.grad(fit, argnums=(0, 1))(inputs["U"], inputs["V"])
    _, wantU, wantV = numpy_factorisation(**inputs)
    np.testing.assert_allclose(gU, wantU + 0.2 * inputs["U"], atol=1e-12)
    np.testing.assert_allclose(gV, wantV, atol=1e-12)


@pytest.mark.parametrize("k", [1, 16, 19, 40])
def test_scatter_adds_in_lanes_change_no_bit(k):
    """The transposed CSR row of a scatter-add is read once for a block of lanes of its last index (each
    lane adding its terms in the row's order): the same bits as one point at a time, and NumPy's values."""
    from tensorlang.codegen.c import CEmitter
    from tensorlang.codegen.schedule import BLOCK_LANES

    rng = np.random.default_rng(k)
    inputs = factorisation_inputs(rng, n=30, m=11, k=k, p=500)
    grad = tl.grad(tl.parse(FACTORISATION), wrt=["U", "V"])
    scatter = tl.parse("E : rel[n, m]\nA : [n][k]R\ngen(j:m, f:k) sum(i:n) [E(i, j)] * A[i, f]")
    E, A = rng.random((30, 11)) < 0.3, rng.standard_normal((30, k))
    blocked = tl.compile(grad), tl.compile(scatter)
    try:
        CEmitter.lanes = 0
        plain = tl.compile(grad), tl.compile(scatter)
    finally:
        CEmitter.lanes = BLOCK_LANES
    assert "tl_lacc" in blocked[0].source and "tl_lacc" not in plain[0].source
    for got, want in zip(blocked[0](**inputs), plain[0](**inputs)):
        assert np.array_equal(got, want)
    assert np.array_equal(blocked[1](E=E, A=A), plain[1](E=E, A=A))
    np.testing.assert_allclose(blocked[1](E=E, A=A), E.T.astype(float) @ A)
    _, gU, gV = numpy_factorisation(**inputs)
    np.testing.assert_allclose(blocked[0](**inputs)[0], gU, atol=1e-12)


def test_the_sparse_jacobian_of_a_gather_has_one_entry_per_read():
    e = tl.parse("g : [p]index[n]; x : [n]R; gen(i:p) x[g[i]] * x[g[i]]")
    g, x = np.array([2, 0, 2, 1]), np.array([1.0, 2.0, 3.0])
    J = tl.compile(tl.jacobian(e, "x", sparse=True))(g=g, x=x)
    assert J.nnz == len(g)
    np.testing.assert_array_equal(J.toarray(), np.eye(3)[g] * 2 * x[g][:, None])
