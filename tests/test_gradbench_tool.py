"""``python -m tensorlang.gradbench``, GradBench's protocol driven as the evals drive it (a subprocess,
JSON lines), its answers checked against NumPy, references written entry by entry from GradBench's C++
(``ba``, ``ht``, ``lstm``) and central differences on small inputs (no GradBench installation needed);
``particle`` and ``saddle``'s nested derivatives checked in the process (their full descents take minutes)."""
import json
import math
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
        _evaluate("ode", "primal", {"x": ODE_X.tolist(), "s": 12, **repeat}),
        _evaluate("ode", "gradient", {"x": ODE_X.tolist(), "s": 12, **repeat}),
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


def test_ode_in_runs_of_compiled_steps_against_numpy_and_differences(answers):
    """12 steps: two calls of the kernel of ``ode.CHUNK`` = 5 steps, then two of the single step."""
    _, _, got = answers
    np.testing.assert_allclose(got[25]["output"], _rk4(ODE_X, 12), rtol=1e-12)
    np.testing.assert_allclose(got[26]["output"], _central(lambda x: _rk4(x, 12)[-1], ODE_X), rtol=1e-6, atol=1e-9)


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


# -- ba, ht, lstm: a session of their own ---------------------------------------------------------------------------

BA_CAM = [-0.758453, -1.109613, -0.845551, 34.556073, 39.676747, 53.881673, 419.194514, 5.864426, -8.518870,
          0.087812, 0.002739]
BA = {"n": 2, "m": 3, "p": 10, "x": [7.203245, 0.001144, 3.023326], "w": 0.417022, "feat": [271.760969, 834.209256]}


def _ba_error(params, feat):
    """One observation's two reprojection errors, from the C++ reference, entry by entry: ``params`` the
    camera's 11, the point's 3 and the weight."""
    cam, X, w = params[:11], params[11:14], params[14]
    rot, Xo = cam[0:3], [X[i] - cam[3 + i] for i in range(3)]
    def cross(a, b):
        return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
    sq = sum(r * r for r in rot)
    if sq != 0:
        theta = math.sqrt(sq)
        u = [r / theta for r in rot]
        c, s = math.cos(theta), math.sin(theta)
        tmp = sum(ui * xi for ui, xi in zip(u, Xo)) * (1 - c)
        Xcam = [Xo[i] * c + cross(u, Xo)[i] * s + u[i] * tmp for i in range(3)]
    else:
        Xcam = [Xo[i] + cross(rot, Xo)[i] for i in range(3)]
    p = [Xcam[0] / Xcam[2], Xcam[1] / Xcam[2]]
    rsq = p[0] ** 2 + p[1] ** 2
    L = 1 + cam[9] * rsq + cam[10] * rsq * rsq
    return np.array([w * (p[i] * L * cam[6] + cam[7 + i] - feat[i]) for i in range(2)])


def _ht_model(seed=7, bones=22, vertices=9, triangles=6):
    g = np.random.default_rng(seed)
    def transforms():
        t = np.zeros((bones, 4, 4))
        t[:, :3, :] = g.normal(size=(bones, 3, 4)) * 0.5
        t[:, 3, 3] = 1.0
        return t
    weights = g.random((vertices, bones))
    return {"bone_count": bones, "bone_names": [f"b{i}" for i in range(bones)],
            "parents": [-1] + [int(g.integers(0, i)) for i in range(1, bones)],
            "base_relatives": transforms().tolist(), "inverse_base_absolutes": transforms().tolist(),
            "base_positions": np.hstack((g.normal(size=(vertices, 3)), np.ones((vertices, 1)))).tolist(),
            "weights": (weights / weights.sum(axis=1, keepdims=True)).tolist(),
            "triangles": g.integers(0, vertices, (triangles, 3)).tolist(), "is_mirrored": False}


_h = np.random.default_rng(8)
HT_MODEL = _ht_model()
HT_THETA = (0.3 * _h.normal(size=26)).tolist()
HT_SIMPLE = {"theta": HT_THETA, "us": [], "data": {"model": HT_MODEL, "correspondences": [0, 4, 8, 2],
                                                   "points": _h.normal(size=(4, 3)).tolist()}}
HT_COMPLICATED = {"theta": HT_THETA, "us": (0.4 * _h.random((4, 2))).tolist(),
                  "data": {"model": HT_MODEL, "correspondences": [1, 5, 3, 1], "points": _h.normal(size=(4, 3)).tolist()}}


