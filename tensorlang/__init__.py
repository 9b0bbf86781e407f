"""tensorlang: a differentiable tensor language with provable derivative costs.

``import tensorlang as tl``; the calls of the public API (``tl.parse``, ``tl.evaluate``,
``tl.cost``, ...) are defined in ``tensorlang.api`` and re-exported here.
``tl.__version__`` is the installed distribution's version (pyproject.toml is its one source).
``dir(tl)`` lists the public names only; ``tl.ad`` and ``tl.examples`` are imported on first use.
"""
from importlib.metadata import PackageNotFoundError, version as _version

# the modules that install what the nodes' methods do (printing, equality, evaluation, ...): imported
# first, so that every expression built from here on prints, compares and evaluates
from . import alpha, declarations, evaluate, functions, latex, printer, substitute, traversal  # noqa: F401
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
# the public subpackages, imported on first use: ``tl.ad.grad``, ``tl.examples.source("conv")``
_SUBPACKAGES = ("ad", "examples")


def __getattr__(name: str):
    if name in _SUBPACKAGES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names (``dir(tl)``, completion): the API, the subpackages and ``__version__``; the
    modules of the implementation stay importable by name but are not listed."""
    return sorted([*__all__, *_SUBPACKAGES, "__version__"])
