"""Facts about an SSA function that the code generators need.

* kinds: each value is a known ``int``/``bool`` (``INT``, never differentiated), a known scalar number
  (``NUM``: float, Fraction, complex, NumPy scalar ...), a NumPy array (``ARR``: an ``np.ndarray``
  argument, the result of arithmetic or an inlined NumPy function on arrays and numbers, or a float array
  that ``np.zeros(shape)``, ``np.ones(shape)`` or ``np.empty(shape)`` makes) or ``ANY``;
  found by a fixed point over the blocks from the kinds of the arguments this specialisation was made
  for.  A function that writes to anything (``x[i] = v``, ``o.a = v``, mutating methods) has no ``ARR``
  values: inlined array rules read their arguments in the adjoint, so those must not change.  An argument
  or global of kind ``VEC`` is an ``ARR`` assumed 1-D and real (``indexed_by_ints``): its entries ``x[i]``
  at Python ints are numbers; so are those of the arrays the function makes that are assumed vectors
  (``derived``: checked where they are made), and an int argument of kind ``PYINT`` is a Python int.
* activity: whether a value may carry a gradient.  Numbers are exact (a number computed from constants
  is inactive); other values are conservatively active when the function mutates anything, since a list
  built from constants becomes active when an active value is appended to it.
* inlining: arithmetic and ``math``/builtin calls on known numbers become ``prim`` instructions whose
  derivative is written into the generated code (``rules.scalar``), so loops store numbers, not closures;
  common NumPy functions on arrays become ``aprim`` instructions, likewise inlined (``rules.numpy``).
* loops: the blocks that can run more than once; only they push their values on the stack.
* functions that write nothing (``write_free``): a module global bound to a Python function that writes
  to nothing, nor calls anything that may; a specialisation that assumes so (``fn.pure``) neither counts
  calls of it as writes nor gives their results an unknown kind (``_Returns``).
"""
from __future__ import annotations

import inspect
import types
from operator import attrgetter

from .ir import ANY, ARR, CONST_KIND, INT, NUM, PYINT, VEC, Function, Instr, Phi, is_constant, kind_of
from .lower import as_sequence, lowered
from .rules import (ARRAY_BINOPS, array_call, array_method, effect_free, int_preserving, int_result, is_nondiff,
                    makes_float_array, pure_method, rule_of, scalar_call, writes)

_ORDER = {None: 0, INT: 1, NUM: 2, ARR: 3, ANY: 4}
_ARITH = {"+", "-", "*", "/", "//", "%", "**"}


def join(a, b):
    if a == ARR and b in (INT, NUM) or b == ARR and a in (INT, NUM):
        return ANY
    return a if _ORDER[a] >= _ORDER[b] else b


def analyse(fn: Function, arg_kinds: tuple, globals_kinds: dict | None = None, derived=frozenset(),
            _open=frozenset(), fixed=frozenset()) -> None:
    """Set ``kind`` and ``active`` on every value, and turn inlinable calls into ``prim``.
    ``globals_kinds`` (name -> kind) are kinds assumed for module globals (a specialisation that is
    guarded by the globals' types when it runs, see ``api._build``); other globals are ``ANY``.
    ``derived``: the ids of values (arrays the function makes) assumed to be vectors.  A call of a function
    assumed to write nothing (``fn.pure``) has the kind that function returns for its arguments' kinds.
    ``fixed``: the positions of parameters not differentiated (those ``ad.grad``'s ``argnums`` leaves out),
    inactive where nothing can write a derivative into them (``_fixed_inactive``)."""
    gk = globals_kinds or {}
    values = list(fn.values())
    returns = _Returns(fn.pure, _open)
    _fix_kinds(values, arg_kinds, gk, True, _entry_reads(values, arg_kinds, gk, derived), derived, returns)
    if _index_arrays_directly(fn, values):
        values = list(fn.values())
        _fix_kinds(values, arg_kinds, gk, True, _entry_reads(values, arg_kinds, gk, derived), derived, returns)
    for v in values:   # ``x += y`` on a number rebinds x; on anything else it may write in place
        if _augmented(v) and v.args[0].kind in (INT, NUM):
            v.attr = v.attr[:-1]
    mutates = any(_writes(v, fn.pure) for v in values)
    if mutates:   # no inlined array rules (they read their arguments in the adjoint)
        arg_kinds = tuple(ANY if k in (ARR, VEC) else k for k in arg_kinds)
        gk, derived = {}, frozenset()
    _fix_kinds(values, arg_kinds, gk, False, _entry_reads(values, arg_kinds, gk, derived), derived, returns,
               made=not mutates)
    for v in values:
        if isinstance(v, Instr) and v.op in ("call", "method"):
            _maybe_inline(v)
            _maybe_rule(v)
    # a container passed to a call of user code may be written to there (``fill(out)``): values of
    # unknown kind are then active, as in a function that writes itself
    written = {ANY, ARR} if mutates else {ANY} if any(isinstance(v, Instr) and v.op == "call" for v in values) \
        else set()
    for v in values:
        v.active = False
    fixed = fixed if _fixed_inactive(values, mutates, fn.pure) else frozenset()
    _fixed_point(values, attrgetter("active"), lambda v, a: setattr(v, "active", a),
                 lambda v: _active(v, arg_kinds, written, fixed))


