"""Differentiating a Python function whose source Python kept nowhere (compiled from a string by ``exec``,
``eval`` or ``compile``) by recording it.

The function runs once, at the point it is differentiated at, on stand-ins of its arguments (``Traced``):
each operation on a stand-in (an operator, an index, a write, a method, a NumPy function or ufunc, a call of
``math``, ``float``, a compiled kernel) computes its value and writes itself as one line of a straight-line
Python function of the same arguments, the recording.  Branches and loops run as they run at that point, so
the recording is the function there.  The recording's text is kept in ``linecache`` and differentiated in the
function's place by the same transform and the same primitive rules as any function, in every mode; equal
recordings share their compiled code (the values the function reads that do not depend on its arguments are
the recording's constants, captured by a closure).  A recording is made per call, since another point may
take another branch.

The user's own functions that it calls run on the stand-ins too, their NumPy, ``math`` and ``float`` recorded
the same way.  What cannot be recorded is refused by name (``UnsupportedError``), never followed silently: a
value that depends on the arguments converted by code the recording does not see (a library function's
``float`` or ``np.asarray``), written into an array the recording does not follow (a ufunc's ``out=``,
``np.add.at`` into a global array), used as a key, or held by an object the function returns or takes as an
argument to differentiate.
"""
from __future__ import annotations

import builtins
import cmath
import hashlib
import math
import operator
import os
import re
import sys
import threading
import types

import numpy as np

from ...errors import UnsupportedError, internal_file, library_file
from .ir import ARRAY_TYPES, Memory
from .runtime import NONDIFF, RECORDED, RULES, ZERO, J, differentiable, filled
from .source import generated, kept

_MODULES = {np: "np", np.linalg: "np.linalg", np.fft: "np.fft", math: "math", cmath: "cmath"}
_ENV = {"np": np, "math": math, "cmath": cmath}   # (and ``_ad_made``: ``made``, below)
_KEPT = 256   # recordings whose compiled code is kept (by their text)
RECORDING_FILE = "<recording of "   # (the start of the file name of a recording's code)
_CODE: dict[str, types.FunctionType] = {}
_LOCK = threading.Lock()
# NumPy functions that write into their first argument
_WRITES_FIRST = frozenset({np.copyto, np.put, np.place, np.putmask, np.fill_diagonal, np.put_along_axis})

WHY = ("it has no source (compiled from a string by exec, eval or compile), so tensorlang.ad differentiates the "
       "recording of its operations at this point")
# what a recording is for, as its refusals say it: where the operation was, and the way out
NO_SOURCE = (f"in a function whose source it does not have ({WHY})",
             "write it with NumPy operations, or define the function with ad.define(text) so that its source is "
             "differentiated")


