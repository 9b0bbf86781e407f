"""Code generation: from any ``Expr`` to a compiled, parallel kernel callable from Python.

``lower`` (normalise, eta-expand, ``fuse``, canonical bodies, ``contract``) -> ``ir`` (the printable
statement form) -> ``domains`` (each statement's domain an isl set) -> ``loops`` (loop nests from isl's
AST generation) -> an emitter of ``target.TARGETS`` (``c``, built from ``scalar``, ``schedule``,
``sparse`` and the helpers' text ``c_runtime``; ``cuda``), run by ``generate`` -> ``build``
(content-addressed cache) -> ``kernel.Kernel`` (its runner checks inputs with ``runtime.Arguments``, runs,
returns NumPy results; on Dask inputs, the ``blocks`` plan as a ``dask_graph`` collection) and
``export`` (a module plus its library that needs only NumPy).  ``compile`` and ``export`` are the API.
"""
from .api import compile, export  # noqa: F401
from .kernel import Kernel  # noqa: F401

__all__ = ["compile", "export", "Kernel"]
