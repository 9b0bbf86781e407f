"""The state of the differentiation that is running, and the one place that holds it.

A differentiation keeps, besides its arguments, a box store (the gradients of objects written to,
``runtime``), a tangent store (the tangents of objects written to under forward mode, ``tangent``), while
gradient code is differentiated again the ``Level`` of that nested derivative and the copies its outer
differentiation made (``nested_store``), and in a thread that runs the pullback of work sent to threads
the objects it shares with the others (``threads``).  One ``Context`` holds all of these; it is never
changed, only replaced by a context that differs in one field (``but``) for the duration of a call
(``within``).

The current context lives in one ``contextvars.ContextVar``, so each thread (and each asyncio task) has its
own: differentiations running at the same time in several threads never see one another's state.  Work that
a differentiated function sends to other threads (``ThreadPoolExecutor.map``/``submit``, ``threading.Thread``)
runs there in the context of the differentiation that sent it (``carried``), so its pullbacks share that
differentiation's box store.  A thread that reads the context before any differentiation set one gets an
empty one of its own.

``Provided`` is the other thing the layer's modules read that is not an argument: a function that a module
imported later provides once, at its import (the source transformation, which calls into the modules that
need it); it never changes while anything is differentiated.
"""
from __future__ import annotations

import contextvars

from ...errors import TensorLangError


class Store:
    """Boxes (objects written to) and their gradients, for one differentiation; under forward over reverse,
    its tangent store (``second.on_tangent_store``: the same boxes, the tangents of their gradients)."""

    __slots__ = ("boxes", "grads", "tangent", "rewound")

    def __init__(self, boxes=None):
        self.boxes: dict[int, object] = {} if boxes is None else boxes
        self.grads: dict[int, object] = {}
        self.tangent: Store | None = None
        # id(list or dict) -> its items as they were where the backward pass has reached (``runtime.rewound``)
        self.rewound: dict[int, list | dict] = {}


class Context:
    """The state of one differentiation: ``store``, the box store; ``tangents``, the tangent store (id(object)
    -> (object, tangent)); ``level``, the nested derivative whose gradient code is being differentiated (or
    None); ``copies``, id(copy) -> (copy, array) for the arrays that differentiation copied on capture (or
    None); ``shared``, the ids of the boxes whose gradients this thread's pullback leaves in the store."""

    __slots__ = ("store", "tangents", "level", "copies", "shared")

    def __init__(self, store: Store, tangents: dict, level=None, copies=None, shared=frozenset()):
        self.store, self.tangents, self.level, self.copies, self.shared = store, tangents, level, copies, shared

    def but(self, **fields) -> Context:
        """This context with ``fields`` replaced."""
        out = Context(self.store, self.tangents, self.level, self.copies, self.shared)
        for name, value in fields.items():
            setattr(out, name, value)
        return out


_CURRENT: contextvars.ContextVar[Context] = contextvars.ContextVar("tensorlang.ad context")
_get = _CURRENT.get


def current() -> Context:
    """The context of the differentiation running in this thread (an empty one, made now, if none is)."""
    try:
        return _get()
    except LookupError:
        context = Context(Store(), {})
        _CURRENT.set(context)
        return context


def within(context: Context, f, *args):
    """``f(*args)`` with ``context`` as the current context."""
    token = _CURRENT.set(context)
    try:
        return f(*args)
    finally:
        _CURRENT.reset(token)


def carried(f):
    """``f`` to be called in another thread: it runs there in the context current here and now."""
    context = current()

    def run(*args):
        return within(context, f, *args)
    return run


class Provided:
    """A function that a module imported later provides (``provide``, once, at its import), called as
    ``slot.fn(...)``; ``name`` says what it is, for the error when it is missing or provided twice."""

    __slots__ = ("name", "fn")

    def __init__(self, name: str):
        self.name = name
        self.fn = self._missing

    def _missing(self, *args):
        raise TensorLangError(f"tensorlang.ad: {self.name} is not provided (its module was not imported)")

    def provide(self, fn):
        if self.fn != self._missing:
            raise TensorLangError(f"tensorlang.ad: {self.name} is provided twice")
        self.fn = fn
        return fn
