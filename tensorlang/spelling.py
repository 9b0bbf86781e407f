"""Misspelt names: the closest of the names a program knows, and the messages that offer it.

The one place that guesses them, for the language (the parser, the checker, the function registry, the
calls' keyword checks in ``errors``) and for a compiled kernel's run-time checks (``codegen.runtime``),
so that every call says the same.  It imports the standard library alone: ``tl.export`` embeds it
verbatim, with ``codegen/runtime.py``, in a module that runs where only NumPy is installed.
"""
from __future__ import annotations

import difflib

__all__ = ["closest_name", "did_you_mean", "unknown_input"]


def closest_name(name, candidates):
    """The candidate a misspelt ``name`` most likely meant (``N`` for ``n``, ``jj`` for ``j``), or None."""
    candidates = list(candidates)
    same_case = [c for c in candidates if c.lower() == name.lower()]
    if same_case:
        return same_case[0]
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.5)
    return close[0] if close else None


def did_you_mean(name, candidates) -> str:
    """``"; did you mean 'x'?"`` for the closest candidate, or ``""``."""
    close = closest_name(name, candidates)
    return f"; did you mean {close!r}?" if close else ""


def unknown_input(name, inputs, sizes) -> str:
    """The message for a keyword ``name`` of a call that is neither one of ``inputs`` nor of ``sizes``."""
    inputs, sizes = list(inputs), list(sizes)
    known_sizes = f"; its sizes: {', '.join(sizes)}" if sizes else ""
    return (f"unknown input {name!r}: it is neither an input nor a size of this program (its inputs: "
            f"{', '.join(inputs) or 'none'}{known_sizes}){did_you_mean(name, inputs + sizes)}")