class Recording:
    """The lines of one recording, its constants (the values it reads that no argument gives; one name per
    object) and the count of its values."""

    def __init__(self, why=NO_SOURCE):
        self.why = why   # (``NO_SOURCE``, or a tower's: ``refused``)
        self.thread = threading.get_ident()   # (recorded in the thread that records; another's operations refused)
        self.lines: list[str] = []
        self.constants: list = []
        self._names: dict[int, str] = {}
        self.count = 0
        self.stand_in: str | None = None   # (the name of one stand-in of a number or an array: ``made``)
        self.memory = Memory()   # (which stand-ins share memory: ``Traced.__ad_written__``)
        self.rereads: set[str] = set()   # (the lines ``augmented`` adds, left out where nothing uses them: ``live``)

    def constant(self, value) -> str:
        name = self._names.get(id(value))
        if name is None:
            name = self._names[id(value)] = f"k{len(self.constants)}"
            self.constants.append(value)
        return name

    def assign(self, expr: str) -> str:
        name = f"v{self.count}"
        self.count += 1
        self.lines.append(f"{name} = {expr}")
        return name

    def result(self, expr: str, value):
        """``value``, computed by ``expr`` from recorded values, as the recording sees it: a number or an array
        as a new ``Traced``; a tuple or list holding some as the same container of them (each its entry of the
        recorded container); anything else (an int, a shape, None) as it is, ``expr`` kept as a statement for
        what it may write."""
        if _followed(value):
            return Traced(value, self.assign(expr), self)
        if _holds_followed(value):
            name = self.assign(expr)
            items = [self.result(f"{name}[{i}]", x) for i, x in enumerate(value)]
            return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
        self.lines.append(expr)
        return value

    def augmented(self, target: str, v) -> bool:
        """Records ``target = v`` (``target`` an item of a recorded array, ``a[k]``) as ``a[k] op= w`` where the
        lines before it are Python's steps of that augmented assignment (``v = a[k]``, the lines that compute
        ``w``, none naming ``v``, and ``v op= w`` last), ``v`` read again after it: the recording then writes
        through no view of ``a`` (``v`` is one for a slice), which a derivative run on stand-ins refuses
        (``Traced.__ad_written__``).  Whether it did so."""
        if type(v) is not Traced or v._tl_rec is not self or not self.lines:
            return False
        name, last = v._tl_name, self.lines[-1]
        op, _, w = last.removeprefix(name + " ").partition("= ")
        read = f"{name} = {target}"
        if not last.startswith(name + " ") or op not in _AUGMENTED or read not in self.lines:
            return False
        i = len(self.lines) - 1 - self.lines[::-1].index(read)
        if any(re.search(rf"\b{name}\b", line) for line in self.lines[i + 1:-1]):
            return False
        del self.lines[i]
        self.lines[-1] = f"{target} {op}= {w}"
        self.lines.append(read)
        self.rereads.add(read)
        return True

    def render(self, v) -> str:
        """Python text for operand ``v`` in a line of this recording."""
        t = type(v)
        if t is Traced:
            if v._tl_rec is not self:
                raise UnsupportedError(f"a value recorded while differentiating another call was kept and used here; "
                                       f"{WHY}")
            if threading.get_ident() != self.thread:
                raise refused("an operation in another thread (a thread pool's map)", self.why)
            if v._tl_writes != self.memory.writes(v._tl_value):
                raise refused("a value used after a write into the array whose memory it shares (a view read "
                              "before the write)", self.why)
            return v._tl_name
        if v is None or v is Ellipsis or t is bool or t is int or t is str:
            return repr(v)
        if t is tuple:
            return "(" + "".join(self.render(x) + ", " for x in v) + ")"
        if t is list:
            return "[" + ", ".join(map(self.render, v)) + "]"
        if t is slice:
            return f"slice({self.render(v.start)}, {self.render(v.stop)}, {self.render(v.step)})"
        if t is dict and all(type(k) in (str, int) for k in v):
            return "{" + ", ".join(f"{k!r}: {self.render(x)}" for k, x in v.items()) + "}"
        if v is RecordedFloat or v is RecordedComplex:
            return v.__name__.removeprefix("Recorded").lower()
        if isinstance(v, tuple) and _holds(v):   # a named tuple of recorded values
            return f"{self.constant(type(v))}({', '.join(map(self.render, v))})"
        return self.constant(v)

    def key(self, key) -> str:
        """``key`` as the text between the brackets of an index."""
        if type(key) is tuple and key:
            return ", ".join(map(self._key_part, key)) + ("," if len(key) == 1 else "")
        return self._key_part(key)

    def _key_part(self, k) -> str:
        if type(k) is slice:
            parts = ["" if p is None else self.render(p) for p in (k.start, k.stop, k.step)]
            return ":".join(parts) if parts[2] else ":".join(parts[:2])
        return self.render(k)

    def call(self, fexpr: str, args, kwargs) -> str:
        parts = [self.render(a) for a in args] + [f"{k}={self.render(v)}" for k, v in kwargs.items()]
        return f"{fexpr}({', '.join(parts)})"


def _followed(value) -> bool:
    """Whether the recording follows ``value`` as a value of its own: a number or an array (a batch of
    ``ad.vmap`` too)."""
    return isinstance(value, (float, complex, np.ndarray, np.inexact, np.flatiter)) and type(value) is not bool \
        or type(value) in ARRAY_TYPES


def _holds_followed(value) -> bool:
    return isinstance(value, (tuple, list)) and any(_followed(x) or _holds_followed(x) for x in value)


def _holds(v) -> bool:
    """Whether ``v`` is a recorded value or a tuple, list or dict holding one."""
    t = type(v)
    if t is Traced:
        return True
    if isinstance(v, (tuple, list)):
        return any(map(_holds, v))
    if t is dict:
        return any(map(_holds, v.values()))
    if t is slice:
        return _holds((v.start, v.stop, v.step))
    return False


