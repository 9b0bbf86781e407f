"""Programs that declare inputs they do not read.

A program is its declarations and one expression (docs/language.md, "A program").  The inputs the expression
reads are its free variables; an input that is declared but not read (``y : R; sum(i:n) x[i]``, or the
``x`` of a gradient that does not depend on x) is kept by a ``Declare`` node at the root of the program,
which lists the program's declarations in order, and the size variables of the program it was derived
from that it no longer mentions, which it still takes by name (these are not printed: the language has
no declaration of a size, so such a program prints and parses back to one that lacks them).
So ``expr.free_vars`` are the program's inputs, sizes are inferred from the shapes of all of them, and
``tl.evaluate`` and a compiled kernel accept exactly the same calls.

The passes work on the expression alone: ``keeps_declarations`` runs a pass on the body of a program
and declares the program's inputs again on the result, and ``declare`` is the one constructor, which
leaves out the inputs that its body reads (so a program that reads all of its inputs is its expression
itself, and nothing about it changes).
"""
from __future__ import annotations

import functools
from typing import Callable, Iterable

from .nodes import OPERATIONS, Declare, Expr, SizeVar, Var, type_size_vars
from .traversal import free_vars, size_vars


def body_of(expr: Expr) -> Expr:
    """The expression of a program, without the declarations of inputs it does not read."""
    return expr.body if isinstance(expr, Declare) else expr


def declare(body: Expr, inputs: Iterable[Var], sizes: Iterable[SizeVar] = ()) -> Expr:
    """``body`` as a program with the inputs ``inputs`` (declared in that order) and those it reads, and
    the size variables ``sizes`` as well as those it mentions: ``body`` itself where it reads every one
    of these inputs and mentions every one of these sizes."""
    if isinstance(body, Declare):
        inputs, sizes = [*inputs, *body.inputs], [*sizes, *body.declared_sizes]
        body = body.body
    declared: dict[str, Var] = {}
    for v in inputs:
        declared.setdefault(v.name, v)
    read = {v.name for v in free_vars(body)}
    unread = any(name not in read for name in declared)
    mentioned = set(size_vars(body)).union(*(type_size_vars(v.type) for v in declared.values()))
    extra = tuple(dict.fromkeys(s for s in sizes if s not in mentioned))
    if not unread and not extra:
        return body
    return Declare(tuple(declared.values()) if unread else (), extra, body)


def keeps_declarations(fn: Callable[..., Expr]) -> Callable[..., Expr]:
    """``fn`` (an ``Expr`` to ``Expr`` pass) run on a program's expression, its result declaring the
    program's inputs and sizes again."""

    @functools.wraps(fn)
    def run(expr, *args, **kwargs):
        if not isinstance(expr, Declare):
            return fn(expr, *args, **kwargs)
        return declare(fn(expr.body, *args, **kwargs), free_vars(expr), size_vars(expr))

    return run


OPERATIONS.install(declare=declare)
