"""Python source for a specialised function, compiled once and cached.

For each function and each tuple of argument kinds (``ir.spec_kind``) one source text is generated
with the first three of these entry points, and a second one with the last two the first time that
``ad.value_and_grad`` or ``has_aux`` needs them (``generate``'s ``valued``), so that a gradient does not pay
for compiling them; each takes the function object itself first (Zygote's hidden zeroth argument):

* ``_ad_grad(f, *args)`` runs the primal and then the adjoint with ``dy = 1`` in one frame, returning
  ``(df, *dargs)``; values for the adjoint stay in local variables or on the list ``_t``;
* ``_ad_pb(f, *args)`` runs the primal and returns ``(y, back)``, where the closure ``back(dy)`` runs the
  adjoint (reading the stack by index, so it can be called more than once);
* ``_ad_fast(f, *args)`` is ``_ad_grad`` returning the argument gradients only: the cached entry of
  ``ad.gradient``.  For a *box-free* function (only numbers and arrays, no calls that could write to
  objects, see ``is_boxfree``) it does not consult the box store at all, so ``ad.gradient`` calls it without
  setting a store up;
* ``_ad_vfast(f, *args)`` is ``_ad_fast`` returning ``(y, (*dargs,))``, the value with the gradients: the
  cached entry of ``ad.value_and_grad``;
* ``_ad_afast(f, *args)``, made only for a function that returns a pair written out (``return loss, aux``):
  the same with ``dy = 1`` seeding the pair's first entry, its ``y`` the pair (``has_aux``); None otherwise.

Blocks are laid out in reverse postorder inside a ``while True`` dispatch on the block number ``_b``
(a function of one block has no dispatch); the adjoint's blocks are laid out in the reverse order.
"""
from __future__ import annotations

import ast
import itertools
import linecache
import math
import numbers
import re
import sys
import types

import numpy as np

from ...errors import TensorLangError

from . import adjoint as adj
from . import primal
from .analysis import calls_write_free, loop_blocks, method_writes, reverse_postorder
from .ir import ANY, ARR, ARRAY_TYPES, INT, NUM, PYINT, VEC, Function, Instr, has_gradient
from . import rules
from .source import register

_LITERAL_TYPES = (int, float, bool, str, type(None))