def concrete(v):
    """``v`` with each recorded value replaced by the value it stands for."""
    t = type(v)
    if t is Traced:
        return v._tl_value
    if t is tuple or t is list:
        return t(map(concrete, v)) if _holds(v) else v
    if t is dict:
        return {k: concrete(x) for k, x in v.items()} if _holds(v) else v
    if t is slice:
        return slice(concrete(v.start), concrete(v.stop), concrete(v.step)) if _holds(v) else v
    if isinstance(v, tuple) and _holds(v):
        return type(v)(*map(concrete, v))
    return v


def _recording_of(args, kwargs=None) -> Recording:
    for v in list(args) + list((kwargs or {}).values()):
        if type(v) is Traced:
            return v._tl_rec
        if isinstance(v, (tuple, list, dict)):
            inner = _recording_of(v.values() if type(v) is dict else v)
            if inner is not None:
                return inner
    return None


def refused(what: str, why=NO_SOURCE) -> UnsupportedError:
    """The refusal of what a recording cannot follow; ``why``: what the recording is for (``Recording.why``)."""
    where, way_out = why
    return UnsupportedError(f"tensorlang.ad cannot record {what} {where}: {way_out}")


def _converted_at() -> str:
    """`` at FILE:LINE in FUNCTION`` of the user's code that converted a stand-in, and the rule of tensorlang.ad
    that did where it was one (``(by tensorlang.ad's rule FUNCTION, FILE:LINE)``), for a refusal to name."""
    frame, rule = sys._getframe(2), None
    while frame is not None and (frame.f_code.co_filename == __file__ or internal_file(frame.f_code.co_filename)
                                 or library_file(frame.f_code.co_filename)):
        if rule is None and internal_file(frame.f_code.co_filename) and frame.f_code.co_filename != __file__:
            rule = frame
        frame = frame.f_back
    where = "" if frame is None else f" at {frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}"
    if rule is None:
        return where
    return f"{where} (by tensorlang.ad's rule {rule.f_code.co_name}, " \
           f"{os.path.basename(rule.f_code.co_filename)}:{rule.f_lineno})"


