"""Finding the syntax tree of a Python function wherever Python ran it, and saying where it was found
(``Source.origin``):

- ``"file"``, ``"linecache"``: the text of the function's file through ``linecache``, where Python and IPython
  keep it (a source file; a notebook cell or text registered with ``define``, kept without a file);
- ``"python -c"``: the command of ``python -c`` (``sys.orig_argv``);
- ``"REPL history"``: the lines typed at the interactive prompt, from ``readline``'s history;
- ``"tensorlang.ad"``: the registry of functions that the AD layer itself created (nested functions,
  generated gradients), whose source is not in any file.

Text found other than in the function's own file is used only when it compiles to a code object equal to
the function's (its bytecode, constants, names and positions), so a function is never differentiated from
another one's source; where no text is found the error says how to supply it.
"""
from __future__ import annotations

import __future__
import ast
import codeop
import functools
import hashlib
import linecache
import operator
import re
import sys
import types
from typing import NamedTuple

from ...errors import SourceLocation, UnsupportedError

_REGISTRY: dict[int, tuple[types.CodeType, ast.AST | str, str, str, str]] = {}   # by id: code compares by content
_MODULES: dict[tuple[str, int], ast.Module] = {}
_FUTURE = functools.reduce(operator.or_, (getattr(__future__, name).compiler_flag
                                          for name in __future__.all_feature_names))
_LONGER = 20   # lines a statement typed at the prompt may run on after the function in it ends


class NoSourceKept(UnsupportedError):
    """No text of a function was found because Python kept none (compiled from a string, read from standard
    input): the function is differentiated by its recording (``recorded``) instead."""


class Source(NamedTuple):
    """Where ``code_source`` found a function: ``origin`` (the module's docstring lists them), the file name
    its code was compiled under, the line where it starts there and its text."""
    origin: str
    filename: str
    line: int
    text: str


def register(code: types.CodeType, node: ast.AST | str, filename: str, text: str) -> None:
    """Remember that ``code`` was compiled from ``node`` (found in ``text`` of ``filename``); a name for
    ``node`` stands for the function definition of that name in ``text``, parsed (once per text) only when
    the code is transformed (most generated code never is: a process that differentiates many functions
    keeps their texts, not thousands of syntax trees each)."""
    _REGISTRY[id(code)] = (code, node, filename, text, "tensorlang.ad")


def same_source(code: types.CodeType, fn: types.FunctionType) -> None:
    """Remember that ``code`` has the source of function ``fn`` (the code of its flat twin, ``flat``); nothing where
    that source is not found (the twin is then recorded, or refused, as ``fn`` would be)."""
    try:
        found = _found(fn)
    except UnsupportedError:
        return
    _REGISTRY[id(code)] = (code, *found[1:])


def unsupported(what: str, filename: str, text: str, node: ast.AST | None) -> UnsupportedError:
    """The fence's error: ``FILE:line:col: <what> not supported by tensorlang.ad`` and a caret."""
    msg = f"{what} not supported by tensorlang.ad"
    if node is None or not hasattr(node, "lineno"):
        return UnsupportedError(f"{filename}: {msg}")
    loc = SourceLocation(text or "", node.lineno, node.col_offset + 1, filename)
    return UnsupportedError(msg, loc)


def generated(name: str, src: str, filename: str, env: dict):
    """Function ``name`` defined by the generated source ``src`` in namespace ``env``, its text kept in
    ``linecache`` under ``filename`` so that tensorlang.ad can read it (a rule's code is differentiated
    again at second order) and tracebacks show its lines."""
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    exec(compile(src, filename, "exec"), env)
    return env[name]


def define(text: str, namespace: dict | None = None) -> dict:
    """``exec(text, namespace)`` (a new namespace when none is given) with ``text`` kept in ``linecache``, so
    that tensorlang.ad reads the source of the functions it defines (and tracebacks show their lines), which
    a plain ``exec`` of a string does not keep; returns the namespace."""
    namespace = {} if namespace is None else namespace
    filename = f"<ad.define {hashlib.sha1(text.encode()).hexdigest()[:12]}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    exec(compile(text, filename, "exec", dont_inherit=True), namespace)
    return namespace


