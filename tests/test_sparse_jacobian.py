"""Jacobians and Hessians that keep their structure (``derive/structure.py``) and sparse results
(``tl.jacobian(..., sparse=True)``, ``derive/sparse.py``): checked against NumPy gradients written by hand and
central differences of them, and against the unstructured probed Jacobian, with costs linear in the nonzeros."""
from __future__ import annotations

import random

import numpy as np
import pytest
import scipy.sparse as sp
from oracles import differenced_jacobian
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensorlang as tl
from tensorlang.derive.api import probed_jacobian, wrt_vars
from tensorlang.nodes import RelType, tensor_dims
from tensorlang.traversal import free_vars

from strategies import SMOOTH_FUNCTIONS, inputs_for, programs, scalar_programs

STENCIL_1D = "x : [n]R\nsum(i:n) [i < n - 1] * (x[i+1] - x[i]) * (x[i+1] - x[i]) * x[i]"
STENCIL_2D = ("x : [n][m]R\nsum(i:n, j:m) [i < n - 1 and j < m - 1] * ((x[i+1, j] - x[i, j]) * (x[i+1, j] - x[i, j])"
              " + (x[i, j+1] - x[i, j]) * (x[i, j+1] - x[i, j])) * (x[i, j] * x[i, j] + 1)")


def _gradient_1d(x):
    """The gradient of STENCIL_1D, by hand."""
    d = x[1:] - x[:-1]
    g = np.zeros_like(x)
    g[:-1] += d * d - 2 * d * x[:-1]
    g[1:] += 2 * d * x[:-1]
    return g


def _gradient_2d(x):
    """The gradient of STENCIL_2D, by hand."""
    a = (x[1:, :-1] - x[:-1, :-1]) ** 2 + (x[:-1, 1:] - x[:-1, :-1]) ** 2
    w = x[:-1, :-1] ** 2 + 1
    g = np.zeros_like(x)
    g[:-1, :-1] += a * 2 * x[:-1, :-1]
    dv, dh = x[1:, :-1] - x[:-1, :-1], x[:-1, 1:] - x[:-1, :-1]
    g[1:, :-1] += 2 * dv * w
    g[:-1, :-1] -= 2 * dv * w + 2 * dh * w
    g[:-1, 1:] += 2 * dh * w
    return g


def test_the_1d_stencil_hessian_is_sparse_right_and_costs_its_nonzeros():
    e = tl.parse(STENCIL_1D)
    H = tl.hessian(e, "x", sparse=True)
    x = np.random.default_rng(0).uniform(-1, 1, 12)
    got = tl.evaluate(H, x=x)
    assert isinstance(got, sp.csr_array) and got.shape == (12, 12)
    assert got.nnz == 3 * 12 - 2
    np.testing.assert_allclose(got.toarray(), differenced_jacobian(_gradient_1d, x), atol=1e-6)
    compiled = tl.compile(H)(x=x)
    assert isinstance(compiled, sp.csr_array)
    np.testing.assert_allclose(compiled.toarray(), got.toarray(), rtol=1e-12, atol=1e-12)
    # the certified cost is linear in n (the dense Hessian's was n * (4n^2 + 3n - 8))
    assert tl.cost(H, n=10_000) < 20 * 10_000
    assert tl.cost(tl.hessian(e, "x"), n=10_000) < 20 * 10_000


def test_the_2d_stencil_hessian_is_sparse_right_and_costs_its_nonzeros():
    e = tl.parse(STENCIL_2D)
    H = tl.hessian(e, "x", sparse=True)
    x = np.random.default_rng(1).uniform(-1, 1, (5, 6))
    got = tl.compile(H)(x=x)
    assert isinstance(got, sp.csr_array) and got.shape == (30, 30)
    np.testing.assert_allclose(got.toarray(), differenced_jacobian(_gradient_2d, x), atol=1e-6)
    np.testing.assert_allclose(tl.evaluate(H, x=x).toarray(), got.toarray(), rtol=1e-12, atol=1e-12)
    assert got.nnz <= 5 * 30
    for size in (100, 200):   # O(n m), where the dense Hessian is (n m)^2
        assert tl.cost(H, n=size, m=size) < 60 * size * size
    # a grid beyond what a dense Hessian could hold: 512 x 512 (a dense one would take 550 GB)
    big = np.random.default_rng(2).uniform(-1, 1, (512, 512))
    hb = tl.compile(H)(x=big)
    assert hb.nnz < 5 * big.size
    np.testing.assert_allclose(hb @ np.ones(big.size), _hessian_times_ones_2d(big), rtol=1e-9, atol=1e-9)


def _hessian_times_ones_2d(x, h=1e-5):
    """H @ 1 for STENCIL_2D by a central difference of the hand-written gradient along ones."""
    return ((_gradient_2d(x + h) - _gradient_2d(x - h)) / (2 * h)).ravel()


