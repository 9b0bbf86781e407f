"""Functions whose source Python kept nowhere (``exec``, ``eval``, ``compile`` of a string, a script piped to
``python``) are differentiated by their recordings (``derive/ad/recorded.py``), in every mode and order, called
as users call them: checked against central differences (an oracle that shares no code with tensorlang.ad), and
against the same text differentiated from its source (``ad.define``); what cannot be recorded is refused by
name."""
import math
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import tensorlang as tl
from tensorlang import ad
from tensorlang.codegen import compile as tl_compile
from tensorlang.errors import UnsupportedError

from conftest import central_difference, check_generated_program, gradient_check, hvp_by_differences
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_ad_generated import Program, assert_matches_differences, helper
from test_ad_generated_arrays import N, programs

TEXT = '''
import math
import numpy as np

def squares(x):
    acc = []
    for i in range(len(x)):
        acc.append(x[i] * x[i])
    return sum(acc)

def branch(x):
    return x * x if x > 0 else -3.0 * x

def loop(x):
    y = x
    for i in range(3):
        y = y * x + math.sin(y)
    return y

def writes(x):
    out = np.zeros(3)
    out[0] = x[0] * 2.0
    out[1:] = x[1:] ** 2
    view = out[1:]
    view *= x[0]
    if isinstance(x, np.ndarray) and out.sum() > 0:
        return float(np.sum(out ** 2))
    return 0.0

def helper(v):
    return np.tanh(v) * 2.0

def model(w, x, scale=1.0):
    d = {"a": w[0], "b": w[1:]}
    p = d["a"] * helper(x @ d["b"]) * scale
    return np.mean((p - 1.0) ** 2)

def linalg(a):
    s = a @ a.T + 3.0 * np.eye(len(a))
    vals, vecs = np.linalg.eigh(s)
    return np.sum(vals ** 2) + np.linalg.solve(s, a[:, 0]).sum() + np.sum(vecs[:, -1] ** 2)

def methods(x):
    m = x.reshape(2, 3)
    return (m.sum(axis=1) ** 2).sum() + m.T.max() + np.where(x > 0.25, np.sqrt(np.abs(x)), 0.0).sum()

def scatter(x):
    out = np.zeros(4)
    np.add.at(out, [0, 1, 1, 3], x)
    return np.sum(out ** 3)

def pair(x, y):
    return np.array([np.sin(x) * y ** 2, x * y])

def make(a):
    return lambda x: a * np.exp(x)
'''


@pytest.fixture(scope="module")
def ns():
    """The functions of TEXT as exec leaves them (no source kept), and the same text defined with its source."""
    plain = {}
    exec(TEXT, plain)
    return plain


@pytest.fixture(scope="module")
def src():
    return ad.define(TEXT)


X = np.array([0.3, -0.5, 0.7, 1.1, 0.2, -0.4])


def test_the_path_a_function_takes_is_said(ns, src):
    assert ad.code_source(ns["loop"]).origin == "recording"
    assert ad.code_source(ns["loop"]).text == ""
    assert ad.code_source(src["loop"]).origin == "linecache"
    text = str(ad.code_recording(ns["model"], np.array([0.5, 0.1, -0.2, 0.3]), np.ones((4, 3))))
    assert "np.tanh" in text and "def model(a0, a1):" in text and "return v" in text