def _ht_errors(theta, us, raw):
    """The errors from the C++ reference: pose parameters by its loop, 3 x 3 rotations entry by entry, bones
    composed and vertices skinned one at a time."""
    model, data = raw["data"]["model"], raw["data"]
    nb = model["bone_count"]
    pose = np.zeros((nb + 3, 3))
    pose[0], pose[1], pose[2] = theta[0:3], 1.0, theta[3:6]
    i_theta, row = 6, 5
    for _ in range(5):
        for i in range(2, 5):
            pose[row, 0] = theta[i_theta]
            i_theta += 1
            if i == 2:
                pose[row, 1] = theta[i_theta]
                i_theta += 1
            row += 1
        row += 1
    def euler(xzy):
        tx, ty, tz = xzy[0], xzy[2], xzy[1]
        Rx = np.array([[1, 0, 0], [0, math.cos(tx), -math.sin(tx)], [0, math.sin(tx), math.cos(tx)]])
        Ry = np.array([[math.cos(ty), 0, math.sin(ty)], [0, 1, 0], [-math.sin(ty), 0, math.cos(ty)]])
        Rz = np.array([[math.cos(tz), -math.sin(tz), 0], [math.sin(tz), math.cos(tz), 0], [0, 0, 1]])
        return Rz @ Ry @ Rx
    absolutes = []
    for i in range(nb):
        tr = np.eye(4)
        tr[:3, :3] = euler(pose[i + 3])
        relative = np.array(model["base_relatives"][i]) @ tr
        absolutes.append(relative if model["parents"][i] == -1 else absolutes[model["parents"][i]] @ relative)
    base, weights = np.array(model["base_positions"]), np.array(model["weights"])
    positions = np.zeros((len(base), 3))
    for b in range(nb):
        moved = absolutes[b] @ np.array(model["inverse_base_absolutes"][b])
        for v in range(len(base)):
            positions[v] += weights[v, b] * (moved @ base[v])[:3]
    a = pose[0]
    n = math.sqrt(sum(a * a))
    x, y, z = a / n
    s, c = math.sin(n), math.cos(n)
    R = np.array([[x * x + (1 - x * x) * c, x * y * (1 - c) - z * s, x * z * (1 - c) + y * s],
                  [x * y * (1 - c) + z * s, y * y + (1 - y * y) * c, y * z * (1 - c) - x * s],
                  [x * z * (1 - c) - y * s, z * y * (1 - c) + x * s, z * z + (1 - z * z) * c]])
    positions = positions @ R.T + pose[2]
    errs = []
    for i, k in enumerate(data["correspondences"]):
        if len(us) == 0:
            hand = positions[k]
        else:
            t = model["triangles"][k]
            hand = us[i][0] * positions[t[0]] + us[i][1] * positions[t[1]] + (1 - us[i][0] - us[i][1]) * positions[t[2]]
        errs.extend(np.array(data["points"][i]) - hand)
    return np.array(errs)


_l = np.random.default_rng(9)
LSTM = {"main_params": _l.random((4, 12)).tolist(), "extra_params": _l.random((3, 3)).tolist(),
        "state": _l.random((4, 3)).tolist(), "sequence": _l.integers(0, 2, (6, 3)).astype(float).tolist()}


def _lstm_loss(main, extra, state, sequence):
    """The C++ reference's loss: a loop over the characters, the layers inside it, a loop over the entries."""
    layers, b = len(main) // 2, len(state[0])
    state = [list(s) for s in state]
    sig = lambda v: 1 / (1 + math.exp(-v))   # noqa: E731
    total = 0.0
    for t in range(len(sequence) - 1):
        x = [sequence[t][i] * extra[0][i] for i in range(b)]
        for l in range(layers):
            w, bias, h, c = main[2 * l], main[2 * l + 1], state[2 * l], state[2 * l + 1]
            for i in range(b):
                forget = sig(x[i] * w[i] + bias[i])
                ingate = sig(h[i] * w[b + i] + bias[b + i])
                outgate = sig(x[i] * w[2 * b + i] + bias[2 * b + i])
                change = math.tanh(h[i] * w[3 * b + i] + bias[3 * b + i])
                c[i] = c[i] * forget + ingate * change
                h[i] = outgate * math.tanh(c[i])
            x = list(h)
        y = [x[i] * extra[1][i] + extra[2][i] for i in range(b)]
        lse = math.log(sum(math.exp(v) for v in y) + 2)
        total += sum(sequence[t + 1][i] * (y[i] - lse) for i in range(b))
    return -total / ((len(sequence) - 1) * b)


