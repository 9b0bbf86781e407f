"""The paper's programs as ``.tl`` files, shipped with the package as ``tensorlang.examples``.

``names()`` lists them, ``path(name)`` and ``source(name)`` find and read one (``"conv"`` or
``"conv.tl"``), ``describe(name)`` is the first sentence of its comment.  ``tl-cost --example conv`` and
``python -m tensorlang.examples`` (every program: printed, costed, differentiated, certified, compiled)
use them, so they work from an installed package as well as from the repository.
"""
from __future__ import annotations

import difflib
import re
from pathlib import Path

from tensorlang.errors import TensorLangError

__all__ = ["names", "path", "source", "describe", "reference"]

HERE = Path(__file__).resolve().parent


def names() -> list[str]:
    """The examples' names, sorted: ``conv``, ``deconv_loss``, ..."""
    return sorted(p.stem for p in HERE.glob("*.tl"))


def path(name: str) -> Path:
    """The file of the example ``name``; an unknown name is an error listing the closest and all names."""
    stem = name[:-3] if name.endswith(".tl") else name
    if stem not in names():
        close = difflib.get_close_matches(stem, names(), n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise TensorLangError(f"there is no example {name!r}{hint} (examples: {', '.join(names())})")
    return HERE / f"{stem}.tl"


def source(name: str) -> str:
    return path(name).read_text(encoding="utf-8")


def describe(name: str) -> str:
    """The first sentence of the example's leading comment, on one line, without the ``#``s."""
    lines = []
    for line in source(name).splitlines():
        if not line.startswith("#"):
            if lines:
                break
            continue
        lines.append(line.lstrip("#").strip())
    text = " ".join(lines)
    return re.split(r"(?<=\.)\s+(?=[A-Z(`])", text, maxsplit=1)[0]


def reference() -> Path:
    """The language reference (docs/language.md), shipped as ``tensorlang/docs/language.md``."""
    return HERE.parent / "docs" / "language.md"  # the package's docs/ installed, the repository's in a clone
