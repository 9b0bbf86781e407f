"""Interchanged reductions into small targets whose sums do not depend on the target's index run several
target elements in one innermost loop (``Schedule.emit_jammed``): compared with the reference evaluator,
and with the same kernels built one element per loop (the same additions in the same order: the same
bits)."""
from __future__ import annotations

import numpy as np
import pytest

import tensorlang as tl
from tensorlang.codegen import compile as tl_compile
from tensorlang.codegen import schedule
from test_codegen_gradients import CONV2D, close

PROGRAMS = {  # name: (source, the inputs' shapes from (n, m))
    # a 3-D target: the flat offset of an element is split into three indices
    "three indices": ("x : [n + m][n + 3]R\ny : [2][n][n]R\n"
                      "gen(a:m, b:3, t:2) sum(i:n, j:n) x[i + a, j + b] * y[t, i, j]",
                      lambda n, m: {"x": (n + m, n + 3), "y": (2, n, n)}),
    # the sums' domain depends on the target's index: one element per loop, as before
    "guarded by the target": ("x : [n + m][n + m]R\ny : [n][n]R\n"
                              "gen(a:m, b:m) sum(i:n, j:n) [i + a < n] * x[i + a, j + b] * y[i, j]",
                              lambda n, m: {"x": (n + m, n + m), "y": (n, n)}),
    # the last summed variable pinned by an equality: no innermost loop, every element's term at a point
    "a diagonal": ("x : [n + m][n + m]R\ny : [n][n]R\n"
                   "gen(a:m, b:m) sum(i:n, j:n) [i + j = n] * x[i + a, j + b] * y[i, j]",
                   lambda n, m: {"x": (n + m, n + m), "y": (n, n)}),
}



def _conv_inputs(n, m, seed):
    r = np.random.default_rng(seed)
    return {"x": r.standard_normal((n + m - 1, n + m - 1)), "w": r.standard_normal((m, m)),
            "z": r.standard_normal((n, n))}


def _output_part(k) -> str:
    body = k.source[k.source.index("void tl_kernel"):]
    return body[body.rindex("/* output"):]


@pytest.mark.parametrize("n", [0, 1, 2, 7, 8, 9, 17, 40])
def test_kernel_gradient_elements_jammed(n):
    """dw[a, b] = sum(i, j) dX[i, j] * x[i + a, j + b]: 8 elements per innermost loop and the rest one by
    one (m = 1, 2: fewer than 8 elements; m = 3: 8 and 1; m = 4: two blocks; m = 5: 3 blocks and 1);
    the sizes where there is no row, no full block of lanes, one, and a remainder."""
    e = tl.parse(CONV2D)
    for m in (1, 2, 3, 4, 5):
        ins = _conv_inputs(n, m, 10 * n + m)
        for wrt in ("w", ["x", "w"]):
            g = tl.grad(e, wrt)
            k = tl_compile(g)
            assert close(k(**ins), tl.evaluate(g, **ins)), (m, wrt)
    assert "tl_jlane" in _output_part(k)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("n", [0, 1, 9, 30])
def test_small_targets_of_other_shapes(name, n):
    src, shapes = PROGRAMS[name]
    e = tl.parse(src)
    k = tl_compile(e)
    for m in (2, 5):
        r = np.random.default_rng(n + m)
        ins = {a: r.standard_normal(s) for a, s in shapes(n, m).items()}
        assert close(k(**ins), tl.evaluate(e, **ins)), (name, m)
    assert ("tl_jlane" in k.source) == (name == "three indices")


def test_jammed_elements_are_the_same_bits_as_one_element_per_loop(monkeypatch):
    """Each element adds its terms in the same order whatever the number of elements per loop."""
    e = tl.grad(tl.parse(CONV2D), ["x", "w"])
    ins = _conv_inputs(70, 5, 1)
    jammed = tl_compile(e)(**ins)
    monkeypatch.setattr(schedule, "JAM", 1)
    one = tl_compile(e)
    assert "tl_jlane" in one.source
    for a, b in zip(one(**ins), jammed):
        assert np.array_equal(a, b)
