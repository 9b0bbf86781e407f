"""Code generation (issue 6): from any ``Expr`` to a compiled, parallel kernel callable from Python.

``lower`` (normalise, eta-expand, ``fuse``, canonical bodies) -> ``domains`` (each statement's domain an
isl set) -> ``loops`` (loop nests from isl's AST generation) -> ``c`` / ``cuda`` (emitters) -> ``build``
(content-addressed cache) -> ``kernel.Kernel`` (checks inputs, runs, returns NumPy results) and
``export`` (a module plus its library that needs only NumPy).  ``compile`` and ``export`` are the API.
"""
from .api import compile, export  # noqa: F401
from .kernel import Kernel  # noqa: F401

__all__ = ["compile", "export", "Kernel"]
