"""The reference evaluator: constructs, laziness under guards, pairs, relations, size inference and
shape errors; and agreement with the literal interpreter of Fig. 4 on generated programs."""
import numpy as np
import pytest
import scipy.sparse as sp

import tensorlang as tl
from tensorlang.errors import ShapeError

rng = np.random.default_rng(1)


def test_scalar_arithmetic_and_black_boxes():
    e = tl.parse("x : R; y : R; exp(x) * y - x / y + pow(y, 2) + max(x, y) + relu(-x)")
    x, y = 0.3, 1.7
    assert e(x=x, y=y) == pytest.approx(np.exp(x) * y - x / y + y**2 + max(x, y) + max(-x, 0))


def test_gen_sum_access():
    A = rng.normal(size=(4, 3))
    e = tl.parse("A : [n][m]R; gen(j:m, i:n) A[i, j]")
    np.testing.assert_array_equal(e(A=A), A.T)
    e = tl.parse("A : [n][m]R; gen(i:n) sum(j:m) A[i][j] * A[i, j]")
    np.testing.assert_allclose(e(A=A), (A * A).sum(axis=1))


def test_matrix_product():
    A, B = rng.normal(size=(5, 6)), rng.normal(size=(6, 7))
    e = tl.parse("A : [n][k]R; B : [k][m]R; gen(i:n, j:m) sum(l:k) A[i, l] * B[l, j]")
    np.testing.assert_allclose(e(A=A, B=B), A @ B)


def test_guard_is_lazy():
    # x[i - 1] is out of range at i = 0, but the guard is false there
    e = tl.parse("x : [n]R; gen(i:n) [i >= 1] * x[i - 1]")
    np.testing.assert_array_equal(e(x=np.arange(1.0, 5.0)), [0, 1, 2, 3])
    # a guard that is false everywhere never evaluates its operand
    e = tl.parse("x : [n]R; gen(i:n) [n < 0] * log(x[i])")
    np.testing.assert_array_equal(e(x=-np.ones(3)), [0, 0, 0])


def test_no_read_in_loops_without_points():
    """``gen(i:m, k:n) z[i]`` with n = 0 reads nothing, even where i is outside z (its Tensor SSA form
    drops the guard ``[i < m + n - 1]`` that the box implies when it has points)."""
    e = tl.parse("z : [m + n - 1]R; gen(i:m, k:n) z[i]")
    assert e(z=np.array([]), m=1, n=0).shape == (1, 0)
    f = tl.parse("z : [m + n - 1]R; gen(i:m) sum(k:n) tanh([i < m + n - 1] * z[i])")
    np.testing.assert_array_equal(tl.evaluate(tl.to_ssa(f), z=np.array([]), m=1, n=0), [0.0])


def test_guard_of_tensor_and_pair():
    e = tl.parse("x : [n]R; gen(i:n) [i < 2] * (x[i], gen(j:n) x[j])")
    first, second = e(x=np.arange(3.0))
    np.testing.assert_array_equal(first, [0, 1, 0])
    np.testing.assert_array_equal(second, [[0, 1, 2], [0, 1, 2], [0, 0, 0]])


def test_pairs_and_lets():
    e = tl.parse("p : ([n]R, R); let q = (p.1, p.0) in sum(i:n) q.1[i] * q.0")
    assert e(p=(np.arange(4.0), 2.0)) == pytest.approx(12.0)


def test_exists():
    e = tl.parse("x : [n]R; gen(i:n) [exists(j:n) 2 * j = i] * x[i]")
    np.testing.assert_array_equal(e(x=np.ones(5)), [1, 0, 1, 0, 1])


@pytest.mark.parametrize(
    "relation",
    [
        np.array([[True, False], [False, True], [True, True]]),
        sp.csr_matrix(np.array([[1.0, 0], [0, 2.0], [3.0, 4.0]])),
        [(0, 0), (1, 1), (2, 0), (2, 1)],
    ],
    ids=["dense", "sparse", "tuples"],
)
def test_relations(relation):
    e = tl.parse("S : rel[n, m]; A : [n][m]R; x : [m]R; gen(i:n) sum(j:m) [S(i, j)] * A[i, j] * x[j]")
    A, x = rng.normal(size=(3, 2)), rng.normal(size=2)
    mask = np.array([[1, 0], [0, 1], [1, 1]])
    np.testing.assert_allclose(e(S=relation, A=A, x=x), (mask * A) @ x)


def test_size_inference_and_by_name():
    e = tl.parse("x : [n + m - 1]R; c : [m]R; gen(i:n) sum(j:m) x[i + j] * c[j]")
    assert e(x=np.ones(10), c=np.ones(3)).shape == (8,)
    assert e(x=np.ones(10), c=np.ones(3), n=8).shape == (8,)
    with pytest.raises(ShapeError, match=r"n"):
        e(x=np.ones(10), c=np.ones(3), n=5)


def test_shape_error_names_input_and_shapes():
    e = tl.parse("A : [n][n]R; sum(i:n) A[i, i]")
    with pytest.raises(ShapeError) as info:
        e(A=np.ones((3, 4)))
    assert "A" in str(info.value) and "(3, 4)" in str(info.value)
    with pytest.raises(ShapeError, match="dimension"):
        e(A=np.ones(3))


def test_missing_unknown_and_unused_inputs():
    e = tl.parse("x : [n]R; sum(i:n) x[i]")
    with pytest.raises(ShapeError, match="missing"):
        e()
    with pytest.raises(ShapeError, match="unknown input 'y'"):  # a name the program does not declare
        e(x=np.ones(2), y=1.0)
    with pytest.raises(ShapeError, match="unknown input 'xx'.*did you mean 'x'"):
        e(xx=np.ones(2))
    assert tl.parse("x : [n]R; y : R; sum(i:n) x[i]")(x=np.ones(2), y=1.0) == 2.0  # declared, not read
    with pytest.raises(ShapeError, match="cannot be inferred"):
        tl.parse("gen(i:n) 1")()


def test_size_zero():
    e = tl.parse("x : [n]R; (sum(i:n) x[i], gen(i:n) x[i])")
    total, copy = e(x=np.zeros(0))
    assert total == 0.0 and copy.shape == (0,)