class Traced:
    """A value of the function being recorded that depends on its arguments: its value (``_tl_value``), its name
    in the recording (``_tl_name``) and the recording (``_tl_rec``).  It answers ``isinstance`` as its value
    does; whatever it cannot record it refuses."""

    __slots__ = ("_tl_value", "_tl_name", "_tl_rec", "_tl_writes", "__weakref__")
    __array_priority__ = 1000

    def __init__(self, value, name, rec):
        self._tl_value, self._tl_name, self._tl_rec = value, name, rec
        self._tl_writes = rec.memory.hold(value, self)   # (the writes into its memory it has seen: ``render``)

    @property
    def __class__(self):   # (isinstance(x, np.ndarray) and isinstance(x, float) answer as for the value)
        return type(self._tl_value)

    def __repr__(self):
        return repr(self._tl_value)

    def __str__(self):
        return str(self._tl_value)

    def __format__(self, spec):
        return format(self._tl_value, spec)

    def __ad_memory__(self):
        """The value, whose memory a derivative run on this stand-in asks about (``ir.memory_of``)."""
        return self._tl_value

    def __ad_written__(self):
        """Called by ``tensorlang.ad`` before a derivative follows a write into this stand-in (``ir.check_write``).
        A derivative follows a write through a view of NumPy's array to the array, and a view read before a
        write into the array it views to the values it had, but not so for stand-ins: a write into a view of
        memory another stand-in holds is refused, and a write into an array makes the stand-ins read out of it
        before stale (``Recording.render`` refuses them from then on; one read again after the write is not)."""
        memory, value = self._tl_rec.memory, self._tl_value
        if type(value) is np.ndarray and value.base is not None and memory.shared(value):
            raise refused("a write through a view of an array another value holds (a slice, a reshape, a transpose "
                          "... of it)", self._tl_rec.why)
        self._tl_writes = memory.written(value)

    # -- what the recording does not follow -------------------------------------------------------------
    def __float__(self):
        raise refused("a conversion to a Python float by code it does not see (math in a function that has its "
                       f"source, or float reached other than by its name){_converted_at()}", self._tl_rec.why)

    def __complex__(self):
        raise refused(f"a conversion to a Python complex number by code it does not see{_converted_at()}",
                      self._tl_rec.why)

    def __array__(self, dtype=None, copy=None):
        """An array of integers or booleans has no derivative: its values, read-only (an index or a mask into
        an array the recording does not hold, ``w[np.argsort(x)]``, ``w[x > 0]``; a write into them would
        change what the recording does not see). Other values are refused."""
        value = np.asarray(self._tl_value)
        if value.dtype.kind not in "biu":
            raise refused("a conversion to a NumPy array by code it does not see (np.asarray in a function that "
                          f"has its source, a value written into an array it does not follow){_converted_at()}",
                          self._tl_rec.why)
        if copy or dtype is not None and np.dtype(dtype) != value.dtype:
            return value.astype(dtype or value.dtype)   # (a copy of its own, which a write may change)
        view = value.view()
        view.flags.writeable = False
        return view

    def __hash__(self):
        raise refused("a value that depends on the arguments used as a key (of a dict or a set)", self._tl_rec.why)

    # -- what has no derivative: the value itself -----------------------------------------------------------
    def __bool__(self):
        return bool(self._tl_value)

    def __index__(self):
        return operator.index(self._tl_value)

    def __int__(self):
        return int(self._tl_value)

    def __len__(self):
        return len(self._tl_value)

    def __round__(self, n=None):
        return round(self._tl_value, n)

    def __trunc__(self):
        return math.trunc(self._tl_value)

    def __floor__(self):
        return math.floor(self._tl_value)

    def __ceil__(self):
        return math.ceil(self._tl_value)

    def __contains__(self, item):
        return concrete(item) in self._tl_value

    # -- what is recorded ---------------------------------------------------------------------------------
    def zeros(self, shape, dtype):
        """Zeros of ``shape`` and ``dtype`` as a recorded array (the runtime makes the zeros of an array of a type
        of ``ARRAY_TYPES`` so, writing into them what depends on it: ``tower``), made like this value, so that the
        recording run on stand-ins makes them as stand-ins too."""
        rec = self._tl_rec
        return rec.result(rec.call("np.zeros_like", (self,), {"shape": shape, "dtype": dtype}), np.zeros(shape, dtype))

    def __iter__(self):
        return (self[i] for i in range(len(self._tl_value)))

    def __getitem__(self, key):
        rec = self._tl_rec
        return rec.result(f"{self._tl_name}[{rec.key(key)}]", self._tl_value[concrete(key)])

    def __setitem__(self, key, v):
        rec = self._tl_rec
        self._tl_value[concrete(key)] = concrete(v)
        target = f"{self._tl_name}[{rec.key(key)}]"
        if not rec.augmented(target, v):
            rec.lines.append(f"{target} = {rec.render(v)}")

    def __getattr__(self, name):
        if name.startswith("_tl_") or name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)   # (not the value's protocols: NumPy would read its data by __array_interface__)
        if name in _RAW:
            raise refused(f"a read of the memory of a value that depends on the arguments (.{name}), by code it does "
                          f"not see (a compiled extension's)", self._tl_rec.why)
        value = getattr(self._tl_value, name)
        if callable(value) and not isinstance(value, type):
            return _Method(self, name)
        if _followed(value) or _holds_followed(value):
            return self._tl_rec.result(f"{self._tl_name}.{name}", value)
        return value

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        rec = self._tl_rec
        outs = _written(rec, ufunc, inputs if method == "at" else (), kwargs)
        fexpr = _name_of(rec, ufunc)
        value = getattr(ufunc, method)(*concrete(inputs), **concrete(kwargs))
        text = rec.call(fexpr if method == "__call__" else f"{fexpr}.{method}", inputs, kwargs)
        if outs:
            rec.lines.append(text)
            return outs[0] if len(outs) == 1 else outs
        return rec.result(text, value)

    def __array_function__(self, func, types_, args, kwargs):
        rec = self._tl_rec
        _written(rec, func, args if func in _WRITES_FIRST else (), kwargs)
        value = func(*concrete(args), **concrete(kwargs))
        return rec.result(rec.call(_name_of(rec, func), args, kwargs), value)

    @staticmethod
    def __tl_kernel__(kernel, inputs):
        """A compiled kernel called with a stand-in where the recording does not name it (by a kernel's own
        derivative, its adjoint kernel, run on stand-ins: a third derivative's): recorded as a call, as
        ``_Call`` records the kernels the function names."""
        rec = next(v._tl_rec for v in inputs.values() if type(v) is Traced)
        value = kernel._call(concrete(inputs))
        return rec.result(rec.call(rec.constant(kernel), (), inputs), value)


