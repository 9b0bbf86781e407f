"""Lane blocking of ``BLOCK_LANES`` points in the deconvolution's gradients (a statement group: the
residual, the kernel's reduction in chunks and the signal's gather in one pass), at the sizes around a
block: the kernels equal the reference evaluator and, bit for bit, the same kernels without blocking,
which choose the same forms (chunked, interchanged, gather) as the blocked ones.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tensorlang as tl
from tensorlang.codegen import compile as tl_compile
from tensorlang.codegen.c import CEmitter
from tensorlang.codegen.schedule import BLOCK_LANES
from tests.oracles import close

DECONV = tl.parse((Path(__file__).resolve().parent.parent / "examples" / "deconv_loss.tl").read_text())


def _unblocked(expr):
    saved = CEmitter.lanes
    try:
        CEmitter.lanes = 0
        return tl_compile(expr)
    finally:
        CEmitter.lanes = saved


def _as_tuple(v):
    return v if isinstance(v, tuple) else (v,)


@pytest.mark.parametrize("n", [BLOCK_LANES - 1, BLOCK_LANES, BLOCK_LANES + 1, 3 * BLOCK_LANES + 5, 4099])
@pytest.mark.parametrize("m", [BLOCK_LANES // 2, BLOCK_LANES - 1, BLOCK_LANES, BLOCK_LANES + 3])
def test_deconvolution_gradients_in_blocks_of_lanes(n, m):
    r = np.random.default_rng(7 * n + m)
    ins = {"x": r.standard_normal(n + m - 1), "c": r.standard_normal(m), "z": r.standard_normal(n)}
    for wrt in ("c", "x", ["c", "x"]):
        g = tl.grad(DECONV, wrt)
        blocked, plain = tl_compile(g), _unblocked(g)
        assert "tl_lacc" in blocked.source and "tl_lacc" not in plain.source
        got = blocked(**ins)
        assert close(got, tl.evaluate(g, **ins)), (wrt, n, m)
        assert all(np.array_equal(a, b) for a, b in zip(_as_tuple(got), _as_tuple(plain(**ins)))), (wrt, n, m)


def test_the_forms_of_a_statement_do_not_depend_on_lane_blocking():
    """A small target's reduction is chunked when it has a block of lanes of elements, blocked or not."""
    g = tl.grad(DECONV, "c")
    for k in (tl_compile(g), _unblocked(g)):
        assert f">= {BLOCK_LANES}) {{" in k.source and "tl_part" in k.source
