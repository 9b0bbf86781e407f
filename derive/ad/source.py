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
    argnames = list(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
    first = code.co_firstlineno
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == code.co_name:
            lines = [node.lineno] + [d.lineno for d in node.decorator_list]
            if first in lines:
                break
        elif isinstance(node, ast.Lambda) and code.co_name == "<lambda>" and node.lineno == first:
            if [a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs] == argnames:
                break
    else:
        raise UnsupportedError(f"{filename}:{first}: cannot find the source of {fn.__qualname__}")
    _REGISTRY[id(code)] = (code, node, filename, text)
    return node, filename, text