def function_node(fn: types.FunctionType) -> tuple[ast.AST, str, str]:
    """``(node, filename, text)``: the ``FunctionDef`` or ``Lambda`` node that ``fn`` was compiled from."""
    return _found(fn)[1:4]


def kept(fn: types.FunctionType) -> bool:
    """Whether tensorlang.ad finds a text of ``fn`` to transform, or should record it (``recorded``): False only
    for a function whose source Python kept nowhere."""
    try:
        _found(fn)
    except NoSourceKept:
        return False
    return True


def code_source(fn: types.FunctionType) -> Source:
    """Where tensorlang.ad reads the source of ``fn`` from (``Source``); for a function whose source Python kept
    nowhere, origin ``"recording"`` (``recorded``: its operations are recorded at each call) and no text;
    ``UnsupportedError`` for one whose file is missing."""
    try:
        _, node, filename, text, origin = _found(fn)
    except NoSourceKept:
        return Source("recording", fn.__code__.co_filename, fn.__code__.co_firstlineno, "")
    return Source(origin, filename, node.lineno, ast.get_source_segment(text, node) or "")


def _found(fn) -> tuple[types.CodeType, ast.AST, str, str, str]:
    code = fn.__code__
    known = _REGISTRY.get(id(code))
    if known is not None and known[0] is code and isinstance(known[1], str):
        node = _definition(_module(known[2], known[3]), known[1])
        if node is None:   # (a name not defined in the text: the code is found as any other is)
            del _REGISTRY[id(code)]
            known = None
        else:
            known = _REGISTRY[id(code)] = (code, node, *known[2:])
    if known is not None and known[0] is code:
        return known
    filename = code.co_filename
    lines = linecache.getlines(filename)
    if lines:
        text = "".join(lines)
        origin = "linecache" if linecache.cache[filename][1] is None else "file"
        node = _in_file(fn, _module(filename, text), filename)
    else:
        for origin, text, compiled in _texts(code):
            node = _verified(text, compiled, code)
            if node is not None:
                break
        else:
            raise _not_available(fn, filename)
    found = _REGISTRY[id(code)] = (code, node, filename, text, origin)
    return found


def _definition(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    """The definition of function ``name`` in ``tree`` (the last in ``ast.walk``'s order), or None."""
    found = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == name]
    return found[-1] if found else None


def _module(filename: str, text: str) -> ast.Module:
    key = (filename, hash(text))
    if key not in _MODULES:
        _MODULES[key] = ast.parse(text, filename)
    return _MODULES[key]


def _in_file(fn, tree: ast.Module, filename: str) -> ast.AST:
    """The node of ``fn`` in its file's ``tree``: where the code starts, compiled at the same positions."""
    code = fn.__code__
    first = code.co_firstlineno
    candidates = [node for node in ast.walk(tree) if _starts(node, code, first)]
    node = next((n for n in candidates if _compiles_to(n, code, filename)), None)
    if node is None:
        where = f"{filename}:{first}"
        if candidates:
            raise UnsupportedError(f"{where}: the source of {fn.__qualname__} has changed since it was compiled")
        raise UnsupportedError(f"{where}: cannot find the source of {fn.__qualname__}")
    return node


def _texts(code: types.CodeType):
    """``(origin, text, compiled)`` for each text kept outside ``linecache`` that may hold ``code``'s source,
    and that text compiled."""
    if code.co_filename == "<string>":
        command = _command()
        compiled = None if command is None else _compile(command, code)
        if compiled is not None:
            yield "python -c", command, compiled
    if code.co_filename == "<stdin>":
        yield from (("REPL history", text, compiled) for text, compiled in _typed(code))


def _compile(text: str, code: types.CodeType, flags: int = 0) -> types.CodeType | None:
    """``text`` compiled as ``code``'s was (its ``__future__`` features), or None where it is not Python
    (raises the ``SyntaxError`` "incomplete input" where it is the start of Python, under
    ``codeop.PyCF_ALLOW_INCOMPLETE_INPUT``)."""
    try:
        return compile(text, code.co_filename, "exec", flags=flags | code.co_flags & _FUTURE, dont_inherit=True)
    except SyntaxError as e:
        if e.msg == "incomplete input":
            raise
        return None
    except ValueError:   # a null byte
        return None