# the attributes of an array that hand its memory to code the recording does not see
_RAW = frozenset({"ctypes", "data", "tobytes", "tofile", "tostring", "dumps", "dump"})


def _written(rec: Recording, fn, first: tuple, kwargs) -> tuple:
    """The arrays of ``out=`` that a call of ``fn`` writes into, each refused, as is the first of ``first`` (the
    argument it writes into, where it writes into one), where it is not a recorded value: a write the recording
    would not see."""
    out = kwargs.get("out")
    outs = out if isinstance(out, tuple) else () if out is None else (out,)
    if any(type(o) is not Traced for o in outs + first[:1] if o is not None):
        raise refused(f"{getattr(fn, '__name__', fn)} writing into an array that holds no recorded value", rec.why)
    return outs


def _binary(symbol: str, op, reflected=False):
    def method(self, other):
        rec = self._tl_rec
        a, b = (other, self) if reflected else (self, other)
        value = op(concrete(a), concrete(b))
        return rec.result(f"{rec.render(a)} {symbol} {rec.render(b)}", value)
    return method


def _in_place(symbol: str, op, plain):
    def method(self, other):
        if not isinstance(self._tl_value, np.ndarray):   # a number: rebound, as Python does
            return plain(self, other)
        rec = self._tl_rec
        op(self._tl_value, concrete(other))
        rec.lines.append(f"{self._tl_name} {symbol}= {rec.render(other)}")
        return self
    return method


def _unary(symbol: str, op):
    def method(self):
        return self._tl_rec.result(f"({symbol}{self._tl_name})", op(self._tl_value))
    return method


_BINARY = {"+": ("add", operator.add), "-": ("sub", operator.sub), "*": ("mul", operator.mul),
           "/": ("truediv", operator.truediv), "//": ("floordiv", operator.floordiv), "%": ("mod", operator.mod),
           "**": ("pow", operator.pow), "@": ("matmul", operator.matmul), "&": ("and", operator.and_),
           "|": ("or", operator.or_), "^": ("xor", operator.xor), "<<": ("lshift", operator.lshift),
           ">>": ("rshift", operator.rshift)}
_AUGMENTED = frozenset(_BINARY)   # (the operators of an augmented assignment ``a[k] += w``: ``Recording.augmented``)
for _symbol, (_name, _op) in _BINARY.items():
    setattr(Traced, f"__{_name}__", _binary(_symbol, _op))
    setattr(Traced, f"__r{_name}__", _binary(_symbol, _op, reflected=True))
    setattr(Traced, f"__i{_name}__", _in_place(_symbol, getattr(operator, f"i{_name}"), getattr(Traced, f"__{_name}__")))
for _name, _symbol in {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}.items():
    setattr(Traced, f"__{_name}__", _binary(_symbol, getattr(operator, _name)))
for _name, (_symbol, _op) in {"neg": ("-", operator.neg), "pos": ("+", operator.pos),
                              "invert": ("~", operator.invert)}.items():
    setattr(Traced, f"__{_name}__", _unary(_symbol, _op))
Traced.__abs__ = lambda self: self._tl_rec.result(f"abs({self._tl_name})", abs(self._tl_value))


class _Method:
    """A method of a recorded value, recorded when called."""

    __slots__ = ("owner", "name")

    def __init__(self, owner, name):
        self.owner, self.name = owner, name

    @property
    def __self__(self):   # (as a bound method's: the recorded value it is a method of)
        return self.owner

    def __call__(self, *args, **kwargs):
        owner = self.owner
        rec = owner._tl_rec
        _written(rec, self.name, (), kwargs)
        value = getattr(owner._tl_value, self.name)(*concrete(args), **concrete(kwargs))
        return rec.result(rec.call(f"{owner._tl_name}.{self.name}", args, kwargs), value)


