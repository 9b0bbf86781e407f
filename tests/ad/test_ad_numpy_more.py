"""Edge cases of the NumPy functions given as code (``rules.implemented``) and of the ufunc methods: NaN
entries of the nan-reductions get an exact 0 in every mode, ties of median and max get a subgradient,
np.interp at a knot and the options that are not differentiated are refused by name, keyword forms
agree with central differences (``all_modes.check_modes``)."""
import numpy as np
import pytest

from tensorlang import ad
from tensorlang.errors import UnsupportedError

from all_modes import check_modes   # (tests/ad is on the path)

_rng = np.random.default_rng(11)
A = _rng.uniform(0.2, 0.9, (3, 4))
V = _rng.uniform(0.2, 0.9, 5)
NANS = np.zeros((3, 4), dtype=bool)
NANS[1, 2] = True


@pytest.mark.parametrize("f", [np.nansum, np.nanmean, np.nanmax, np.nanmin, np.nanprod, np.nanstd, np.nanvar])
def test_nan_entries_get_an_exact_zero_in_every_mode(f):
    x = np.where(NANS, np.nan, A)

    def loss(z):
        return np.sum(f(z, axis=0) ** 2)
    g = ad.grad(loss)(x)
    assert g[1, 2] == 0.0 and np.all(np.isfinite(g))
    t = np.where(NANS, 0.0, 1.0)
    assert np.isfinite(ad.jvp(loss, (x,), (t,))[1])
    h = ad.hessian(loss)(x)
    assert np.all(np.isfinite(h)) and np.all(h[1, 2] == 0.0) and np.all(h[..., 1, 2] == 0.0)
    # away from the NaN entry, the same as central differences of NumPy's own function
    check_modes(lambda z: np.sum(f(np.where(NANS, np.nan, z), axis=0) ** 2), A, rtol2=1e-4, atol2=1e-5)


def test_nanstd_of_equal_entries_is_a_subgradient_not_nan():
    g = ad.grad(lambda x: np.nanstd(x))(np.array([0.5, 0.5, np.nan]))
    np.testing.assert_array_equal(g, [0.0, 0.0, 0.0])


def test_median_at_a_tie_is_a_subgradient():
    # the tied entries 0.5 and 0.5: the gradient goes to one of them (a subgradient), the same in both modes
    x = np.array([0.1, 0.5, 0.5, 0.9, 0.7])
    g = ad.grad(np.median)(x)
    assert g.sum() == 1.0 and set(np.flatnonzero(g)) <= {1, 2}
    assert ad.jvp(np.median, (x,), (g,))[1] == 1.0
    g = ad.grad(lambda z: np.max(z))(np.array([0.3, 0.9, 0.9]))
    assert g.sum() == 1.0 and g[0] == 0.0


@pytest.mark.parametrize("f", [np.median, np.nanmedian, lambda x: np.quantile(x, 0.3),
                               lambda x: np.nanpercentile(x, 40.0), lambda x: np.quantile(x, [0.1, 0.7])])
def test_quantiles_have_numpys_result_type_in_every_mode(f):
    """A quantile that is a number is a NumPy float, as NumPy's own result, not a 0-d array."""
    x = np.array([3.0, 1.0, 2.0, 5.0])
    want = type(f(x))
    y, t = ad.jvp(f, (x,), (np.ones(4),))
    assert type(y) is want and type(t) is want
    if want is np.float64:
        assert type(ad.value_and_grad(f)(x)[0]) is want


def test_quantile_keyword_forms_and_percentile():
    check_modes(lambda x: np.sum(np.quantile(x, [0.25, 0.8], axis=0, keepdims=True) ** 2), A)
    check_modes(lambda x: np.sum(np.percentile(x, 40.0, axis=(0, 1))), A)
    check_modes(lambda q: np.quantile(V, q), 0.35)   # the slope between the two sorted entries
    with pytest.raises(UnsupportedError, match="linear method"):
        ad.grad(lambda x: np.quantile(x, 0.3, method="nearest"))(V)


def test_interp_refuses_at_a_knot_by_name():
    xp, fp = np.array([0.0, 0.5, 1.0]), np.array([1.0, 2.0, 0.5])
    with pytest.raises(UnsupportedError, match="interp"):
        ad.grad(lambda x: np.sum(np.interp(x, xp, fp)))(np.array([0.2, 0.5]))
    with pytest.raises(UnsupportedError, match="interp"):
        ad.jvp(lambda x: np.sum(np.interp(x, xp, fp)), (np.array([0.5]),), (np.ones(1),))
    # a knot where the slopes agree is no kink
    np.testing.assert_allclose(ad.grad(lambda x: np.interp(x, [0.0, 0.5, 1.0], [0.0, 1.0, 2.0]))(0.5), 2.0)
    # slope in x, linear in fp, constant outside xp
    check_modes(lambda x, f: np.sum(np.interp(x, xp, f) ** 2), np.array([-0.3, 0.2, 0.7, 1.4]), fp)
    with pytest.raises(UnsupportedError, match="period"):
        ad.grad(lambda x: np.interp(x, xp, fp, period=1.0))(0.3)


