"""The gradient-descent solver of GradBench's ``particle`` and ``saddle`` (its ``gd.hpp``, which the evals
prescribe, not a better one): steps of ``eta`` against the gradient while they lower the objective, ``eta``
doubled after 10 good steps and halved after a bad one, until the gradient or the step is below 1e-5.

It is plain Python over NumPy vectors, so ``tensorlang.ad`` differentiates through it (its loop, its
branches and the functions it is given) when a solve sits inside a function being differentiated."""
from __future__ import annotations

import numpy as np


def norm(v):
    return np.sqrt(np.sum(v * v))


def argmin(f, gradient, x):
    fx, gx = f(x), gradient(x)
    i, eta = 0, 1e-5
    while norm(gx) > 1e-5:
        if i == 10:
            eta, i = eta * 2, 0
        else:
            x_prime = x - eta * gx
            if norm(x - x_prime) <= 1e-5:
                break
            fx_prime = f(x_prime)
            if fx_prime < fx:
                x, fx, gx, i = x_prime, fx_prime, gradient(x_prime), i + 1
            else:
                eta, i = eta / 2, 0
    return x


def argmax(f, gradient, x):
    return argmin(lambda v: -f(v), lambda v: -gradient(v), x)
