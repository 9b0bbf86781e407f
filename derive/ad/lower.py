"""Python syntax tree to a control-flow graph in SSA form, and the language fence.

Statements become basic blocks; ``if``/``while``/``for``/``break``/``continue``/early ``return``, ``and``,
``or``, chained comparisons and conditional expressions become branches; variables are renamed into SSA
values as the blocks are built (``ssa.SSABuilder``).  ``for`` loops run a counter over ``range`` or over
the indices of a sequence; comprehensions become loops that append to a fresh list.  Nested functions
and lambdas become ``closure`` instructions that build the real function from a small factory and the
captured values.  A call with star-arguments becomes a call of ``called_with`` (its positional arguments one
tuple, its keywords dicts), and a function with ``*args``, ``**kwargs`` or keyword-only parameters takes them
as its flat twin does (``flat``).  Every construct outside this subset raises ``UnsupportedError`` with file,
line and construct before anything runs.
"""
from __future__ import annotations

import ast
import builtins
import inspect
import types

import numpy as np

from ...dispatch import method_for
from ...errors import UnsupportedError
from .ir import Function, Instr
from .source import function_node, unsupported
from .ssa import SSABuilder

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
           ast.Pow: "**", ast.MatMult: "@", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^",
           ast.LShift: "<<", ast.RShift: ">>"}
_UNARY = {ast.USub: "-", ast.UAdd: "+", ast.Not: "not", ast.Invert: "~"}
_CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
           ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in"}
_REFUSED = {
    ast.Try: "'try' statements are", ast.With: "'with' statements are", ast.AsyncWith: "'async' code is",
    ast.AsyncFor: "'async' code is", ast.AsyncFunctionDef: "'async' functions are", ast.Await: "'await' is",
    ast.Yield: "generators ('yield') are", ast.YieldFrom: "generators ('yield from') are",
    ast.Global: "'global' statements are", ast.Nonlocal: "'nonlocal' statements are",
    ast.Delete: "'del' statements are", ast.ClassDef: "class definitions inside functions are",
    ast.Import: "'import' inside functions is", ast.ImportFrom: "'import' inside functions is",
    ast.Match: "'match' statements are", ast.SetComp: "set comprehensions are", ast.Set: "set literals are",
}
try:
    _REFUSED[ast.TryStar] = "'try' statements are"
except AttributeError:  # Python < 3.11
    pass


def lower(node, filename: str, text: str, freevars: tuple[str, ...], fglobals: dict) -> Function:
    """The SSA function of a ``FunctionDef`` or ``Lambda`` node."""
    return _Lowerer(node, filename, text, freevars, fglobals).run()


def lowered(f) -> tuple[Function, ast.AST, str, str]:
    """``(fn, node, filename, text)``: the SSA function of Python function ``f``, lowered from its source
    (``node``, read from ``text`` in ``filename``)."""
    node, filename, text = function_node(f)
    code = f.__code__
    if code.co_kwonlyargcount or code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS):
        # (a function that gathers arguments is lowered as its flat twin, ``flat``: the user's are called so)
        raise unsupported("'*args', '**kwargs' and keyword-only parameters of a function called other than as "
                          "the user's are", filename, text, node)
    return lower(node, filename, text, code.co_freevars, f.__globals__), node, filename, text


def _refuse(node, filename, text):
    for sub in ast.walk(node):
        what = _REFUSED.get(type(sub))
        if what is not None:
            raise unsupported(what, filename, text, sub)


def _arg_names(args: ast.arguments) -> list[str]:
    """A function's parameters in the order its flat twin takes them (``flat``): the positional ones, the
    keyword-only ones, the ``*args`` tuple, the ``**kwargs`` dict."""
    gathered = [a for a in (args.vararg, args.kwarg) if a is not None]
    return [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs + gathered]


def _bound_names(body: list[ast.stmt]) -> set[str]:
    """Names assigned in a function body (not inside nested functions or comprehensions)."""
    return set(_store_lines(body))