def _fixed_inactive(values, mutates: bool, pure) -> bool:
    """Whether the parameters that are not differentiated can be inactive: nothing writes to an array or an
    object (so no derivative can be written into one of them), every call is of a library function (a
    constant: ``np.sum(g, axis=1)``) or of a module global assumed to write nothing (``pure``: a compiled
    kernel, a write-free Python function), and no function is defined inside (a closure could write into a
    parameter it captured, called by a rule)."""
    return not mutates and all(v.op != "closure" and (v.op != "call" or is_constant(v.args[0])
                                                      or calls_write_free(v, pure))
                               for v in values if isinstance(v, Instr))


def _fixed_point(values, get, put, transfer) -> None:
    """The one driver of the analysis's fixed points: sweeping over ``values`` in order, ``put(v, x)``
    wherever ``x = transfer(v)`` differs from ``get(v)``, until a sweep changes nothing.  From the bottom
    (kinds ``None``, activity ``False``) this is the least fixed point, from the top (every value a
    Python int, ``python_ints``) the greatest."""
    changed = True
    while changed:
        changed = False
        for v in values:
            new = transfer(v)
            if new != get(v):
                put(v, new)
                changed = True


def _index_arrays_directly(fn: Function, values: list) -> bool:
    """A ``for`` loop (or comprehension) over an array indexes the array itself: the uses of
    ``as_sequence(x)`` (``lower.py``, which returns an array as it is) for an ``x`` of kind ``ARR`` become
    uses of ``x`` and the call is dropped, so ``for v in x`` reads entries as ``x[i]`` does (True when
    one was)."""
    same = {v: v.args[1] for v in values if isinstance(v, Instr) and v.op == "call" and len(v.args) == 2
            and not v.attr and _callee(v) is as_sequence and v.args[1].kind == ARR}
    if not same:
        return False
    for v in values:
        if isinstance(v, Phi):
            v.incoming = {b: same.get(u, u) for b, u in v.incoming.items()}
        else:
            v.args = [same.get(a, a) for a in v.args]
    for b in fn.blocks:
        b.instrs = [v for v in b.instrs if v not in same]
        b.term = tuple(same.get(t, t) if isinstance(t, Instr) else t for t in b.term)
    return True


def _writes(v, pure) -> bool:
    """Whether instruction ``v`` may write to an array or an object (``pure``: as for ``may_write``)."""
    return isinstance(v, Instr) and (v.op in ("setitem", "setattr") or _augmented(v) or method_writes(v)
                                     or v.op == "call" and may_write(v, pure))


def method_writes(v) -> bool:
    """Whether ``v`` is a call of a method that may write: to its object (``x.sort()``, ``lst.append(v)``) or,
    with ``out=``, to an array it is given (``x.sum(axis=1, out=o)``)."""
    return v.op == "method" and (not pure_method(v.attr[0]) or "out" in v.attr[1])