class _Call:
    """A function the recorded function names (``np.sin``, ``math.exp``, a kernel), recorded when it is called
    with a recorded value or makes an array."""

    __slots__ = ("fn", "expr", "rec")

    def __init__(self, fn, expr, rec):
        self.fn, self.expr, self.rec = fn, expr, rec

    def __call__(self, *args, **kwargs):
        rec = self.rec
        followed = _holds(args) or _holds(kwargs)
        if followed:
            _written(rec, self.fn, args if self.fn in _WRITES_FIRST else (), kwargs)
        value = self.fn(*concrete(args), **concrete(kwargs))
        if not followed and not isinstance(value, np.ndarray):
            return value
        text = rec.call(self.expr or rec.constant(self.fn), args, kwargs)
        if not followed and rec.stand_in is not None:   # (an array made from constants: ``made``)
            text = f"_ad_made({text}, {rec.stand_in})"
        return rec.result(text, value)

    def __getattr__(self, name):   # (np.add.reduce, a kernel's attributes)
        return getattr(self.fn, name)

    # (handed to tensorlang.ad by the recorded code, ``ad.jvp(np.sin, ...)``, it is its function: found in the rules)
    def __hash__(self):
        return hash(self.fn)

    def __eq__(self, other):
        return self.fn == (other.fn if type(other) is _Call else other)


class _Module:
    """A module the recorded function names (NumPy, ``math``), whose functions it records; or (``expr`` None) one of
    SciPy's, whose functions that have a derivative rule it records."""

    def __init__(self, module, expr, rec):
        self._module, self._expr, self._rec = module, expr, rec

    def __getattr__(self, name):
        value = getattr(self._module, name)
        if isinstance(value, types.ModuleType):
            return _module(value, self._rec)
        if callable(value) and not isinstance(value, type):
            if self._expr is None:
                return _Call(value, None, self._rec) if has_rule(value) else value
            return _Call(value, f"{self._expr}.{name}", self._rec)
        return value


def _module(m, rec):
    """Module ``m`` as a recorded function reads it (``_Module``), or as it is."""
    expr = _MODULES.get(m)
    return _Module(m, expr, rec) if expr or m.__name__.split(".")[0] == "scipy" else m


def has_rule(f) -> bool:
    """Whether ``f`` has a derivative rule (a library function the recording records as a call)."""
    try:
        return f in RULES
    except TypeError:   # (unhashable)
        return False


class _NumberMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, cls.__mro__[1])

    def __subclasscheck__(cls, sub):
        return issubclass(sub, cls.__mro__[1])


class RecordedFloat(float, metaclass=_NumberMeta):
    """``float`` in the builtins of a recorded function: ``float(x)`` of a recorded value is recorded; as a type
    (``isinstance``, ``dtype=float``) it is ``float``."""
    dtype = np.dtype(np.float64)

    def __new__(cls, x=0.0):
        if type(x) is Traced:
            return x._tl_rec.result(f"float({x._tl_name})", float(x._tl_value))
        return float(x)


class RecordedComplex(complex, metaclass=_NumberMeta):
    """``complex`` in the builtins of a recorded function, as ``RecordedFloat`` is ``float``."""
    dtype = np.dtype(np.complex128)

    def __new__(cls, real=0.0, imag=0.0):
        if type(real) is Traced or type(imag) is Traced:
            rec = _recording_of((real, imag))
            return rec.result(f"complex({rec.render(real)}, {rec.render(imag)})",
                              complex(concrete(real), concrete(imag)))
        return complex(real, imag)


_BUILTINS = {**builtins.__dict__, "float": RecordedFloat, "complex": RecordedComplex}


def _name_of(rec: Recording, fn) -> str:
    """How the recording names NumPy function or ufunc ``fn``: ``np.linalg.solve``, or as a constant."""
    name = getattr(fn, "__name__", None)
    for module, expr in _MODULES.items():
        if name and getattr(module, name, None) is fn:
            return f"{expr}.{name}"
    return rec.constant(fn)


