"""The registry of primitives: one record per differentiable function, from which every mode is derived.

A primitive is a callable that ``tensorlang.ad`` does not transform but calls, with a rule: a NumPy or SciPy
function, a builtin, an operator, a compiled kernel, a helper of the generated code, a method (keyed by
``(type, name)``) or, at second order, another primitive's rule (differentiated again as a call).  Its
``Primitive`` record holds all that is known of its derivative:

* ``reverse``: its rule, ``rule(*args, **kw) -> (y, back)``, ``back(dy)`` one gradient per argument (for a
  method, ``rule(obj, *args)``, the object's gradient first);
* ``forward``: its forward rule, ``jvp(args, tangents, **kw) -> (y, ty)`` (for a method,
  ``jvp(obj, tobj, args, tangents)``);
* ``linear``/``multilinear``: for a rule whose code is outside the transformed subset, what its pullback is
  (``nested``'s docstring): so that it is differentiated again without its code;
* ``pair``: the forward mode of its reverse rule (``pair(args, tangents) -> ((y, back), (ty, tback))``),
  where the rule's code cannot be run by forward mode;
* ``cross``: its pullback's derivative in the primal (``second``'s docstring), or ``LINEAR_PULLBACK`` when
  the pullback does not depend on the primal values;
* ``nondiff``: its result has no derivative (``len``, ``np.zeros_like``, ``print``);
* ``refused``: ``{mode: why}``, a mode it must never be differentiated in, refused by name.

``define(f, **fields)`` is the one way to write a record.  The modes read the records through one index per
field (``RULES``, ``JVP_RULES``, ``LINEAR`` ...): dicts kept in step with the records for the lookups of the
hot path, in which writing an entry (``RULES[f] = rule``, ``update``) writes f's record.

Each mode is derived from the one record (``modes``): reverse from ``reverse``; forward from ``forward``,
else from ``pair``, else by transposing the pullback (``tangent.transposed``: the pullback is linear in its
gradient, so the tangent is read off one pullback per output entry); reverse over reverse by
differentiating the pullback's code, or from ``linear``/``multilinear``; forward over reverse from
``pair``, else from ``cross``, else by forward mode of the pullback's code.
"""
from __future__ import annotations

import dataclasses

from ...errors import UnsupportedError

LINEAR_PULLBACK = object()   # a ``cross``: the pullback does not depend on the primal values
MODES = ("reverse", "forward", "reverse over reverse", "forward over reverse")


@dataclasses.dataclass(eq=False)
class Primitive:
    """Everything known of one primitive's derivative (the module docstring says what each field is)."""

    key: object
    reverse: object = None
    forward: object = None
    linear: object = None
    multilinear: object = None
    pair: object = None
    cross: object = None
    nondiff: bool = False
    refused: dict = dataclasses.field(default_factory=dict)

    @property
    def name(self) -> str:
        if isinstance(self.key, tuple):
            return f"{self.key[0].__name__}.{self.key[1]}"
        owner = getattr(self.key, "__self__", None)
        if type(owner).__name__ == "ufunc":   # a ufunc's method (np.add.reduce)
            return f"numpy.{owner.__name__}.{self.key.__name__}"
        module = getattr(self.key, "__module__", None)
        name = getattr(self.key, "__qualname__", None) or getattr(self.key, "__name__", None) or repr(self.key)
        return f"{module}.{name}" if module and module != "builtins" else name

    def how(self, mode: str) -> str | None:
        """How ``mode`` (one of ``MODES``) is derived from this record, or None where it is not available."""
        if mode in self.refused:
            return f"refused: {self.refused[mode]}"
        if self.nondiff:
            return "no derivative (its result is a constant)"
        if self.reverse is None and mode != "forward":
            return None
        if mode == "reverse":
            return "its pullback"
        if mode == "forward":
            if self.forward is not None:
                return "its forward rule"
            if self.pair is not None:
                return "the forward mode of its pullback (pair)"
            return "its pullback, transposed" if self.reverse is not None else None
        if mode == "reverse over reverse":
            if self.linear is not None:
                return "its declared linear pullback"
            if self.multilinear is not None:
                return "its declared multilinear pullback"
            return "its pullback's code, differentiated"
        if self.pair is not None:
            return "its pair"
        if self.cross is LINEAR_PULLBACK:
            return "its pullback (linear in the primal)"
        return "its pullback's cross term" if self.cross is not None else "forward mode of its pullback's code"

    def modes(self) -> dict:
        """``{mode: how}`` for every mode this record claims."""
        return {m: h for m in MODES if (h := self.how(m)) is not None}

    def __str__(self) -> str:
        width = max(map(len, MODES))
        lines = [f"{mode:<{width}}  {self.how(mode) or 'not available'}" for mode in MODES]
        return "\n".join([f"primitive {self.name}", *lines])


REGISTRY: dict = {}   # key (a callable, or (type, name) for a method) -> Primitive


def _hashable(key) -> bool:
    try:
        hash(key)
    except TypeError:
        return False
    return True