def may_write(v, pure=frozenset()) -> bool:
    """Whether a call may write to an array: with ``out=``, a rule that writes (``np.copyto``), or a call of
    user code given an array or a value that may hold one (``fill(y)``, ``fill([y])``), unless it calls a
    global function of ``pure`` (names of functions assumed to write nothing, ``write_free``)."""
    f = _callee(v)
    if "out" in v.attr or writes(rule_of(f)):
        return True
    return f is None and not calls_write_free(v, pure) and any(a.kind in (ARR, ANY) for a in v.args[1:])


def calls_write_free(v, pure) -> bool:
    """Whether ``call`` instruction ``v`` calls a module global named in ``pure`` (a function assumed to
    write nothing)."""
    c = v.args[0]
    return isinstance(c, Instr) and c.op == "global" and c.attr in pure


def write_free(f, _open=None) -> tuple | None:
    """The assumptions under which a call of Python function ``f`` writes to nothing (not its arguments,
    not anything else): the ``(globals, name, function, code)`` of the module globals it calls, and of those
    they call, as they are bound now; None where it may write (an item or attribute written, ``x op= y``
    on anything but a number, a method that may write, a rule that writes or ``out=``, a call of anything
    but a primitive or a module global bound to a Python function that writes to nothing), or where it
    cannot be transformed.  A function being analysed when it is called again (recursion) is assumed to."""
    code = f.__code__
    _open = set() if _open is None else _open
    if id(code) in _open:
        return ()
    _open.add(id(code))
    try:
        fn = lowered(f)[0]
        analyse(fn, (ANY,) * len(fn.params))
    except Exception:   # (outside the transformed subset: assume nothing)
        return None
    assumed = []
    for v in fn.values():
        if isinstance(v, Instr) and v.op == "call" and _callee(v) is None:
            c = v.args[0]
            sub = write_free_callee(f.__globals__, c.attr, f.__globals__.get(c.attr), _open) \
                if isinstance(c, Instr) and c.op == "global" and "out" not in v.attr else None
            if sub is None:
                return None
            assumed += sub
        elif _writes(v, frozenset()) or isinstance(v, Instr) and v.op == "rule" and writes(v.attr[0]):
            return None   # (after ``analyse`` a call of a primitive is a ``rule``: ``np.copyto(z, v)``)
    return tuple(assumed)


def write_free_callee(fglobals: dict, name: str, g, _open=None) -> tuple | None:
    """What a call of module global ``name`` (bound to ``g`` in ``fglobals``) writing nothing assumes: the
    binding ``(globals, name, g, code)`` then ``write_free``'s assumptions for a Python function; the binding
    alone (code None) for an object that declares it writes nothing (``__ad_write_free__``: a compiled
    kernel, which reads its inputs and returns new arrays); None where the call may write."""
    if type(g) is types.FunctionType:
        sub = write_free(g, _open)
        return None if sub is None else ((fglobals, name, g, g.__code__), *sub)
    if getattr(type(g), "__ad_write_free__", False):
        return ((fglobals, name, g, None),)
    return None


class _Returns:
    """The kinds that the functions of ``pure`` (name -> their ``write_free`` assumptions, the function's
    own first) return for arguments of given kinds: each analysed as it would be specialised (``ANY`` where
    it cannot be, and for a call of a function whose analysis is under way: recursion)."""

    def __init__(self, pure, open_):
        self.pure, self.open, self.memo = pure, open_, {}

    def __call__(self, name, kinds):
        key = (name, kinds)
        if key not in self.memo:
            self.memo[key] = self._kind(name, kinds)
        return self.memo[key]

    def _kind(self, name, kinds):
        assumed = self.pure[name]
        g = assumed[0][2]
        if type(g) is not types.FunctionType:   # (an object that writes nothing: its result's kind is unknown)
            return ANY
        code = g.__code__
        key = (id(code), kinds)
        if key in self.open or code.co_argcount != len(kinds) or code.co_kwonlyargcount \
                or code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS):
            return ANY
        try:
            fn = lowered(g)[0]
            fn.pure = {e[1]: (e, *assumed) for e in assumed if e[0] is g.__globals__}
            analyse(fn, kinds, _open=self.open | {key})
        except Exception:   # (outside the transformed subset)
            return ANY
        term = fn.exit.term if fn.exit is not None else None
        return (term[1].kind or ANY) if term and term[0] == "return" and hasattr(term[1], "kind") else ANY


