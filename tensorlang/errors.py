"""The error family of tensorlang (docs/language.md, "What is checked when a program is parsed").

Every error the library raises on bad input is a ``TensorLangError``.  Errors about source text carry
a ``SourceLocation`` and render as ``FILE:line:col: message`` followed by the offending line and a caret.
"""
from __future__ import annotations

import os
import sys
import types
from dataclasses import dataclass
from typing import Iterable

from .spelling import unknown_input


@dataclass(frozen=True)
class SourceLocation:
    """A position in program text: 1-based line and column, the text itself and an optional file name."""

    text: str
    line: int
    column: int
    filename: str = "<string>"

    @staticmethod
    def from_offset(text: str, offset: int, filename: str = "<string>") -> "SourceLocation":
        line = text.count("\n", 0, offset) + 1
        column = offset - (text.rfind("\n", 0, offset) + 1) + 1
        return SourceLocation(text, line, column, filename)

    def source_line(self) -> str:
        lines = self.text.splitlines() or [""]
        return lines[min(self.line, len(lines)) - 1]

    def render(self, message: str) -> str:
        """``FILE:line:col: message``, the source line, and a caret under the column."""
        line = self.source_line()
        caret = " " * (self.column - 1) + "^"
        return f"{self.filename}:{self.line}:{self.column}: {message}\n    {line}\n    {caret}"


class TensorLangError(Exception):
    """Base of every error raised for bad programs, bad inputs or failed compilation."""

    def __init__(self, message: str, location: SourceLocation | None = None):
        self.message = message
        self.location = location
        super().__init__(location.render(message) if location else message)

    def at(self, location: SourceLocation | None) -> "TensorLangError":
        """The same error, placed at ``location`` (kept if it already has one)."""
        if self.location is not None or location is None:
            return self
        err = type(self).__new__(type(self))
        TensorLangError.__init__(err, self.message, location)
        err.__dict__.update({k: v for k, v in self.__dict__.items() if k not in ("message", "location")})
        return err


class ParseError(TensorLangError):
    """Program text that does not follow the grammar of docs/language.md."""


class TypeCheckError(TensorLangError):
    """A scope, type or affinity error: names the variable or the place."""


class BoundsError(TensorLangError):
    """An access that may be out of range; the message shows a concrete offending point."""


class ShapeError(TensorLangError):
    """An input whose shape does not match its declaration: names the input and both shapes."""


class UnsupportedError(TensorLangError):
    """A construct the library cannot handle (yet): names the file, line and construct where known."""


class BeyondOrder(UnsupportedError):
    """A derivative of an order that ``tensorlang.ad``'s transform does not reach through the code at hand (a
    fourth derivative, a third through a call of another function): the entry point that was asked for it
    differentiates the function's recording instead (``derive/ad/tower.py``)."""


class CompileError(TensorLangError):
    """A generated kernel the compiler rejected: carries the generated source and the compiler's message."""


def check_keywords(given: Iterable[str], inputs: Iterable[str], sizes: Iterable[str], error=None) -> None:
    """Every keyword of a call (``tl.evaluate``, ``tl.cost``, ``tl.certify``, a kernel) names an input or a
    size of the program; otherwise ``error`` (a ``ShapeError``) names it and the closest name."""
    inputs, sizes = list(inputs), list(sizes)
    for name in given:
        if name not in inputs and name not in sizes:
            raise (error or ShapeError)(unknown_input(name, inputs, sizes))


_INTERNAL = ("tensorlang", "tensorlang.normalize", "tensorlang.derive", "tensorlang.codegen")


def named_cause(err: BaseException) -> TensorLangError | None:
    """The ``TensorLangError`` that ``err`` is, or that caused it: NumPy turns a refusal raised inside it (a
    stand-in or a batch of ``ad.vmap`` that refuses to become a float, in ``np.array([s, 1.3])`` or an item write
    into a NumPy array) into its own ``ValueError``, raised from that refusal."""
    seen = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, TensorLangError):
            return err
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return None


def internal_file(filename: str) -> bool:
    """Whether code compiled under ``filename`` is tensorlang's own (its packages, or text it generated
    under a ``<tensorlang...>`` name)."""
    internal = tuple(
        os.path.dirname(m.__file__) + os.sep for m in map(sys.modules.get, _INTERNAL) if m is not None
    )
    return filename.startswith(internal) or filename.startswith("<tensorlang")


def library_file(filename: str) -> bool:
    """Whether ``filename`` belongs to the Python installation (the standard library, site-packages) rather
    than to the user's code."""
    library = tuple({os.path.join(p, "") for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)})
    parts = filename.split(os.sep)
    return filename.startswith(library) or "site-packages" in parts or "dist-packages" in parts \
        or filename.startswith("<frozen ")


def user_call_site(frame: types.FrameType | None) -> tuple[str, int, str, str | None] | None:
    """``(file, line, function, callee)`` of the innermost frame at or above ``frame`` that runs the user's
    code (``tensorlang.ad`` compiles what it generates for a user's function at that function's file and
    lines, named after it), or None; ``callee`` is ``module.qualname`` of the library function that frame
    called, where the frames inside it run one (None where tensorlang's own frames follow it)."""
    inner = None
    while frame is not None:
        code = frame.f_code
        if not internal_file(code.co_filename):
            if not library_file(code.co_filename):
                callee = None
                if inner is not None:
                    name = getattr(inner.f_code, "co_qualname", inner.f_code.co_name)
                    callee = f"{inner.f_globals.get('__name__', '?')}.{name}"
                return code.co_filename, frame.f_lineno, code.co_name, callee
            inner = frame
        frame = frame.f_back
    return None


def user_traceback(tb: types.TracebackType | None) -> types.TracebackType | None:
    """``tb`` as the user needs it: the frames of the caller's code, and of the user's functions that
    tensorlang ran (``tensorlang.ad`` compiles the code it generates against the user's file and lines),
    without tensorlang's own frames or those of the libraries it called.  Raise an error at a public
    entry point with ``err.with_traceback(user_traceback(err.__traceback__))``."""
    kept = []
    inside = False  # below the first frame of tensorlang: only the user's own code is shown
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if internal_file(filename):
            inside = True
        elif not inside or not library_file(filename):
            kept.append(tb)
        tb = tb.tb_next
    out = None
    for t in reversed(kept):
        out = types.TracebackType(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return out
