"""The differential fuzzer (``tests/fuzz.py``), a fixed-seed slice: random program text through parse ->
evaluate -> compile -> grad, every outcome the same in the evaluator and in a kernel; and the programs
the long run found."""
import time

import fuzz
import numpy as np
import pytest

import tensorlang as tl


def test_a_fixed_slice_of_the_differential_fuzzer():
    report = fuzz.run(seed=11, count=24)
    assert report.parsed >= 20, report.not_parsed[:3]
    assert report.runs >= 100 and report.gradients >= 5 and not report.slow, str(report)
    assert not report.mismatches, "\n".join(
        f"{what}\n{src}\ninputs {ins}\nevaluator {ref}\nkernel    {got}"
        for what, src, ins, ref, got in report.mismatches[:3])


# Programs the long run found (docs/reliability.md).

STRONG_ZEROS = [  # (program, inputs, value): a false bracket's product is +0 whatever else it holds
    ("x : R; y : [n]R; x * (let t = [n > 5] * y[0] in t)", {"x": float("nan")}, 0.0),
    ("x : R; y : [n]R; x * ([n >= 0] * ([n > 5] * y[0]))", {"x": float("inf")}, 0.0),
    ("x : R; y : [n]R; (let t = -x in [n > 5] * y[0]) * x", {"x": float("nan")}, 0.0),
    ("x : R; y : [n]R; ([n >= 0] * -([n > 5] * y[0])) / x", {"x": 0.0}, 0.0),
    ("x : R; y : [n]R; recip(-([n > 5] * y[0]))", {"x": 1.0}, float("inf")),  # +0, not -0
    ("x : R; y : [n]R; recip(x * [n > 5] * y[0])", {"x": -1.0}, float("inf")),
    ("x : R; y : [n]R; recip(sum(i:n) -([i > 5] * y[i]))", {"x": 1.0}, float("inf")),  # a sum from +0
    ("x : R; y : [n]R; sum(i:n) (y[i] - x) / 0", {"x": 0.5}, float("nan")),  # inf - inf, not factored
]


@pytest.mark.parametrize("src, inputs, want", STRONG_ZEROS)
def test_strong_zeros_and_signed_zeros_agree(src, inputs, want):
    e = tl.parse(src)
    inputs = {"y": np.array([1.0, -1.0]), **inputs}
    got = [tl.evaluate(e, **inputs), tl.compile(e)(**inputs)]
    assert all(np.array_equal(g, want, equal_nan=True) for g in got), (src, got)


def test_a_gradient_whose_bracket_simplification_reaches_a_fixed_point():
    """isl names an ``exists`` afresh each time it converts a set back: the simplifier rewrote the same
    bracket for ever (more than 60 s); now well under a second."""
    e = tl.parse("acc : [m]R; sizes : [m][q]R; sum(k:2*m) sum(j:m) max([0 <= k + q < m and 0 <= j < q] * "
                 "sizes[k + q, j], [0 <= j + 3 < m and 0 <= 2*k + m < q] * sizes[j + 3, 2*k + m])")
    start = time.perf_counter()
    g = tl.grad(e, "sizes")
    assert time.perf_counter() - start < 10
    rng = np.random.default_rng(0)
    for m, q in ((4, 1), (5, 9), (6, 2)):
        ins = {"acc": rng.normal(size=m), "sizes": rng.normal(size=(m, q))}
        want = tl.evaluate(g, **ins)
        assert np.allclose(tl.compile(g)(**ins), want, rtol=1e-12, atol=1e-12)
        h, fd = 1e-6, np.zeros((m, q))
        for idx in np.ndindex(m, q):
            up, down = ins["sizes"].copy(), ins["sizes"].copy()
            up[idx] += h
            down[idx] -= h
            fd[idx] = (tl.evaluate(e, acc=ins["acc"], sizes=up) - tl.evaluate(e, acc=ins["acc"], sizes=down)) / (2 * h)
        assert np.allclose(want, fd, atol=1e-6)


@pytest.mark.parametrize("src", [
    "x : R; y : [n]R; (let t0 = x in x) * (let t0 = [0 <= 1 < n] * y[1] in t0)",
    "x : R; y : [n]R; (let t0 = x in x) / (x * (let t0 = [0 <= 1 < n] * y[1] in t0))",
    "x : R; y : [n]R; (let t = x in t * t) + (let t = [0 <= 1 < n] * y[1] in t) * (let t = x + 1 in t)",
])
def test_lets_of_one_name_in_sibling_operands_stay_apart(src):
    """Let-lifting put one in the other's scope; the statement form read the chain as one binding per
    variable and used the first let's value (x * x instead of x * y[1])."""
    e = tl.parse(src)
    ins = {"x": 1.5, "y": np.array([2.0, 3.0, 5.0])}
    want = tl.evaluate(e, **ins)
    assert tl.compile(e)(**ins) == pytest.approx(want, rel=1e-15)
    g = tl.grad(e, "x")
    assert tl.compile(g)(**ins) == pytest.approx(tl.evaluate(g, **ins), rel=1e-12)
    h = 1e-6
    fd = (tl.evaluate(e, **{**ins, "x": 1.5 + h}) - tl.evaluate(e, **{**ins, "x": 1.5 - h})) / (2 * h)
    assert tl.evaluate(g, **ins) == pytest.approx(fd, rel=1e-6)
