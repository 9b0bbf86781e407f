"""The nodes of the core tensor language (Fig. 3 of the paper): types, affine indices, predicates and
expressions.

Nodes are immutable and hash-consed: building a node whose fields are the same objects as an existing
node's returns that node, so syntactic equality is identity and shared subterms are one object (the
paper's "DAG via memoisation").  ``==`` on expressions and predicates is alpha-equivalence (bound index
variables may differ); passes that memoise on nodes key on identity (``id``) instead.

Variables come in three sorts:

* ``SizeVar``: a non-negative integer size (``n``); interned by name, so sizes are global.
* ``IndexVar``: an index bound by ``gen``, ``sum`` or ``exists``; every binder makes a new object with a
  display name, so renaming and capture never depend on names.
* ``Var``: an input (free) or let-bound variable carrying its type; interned by (name, type).

Types are computed when an expression is built; an ill-typed construction raises ``TypeCheckError``.

This module imports nothing above it: what a node does beyond its structure (printing, equality, evaluation,
the registry of black-box functions) is defined by the modules above and installed into ``OPERATIONS``
(``tensorlang.hooks``) when they are imported, which ``import tensorlang`` does.
"""
from __future__ import annotations

import itertools
import weakref
from fractions import Fraction
from typing import Iterable, Iterator, Mapping

from .errors import TypeCheckError
from .hooks import Hooks

# what the nodes' methods do that the modules above define (printing, alpha-equivalence, evaluation, the
# function registry, ...): each of those modules installs its operations here when it is imported
OPERATIONS = Hooks("tensorlang.nodes")

# --------------------------------------------------------------------------------------------------
# hash-consing


_TABLE: "weakref.WeakValueDictionary[tuple, Node]" = weakref.WeakValueDictionary()


def _key(fields: tuple) -> tuple:
    """The interning key of a node's fields: nodes and index variables by identity, nested tuples
    field by field, anything else with its type (so ``1``, ``1.0`` and ``True`` stay apart).  One call
    per tuple, not per field: building nodes is the inner loop of every pass."""
    key = []
    for f in fields:
        if isinstance(f, _BY_IDENTITY):
            key.append(id(f))
        elif type(f) is tuple:
            key.append(_key(f))
        else:
            key.append((type(f), f))
    return tuple(key)


_ITSELF = object()  # a memoised value that is the node itself (Node.memo)


class Node:
    """An interned, immutable tree node; subclasses list their ``_fields`` and may define ``_check``."""

    __slots__ = ("_values", "_memo", "__weakref__")
    _fields: tuple[str, ...] = ()

    def __new__(cls, *values):
        key = (cls, _key(values))
        node = _TABLE.get(key)
        if node is None:
            node = object.__new__(cls)
            object.__setattr__(node, "_values", values)
            object.__setattr__(node, "_memo", {})
            node._check()
            _TABLE[key] = node
        return node

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for k, name in enumerate(cls.__dict__.get("_fields", ())):
            setattr(cls, name, property(lambda self, k=k: self._values[k]))

    def _check(self) -> None:
        """Validate the fields and compute derived data (e.g. the type); raise ``TypeCheckError``."""

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} nodes are immutable")

    def __reduce__(self):
        return (type(self), self._values)

    @property
    def children(self) -> tuple:
        return self._values

    def memo(self, key, compute):
        """A per-node cache for derived data (free variables, types, canonical forms).  A value that is
        the node itself (an expression already in canonical form) is kept as a marker: a node's cache
        never refers to the node, so no reference cycle keeps a dropped node alive until the cycle
        collector runs (and a deep program's derivation does not end up paying for full collections)."""
        memo = self._memo
        if key not in memo:
            value = compute()
            memo[key] = _ITSELF if value is self else value
        value = memo[key]
        return self if value is _ITSELF else value


# --------------------------------------------------------------------------------------------------
# variables


_serials = itertools.count()


class IndexVar:
    """An index variable bound by ``gen``, ``sum`` or ``exists``.  Each object is a distinct variable;
    ``name`` is only for display.  ``serial`` orders variables deterministically by creation."""

    __slots__ = ("name", "serial", "__weakref__")

    def __init__(self, name: str):
        self.name = name
        self.serial = next(_serials)

    def fresh(self) -> "IndexVar":
        """A new variable with the same display name."""
        return IndexVar(self.name)

    def sort_key(self) -> tuple:
        return (1, self.name, self.serial)

    def __repr__(self) -> str:
        return f"{self.name}"

    def __reduce__(self):
        return (IndexVar, (self.name,))