def test_a_value_stored_once_for_every_probe_is_not_read_where_there_is_no_probe():
    """T2 stores ``gen(j:n) x[0] - 1`` (a primal value that probing spread over the probes) once; at n = 0 it was
    computed at no point, and ``x[0]`` is out of range there, so the value stored once keeps that guard."""
    e = tl.parse("x : [n]R\nexp(tanh([0 < n] * x[0] - 1)) * exp(tanh([0 < n] * x[0] - 1))")
    f = lambda x: np.exp(2 * np.tanh(x[:1] - 1)).sum() if x.size else 0.0
    for sparse in (False, True):
        J = tl.jacobian(e, "x", sparse=sparse)
        kernel = tl.compile(J)
        for n in range(4):
            x = np.linspace(0.2, 0.8, n)
            want = differenced_jacobian(f, x).reshape(n) if n else np.zeros(0)
            for got in (tl.evaluate(J, x=x), kernel(x=x)):
                got = got.toarray().reshape(n) if sparse else got
                np.testing.assert_allclose(got, want, atol=1e-6)


def test_a_dense_jacobian_is_a_csr_array_of_every_entry():
    e = tl.parse("x : [n]R\nA : [n][n]R\ngen(i:n) sum(j:n) A[i, j] * x[j] * x[j]")
    J = tl.jacobian(e, "x", sparse=True)
    rng = np.random.default_rng(3)
    x, A = rng.normal(size=4), rng.normal(size=(4, 4))
    got = tl.compile(J)(x=x, A=A)
    np.testing.assert_allclose(got.toarray(), 2 * A * x[None, :], rtol=1e-12)


def test_a_zero_hessian_has_no_nonzeros():
    H = tl.hessian(tl.parse("x : [n]R\nsum(i:n) 3 * x[i]"), "x", sparse=True)
    got = tl.evaluate(H, x=np.ones(5))
    assert got.shape == (5, 5) and got.nnz == 0
    assert tl.compile(H)(x=np.ones(5)).nnz == 0


def test_a_sparse_jacobian_is_refused_by_the_calls_that_take_a_program_to_derive():
    H = tl.hessian(tl.parse(STENCIL_1D), "x", sparse=True)
    with pytest.raises(tl.TypeCheckError, match="tl.adjoint: expr is a sparse Jacobian.*program it was derived from"):
        tl.adjoint(H, "x")
    assert str(H).startswith("# sparse: ") and "csr_array" in str(H).splitlines()[0]


def _jacobians(expr):
    """The wrt variables of ``expr`` whose Jacobian (or the program's Hessian) has at most 4 indices."""
    out_sizes, out_elem = tensor_dims(expr.type)
    found = []
    for v in free_vars(expr):
        if isinstance(v.type, RelType):
            continue
        in_sizes, in_elem = tensor_dims(v.type)
        if out_elem is tl.nodes.R and in_elem is tl.nodes.R and len(out_sizes) + len(in_sizes) <= 3:
            found.append(v.name)
    return found


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.one_of(programs(black_boxes=SMOOTH_FUNCTIONS, allow_relations=False),
                 scalar_programs(black_boxes=SMOOTH_FUNCTIONS, allow_relations=False)).flatmap(
    lambda e: st.tuples(st.just(e), inputs_for(e, max_size=4, allow_zero=True))))
def test_structured_and_sparse_jacobians_of_generated_programs_agree_with_the_probed_one(item):
    expr, inputs = item
    for name in _jacobians(expr):
        (var,) = wrt_vars(expr, name)
        probed = tl.evaluate(_declared(probed_jacobian(expr, var), expr), **inputs)
        structured = tl.jacobian(expr, name)
        np.testing.assert_allclose(tl.evaluate(structured, **inputs), probed, rtol=1e-9, atol=1e-12)
        sparse = tl.jacobian(expr, name, sparse=True)
        got = tl.evaluate(sparse, **inputs)
        np.testing.assert_allclose(got.toarray(), np.asarray(probed).reshape(got.shape), rtol=1e-9, atol=1e-12)
        # the work is that of the entries that can be nonzero and of the program itself
        assert tl.cost(sparse, **inputs) <= 40 * (_pattern_size(sparse, inputs) + tl.cost(expr, **inputs) + 1)


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.one_of(programs(black_boxes=SMOOTH_FUNCTIONS, allow_relations=True),
                 scalar_programs(black_boxes=SMOOTH_FUNCTIONS, allow_relations=True)).flatmap(
    lambda e: st.tuples(st.just(e), inputs_for(e, max_size=4, allow_zero=False))))
def test_jacobians_of_generated_programs_over_relations_are_right_or_their_sparse_form_refused(item):
    """Over data relations the structured Jacobian is the probed one; the sparse one is right, or refused
    naming the relation where its pattern would depend on the relation's data."""
    expr, inputs = item
    for name in _jacobians(expr):
        (var,) = wrt_vars(expr, name)
        probed = tl.evaluate(_declared(probed_jacobian(expr, var), expr), **inputs)
        np.testing.assert_allclose(tl.evaluate(tl.jacobian(expr, name), **inputs), probed, rtol=1e-9, atol=1e-12)
        try:
            sparse = tl.jacobian(expr, name, sparse=True)
        except tl.UnsupportedError as err:
            assert "relation(s)" in str(err)
            continue
        got = tl.evaluate(sparse, **inputs)
        np.testing.assert_allclose(got.toarray(), np.asarray(probed).reshape(got.shape), rtol=1e-9, atol=1e-12)
        if sparse.relations:   # its pattern read off the relation: the compiled kernel writes the same values
            compiled = tl.compile(sparse)(**inputs)
            np.testing.assert_array_equal(compiled.indptr, got.indptr)
            np.testing.assert_array_equal(compiled.indices, got.indices)
            np.testing.assert_allclose(compiled.data, got.data, rtol=1e-12, atol=1e-12)


