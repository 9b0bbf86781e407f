"""Differentiating through concurrency (Zygote paper, section 4): ``ThreadPoolExecutor.map``/``submit``
and ``threading.Thread`` fan-out and join.  The work sent to a thread runs under ``J`` in that thread, so
its pullback is recorded there; the pullbacks of work that ran in parallel run in parallel as well.

* ``ex.map(f, xs...)``: each task returns ``(y, back)``; the pullback runs the ``back``s on a pool of the
  executor's size.
* ``fut = ex.submit(f, *args)`` returns a ``Future`` whose ``result()`` is the value; in the adjoint,
  ``result()``'s pullback starts ``back(dy)`` on the pool and ``submit``'s pullback, which comes later
  (submits precede their results), waits for it.  ``back`` is linear, so several ``result()`` calls add up.
* under forward over reverse (``ad.hessian``), ``submit`` runs the forward mode of ``J(f, *args)`` in the
  thread, and the pullbacks started on the pool give their tangents with their gradients.
* ``threading.Thread(target=f, args=...)``: ``start`` runs ``J(f, *args)`` in the thread, ``join`` waits;
  in the adjoint ``join``'s pullback starts f's pullback in a thread and ``start``'s collects it.  A
  thread's results come back through the objects it writes to (the box rules); the box store is shared.

Work and pullbacks sent to threads run there in the context of the differentiation that sent them
(``context.carried``), so they share its box store and tangent store, and differentiations running beside
it in other threads see none of it.

Work on numbers and NumPy arrays and compiled tensorlang kernels (whose C code releases the GIL) gets a
real speed-up from the threads; pure Python work interleaves under the GIL.
"""
from __future__ import annotations

import concurrent.futures as cf
import threading
import types

from ...errors import UnsupportedError
from .context import carried, current, within
from .runtime import BOX_METHODS, METHOD_RULES, NONDIFF, RULES, ZERO, J, acc
from .second import METHOD_PAIRS
from .tangent import (JVP, JVP_METHOD_RULES, JVP_RULES, PullbackTangent, call_pullback,
                      pullback_tangent)

_POOLS: dict = {}   # size -> a pool for the pullbacks (the user's executor may be shut down by then)
_POOLS_LOCK = threading.Lock()


def _pool(size: int) -> cf.ThreadPoolExecutor:
    with _POOLS_LOCK:
        pool = _POOLS.get(size)
        if pool is None:
            pool = _POOLS[size] = cf.ThreadPoolExecutor(size, thread_name_prefix="tensorlang-ad-pullback")
        return pool


def _size(ex) -> int:
    return max(int(getattr(ex, "_max_workers", 1) or 1), 1)


def shared_ids(f, args) -> frozenset:
    """The objects work shares with the thread that sent it: its arguments and what f captures."""
    cells = getattr(f, "__closure__", None) or ()
    return frozenset(id(x) for x in (*args, *(c.cell_contents for c in cells)))


def run_back(context, back, dy, shared):
    """``back(dy)`` in ``context``, with the shared objects' box gradients left in the store (``runtime.take``)."""
    return within(context.but(shared=shared), back, dy)


# -- ThreadPoolExecutor.map ------------------------------------------------------------------------------------
def _map(ex, f, *seqs, timeout=None, chunksize=1):
    seqs = [list(s) for s in seqs]
    results = list(ex.map(carried(J), [f] * len(seqs[0]) if seqs else [], *seqs, timeout=timeout))
    ys = [r[0] for r in results]

    def back(dys):
        backs = [r[1] for r in results]
        dys = [None] * len(backs) if dys is None else list(dys)
        shared = [shared_ids(f, xs) for xs in zip(*seqs)]
        grads = list(_pool(_size(ex)).map(run_back, [current()] * len(backs), backs, dys, shared))
        df = None
        dseqs = [[None] * len(ys) for _ in seqs]
        for i, g in enumerate(grads):
            df = acc(df, g[0])
            for k in range(len(seqs)):
                dseqs[k][i] = g[k + 1]
        return (None, df, *dseqs)
    return ys, back