def test_ufunc_methods_with_keywords():
    check_modes(lambda x: np.sum(np.add.reduce(x, axis=1, keepdims=True) ** 2), A)
    check_modes(lambda x: np.sum(np.multiply.reduce(x, axis=(0, 1))), A)
    check_modes(lambda x: np.sum(np.maximum.reduce(x, axis=0)), A)
    check_modes(lambda x: np.sum(np.add.accumulate(x, axis=0) ** 2), A)
    check_modes(lambda x, y: np.sum(np.multiply.outer(x, y) ** 2), V, A[0])
    reduce = np.add.reduce   # a bound method held in a variable
    check_modes(lambda x: np.sum(reduce(x) ** 2), A)


def test_np_add_at_forward():
    def f(x):
        y = np.zeros(4)
        np.add.at(y, np.array([0, 1, 1]), x)
        return np.sum(y ** 2)
    x = np.array([0.3, 0.4, 0.5])
    np.testing.assert_allclose(ad.jvp(f, (x,), (np.ones(3),))[1], 2 * 0.3 + 2 * 0.9 * 2)


def test_numpy2_names_and_keywords():
    if not hasattr(np, "vecdot"):
        pytest.skip("NumPy 1")
    check_modes(lambda x, m: np.sum(np.var(x, axis=0, mean=m, keepdims=True)), A, A.mean(axis=0, keepdims=True))
    check_modes(lambda x: np.sum(np.cumulative_prod(x, axis=1, include_initial=True)), A)
    check_modes(lambda x, y: np.sum(np.vecdot(x, y, axis=0) ** 2), A, A * 2)
    with pytest.raises(UnsupportedError, match="mean"):
        ad.jvp(lambda x: x.var(mean=0.5), (V,), (V,))


def test_statistics_in_both_arguments():
    check_modes(lambda x, w: np.sum(np.average(x, axis=0, weights=w) ** 2), A, V[:3])
    check_modes(lambda x, y: np.sum(np.cov(x, y, ddof=0)), V, V[::-1] ** 2)
    check_modes(lambda x: np.sum(np.corrcoef(x, rowvar=False) ** 2), A, rtol2=1e-4, atol2=1e-5)
    with pytest.raises(UnsupportedError, match="fweights"):
        ad.grad(lambda x: np.sum(np.cov(x, fweights=[1, 2, 1, 1])))(A)


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_convolve_and_correlate_modes(mode):
    for n, m in ((5, 3), (3, 5), (4, 4)):
        a, v = _rng.uniform(0.2, 0.9, n), _rng.uniform(0.2, 0.9, m)
        check_modes(lambda x, y: np.sum(np.convolve(x, y, mode) ** 2), a, v)
        check_modes(lambda x, y: np.sum(np.correlate(x, y, mode=mode) ** 2), a, v)


def test_layout_functions():
    check_modes(lambda x, y: np.sum(np.block([[x, y], [y, x]]) ** 2), A[:2, :2], A[1:, 2:])
    check_modes(lambda x, y: sum(np.sum(g ** 2) for g in np.meshgrid(x, y, indexing="ij")), V, A[0])
    check_modes(lambda x: np.sum(np.lib.stride_tricks.sliding_window_view(x, 2, axis=1) ** 2), A)
    check_modes(lambda p, x: np.sum(np.polyval(p, x)), V[:3], A[0])
    check_modes(lambda x: np.sum(np.vander(x, 4) ** 2), np.array([0.0, 0.5, -0.3]))   # (x = 0: no 0 * inf)


def test_keywords_without_a_rule_are_refused_by_name_in_every_mode():
    x = np.array([0.3, np.nan, 0.5])
    with pytest.raises(UnsupportedError, match="nansum without the keyword argument where"):
        ad.jvp(lambda z: np.nansum(z, where=z > 0), (x,), (x,))
    with pytest.raises(UnsupportedError, match="nansum without the keyword argument where"):
        ad.grad(lambda z: np.nansum(z, where=z > 0))(x)
    with pytest.raises(UnsupportedError, match="var without the keyword argument where"):
        ad.jvp(lambda z: np.var(z, where=z > 0.4), (V,), (V,))