_BY_IDENTITY = (Node, IndexVar)  # the fields ``_key`` compares by identity

CANONICAL_INDICES: list[IndexVar] = []


def canonical_index(k: int) -> IndexVar:
    """The k-th canonical index variable ``i<k>``, used for alpha-canonical forms and Tensor SSA."""
    while len(CANONICAL_INDICES) <= k:
        CANONICAL_INDICES.append(IndexVar(f"i{len(CANONICAL_INDICES)}"))
    return CANONICAL_INDICES[k]


class SizeVar(Node):
    """A size variable: a non-negative integer parameter, identified by its name."""

    __slots__ = ()
    _fields = ("name",)

    def sort_key(self) -> tuple:
        return (0, self.name, 0)

    def __repr__(self) -> str:
        return self.name


# --------------------------------------------------------------------------------------------------
# affine indices


class Affine(Node):
    """A canonical affine form ``sum(coeff * var) + const`` over index and size variables.

    ``terms`` is a tuple of ``(var, coeff)`` pairs with non-zero coefficients, sorted by the variables'
    ``sort_key``; so two equal forms over the same variables are the same object.  Build with
    ``Affine.of``, ``Affine.var`` and ``Affine.const``, and combine with ``+``, ``-`` and ``*`` by an int.
    """

    __slots__ = ()
    _fields = ("terms", "const")

    @staticmethod
    def of(coeffs: Mapping | Iterable[tuple], const: int = 0) -> "Affine":
        items = coeffs.items() if isinstance(coeffs, Mapping) else coeffs
        acc: dict = {}
        for var, c in items:
            acc[var] = acc.get(var, 0) + int(c)
        terms = tuple(sorted(((v, c) for v, c in acc.items() if c != 0), key=lambda t: t[0].sort_key()))
        return Affine(terms, int(const))

    @staticmethod
    def const_(value: int) -> "Affine":
        return Affine((), int(value))

    @staticmethod
    def var(v) -> "Affine":
        return Affine(((v, 1),), 0)

    def _check(self) -> None:
        for v, c in self.terms:
            if not isinstance(v, (IndexVar, SizeVar)) or not isinstance(c, int):
                raise TypeCheckError(f"malformed affine term {v!r}*{c!r}")

    # arithmetic
    def __add__(self, other) -> "Affine":
        other = as_affine(other)
        return Affine.of(self.terms + other.terms, self.const + other.const)

    __radd__ = __add__

    def __neg__(self) -> "Affine":
        return Affine.of(((v, -c) for v, c in self.terms), -self.const)

    def __sub__(self, other) -> "Affine":
        other = as_affine(other)
        return Affine.of(self.terms + tuple((v, -c) for v, c in other.terms), self.const - other.const)

    def __rsub__(self, other) -> "Affine":
        return as_affine(other) - self

    def __mul__(self, k) -> "Affine":
        if not isinstance(k, int):
            raise TypeCheckError(f"an affine index can only be multiplied by an integer constant, not {k!r}")
        return Affine.of(((v, c * k) for v, c in self.terms), self.const * k)

    __rmul__ = __mul__

    # queries
    @property
    def is_const(self) -> bool:
        return not self.terms

    def coeff(self, var) -> int:
        for v, c in self.terms:
            if v is var:
                return c
        return 0

    @property
    def variables(self) -> tuple:
        return tuple(v for v, _ in self.terms)

    @property
    def index_vars(self) -> tuple:
        return tuple(v for v, _ in self.terms if isinstance(v, IndexVar))

    @property
    def size_vars(self) -> tuple:
        return tuple(v for v, _ in self.terms if isinstance(v, SizeVar))

    def substitute(self, mapping: Mapping) -> "Affine":
        """Replace variables by affine forms (or variables); ``mapping`` is keyed by variable objects."""
        if not any(v in mapping for v, _ in self.terms):
            return self
        terms, const = [], self.const
        for v, c in self.terms:
            if v not in mapping:
                terms.append((v, c))
                continue
            value = as_affine(mapping[v])
            terms += [(w, c * d) for w, d in value.terms]
            const += c * value.const
        return Affine.of(terms, const)

    def evaluate(self, env: Mapping):
        """The value under ``env`` (variable -> int, or anything supporting + and *, e.g. arrays)."""
        value = self.const
        for v, c in self.terms:
            value = value + c * env[v]
        return value

    def __repr__(self) -> str:
        return OPERATIONS.affine_str(self)