def _store_lines(body: list[ast.stmt]) -> dict[str, list[int]]:
    """The lines where each name is assigned (not inside nested functions or comprehensions)."""
    lines: dict[str, list[int]] = {}

    def visit(n):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            lines.setdefault(n.id, []).append(n.lineno)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            lines.setdefault(n.name, []).append(n.lineno)
            return
        elif isinstance(n, (ast.ListComp, ast.DictComp, ast.GeneratorExp, ast.SetComp)):
            for sub in _own_scope(n):   # (an assignment expression in a comprehension binds in the function)
                if isinstance(sub, ast.NamedExpr):
                    lines.setdefault(sub.target.id, []).append(sub.lineno)
            return
        elif isinstance(n, ast.Lambda):
            return
        for c in ast.iter_child_nodes(n):
            visit(c)

    for s in body:
        visit(s)
    return lines


def _own_scope(node):
    """The nodes under ``node`` outside nested functions and lambdas."""
    for c in ast.iter_child_nodes(node):
        if not isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            yield c
            yield from _own_scope(c)


def _loaded_names(node) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _displays_alike(target, value) -> bool:
    """Whether ``target = value`` assigns a tuple or list display to as many names or items (``a, b = x, y``),
    neither starred: Python evaluates the values, then assigns each in turn, as separate assignments do."""
    return isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
        and len(target.elts) == len(value.elts) \
        and not any(isinstance(e, ast.Starred) for e in (*target.elts, *value.elts))


class _Loop:
    def __init__(self, brk, cont):
        self.brk, self.cont = brk, cont