class Gen:
    """Naming and layout shared by the primal and adjoint generators."""

    def __init__(self, fn: Function):
        self.fn = fn
        self.loops = loop_blocks(fn)
        self.order = reverse_postorder(fn)
        self.adj_order = self.order[::-1]
        self.dispatch = len(fn.blocks) > 1
        self.defblock = {}
        for b in fn.blocks:
            for v in b.phis + b.instrs:
                self.defblock[v] = b
        self.env: dict[str, object] = {}
        self._const_names: dict[int, str] = {}
        self.needs: dict = {}
        self.any_active = any(v.active for v in fn.values())
        # arrays written in place (x[i] = v, x += v) and the views they may share memory with: operations
        # copy them when they keep them (copy on capture)
        self.written = Written(fn)
        self.boxfree = is_boxfree(fn)
        # what it returns, and what it puts in the containers it makes (which it may return): the caller may
        # write into such an array, making it a box whose gradient it leaves in the store for the code that
        # made it (``take_captured``), so a box-free function's adjoint takes their gradients too
        self.escaping = {a for v in fn.values() if isinstance(v, Instr) and v.op in ("tuple", "list", "dict")
                         for a in v.args}
        if fn.exit is not None and fn.exit.term[0] == "return":
            self.escaping.add(fn.exit.term[1])
        # the vectors whose entries are read as numbers (``x[i]``), and among them the arrays the function
        # makes (assumed vectors: the primal checks each where it is made, ``vector_check``)
        self.read = {v.args[0] for v in fn.values() if isinstance(v, Instr) and v.op == "getitem" and v.kind == NUM}
        self.derived = {x for x in self.read if not (isinstance(x, Instr) and x.op in ("param", "global"))}
        self.params = ", ".join(["_self"] + [f"_v{p.id}" for p in param_instrs(fn)])

    def vector_check(self, v) -> list[str]:
        """The check that array ``v``, made by the function, is a vector; otherwise the entry hands over to
        the specialisation that assumes nothing (``_ad_fb``, which runs the function again)."""
        x = self.val(v)
        return [f"if not (type({x}) is {self.const(np.ndarray)} and {_VECTOR.format(x)}):",
                f"    return _ad_fb({self.params})"]

    def val(self, v) -> str:
        if isinstance(v, Instr) and v.op == "const":
            x = v.attr
            if type(x) in _LITERAL_TYPES and not (type(x) is float and not math.isfinite(x)):
                r = repr(x)
                return f"({r})" if r.startswith("-") else r
            return self.const(x)
        return f"_v{v.id}"

    def pb(self, ins) -> str:
        return f"_B{ins.id}"

    def const(self, obj) -> str:
        name = self._const_names.get(id(obj))
        if name is None:
            name = f"_k{len(self._const_names)}"
            self._const_names[id(obj)] = name
            self.env[name] = obj
        return name

    def fill_templates(self, temps, ins, name, dy, live, bound: set | None = None) -> list[tuple[str, object, str]]:
        """The derivative templates ``temps`` of ``ins`` (one per argument, ``rules.scalar`` and
        ``rules.numpy``) filled in: ``(template, argument, expression)`` for each argument ``a`` with
        ``live(a)``.  ``{dy}`` becomes ``dy`` (a string, or a function of the argument), ``{y}`` and ``{i}``
        the names ``name(v)`` of the result and the arguments (asked only for those the templates use),
        ``{np}`` NumPy and ``{m}`` ``math``, whose functions are bound as constants (``bind_math``, which
        adds their names to ``bound``)."""
        used = [(t, a) for t, a in zip(temps, ins.args) if live(a)]
        fill = {"m": "_ad_math", "np": "_ad_np"}
        if any("{y}" in t for t, _ in used):
            fill["y"] = name(ins)
        for i, a in enumerate(ins.args):
            if any("{%d}" % i in t for t, _ in used):
                fill[str(i)] = name(a)
        args = [fill.get(str(i), "") for i in range(len(ins.args))]
        return [(t, a, self.bind_math(t.format(*args, **fill, dy=dy(a) if callable(dy) else dy), bound))
                for t, a in used]

    def bind_math(self, expr: str, bound: set | None = None) -> str:
        """``expr`` with each ``math.f`` of a template as a constant's name (a local lookup rather than an
        attribute lookup); the names used are added to ``bound``."""
        def const(m):
            name = self.const(getattr(math, m.group(1)))
            if bound is not None:
                bound.add(name)
            return name
        return re.sub(r"_ad_math\.(\w+)", const, expr)

    def goto(self, src, dst, order) -> list[str]:
        if not self.dispatch:
            return []
        jump = [f"_b = {dst.id}"]
        return jump + ["continue"] if order.index(dst) <= order.index(src) else jump

    def goto_adj(self, src, dst) -> list[str]:
        return self.goto(src, dst, self.adj_order)


# their result may be a view of their first argument (of any argument, for a call)
_VIEW_OPS = {"getitem", "getattr", "method", "call", "rule"}