def _pattern_size(sparse, inputs) -> int:
    from tensorlang.cost import sizes_and_relations

    _, indices, _, _ = sparse.pattern(sizes_and_relations(sparse.values, inputs)[0], inputs)
    return len(indices)


def _declared(body, expr):
    from tensorlang.declarations import declare
    from tensorlang.traversal import size_vars

    return declare(body, free_vars(expr), size_vars(expr))


SPARSE_PRODUCTS = {   # (program, the input differentiated): Jacobians nonzero on a relation's entries
    "spmv in x": ("E : rel[n, m]\nA : [n][m]R\nx : [m]R\ngen(i:n) sum(j:m) [E(i, j)] * A[i, j] * x[j]", "x"),
    "spmv in A": ("E : rel[n, m]\nA : [n][m]R\nx : [m]R\ngen(i:n) sum(j:m) [E(i, j)] * A[i, j] * x[j]", "A"),
    "transposed": ("E : rel[m, n]\nA : [m][n]R\nx : [m]R\ngen(i:n) sum(j:m) [E(j, i)] * A[j, i] * x[j]", "x"),
    "nonlinear": ("E : rel[n, m]\ny : [m]R\ngen(i:n) sum(j:m) [E(i, j)] * y[j] * y[j]", "y"),
    "shifted": ("E : rel[n, m]\nA : [n][m]R\nx : [m]R\ngen(i:n) sum(j:m) [1 <= j and E(i, j - 1)] * A[i, j] * x[j]",
                "x"),
    "batched": ("E : rel[n, m]\nA : [n][m]R\nx : [b][m]R\ngen(k:b, i:n) sum(j:m) [E(i, j)] * A[i, j] * x[k, j]",
                "x"),
}


def _sparse_product_inputs(name, rng, n=9, m=7, b=3, density=0.3):
    shape = (m, n) if name == "transposed" else (n, m)
    E = sp.random(*shape, density=density, format="csr", random_state=rng)
    inputs = {"E": E, "A": rng.normal(size=shape), "x": rng.normal(size=(b, m) if name == "batched" else m),
              "y": rng.normal(size=m)}
    text = SPARSE_PRODUCTS[name][0]
    return {k: v for k, v in inputs.items() if f"{k} :" in text}


@pytest.mark.parametrize("name", sorted(SPARSE_PRODUCTS))
def test_the_jacobian_of_a_sparse_product_has_the_relations_pattern_and_is_right(name):
    """The sparse Jacobian of a product over a relation ``E`` stores one value per entry of ``E`` (for each
    point of the other loops), evaluated and compiled, against the dense Jacobian and against central
    differences of the primal (oracles that share no code with the sparse path), for every form of relation
    a user passes."""
    text, wrt = SPARSE_PRODUCTS[name]
    e = tl.parse(text)
    rng = np.random.default_rng(3)
    inputs = _sparse_product_inputs(name, rng)
    J = tl.jacobian(e, wrt, sparse=True)
    assert J.relations == ("E",) and all(s is not None for s in J.stored)
    K = tl.compile(J)
    dense = np.asarray(tl.evaluate(tl.jacobian(e, wrt), **inputs))
    fd = differenced_jacobian(lambda v: np.asarray(tl.evaluate(e, **{**inputs, wrt: v})), inputs[wrt])
    E = inputs["E"]
    for form in (E, E.toarray(), E.toarray() != 0, [tuple(t) for t in zip(*E.nonzero())], E.tocoo(),
                 sp.csc_array(E)):
        here = {**inputs, "E": form, "n": 9, "m": 7}   # (a list of tuples gives no sizes)
        for got in (tl.evaluate(J, **here), K(**here)):
            assert isinstance(got, sp.csr_array)
            np.testing.assert_allclose(got.toarray(), dense.reshape(got.shape), atol=1e-12)
            np.testing.assert_allclose(got.toarray(), fd.reshape(got.shape), rtol=1e-6, atol=1e-6)
            others = inputs["x"].shape[0] if name == "batched" else 1
            assert got.nnz <= others * E.nnz   # its pattern is the relation's, never the dense box
        positions = J.pattern({k: v for k, v in _sizes(J, here).items()}, here)[0]
        assert sum(p.size for p in positions) == others * E.nnz   # O(nnz) positions too


def _sizes(J, inputs):
    from tensorlang.cost import sizes_and_relations

    return sizes_and_relations(J.values, inputs)[0]


