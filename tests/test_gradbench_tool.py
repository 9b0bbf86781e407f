"""``python -m tensorlang.gradbench``, GradBench's protocol driven as the evals drive it (a subprocess,
JSON lines), its answers checked against NumPy and central differences on small inputs (no GradBench
installation needed)."""
import json
import subprocess
import sys

import numpy as np
import pytest


def _session(*messages):
    """The tool's answers to ``messages`` (each given its id), by id."""
    lines = "".join(json.dumps({"id": i, **m}) + "\n" for i, m in enumerate(messages))
    done = subprocess.run([sys.executable, "-m", "tensorlang.gradbench"], input=lines, capture_output=True,
                          text=True, timeout=600, check=True)
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["id"] for a in answers] == list(range(len(messages)))
    return answers


def _evaluate(module, function, value, **more):
    return {"kind": "evaluate", "module": module, "function": function, "input": value, **more}


def _central(f, x, h=1e-6):
    g = np.zeros_like(x)
    for k in range(x.size):
        e = np.zeros_like(x)
        e[k] = h
        g[k] = (f(x + e) - f(x - e)) / (2 * h)
    return g


def _lse(x):
    return np.log(np.sum(np.exp(x - x.max()))) + x.max()


def _llsq(x, n):
    t = -1.0 + 2.0 * np.arange(n) / (n - 1.0)
    return 0.5 * sum((np.sign(ti) - sum(xj * ti ** j for j, xj in enumerate(x))) ** 2 for ti in t)


@pytest.fixture(scope="module")
def answers():
    rng = np.random.default_rng(0)
    x = rng.uniform(-100, 100, 7)       # GradBench's lse draws from [-100, 100): exp overflows unshifted
    y = rng.random(5)
    repeat = {"min_runs": 3, "min_seconds": 0}
    return x, y, _session(
        {"kind": "start", "eval": "hello"},
        {"kind": "define", "module": "hello"},
        _evaluate("hello", "square", 3.0), _evaluate("hello", "double", 9.0),
        {"kind": "define", "module": "lse"},
        _evaluate("lse", "primal", {"x": x.tolist(), **repeat}),
        _evaluate("lse", "gradient", {"x": x.tolist(), **repeat}),
        {"kind": "define", "module": "llsq"},
        _evaluate("llsq", "primal", {"x": y.tolist(), "n": 9, **repeat}),
        _evaluate("llsq", "gradient", {"x": y.tolist(), "n": 9, **repeat}),
        {"kind": "analysis", "of": 9, "valid": True},
        {"kind": "define", "module": "no-such-eval"},
        _evaluate("lse", "no-such-function", {"x": [1.0]}),
        {"kind": "define", "module": "kmeans"},
        _evaluate("kmeans", "cost", {"points": POINTS.tolist(), "centroids": CENTROIDS.tolist(), **repeat}),
        _evaluate("kmeans", "dir", {"points": POINTS.tolist(), "centroids": CENTROIDS.tolist(), **repeat}),
        {"kind": "define", "module": "det"},
        _evaluate("det", "primal", {"A": MATRIX.ravel().tolist(), "ell": 4, **repeat}),
        _evaluate("det", "gradient", {"A": MATRIX.ravel().tolist(), "ell": 4, **repeat}),
        {"kind": "define", "module": "ode"},
        _evaluate("ode", "primal", {"x": ODE_X.tolist(), "s": 3, **repeat}),
        _evaluate("ode", "gradient", {"x": ODE_X.tolist(), "s": 3, **repeat}),
        {"kind": "define", "module": "gmm"},
        _evaluate("gmm", "objective", {**GMM, **repeat}),
        _evaluate("gmm", "jacobian", {**GMM, **repeat}),
    )


_g = np.random.default_rng(5)
GMM = {"d": 3, "k": 2, "n": 4, "alpha": _g.normal(size=2).tolist(), "mu": _g.random((2, 3)).tolist(),
       "q": (0.1 * _g.normal(size=(2, 3))).tolist(), "l": (0.3 * _g.normal(size=(2, 3))).tolist(),
       "x": _g.random((4, 3)).tolist(), "m": 0, "gamma": 1.0}


def _gmm(alpha, mu, q, l):
    """The objective written point by point, from GradBench's definition (the C++ reference's loops)."""
    d, k, x, m, gamma = 3, 2, np.array(GMM["x"]), 0, 1.0
    def factor(j):
        L = np.diag(np.exp(q[j]))
        L[1, 0], L[2, 0], L[2, 1] = l[j]          # the strictly lower triangle, by columns
        return L
    def logsumexp(v):
        return np.log(np.sum(np.exp(v - v.max()))) + v.max()
    total = -len(x) * d * 0.5 * np.log(2 * np.pi)
    for xi in x:
        total += logsumexp(np.array([alpha[j] + np.sum(q[j]) - 0.5 * np.sum((factor(j) @ (xi - mu[j])) ** 2)
                                     for j in range(k)]))
    total -= len(x) * logsumexp(alpha)
    p = d + m + 1
    for j in range(k):
        total -= 0.5 * gamma ** 2 * (np.sum(np.exp(q[j]) ** 2) + np.sum(l[j] ** 2)) - m * np.sum(q[j])
    from scipy.special import multigammaln
    return total + k * (p * d * np.log(gamma / np.sqrt(2)) - multigammaln(0.5 * p, d))