@pytest.fixture(scope="module")
def more():
    return _session(
        {"kind": "start", "eval": "ba"},
        {"kind": "define", "module": "ba"},
        _evaluate("ba", "objective", {**BA, "cam": BA_CAM, "min_runs": 2, "min_seconds": 0}),
        _evaluate("ba", "jacobian", {**BA, "cam": BA_CAM, "min_runs": 2, "min_seconds": 0}),
        _evaluate("ba", "jacobian", {**BA, "cam": [0.0] * 3 + BA_CAM[3:], "min_runs": 1, "min_seconds": 0}),
        {"kind": "define", "module": "ht"},
        _evaluate("ht", "objective", HT_SIMPLE), _evaluate("ht", "jacobian", HT_SIMPLE),
        _evaluate("ht", "objective", HT_COMPLICATED), _evaluate("ht", "jacobian", HT_COMPLICATED),
        {"kind": "define", "module": "lstm"},
        _evaluate("lstm", "objective", LSTM), _evaluate("lstm", "jacobian", LSTM),
    )


def test_ba_against_the_reference_and_differences(more):
    assert more[1]["success"]
    params = np.array(BA_CAM + BA["x"] + [BA["w"]])
    assert more[2]["output"]["w_err"] == {"element": pytest.approx(1 - BA["w"] ** 2, rel=1e-12), "repeated": 10}
    assert more[2]["output"]["reproj_error"]["repeated"] == 10
    np.testing.assert_allclose(more[2]["output"]["reproj_error"]["elements"], _ba_error(params, BA["feat"]), rtol=1e-12)
    n, m, p = BA["n"], BA["m"], BA["p"]
    # the first 30 entries of each list (observation 0: camera 0, point 0), and the last (the last weight's)
    rows = [15 * k for k in range(2 * p + 1)] + [30 * p + k for k in range(1, p + 1)]
    cols = list(range(11)) + [11 * n + k for k in range(3)] + [11 * n + 3 * m]
    for got, rot in ((more[3], BA_CAM[:3]), (more[4], [0.0] * 3)):
        assert len(got["timings"]) == (3 if got is more[3] else 2)
        out = got["output"]
        assert out["rows"] == rows[:30] + rows[-1:] and out["cols"] == cols + cols + [11 * n + 3 * m + p - 1]
        at = np.array(rot + BA_CAM[3:] + BA["x"] + [BA["w"]])
        J = np.array([_central(lambda v, r=r: _ba_error(v, BA["feat"])[r], at) for r in range(2)])
        np.testing.assert_allclose(out["vals"][:30], J.ravel(), rtol=1e-6, atol=1e-6)
        assert out["vals"][30] == pytest.approx(-2 * BA["w"], rel=1e-12)


@pytest.mark.parametrize("raw, at", [(HT_SIMPLE, 6), (HT_COMPLICATED, 8)])
def test_ht_against_the_reference_and_differences(more, raw, at):
    assert more[5]["success"]
    theta, us = np.array(raw["theta"]), np.array(raw["us"])
    np.testing.assert_allclose(more[at]["output"], _ht_errors(theta, us, raw), rtol=1e-10, atol=1e-12)
    J = np.stack([(_ht_errors(theta + 1e-6 * e, us, raw) - _ht_errors(theta - 1e-6 * e, us, raw)) / 2e-6
                  for e in np.eye(26)], axis=1)
    if len(us):
        seeds = [np.outer(np.ones(len(us)), e) for e in np.eye(2)]
        J = np.hstack([np.stack([(_ht_errors(theta, us + 1e-6 * s, raw) - _ht_errors(theta, us - 1e-6 * s, raw)) / 2e-6
                                 for s in seeds], axis=1), J])
    np.testing.assert_allclose(more[at + 1]["output"], J, rtol=1e-6, atol=1e-8)


def test_lstm_against_the_reference_and_differences(more):
    assert more[10]["success"]
    main, extra = np.array(LSTM["main_params"]), np.array(LSTM["extra_params"])
    args = (LSTM["state"], LSTM["sequence"])
    assert more[11]["output"] == pytest.approx(_lstm_loss(main, extra, *args), rel=1e-12)
    both = np.concatenate((main.ravel(), extra.ravel()))
    expected = _central(lambda v: _lstm_loss(v[:48].reshape(4, 12), v[48:].reshape(3, 3), *args), both)
    np.testing.assert_allclose(more[12]["output"], expected, rtol=1e-6, atol=1e-9)


