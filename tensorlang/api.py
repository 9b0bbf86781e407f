"""The public API of LANGUAGE.md section 2: the one module that joins the language core and the passes."""
from __future__ import annotations

from .checker import check
from .cost import cost
from .evaluate import evaluate


def parse(src: str, filename: str = "<string>", **decls):
    """``tl.parse(src, **decls)``: the program in ``src`` as a checked ``Expr``."""
    from .parser import parse as _parse

    return _parse(src, filename=filename, **decls)


__all__ = ["check", "cost", "evaluate", "parse"]