def as_affine(x) -> Affine:
    if isinstance(x, Affine):
        return x
    if isinstance(x, bool):
        raise TypeCheckError(f"{x!r} is not an affine index")
    if isinstance(x, int):
        return Affine.const_(x)
    if isinstance(x, (IndexVar, SizeVar)):
        return Affine.var(x)
    raise TypeCheckError(f"{x!r} is not an affine index")


# --------------------------------------------------------------------------------------------------
# types


class Type(Node):
    """Base of the types ``R``, ``[s]T``, ``(T0, T1)`` and ``rel[s0, ...]``."""

    __slots__ = ()

    def __str__(self) -> str:
        return OPERATIONS.type_str(self)

    __repr__ = __str__


class RealType(Type):
    __slots__ = ()


R = RealType()


class TensorType(Type):
    """``[size]elem``."""

    __slots__ = ()
    _fields = ("size", "elem")

    def _check(self) -> None:
        if not isinstance(self.size, Affine) or self.size.index_vars:
            raise TypeCheckError(f"a tensor size must be affine in size variables, not {self.size!r}")
        if not isinstance(self.elem, Type) or isinstance(self.elem, RelType):
            raise TypeCheckError(f"bad tensor element type {self.elem!r}")


class PairType(Type):
    """``(first, second)``."""

    __slots__ = ()
    _fields = ("first", "second")

    def _check(self) -> None:
        for t in self._values:
            if not isinstance(t, Type) or isinstance(t, RelType):
                raise TypeCheckError(f"bad pair component type {t!r}")


class RelType(Type):
    """``rel[s0, s1, ...]``: a set of index tuples (a sparsity pattern), used only in predicates."""

    __slots__ = ()
    _fields = ("sizes",)

    def _check(self) -> None:
        if not self.sizes or any(not isinstance(s, Affine) or s.index_vars for s in self.sizes):
            raise TypeCheckError("a relation type needs one or more affine sizes")


class IndexMapType(RelType):
    """``[p]index[n]``: an index array, one index in ``[0, n)`` for each of ``p`` rows: the relation
    ``{(i, g[i])}`` of ``rel[p, n]`` that holds exactly one pair per row.  A read through it, ``x[g[i]]``,
    is the sum ``sum(c:n) [g(i, c)] * x[c]`` of one term (see the parser)."""

    __slots__ = ()
    _fields = ("sizes",)

    def _check(self) -> None:
        super()._check()
        if len(self.sizes) != 2:
            raise TypeCheckError("an index array type has a length and an extent: [p]index[n]")

    @property
    def length(self) -> Affine:
        return self.sizes[0]

    @property
    def extent(self) -> Affine:
        return self.sizes[1]


def tensor(sizes: Iterable, elem: Type = R) -> Type:
    """``[s0][s1]...elem``."""
    t = elem
    for s in reversed(list(sizes)):
        t = TensorType(as_affine(s), t)
    return t


def tensor_dims(t: Type) -> tuple[tuple[Affine, ...], Type]:
    """The leading tensor sizes of a type and the element type under them: ``[n][m]R -> ((n, m), R)``."""
    sizes = []
    while isinstance(t, TensorType):
        sizes.append(t.size)
        t = t.elem
    return tuple(sizes), t


def has_pair(t: Type) -> bool:
    """Whether a pair type occurs in ``t`` (at the top or under tensor levels)."""
    if isinstance(t, PairType):
        return True
    if isinstance(t, TensorType):
        return has_pair(t.elem)
    return False


def type_size_vars(t: Type) -> tuple:
    """The size variables a type mentions, in order of first occurrence."""
    out: dict = {}
    if isinstance(t, TensorType):
        out.update(dict.fromkeys(t.size.size_vars))
        out.update(dict.fromkeys(type_size_vars(t.elem)))
    elif isinstance(t, PairType):
        out.update(dict.fromkeys(type_size_vars(t.first)))
        out.update(dict.fromkeys(type_size_vars(t.second)))
    elif isinstance(t, RelType):
        for s in t.sizes:
            out.update(dict.fromkeys(s.size_vars))
    return tuple(out)


# --------------------------------------------------------------------------------------------------
# predicates


class Pred(Node):
    """Base of predicates: comparisons, relation atoms, and/or, exists, true/false."""

    __slots__ = ()

    def __eq__(self, other) -> bool:
        return self is other or (isinstance(other, Pred) and OPERATIONS.alpha_equal(self, other))

    def __hash__(self) -> int:
        return OPERATIONS.alpha_hash(self)

    def __and__(self, other: "Pred") -> "Pred":
        return conj(self, other)

    def __or__(self, other: "Pred") -> "Pred":
        return disj(self, other)

    def __invert__(self) -> "Pred":
        return negate(self)

    def __str__(self) -> str:
        return OPERATIONS.pred_str(self)

    __repr__ = __str__