class _Lowerer:
    def __init__(self, node, filename, text, freevars, fglobals):
        self.node, self.filename, self.text = node, filename, text
        self.freevars, self.fglobals = freevars, fglobals
        _refuse(node, filename, text)
        name = getattr(node, "name", "<lambda>")
        self.params = _arg_names(node.args)
        self.fn = Function(name, self.params, filename, tuple(freevars))
        self.ssa = SSABuilder(self.fn)
        body = node.body if isinstance(node, ast.FunctionDef) else [ast.Return(node.body, lineno=node.lineno,
                                                                               col_offset=node.col_offset)]
        self.body = body
        self.locals = _bound_names(body) | set(self.params)
        self.stores = _store_lines(body)
        self.loop_stores: list[set[str]] = []
        self.loops: list[_Loop] = []
        self.renames: list[dict[str, str]] = []
        self.line = node.lineno
        self.tmp = 0

    def fail(self, what, node):
        return unsupported(what, self.filename, self.text, node)

    # -- building blocks ----------------------------------------------------------------------------------
    def emit(self, op, args=(), attr=None):
        ins = Instr(self.ssa.new_id(), op, args, attr, self.line)
        self.block.instrs.append(ins)
        return ins

    def const(self, value):
        return self.emit("const", attr=value)

    def jump(self, target):
        if self.block is not None:
            self.block.term = ("jump", target)
            target.preds.append(self.block)
        self.block = None

    def branch(self, cond, then_b, else_b):
        self.block.term = ("branch", cond, then_b, else_b)
        then_b.preds.append(self.block)
        else_b.preds.append(self.block)
        self.block = None

    def start(self, block):
        self.ssa.seal(block)
        self.block = block if block.preds else None

    def write(self, var, value):
        self.ssa.write(var, self.block, value)

    def read(self, var):
        return self.ssa.read(var, self.block)

    def fresh(self, prefix):
        self.tmp += 1
        return f"${prefix}{self.tmp}"

    # -- the function -------------------------------------------------------------------------------------
    def run(self) -> Function:
        entry = self.ssa.new_block()
        self.ssa.seal(entry)
        self.block = entry
        for i, p in enumerate(self.params):
            self.write(p, self.emit("param", attr=(i, p)))
        exit_b = self.ssa.new_block()
        self.fn.exit = exit_b
        self.exit = exit_b
        self.stmts(self.body)
        if self.block is not None:
            self.write("$ret", self.const(None))
            self.jump(exit_b)
        self.ssa.seal(exit_b)
        self.block = exit_b
        self.line = self.node.lineno
        exit_b.term = ("return", self.read("$ret"))
        self.fn.blocks.remove(exit_b)
        self.fn.blocks.append(exit_b)
        self.ssa.finish()
        return self.fn

    # -- statements ---------------------------------------------------------------------------------------
    def stmts(self, body):
        for s in body:
            if self.block is None:
                return  # unreachable code after return/break/continue/raise
            self.line = s.lineno
            self.stmt(s)

    def stmt(self, s):
        m = method_for(type(self), "s_", type(s))
        if m is None:
            raise self.fail(f"'{type(s).__name__}' statements are", s)
        m(self, s)

    def s_Pass(self, s):
        pass

    def s_Expr(self, s):
        if isinstance(s.value, ast.Constant):
            return  # docstring
        self.expr(s.value)

    def s_Assign(self, s):
        (t, *more), value = s.targets, s.value
        if not more and _displays_alike(t, value):   # (a, b = x, y: the values, then the names, with no tuple)
            for target, v in zip(t.elts, [self.expr(e) for e in value.elts]):
                self.assign(target, v)
            return
        v = self.expr(value)
        for t in s.targets:
            self.assign(t, v)

    def s_AnnAssign(self, s):
        if s.value is not None:
            self.assign(s.target, self.expr(s.value))

    def s_AugAssign(self, s):
        op = _BINOPS[type(s.op)]
        t = s.target
        if isinstance(t, ast.Name):
            cur = self.load_name(t.id, t)
            self.assign(t, self.emit("binop", [cur, self.expr(s.value)], op + "="))
        elif isinstance(t, ast.Subscript):
            obj, idx = self.expr(t.value), self.index(t.slice)
            cur = self.emit("getitem", [obj, idx])
            self.emit("setitem", [obj, idx, self.emit("binop", [cur, self.expr(s.value)], op)])
        elif isinstance(t, ast.Attribute):
            obj = self.expr(t.value)
            cur = self.emit("getattr", [obj], t.attr)
            self.emit("setattr", [obj, self.emit("binop", [cur, self.expr(s.value)], op)], t.attr)
        else:
            raise self.fail("this augmented assignment target is", t)

    def assign(self, target, v):
        if isinstance(target, ast.Name):
            self.write(self.var(target.id), v)
        elif isinstance(target, (ast.Tuple, ast.List)):
            starred = [i for i, elt in enumerate(target.elts) if isinstance(elt, ast.Starred)]
            after = len(target.elts) - 1 - starred[0] if starred else 0   # (the targets after ``*rest``)
            for i, elt in enumerate(target.elts):
                if isinstance(elt, ast.Starred):   # ``a, *rest, b = v``: rest is a list of the items between
                    middle = self.emit("getitem", [v, self.const(slice(i, -after if after else None))])
                    self.assign(elt.value, self.emit("call", [self.const(list), middle], ()))
                else:
                    where = i - len(target.elts) if starred and i > starred[0] else i
                    self.assign(elt, self.emit("getitem", [v, self.const(where)]))
        elif isinstance(target, ast.Subscript):
            self.emit("setitem", [self.expr(target.value), self.index(target.slice), v])
        elif isinstance(target, ast.Attribute):
            self.emit("setattr", [self.expr(target.value), v], target.attr)
        else:
            raise self.fail("this assignment target is", target)

    def var(self, name):
        for scope in reversed(self.renames):
            if name in scope:
                return scope[name]
        return name

    def s_Return(self, s):
        self.write("$ret", self.expr(s.value) if s.value is not None else self.const(None))
        self.jump(self.exit)

    def s_Raise(self, s):
        if s.exc is None:
            raise self.fail("bare 'raise' is", s)
        exc = self.expr(s.exc)
        self.block.term = ("raise", exc)
        self.block = None

    def s_Assert(self, s):
        cond = self.expr(s.test)
        ok, bad = self.ssa.new_block(), self.ssa.new_block()
        self.branch(cond, ok, bad)
        self.start(bad)
        msg = [self.expr(s.msg)] if s.msg is not None else []
        self.block.term = ("raise", self.emit("call", [self.const(AssertionError)] + msg, ()))
        self.block = None
        self.start(ok)

    def s_If(self, s):
        cond = self.expr(s.test)
        then_b, join = self.ssa.new_block(), self.ssa.new_block()
        else_b = self.ssa.new_block() if s.orelse else join
        self.branch(cond, then_b, else_b)
        self.start(then_b)
        self.stmts(s.body)
        self.jump(join)
        if s.orelse:
            self.start(else_b)
            self.stmts(s.orelse)
            self.jump(join)
        self.start(join)

    def s_While(self, s):
        header = self.ssa.new_block()
        self.jump(header)
        self.block = header
        cond = self.expr(s.test)
        self.loop(cond, header, header, s.body, s.orelse)

    def loop(self, cond, header, latch, body, orelse, before_body=None, step=None, target=None):
        """Branch on ``cond`` into ``body`` (``continue`` goes to ``latch``) or out through ``orelse``;
        ``target`` is the ``for`` target that each iteration binds afresh."""
        body_b, exit_b = self.ssa.new_block(), self.ssa.new_block()
        else_b = self.ssa.new_block() if orelse else exit_b
        self.branch(cond, body_b, else_b)
        self.start(body_b)
        self.loop_stores.append(_bound_names(body) | (_loaded_names(target) if target is not None else set()))
        if before_body is not None:
            before_body()
        self.loops.append(_Loop(exit_b, latch))
        self.stmts(body)
        self.loop_stores.pop()
        self.loops.pop()
        self.jump(latch)
        if latch is not header:
            self.start(latch)
            if self.block is not None:
                step()
            self.jump(header)
        self.ssa.seal(header)
        if orelse:
            self.start(else_b)
            self.stmts(orelse)
            self.jump(exit_b)
        self.start(exit_b)

    def s_For(self, s):
        it = s.iter
        counter = self.fresh("k")
        if (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
                and it.func.id not in self.locals and it.func.id not in self.fglobals
                and not it.keywords and 1 <= len(it.args) <= 2):
            args = [self.expr(a) for a in it.args]
            start, stop = (self.const(0), args[0]) if len(args) == 1 else args
            self.write(counter, start)
            item = None
        else:
            seq = self.emit("call", [self.const(as_sequence), self.expr(it)], ())
            stop = self.emit("call", [self.const(len), seq], ())
            self.write(counter, self.const(0))
            item = seq
        header, latch = self.ssa.new_block(), self.ssa.new_block()
        self.jump(header)
        self.block = header
        k = self.read(counter)
        cond = self.emit("compare", [k, stop], "<")

        def bind():
            k = self.read(counter)
            self.assign(s.target, k if item is None else self.emit("getitem", [item, k]))

        self.loop(cond, header, latch, s.body, s.orelse, bind, self.stepper(counter), s.target)

    def s_Break(self, s):
        if not self.loops:
            raise self.fail("'break' outside a loop is", s)
        self.jump(self.loops[-1].brk)

    def s_Continue(self, s):
        if not self.loops:
            raise self.fail("'continue' outside a loop is", s)
        self.jump(self.loops[-1].cont)

    def s_FunctionDef(self, s):
        if s.decorator_list:
            raise self.fail("decorated nested functions are", s)
        self.write(s.name, self.closure(s, s.name))

    # -- expressions --------------------------------------------------------------------------------------
    def expr(self, e):
        m = method_for(type(self), "e_", type(e))
        if m is None:
            raise self.fail(f"'{type(e).__name__}' expressions are", e)
        return m(self, e)

    def e_Constant(self, e):
        return self.const(e.value)

    def e_Name(self, e):
        return self.load_name(e.id, e)

    def load_name(self, name, node):
        var = self.var(name)
        if var != name or name in self.locals:
            return self.read(var)
        if name in self.freevars:
            return self.emit("deref", attr=name)
        return self.global_value(name, node)

    def global_value(self, name, node):
        """Modules, builtins and C functions are bound when the function is transformed; Python functions
        and classes are looked up when it runs (so that recursion and redefinition work)."""
        if name in self.fglobals:
            obj = self.fglobals[name]
            if isinstance(obj, (types.ModuleType, types.BuiltinFunctionType)) or _is_ufunc(obj):
                return self.const(obj)
            return self.emit("global", attr=name)
        if hasattr(builtins, name):
            return self.const(getattr(builtins, name))
        raise self.fail(f"the undefined name {name!r} is", node)

    def e_BinOp(self, e):
        return self.emit("binop", [self.expr(e.left), self.expr(e.right)], _BINOPS[type(e.op)])

    def e_UnaryOp(self, e):
        return self.emit("unary", [self.expr(e.operand)], _UNARY[type(e.op)])

    def e_Compare(self, e):
        if len(e.ops) == 1:
            return self.emit("compare", [self.expr(e.left), self.expr(e.comparators[0])], _CMPOPS[type(e.ops[0])])
        var, join = self.fresh("cmp"), self.ssa.new_block()
        left = self.expr(e.left)
        for i, (op, right) in enumerate(zip(e.ops, e.comparators)):
            right = self.expr(right)
            r = self.emit("compare", [left, right], _CMPOPS[type(op)])
            self.write(var, r)
            if i == len(e.ops) - 1:
                self.jump(join)
            else:
                nxt = self.ssa.new_block()
                self.branch(r, nxt, join)
                self.start(nxt)
            left = right
        self.start(join)
        return self.read(var)

    def e_BoolOp(self, e):
        var, join = self.fresh("bool"), self.ssa.new_block()
        for i, operand in enumerate(e.values):
            v = self.expr(operand)
            self.write(var, v)
            if i == len(e.values) - 1:
                self.jump(join)
            else:
                nxt = self.ssa.new_block()
                if isinstance(e.op, ast.And):
                    self.branch(v, nxt, join)
                else:
                    self.branch(v, join, nxt)
                self.start(nxt)
        self.start(join)
        return self.read(var)

    def e_IfExp(self, e):
        var = self.fresh("if")
        cond = self.expr(e.test)
        then_b, else_b, join = self.ssa.new_block(), self.ssa.new_block(), self.ssa.new_block()
        self.branch(cond, then_b, else_b)
        for blk, sub in ((then_b, e.body), (else_b, e.orelse)):
            self.start(blk)
            self.write(var, self.expr(sub))
            self.jump(join)
        self.start(join)
        return self.read(var)

    def e_JoinedStr(self, e):
        """An f-string: its text, made by ``formatted`` (no derivative) from the values it shows."""
        pieces, values = [], []
        for part in e.values:
            if isinstance(part, ast.Constant):
                pieces.append(part.value)
                continue
            pieces.append((part.conversion, part.format_spec is not None))
            values.append(self.expr(part.value))
            if part.format_spec is not None:
                values.append(self.expr(part.format_spec))
        return self.emit("call", [self.const(formatted), self.const(tuple(pieces)), *values], ())

    def e_NamedExpr(self, e):
        v = self.expr(e.value)
        self.assign(e.target, v)
        return v

    def e_Call(self, e):
        if any(isinstance(a, ast.Starred) for a in e.args) or any(kw.arg is None for kw in e.keywords):
            return self.star_call(e)
        kwnames = [kw.arg for kw in e.keywords]
        func = e.func
        if isinstance(func, ast.Attribute) and _is_super(func.value) and not self.is_local("super") \
                and "super" not in self.fglobals:
            return self.super_call(func, e, kwnames)
        if isinstance(func, ast.Attribute):
            target = self.static_attr(func)
            if target is None:
                obj = self.expr(func.value)
                args = [self.expr(a) for a in e.args] + [self.expr(k.value) for k in e.keywords]
                return self.emit("method", [obj] + args, (func.attr, tuple(kwnames)))
            f = self.const(target)
        else:
            if isinstance(func, ast.Name) and func.id in _FRAME_CALLS and not self.is_local(func.id) \
                    and func.id not in self.fglobals:
                raise self.fail(f"'{func.id}()' (it reads the frame, which the transform replaces) is", e)
            f = self.expr(func)
        args = [self.expr(a) for a in e.args] + [self.expr(k.value) for k in e.keywords]
        return self.emit("call", [f] + args, tuple(kwnames))

    def star_call(self, e):
        """A call with star-arguments, ``f(a, *xs, k=v, **opts)``: ``called_with(f, args, named, opts)``, its
        positional arguments joined into one tuple (displays and ``tuple(xs)`` added up), its named keywords in
        a dict display, evaluated in the order Python evaluates them."""
        func, lead = e.func, []
        if isinstance(func, ast.Attribute) and _is_super(func.value) and not self.is_local("super") \
                and "super" not in self.fglobals:
            f, obj = self.found_by_super(func, True)   # (``super().__init__(*args, **kw)``: called with the object)
            lead = [obj]
        else:
            if isinstance(func, ast.Name) and func.id in _FRAME_CALLS and not self.is_local(func.id) \
                    and func.id not in self.fglobals:
                raise self.fail(f"'{func.id}()' (it reads the frame, which the transform replaces) is", e)
            f = self.expr(func)
        args = self.joined(e.args, lead)
        if sum(kw.arg is None for kw in e.keywords) > 1:
            raise self.fail("more than one '**' in a call is", e)
        values = [(kw.arg, self.expr(kw.value)) for kw in e.keywords]
        named = self.emit("dict", [x for k, v in values if k is not None for x in (self.const(k), v)])
        mapping = [v for k, v in values if k is None] or [self.emit("dict", [])]
        return self.emit("call", [self.const(called_with), f, args, named, mapping[0]], ())

    def joined(self, elts, lead=()):
        """The tuple of ``elts``, some starred (``a, *xs, b``), after the values ``lead``: displays and
        ``tuple(xs)`` added up."""
        pieces, run = [], list(lead)
        for x in elts:
            if isinstance(x, ast.Starred):
                if run:
                    pieces.append(self.emit("tuple", run))
                    run = []
                pieces.append(self.emit("call", [self.const(tuple), self.expr(x.value)], ()))
            else:
                run.append(self.expr(x))
        if run or not pieces:
            pieces.append(self.emit("tuple", run))
        out = pieces[0]
        for piece in pieces[1:]:
            out = self.emit("binop", [out, piece], "+")
        return out

    def super_call(self, attr, call=None, kwnames=()):
        """``super().name(...)`` or ``super(C, obj).name(...)`` (``attr`` its ``super().name``, ``call`` the call):
        the function that ``super`` finds (``found_by_super``), called with the object as its first argument, as
        ``Base.name(self, ...)`` is; without ``call``, ``super().name`` read: the getter of the property it finds,
        called with the object."""
        f, obj = self.found_by_super(attr, call is not None)
        args = [obj] if call is None else \
            [obj] + [self.expr(a) for a in call.args] + [self.expr(k.value) for k in call.keywords]
        return self.emit("call", [f] + args, tuple(kwnames))

    def found_by_super(self, attr, called: bool):
        """``(f, obj)``: the function (or, not ``called``, the property's getter) that ``super().name`` finds, and
        the object it is called with."""
        sup = attr.value
        if sup.args or sup.keywords:
            if len(sup.args) != 2 or sup.keywords:
                raise self.fail("super() with other than no arguments or two is", sup)
            cls, obj = self.expr(sup.args[0]), self.expr(sup.args[1])
        else:
            if "__class__" not in self.freevars or not self.params:
                raise self.fail("super() outside a method of a class is", sup)
            cls, obj = self.load_name("__class__", sup), self.load_name(self.params[0], sup)
        f = self.emit("call", [self.const(found_by_super), cls, obj, self.const(attr.attr), self.const(not called)],
                      ())
        return f, obj

    def static_attr(self, e):
        """The object ``module.attr`` (or ``module.sub.attr``) names, when its root is a module global."""
        chain = []
        while isinstance(e, ast.Attribute):
            chain.append(e.attr)
            e = e.value
        if not isinstance(e, ast.Name) or self.is_local(e.id):
            return None
        obj = self.fglobals.get(e.id)
        for a in reversed(chain):
            if not isinstance(obj, types.ModuleType):
                return None
            obj = getattr(obj, a, None)
        return None if obj is None or isinstance(obj, types.ModuleType) else obj

    def is_local(self, name):
        return self.var(name) != name or name in self.locals or name in self.freevars

    def e_Attribute(self, e):
        if _is_super(e.value) and not self.is_local("super") and "super" not in self.fglobals:
            return self.super_call(e)   # (``super().prop``: the property's getter, called)
        target = self.static_attr(e)
        if target is not None and (callable(target) or isinstance(target, (int, float))):
            return self.const(target)
        return self.emit("getattr", [self.expr(e.value)], e.attr)

    def e_Subscript(self, e):
        return self.emit("getitem", [self.expr(e.value), self.index(e.slice)])

    def index(self, s):
        if isinstance(s, ast.Slice):
            parts = [self.expr(p) if p is not None else self.const(None) for p in (s.lower, s.upper, s.step)]
            return self.emit("slice", parts)
        if isinstance(s, ast.Tuple):
            return self.emit("tuple", [self.index(x) for x in s.elts])
        return self.expr(s)

    def e_Tuple(self, e):
        if any(isinstance(x, ast.Starred) for x in e.elts):
            return self.joined(e.elts)
        return self.emit("tuple", [self.expr(x) for x in e.elts])

    def e_List(self, e):
        if any(isinstance(x, ast.Starred) for x in e.elts):
            return self.emit("call", [self.const(list), self.joined(e.elts)], ())
        return self.emit("list", [self.expr(x) for x in e.elts])

    def e_Dict(self, e):
        if any(k is None for k in e.keys):
            raise self.fail("'**' in dict literals is", e)
        args = []
        for k, v in zip(e.keys, e.values):
            args += [self.expr(k), self.expr(v)]
        return self.emit("dict", args)

    def e_Lambda(self, e):
        return self.closure(e, None)

    def e_ListComp(self, e):
        acc = self.emit("list", [])
        self.comprehension(e.generators, lambda: self.emit("method", [acc, self.expr(e.elt)], ("append", ())))
        return acc

    e_GeneratorExp = e_ListComp

    def e_DictComp(self, e):
        acc = self.emit("dict", [])
        self.comprehension(e.generators, lambda: self.emit("setitem", [acc, self.expr(e.key), self.expr(e.value)]))
        return acc

    def comprehension(self, gens, inner):
        """Nested loops, one per ``for`` clause, with the clause's variables renamed apart."""
        gen, rest = gens[0], gens[1:]
        if gen.is_async:
            raise self.fail("'async' comprehensions are", gen.iter)
        seq = self.emit("call", [self.const(as_sequence), self.expr(gen.iter)], ())
        n = self.emit("call", [self.const(len), seq], ())
        counter = self.fresh("k")
        self.write(counter, self.const(0))
        self.renames.append({name: self.fresh(name) for name in _loaded_names(gen.target)})
        header, latch = self.ssa.new_block(), self.ssa.new_block()
        self.jump(header)
        self.block = header
        cond = self.emit("compare", [self.read(counter), n], "<")

        def body():
            self.assign(gen.target, self.emit("getitem", [seq, self.read(counter)]))
            for cond_expr in gen.ifs:
                c = self.expr(cond_expr)
                yes, skip = self.ssa.new_block(), latch
                self.branch(c, yes, skip)
                self.start(yes)
            if rest:
                self.comprehension(rest, inner)
            else:
                inner()

        self.loop(cond, header, latch, [], [], body, self.stepper(counter), gen.target)
        self.renames.pop()

    def stepper(self, counter):
        return lambda: self.write(counter, self.emit("binop", [self.read(counter), self.const(1)], "+"))

    def closure(self, node, name):
        """A nested function: a factory taking the captured values is compiled next to the generated code."""
        _refuse(node, self.filename, self.text)
        defaults = [d for d in (*node.args.defaults, *node.args.kw_defaults) if d is not None]
        if any(isinstance(n, ast.Name) for d in defaults for n in ast.walk(d)):
            raise self.fail("default values of a nested function that read variables (their gradient would "
                            "be lost) are", node)
        params = set(_arg_names(node.args))
        inner_bound = _bound_names(node.body) if isinstance(node, ast.FunctionDef) else set()
        visible = self.locals | set(self.freevars) | {n for r in self.renames for n in r}
        captured = sorted((_loaded_names(node) - params - inner_bound - {name}) & visible)
        end = getattr(node, "end_lineno", node.lineno)
        for c in captured:
            if any(line > end for line in self.stores.get(c, ())) or any(c in body for body in self.loop_stores):
                raise self.fail(f"a closure over {c!r}, which is assigned again after it is made, is", node)
        values = [self.load_name(c, node) for c in captured]
        index = len(self.fn.factory_nodes)
        self.fn.factory_nodes.append(node)
        recursive = name if name is not None and name in _loaded_names(node) else None
        return self.emit("closure", values, (index, tuple(captured), recursive))