# -- ThreadPoolExecutor.submit and Future.result -----------------------------------------------------------------
class DiffFuture:
    """The future of differentiated work: ``result()`` is the value; it keeps the pullback and the
    pullbacks started by ``result()``'s own pullback."""

    def __init__(self, future, size, shared):
        self._future, self._size, self._shared = future, size, shared
        self._pending: list = []
        self._lock = threading.Lock()

    def result(self, timeout=None):
        return self._future.result(timeout)[0]

    def done(self):
        return self._future.done()

    def _start_back(self, dy):
        back = self._future.result()[1]
        with self._lock:
            self._pending.append(_pool(self._size).submit(run_back, current(), back, dy, self._shared))

    def _collect(self):
        with self._lock:
            pending, self._pending = self._pending, []
        if not pending:
            return self._future.result()[1](None)
        g = None
        for p in pending:
            g = acc(g, tuple(p.result()))
        return g


def _submit(ex, f, *args):
    fut = DiffFuture(ex.submit(carried(J), f, *args), _size(ex), shared_ids(f, args))
    return fut, lambda dfut: (None, *fut._collect())


def _result(fut, timeout=None):
    y = fut.result(timeout)

    def back(dy):
        fut._start_back(dy)
        return (None, None)
    return y, back


# -- submit and result under forward over reverse ---------------------------------------------------------------
class PairFuture(DiffFuture):
    """The future of work under forward over reverse: it gives ``((y, back), (ty, tback))``, and the
    pullbacks started by ``result()``'s pullback give gradients and their tangents."""

    def result(self, timeout=None):
        return self._future.result(timeout)[0][0]

    def _pullbacks(self):
        (_, back), (_, tback) = self._future.result()
        return back, pullback_tangent(back, tback)

    def _start_back(self, dy, tdy=None):
        back, tback = self._pullbacks()
        with self._lock:
            self._pending.append(_pool(self._size).submit(run_back, current(), lambda d: call_pullback(back, tback, *d),
                                                          (dy, tdy), self._shared))

    def _collect(self):
        with self._lock:
            pending, self._pending = self._pending, []
        if not pending:
            return call_pullback(*self._pullbacks(), None, None)
        g = tg = None
        for p in pending:
            pg, ptg = p.result()
            g, tg = acc(g, tuple(pg)), acc(tg, None if ptg is None else tuple(ptg))
        return g, tg


def _submit_pair(ex, tex, xs, txs):
    fut = PairFuture(ex.submit(carried(JVP), J, None, xs, txs), _size(ex), shared_ids(xs[0], xs[1:]))

    def call(dfut, tdfut):
        g, tg = fut._collect()
        return (None, *g), None if tg is None else (None, *tg)
    return (fut, lambda dfut: call(dfut, None)[0]), (None, PullbackTangent(None, call))


def _result_pair(fut, tfut, xs, txs):
    (y, _), (ty, _) = fut._future.result(*xs)

    def call(dy, tdy):
        fut._start_back(dy, tdy)
        return (None, None), None
    return (y, lambda dy: call(dy, None)[0]), (ty, PullbackTangent(None, call))


METHOD_PAIRS.update({(cf.ThreadPoolExecutor, "submit"): _submit_pair, (PairFuture, "result"): _result_pair})


# -- threading.Thread -------------------------------------------------------------------------------------------------
class DiffThread:
    """A thread running differentiated work: ``start`` runs ``J(target, *args)`` in a real thread."""

    def __init__(self, target, args, kwargs):
        if kwargs:
            raise UnsupportedError("tensorlang.ad: threading.Thread(kwargs=...) is not supported; pass args")
        self.target, self.args = target, tuple(args)
        self._thread = threading.Thread(target=carried(self._run))
        self._out = None
        self._error = None
        self._pending = None

    def _run(self):
        try:
            self._out = J(self.target, *self.args)
        except BaseException as e:   # re-raised by join, in the caller's thread
            self._error = e

    def start(self):
        self._thread.start()

    def join(self, timeout=None):
        self._thread.join(timeout)
        if self._error is not None:
            raise self._error

    def is_alive(self):
        return self._thread.is_alive()


_THREAD_PARAMS = ["group", "target", "name", "args", "kwargs"]


def _thread(*pos, **kw):
    """``threading.Thread(...)``; the pullback gives the gradients of the arguments in call order (the
    target's own gradient, a closure's captured variables, and the ``args`` tuple's)."""
    names = _THREAD_PARAMS[:len(pos)] + list(kw)
    bound = dict(zip(_THREAD_PARAMS, pos), **kw)
    t = DiffThread(bound.get("target"), bound.get("args", ()), bound.get("kwargs"))
    n = len(t.args)

    def back(dt):
        g = t._out[1](None) if t._pending is None else t._pending.result()
        t._pending = None
        grads = {"target": g[0], "args": tuple(g[1:1 + n])}
        return tuple(grads.get(k) for k in names)
    return t, back


