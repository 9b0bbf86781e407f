"""The forward derivative (Fig. 13): central finite differences on generated programs, and the rules'
shapes on the paper's examples."""
import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import tensorlang as tl
from tensorlang.declarations import body_of, declare
from tensorlang.derive.forward import forward
from tensorlang.nodes import Var
from tensorlang.traversal import free_vars, size_vars

from oracles import assert_close, checkable_difference, differentiable_inputs, random_like
from strategies import SMOOTH_FUNCTIONS, program_and_inputs


def derivative_for_all(expr):
    wrt = differentiable_inputs(expr)
    free = {v: t for v, t in expr.free_vars.items()}
    sigma = {Var(name, free[name]): Var("d" + name, free[name]) for name in wrt}
    # forward maps expressions; as a program, D takes the primal's inputs and sizes and the tangents
    d = declare(forward(expr, sigma), [*free_vars(expr), *sigma.values()], size_vars(expr))
    return d, wrt


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program_and_inputs(black_boxes=SMOOTH_FUNCTIONS, allow_zero=False), st.randoms(use_true_random=False))
def test_forward_matches_finite_differences(case, rnd):
    expr, inputs = case
    d, wrt = derivative_for_all(expr)
    rng = np.random.default_rng(rnd.randint(0, 2**32))
    direction = {name: random_like(inputs[name], rng) for name in wrt}
    tangents = {"d" + name: v for name, v in direction.items()}
    fd = checkable_difference(expr, inputs, direction)
    assume(fd is not None)
    assert_close(tl.evaluate(d, **inputs, **tangents), fd, rtol=1e-4, atol=1e-5)


def test_convolution_derivative_is_convolution_of_dx():
    conv = tl.parse("x : [n + m - 1]R; c : [m]R; gen(i:n) sum(j:m) x[i + j] * c[j]")
    x = Var("x", conv.free_vars["x"])
    d = forward(conv, {x: Var("dx", x.type)})
    assert d == tl.parse("dx : [n + m - 1]R; c : [m]R; gen(i:n) sum(j:m) dx[i + j] * c[j]")


def test_inputs_outside_sigma_have_no_terms():
    e = tl.parse("x : R; y : R; x * y + exp(y)")
    d = forward(e, {Var("x", tl.R): Var("dx", tl.R)})
    assert d == body_of(tl.parse("x : R; y : R; dx : R; dx * y"))  # forward maps expressions
    assert forward(tl.parse("y : R; exp(y)"), {}) == tl.parse("0")