class TruePred(Pred):
    __slots__ = ()


class FalsePred(Pred):
    __slots__ = ()


TRUE = TruePred()
FALSE = FalsePred()

COMPARISONS = ("<", "<=", "=", "!=")


class Cmp(Pred):
    """An affine comparison ``lhs op rhs`` with op in ``< <= = !=`` (``>`` and ``>=`` swap sides)."""

    __slots__ = ()
    _fields = ("op", "lhs", "rhs")

    # interned, binding nothing and holding no binder: its own canonical form, so identity is equality
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def _check(self) -> None:
        if self.op not in COMPARISONS:
            raise TypeCheckError(f"unknown comparison {self.op!r}")
        if not isinstance(self.lhs, Affine) or not isinstance(self.rhs, Affine):
            raise TypeCheckError("comparisons are between affine indices")


def compare(op: str, lhs, rhs) -> Pred:
    """Build ``lhs op rhs`` for any of ``< <= = == != > >=``."""
    lhs, rhs = as_affine(lhs), as_affine(rhs)
    if op == "==":
        op = "="
    if op in (">", ">="):
        op, lhs, rhs = ("<" if op == ">" else "<="), rhs, lhs
    return Cmp(op, lhs, rhs)


class RelAtom(Pred):
    """``R(a0, a1, ...)``: membership of an index tuple in a data relation ``R`` (a ``Var`` of RelType)."""

    __slots__ = ()
    _fields = ("rel", "args")

    # interned, binding nothing and holding no binder: its own canonical form, so identity is equality
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def _check(self) -> None:
        if not isinstance(self.rel, Var) or not isinstance(self.rel.type, RelType):
            raise TypeCheckError(f"{getattr(self.rel, 'name', self.rel)!r} is not a relation")
        if len(self.args) != len(self.rel.type.sizes):
            raise TypeCheckError(
                f"relation {self.rel.name} takes {len(self.rel.type.sizes)} indices, got {len(self.args)}"
            )


class And(Pred):
    __slots__ = ()
    _fields = ("parts",)


class Or(Pred):
    __slots__ = ()
    _fields = ("parts",)


class Exists(Pred):
    """``exists(var:size) body``."""

    __slots__ = ()
    _fields = ("var", "size", "body")

    def _check(self) -> None:
        if not isinstance(self.var, IndexVar) or not isinstance(self.size, Affine) or self.size.index_vars:
            raise TypeCheckError("exists binds an index variable over an affine size")


def conj(*parts: Pred) -> Pred:
    """The conjunction, flattened, with ``true`` dropped and ``false`` absorbing; keeps the given order."""
    flat: dict[Pred, None] = {}  # ordered, and membership by (alpha-)hash: linear in the parts
    for p in parts:
        if p is FALSE:
            return FALSE
        if p is TRUE:
            continue
        flat.update(dict.fromkeys(p.parts if isinstance(p, And) else (p,)))
    if not flat:
        return TRUE
    return next(iter(flat)) if len(flat) == 1 else And(tuple(flat))


def drop_conjunct(pred: Pred, known: Pred) -> Pred:
    """``pred`` where its conjunct ``known`` (an interned atom) is known to hold: that conjunct dropped."""
    if pred is known:
        return TRUE
    if isinstance(pred, And) and any(q is known for q in pred.parts):
        return conj(*[q for q in pred.parts if q is not known])
    return pred


def disj(*parts: Pred) -> Pred:
    """The disjunction, flattened, with ``false`` dropped and ``true`` absorbing; keeps the given order."""
    flat: dict[Pred, None] = {}
    for p in parts:
        if p is TRUE:
            return TRUE
        if p is FALSE:
            continue
        flat.update(dict.fromkeys(p.parts if isinstance(p, Or) else (p,)))
    if not flat:
        return FALSE
    return next(iter(flat)) if len(flat) == 1 else Or(tuple(flat))


_NEGATED = {"<": "<=", "<=": "<", "=": "!=", "!=": "="}


