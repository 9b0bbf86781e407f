"""The table of scalar derivatives against oracles that do not share it: SymPy's derivatives of the tensor
language's bodies, and central differences of the functions themselves, for every reader (the language's
built-in black boxes, ``tensorlang.ad``'s rules on numbers and on arrays)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.special as sc
import sympy

import tensorlang as tl
import tensorlang.ad as ad
from tensorlang import functions
from tensorlang.derive.ad.rules import numpy as array_rules
from tensorlang.derive.ad.rules import scalar as number_rules
from tensorlang.derive.ad.rules import special as special_rules
from tensorlang.derive.ad.runtime import HELPERS
from tensorlang.scalar_derivatives import SCALAR_DERIVATIVES

# points inside every function's domain, away from its kinks (abs at 0, max at ties, mod at multiples);
# arccosh's domain starts at 1
POINTS = [(0.3, 0.7), (0.55, 1.9), (0.8, 1.3)]
SHIFTED = {np.arccosh: 1.0, math.acosh: 1.0}   # (the points moved into the function's domain)


def _central(f, args, k, h=1e-6):
    up, down = list(args), list(args)
    up[k] = up[k] + h
    down[k] = down[k] - h
    return (f(*up) - f(*down)) / (2 * h)


def test_every_entry_is_read():
    read = {spec.derivative.name for spec in map(functions.lookup, functions.registered())
            if spec.derivative is not None}
    read |= {inline.name for inline in number_rules.INLINE_CALLS.values()}
    read |= {"add", "subtract", "multiply", "divide", "pow", "mod", "negative", "positive"}  # the operators
    read |= {"erf", "erfc", "expit"}  # scipy.special's (test_array_rules_against_central_differences)
    arrays = {**array_rules.ELEMENTWISE_UNARY, **array_rules.ELEMENTWISE_BINARY}
    read |= {name for name, entry in SCALAR_DERIVATIVES.items() if entry.for_arrays() in
             [(t,) if isinstance(t, str) else t for t in arrays.values()]}
    assert sorted(set(SCALAR_DERIVATIVES) - read) == []


TABLE_BUILTINS = ["exp", "log", "sin", "cos", "tan", "tanh", "sqrt", "recip", "log1p", "expm1", "erf"]


@pytest.mark.parametrize("name", TABLE_BUILTINS)
def test_language_builtins_read_the_table_and_agree_with_sympy(name):
    spec = functions.lookup(name)
    assert spec.derivative is SCALAR_DERIVATIVES[name]
    u = spec.params[0]
    table = sympy.lambdify(u, spec.partial(0), "numpy")
    body = sympy.lambdify(u, sympy.diff(spec.expr, u), "numpy")
    points = np.array([p for p, _ in POINTS])
    assert np.allclose(table(points), body(points), rtol=1e-14)


@pytest.mark.parametrize("name, numpy_fn", [("log1p", np.log1p), ("expm1", np.expm1), ("erf", sc.erf)])
def test_a_function_both_halves_know_differentiates_alike(name, numpy_fn):
    """The language's black box, compiled with its certified gradient, and tensorlang.ad on NumPy's function
    give central differences' gradient."""
    x = np.linspace(-0.7, 1.9, 9)
    e = tl.parse(f"x : [n]R\nsum(i:n) {name}(x[i] * x[i]) * x[i]")
    f = lambda v: np.sum(numpy_fn(v * v) * v)  # noqa: E731
    central = np.array([(f(x + h) - f(x - h)) / 2e-6 for h in 1e-6 * np.eye(len(x))])
    assert tl.compile(e)(x=x) == pytest.approx(f(x), rel=1e-13)
    assert np.allclose(tl.compile(tl.adjoint(e, wrt="x"))(x=x, dy=1.0), central, rtol=1e-7, atol=1e-9)
    assert np.allclose(ad.grad(f)(x), central, rtol=1e-7, atol=1e-9)


def test_user_functions_are_not_read_from_the_table():
    spec = functions.define_function("test_cube_named_like_a_table_entry", lambda u: u**3)
    assert spec.derivative is None and spec.partial(0) == 3 * spec.params[0] ** 2


@pytest.mark.parametrize("f", list(number_rules.INLINE_CALLS), ids=lambda f: f.__name__)
def test_number_rules_against_central_differences(f):
    inline = number_rules.INLINE_CALLS[f]
    n = max(inline.nargs)
    for point in POINTS:
        args = tuple(a + SHIFTED.get(f, 0.0) for a in point[:n])
        y = f(*args)
        for k, template in enumerate(inline.derivs):
            names = [f"a{i}" for i in range(n)]
            got = eval(template.format(*names, dy="1.0", y="y", m="math"),  # noqa: S307 - the table's template
                       {**HELPERS, "math": math, "y": y, **dict(zip(names, args))})   # (as generated code has)
            assert got == pytest.approx(_central(f, args, k), rel=1e-6, abs=1e-8), (f.__name__, k, args)


ARRAY_PARTIALS = [(f, d, 1) for f, d in array_rules.PARTIALS_UNARY.items()]
ARRAY_PARTIALS += [(f, d, 2) for f, d in array_rules.PARTIALS_BINARY.items()]
ARRAY_PARTIALS += [(f, special_rules.PARTIALS_UNARY[f], 1) for f in (sc.erf, sc.erfc, sc.expit)]


@pytest.mark.parametrize("f, partials, n", ARRAY_PARTIALS, ids=lambda v: getattr(v, "__name__", str(v)))
def test_array_rules_against_central_differences(f, partials, n):
    args = [np.array([p[k] for p in POINTS]) + SHIFTED.get(f, 0.0) for k in range(n)]
    got = partials(*args, f(*args))
    got = (got,) if n == 1 else got
    for k in range(n):
        want = _central(f, args, k)
        assert np.allclose(np.broadcast_to(got[k], want.shape), want, rtol=1e-6, atol=1e-8), (f.__name__, k)
