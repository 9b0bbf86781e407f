"""``ad.value_and_grad`` on the cached path of ``ad.gradient`` (the value-returning generated entry, ``emit``'s
``_ad_vfast``), against the function and central differences, on every kind of specialisation it runs: box-free,
with a box store, with assumptions on globals that stop holding, with arrays assumed vectors that are not;
and that from its second call on it never goes through ``J``."""
import traceback

import numpy as np
import pytest

from tensorlang import ad
from tensorlang.derive.ad import api
from tensorlang.errors import TypeCheckError

from conftest import central_difference as central

RNG = np.random.default_rng(11)
XV = RNG.normal(size=7)
K = 3


def boxfree(x):
    m = np.max(x)
    return m + np.log(np.sum(np.exp(x - m)))


def helper(x):
    return np.sum(np.sin(x) * x)


def with_store(x, y):
    s = 0.0
    for _ in range(3):
        s = s + helper(x) * y   # a call of user code: not box-free, run with a box store
    return s


def scaled(x):
    return np.sum(x * x) * K   # K assumed an int while it is one


def entries(x):
    y = np.exp(x)
    s = 0.0
    for i in range(3):
        s = s + y[i] * y[i]    # y assumed a vector while it is one
    return np.sum(s)


def bad_log(x):
    return np.sum(np.log(x - 1.0))


def close(got, want):
    return np.allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("f, args, argnums", [
    (boxfree, (XV,), 0), (with_store, (XV, 0.7), 0), (with_store, (XV, 0.7), (1, 0)), (scaled, (XV,), 0),
    (entries, (XV,), 0)], ids=["box-free", "store", "store (1, 0)", "assumed global", "assumed vector"])
def test_value_and_gradients_from_the_generated_entry(f, args, argnums, monkeypatch):
    vg = ad.value_and_grad(f, argnums)
    picks = (argnums,) if isinstance(argnums, int) else argnums
    want = tuple(central(f, args, i) for i in picks)
    vg(*args)   # installs
    def refuse(*a, **kw):
        raise AssertionError("value_and_grad went through J")
    monkeypatch.setattr(api, "J", refuse)
    for _ in range(2):
        value, got = vg(*args)
        assert value == f(*args)
        got = got if isinstance(argnums, tuple) else (got,)
        assert len(got) == len(want) and all(map(close, got, want))
        assert all(g is not a for g, a in zip(got, args))


def other_helper(x):
    return np.sum(np.cos(x) * x)


def test_the_entries_hand_over_when_their_assumptions_stop_holding(monkeypatch):
    vs = ad.value_and_grad(with_store)
    vs(XV, 0.7)
    vs(XV, 0.7)
    monkeypatch.setattr(__import__(__name__), "helper", other_helper)   # the callee assumed is rebound
    value, g = vs(XV, 0.7)
    assert value == with_store(XV, 0.7) and close(g, central(with_store, (XV, 0.7), 0))
    vg = ad.value_and_grad(scaled)
    vg(XV)
    vg(XV)
    monkeypatch.setattr(__import__(__name__), "K", 2.5)   # no longer an int: the specialisation assuming nothing
    value, g = vg(XV)
    assert value == scaled(XV) and close(g, 5.0 * XV)
    ve = ad.value_and_grad(entries)
    ve(XV)
    ve(XV)
    x2 = XV[:6].reshape(3, 2)   # y = exp(x) is no vector now: y[i] is a row
    value, g = ve(x2)
    assert value == entries(x2) and close(g, central(entries, (x2,), 0))


def test_a_value_that_is_no_real_scalar_is_refused_on_every_call():
    vg = ad.value_and_grad(lambda x: np.exp(x))
    for _ in range(2):
        with pytest.raises(Exception, match="real scalar"):
            vg(XV)


def test_errors_show_the_users_line_on_the_cached_path():
    vg = ad.value_and_grad(bad_log)
    vg(XV * 0 + 3.0)   # installs
    with pytest.raises(Exception) as info:
        with np.errstate(invalid="raise"):
            vg(XV * 0 - 3.0)
    shown = "".join(traceback.format_exception(info.value))
    assert "<tensorlang" not in shown and "runtime.py" not in shown
    assert traceback.extract_tb(info.value.__traceback__)[-1].filename == __file__


