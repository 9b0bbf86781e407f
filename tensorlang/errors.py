"""The error family of tensorlang (LANGUAGE.md section 1).

Every error the library raises on bad input is a ``TensorLangError``.  Errors about source text carry
a ``SourceLocation`` and render as ``FILE:line:col: message`` followed by the offending line and a caret.
"""
from __future__ import annotations

from dataclasses import dataclass


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
    """Program text that does not follow the grammar of LANGUAGE.md section 1."""


class TypeCheckError(TensorLangError):
    """A scope, type or affinity error: names the variable or the place."""


class BoundsError(TensorLangError):
    """An access that may be out of range; the message shows a concrete offending point."""


class ShapeError(TensorLangError):
    """An input whose shape does not match its declaration: names the input and both shapes."""


class UnsupportedError(TensorLangError):
    """A construct the library cannot handle (yet): names the file, line and construct where known."""


class CompileError(TensorLangError):
    """A generated kernel the compiler rejected: carries the generated source and the compiler's message."""