def define(key, **fields) -> Primitive:
    """Write the fields of ``key``'s record (made on first use) and the indexes that read them; returns the
    record.  ``define(np.sin, reverse=rule, forward=jvp)``."""
    record = REGISTRY.get(key)
    if record is None:
        record = REGISTRY[key] = Primitive(key)
    for field, value in fields.items():
        if field == "refused":
            record.refused.update(value)
            continue
        if field == "reverse":
            _owned(key, record.reverse, value)
        setattr(record, field, value)
        index = _INDEXES.get((field, isinstance(key, tuple)))
        if index is not None:
            if field == "nondiff":
                (set.add if value else set.discard)(index, key)
            elif value is None:
                dict.pop(index, key, None)
            else:
                dict.__setitem__(index, key, value)
    return record


# id(reverse rule) -> the key of the record whose reverse rule it is: a function's, a method's
_OWNERS: tuple = ({}, {})


def _owned(key, old, new) -> None:
    """Keep ``_OWNERS`` in step with ``key``'s reverse rule changing from ``old`` to ``new``."""
    owners = _OWNERS[isinstance(key, tuple)]
    if old is not None and owners.get(id(old)) == key:
        del owners[id(old)]
    if new is not None:
        owners[id(new)] = key


def rule_owner(rule) -> Primitive | None:
    """The record whose reverse rule ``rule`` is (a function's before a method's), or None: generated code
    calls rules directly, and a rule differentiated again is known by its primitive."""
    key = _OWNERS[0].get(id(rule), _OWNERS[1].get(id(rule)))
    return None if key is None else REGISTRY[key]


def refusing(key, mode: str, why: str, error=UnsupportedError):
    """A rule that refuses ``mode`` for ``key`` by name before running anything (recorded in its record's
    ``refused``), raising ``error``; its arguments are those of any rule."""
    define(key, refused={mode: why})
    name = REGISTRY[key].name

    def refuse(*args, **kw):
        raise error(f"tensorlang.ad: {name} is not differentiated in {mode} mode: {why}")
    return refuse


def primitive(f) -> Primitive | None:
    """The record of ``f`` (a function, or ``(type, "method")``), saying how each mode differentiates it
    (``print(ad.primitive(np.sort))``); None where ``f`` is no primitive (a Python function is transformed,
    an unhashable callable such as a list's bound method has no record)."""
    return REGISTRY.get(f) if _hashable(f) else None


class Index(dict):
    """One field of the records, as a dict ``key -> value`` for the lookups of the modes; writing an entry
    writes the record (``define``)."""

    def __init__(self, field: str):
        super().__init__()
        self.field = field

    def __setitem__(self, key, value):
        define(key, **{self.field: value})

    def update(self, *args, **kw):
        for key, value in dict(*args, **kw).items():
            self[key] = value

    def __delitem__(self, key):
        define(key, **{self.field: None})

    def pop(self, key, *default):
        value = dict.get(self, key, *default[:1]) if default else self[key]
        if key in self:
            del self[key]
        return value

    def setdefault(self, key, value=None):
        if key not in self:
            self[key] = value
        return self[key]


class FlagSet(set):
    """The keys whose record has a true boolean field (``NONDIFF``); adding a key writes its record."""

    def __init__(self, field: str, keys=()):
        super().__init__()
        self.field = field
        self.update(keys)

    def add(self, key):
        define(key, **{self.field: True})

    def update(self, *keys):
        for group in keys:
            for key in group:
                self.add(key)

    def discard(self, key):
        if key in self:
            define(key, **{self.field: False})

    def remove(self, key):
        if key not in self:
            raise KeyError(key)
        self.discard(key)

    def __ior__(self, keys):
        self.update(keys)
        return self


RULES = Index("reverse")             # function -> rule(*args) returning (y, back)
METHOD_RULES = Index("reverse")      # (type, name) -> rule(obj, *args) returning (y, back)
JVP_RULES = Index("forward")         # function -> jvp(args, tangents, **kw) returning (y, ty)
JVP_METHOD_RULES = Index("forward")  # (type, name) -> jvp(obj, tobj, args, tangents, **kw) returning (y, ty)
LINEAR = Index("linear")             # rule -> along(args, kw, tangents)
MULTILINEAR = Index("multilinear")   # rule -> positions(args)
PAIRS = Index("pair")                # function -> pair(args, tangents)
METHOD_PAIRS = Index("pair")         # (type, name) -> pair(obj, tobj, args, tangents)
CROSS = Index("cross")               # function -> LINEAR_PULLBACK or cross(args, tangents, y, ty)
NONDIFF = FlagSet("nondiff")         # functions whose result has no derivative
_INDEXES = {("reverse", False): RULES, ("reverse", True): METHOD_RULES, ("forward", False): JVP_RULES,
            ("forward", True): JVP_METHOD_RULES, ("linear", False): LINEAR, ("multilinear", False): MULTILINEAR,
            ("pair", False): PAIRS, ("pair", True): METHOD_PAIRS, ("cross", False): CROSS,
            ("nondiff", False): NONDIFF}
