"""Second and third derivatives of real functions of a real ``x`` through complex intermediates: generated
compositions of the holomorphic primitives (quotients, reciprocals, powers, exp, log, sqrt ...) and the ones
that are not (real, imag, abs, angle, conj), in reverse over reverse, forward over reverse and reverse mode
thrice, against central differences of the derivative one order below."""
import importlib.util
import random
import warnings

import numpy as np
import pytest

from tensorlang import ad

INNER = ["np.exp({})", "1 / ({})", "({}) ** -1", "np.reciprocal({})", "np.sin({})", "np.log({})", "np.sqrt({})",
         "({}) * ({})", "np.conj({})", "({}) / (1.5 - 0.5j)", "(0.3 + 1j) * ({})", "({}) ** 2", "np.cos({})",
         "({}) + 1j * x", "np.abs({}) + 0j", "({}) / ({})", "np.tanh({})"]
LEAVES = ["(x + 1j)", "(1j * x + 2)", "(x * (1 + 0.5j))", "(x + 0j)", "(2 - 1j * x * x)"]
OUTER = ["np.real({})", "np.imag({})", "np.abs({})", "np.angle({})"]


def _expression(rng, depth):
    if depth == 0:
        return rng.choice(LEAVES)
    t = rng.choice(INNER)
    return t.format(*[_expression(rng, depth - 1) for _ in range(t.count("{}"))])


def _program(seed):
    rng = random.Random(seed)
    return rng.choice(OUTER).format(_expression(rng, rng.randint(1, 3)))


def _central(f, x, h):
    return (f(x + h) - f(x - h)) / (2 * h)


def _close(got, want):
    return not np.isfinite(want) or abs(got - want) <= 1e-3 * (1 + abs(want))


SEEDS = range(30)


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    """The generated functions, written to a module as a user's file holds them."""
    path = tmp_path_factory.mktemp("complex") / "complex_programs.py"
    path.write_text("import numpy as np\n\n" + "".join(f"\ndef f{s}(x):\n    return {_program(s)}\n" for s in SEEDS))
    spec = importlib.util.spec_from_file_location("complex_programs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("seed", SEEDS)
def test_generated_complex_compositions_to_third_order(programs, seed):
    src = _program(seed)
    f = getattr(programs, f"f{seed}")
    x = 0.6
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g1 = ad.grad(f)
        g2 = ad.grad(g1)
        assert _close(g1(x), _central(f, x, 1e-4)), src
        assert _close(g2(x), _central(g1, x, 1e-4)), ("reverse over reverse", src)
        assert _close(ad.jvp(g1, (x,), (1.0,))[1], _central(g1, x, 1e-4)), ("forward over reverse", src)
        assert _close(ad.grad(g2)(x), _central(g2, x, 1e-3)), ("third order", src)


def imag_of_quotient(x):
    return np.imag(1 / (1j * x + 2))            # -x / (4 + x^2)


def real_of_reciprocal(x):
    return np.real(1 / np.exp(1j * x))          # cos x


def sum_of_quotients(v):
    z = v * (1 + 0.5j) + 2j
    return np.sum(np.real(1 / z) * np.imag(z ** -1))


def test_quotients_of_complex_numbers_second_and_third_order():
    """A quotient's gradient is a strong product of a complex partial; differentiated again that product's
    pullback is conjugated, as every holomorphic primitive's is (it was not: wrong, with no error)."""
    x = 0.7
    assert np.isclose(ad.grad(ad.grad(imag_of_quotient))(x), (24 * x - 2 * x ** 3) / (4 + x * x) ** 3)
    assert np.isclose(ad.grad(ad.grad(ad.grad(real_of_reciprocal)))(x), np.sin(x))
    v = np.array([0.3, -0.8, 1.1])
    g = ad.grad(sum_of_quotients)
    H = ad.hessian(sum_of_quotients)(v)
    H_central = np.array([(g(v + 1e-5 * e) - g(v - 1e-5 * e)) / 2e-5 for e in np.eye(3)])
    assert np.allclose(H, H_central, atol=1e-6)
    Hr = np.array([ad.grad(lambda z, e=e: g(z) @ e)(v) for e in np.eye(3)])
    assert np.allclose(Hr, H_central, atol=1e-6)