def _augmented(v) -> bool:
    """An augmented assignment ``x op= y`` (``binop`` with ``attr`` ``"op="``)."""
    return isinstance(v, Instr) and v.op == "binop" and v.attr.endswith("=")


def _fix_kinds(values, arg_kinds, gk, aug_plain, reads, derived, returns=None, made=True):
    """The kinds of ``values`` (a fixed point); ``aug_plain``: augmented assignments count as their
    plain operation, else as ANY (an in-place write); ``reads``: the entries of vectors read;
    ``derived``: the ids of values assumed vectors (``ARR``); ``returns(v, kinds)``: the kind of call ``v``
    of a function assumed to write nothing, given its arguments' kinds; ``made``: the float arrays that
    ``np.zeros(shape)`` and its kind make are ``ARR`` (not in a function that writes)."""
    def transfer(v):
        if v.id in derived:
            return ARR
        if isinstance(v, Instr) and v.op == "global":
            k = gk.get(v.attr, ANY)
            return ARR if k == VEC else k
        if returns is not None and isinstance(v, Instr) and v.op == "call" and not v.attr \
                and calls_write_free(v, returns.pure):
            kinds = tuple(a.kind for a in v.args[1:])
            return None if None in kinds else returns(v.args[0].attr, kinds)
        if _augmented(v) and not aug_plain:
            return ANY
        return _kind(v, arg_kinds, reads, made)

    for v in values:
        v.kind = None
    _fixed_point(values, attrgetter("kind"), lambda v, k: setattr(v, "kind", k), transfer)


def _const_kind(value):
    k = kind_of(value)
    return ANY if k == CONST_KIND else k


def _kind(v, arg_kinds, reads, made=True):
    if isinstance(v, Phi):
        k = None
        for u in v.incoming.values():
            k = join(k, u.kind)
        return k
    op = v.op
    if op == "param":
        k = arg_kinds[v.attr[0]]
        return ANY if k == CONST_KIND else ARR if k == VEC else INT if k == PYINT else k
    if op == "const":
        return _const_kind(v.attr)
    if op == "compare" or op == "unary" and v.attr == "not":
        return INT
    kinds = [a.kind for a in v.args]
    if any(k is None for k in kinds):
        return None
    if op == "binop":
        a, b = kinds
        op = v.attr.rstrip("=") if _augmented(v) else v.attr
        if _array_binop(op, a, b):
            return ARR
        if a in (INT, NUM) and b in (INT, NUM) and op in _ARITH:
            return INT if a == b == INT and op not in ("/", "**") else NUM
        if a == b == INT and op in ("&", "|", "^", "<<", ">>"):
            return INT
        return ANY
    if op == "unary":
        return kinds[0] if kinds[0] in (INT, NUM) or kinds[0] == ARR and v.attr in ("-", "+") else ANY
    if op == "getitem" and kinds[0] == ARR and kinds[1] == INT:
        return NUM if v in reads else ARR   # an entry (a NumPy scalar) or a sub-array; a vector's: a number
    if op == "getitem" and kinds[0] == ARR and isinstance(v.args[1], Instr) and v.args[1].op == "slice":
        return ARR
    if _array_inline(v) is not None:
        return NUM if _array_inline(v).reduce or kinds[-1] != ARR else ARR
    f = _callee(v)
    if f is not None:
        if made and makes_float_array(f) and len(v.args) == 2 and not v.attr:
            return ARR
        if int_result(f):
            return INT
        if scalar_call(f) is not None and all(k in (INT, NUM) for k in kinds[1:]) and not v.attr:
            return INT if int_preserving(f) and all(k == INT for k in kinds[1:]) else NUM
    return ANY