class Written:
    """The arrays that operations copy when they keep them (copy on capture): values written in place
    (``x[i] = v``, ``x += v``) or passed to a call of user code or a method that may write to them
    (``fill(y)``), joined with those that may share their memory (results of operations that can return a
    view, ``y[1:]``, ``y.T``, ``y.reshape``, and phis, with their first argument; a call's result with its
    arguments), copied by an instruction only where another instruction that writes them can run after it.
    An array written only before a call is passed to it as it is (``y[0] = v; fill(y)``); a call given a
    copy has its writes into the copy written back (``runtime.cut``)."""

    def __init__(self, fn: Function):
        self.parent = {}
        self.shares = {}   # the finer joins of ``result_written``: only values that may share memory
        writes = []   # (instruction, the value it writes or may write)
        for v in fn.values():
            if isinstance(v, Instr):
                if v.op in _VIEW_OPS and v.args or v.op == "binop" and v.attr.endswith("="):
                    for u in v.args[1:] if v.op == "call" else v.args[:1]:   # (a call's first is the callee)
                        self._union(v, u)
                        if _may_share(v):
                            self._union(v, u, self.shares)
                if v.op == "setitem" or v.op == "binop" and v.attr.endswith("=") \
                        or v.op == "rule" and rules.writes(v.attr[0]):
                    writes.append((v, v.args[0]))
                elif v.op == "call" and not calls_write_free(v, fn.pure) or method_writes(v):
                    writes += [(v, u) for u in v.args[v.op == "call":]]
            else:
                for u in v.incoming.values():
                    self._union(v, u)
                    self._union(v, u, self.shares)
        # a caller may pass one array as two parameters, or a view of one as another (``w(x[:], x)``): where a
        # parameter may be written, the parameters are taken to share memory
        params = [v for v in fn.values() if isinstance(v, Instr) and v.op == "param"]
        if {self.find(p) for p in params} & {self.find(u) for _, u in writes}:
            for p in params[1:]:
                self._union(p, params[0])
                self._union(p, params[0], self.shares)
        self.shared_writes = [(v, self.find(u, self.shares)) for v, u in writes]   # (root in ``shares``)
        writes = [(v, self.find(u)) for v, u in writes]
        self.roots = {r for _, r in writes}
        in_block = {b: {(v, r) for v, r in writes if v in b.instrs} for b in fn.blocks}
        self.later: dict = {}   # instruction -> (writer, root) of the writes at it or after it
        for b in fn.blocks:
            seen, todo, after = set(), list(b.succs), set()
            while todo:
                c = todo.pop()
                if c not in seen:
                    seen.add(c)
                    after |= in_block[c]
                    todo.extend(c.succs)
            for v in reversed(b.instrs):
                after = after | {(w, r) for w, r in in_block[b] if w is v}
                self.later[v] = after

    def find(self, v, parent=None):
        parent = self.parent if parent is None else parent
        while parent.get(v, v) is not v:
            v = parent[v]
        return v

    def _union(self, a, b, parent=None):
        parent = self.parent if parent is None else parent
        parent[self.find(a, parent)] = self.find(b, parent)

    def __bool__(self):
        return bool(self.roots)

    def copied(self, ins, v) -> bool:
        """Whether ``ins`` copies its argument ``v`` when it keeps it: another instruction can write it
        after ``ins``."""
        root = self.find(v)
        return any(r is root and w is not ins for w, r in self.later.get(ins, ()))

    def result_written(self, ins) -> bool:
        """Whether another instruction can write into what ``ins`` returned, after ``ins``: into it, or into a
        value that may share its memory (a view of it, an item of it, what user code returned given it),
        where the result of a primitive that makes new arrays (``np.exp``) shares nothing with its arguments."""
        root = self.find(ins, self.shares)
        after = {w for w, _ in self.later.get(ins, ())}
        return any(r is root and w is not ins and w in after for w, r in self.shared_writes)


def _may_share(v) -> bool:
    """Whether ``v``'s result may share memory with its arguments: an item, an attribute or a view of its
    first (``getitem``, ``getattr``, ``x += y``, a method), whatever user code returns, and of the primitives
    those that return a view or an argument itself (``np.reshape``, ``np.asarray``, ``max``)."""
    if v.op == "rule":
        rule, name = v.attr
    else:   # a primitive called with keywords (a constant callee with a rule), else user code: it may
        f = v.args[0].attr if v.op == "call" and isinstance(v.args[0], Instr) and v.args[0].op == "const" else None
        rule, name = (None, None) if f is None else (rules.rule_of(f), getattr(f, "__name__", ""))
        if rule is None:
            return True
    return rules.view_method(name) or name in _SHARING_PRIMITIVES or rules.writes(rule)


# primitives whose result may be one of their arguments, or a container holding their arguments' objects
_SHARING_PRIMITIVES = {"max", "min", "sorted", "list", "tuple", "reversed", "zip", "iter", "next", "getattr",
                       "array"}


_BOXFREE_OPS = {"param", "const", "global", "compare", "slice", "nondiff", "prim", "aprim", "tuple"}


def is_boxfree(fn: Function) -> bool:
    """Whether no box can be made or read while the function runs: its instructions are arithmetic on
    numbers and arrays, inlined primitives and NumPy rules (no user code, no writes, no closures).  Its
    arrays' gradients are then plain local variables, and its fast entry needs no box store."""
    if fn.freevars:
        return False
    for v in fn.values():
        if not isinstance(v, Instr) or v.op in _BOXFREE_OPS:
            continue
        if v.op in ("binop", "unary") and v.kind in (INT, NUM, ARR) or v.op == "getitem" and v.args[0].kind == ARR \
                and v.kind in (ARR, NUM):
            continue
        if v.op == "rule" and rules.box_free(v.attr[0]):
            continue
        return False
    return True