def negate(p: Pred) -> Pred:
    """``not p`` for an affine predicate, pushed to the comparisons (De Morgan).  ``not`` over a relation
    atom or ``exists`` is not part of the language and raises ``TypeCheckError``."""
    if p is TRUE:
        return FALSE
    if p is FALSE:
        return TRUE
    if isinstance(p, Cmp):
        if p.op in ("<", "<="):
            return Cmp(_NEGATED[p.op], p.rhs, p.lhs)
        return Cmp(_NEGATED[p.op], p.lhs, p.rhs)
    if isinstance(p, And):
        return disj(*(negate(q) for q in p.parts))
    if isinstance(p, Or):
        return conj(*(negate(q) for q in p.parts))
    raise TypeCheckError(f"'not' applies to affine predicates only, not to {p}")


def box(dims: Iterable[tuple[object, object]]) -> Pred:
    """``0 <= v < s`` for every ``(v, s)`` of ``dims``: the points of the loops ``dims``."""
    return conj(*(conj(compare("<=", 0, v), compare("<", v, s)) for v, s in dims))


def nonempty(sizes: Iterable[object]) -> Pred:
    """``0 < s`` for every size of ``sizes``: where loops of these sizes have a point.  A value computed
    once for every point of loops it does not read (a binding narrowed to the loops it reads) is guarded by
    it, since it was computed at no point where a loop is empty, and a read in it may be out of range there."""
    return conj(*(compare("<", 0, s) for s in sizes))


# --------------------------------------------------------------------------------------------------
# expressions


class Expr(Node):
    """Base of expressions.  ``type`` is the output type; ``free_vars`` maps input names to types."""

    __slots__ = ()

    @property
    def type(self) -> Type:
        return self._memo["type"]

    def _set_type(self, t: Type) -> None:
        self._memo["type"] = t

    # equality is alpha-equivalence
    def __eq__(self, other) -> bool:
        return self is other or (isinstance(other, Expr) and OPERATIONS.alpha_equal(self, other))

    def __hash__(self) -> int:
        return OPERATIONS.alpha_hash(self)

    # the public surface of an Expr (README.md, docs/language.md)
    @property
    def free_vars(self) -> dict[str, Type]:
        """Input variables (free ``Var``s) in order of first occurrence, name -> type."""
        return {v.name: v.type for v in OPERATIONS.free_vars(self)}

    @property
    def sizes(self) -> tuple[str, ...]:
        """The names of the size variables the program mentions, in order of first occurrence."""
        return tuple(s.name for s in OPERATIONS.size_vars(self))

    def __str__(self) -> str:
        return OPERATIONS.to_source(self)

    def __repr__(self) -> str:
        return f"<Expr {OPERATIONS.expr_str(self)}>"

    def _repr_latex_(self) -> str:
        # limits below and above, as a display shows them
        return "$\\displaystyle " + OPERATIONS.to_latex(self) + "$"

    def __call__(self, **inputs):
        return OPERATIONS.evaluate(self, **inputs)

    def substitute(self, **replacements) -> "Expr":
        return OPERATIONS.substitute_inputs(self, replacements)

    # building expressions from Python (a program's declarations carry over to what is built from it)
    def __add__(self, other) -> "Expr":
        return _built(Add, self, as_expr(other))

    def __radd__(self, other) -> "Expr":
        return _built(Add, as_expr(other), self)

    def __mul__(self, other) -> "Expr":
        return _built(Mul, self, as_expr(other))

    def __rmul__(self, other) -> "Expr":
        return _built(Mul, as_expr(other), self)

    def __neg__(self) -> "Expr":
        return _built(Mul, Const(-1), self)

    def __sub__(self, other) -> "Expr":
        return self + (-as_expr(other))

    def __rsub__(self, other) -> "Expr":
        return as_expr(other) + (-self)

    def __getitem__(self, index) -> "Expr":
        indices = index if isinstance(index, tuple) else (index,)
        out = self
        for a in indices:
            out = _built(lambda e: Access(e, as_affine(a)), out)
        return out


def _built(make, *operands: Expr) -> Expr:
    """``make(*operands)`` on the operands' expressions, declaring what their programs declare."""
    programs = [e for e in operands if isinstance(e, Declare)]
    out = make(*(e.body if isinstance(e, Declare) else e for e in operands))
    if not programs:
        return out
    sizes = [s for e in programs for s in e.declared_sizes]
    return OPERATIONS.declare(out, [v for e in programs for v in e.inputs], sizes)


def as_expr(x) -> Expr:
    if isinstance(x, Expr):
        return x
    if isinstance(x, (int, float, Fraction)) and not isinstance(x, bool):
        return Const(x)
    raise TypeCheckError(f"{x!r} is not an expression")


