"""What long work is doing, through ``logging`` (the logger ``tensorlang``; docs/codegen.md, "Progress").

A public call that builds programs or kernels (``tl.grad``, ``tl.compile`` ...) is one ``call``; the steps
inside it (generating code, running the C compiler) are ``stage``s.  A stage is logged when it starts and
when it ends, with its time; both at ``INFO`` once the call has run ``SLOW`` seconds (so a call that takes
longer than that says what it is doing from then on), at ``DEBUG`` before.  The call's end is logged with
its time, at ``INFO`` where it took ``SLOW`` seconds or more.  ``logging.basicConfig(level=logging.INFO)``
shows them.
"""
from __future__ import annotations

import contextlib
import logging
import threading
import time

log = logging.getLogger("tensorlang")
SLOW = 2.0  # seconds a call runs before its stages are logged at INFO

_local = threading.local()  # the start of the outermost call running in this thread


def _level(elapsed: float) -> int:
    return logging.INFO if elapsed >= SLOW else logging.DEBUG


@contextlib.contextmanager
def call(name: str):
    """The public call ``name`` (``tl.grad``): its time is logged when it ends (the outermost one only)."""
    if getattr(_local, "start", None) is not None:
        yield
        return
    _local.start = time.perf_counter()
    try:
        yield
    finally:
        elapsed = time.perf_counter() - _local.start
        _local.start = None
        log.log(_level(elapsed), "%s: done in %.1f s", name, elapsed)


def running() -> float:
    """Seconds the current call has run (0 outside one)."""
    start = getattr(_local, "start", None)
    return 0.0 if start is None else time.perf_counter() - start


@contextlib.contextmanager
def stage(what: str):
    """A step of the current call, ``what`` (``building kernel ... with cc -O3 ...``), logged at its start and
    end."""
    log.log(_level(running()), "%s ...", what)
    start = time.perf_counter()
    try:
        yield
    finally:
        log.log(_level(running()), "%s: %.1f s", what, time.perf_counter() - start)