def block_dispatch(blocks: list, bodies: dict, indent: str) -> list[str]:
    if len(blocks) == 1:
        return [indent + x for x in bodies[blocks[0]]]
    out = [f"{indent}_b = {blocks[0].id}", f"{indent}while True:"]
    for b in blocks:
        out.append(f"{indent}    if _b == {b.id}:")
        out += [f"{indent}        {x}" for x in bodies[b] or ["pass"]]
    return out


def param_instrs(fn):
    return [ins for ins in fn.blocks[0].instrs if ins.op == "param"]


def _adjoint(g: Gen, mode: str, indent: str, fast: bool = False, seed=None) -> list[str]:
    """The adjoint's statements (``mode`` "pop" or "index", ``BlockAdjoint``); ``fast``: returning the argument
    gradients only; ``seed``: the value the exit's ``_dy`` is the gradient of (None: the returned one)."""
    fn = g.fn
    bodies = {}
    for b in g.adj_order:
        ba = adj.BlockAdjoint(g, b, seed)
        bodies[b] = ba.build(mode)
        if ba.need:
            g.needs[b] = ba.need
    lines = [f"{indent}_i = len(_t)"] if mode == "index" and g.loops else []
    zeros = {"0": [], "None": []}
    for v in fn.values():
        if has_gradient(v):
            zeros["0" if v.kind == NUM else "None"].append(f"_d{v.id}")
    zeros["None"] += [f"_dF{i}" for i in range(len(fn.freevars))]
    for z, names in zeros.items():
        for k in range(0, len(names), 32):
            lines.append(f"{indent}{' = '.join(names[k:k + 32])} = {z}")
    read = g.read
    for p in param_instrs(fn):   # the zero of the number's type, 0 also where it is inf or NaN (x ** 0 is 1)
        if p.active and p.kind == NUM:
            lines.append(f"{indent}_d{p.id} = 0 * _v{p.id} ** 0")
    for x in sorted(read, key=lambda x: x.id):   # the gradients of its entries x[i] (adjoint.BlockAdjoint._entry)
        if x.active:
            lines.append(f"{indent}_i{x.id}, _g{x.id} = _ad_ents()")
    blocks = [b for b in g.adj_order if b is fn.exit or _reaches_exit(b, fn)]
    lines += block_dispatch(blocks, bodies, indent)
    grads = []
    for p in param_instrs(fn):
        d = f"_ad_withents(_d{p.id}, _v{p.id}, _i{p.id}, _g{p.id})" if p in read else f"_d{p.id}"
        if not p.active or p.kind == INT:
            grads.append("None")
        elif p.kind in (ANY, ARR) and not (fast and g.boxfree):
            grads.append(f"_ad_like(_v{p.id}, _ad_take(_v{p.id}, {d}))")
        elif p.kind in (ANY, ARR):
            grads.append(f"_ad_like(_v{p.id}, {d})")
        else:
            grads.append(f"_d{p.id}")
    if fast:
        lines.append(f"{indent}return ({''.join(x + ', ' for x in grads)})")
        return lines
    dself = f"_ad_fngrad(_self, ({''.join(f'_dF{i}, ' for i in range(len(fn.freevars)))}))" if fn.freevars else "None"
    lines.append(f"{indent}return ({dself}, {''.join(x + ', ' for x in grads)})")
    return lines


def _reaches_exit(b, fn) -> bool:
    seen, todo = set(), [b]
    while todo:
        x = todo.pop()
        if x is fn.exit:
            return True
        if x not in seen:
            seen.add(x)
            todo.extend(x.succs)
    return False


_VECTOR = "{0}.ndim == 1 and {0}.dtype.kind == 'f'"