ODE_X = np.random.default_rng(4).random(5)


def _rk4(x, s):
    """Runge-Kutta 4 on y0' = x0, yi' = xi y(i-1), from 0 to 2, written entry by entry."""
    def field(y):
        return np.array([x[0]] + [x[i] * y[i - 1] for i in range(1, len(x))])
    y, h = np.zeros(len(x)), 2.0 / s
    for _ in range(s):
        k1 = field(y)
        k2 = field(y + h / 2 * k1)
        k3 = field(y + h / 2 * k2)
        k4 = field(y + h * k3)
        y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return y


MATRIX = np.random.default_rng(3).random((4, 4))


POINTS = np.random.default_rng(1).random((12, 3))
CENTROIDS = np.random.default_rng(2).random((3, 3))


def _kmeans(c):
    return sum(min(np.sum((p - ck) ** 2) for ck in c.reshape(3, 3)) for p in POINTS)


def test_start_and_define(answers):
    _, _, got = answers
    assert got[0]["tool"] == "tensorlang"
    assert got[1]["success"] and got[4]["success"] and got[7]["success"]
    assert got[10] == {"id": 10}


def test_hello(answers):
    _, _, got = answers
    assert got[2]["output"] == 9.0 and got[3]["output"] == 18.0


def test_lse_against_numpy_and_differences(answers):
    x, _, got = answers
    assert got[5]["output"] == pytest.approx(_lse(x), rel=1e-12)
    np.testing.assert_allclose(got[6]["output"], _central(_lse, x), rtol=1e-5, atol=1e-8)


def test_llsq_against_numpy_and_differences(answers):
    _, y, got = answers
    assert got[8]["output"] == pytest.approx(_llsq(y, 9), rel=1e-12)
    np.testing.assert_allclose(got[9]["output"], _central(lambda v: _llsq(v, 9), y), rtol=1e-6, atol=1e-8)


def test_timings_as_gradbench_counts_them(answers):
    _, _, got = answers
    timings = got[6]["timings"]
    assert [t["name"] for t in timings] == ["prepare", "evaluate", "evaluate", "evaluate"]
    assert all(isinstance(t["nanoseconds"], int) and t["nanoseconds"] > 0 for t in timings)


def test_what_it_does_not_do_is_an_answer_with_why(answers):
    _, _, got = answers
    assert not got[11]["success"] and "does not implement the eval 'no-such-eval'" in got[11]["error"]
    assert not got[12]["success"] and "no-such-function" in got[12]["error"]


def test_kmeans_against_numpy_and_differences(answers):
    _, _, got = answers
    assert got[13]["success"]
    assert got[14]["output"] == pytest.approx(_kmeans(CENTROIDS), rel=1e-12)
    g = _central(_kmeans, CENTROIDS.ravel())
    h = (_central(_kmeans, CENTROIDS.ravel() + 1e-3) - _central(_kmeans, CENTROIDS.ravel() - 1e-3)) / 2e-3
    np.testing.assert_allclose(np.ravel(got[15]["output"]), g / h, rtol=1e-4)


def test_det_against_numpy_and_differences(answers):
    _, _, got = answers
    assert got[16]["success"]
    assert got[17]["output"] == pytest.approx(np.linalg.det(MATRIX), rel=1e-12)
    expected = _central(lambda a: np.linalg.det(a.reshape(4, 4)), MATRIX.ravel())
    np.testing.assert_allclose(got[18]["output"], expected, rtol=1e-6, atol=1e-9)


def test_ode_against_numpy_and_differences(answers):
    _, _, got = answers
    assert got[19]["success"]
    np.testing.assert_allclose(got[20]["output"], _rk4(ODE_X, 3), rtol=1e-12)
    np.testing.assert_allclose(got[21]["output"], _central(lambda x: _rk4(x, 3)[-1], ODE_X), rtol=1e-6, atol=1e-9)


def test_gmm_against_numpy_and_differences(answers):
    _, _, got = answers
    assert got[22]["success"]
    parts = [np.array(GMM[name]) for name in ("alpha", "mu", "q", "l")]
    assert got[23]["output"] == pytest.approx(_gmm(*parts), rel=1e-12)
    for i, name in enumerate(("alpha", "mu", "q", "l")):
        def along(v, i=i):
            moved = list(parts)
            moved[i] = v.reshape(parts[i].shape)
            return _gmm(*moved)
        np.testing.assert_allclose(np.ravel(got[24]["output"][name]), _central(along, parts[i].ravel()),
                                   rtol=1e-6, atol=1e-8, err_msg=name)