_FRAME_CALLS = {"eval", "exec", "locals", "vars", "globals", "dir"}


def _is_super(e) -> bool:
    return isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "super"


def found_by_super(cls, obj, name, read=False):
    """The function ``super(cls, obj).name`` is bound from: the first ``name`` in the classes after ``cls`` in
    the order ``obj``'s class resolves them (``object.__init__``: a function that does nothing); where ``read``
    (``super().name`` not called), the getter of the property found there.  A method of another kind there (a
    static or class method, a property called, a C function) is refused by name."""
    mro = (obj if isinstance(obj, type) else type(obj)).__mro__
    for k in mro[mro.index(cls) + 1:]:
        if name in k.__dict__:
            attr = k.__dict__[name]
            if read and isinstance(attr, property) and isinstance(attr.fget, types.FunctionType):
                return attr.fget
            if isinstance(attr, types.FunctionType) and not read:
                return attr
            if attr is object.__init__:
                return _init_nothing
            raise UnsupportedError(f"super().{name} finds {k.__qualname__}.{name}, a {type(attr).__name__}, which "
                                   f"tensorlang.ad does not differentiate; call it as {k.__qualname__}.{name}(...)")
    raise AttributeError(f"'super' object has no attribute {name!r}")


_CONVERSIONS = {ord("s"): str, ord("r"): repr, ord("a"): ascii}