def generate(fn: Function, guard: dict | None = None, assumed: dict | None = None,
             valued: bool = False) -> tuple[str, dict]:
    """The source text of the factory and the names it binds: the factory returns ``(_ad_grad, _ad_pb,
    _ad_fast)``, or with ``valued`` ``(_ad_vfast, _ad_afast)`` (``_ad_afast`` None where the function returns
    no pair written out), the entries that return the value too, which only ``value_and_grad`` and
    ``has_aux`` run (so compiled for a function only when they first do).  With ``guard`` (global name -> the
    kind the specialisation assumed for it: ``INT``, ``ARR``, or ``VEC`` for a 1-D real array) or ``assumed``
    (argument position -> ``VEC``, or ``PYINT`` for a Python int), each entry first checks the assumptions
    and otherwise hands over to ``_ad_fb_<entry>`` (``_ad_fb_grad`` ...: the same entry of the unguarded
    specialisation); so does the primal where an array it assumed a vector is not (``Gen.vector_check``)."""
    g = Gen(fn)
    params = g.params
    returned = fn.exit.term[1] if fn.exit is not None and fn.exit.term[0] == "return" else None
    pair = returned if isinstance(returned, Instr) and returned.op == "tuple" and len(returned.args) == 2 else None
    if valued:
        adj_pop = adj_index = []
        fasts = {"vfast": (_valued(_adjoint(g, "pop", "        ", fast=True)), "_y", returned)}
        if pair is not None:
            fasts["afast"] = (_valued(_adjoint(g, "pop", "        ", fast=True, seed=pair.args[0])),
                              g.val(pair.args[0]), pair.args[0])
        entries = list(fasts)
    else:
        adj_pop = _adjoint(g, "pop", "        ")
        fasts = {"fast": (_adjoint(g, "pop", "        ", fast=True), "_y", returned)}
        adj_index = _adjoint(g, "index", "            ")
        entries = ["grad", "pb", "fast"]
    bodies = {b: primal.block(g, b) for b in g.order}
    prologue = ["_t = []"] if g.loops else []
    prim = block_dispatch(g.order, bodies, "        ")
    captured = {ins.attr[0]: ins.attr[1] for ins in fn.values() if isinstance(ins, Instr) and ins.op == "closure"}
    lines = []
    for i, node in enumerate(fn.factory_nodes):
        lines += factory_lines(i, node, captured.get(i, ()))
    checks = {}
    conds = [f"type({name}) is {g.const(int if k == INT else np.ndarray)}" for name, k in (guard or {}).items()]
    conds += [_VECTOR.format(name) for name, k in (guard or {}).items() if k == VEC]
    assumed = assumed or {}
    for p in param_instrs(fn):
        k = assumed.get(p.attr[0])
        if k == VEC:
            conds.append(_VECTOR.format(f"_v{p.id}"))
        elif k == PYINT:
            conds.append(f"type(_v{p.id}) is {g.const(int)}")
    if fn.purity:   # the functions it calls are still those found to write nothing
        from . import runtime
        conds.append(f"{g.const(runtime.holds)}({g.const(fn.purity)})")
    for entry in entries:
        checks[entry] = [f"if not ({' and '.join(conds)}):", f"    return _ad_fb_{entry}({params})"] if conds else []
        if g.derived:
            checks[entry].append(f"_ad_fb = _ad_fb_{entry}")
    lines.append("def _ad_factory(_ad_env):")
    if conds or g.derived:
        lines += [f"    _ad_fb_{e} = _ad_env['_ad_fb_{e}']" for e in checks]
    body = prim + adj_pop + [x for a, _, _ in fasts.values() for x in a] + adj_index
    body += [x for b in bodies.values() for x in b]
    used = {name for name in _helper_names() if any(name in x for x in body)}
    mks = {f"_ad_mk{i}" for i in range(len(fn.factory_nodes))}
    lines += [f"    {name} = _ad_env[{name!r}]" for name in sorted(used | set(g.env) | mks)]
    lines.append("    _ad_seed = _ad_env['_ad_seed']")
    if not valued:
        lines.append(f"    def _ad_grad({params}):")
        lines += ["        " + x for x in checks["grad"] + prologue + ["_dy = 1"]] + prim + _seed("_y", returned)
        lines += adj_pop
        lines.append(f"    def _ad_pb({params}):")
        lines += ["        " + x for x in checks["pb"] + prologue] + prim
        lines.append("        def _ad_back(_dy):")
        lines += adj_index
        lines.append("        return _y, _ad_back")
    for entry, (adjoint, name, seeded) in fasts.items():
        lines.append(f"    def _ad_{entry}({params}):")
        lines += ["        " + x for x in checks[entry] + prologue + ["_dy = 1"]] + prim + _seed(name, seeded)
        lines += adjoint
    results = [f"_ad_{e}" for e in entries] + (["None"] if valued and pair is None else [])
    lines.append(f"    return {', '.join(results)}")
    return "\n".join(lines) + "\n", g.env


def _valued(adjoint: list[str]) -> list[str]:
    """A fast entry's adjoint returning ``(_y, (*dargs,))`` (its last line returns the gradients)."""
    return adjoint[:-1] + [adjoint[-1].replace("return ", "return _y, ", 1)]