def test_drawn_products_over_relations_are_the_dense_jacobian_evaluated_and_compiled():
    """Products over a relation drawn at random (shifted and transposed atoms, a second atom or a diagonal
    one looked up at each point, extra affine brackets, nonlinear bodies, a batch loop; empty to full
    relations in each form; sizes from 0), differentiated in
    each input: the sparse Jacobian, evaluated and compiled, is the dense one, or is refused naming the
    relation."""
    pick, rng = random.Random(1), np.random.default_rng(1)
    bodies = ["x[j]", "x[j] * x[j]", "exp(x[j]) * y[i]", "sin(x[j] * y[i])", "A[i, j] * x[j]",
              "x[j] * A[i, j] * y[i] * y[i]"]
    conditions = ["", " and j < m - 1", " and i != j", " and 2 <= i", " and j <= i"]
    stored = 0
    for _ in range(60):
        c1, c2 = pick.choice([0, 0, 1, -1]), pick.choice([0, 0, 1, 2])
        body, condition, transposed, batched = (pick.choice(bodies), pick.choice(conditions), pick.random() < 0.3,
                                                pick.random() < 0.25)
        atom = f"E(j + {c2}, i + {c1})" if transposed else f"E(i + {c1}, j + {c2})"
        atom = pick.choice([atom, atom, atom, f"{atom} and E(i + {c1}, i + {c1})", f"E(i + {c1}, i + {c1}) and j = i"])
        relation = "rel[m + 3, n + 3]" if transposed else "rel[n + 3, m + 3]"
        x, head = ("x : [q][m]R", "gen(b:q, i:n)") if batched else ("x : [m]R", "gen(i:n)")
        body = body.replace("x[j]", "x[b, j]") if batched else body
        text = f"E : {relation}\nA : [n][m]R\ny : [n]R\n{x}\n{head} sum(j:m) [{atom}{condition}] * {body}"
        e = tl.parse(text)
        n, m, q = pick.randint(0, 7), pick.randint(0, 7), pick.randint(1, 3)
        E = sp.random(*((m + 3, n + 3) if transposed else (n + 3, m + 3)), density=pick.choice([0.0, 0.2, 0.6, 1.0]),
                      format="csr", random_state=rng)
        inputs = {"E": pick.choice([E, E.toarray() != 0, E.tocoo()]), "A": rng.normal(size=(n, m)),
                  "y": rng.normal(size=n), "x": rng.normal(size=(q, m) if batched else m)}
        inputs = {k: v for k, v in inputs.items() if f"{k} :" in text}
        for wrt in [w for w in ("x", "y", "A") if f"{w}[" in body]:
            dense = np.asarray(tl.evaluate(tl.jacobian(e, wrt), **inputs))
            try:
                J = tl.jacobian(e, wrt, sparse=True)
            except tl.UnsupportedError as err:
                assert "relation(s) E" in str(err)
                continue
            stored += any(J.stored)
            for got in (tl.evaluate(J, **inputs), tl.compile(J)(**inputs)):
                np.testing.assert_allclose(got.toarray(), dense.reshape(got.shape), atol=1e-12, err_msg=text)
    assert stored >= 20


def test_a_piece_that_reads_a_relation_but_is_not_stored_over_its_entries_writes_only_its_pattern():
    """``[E(i, i)]``: the pattern is where the relation holds on the diagonal, one loop, looked up at each
    point. The kernel's loop runs over every ``i`` (isl does not see the relation), so it must test each
    position: a point outside the pattern has position -1, and writing there corrupted the memory before
    the result's array (caught as ``free(): invalid pointer``)."""
    e = tl.parse("E : rel[n, n]\nx : [n]R\ngen(i:n) [E(i, i) and i != 3] * x[i] * x[i]")
    J = tl.jacobian(e, "x", sparse=True)
    assert not any(J.stored) and J.relations == ("E",)
    K = tl.compile(J)
    x = np.arange(1.0, 9.0)
    for diagonal in ([0, 1, 3, 5, 7], [], list(range(8))):
        E = np.zeros((8, 8), dtype=bool)
        E[diagonal, diagonal] = True
        want = np.diag(np.where(E.diagonal() & (np.arange(8) != 3), 2 * x, 0.0))
        for _ in range(3):
            got = K(E=sp.csr_array(E), x=x)
            assert got.nnz == len([d for d in diagonal if d != 3])
            np.testing.assert_allclose(got.toarray(), want)