def called_with(f, args: tuple, named: dict, opts: dict):
    """``f(*args, **named, **opts)``: a call with star-arguments (``_Lowerer.star_call``), a primitive whose rules
    call ``f`` as J and JVP call any function."""
    return f(*args, **named, **opts)


def keywords_of(f, named: dict, opts: dict) -> dict:
    """The keyword arguments of ``called_with(f, args, named, opts)``, one dict; a keyword given twice is Python's
    ``TypeError``."""
    kw = dict(named)
    for k in opts:
        if k in named:
            raise TypeError(f"{getattr(f, '__qualname__', repr(f))}() got multiple values for keyword argument '{k}'")
        kw[k] = opts[k]
    return kw


def formatted(pieces, *values):
    """The text of an f-string: ``pieces`` its literal text and, where a value goes, ``(conversion, has_spec)``
    (``!s``, ``!r``, ``!a`` as ``ast.FormattedValue`` numbers them, -1 for none); ``values`` the values shown, each
    followed by its format spec where it has one."""
    out, k = [], 0
    for piece in pieces:
        if type(piece) is str:
            out.append(piece)
            continue
        conversion, has_spec = piece
        value = _CONVERSIONS.get(conversion, lambda v: v)(values[k])
        spec = values[k + 1] if has_spec else ""
        k += 2 if has_spec else 1
        out.append(format(value, spec))
    return "".join(out)


def _init_nothing(self):
    """``object.__init__``, reached by ``super().__init__()``: nothing."""
    return None


def _is_ufunc(obj):
    return type(obj).__name__ == "ufunc"


def as_sequence(x):
    """What a ``for`` loop indexes: lists, tuples, ranges, strings and arrays as they are, an array's flat
    iterator as the array's entries in a row, others as lists."""
    if isinstance(x, (list, tuple, range, str)) or hasattr(x, "__array__") and hasattr(x, "shape"):
        return x
    if type(x) is np.flatiter:
        return x.base.reshape(-1)
    return list(x)
