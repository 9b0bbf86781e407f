"""tensorlang: a differentiable tensor language with provable derivative costs.

``import tensorlang as tl``; the calls of the public API (``tl.parse``, ``tl.evaluate``,
``tl.cost``, ...) are defined in ``tensorlang.api`` and re-exported here.
``tl.__version__`` is the installed distribution's version (pyproject.toml is its one source).
"""
from importlib.metadata import PackageNotFoundError, version as _version

from .api import *  # noqa: F401,F403
from .api import __all__ as _api_all
from .errors import (
    BoundsError, CompileError, ParseError, ShapeError, SourceLocation, TensorLangError, TypeCheckError,
    UnsupportedError,
)
from .functions import define_function
from .nodes import Expr, IndexVar, R, SizeVar, Var

try:
    __version__ = _version("tensorlang")
except PackageNotFoundError:  # imported from a clone that was never installed
    __version__ = "0+unknown"

__all__ = [
    *_api_all, "BoundsError", "CompileError", "ParseError", "ShapeError", "SourceLocation",
    "TensorLangError", "TypeCheckError", "UnsupportedError", "define_function", "Expr", "IndexVar", "R",
    "SizeVar", "Var",
]