class _Spawned:
    """``fn(*args)`` running in a thread of its own; ``result()`` joins it."""

    def __init__(self, fn, *args):
        self._value = self._error = None
        self._thread = threading.Thread(target=self._run, args=(fn, args))
        self._thread.start()

    def _run(self, fn, args):
        try:
            self._value = fn(*args)
        except BaseException as e:   # re-raised by result, in the caller's thread
            self._error = e

    def result(self):
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value


def _start(t):
    t.start()
    # a gradient for the thread object itself (not None), so that the constructor's pullback, which
    # collects the target's, is run: the thread's results reach the caller through what it wrote
    return None, lambda dy: (types.SimpleNamespace(started=1.0),)


def _join(t, timeout=None):
    t.join(timeout)

    def back(dy):
        t._pending = _Spawned(run_back, current(), t._out[1], None, shared_ids(t.target, t.args))
        return (None, None)
    return None, back


RULES[threading.Thread] = _thread
METHOD_RULES.update({
    (cf.ThreadPoolExecutor, "map"): _map, (cf.ThreadPoolExecutor, "submit"): _submit,
    (cf.ThreadPoolExecutor, "shutdown"): lambda ex, *a, **k: (ex.shutdown(*a, **k), ZERO),
    (DiffFuture, "result"): _result, (DiffThread, "start"): _start, (DiffThread, "join"): _join,
})
BOX_METHODS.update({(cf.ThreadPoolExecutor, "submit"), (DiffFuture, "result"), (DiffThread, "start"),
                    (DiffThread, "join")})
NONDIFF.update({cf.ThreadPoolExecutor, threading.Lock})


# -- forward mode: the tangents are computed in the threads alongside the values -----------------------------------
class ForwardFuture:
    """The future of work under forward mode: ``result()`` is the value, its tangent comes with it."""

    def __init__(self, future):
        self._future = future

    def result(self, timeout=None):
        return self._future.result(timeout)[0]


def _map_jvp(ex, tex, args, ts, timeout=None, chunksize=1):
    f, *seqs = args
    tseqs = [[None] * len(s) if t is None else list(t) for s, t in zip(seqs, ts[1:])]
    out = list(ex.map(carried(lambda xs, txs: JVP(f, ts[0], xs, txs)), list(zip(*seqs)), list(zip(*tseqs)),
                      timeout=timeout))
    return [y for y, _ in out], [t for _, t in out]


def _submit_jvp(ex, tex, args, ts):
    return ForwardFuture(ex.submit(carried(JVP), args[0], ts[0], tuple(args[1:]), tuple(ts[1:]))), None


def _thread_jvp(pos, tpos, tkw=None, **kw):
    bound = dict(zip(_THREAD_PARAMS, pos), **kw)
    tbound = dict(zip(_THREAD_PARAMS, tpos), **(tkw or {}))
    targs = tbound.get("args") or (None,) * len(bound.get("args", ()))
    t = DiffThread(bound.get("target"), bound.get("args", ()), bound.get("kwargs"))
    t._run = lambda: setattr(t, "_out", JVP(t.target, tbound.get("target"), t.args, tuple(targs)))
    t._thread = threading.Thread(target=carried(_guarded), args=(t,))
    return t, None


def _guarded(t):
    try:
        t._run()
    except BaseException as e:   # re-raised by join, in the caller's thread
        t._error = e


_thread_jvp.keyword_tangents = True
JVP_RULES[threading.Thread] = _thread_jvp
JVP_METHOD_RULES.update({
    (cf.ThreadPoolExecutor, "map"): _map_jvp, (cf.ThreadPoolExecutor, "submit"): _submit_jvp,
    (ForwardFuture, "result"): lambda fut, tfut, args, ts: fut._future.result(*args),
    (DiffThread, "start"): lambda t, tt, args, ts: (t.start(), None),
    (DiffThread, "join"): lambda t, tt, args, ts: (t.join(*args), None),
    (cf.ThreadPoolExecutor, "shutdown"): lambda ex, tex, args, ts, **kw: (ex.shutdown(*args, **kw), None),
})