def test_a_sparse_kernel_over_a_relation_follows_the_relation_from_call_to_call():
    """One compiled sparse Jacobian called with different relations (an empty one, one with duplicates and
    explicit zeros, one full) gives each call's pattern; the patterns are kept per relation, and a relation
    changed in place is seen."""
    text, wrt = SPARSE_PRODUCTS["spmv in x"]
    e = tl.parse(text)
    K = tl.compile(tl.jacobian(e, wrt, sparse=True))
    rng = np.random.default_rng(5)
    A, x = rng.normal(size=(4, 3)), rng.normal(size=3)
    with_zeros = sp.csr_array((np.array([1.0, 0.0, 2.0]), np.array([0, 1, 2]), np.array([0, 2, 2, 3, 3])), shape=(4, 3))
    cases = [np.zeros((4, 3), dtype=bool), [(0, 1), (0, 1), (3, 2)], with_zeros, np.ones((4, 3), dtype=bool)]
    for E in cases * 2:
        mask = np.zeros((4, 3), dtype=bool)
        if isinstance(E, list):
            for t in E:
                mask[t] = True
        else:
            mask = (E.toarray() if sp.issparse(E) else E) != 0
        got = K(E=E, A=A, x=x)
        assert got.nnz == mask.sum()
        np.testing.assert_allclose(got.toarray(), np.where(mask, A, 0.0))
    E = sp.csr_array(np.eye(4, 3, dtype=bool))
    before = K(E=E, A=A, x=x)
    E.indices[:] = [2, 1, 0]   # changed in place, still canonical: a new pattern, not the one kept
    after = K(E=E, A=A, x=x)
    np.testing.assert_allclose(before.toarray(), np.where(np.eye(4, 3, dtype=bool), A, 0.0))
    np.testing.assert_allclose(after.toarray(), np.where(E.toarray(), A, 0.0))


def test_a_sparse_product_is_costed_by_its_relations_entries():
    """``tl.cost`` of the sparse Jacobian of a nonlinear product over ``E`` grows with ``E``'s entries, not
    with the dense box: the same number of entries at 10x the size costs the same."""
    e = tl.parse(SPARSE_PRODUCTS["nonlinear"][0])
    J = tl.jacobian(e, "y", sparse=True)
    costs = []
    for n in (50, 500):
        E = sp.csr_array((np.ones(40), np.arange(40) % n, np.r_[np.arange(41), np.full(n - 40, 40)]), shape=(n, n))
        costs.append(tl.cost(J, E=E, y=np.ones(n)))
    assert 0 < costs[0] == costs[1]


def _stored(m) -> np.ndarray:
    """Where the CSR array ``m`` stores an entry (zero or not), as a boolean array."""
    out = np.zeros(m.shape, dtype=bool)
    out[np.repeat(np.arange(m.shape[0]), np.diff(m.indptr)), m.indices] = True
    return out


def _relation_forms(E):
    """A relation as a user passes it: a boolean array, a CSR matrix, a COO matrix, a list of index tuples."""
    return [E, sp.csr_array(E), sp.coo_array(E), [tuple(t) for t in zip(*np.nonzero(E))]]


def test_a_graph_diffusions_jacobian_is_sparse_on_the_relation_and_its_diagonal():
    """A graph diffusion, ``sum(j) [E(i, j)] w[i, j] (x[i] - x[j])``: its Jacobian is the weighted Laplacian
    of E (a closed form sharing no code with tensorlang), nonzero on E's entries and on the diagonal where a
    row of E has an entry (``exists(j) E(i, j)``, read off E's entries).  The two pieces overlap on E's
    diagonal entries, which the pattern holds once."""
    e = tl.parse("E : rel[n, n]\nw : [n][n]R\nx : [n]R\ngen(i:n) sum(j:n) [E(i, j)] * w[i, j] * (x[i] - x[j])")
    J = tl.jacobian(e, "x", sparse=True)
    assert J.overlapping and any(J.stored)
    K = tl.compile(J)
    rng = np.random.default_rng(2)
    for n, density in ((1, 1.0), (6, 0.0), (7, 0.3), (30, 0.1), (12, 1.0)):
        E = rng.random((n, n)) < density
        w, x = rng.normal(size=(n, n)), rng.normal(size=n)
        W = np.where(E, w, 0.0)
        want = np.diag(W.sum(1)) - W
        pattern = E | np.diag(E.any(axis=1))
        for form in _relation_forms(E):
            for got in (tl.evaluate(J, E=form, w=w, x=x, n=n), K(E=form, w=w, x=x, n=n)):
                np.testing.assert_array_equal(_stored(got), pattern)
                np.testing.assert_allclose(got.toarray(), want, atol=1e-12)