def _scalar(e, what: str) -> None:
    if not isinstance(e, Expr):
        raise TypeCheckError(f"{what} must be an expression, got {e!r}")
    if e.type is not R:
        raise TypeCheckError(f"{what} must be a scalar, but has type {e.type}")


class Var(Expr):
    """A named variable: an input of the program when free, or bound by ``let``."""

    __slots__ = ()
    _fields = ("name", "var_type")

    # a variable is interned by (name, type) and binds nothing: identity is equality
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def _check(self) -> None:
        if not isinstance(self.name, str) or not isinstance(self.var_type, Type):
            raise TypeCheckError(f"malformed variable {self.name!r}")
        self._set_type(self.var_type)


class Const(Expr):
    """A constant real number."""

    __slots__ = ()
    _fields = ("value",)

    def _check(self) -> None:
        if isinstance(self.value, bool) or not isinstance(self.value, (int, float, Fraction)):
            raise TypeCheckError(f"{self.value!r} is not a number")
        self._set_type(R)

    @property
    def real(self) -> float:
        """The value as a float64: the nearest one, and +-inf beyond the range (as ``1e999`` is)."""
        try:
            return float(self.value)
        except OverflowError:
            return float("inf") if self.value > 0 else float("-inf")


class Add(Expr):
    """Scalar addition ``e0 + e1`` (4.3)."""

    __slots__ = ()
    _fields = ("left", "right")

    def _check(self) -> None:
        _scalar(self.left, "the left operand of +")
        _scalar(self.right, "the right operand of +")
        self._set_type(R)


class Mul(Expr):
    """Scalar multiplication ``e0 * e1`` (4.4)."""

    __slots__ = ()
    _fields = ("left", "right")

    def _check(self) -> None:
        _scalar(self.left, "the left operand of *")
        _scalar(self.right, "the right operand of *")
        self._set_type(R)


class Call(Expr):
    """A black-box scalar function ``f(e0, ...)`` (4.5); ``fn`` names a registered function."""

    __slots__ = ()
    _fields = ("fn", "args")

    def _check(self) -> None:
        spec = OPERATIONS.lookup(self.fn)
        if len(self.args) != spec.arity:
            raise TypeCheckError(f"{self.fn} takes {spec.arity} argument(s), got {len(self.args)}")
        for k, a in enumerate(self.args):
            _scalar(a, f"argument {k + 1} of {self.fn}")
        self._set_type(R)


class Pair(Expr):
    """Pair construction ``(e0, e1)`` (4.6)."""

    __slots__ = ()
    _fields = ("first", "second")

    def _check(self) -> None:
        for e in self._values:
            if not isinstance(e, Expr):
                raise TypeCheckError(f"pair components must be expressions, got {e!r}")
        self._set_type(PairType(self.first.type, self.second.type))


class Proj(Expr):
    """Pair projection ``e.0`` / ``e.1`` (4.10)."""

    __slots__ = ()
    _fields = ("index", "pair")

    def _check(self) -> None:
        t = getattr(self.pair, "type", None)
        if self.index not in (0, 1):
            raise TypeCheckError(f"a projection is .0 or .1, not .{self.index}")
        if not isinstance(t, PairType):
            raise TypeCheckError(f"projection .{self.index} of a value of type {t}, which is not a pair")
        self._set_type(t.first if self.index == 0 else t.second)


class Gen(Expr):
    """Tensor generation ``gen(var:size) body`` (4.7), of type ``[size]T`` for ``body : T``."""

    __slots__ = ()
    _fields = ("var", "size", "body")

    def _check(self) -> None:
        if not isinstance(self.var, IndexVar):
            raise TypeCheckError("gen binds an index variable")
        if not isinstance(self.size, Affine) or self.size.index_vars:
            raise TypeCheckError(f"the range of {self.var.name} must be affine in size variables")
        if not isinstance(self.body, Expr):
            raise TypeCheckError("the body of gen must be an expression")
        if isinstance(self.body.type, RelType):
            raise TypeCheckError("a relation is not a value")
        self._set_type(TensorType(self.size, self.body.type))


class Sum(Expr):
    """Summation ``sum(var:size) body`` of a scalar body (4.8)."""

    __slots__ = ()
    _fields = ("var", "size", "body")

    def _check(self) -> None:
        if not isinstance(self.var, IndexVar):
            raise TypeCheckError("sum binds an index variable")
        if not isinstance(self.size, Affine) or self.size.index_vars:
            raise TypeCheckError(f"the range of {self.var.name} must be affine in size variables")
        _scalar(self.body, f"the body of sum({self.var.name})")
        self._set_type(R)