def indexed_by_ints(fn: Function, arg_kinds: tuple) -> tuple[list, set]:
    """The arrays read at a Python-int index (``x[i]``), and the positions of the int arguments that some
    such index is computed from: specialised again with the arguments among those arrays assumed to be
    vectors (``VEC``) and those int arguments Python ints (``PYINT``), their entries are numbers with the
    inlined scalar rules.  The arrays are arguments, globals, and what the function makes (``ARR`` values
    other than phis, and results of rules: assumed vectors where they are made)."""
    values = list(fn.values())
    ints = python_ints(values, tuple(PYINT if k == INT else k for k in arg_kinds))
    plain = python_ints(values)
    reads = [v for v in values if isinstance(v, Instr) and v.op == "getitem" and v.args[1] in ints
             and isinstance(v.args[0], Instr) and (v.args[0].op in ("param", "global", "rule")
                                                   or v.args[0].kind == ARR and not _entry(v.args[0], ints))]
    params, todo, seen = set(), [v.args[1] for v in reads if v.args[1] not in plain], set()
    while todo:   # the int arguments these indices are computed from
        v = todo.pop()
        if v in seen:
            continue
        seen.add(v)
        if isinstance(v, Instr) and v.op == "param":
            params.add(v.attr[0])
        todo += [u for u in (v.incoming.values() if isinstance(v, Phi) else v.args) if u in ints]
    return [v.args[0] for v in reads], params


def _entry(v, ints) -> bool:
    """Whether ``v`` is ``x[i]`` at a Python int (an entry, or a row of an array that is not a vector)."""
    return v.op == "getitem" and v.args[1] in ints


def restartable(fn: Function) -> bool:
    """Whether box-free ``fn`` can be run again from its start with no effect but its result: its calls
    without derivative are of primitives without effect (``rules.effect_free``; its other calls are of
    NumPy's rules), so a specialisation of it may hand over to another one midway."""
    return all(not isinstance(v, Instr) or v.op != "nondiff" or isinstance(v.args[0], Instr)
               and v.args[0].op == "const" and effect_free(v.args[0].attr) for v in fn.values())


def _entry_reads(values, arg_kinds, gk, derived) -> set:
    """The reads ``x[i]`` of an entry of a vector (an argument or global of kind ``VEC``, or a value in
    ``derived``) at a Python int."""
    ints = python_ints(values, arg_kinds)

    def vector(x):
        return isinstance(x, Instr) and (x.op == "param" and arg_kinds[x.attr[0]] == VEC
                                         or x.op == "global" and gk.get(x.attr) == VEC or x.id in derived)
    return {v for v in values if isinstance(v, Instr) and v.op == "getitem" and vector(v.args[0])
            and v.args[1] in ints}


_INT_OPS = {"+", "-", "*", "//", "%"}
_INT_KEEPING = (abs, min, max)   # of Python ints, a Python int


def python_ints(values, arg_kinds=()) -> set:
    """The values that are Python ints, never bools (``x[i]`` of a vector is then a number, where
    ``x[True]`` is an array): int constants, arguments of kind ``PYINT``, ``len(...)``, ``int(...)``,
    ``+ - * // %`` and ``-i``, ``abs``, ``min`` and ``max`` of those, and phis of those (a greatest fixed
    point, so that a loop counter is one)."""
    def is_int(v, found):
        if isinstance(v, Phi):
            return all(u in found for u in v.incoming.values())
        if v.op == "const":
            return type(v.attr) is int
        if v.op == "param":
            return v.attr[0] < len(arg_kinds) and arg_kinds[v.attr[0]] == PYINT
        if v.op == "binop" or v.op == "unary" and v.attr == "-":
            return v.attr.rstrip("=") in _INT_OPS and all(a in found for a in v.args)
        if v.op == "prim":   # (min, max, abs on ints are inlined once analysed)
            f, args = v.attr[0], v.args
        elif v.op in ("call", "nondiff") and v.args and not v.attr and isinstance(v.args[0], Instr) \
                and v.args[0].op == "const":
            f, args = v.args[0].attr, v.args[1:]
        else:
            return False
        if f is len or f is int:
            return len(args) == 1
        return any(f is g for g in _INT_KEEPING) and len(args) > 0 and all(a in found for a in args)

    found = set(values)
    _fixed_point(values, found.__contains__, lambda v, keep: found.add(v) if keep else found.discard(v),
                 lambda v: is_int(v, found))
    return found


