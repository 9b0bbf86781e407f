"""Python's cyclic garbage collector paused while work that makes many objects and no cycles runs.

The symbolic passes (``tensorlang.api``) keep tens of thousands of new nodes alive at once, and a gradient of
``tensorlang.ad`` keeps what its adjoint reads (the stack of loop values, the pullbacks' closures) alive until
it ends; CPython's generational heuristics then run collections of the whole heap that find nothing, again
and again (a sixth of a 64-layer network's ``tl.grad``; in an LSTM's gradient a cost per step that grew with
the number of steps).  ``paused()`` counts the pauses running, in every thread, and resumes the collector
(if it was running before the first) when the last one returns, also after an error; a collector the user
turned off stays off.  Cycles that other code makes meanwhile are collected once it resumes.
"""
from __future__ import annotations

import gc
import threading

_lock = threading.Lock()
_pauses = [0, False]  # pauses running, and whether the collector ran before the first


class _Paused:
    """The context manager that ``paused()`` returns: it holds no state of its own (the count is the
    module's), so one object serves every block, nested or in any thread; a class rather than a
    ``contextlib`` generator, whose frame and wrapper cost more than the work (a gradient entry enters it
    on every call)."""

    __slots__ = ()

    def __enter__(self):
        with _lock:
            if _pauses[0] == 0:
                _pauses[1] = gc.isenabled()
                gc.disable()
            _pauses[0] += 1

    def __exit__(self, *exc):
        with _lock:
            _pauses[0] -= 1
            if _pauses[0] == 0 and _pauses[1]:
                gc.enable()
        return False


_PAUSED = _Paused()


def paused() -> _Paused:
    """The collector paused for the duration of the block (see the module docstring)."""
    return _PAUSED
