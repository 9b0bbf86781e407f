"""The entry point called from C (``codegen.entry_caller``) against ctypes' call of the same library: the
same bits on kernels with BLAS, temporaries, pairs, scalars, empty and read-only arrays, from many threads."""
from __future__ import annotations

import os
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import tensorlang as tl
from tensorlang.codegen import entry_caller
from tensorlang.codegen.build import load
from tensorlang.codegen.runtime import Runner

CELL = (Path(__file__).resolve().parent.parent / "examples" / "lstm_cell.tl").read_text()


def _by_ctypes(kernel):
    """A runner of ``kernel``'s library that calls its entry point through ctypes."""
    runner = kernel._runner
    return Runner(runner.meta, load(kernel.library), error=runner.error)


def _same(a, b):
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    else:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), strict=True)


@pytest.mark.skipif(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")),
                    reason="this interpreter has no Python.h to build the extension with")
def test_the_extension_is_built_where_python_h_is_there():
    assert entry_caller.caller() is not None
    assert tl.compile(tl.parse("x : [n]R\nsum(i:n) x[i]"))._runner._caller is entry_caller.caller()


def test_it_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("TENSORLANG_ENTRY_CALLER", "0")
    assert entry_caller.caller() is None
    k = tl.compile(tl.parse("x : [n]R\ngen(i:n) 2 * x[i]"))
    assert k._runner._caller is None
    np.testing.assert_array_equal(k(x=np.arange(3.0)), [0.0, 2.0, 4.0])


def test_the_lstm_cell_and_its_adjoint_give_ctypes_bits():
    rng = np.random.default_rng(0)
    cell = tl.compile(tl.parse(CELL))
    inputs = dict(W=rng.normal(size=(16, 4)), U=rng.normal(size=(16, 4)), b=rng.normal(size=16),
                  h=rng.normal(size=4), c=rng.normal(size=4), x=rng.normal(size=4))
    inputs["W"].flags.writeable = False   # (read-only: ctypes' buffer route refuses it, the extension reads it)
    _same(cell(**inputs), _by_ctypes(cell)(**inputs))
    adj = cell.adjoint()
    call = dict(inputs, **{adj.dy_name: (rng.normal(size=4), rng.normal(size=4))})
    _same(adj(**call), _by_ctypes(adj)(**call))


@pytest.mark.parametrize("src, inputs", [
    ("x : [n]R\ny : R\ngen(i:n) y * x[i]", dict(x=np.arange(5.0), y=2.5)),
    ("x : [n]R\nsum(i:n) x[i] * x[i]", dict(x=np.zeros(0))),
    ("A : [n][m]R\nx : [m]R\n(gen(i:n) sum(j:m) A[i, j] * x[j], sum(j:m) x[j])",
     dict(A=np.arange(12.0).reshape(3, 4), x=np.arange(4.0))),
    ("A : [n][m]R\nx : [m]R\ngen(i:n) sum(j:m) A[i, j] * x[j]", dict(A=np.zeros((0, 4)), x=np.arange(4.0))),
])
def test_scalars_pairs_and_empty_arrays_give_ctypes_bits(src, inputs):
    k = tl.compile(tl.parse(src))
    _same(k(**inputs), _by_ctypes(k)(**inputs))


def test_calls_from_many_threads_are_each_right():
    k = tl.compile(tl.parse("A : [n][m]R\nx : [m]R\ngen(i:n) sum(j:m) A[i, j] * x[j]"))
    rng = np.random.default_rng(1)
    cases = [(rng.normal(size=(30, 20)), rng.normal(size=20)) for _ in range(64)]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda c: k(A=c[0], x=c[1]), cases))
    for (A, x), y in zip(cases, got):
        np.testing.assert_allclose(y, A @ x, rtol=1e-12)


def test_a_bad_call_of_the_extension_is_a_python_error():
    call = entry_caller.caller()
    if call is None:
        pytest.skip("the extension is not built here")
    with pytest.raises(TypeError):
        call(0, np.zeros(1, np.int64), (np.zeros(1),), ())
    with pytest.raises(ValueError):
        call(0, np.zeros(1, np.int64), [np.zeros(1)], ())
    with pytest.raises(TypeError):   # (not a buffer: refused before the entry point runs)
        call(1, np.zeros(1, np.int64), [object()], ())