@pytest.mark.parametrize("name,args", [
    ("squares", (np.arange(1.0, 8.0),)), ("branch", (2.0,)), ("branch", (-1.0,)), ("loop", (0.3,)),
    ("writes", (np.array([1.0, 2.0, 3.0]),)), ("linalg", (np.arange(6.0).reshape(3, 2) / 5,)),
    ("methods", (X,)), ("scatter", (np.array([0.5, -1.0, 2.0, 0.3]),)),
    ("model", (np.array([0.5, 0.1, -0.2, 0.3]), np.random.default_rng(1).normal(size=(5, 3)))),
])
def test_gradients_agree_with_differences_and_with_the_source(ns, src, name, args):
    got = gradient_check(ns[name], *args)
    want = ad.gradient(src[name], *args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


def test_each_call_is_recorded_at_its_own_point(ns):
    g = ad.grad(ns["branch"])
    assert (g(2.0), g(-1.0), g(0.5), g(-2.0)) == (4.0, -3.0, 1.0, -3.0)


def test_eval_and_compile():
    assert ad.grad(eval("lambda x: x * x"))(3.0) == 6.0
    scope = {}
    exec(compile("def f(x):\n    return x ** 3\n", "<mine>", "exec"), scope)
    assert ad.grad(scope["f"])(2.0) == 12.0


def test_jax_conventions(ns):
    w, x = np.array([0.5, 0.1, -0.2, 0.3]), np.random.default_rng(2).normal(size=(6, 3))
    f = ns["model"]
    g = ad.grad(f)(w, x, scale=3.0)
    np.testing.assert_allclose(g, central_difference(lambda w: f(w, x, scale=3.0), (w,), 0), rtol=1e-6)
    value, (gw, gx) = ad.value_and_grad(f, argnums=(0, 1))(w, x)
    assert value == f(w, x)
    np.testing.assert_allclose(gx, central_difference(f, (w, x), 1), rtol=1e-6, atol=1e-9)
    with pytest.raises(Exception, match="int"):
        ad.grad(ns["branch"])(2)


def test_forward_mode_jacobians_and_hessians(ns, src):
    y, t = ad.jvp(ns["loop"], (0.3,), (1.0,))
    assert y == ns["loop"](0.3)
    assert t == pytest.approx(central_difference(ns["loop"], (0.3,), 0), rel=1e-7)
    x = np.array([1.0, 2.0, 3.0])
    h = ad.hessian(ns["writes"])(x)
    np.testing.assert_allclose(h, ad.hessian(src["writes"])(x), rtol=1e-12)
    v = np.array([0.3, -0.2, 0.5])
    np.testing.assert_allclose(h @ v, hvp_by_differences(ns["writes"], [x], [v])[0], rtol=1e-4)
    jx, jy = ad.jacobian(ns["pair"], argnums=(0, 1))(0.4, 1.5)
    np.testing.assert_allclose(jx, [math.cos(0.4) * 2.25, 1.5], rtol=1e-14)
    np.testing.assert_allclose(jy, [math.sin(0.4) * 3.0, 0.4], rtol=1e-14)


def test_second_and_third_order(ns):
    f = ns["loop"]
    second = ad.grad(ad.grad(f))
    assert second(0.3) == pytest.approx(central_difference(ad.grad(f), (0.3,), 0), rel=1e-6)
    third = ad.grad(ad.grad(ad.grad(f)))(0.3)
    assert third == pytest.approx(central_difference(second, (0.3,), 0, h=1e-4), rel=1e-5)
    assert ad.grad(ad.grad(ad.grad(eval("lambda x: np.sin(x)", {"np": np}))))(0.3) == pytest.approx(-math.cos(0.3))


def test_called_from_a_function_with_source_and_with_a_captured_constant(ns):
    model, make = ns["model"], ns["make"]
    x = np.random.default_rng(3).normal(size=(5, 3))

    doubled = make(2.0)   # (made outside: a function made by a recorded call inside is refused, below)

    def loss(w):
        return model(w, x) + doubled(w[0])

    w = np.array([0.5, 0.1, -0.2, 0.3])
    gradient_check(loss, w)
    np.testing.assert_allclose(ad.hessian(loss)(w)[0], hvp_by_differences(loss, [w], [np.eye(4)[0]])[0], rtol=1e-4)


def test_a_compiled_kernel_called_by_recorded_code():
    e = tl.parse((Path(__file__).resolve().parents[2] / "examples" / "deconv_loss.tl").read_text())
    k = tl_compile(e)
    rng = np.random.default_rng(0)
    x, c, z = rng.standard_normal(33), rng.standard_normal(4), rng.standard_normal(30)
    scope = {"k": k, "z": z, "np": np}
    exec("def f(c, x):\n    return 0.5 * k(x=x, c=c, z=z) + np.sum(np.sin(c))\n", scope)
    gradient_check(scope["f"], c, x, rtol=1e-6, atol=1e-6)


def test_batched_by_vmap():
    scope = {"np": np}
    exec("def f(x):\n    y = x * x\n    return np.sum(np.sin(y)) + y[0]\n", scope)
    f = scope["f"]
    xs = np.random.default_rng(4).normal(size=(5, 3))
    np.testing.assert_allclose(ad.vmap(ad.grad(f))(xs), [central_difference(f, (x,), 0) for x in xs], rtol=1e-6)
    np.testing.assert_allclose(ad.vmap(ad.hessian(f))(xs), [ad.hessian(f)(x) for x in xs], rtol=1e-12)


def test_threads_building_lists_dicts_and_writing(ns):
    x = np.arange(300.0) / 100

    def one(i):
        if i % 3 == 0:
            g = ad.grad(ns["squares"])(x)
            return g is not None and np.allclose(g, 2 * x)
        if i % 3 == 1:
            w = np.array([0.5, 0.1, -0.2, 0.3]) + i / 100
            data = np.ones((4, 3))
            return np.allclose(ad.grad(ns["model"])(w, data), ad.grad(ad.define(TEXT)["model"])(w, data))
        a = np.array([1.0, 2.0, 3.0]) + i
        return np.allclose(ad.jvp(ns["writes"], (a,), (np.ones(3),))[1],
                           ad.grad(ns["writes"])(a).sum())

    with ThreadPoolExecutor(4) as ex:
        assert sum(ex.map(one, range(80))) == 80


def test_the_arguments_are_not_changed_twice():
    scope = {}
    exec("def f(x):\n    x[0] += 1.0\n    return (x ** 2).sum()\n", scope)
    x = np.array([1.0, 2.0])
    g = ad.grad(scope["f"])(x)
    np.testing.assert_array_equal(x, [2.0, 2.0])   # written once, as calling f does
    np.testing.assert_allclose(g, [4.0, 4.0])


def test_helpers_with_source_are_recorded_too(tmp_path):
    import importlib.util
    mod = tmp_path / "has_source.py"
    mod.write_text("import math\nimport numpy as np\n"
                   "def g(v):\n    return math.sin(v) + float(np.asarray(v) ** 2)\n")
    spec = importlib.util.spec_from_file_location("has_source", mod)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    scope = {"g": m.g}
    exec("def calls(x):\n    return g(x) * x\n", scope)
    assert ad.grad(scope["calls"])(0.3) == pytest.approx(central_difference(scope["calls"], (0.3,), 0), rel=1e-8)


def test_what_cannot_be_recorded_is_refused_by_name():
    import statistics
    scope = {"statistics": statistics, "np": np, "out": np.zeros(3)}
    exec("def calls(x):\n    return statistics.fmean([x, 2.0]) * x\n"
         "def keyed(x):\n    return {x: 1}[x]\n"
         "def into(x):\n    np.multiply(x, 2.0, out=out)\n    return out.sum()\n"
         "class Box:\n    pass\n"
         "def boxed(x):\n    b = Box()\n    b.v = x\n    return b\n", scope)
    with pytest.raises(UnsupportedError, match="cannot record a conversion to a Python float"):
        ad.grad(scope["calls"])(0.3)
    with pytest.raises(UnsupportedError, match="used as a key"):
        ad.grad(scope["keyed"])(0.3)
    with pytest.raises(UnsupportedError, match="writing into an array that holds no recorded value"):
        ad.grad(scope["into"])(np.ones(3))
    with pytest.raises(UnsupportedError, match="returns a Box"):
        ad.jacobian(scope["boxed"])(0.3)
    make = {}
    exec("def make(a):\n    return lambda x: a * x\n", make)
    with pytest.raises(UnsupportedError, match="returns a function"):
        ad.grad(lambda w: make["make"](w)(2.0))(0.3)


def test_library_functions_are_recorded_by_their_rules_and_refused_without_one():
    """A SciPy function with a derivative rule is one call of the recording (differentiated by its rule); one
    without a rule runs on the stand-ins, and its np.asarray of one is refused.  NumPy read a stand-in's memory
    through its __array_interface__ before: logsumexp's gradient was [1, 1, 1] (that of the sum alone) with no
    error."""
    scope = {}
    exec("import numpy as np\nimport scipy.linalg\nimport scipy.stats\nfrom scipy.special import logsumexp\n"
         "def lse(x):\n    return logsumexp(x) + np.sum(x)\n"
         "def expm(x):\n    return np.sum(scipy.linalg.expm(np.outer(x, x)))\n"
         "def zscored(x):\n    return np.sum(scipy.stats.zscore(x) * x)\n", scope)
    x = np.array([0.1, 0.2, 0.3])
    np.testing.assert_allclose(gradient_check(scope["lse"], x)[0], np.exp(x) / np.sum(np.exp(x)) + 1, rtol=1e-12)
    gradient_check(scope["expm"], x)
    with pytest.raises(UnsupportedError, match="cannot record a conversion to a NumPy array"):
        ad.grad(scope["zscored"])(x)



# the programs of the generated suites, exec'd without their text: the recorded path against differences
@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.floats(-1.5, 1.5), st.floats(-1.5, 1.5))
def test_generated_programs_recorded(data, x, y):
    src = Program(data).source()
    scope = {"math": math, "np": np, "helper": helper}
    exec(src, scope)
    assert ad.code_source(scope["f"]).origin == "recording"
    assert_matches_differences(scope["f"], x, y, src)


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.integers(0, 2 ** 16))
def test_generated_array_programs_recorded(src, seed):
    check_generated_program(src, seed, N, {"np": np, "N": N}, "recorded array program", kept=False)