def test_the_sparse_hessian_of_a_graph_energy_is_twice_the_graph_laplacian():
    """The energy of a graph Laplacian, sum over the edges E of (x_i - x_j)^2: its Hessian is twice the
    Laplacian of E + E^T (a closed form sharing no code with tensorlang), nonzero on E, its transpose and
    the diagonal of the vertices with an edge.  Its derivation has existentials over the relation in its
    brackets (``exists(i2) E(i0, i2)``), which the sparse values drop where a sibling atom implies them, so
    the kernel tests none by a loop; and the quartic energy's against its closed form at 300 vertices."""
    e = tl.parse("E : rel[n, n]\nx : [n]R\nsum(i:n, j:n) [E(i, j)] * (x[i] - x[j]) * (x[i] - x[j])")
    H = tl.hessian(e, "x", sparse=True)
    assert "exists" not in str(H.values)
    K = tl.compile(H)
    rng = np.random.default_rng(0)
    for n, density in ((7, 0.3), (9, 0.0), (5, 1.0), (40, 0.05)):
        E = rng.random((n, n)) < density
        x = rng.random(n)
        A = E.astype(float)   # a pair of edges i -> j and j -> i counts twice
        W = A + A.T - 2 * np.diag(np.diag(A))
        laplacian = np.diag(W.sum(axis=1)) - W
        np.testing.assert_allclose(tl.evaluate(tl.hessian(e, "x"), E=E, x=x), 2 * laplacian, atol=1e-12)
        pattern = E | E.T | np.diag(E.any(axis=0) | E.any(axis=1))
        for form in _relation_forms(E):
            for got in (tl.evaluate(H, E=form, x=x, n=n), K(E=form, x=x, n=n)):
                np.testing.assert_array_equal(_stored(got), pattern)
                np.testing.assert_allclose(got.toarray(), 2 * laplacian, atol=1e-12)
    quartic = tl.parse("E : rel[n, n]\nx : [n]R\nsum(i:n, j:n) [E(i, j)] * (x[i] - x[j]) * (x[i] - x[j]) * "
                       "(x[i] - x[j]) * (x[i] - x[j])")
    E = sp.random(300, 300, density=0.02, format="csr", random_state=3)
    x = rng.normal(size=300)
    r, c = E.nonzero()
    d = 12 * (x[r] - x[c]) ** 2   # 12 (x_i - x_j)^2 (e_i - e_j)(e_i - e_j)^T per edge
    want = sp.coo_array((np.r_[d, d, -d, -d], (np.r_[r, c, r, c], np.r_[r, c, c, r])), shape=(300, 300)).toarray()
    np.testing.assert_allclose(tl.compile(tl.hessian(quartic, "x", sparse=True))(E=E, x=x).toarray(), want,
                               rtol=1e-10, atol=1e-10)


def test_the_results_of_a_sparse_kernel_share_a_read_only_pattern():
    """Every result at a size holds the same indices and indptr: a change of one result's structure in place
    (``eliminate_zeros`` at a point where entries are 0) is refused, and the next result is still right
    (it was wrong, silently, when the shared arrays were writable); a copy is the user's to change."""
    e = tl.parse(STENCIL_1D)
    kernel = tl.compile(tl.hessian(e, "x", sparse=True))
    at_zero = kernel(x=np.zeros(6))
    with pytest.raises(ValueError):
        at_zero.eliminate_zeros()
    mine = at_zero.copy()
    mine.eliminate_zeros()
    assert mine.nnz == 0
    x = np.linspace(0.0, 1.0, 6)
    np.testing.assert_allclose(kernel(x=x).toarray(), tl.evaluate(tl.hessian(e, "x"), x=x), atol=1e-12)
    # results held at once are arrays of their own values (each a copy of one checked array of the pattern):
    # scaling one's values in place changes neither the other nor the next
    first, second = kernel(x=x), kernel(x=2 * x)
    first.data *= 0.0
    for h, at in ((second, 2 * x), (kernel(x=x), x)):
        assert type(h).__name__ == "csr_array" and h.has_canonical_format
        np.testing.assert_allclose(h.toarray(), tl.evaluate(tl.hessian(e, "x"), x=at), atol=1e-12)


ENERGIES = {   # energies as their users write them, with the shape each is tried at
    "3-D Laplacian and quartic": ("u : [n][n][n]R\nsum(i:n, j:n, k:n) [i < n - 1] * (u[i+1, j, k] - u[i, j, k]) * "
                                  "(u[i+1, j, k] - u[i, j, k]) + [j < n - 1] * (u[i, j+1, k] - u[i, j, k]) * "
                                  "(u[i, j+1, k] - u[i, j, k]) + [k < n - 1] * (u[i, j, k+1] - u[i, j, k]) * "
                                  "(u[i, j, k+1] - u[i, j, k]) + u[i, j, k] * u[i, j, k] * u[i, j, k] * u[i, j, k]",
                                  (4, 4, 4), 352),
    "smoothed p-Laplacian": ("u : [n][m]R\nsum(i:n, j:m) [i < n - 1 and j < m - 1] * sqrt(1 + (u[i+1, j] - u[i, j]) * "
                             "(u[i+1, j] - u[i, j]) + (u[i, j+1] - u[i, j]) * (u[i, j+1] - u[i, j]))", (5, 6), 149),
    "couplings at distances 1 to 3": ("x : [n]R\nsum(i:n, d:3) [i + d + 1 < n] * exp(x[i] * x[i + d + 1])", (9,), 51),
}


@pytest.mark.parametrize("name", sorted(ENERGIES))
def test_sparse_hessians_of_energies_as_users_write_them(name):
    """The compiled sparse Hessian against central differences of the compiled gradient, its pattern exactly
    the stencil's, its certified cost within a constant factor of its nonzeros; its pieces (one of them a
    single entry, or summing over the three couplings) written in one sweep over the entries."""
    src, shape, nonzeros = ENERGIES[name]
    e = tl.parse(src)
    (wrt,) = e.free_vars
    x = np.random.default_rng(0).uniform(-0.5, 0.5, shape)
    H = tl.hessian(e, wrt, sparse=True)
    kernel = tl.compile(H)
    assert "one sweep over the entries" in kernel.source
    h = kernel(**{wrt: x})
    gradient = tl.compile(tl.grad(e, wrt))
    assert h.nnz == nonzeros
    np.testing.assert_allclose(h.toarray(), differenced_jacobian(lambda y: np.ravel(gradient(**{wrt: y})), x),
                               atol=1e-6)
    assert tl.cost(H, **{wrt: x}) <= 40 * nonzeros