def _seed(x: str, v) -> list[str]:
    """The check that ``x``, the name of value ``v`` that ``dy = 1`` seeds, is a real scalar (else
    ``scalar_seed``'s error), at the line of ``v``."""
    seed = [f"        if type({x}) is not float:", f"            _ad_seed({x})"]
    return primal.source_line(seed, v) if isinstance(v, Instr) else seed


def factory_lines(i, node, captured) -> list[str]:
    """``_ad_mk<i>(captured...)`` returns the nested function, closed over the captured values."""
    params = ", ".join(captured)
    if isinstance(node, ast.Lambda):
        return [f"def _ad_mk{i}({params}):", f"    return ({ast.unparse(node)})", ""]
    body = ast.unparse(node).splitlines()
    return [f"def _ad_mk{i}({params}):"] + ["    " + x for x in body] + [f"    return {node.name}", ""]


def _helper_names():
    from . import runtime
    return set(runtime.HELPERS)


_LINE = re.compile(r"  # line (\d+)$")


def at_source_lines(src: str, gen_name: str, filename: str, text: str):
    """The generated ``src`` compiled at the lines of the user's source ``text`` (in ``filename``) that
    each statement came from (``primal.source_line`` marks them; an unmarked statement belongs to the
    last marked one before it), so that a traceback through generated code shows the user's lines;
    source without marks is compiled as itself (``gen_name``, whose text ``linecache`` holds)."""
    marks = [_LINE.search(line) for line in src.splitlines()]
    if not any(marks):
        return compile(src, gen_name, "exec")
    user = text.splitlines()
    where, last = {}, None
    for k, m in enumerate(marks, 1):
        last = int(m.group(1)) if m else last
        where[k] = last
    first = next(v for v in where.values() if v)
    tree = ast.parse(src)
    for node in ast.walk(tree):
        if hasattr(node, "lineno"):
            line = where.get(node.lineno) or first
            shown = user[line - 1] if 0 < line <= len(user) else ""
            node.lineno = node.end_lineno = line
            node.col_offset = len(shown) - len(shown.lstrip())
            node.end_col_offset = max(len(shown.rstrip()), node.col_offset)
    return compile(tree, filename, "exec")


class _ScalarSeed:
    """``scalar_seed(y)``: the seed ``dy = 1`` of a gradient, whose function must return a real scalar:
    a Python or NumPy real number or a 0-d real array (a NumPy array, or a Dask array: a lazy scalar, as
    a compiled kernel called on Dask inputs returns); any other output is an error naming it (a
    gradient of ``sum(y)`` silently taken for a vector ``y`` would be a wrong answer).  The generated
    gradient entries call it on an output that is not a float.  It is an object, not a Python function,
    so that the transforms (forward over reverse differentiates the gradient code) take it as the
    primitive without a derivative that it is (``NONDIFF``) instead of transforming its source."""

    def __call__(self, y):
        array = isinstance(y, np.ndarray) or type(y) in ARRAY_TYPES or hasattr(y, "__dask_graph__") \
            and hasattr(y, "shape")
        if isinstance(y, numbers.Real) or (array and y.shape == () and y.dtype.kind in "biuf"):
            return 1
        if array:
            kind = "a Dask array" if hasattr(y, "__dask_graph__") else "an array"
            what = f"{kind} of shape {y.shape} and dtype {y.dtype}"
        elif isinstance(y, numbers.Complex):
            what = f"the complex number {y!r}"
        else:
            what = f"a value of type {type(y).__name__}"
        raise TensorLangError(
            f"a gradient needs a function whose output is a real scalar, and this one returned {what}: for "
            f"the derivative of a non-scalar output use ad.jacobian(f)(*args), or ad.pullback(f, *args), whose "
            f"back(dy) gives the vector-Jacobian product for a cotangent dy of the output's shape (for a "
            f"gradient of sum(y), make f return the sum)"
        )


scalar_seed = _ScalarSeed()
rules.mark_nondiff(scalar_seed)

_NUMBERS = itertools.count(1)


def generated_name(kind: str, qualname: str) -> str:
    """A file name for generated source, unique in the process (its text is kept in ``linecache`` under it)."""
    return f"<{kind}:{qualname}:{next(_NUMBERS)}>"


_ENTRIES = ("_ad_grad", "_ad_pb", "_ad_fast", "_ad_vfast", "_ad_afast", "_ad_jvp")