def test_integers_keywords_and_nested_gradients_after_installing():
    vg = ad.value_and_grad(with_store, argnums=(0, 1))
    vg(XV, 0.7)
    with pytest.raises(TypeCheckError, match=r"argument 1 \(y\) is an int"):
        vg(XV, 1)
    v0 = ad.value_and_grad(with_store)
    v0(XV, 0.7)
    value, gx = v0(XV, y=0.5)   # a keyword: passed to f, not differentiated
    assert value == with_store(XV, 0.5) and close(gx, central(with_store, (XV, 0.5), 0))
    inner = ad.grad(boxfree)
    inner(XV)
    outer = ad.value_and_grad(lambda x: np.sum(inner(x) * XV))
    for _ in range(2):
        value, g = outer(XV)
        assert close(value, np.sum(inner(XV) * XV))
        assert close(g, central(lambda x: np.sum(ad.gradient(boxfree, x)[0] * XV), (XV,), 0))


def aux_boxfree(x, y):
    s = np.sum(np.exp(x) * y)
    return s * s, s * 2.0


def aux_store(x, y):
    return with_store(x, y), {"h": helper(x), "x": x}


def aux_scaled(x):
    return np.sum(x * x) * K * 2.0, x * K


def aux_branches(x, y):
    if y > 0:
        return np.sum(x * x) * y, "positive"
    return np.sum(x) * y, "negative"   # (two returns: no pair written out at the exit, handed to J)


def aux_three(x):
    return np.sum(x), 1.0, 2.0


def aux_vector(x):
    return x * 2.0, 1.0


@pytest.mark.parametrize("f, args", [(aux_boxfree, (XV, 0.3)), (aux_store, (XV, 0.7)), (aux_scaled, (XV,))],
                         ids=["box-free", "store", "assumed global"])
def test_has_aux_from_the_generated_entry(f, args, monkeypatch):
    value_of = lambda *a: f(*a)[0]
    want = central(value_of, args, 0)
    vg, g = ad.value_and_grad(f, has_aux=True), ad.grad(f, has_aux=True)
    vg(*args)
    g(*args)
    monkeypatch.setattr(api, "J", lambda *a, **kw: pytest.fail("has_aux went through J"))
    for _ in range(2):
        (value, aux), got = vg(*args)
        got2, aux2 = g(*args)
        value0, aux0 = f(*args)
        assert value == value0 and close(got, want) and close(got2, want)
        for a in (aux, aux2):
            assert type(a) is type(aux0) and (a == aux0 if not isinstance(a, (dict, np.ndarray))
                                              else str(a) == str(aux0))


def test_has_aux_without_a_pair_written_out_and_what_is_refused():
    vg = ad.value_and_grad(aux_branches, has_aux=True)
    for y in (0.5, 0.5, -0.5, -0.5):
        (value, aux), g = vg(XV, y)
        assert value == aux_branches(XV, y)[0] and aux == aux_branches(XV, y)[1]
        assert close(g, central(lambda x: aux_branches(x, y)[0], (XV,), 0))
    for f, match in ((aux_three, "must return a pair"), (boxfree, "must return a pair"),
                     (aux_vector, "real scalar")):
        for h in (ad.value_and_grad(f, has_aux=True), ad.grad(f, has_aux=True)):
            for _ in range(2):
                with pytest.raises(Exception, match=match):
                    h(XV)


def test_has_aux_entries_hand_over_when_their_assumptions_stop_holding(monkeypatch):
    g = ad.grad(aux_scaled, has_aux=True)
    g(XV)
    g(XV)
    monkeypatch.setattr(__import__(__name__), "K", 2.5)
    got, aux = g(XV)
    assert close(got, central(lambda x: aux_scaled(x)[0], (XV,), 0)) and close(aux, XV * 2.5)