class Max(Expr):
    """The maximum ``max(var:size) body`` of a scalar body over ``var = 0 .. size-1`` (``-inf`` over an
    empty range).  Not a ``Sum``: no rule for sums (distributing a product, moving a bracket into the
    domain, splitting an addition) holds for it.  ``min(i:n) e`` is ``-max(i:n) -e``."""

    __slots__ = ()
    _fields = ("var", "size", "body")

    def _check(self) -> None:
        if not isinstance(self.var, IndexVar):
            raise TypeCheckError("max binds an index variable")
        if not isinstance(self.size, Affine) or self.size.index_vars:
            raise TypeCheckError(f"the range of {self.var.name} must be affine in size variables")
        _scalar(self.body, f"the body of max({self.var.name})")
        self._set_type(R)


class Access(Expr):
    """Tensor access ``e[index]`` with an affine index (4.11)."""

    __slots__ = ()
    _fields = ("tensor", "index")

    def _check(self) -> None:
        t = getattr(self.tensor, "type", None)
        if not isinstance(self.index, Affine):
            raise TypeCheckError(f"an index must be affine, not {self.index!r}")
        if not isinstance(t, TensorType):
            raise TypeCheckError(f"cannot index a value of type {t}")
        self._set_type(t.elem)


class Guard(Expr):
    """The Iverson bracket ``[pred] * body`` (4.12): body where pred holds, the zero of its type elsewhere."""

    __slots__ = ()
    _fields = ("pred", "body")

    def _check(self) -> None:
        if not isinstance(self.pred, Pred):
            raise TypeCheckError(f"{self.pred!r} is not a predicate")
        if not isinstance(self.body, Expr):
            raise TypeCheckError("the operand of an Iverson bracket must be an expression")
        self._set_type(self.body.type)


class Let(Expr):
    """``let var = value in body`` (4.9)."""

    __slots__ = ()
    _fields = ("var", "value", "body")

    def _check(self) -> None:
        if not isinstance(self.var, Var):
            raise TypeCheckError("let binds a variable")
        if not isinstance(self.value, Expr) or not isinstance(self.body, Expr):
            raise TypeCheckError("let binds an expression in an expression")
        if self.var.type is not self.value.type:
            raise TypeCheckError(
                f"let {self.var.name} : {self.var.type} is bound to a value of type {self.value.type}"
            )
        self._set_type(self.body.type)


class Declare(Expr):
    """``x : T; ...; body`` where ``body`` does not read some of the inputs ``x``: a program keeps the
    declarations of inputs it ignores, so that it is called with the same inputs as the program it came
    from (a derivative with its primal's).  ``declared_sizes`` are size variables of that program that
    neither the body nor the declarations mention (a derivative still takes its primal's sizes).  It
    only ever stands at the root of a program; build it with ``tensorlang.declarations.declare``, which
    gives the body itself where it reads every input and mentions every size."""

    __slots__ = ()
    _fields = ("inputs", "declared_sizes", "body")

    def _check(self) -> None:
        if not isinstance(self.body, Expr) or isinstance(self.body, Declare):
            raise TypeCheckError("a declaration scopes over one expression")
        names = [v.name for v in self.inputs]
        if any(not isinstance(v, Var) for v in self.inputs) or len(set(names)) != len(names):
            raise TypeCheckError(f"malformed declarations {self.inputs!r}")
        sizes = self.declared_sizes
        if any(not isinstance(s, SizeVar) for s in sizes) or not (names or sizes):
            raise TypeCheckError(f"malformed size declarations {sizes!r}")
        self._set_type(self.body.type)


BINDERS = (Gen, Sum, Max, Exists)  # the nodes that bind an index variable: ``var`` over ``[0, size)`` in ``body``


def gens(pairs: Iterable[tuple[IndexVar, object]], body: Expr) -> Expr:
    """``gen(i0:s0, i1:s1, ...) body``."""
    for var, size in reversed(list(pairs)):
        body = Gen(var, as_affine(size), body)
    return body


def sums(pairs: Iterable[tuple[IndexVar, object]], body: Expr) -> Expr:
    """``sum(i0:s0, i1:s1, ...) body``."""
    for var, size in reversed(list(pairs)):
        body = Sum(var, as_affine(size), body)
    return body


def guard(p: Pred, e: Expr) -> Expr:
    """``[p] * e`` with ``[true] * e = e``."""
    return e if p is TRUE else Guard(p, e)