def _command() -> str | None:
    """The command of the ``python -c`` that this process runs, read from ``sys.orig_argv`` as Python reads
    its options (``-c`` ends them and takes the rest of its argument or the next one; ``-W``, ``-X`` and
    ``--check-hash-based-pycs`` take one), or None."""
    if getattr(sys, "argv", [])[:1] != ["-c"]:
        return None
    args = iter(getattr(sys, "orig_argv", [])[1:])
    for arg in args:
        if not arg.startswith("-"):
            return None
        if arg.startswith("--"):
            if arg == "--check-hash-based-pycs":
                next(args, None)
            continue
        for j, letter in enumerate(arg[1:], 2):
            if letter in "cWX":
                value = arg[j:] or next(args, None)
                if letter == "c":
                    return value
                break
    return None


def _typed(code: types.CodeType):
    """``(text, compiled)`` for the statements typed at the interactive prompt that may hold ``code``, newest
    first: runs of lines of ``readline``'s history whose line where ``code`` starts (the prompt numbers each
    statement from 1) defines it, a decorator or a lambda, from there to ``code``'s last line and on (up to
    ``_LONGER`` lines) until they make a whole statement."""
    readline = sys.modules.get("readline")
    if readline is None:
        return
    history = [readline.get_history_item(i) or "" for i in range(1, readline.get_current_history_length() + 1)]
    first = code.co_firstlineno
    last = max([p[1] for p in code.co_positions() if p[1] is not None] + [first])
    starts = re.compile(r"\blambda\b" if code.co_name == "<lambda>" else rf"^\s*@|\bdef\s+{code.co_name}\b")
    for start in range(len(history) - last, -1, -1):
        if starts.search(history[start + first - 1]):
            for end in range(start + last, min(len(history), start + last + _LONGER) + 1):
                text = "".join(typed + "\n" for typed in history[start:end])
                try:
                    compiled = _compile(text, code, codeop.PyCF_ALLOW_INCOMPLETE_INPUT)
                except SyntaxError:
                    continue
                if compiled is not None:
                    yield text, compiled
                break


def _verified(text: str, compiled: types.CodeType, code: types.CodeType) -> ast.AST | None:
    """The node of ``code`` in ``text`` when ``text`` compiled to a code object equal to ``code``, else None."""
    if not _holds(compiled, code):
        return None
    candidates = [node for node in ast.walk(ast.parse(text)) if _starts(node, code, code.co_firstlineno)]
    return next((n for n in candidates if _compiles_to(n, code, code.co_filename)), None)


def _holds(outer: types.CodeType, code: types.CodeType) -> bool:
    return outer == code or any(_holds(c, code) for c in outer.co_consts if isinstance(c, types.CodeType))


def _not_available(fn, filename: str) -> UnsupportedError:
    """The error for a function whose source was found nowhere: why Python kept none, and how to supply it."""
    head = f"{filename}: the source of {fn.__qualname__} is not available to tensorlang.ad"
    define = "define it with ad.define(text, namespace)"
    if filename == "<stdin>":
        return NoSourceKept(f"{head}: it was read from standard input (a pipe, or a prompt without readline) and "
                            f"is not in readline's history; run it from a file, or {define}")
    if not filename.startswith("<"):
        err = UnsupportedError(f"{head}: its file is missing (a module installed without its source, or one "
                               f"deleted since it was imported)")
        err.no_source = True  # (runtime.outside_refused says to register a rule, and where it was called)
        return err
    why = ("it was compiled from a string (exec, eval or compile), whose text Python does not keep"
           if filename == "<string>" else "it was compiled from text that is not in linecache")
    return NoSourceKept(f"{head}: {why}; {define} in place of exec(text, namespace), or compile it with "
                        f"compile(text, name, 'exec') after linecache.cache[name] = (len(text), None, "
                        f"text.splitlines(True), name)")


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