# -- running a function on stand-ins ----------------------------------------------------------------------
def _shimmed(f: types.FunctionType, rec: Recording) -> types.FunctionType:
    """``f`` reading its globals through the recording: NumPy and ``math`` record their calls, ``float`` and
    ``complex`` theirs, and the user's functions it reaches (by name or captured; not a library's) the same."""
    made: dict[int, types.FunctionType] = {}
    envs: dict[int, dict] = {}

    def env_of(home: dict) -> dict:
        env = envs.get(id(home))
        if env is None:   # (registered before it is filled: the functions in it read it)
            env = envs[id(home)] = dict(home)
            env["__builtins__"] = _BUILTINS   # (first: a function takes its builtins from its globals when made)
            env[_HOME] = home
            for name, v in home.items():
                if name != "__builtins__":
                    env[name] = shim(v)
        return env

    def shim(v):
        if isinstance(v, types.ModuleType):
            return _module(v, rec)
        if type(v) is types.FunctionType and not (library_file(v.__code__.co_filename)
                                                    or internal_file(v.__code__.co_filename)):
            return again(v)
        if isinstance(v, types.BuiltinFunctionType) and getattr(v, "__module__", None) in ("math", "cmath"):
            return _Call(v, f"{v.__module__}.{v.__name__}", rec)
        if has_rule(v) and not isinstance(v, (type, np.ufunc)):   # (a library function with a rule: scipy's)
            return _Call(v, None, rec)
        if hasattr(v, "__ad_pullback__") and callable(v):   # a compiled kernel
            return _Call(v, None, rec)
        return v

    def again(g):
        h = made.get(id(g))
        if h is None:   # (captured functions in cells of its own, filled once it is registered: recursion)
            functions = [i for i, c in enumerate(g.__closure__ or ()) if filled(c)
                         and type(c.cell_contents) is types.FunctionType]
            closure = g.__closure__ if not functions else tuple(
                types.CellType() if i in functions else c for i, c in enumerate(g.__closure__))
            h = made[id(g)] = types.FunctionType(g.__code__, env_of(g.__globals__), g.__name__, g.__defaults__,
                                                 closure)
            h.__kwdefaults__ = g.__kwdefaults__
            for i in functions:
                closure[i].cell_contents = shim(g.__closure__[i].cell_contents)
        return h

    return again(f)


_HOME = "__ad_home__"   # (in the globals of a shimmed function: the module's own globals)


def unshimmed(f):
    """``f`` as the transform takes it: a function whose globals are a recording's shim of its module's (a copy
    that ``_shimmed`` made, or one that shimmed code defined) with its module's own, since generated code reads
    the globals it is built in (and is shared by the functions of one code object); any other as it is."""
    home = f.__globals__.get(_HOME)
    if home is None:
        return f
    g = types.FunctionType(f.__code__, home, f.__name__, f.__defaults__, f.__closure__)
    g.__kwdefaults__, g.__qualname__ = f.__kwdefaults__, f.__qualname__
    return g


def made(value, like):
    """``value``, an array that recorded code made from constants (``np.zeros(n)``, which it may write into), as
    the recording's line ``_ad_made(np.zeros(n), a0)`` gives it: a copy of it, or, where ``like`` (a stand-in of
    the recording's arguments) is a stand-in of another recording (this recording run on stand-ins: a level of a
    tower), a copy made a value of that recording, into which the code can write its stand-ins."""
    if type(like) is Traced:
        rec = like._tl_rec
        return rec.result(rec.call("_ad_made", (value, like), {}), value.copy())
    return value.copy()


def _stand_in(rec: Recording, value, expr: str, differentiated: bool):
    """The stand-in of argument ``value`` (reached in the recording by ``expr``): a copy of a number or an array
    as a ``Traced``, a tuple, list or dict of stand-ins, an int or string as it is; another object is a constant,
    refused where it is ``differentiated`` and may hold a differentiable value."""
    if _followed(value):
        copy = value.copy() if isinstance(value, np.ndarray) or type(value) in ARRAY_TYPES else value
        rec.stand_in = rec.stand_in or expr
        return Traced(copy, expr, rec)
    t = type(value)
    if t in (tuple, list) or t is dict:
        items = value.items() if t is dict else enumerate(value)
        parts = {k: _stand_in(rec, x, f"{expr}[{k!r}]", differentiated) for k, x in items}
        return parts if t is dict else t(parts.values())
    if differentiated and differentiable(value) and not isinstance(value, (bool, int, str)):
        raise refused(f"an argument of type {t.__name__} (it follows numbers, arrays, and tuples, lists and "
                       f"dicts of them)", rec.why)
    return value


def _output(rec: Recording, y) -> str:
    if type(y) is Traced or y is None or isinstance(y, (bool, int, str, float, complex, np.number, np.ndarray)):
        return rec.render(y)
    if type(y) is tuple:
        return "(" + "".join(_output(rec, x) + ", " for x in y) + ")"
    if type(y) is list:
        return "[" + ", ".join(_output(rec, x) for x in y) + "]"
    if type(y) is dict and all(type(k) in (str, int) for k in y):
        return "{" + ", ".join(f"{k!r}: {_output(rec, x)}" for k, x in y.items()) + "}"
    raise refused(f"a function that returns a {type(y).__name__} (it follows numbers, arrays, and tuples, lists "
                   f"and dicts of them)", rec.why)


