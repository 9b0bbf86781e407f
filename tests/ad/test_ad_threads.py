"""Differentiating through threads: ``ThreadPoolExecutor.map``/``submit`` and ``threading.Thread``
fan-out/join, each against its sequential twin (value and gradient) and finite differences; the pullbacks
of work that ran in parallel run in parallel (a barrier that only two concurrent pullbacks can pass);
and a compiled tensorlang kernel inside the threads."""
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import tensorlang as tl
from tensorlang import ad
from tensorlang.codegen import compile as tl_compile

POOL = ThreadPoolExecutor(2)
XS = [np.linspace(-1, 1, 5) * k for k in (0.5, 1.0, 1.5, 2.0)]


def work(w, x):
    h = np.tanh(w[0] * x + w[1])
    return np.sum(h * h) + w[2] * np.sum(x)


def loss_map(w):
    parts = POOL.map(lambda x: work(w, x), XS)
    return sum(parts)


def loss_map_twin(w):
    parts = map(lambda x: work(w, x), XS)
    return sum(parts)


def loss_submit(w):
    futures = [POOL.submit(work, w, x) for x in XS]
    total = 0.0
    for fut in futures:
        total = total + fut.result() * fut.result()
    return total


def loss_submit_twin(w):
    total = 0.0
    for x in XS:
        r = work(w, x)
        total = total + r * r
    return total


def fill(w, x, out, i):
    out[i] = work(w, x)


def loss_thread(w):
    out = [0.0] * len(XS)
    threads = [threading.Thread(target=fill, args=(w, XS[i], out, i)) for i in range(len(XS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(out) + out[0] * out[1]


def loss_thread_twin(w):
    out = [0.0] * len(XS)
    for i in range(len(XS)):
        fill(w, XS[i], out, i)
    return sum(out) + out[0] * out[1]


@pytest.mark.parametrize("threaded, twin", [(loss_map, loss_map_twin), (loss_submit, loss_submit_twin),
                                            (loss_thread, loss_thread_twin)])
def test_threaded_programs_match_their_sequential_twins(threaded, twin, fd):
    w = np.array([0.7, -0.2, 0.3])
    assert threaded(w) == pytest.approx(twin(w), rel=1e-14)
    g, g_twin = ad.gradient(threaded, w)[0], ad.gradient(twin, w)[0]
    assert np.allclose(g, g_twin, rtol=1e-12)
    assert np.allclose(g, fd(threaded, (w,), 0), rtol=1e-6)


def rendezvous(x):
    return x


BARRIER = threading.Barrier(2)


@ad.rule(rendezvous)
def _rendezvous(x):
    def back(dy):
        BARRIER.wait(timeout=10)   # passes only when two pullbacks run at the same time
        return (dy,)
    return x, back


def test_pullbacks_of_parallel_work_run_in_parallel():
    def f(w):
        return sum(POOL.map(lambda k: rendezvous(w * k), [1.0, 2.0])) + \
            sum(f2.result() for f2 in [POOL.submit(rendezvous, w * k) for k in (3.0, 4.0)])
    BARRIER.reset()
    assert ad.gradient(f, 0.5) == (10.0,)

    def g(w):
        out = [0.0, 0.0]
        ts = [threading.Thread(target=put, args=(w * (i + 1), out, i)) for i in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return out[0] + out[1]
    assert ad.gradient(g, 0.5) == (3.0,)


def put(v, out, i):
    out[i] = rendezvous(v)


def test_a_failing_thread_raises_in_the_caller():
    def bad(w, out):
        out.append(w / 0.0)

    def f(w):
        out = []
        t = threading.Thread(target=bad, args=(w, out))
        t.start()
        t.join()
        return w
    with pytest.raises(ZeroDivisionError):
        ad.gradient(f, 1.0)


@pytest.fixture(scope="module")
def conv():
    e = tl.parse((Path(__file__).resolve().parent.parent.parent / "examples" / "deconv_loss.tl").read_text())
    return tl_compile(e)


def test_kernel_inside_threads(conv):
    rng = np.random.default_rng(0)
    zs = [rng.standard_normal(40) for _ in range(4)]
    x = rng.standard_normal(43)

    def chunk(c, z):
        return conv(x=x, c=c, z=z)

    def loss(c):
        return sum(POOL.map(lambda z: chunk(c, z), zs))

    def twin(c):
        return sum(map(lambda z: chunk(c, z), zs))

    c = rng.standard_normal(4)
    ad.gradient(twin, c)   # builds the adjoint kernel once, before threads share it
    assert np.allclose(ad.gradient(loss, c)[0], ad.gradient(twin, c)[0], rtol=1e-12)


@pytest.mark.parametrize("threaded, twin", [(loss_map, loss_map_twin), (loss_submit, loss_submit_twin),
                                            (loss_thread, loss_thread_twin)])
def test_forward_mode_through_threads_matches_the_sequential_twin(threaded, twin):
    w, v = np.array([0.7, -0.2, 0.3]), np.array([0.3, 1.0, -0.5])
    y, t = ad.jvp(threaded, (w,), (v,))
    y_twin, t_twin = ad.jvp(twin, (w,), (v,))
    assert y == pytest.approx(y_twin, rel=1e-14) and t == pytest.approx(t_twin, rel=1e-12)
    assert t == pytest.approx(float(ad.gradient(twin, w)[0] @ v), rel=1e-12)


def test_a_write_in_a_callee_reaches_the_caller():
    # the sequential twin of a thread's work: a list filled by a called function (its values were
    # inactive in the caller, which writes nothing itself, so their gradient was lost)
    def fill(w, out, i):
        out[i] = w * w * (i + 1)

    def f(w):
        out = [0.0] * 2
        fill(w, out, 0)
        fill(w, out, 1)
        return out[0] + out[1]
    assert ad.gradient(f, 3.0) == (18.0,)