def wrap_guards(preds: Iterable[Pred], body: Expr) -> Expr:
    """``[p0] * [p1] * ... * body`` (``true`` brackets dropped): the inverse of ``strip_guards``."""
    for p in reversed(tuple(preds)):
        body = guard(p, body)
    return body


def strip_guards(e: Expr) -> tuple[tuple[Pred, ...], Expr]:
    """``[p0] * [p1] * ... * body`` as ``((p0, p1, ...), body)``."""
    preds = []
    while isinstance(e, Guard):
        preds.append(e.pred)
        e = e.body
    return tuple(preds), e


def strip_gens(e: Expr) -> tuple[tuple[tuple[IndexVar, Affine], ...], Expr]:
    """``gen(i0:s0) gen(i1:s1) ... body`` as ``(((i0, s0), (i1, s1), ...), body)``: the inverse of ``gens``."""
    return _strip_binders(e, Gen)


def strip_sums(e: Expr) -> tuple[tuple[tuple[IndexVar, Affine], ...], Expr]:
    """``sum(i0:s0) sum(i1:s1) ... body`` as ``(((i0, s0), (i1, s1), ...), body)``: the inverse of ``sums``."""
    return _strip_binders(e, Sum)


def _strip_binders(e: Expr, kind: type) -> tuple[tuple[tuple[IndexVar, Affine], ...], Expr]:
    dims = []
    while isinstance(e, kind):
        dims.append((e.var, e.size))
        e = e.body
    return tuple(dims), e


def sum_chain(e: Expr) -> tuple[tuple[tuple[IndexVar, Affine], ...], tuple[Pred, ...], Expr]:
    """A summation chain ``sum(i:n) [p] * sum(j:m) ... body`` (the sums and the brackets among them, which
    rule 4.30 charges jointly) as ``(((i, n), (j, m), ...), (p, ...), body)``."""
    dims, preds = [], []
    while isinstance(e, (Sum, Guard)):
        if isinstance(e, Sum):
            dims.append((e.var, e.size))
        else:
            preds.append(e.pred)
        e = e.body
    return tuple(dims), tuple(preds), e


def maxes(pairs: Iterable[tuple[IndexVar, object]], body: Expr) -> Expr:
    """``max(i0:s0, i1:s1, ...) body``."""
    for var, size in reversed(list(pairs)):
        body = Max(var, as_affine(size), body)
    return body


def strip_maxes(e: Expr) -> tuple[tuple[tuple[IndexVar, Affine], ...], Expr]:
    """``max(i0:s0) max(i1:s1) ... body`` as ``(((i0, s0), (i1, s1), ...), body)``: the inverse of ``maxes``."""
    return _strip_binders(e, Max)


def strip_accesses(e: Expr) -> tuple[tuple[Affine, ...], Expr]:
    """``x[a0][a1]...`` as ``((a0, a1, ...), x)``: the inverse of ``x[a0, a1, ...]``."""
    indices = []
    while isinstance(e, Access):
        indices.append(e.index)
        e = e.tensor
    return tuple(reversed(indices)), e


def let_chain(e: Expr) -> tuple[list[tuple[Var, Expr]], Expr]:
    """``let x0 = e0 in let x1 = e1 in ... out`` as ``([(x0, e0), (x1, e1), ...], out)``."""
    out = []
    while isinstance(e, Let):
        out.append((e.var, e.value))
        e = e.body
    return out, e


def build_lets(bindings: Iterable[tuple[Var, Expr]], body: Expr) -> Expr:
    """``let x0 = e0 in let x1 = e1 in ... body``: the inverse of ``let_chain``."""
    for var, value in reversed(list(bindings)):
        body = Let(var, value, body)
    return body


def walk(node) -> Iterator:
    """All expression and predicate nodes below ``node`` (itself included), each once, pre-order."""
    seen: set[int] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        yield n
        kids = [c for c in _subnodes(n)]
        stack.extend(reversed(kids))


def _subnodes(n) -> Iterator:
    for v in n._values:
        if isinstance(v, (Expr, Pred)):
            yield v
        elif isinstance(v, tuple):
            for w in v:
                if isinstance(w, (Expr, Pred)):
                    yield w


def zero(t: Type) -> Expr:
    """The zero of type ``t`` as an expression of cost 0: ``0``, ``gen(i:n) 0``, ``(0, 0)``."""
    if isinstance(t, TensorType):
        return Gen(IndexVar("i"), t.size, zero(t.elem))
    if isinstance(t, PairType):
        return Pair(zero(t.first), zero(t.second))
    if isinstance(t, RealType):
        return Const(0)
    raise TypeCheckError(f"a {t} has no zero")