def recording(f, args: tuple, fixed=frozenset(), shim=True, why=NO_SOURCE) -> tuple[str, list]:
    """``(text, constants)``: the recording of ``f`` called with ``args`` (``fixed``: the positions not
    differentiated), the text of a function ``_ad_recording(*constants)`` returning a function of the same
    arguments.  ``shim`` False: ``f``'s code runs on the stand-ins as it is (a derivative that tensorlang.ad made,
    whose generated code and rules compute on them as on arrays: ``tower``); ``why``: what the recording is for,
    as its refusals say it."""
    rec = Recording(why)
    params = [f"a{i}" for i in range(len(args))]
    stand_ins = [_stand_in(rec, a, p, i not in fixed) for i, (a, p) in enumerate(zip(args, params))]
    y = (_shimmed(f, rec) if shim else f)(*stand_ins)
    out = _output(rec, y)
    name = f.__name__ if f.__name__.isidentifier() else "recorded"
    consts = [f"k{i}" for i in range(len(rec.constants))]
    lines = [f"def _ad_recording({', '.join(consts)}):", f"    def {name}({', '.join(params)}):"]
    lines += ["        " + line for line in _live(rec, out)] + [f"        return {out}", f"    return {name}"]
    return "\n".join(lines) + "\n", rec.constants


def _live(rec: Recording, out: str) -> list[str]:
    """The lines of ``rec`` without the reads ``Recording.augmented`` added that no later line nor the output
    ``out`` uses (a view of an array read after a write into it, which a derivative on stand-ins refuses to use
    once the array is written again)."""
    lines = rec.lines
    kept = []
    for i, line in enumerate(lines):
        if line in rec.rereads:
            used = re.compile(rf"\b{line.partition(' = ')[0]}\b")
            if not used.search(out) and not any(used.search(later) for later in lines[i + 1:]):
                continue
        kept.append(line)
    return kept


def recorded(f, args: tuple, fixed=frozenset(), shim=True, why=NO_SOURCE) -> types.FunctionType:
    """The recording of ``f`` at ``args`` as a function of the same arguments (its code shared by equal
    recordings; ``shim`` and ``why`` as for ``recording``)."""
    text, constants = recording(f, args, fixed, shim, why)
    factory = _CODE.get(text)
    if factory is None:
        digest = hashlib.sha1(text.encode()).hexdigest()[:12]
        factory = generated("_ad_recording", text, f"{RECORDING_FILE}{f.__qualname__} {digest}>", dict(_ENV))
        with _LOCK:
            if len(_CODE) >= _KEPT:
                _CODE.pop(next(iter(_CODE)))
            _CODE[text] = factory
    return factory(*constants)


def is_recording(f) -> bool:
    """Whether ``f`` is a recording (``recorded``)."""
    return type(f) is types.FunctionType and f.__code__.co_filename.startswith(RECORDING_FILE)


def recorded_in_place(f, args: tuple, tangent=None) -> types.FunctionType:
    """The recording of function ``f`` (without source) at ``args``, to be differentiated in its place;
    ``tangent``: that of what ``f`` captures, under forward mode: the recording's captures are constants, so
    one is refused."""
    if tangent is not None:
        raise refused("a function whose captured variables have tangents")
    return recorded(f, args)


def stand_in(f, args: tuple, tangent=None):
    """``f`` where it is not a Python function without source, else its recording at ``args``
    (``recorded_in_place``): what the gradient code of ``f`` is made from and called with
    (``api.gradient_code``)."""
    if type(f) is not types.FunctionType or hasattr(f, "__ad_remake__") or kept(f):   # (one ad made: its own)
        return f
    return recorded_in_place(f, args, tangent)


def as_function_gradients(g):
    """The gradients ``(d_recording, *dargs)`` of a recording's pullback as those of the function it stands
    for: the function's own gradient (what it captures) None, what it captures being constants of the
    recording."""
    return ZERO if g is ZERO else (None, *g[1:])


@RECORDED.provide
def recorded_pullback(f, args):
    """J of a function without source: J of its recording at ``args`` (``as_function_gradients``)."""
    y, back = J(recorded(f, args), *args)
    return y, lambda dy: as_function_gradients(back(dy))


_ENV["_ad_made"] = made
NONDIFF.add(made)   # (an array made from constants: no derivative; its writes have theirs)