def shown_names(user: str) -> dict[str, tuple[str, str]]:
    """The names (``co_name``, ``co_qualname``) that the generated entries of the user's function (qualified
    name ``user``) carry, so that a traceback through them names the user's function: each entry is the
    function itself, the closure ``_ad_back`` its pullback."""
    name = user.rsplit(".", 1)[-1]
    names = {entry: (name, user) for entry in _ENTRIES}
    names["_ad_back"] = (f"<pullback of {name}>", f"{user}.<pullback>")
    return names


def renamed(code: types.CodeType, names: dict[str, tuple[str, str]]) -> types.CodeType:
    """``code`` with the functions defined in it (at any depth) named as ``names`` says (generated name ->
    ``(co_name, co_qualname)``)."""
    consts = tuple(renamed(c, names) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    changes: dict = {"co_consts": consts}
    if code.co_name in names:
        changes["co_name"] = names[code.co_name][0]
        if sys.version_info >= (3, 11):
            changes["co_qualname"] = names[code.co_name][1]
    return code.replace(**changes)


def exec_generated(src: str, fn: Function, fglobals: dict, qualname: str, filename: str, text: str,
                   env: dict, helpers: dict, user: str | None = None) -> dict:
    """Compile generated source in the function's own module namespace (its text kept in ``linecache``
    under ``ns['_ad_gen_name']``); ``env`` gets ``helpers`` and the factories of ``fn``'s nested
    functions, whose code is registered as coming from their syntax tree (so it can be transformed).
    With ``user`` (the qualified name of the user's function), the entries that ``_ad_factory`` makes are
    named after it (``shown_names``; ``ns['_ad_names']`` maps their generated names to those)."""
    gen_name = generated_name("tensorlang.ad", qualname)
    linecache.cache[gen_name] = (len(src), None, src.splitlines(True), gen_name)
    ns: dict = {"_ad_gen_name": gen_name}
    exec(at_source_lines(src, gen_name, filename, text), fglobals, ns)
    names = shown_names(user) if user else {}
    ns["_ad_names"] = {k: v[0] for k, v in names.items()}
    if names:
        ns["_ad_factory"].__code__ = renamed(ns["_ad_factory"].__code__, names)
    env.update(helpers)
    for i, node in enumerate(fn.factory_nodes):
        mk = ns[f"_ad_mk{i}"]
        env[f"_ad_mk{i}"] = mk
        for c in mk.__code__.co_consts:
            if hasattr(c, "co_code"):
                register(c, node, filename, text)
        # the factory's own tree, from its text: forward mode transforms it where generated code that makes a
        # closure is differentiated again (forward over reverse)
        code = mk.__code__
        factory = "\n".join(factory_lines(i, node, code.co_varnames[:code.co_argcount]))
        register(code, f"_ad_mk{i}", f"<tensorlang.ad factory of {qualname}>", factory)
    return ns


def compile_function(fn: Function, fglobals: dict, qualname: str, filename: str, text: str,
                     guard: dict | None = None, fallbacks: dict | None = None, assumed: dict | None = None,
                     valued: bool = False):
    """Compile the generated source in the function's own module namespace; returns
    (grad, pb, fast, source), or with ``valued`` (vfast, afast), ``afast`` None where the function
    returns no pair written out.  ``guard``/``assumed``/``fallbacks`` (``_ad_fb_<entry>`` -> that entry of the
    unguarded specialisation): see ``generate``."""
    from . import runtime
    src, env = generate(fn, guard, assumed, valued)
    env = dict(env)
    helpers = {**runtime.HELPERS, "_ad_seed": scalar_seed, **(fallbacks or {})}
    ns = exec_generated(src, fn, fglobals, qualname, filename, text, env, helpers, user=qualname)
    if valued:
        return ns["_ad_factory"](env)
    gen_name = ns["_ad_gen_name"]
    grad, pb, fast = ns["_ad_factory"](env)
    codes = {"_ad_grad": grad.__code__, "_ad_pb": pb.__code__}
    generated = {shown: name for name, shown in ns["_ad_names"].items() if name not in _ENTRIES}
    codes.update((generated.get(c.co_name, c.co_name), c) for c in pb.__code__.co_consts if hasattr(c, "co_code"))
    for name, code in codes.items():
        register(code, name, gen_name, src)
    return grad, pb, fast, src
