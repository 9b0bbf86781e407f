"""tensorlang: a differentiable tensor language with provable derivative costs.

``import tensorlang as tl``; the calls of LANGUAGE.md section 2 (``tl.parse``, ``tl.evaluate``,
``tl.cost``, ...) are defined in ``tensorlang.api`` and re-exported here.
"""
from .api import *  # noqa: F401,F403
from .api import __all__ as _api_all
from .errors import (
    BoundsError, CompileError, ParseError, ShapeError, SourceLocation, TensorLangError, TypeCheckError,
    UnsupportedError,
)
from .functions import define_function
from .nodes import Expr, IndexVar, R, SizeVar, Var

__all__ = [
    *_api_all, "BoundsError", "CompileError", "ParseError", "ShapeError", "SourceLocation",
    "TensorLangError", "TypeCheckError", "UnsupportedError", "define_function", "Expr", "IndexVar", "R",
    "SizeVar", "Var",
]
