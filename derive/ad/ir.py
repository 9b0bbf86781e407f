"""The SSA IR of the AD layer: a function is a list of basic blocks; a block holds phi nodes, straight-line
instructions and one terminator.  Every instruction and phi defines one SSA value (``%n``).

Instruction ops (``Instr.op``) and their static data (``Instr.attr``):

=============  ======================================  =============================================
op             args                                    attr
=============  ======================================  =============================================
``param``      --                                      (index, name)
``const``      --                                      the Python value
``global``     --                                      the name (looked up in the module at run time)
``deref``      --                                      the captured variable's name (closure cell)
``binop``      a, b                                    operator symbol (``+``, ``*``, ``@`` ...)
``unary``      a                                       ``-``, ``+``, ``not``, ``~``
``compare``    a, b                                    ``<``, ``==``, ``is``, ``in`` ...
``prim``       args                                    (function, name): inlined scalar primitive
``aprim``      arg                                     (function, name): inlined NumPy primitive
``rule``       args                                    (rule, name): a primitive with a rule
``nondiff``    f, args...                              --: a call without derivative
``call``       f, args..., kwargs...                   keyword names
``method``     obj, args..., kwargs...                 (method name, keyword names)
``getattr``    obj                                     attribute name
``setattr``    obj, value                              attribute name
``getitem``    obj, index                              --
``setitem``    obj, index, value                       --
``tuple``      elements                                --
``list``       elements                                --
``dict``       keys and values, interleaved            --
``slice``      lower, upper, step                      --
``closure``    captured values                         (factory index, captured names, the function's own
                                                       name where it calls itself, else None)
=============  ======================================  =============================================

Terminators: ``("jump", block)``, ``("branch", cond, then_block, else_block)``, ``("return", value)``
and ``("raise", value)``.
"""
from __future__ import annotations

import numbers
import types
import weakref

import numpy as np

# value kinds found by analysis: known int/bool (never differentiated), known scalar number, anything;
# ARR: a NumPy array (or NumPy scalar) made by an inlined NumPy operation, handled as ANY wherever no
# inlined array rule applies; VEC, a kind of arguments only: a 1-D real array (an assumption that a
# specialisation checks when it is entered), an ARR whose entries ``x[i]`` are numbers; PYINT, a kind of
# arguments only: an INT that is a Python int, never a bool or a NumPy int (checked likewise), so that
# ``x[k]`` is an entry
INT, NUM, ANY, ARR, VEC, PYINT = "int", "num", "any", "arr", "vec", "pyint"
CONST_KIND = "const"  # a specialisation kind: strings, None and the like (ANY, never differentiated)

_KINDS: dict[type, str] = {}


ARRAY_TYPES: set = set()   # types other than np.ndarray whose values are arrays, of kind ANY (batching.Batched)


def is_array(x) -> bool:
    """Whether ``x`` is an array: NumPy's, or of a type of ``ARRAY_TYPES`` (a batch of ``ad.vmap``)."""
    return type(x) is np.ndarray or type(x) in ARRAY_TYPES


def memory_owner(x):
    """The array that owns the memory of view ``x``."""
    while type(x.base) is np.ndarray:
        x = x.base
    return x


class Memory:
    """The arrays that the values of one kind hold (the batches of one ``ad.vmap`` call, the stand-ins of one
    recording), by the array that owns their memory: which values hold each (a value and its views: a slice, a
    reshape, a transpose), and how many writes into it a derivative has followed.  ``tensorlang.ad`` follows writes
    through views of NumPy's arrays, not of those values, so a derivative refuses a write that another live one
    would see (``check_write``)."""

    __slots__ = ("owners",)

    def __init__(self):
        # id of the owning array -> [a weak reference to it, weak references to its values, the writes followed]
        self.owners: dict = {}

    def hold(self, data, value) -> int:
        """Note that ``value`` holds ``data``'s memory; the writes into that memory followed so far."""
        if type(data) is not np.ndarray:
            return 0
        owner = data if data.base is None else memory_owner(data)
        held = self.owners.get(id(owner))
        if held is None or held[0]() is not owner:   # (a new array, or one made where a dead one was)
            self.owners[id(owner)] = [weakref.ref(owner), [weakref.ref(value)], 0]
            return 0
        if len(held[1]) >= 8:
            held[1][:] = [r for r in held[1] if r() is not None]
        held[1].append(weakref.ref(value))
        return held[2]

    def _held(self, data):
        if type(data) is not np.ndarray:
            return None
        owner = data if data.base is None else memory_owner(data)
        held = self.owners.get(id(owner))
        return held if held is not None and held[0]() is owner else None

    def shared(self, data) -> bool:
        """Whether more than one live value holds ``data``'s memory."""
        held = self._held(data)
        return held is not None and sum(r() is not None for r in held[1]) > 1

    def written(self, data) -> int:
        """Count a write into ``data``'s memory that a derivative follows; the writes followed now."""
        held = self._held(data)
        if held is None:
            return 0
        held[2] += 1
        return held[2]

    def writes(self, data) -> int:
        """The writes into ``data``'s memory that a derivative followed."""
        held = self._held(data)
        return 0 if held is None else held[2]