def _miss(w):
    """Where the particle crosses the x-axis, squared: Euler's method with the force written out."""
    x, xdot = np.array([0.0, 8.0]), np.array([0.75, 0.0])
    while True:
        xddot = sum((x - c) / np.linalg.norm(x - c) ** 3 for c in (np.array([10.0, 10.0 - w]), np.array([10.0, 0.0])))
        if x[1] + 0.1 * xdot[1] <= 0:
            return (x[0] - x[1] / xdot[1] * xdot[0]) ** 2
        x, xdot = x + 0.1 * xdot, xdot + 0.1 * xddot


@pytest.mark.parametrize("w", [0.0, 0.15])
def test_particle_nested_derivatives_against_differences(w):
    """What the descent of ``rr`` and ``fr`` is driven by: the derivative in ``w`` of a simulation whose steps
    take the gradient of the potential (the full descents take 20-90 s)."""
    from tensorlang import ad
    from tensorlang.gradbench import particle
    assert particle.miss(w, particle._force_reverse) == pytest.approx(_miss(w), rel=1e-12)
    expected = (_miss(w + 1e-6) - _miss(w - 1e-6)) / 2e-6
    for force in (particle._force_reverse, particle._force_forward):   # (rr and fr; rf and ff)
        assert ad.grad(particle.miss)(w, force) == pytest.approx(expected, rel=1e-6)
        assert ad.jvp(particle.miss, (w, force), (1.0, None))[1] == pytest.approx(expected, rel=1e-6)


def test_saddle_nested_derivatives_against_the_closed_form():
    """``max_y f(x, y) = |x|^2 - |y*|^2``, the ascent's end ``y*`` independent of ``x``: its gradient in ``x``,
    through the ascent and its inner gradients, is ``2 x`` (reverse and forward over reverse)."""
    from tensorlang.gradbench import saddle
    x, start = np.array([0.7, -0.4]), np.array([1.0, 1.0])
    for inner in (saddle._reverse, saddle._forward):   # (rr and fr; rf and ff)
        search = (start, inner(saddle.f, 1))
        for outer in (saddle._reverse, saddle._forward):
            np.testing.assert_allclose(outer(saddle.maximum, 0)(x, search), 2 * x, rtol=1e-9)


def test_ba_jacobian_as_a_sparse_matrix_against_directional_differences():
    """The bundle-adjustment Jacobian as a scipy.sparse.csr_array: J v against the central difference of the
    residuals along v, at cameras, points and weights that differ from one another."""
    import scipy.sparse as sp

    from tensorlang.gradbench import ba

    rng = np.random.default_rng(5)
    n, m, p = 3, 5, 12
    cams = np.concatenate((0.3 * rng.normal(size=(n, 3)), rng.normal(size=(n, 3)), 1 + rng.random((n, 1)),
                           rng.normal(size=(n, 2)), 0.01 * rng.normal(size=(n, 2))), axis=1)
    X = rng.normal(size=(m, 3)) + np.array([0.0, 0.0, 8.0])
    w = 1 + 0.1 * rng.normal(size=p)
    obs = np.stack((rng.integers(0, n, p), rng.integers(0, m, p)), axis=1)
    feats = rng.normal(size=(p, 2))
    J = ba.sparse_jacobian(cams, X, w, obs, feats)
    assert isinstance(J, sp.csr_array) and J.shape == (3 * p, 11 * n + 3 * m + p) and J.nnz == 2 * p * 15 + p

    def residuals(v, h):
        c = cams + h * v[:11 * n].reshape(n, 11)
        x = X + h * v[11 * n:11 * n + 3 * m].reshape(m, 3)
        ww = w + h * v[11 * n + 3 * m:]
        reproj, w_err = ba.objective(c, x, ww, obs, feats)
        return np.concatenate((reproj.ravel(), w_err))

    for _ in range(3):
        v = rng.normal(size=J.shape[1])
        np.testing.assert_allclose(J @ v, (residuals(v, 1e-6) - residuals(v, -1e-6)) / 2e-6, rtol=1e-5, atol=1e-6)
