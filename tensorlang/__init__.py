"""tensorlang: a differentiable tensor language with provable derivative costs.

The public API of LANGUAGE.md section 2 lives in ``tensorlang.api`` and is re-exported here.
"""
from .errors import (
    BoundsError, CompileError, ParseError, ShapeError, SourceLocation, TensorLangError, TypeCheckError,
    UnsupportedError,
)
from .functions import define_function
from .nodes import Expr, IndexVar, R, SizeVar, Var

__all__ = [
    "BoundsError", "CompileError", "ParseError", "ShapeError", "SourceLocation", "TensorLangError",
    "TypeCheckError", "UnsupportedError", "define_function", "Expr", "IndexVar", "R", "SizeVar", "Var",
]
