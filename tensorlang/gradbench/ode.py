"""GradBench's ``ode``: ``s`` steps of fourth-order Runge-Kutta from ``y = 0`` to ``t = 2`` on
``y0' = x0``, ``yi' = xi y(i-1)``, the final state (primal) and the gradient of its last entry in ``x``.

A run of Runge-Kutta steps is a tensor program (``steps(c)``: ``c`` steps unrolled, each stage a ``gen``
reading the previous stage one entry back), compiled once; the solver is a Python loop calling the
compiled run of ``CHUNK`` steps, then single steps for the rest, and its gradient is ``tensorlang.ad``'s
pullback through the kernels' compiled adjoints.  The language has no recurrence over a runtime number of steps,
so the loop stays Python; ``CHUNK`` steps per call keep the per-call cost of a kernel (a few microseconds)
away from every step."""
from __future__ import annotations

import numpy as np

from .. import ad
from .. import api as tl
from .runs import Function, warm

CHUNK = 10   # the steps of one kernel call (GradBench's step counts, 1, 10 and 100, are 1 or multiples of 10)


def steps(c: int) -> str:
    """The tensor program of ``c`` Runge-Kutta steps of length ``h`` from state ``y``."""
    lines = ["x : [n]R", "y : [n]R", "h : R"]

    def field(state: str) -> str:   # the right-hand side at ``state`` (an expression in i - 1)
        return f"[i = 0] * x[i] + [i >= 1] * x[i] * ({state})"

    y = "y"
    for t in range(c):
        lines += [f"let k1_{t} = gen(i:n) {field(f'{y}[i - 1]')} in",
                  f"let k2_{t} = gen(i:n) {field(f'{y}[i - 1] + 0.5 * h * k1_{t}[i - 1]')} in",
                  f"let k3_{t} = gen(i:n) {field(f'{y}[i - 1] + 0.5 * h * k2_{t}[i - 1]')} in",
                  f"let k4_{t} = gen(i:n) {field(f'{y}[i - 1] + h * k3_{t}[i - 1]')} in",
                  f"let y{t + 1} = gen(i:n) {y}[i] + h / 6 * "
                  f"(k1_{t}[i] + 2 * k2_{t}[i] + 2 * k3_{t}[i] + k4_{t}[i]) in"]
        y = f"y{t + 1}"
    return "\n".join(lines + [y])


RUN = STEP = None   # the compiled runs of CHUNK steps and of one step, made by ``define``


def solve(x, s):
    h = 2.0 / s
    y = np.zeros_like(x)
    for _ in range(s // CHUNK):
        y = RUN(x=x, y=y, h=h)
    for _ in range(s % CHUNK):
        y = STEP(x=x, y=y, h=h)
    return y


def gradient(x, s):
    """The gradient of the final state's last entry in ``x``: the pullback of ``solve`` at that entry's unit
    vector (one differentiated function, where ``ad.grad`` of ``solve(x, s)[-1]`` would be two)."""
    y, back = ad.pullback(solve, x, s)
    seed = np.zeros_like(y)
    seed[-1] = 1.0
    return back(seed)[0]


def _inputs(raw) -> tuple:
    return np.asarray(raw["x"], dtype=np.float64), int(raw["s"])


def define() -> dict:
    global RUN, STEP
    RUN, STEP = tl.compile(tl.parse(steps(CHUNK))), tl.compile(tl.parse(steps(1)))
    warm(solve, np.ones(2), CHUNK + 1)
    warm(gradient, np.ones(2), CHUNK + 1)   # the adjoint kernels built now, in define
    return {"primal": Function(_inputs, solve, lambda y: y.tolist()),
            "gradient": Function(_inputs, gradient, lambda g: g.tolist())}