def check_write(x) -> None:
    """Before a derivative follows a write into ``x``, an array of a type of ``ARRAY_TYPES`` (whose memory the
    runtime does not follow): that type's own check, ``__ad_written__`` (a batch of ``ad.vmap`` refuses a write
    into memory another batch shares)."""
    check = getattr(type(x), "__ad_written__", None)
    if check is not None:
        check(x)


def memory_of(x):
    """The NumPy array that holds the values of ``x``, for a type of ``ARRAY_TYPES`` that names it
    (``__ad_memory__``: a recording's stand-in, whose value is the array), else ``x`` itself."""
    memory = getattr(type(x), "__ad_memory__", None)
    return x if memory is None else memory(x)


def own_tangent(x, t):
    """The tangent ``t`` of ``x`` as its array type keeps tangents (``__ad_tangent__``: a batch of ``ad.vmap`` makes a
    plain tangent, the same for every example, a batch of its own), so that a write into ``x`` writes its tangent
    in place, where every name of ``x`` sees it; ``t`` itself for other values."""
    own = getattr(type(x), "__ad_tangent__", None)
    return t if own is None or t is None else own(x, t)


def writable_array(x) -> bool:
    """Whether ``x`` is an array that ``x op= y`` writes into: ``is_array``, but not a stand-in of a recording that
    holds a number, nor a batch of numbers (``__ad_number__``), which Python rebinds."""
    return type(x) is np.ndarray or type(x) in ARRAY_TYPES and not isinstance(x, (np.generic, float, complex)) \
        and not getattr(x, "__ad_number__", False)


def extends_list(a, b) -> bool:
    """Whether ``a += b`` extends list ``a`` by ``b``'s items, as Python does unless ``b`` is a NumPy value (an
    array, a NumPy number, a batch or stand-in of one), whose ``+`` takes precedence and adds the list as an array."""
    return type(a) is list and not isinstance(b, (np.ndarray, np.generic)) and type(b) not in ARRAY_TYPES


def kind_of(x) -> str:
    """The kind of a run-time value: ``INT`` (ints, bools), ``NUM`` (other numbers), ``CONST_KIND``
    (strings, None ...) or ``ANY``."""
    t = type(x)
    k = _KINDS.get(t)
    if k is None:
        if issubclass(t, (bool, int, np.integer, np.bool_)):
            k = INT
        elif issubclass(t, (complex, np.complexfloating)):
            k = ANY   # through the generic rules, which follow the complex convention (rules.complexes)
        elif issubclass(t, numbers.Number):
            k = NUM
        elif issubclass(t, (str, bytes, type(None), type, types.ModuleType, range, slice)):
            k = CONST_KIND
        else:
            k = ANY
        _KINDS[t] = k
    return k


def spec_kind(x) -> str:
    """The kind a specialisation is made for: ``kind_of``, except that a plain ``np.ndarray`` is ``ARR``
    (its NumPy operations are inlined into the generated code) unless it is complex."""
    return ARR if type(x) is np.ndarray and x.dtype.kind != "c" else kind_of(x)


class Value:
    """An SSA value; ``kind`` and ``active`` are filled in by ``analysis``."""

    __slots__ = ("id", "kind", "active")

    def __init__(self, vid: int):
        self.id = vid
        self.kind = ANY
        self.active = True

    @property
    def name(self) -> str:
        return f"%{self.id}"

    def __repr__(self):
        return self.name


