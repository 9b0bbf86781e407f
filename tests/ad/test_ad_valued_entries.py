"""The value-returning generated entries (``emit``'s ``_ad_vfast`` for ``ad.value_and_grad``, ``_ad_afast`` for
``has_aux``), which a specialisation compiles only when they are first asked for: right, against the function
and central differences, when asked for after plain gradients (or a pullback) of the same function built its
specialisation without them, on every kind of specialisation (box-free, with a box store, with assumptions on
globals or vectors, with a loop); not compiled by gradients; and compiled once and right when four threads ask
for them at once, on a fresh function."""
import sys
import threading
import types

import numpy as np
import pytest

from tensorlang import ad
from tensorlang.derive.ad import api

from conftest import central_difference as central
from test_ad_value_and_grad import aux_boxfree, aux_scaled, aux_store, boxfree, close, entries, scaled, with_store

XV = np.random.default_rng(5).normal(size=6)


def fresh(f):
    """A copy of ``f`` with a code object of its own, so that nothing is compiled for it yet (the
    specialisations are cached by the code object's identity)."""
    return types.FunctionType(f.__code__.replace(), f.__globals__, f.__name__)


def loop(x, n):
    r = 1.0
    for _ in range(n):
        r *= x + 0.5
    return r


def _picked(f, args):
    """The specialisation that ``ad.grad(f)`` and ``ad.value_and_grad(f)`` (``argnums`` 0) run for ``args``: the
    other arguments not differentiated."""
    return api.specialised(f, args, frozenset(range(1, len(args))))


def _specs(f, args):
    """The specialisations that run for ``args`` (``ad.gradient``'s and ``_picked``) and those they fall back
    to (the same where they assume nothing)."""
    return {s for spec in (api.specialised(f, args), _picked(f, args)) for s in (spec, spec.generic)}


def _no_J(monkeypatch):
    monkeypatch.setattr(api, "J", lambda *a, **kw: pytest.fail("went through J, not the generated entry"))


@pytest.mark.parametrize("f, args", [
    (fresh(boxfree), (XV,)), (fresh(loop), (1.3, 4)), (fresh(with_store), (XV, 0.7)), (fresh(scaled), (XV,)),
    (fresh(entries), (XV,))], ids=["box-free", "loop", "store", "assumed global", "assumed vector"])
def test_value_and_grad_after_gradients(f, args, monkeypatch):
    want = central(f, args, 0)
    g = ad.grad(f)
    for _ in range(2):
        assert close(ad.gradient(f, *args)[0], want) and close(g(*args), want)
    specs = _specs(f, args)
    assert all(s._valued is None for s in specs)   # the gradients did not compile them
    vg = ad.value_and_grad(f)
    vg(*args)   # installs
    _no_J(monkeypatch)
    for _ in range(2):
        value, got = vg(*args)
        assert value == f(*args) and close(got, want)
        assert close(ad.gradient(f, *args)[0], want)
    spec = _picked(f, args)
    assert spec._valued is not None
    assert spec.generic is spec or spec.generic._valued is None   # its fallback's: only when one is taken


@pytest.mark.parametrize("f, args", [
    (fresh(aux_boxfree), (XV, 0.3)), (fresh(aux_store), (XV, 0.7)), (fresh(aux_scaled), (XV,))],
    ids=["box-free", "store", "assumed global"])
def test_has_aux_after_a_pullback(f, args, monkeypatch):
    value_of = lambda *a: f(*a)[0]
    want = central(value_of, args, 0)
    _, back = ad.pullback(f, *args)   # builds the specialisation
    assert close(back((1.0, None))[0], want)
    assert all(s._valued is None for s in _specs(f, args))
    g, vg = ad.grad(f, has_aux=True), ad.value_and_grad(f, has_aux=True)
    g(*args)   # installs
    vg(*args)
    _no_J(monkeypatch)
    for _ in range(2):
        got, aux = g(*args)
        (value, aux2), got2 = vg(*args)
        value0, aux0 = f(*args)
        assert value == value0 and close(got, want) and close(got2, want)
        for a in (aux, aux2):
            assert type(a) is type(aux0) and str(a) == str(aux0)


def _counting_compiles(monkeypatch) -> list:
    """The list that gets, for each compilation of generated entries from now on, whether it compiled the
    value-returning ones."""
    compiled = []
    real = api.compile_function

    def counting(*args, **kw):
        compiled.append(kw.get("valued", False))
        return real(*args, **kw)

    monkeypatch.setattr(api, "compile_function", counting)
    return compiled


def _at_once(work):
    """``work(i)`` in four threads started together (switching threads often), its results in order."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    barrier = threading.Barrier(4)
    results, errors = [None] * 4, []

    def run(i):
        try:
            barrier.wait()
            results[i] = work(i)
        except BaseException as err:   # (reported in the test's thread)
            errors.append(err)

    try:
        threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert not errors, errors
    return results


@pytest.mark.parametrize("f, f_aux, gradient_first", [
    (fresh(with_store), fresh(aux_boxfree), False), (fresh(with_store), fresh(aux_store), True)],
    ids=["fresh", "after gradients"])
def test_four_threads_at_once(f, f_aux, gradient_first, monkeypatch):
    compiled = _counting_compiles(monkeypatch)
    args = (XV, 0.6)
    want = central(f, args, 0)
    want_aux = central(lambda *a: f_aux(*a)[0], args, 0)
    if gradient_first:
        assert close(ad.gradient(f, *args)[0], want)
    vg, g = ad.value_and_grad(f), ad.grad(f_aux, has_aux=True)

    def work(i):
        out = []
        for _ in range(3):
            out.append(vg(*args))
            out.append(g(*args))
            out.append(ad.gradient(f, *args)[0])
        return out

    results = _at_once(work)
    for out in results:
        for (value, got), (got_aux, aux), got_plain in zip(out[::3], out[1::3], out[2::3]):
            assert value == f(*args) and close(got, want) and close(got_plain, want)
            assert str(aux) == str(f_aux(*args)[1]) and close(got_aux, want_aux)
    made = [s for h in (f, f_aux) for s in _specs(h, args) if s._valued is not None]
    assert compiled.count(True) == len(made) and {_picked(f, args), _picked(f_aux, args)} <= set(made)