def _array_binop(op, a, b) -> bool:
    """``a op b`` on an array and an array or number: arithmetic inlined for arrays."""
    if op == "@":
        return a == b == ARR
    if op not in ARRAY_BINOPS or ARR not in (a, b) or a not in (INT, NUM, ARR) or b not in (INT, NUM, ARR):
        return False
    return op != "**" or a == ARR and b in (INT, NUM)


def _array_inline(v):
    """The ``rules.numpy.ArrayInline`` entry for a call (or an argument-less method call) of a NumPy
    function on an array, or on a number for elementwise functions; None when the rule is not inlined."""
    if v.op == "method":
        name, kw = v.attr
        f = array_method(name)
        if f is None or kw or len(v.args) != 1 or v.args[0].kind != ARR:
            return None
        return array_call(f)
    f = _callee(v)
    entry = None if f is None or v.attr or len(v.args) != 2 else array_call(f)
    if entry is None:
        return None
    k = v.args[1].kind
    if k == ARR or k in (INT, NUM) and not entry.reduce:
        return entry
    return None


def _callee(v):
    """The function a ``call`` calls when it is a constant (known when transforming), else None."""
    if v.op != "call":
        return None
    f = v.args[0]
    return f.attr if isinstance(f, Instr) and f.op == "const" else None


def _maybe_inline(v: Instr):
    entry = _array_inline(v)
    if entry is not None:
        f = array_method(v.attr[0]) if v.op == "method" else v.args[0].attr
        v.op, v.args, v.attr = "aprim", v.args[-1:], (f, entry.name)
        return
    f = _callee(v)
    inline = None if f is None or v.attr else scalar_call(f)
    if inline is None:
        return
    args = v.args[1:]
    if all(a.kind in (INT, NUM) for a in args) and inline.arity(len(args)):
        v.op, v.args, v.attr = "prim", args, (f, inline.name)


def _maybe_rule(v: Instr):
    """A call of a primitive known when transforming becomes ``rule``: its rule is called directly."""
    f = _callee(v)
    if f is None or v.attr:
        return
    rule = rule_of(f)
    if is_nondiff(f):
        v.op, v.args, v.attr = "nondiff", v.args, None
    elif rule is not None:
        v.op, v.args, v.attr = "rule", v.args[1:], (rule, getattr(f, "__name__", repr(f)))


NEVER_ACTIVE = (INT, PYINT, CONST_KIND)   # the kinds of arguments that are never differentiated


def _active(v, arg_kinds, written, fixed):
    if v.kind == INT:
        return False
    if isinstance(v, Phi):
        return any(u.active for u in v.incoming.values())
    op = v.op
    if op == "param":
        return v.attr[0] not in fixed and arg_kinds[v.attr[0]] not in NEVER_ACTIVE
    if op in ("const", "compare", "slice"):
        return False
    # an array np.zeros makes, or a global list, becomes active when an active value is written in
    if op in ("nondiff", "global"):
        return v.kind in written
    if op == "deref":
        return True
    if op == "binop" and v.attr in ("//", "&", "^", "<<", ">>"):   # (``|`` merges dicts)
        return False
    if v.kind in written:
        return True
    return any(a.active for a in v.args)


def loop_blocks(fn: Function) -> set:
    """Blocks that lie on a cycle of the CFG (can execute more than once per call)."""
    result = set()
    for b in fn.blocks:
        seen, todo = set(), list(b.succs)
        while todo:
            x = todo.pop()
            if x is b:
                result.add(b)
                break
            if x not in seen:
                seen.add(x)
                todo.extend(x.succs)
    return result


def reverse_postorder(fn: Function) -> list:
    order, seen = [], set()

    def visit(b):
        seen.add(b)
        for s in reversed(b.succs):
            if s not in seen:
                visit(s)
        order.append(b)

    visit(fn.blocks[0])
    rest = [b for b in fn.blocks if b not in seen]
    return order[::-1] + rest
