"""Finding the syntax tree of a Python function: from its file through ``linecache`` (so functions defined
in ``exec``'d text work once their text is in ``linecache``), or from the registry of functions that the
AD layer itself created (nested functions, generated gradients), whose source is not in any file.
"""
from __future__ import annotations

import ast
import linecache
import types

from ...errors import SourceLocation, UnsupportedError

_REGISTRY: dict[int, tuple[types.CodeType, ast.AST, str, str]] = {}   # by id: code compares by content
_MODULES: dict[tuple[str, int], ast.Module] = {}


def register(code: types.CodeType, node: ast.AST, filename: str, text: str) -> None:
    """Remember that ``code`` was compiled from ``node`` (found in ``text`` of ``filename``)."""
    _REGISTRY[id(code)] = (code, node, filename, text)


def unsupported(what: str, filename: str, text: str, node: ast.AST | None) -> UnsupportedError:
    """The fence's error: ``FILE:line:col: <what> not supported by tensorlang.ad`` and a caret."""
    msg = f"{what} not supported by tensorlang.ad"
    if node is None or not hasattr(node, "lineno"):
        return UnsupportedError(f"{filename}: {msg}")
    loc = SourceLocation(text or "", node.lineno, node.col_offset + 1, filename)
    return UnsupportedError(msg, loc)


def _module(filename: str) -> tuple[ast.Module, str] | None:
    lines = linecache.getlines(filename)
    if not lines:
        return None
    text = "".join(lines)
    key = (filename, hash(text))
    if key not in _MODULES:
        _MODULES[key] = ast.parse(text, filename)
    return _MODULES[key], text


def function_node(fn: types.FunctionType) -> tuple[ast.AST, str, str]:
    """``(node, filename, text)``: the ``FunctionDef`` or ``Lambda`` node that ``fn`` was compiled from."""
    code = fn.__code__
    known = _REGISTRY.get(id(code))
    if known is not None and known[0] is code:
        return known[1:]
    filename = code.co_filename
    found = _module(filename)
    if found is None:
        raise UnsupportedError(f"{filename}: the source of {fn.__qualname__} is not available to tensorlang.ad")
    tree, text = found
    first = code.co_firstlineno
    candidates = [node for node in ast.walk(tree) if _starts(node, code, first)]
    node = next((n for n in candidates if _compiles_to(n, code, filename)), None)
    if node is None:
        where = f"{filename}:{first}"
        if candidates:
            raise UnsupportedError(f"{where}: the source of {fn.__qualname__} has changed since it was compiled")
        raise UnsupportedError(f"{where}: cannot find the source of {fn.__qualname__}")
    _REGISTRY[id(code)] = (code, node, filename, text)
    return node, filename, text


def _starts(node, code, first) -> bool:
    """Whether ``node`` is a function definition or lambda named like ``code`` starting on line ``first``."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == code.co_name:
        return first in [node.lineno] + [d.lineno for d in node.decorator_list]
    return isinstance(node, ast.Lambda) and code.co_name == "<lambda>" and node.lineno == first


def _positions(code) -> set:
    return {p for p in code.co_positions() if p[0] is not None and p[2] is not None}


def _compiles_to(node, code, filename) -> bool:
    """Whether ``node`` compiles to code at the same source positions as ``code``: tells apart two lambdas
    on one line, and a function from the text of its file edited after it was compiled."""
    tree = ast.Expression(node) if isinstance(node, ast.Lambda) else ast.Module([node], [])
    try:
        outer = compile(tree, filename, "eval" if isinstance(node, ast.Lambda) else "exec", dont_inherit=True)
    except SyntaxError:   # e.g. 'nonlocal' out of its scope: the fence reports what is unsupported
        return True
    mine = next((c for c in outer.co_consts if hasattr(c, "co_code") and c.co_name == code.co_name), None)
    return mine is not None and _positions(mine) == _positions(code) and mine.co_varnames == code.co_varnames