def has_gradient(v: Value) -> bool:
    """Whether generated code keeps a gradient for ``v``: an active value that is neither a whole number nor
    a constant."""
    return v.active and v.kind != INT and not is_constant(v)


def is_constant(v: Value) -> bool:
    return isinstance(v, Instr) and v.op == "const"


class Instr(Value):
    """``%id = op(args...)`` with static data ``attr``; ``line`` is the source line it came from."""

    __slots__ = ("op", "args", "attr", "line")

    def __init__(self, vid, op, args=(), attr=None, line=0):
        super().__init__(vid)
        self.op = op
        self.args = list(args)
        self.attr = attr
        self.line = line


class Phi(Value):
    """``%id = φ(pred → value, ...)``: one incoming value per predecessor of ``block``."""

    __slots__ = ("block", "incoming", "var", "users", "replaced")

    def __init__(self, vid, block, var):
        super().__init__(vid)
        self.block = block
        self.var = var
        self.incoming: dict[Block, Value] = {}
        self.users: list[Phi] = []
        self.replaced: Value | None = None


class Block:
    """A basic block: ``preds`` in insertion order, ``phis``, ``instrs`` and ``term``."""

    def __init__(self, bid: int):
        self.id = bid
        self.preds: list[Block] = []
        self.phis: list[Phi] = []
        self.instrs: list[Instr] = []
        self.term: tuple | None = None

    @property
    def succs(self) -> list["Block"]:
        t = self.term
        if t is None or t[0] in ("return", "raise"):
            return []
        return [t[1]] if t[0] == "jump" else [t[2], t[3]]

    def __repr__(self):
        return f"#{self.id}"


class Function:
    """A function in SSA form: ``blocks[0]`` is the entry, ``exit`` the single return block."""

    def __init__(self, name: str, params: list[str], filename: str, freevars: tuple[str, ...]):
        self.name = name
        self.params = params
        self.filename = filename
        self.freevars = freevars
        self.blocks: list[Block] = []
        self.exit: Block | None = None
        self.factories: list[str] = []      # source of nested functions (closure instructions)
        self.factory_nodes: list = []       # their AST nodes, to transform them in turn
        self.pure: dict = {}                # global functions assumed to write nothing: name -> ``write_free``'s assumptions
        self.purity: tuple = ()             # what that assumes: (globals, name, function, code), checked by the entries

    def values(self):
        for b in self.blocks:
            yield from b.phis
            yield from b.instrs

    def __str__(self):
        return format_function(self)


def _fmt_attr(ins: Instr) -> str:
    op, a = ins.op, ins.attr
    if op == "param":
        return a[1]
    if op == "const":
        return repr(a)
    if op in ("global", "deref"):
        return a
    if op in ("prim", "aprim", "rule"):
        return a[1]
    if op == "closure":
        return f"λ{a[0]}[{', '.join(a[1])}]"
    if op == "method":
        return "." + a[0]
    if op in ("getattr", "setattr"):
        return "." + a
    return "" if a is None or a == () else str(a)


def format_instr(ins: Instr) -> str:
    args = ", ".join(v.name for v in ins.args)
    attr = _fmt_attr(ins)
    tag = "" if ins.kind == ANY else f" ::{ins.kind}"
    body = f"{ins.op} {attr}".rstrip()
    return f"{ins.name} = {body}({args}){tag}" if args or ins.op not in ("param", "const", "global", "deref") \
        else f"{ins.name} = {body}{tag}"


def format_function(fn: Function) -> str:
    """Zygote-style listing: blocks, phis with their incoming edges, instructions with kinds, terminators."""
    lines = [f"{fn.name}({', '.join(fn.params)})"]
    for b in fn.blocks:
        preds = f"  ← {', '.join(repr(p) for p in b.preds)}" if b.preds else ""
        lines.append(f"{b!r}:{preds}")
        for p in b.phis:
            inc = ", ".join(f"{blk!r} → {v.name}" for blk, v in p.incoming.items())
            lines.append(f"  {p.name} = φ({inc})  # {p.var}")
        for ins in b.instrs:
            lines.append("  " + format_instr(ins))
        t = b.term
        if t[0] == "jump":
            lines.append(f"  goto {t[1]!r}")
        elif t[0] == "branch":
            lines.append(f"  goto {t[2]!r} if {t[1].name} else {t[3]!r}")
        else:
            lines.append(f"  {t[0]} {t[1].name}")
    return "\n".join(lines)