WRITTEN_AT_POSITIONS = {   # programs and the shapes each is tried at (uneven, and degenerate)
    "1-D stencil": (STENCIL_1D, [(7,), (2,), (1,)]),
    "2-D stencil": (STENCIL_2D, [(5, 9), (9, 2), (1, 6), (2, 2)]),
    # the diagonal reached by three sums (terms that add into one entry), rows n-2 and n-1 empty
    "repeated terms, empty rows": ("x : [n]R\n(sum(i:n) [i < n - 3] * x[i] * x[i] * x[i + 1]) + "
                                   "(sum(j:n) [j < n - 3] * x[j] * x[j + 1] * x[j + 1]) + (sum(k:n) [k < n - 2] * x[k] * x[k] * x[k])",
                                   [(8,), (4,), (3,)]),
}


@pytest.mark.parametrize("name", sorted(WRITTEN_AT_POSITIONS))
def test_a_compiled_sparse_hessian_writes_every_value_once_at_its_csr_position(name):
    """The compiled kernel writes each nonzero straight into the result's ``data``: the result equals the dense
    Hessian of the reference evaluator and central differences of the compiled gradient (oracles that share
    no code with the sparse one), its pattern's positions are each CSR position exactly once, and they and a
    call's memory are O(nonzeros)."""
    import tracemalloc

    src, shapes = WRITTEN_AT_POSITIONS[name]
    e = tl.parse(src)
    kernel, gradient = tl.compile(tl.hessian(e, "x", sparse=True)), tl.compile(tl.grad(e, "x"))
    for shape in shapes:
        x = np.random.default_rng(len(shape) * 10 + shape[0]).uniform(-1, 1, shape)
        got = kernel(x=x)
        assert isinstance(got, sp.csr_array) and got.has_canonical_format and got.shape == (x.size, x.size)
        dense = np.asarray(tl.evaluate(tl.hessian(e, "x"), x=x)).reshape(got.shape)
        np.testing.assert_allclose(got.toarray(), dense, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got.toarray(), differenced_jacobian(lambda v: gradient(x=v), x), atol=1e-6)
        positions, indices, _, _ = kernel.jacobian.pattern(kernel._sizes({"x": x}))
        written = np.concatenate([p[p >= 0] for p in positions])
        np.testing.assert_array_equal(np.sort(written), np.arange(len(indices)))
    big = np.random.default_rng(5).uniform(-1, 1, (2000,) if len(shapes[0]) == 1 else (40, 50))
    first = kernel(x=big)
    positions, indices, _, _ = kernel.jacobian.pattern(kernel._sizes({"x": big}))
    assert sum(p.size for p in positions) <= 2 * len(indices)
    tracemalloc.start()
    again = kernel(x=big)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak <= 8 * again.nnz + 16384   # the values, and nothing of their size besides
    np.testing.assert_array_equal(again.data, first.data)
    with pytest.raises(tl.TensorLangError, match="SparseKernel"):
        kernel.values(x=big)


def test_the_scattered_kernel_of_one_piece_writes_what_the_plain_one_does():
    """A Jacobian of one piece whose points are its CSR data in order is returned as a view of the plain values
    kernel's output; its scattered kernel (what a pattern of several pieces runs) writes the same values at
    their positions, where the values come from a product (no BLAS call writes a scattered output) or from a
    long reduction into a small target (interchanged: stores that test the position)."""
    rng = np.random.default_rng(6)
    cases = [("x : [n]R\nA : [m][n]R\nsum(k:m) (sum(i:n) A[k, i] * x[i]) * (sum(j:n) A[k, j] * x[j])",
              {"x": rng.normal(size=40), "A": rng.normal(size=(60, 40))}, tl.hessian),
             ("x : [2]R\nB : [n]R\ngen(i:2) sum(j:n) exp(x[i] * B[j])",
              {"x": rng.normal(size=2), "B": 0.01 * rng.normal(size=100_000)}, tl.jacobian)]
    for src, inputs, derive in cases:
        e = tl.parse(src)
        kernel = tl.compile(derive(e, "x", sparse=True))
        got = kernel(**inputs)
        np.testing.assert_allclose(got.toarray(), np.asarray(tl.evaluate(derive(e, "x"), **inputs)).reshape(got.shape),
                                   rtol=1e-10, atol=1e-10)
        positions, indices, _, _ = kernel.jacobian.pattern(kernel._sizes(inputs))
        data = np.full(len(indices), np.nan)
        kernel._kernel(positions[0].dtype)._run(inputs, outputs=[*positions, data])
        np.testing.assert_allclose(data, got.data, rtol=1e-12, atol=1e-12)


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(programs(black_boxes=SMOOTH_FUNCTIONS, allow_relations=False).flatmap(
    lambda e: st.tuples(st.just(e), inputs_for(e, max_size=4, allow_zero=False))))
def test_compiled_sparse_jacobians_of_generated_programs_are_the_evaluated_ones(item):
    """The compiled kernel (its pieces written in one sweep over the entries where it can be) against the
    reference evaluator of the same sparse Jacobian, value for value in CSR order."""
    expr, inputs = item
    for name in _jacobians(expr):
        sparse = tl.jacobian(expr, name, sparse=True)
        want, got = tl.evaluate(sparse, **inputs), tl.compile(sparse)(**inputs)
        np.testing.assert_array_equal(got.indptr, want.indptr)
        np.testing.assert_array_equal(got.indices, want.indices)
        np.testing.assert_allclose(got.data, want.data, rtol=1e-12, atol=1e-12)


def test_the_pieces_of_a_sparse_hessian_are_one_sweep_over_its_rows_on_one_thread_and_on_several():
    """The five pieces of the 2-D stencil's Hessian are written by one loop nest in the order of the CSR data,
    each outermost iteration counting its positions from its first, and the two tangents that only they read
    are computed a block of rows at a time beside them: right against the product of the Hessian with random
    directions by central differences of the compiled gradient (no code shared), at a grid whose nest runs
    on one thread, at one past the parallel threshold, and at one whose rows are too long for a block
    (the tangents whole, then the sweep)."""
    e = tl.parse(STENCIL_2D)
    kernel, gradient = tl.compile(tl.hessian(e, "x", sparse=True)), tl.compile(tl.grad(e, "x"))
    assert "one sweep over the entries" in kernel.source and kernel.source.count("tl_k = -1") >= 1
    assert "in blocks of rows beside it" in kernel.source
    rng = np.random.default_rng(7)
    for shape in ((40, 31), (700, 650), (3, 9000)):
        x = rng.uniform(-1, 1, shape)
        h = kernel(x=x)
        assert h.has_canonical_format and (abs(h - h.T)).max() < 1e-12
        for _ in range(2):
            v = rng.uniform(-1, 1, shape)
            step = 1e-4
            differenced = (gradient(x=x + step * v) - gradient(x=x - step * v)) / (2 * step)
            np.testing.assert_allclose(h @ v.ravel(), differenced.ravel(), rtol=1e-6, atol=1e-6)


SWEPT = {   # energies whose Hessians' pieces are swept, with entries reached in varied ways, and their shapes
    "reversed neighbours": ("x : [n]R\nsum(i:n) [i < n - 1] * x[n - 1 - i] * x[n - 2 - i] * x[i] * x[i]",
                            [(7,), (2,), (1,), (40,)]),
    "diagonal neighbours": ("x : [n][m]R\nsum(i:n, j:m) [i < n - 1 and j < m - 1] * (x[i+1, j+1] - x[i, j]) * "
                            "(x[i+1, j+1] - x[i, j]) * x[i, j+1]", [(5, 6), (2, 2), (1, 3), (30, 17)]),
    "rows of two": ("x : [n][2]R\nsum(i:n) [i < n - 1] * (x[i+1, 0] - x[i, 1]) * (x[i+1, 1] - x[i, 0]) * x[i, 0] * x[i, 1]",
                    [(6, 2), (1, 2), (50, 2)]),
    "3-D, two apart": ("x : [n][m][k]R\nsum(a:n, b:m, c:k) [a < n - 2 and c < k - 1] * (x[a+2, b, c] - x[a, b, c+1]) * "
                       "(x[a+2, b, c] - x[a, b, c+1]) * x[a, b, c] * x[a, b, c]", [(4, 3, 5), (3, 1, 2), (9, 4, 6)]),
}


@pytest.mark.parametrize("name", sorted(SWEPT))
def test_swept_sparse_hessians_are_the_evaluated_ones_entry_for_entry(name):
    """Pieces whose entries run against their loops (``x[n - 1 - i]``), diagonally, over rows of two or two
    planes apart, written in one sweep: the kernel's CSR arrays are the reference evaluator's, and its values
    the evaluated sparse and dense Hessians', at uneven and degenerate shapes."""
    src, shapes = SWEPT[name]
    e = tl.parse(src)
    H = tl.hessian(e, "x", sparse=True)
    kernel = tl.compile(H)
    assert "one sweep over the entries" in kernel.source
    for shape in shapes:
        x = np.random.default_rng(sum(shape)).uniform(-1, 1, shape)
        got, want = kernel(x=x), tl.evaluate(H, x=x)
        np.testing.assert_array_equal(got.indptr, want.indptr)
        np.testing.assert_array_equal(got.indices, want.indices)
        np.testing.assert_allclose(got.data, want.data, rtol=1e-12, atol=1e-12)
        dense = np.asarray(tl.evaluate(tl.hessian(e, "x"), x=x)).reshape(got.shape)
        np.testing.assert_allclose(got.toarray(), dense, rtol=1e-12, atol=1e-12)
