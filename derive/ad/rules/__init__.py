"""The rule library, apart from the core transform: scalar rules inlined into generated code
(``scalar``), operators on values of unknown kind (``operators``), data structures and mutation
(``structures``), ``math``, Python builtins, NumPy (elementwise functions and reductions in ``numpy``,
functions that move entries in ``layout``, contractions and ``numpy.linalg`` in ``linalg`` and
``linalg_more``, functions given as code in ``implemented``, functions that write entries in place in
``scatter``), ``scipy.linalg``'s triangular and factored solvers (``scipy_linalg``), ``scipy.special``
(``special``), ``numpy.fft`` (``fft``), complex numbers (``complexes``), and the batch rules of ``ad.vmap``
(``batching``).  Importing the package registers them all, but for Dask's (``dask_arrays``), registered the
first time a function of Dask's is met without a rule
(``runtime.library_rules``).

The core transform (``analysis``, ``emit``, ``primal``, ``adjoint``, ``straight``, ``forward``) reads the
library through this module only:

* callables known when transforming: ``rule_of(f)`` (its rule, ``rule(*args) -> (y, back)``),
  ``is_nondiff(f)`` (a result without derivative), ``int_result(f)`` (an int, never differentiated),
  ``float_result(f)`` (a float whatever numbers go in), ``int_preserving(f)`` (an int for ints),
  ``owner(rule)`` (a rule's primitive), ``mark_nondiff(f)``, ``effect_free(f)`` (a call without
  derivative that has no effect, so that a function can be run again from its start);
* rules inlined for numbers, derivative templates (``rules.scalar``): ``scalar_call(f)`` (an ``Inline``
  or None), ``INLINE_BINOPS``, ``INLINE_UNARY``, ``scalar_templates(op, attr)`` (an instruction's);
* rules inlined for arrays (``rules.numpy``): ``array_call(f)`` (an ``ArrayInline`` or None),
  ``array_method(name)`` (the function ``x.name()`` stands for), ``ARRAY_BINOPS``,
  ``ARRAY_BINOPS_REDUCED``, ``ARRAY_GETITEM``, and ``box_free(rule)`` (a rule that neither makes nor
  reads boxes);
* operators on values of unknown kind: ``binop_rule(op)``, ``unary_rule(op)``, ``operator_function(op)``;
* rules that write to an argument: ``writes(rule)``;
* methods: ``pure_method(name)`` (does not write to its object), ``view_method(name)`` (its result may
  share memory with its object), ``stores(name)`` (stores its arguments in its object).
"""
from ..registry import LINEAR_PULLBACK, rule_owner
from ..runtime import BOX_METHODS, LIBRARY_RULES, NONDIFF, RULES, WRITING_RULES, made_by_primitive  # noqa: F401
from . import builtins, fft, layout, linalg, math, numpy, operators, scalar  # noqa: F401
from . import implemented, linalg_more, scatter, scipy_linalg, special, structures  # noqa: F401
from . import batching  # noqa: F401  (the batch rules of ad.vmap)
from . import complexes  # noqa: F401,E402  (after the rules it puts in the complex convention)
from .numpy import ARRAY_BINOPS, ARRAY_BINOPS_REDUCED, ARRAY_GETITEM  # noqa: F401  (the interface)
from .scalar import INLINE_BINOPS, INLINE_UNARY  # noqa: F401  (the interface)

_PURE_METHODS = numpy.PURE_METHODS | structures.PURE_METHODS


def _dask_rules():
    from . import dask_arrays
    dask_arrays.register()


LIBRARY_RULES["dask"] = _dask_rules   # (registered on first need: importing tensorlang.ad does not import Dask)


def _get(table, f):
    try:
        return table.get(f)
    except TypeError:   # an unhashable callable (a bound method of a list ...) has no entry
        return None


def _has(table, f) -> bool:
    try:
        return f in table
    except TypeError:
        return False


def rule_of(f):
    """The rule of callable ``f``, or None."""
    return _get(RULES, f)


def writes(rule) -> bool:
    """Whether ``rule`` writes to an argument (``object.__setattr__``, ``np.copyto``): its pullback runs
    even when its result has no gradient."""
    return _has(WRITING_RULES, rule)


def is_nondiff(f) -> bool:
    """Whether ``f``'s result has no derivative (``print``, ``np.zeros_like`` ...)."""
    return _has(NONDIFF, f)


def mark_nondiff(f) -> None:
    NONDIFF.add(f)


_EFFECT_FREE = scalar.INT_RESULT_CALLS | numpy.NONDIFF_CALLS | {range, type, callable, all, any}


def effect_free(f) -> bool:
    """Whether calling ``f`` (a primitive without derivative) again changes nothing (``len``, ``np.zeros``;
    not ``print``)."""
    return _has(_EFFECT_FREE, f)


def int_result(f) -> bool:
    """Whether ``f`` returns an int (``len``, ``math.floor`` ...)."""
    return _has(scalar.INT_RESULT_CALLS, f)


def float_result(f) -> bool:
    """Whether ``f`` returns a float whatever numbers it is given (``math.sin``, ``float`` ...)."""
    return _has(scalar.FLOAT_RESULT_CALLS, f)


def int_preserving(f) -> bool:
    """Whether an inlined scalar call returns an int when its arguments are ints (``abs``, ``min``, ``max``)."""
    return _has(scalar.INT_PRESERVING_CALLS, f)


def owner(rule):
    """The primitive (a function) whose rule ``rule`` is."""
    return rule_owner(rule).key


def scalar_call(f):
    """The inlined scalar rule (``rules.scalar.Inline``) of ``f`` on numbers, or None."""
    return _get(scalar.INLINE_CALLS, f)


def scalar_templates(op: str, attr) -> list[str]:
    """The derivative templates, one per argument, of an inlined scalar instruction: ``prim`` (``attr``
    its ``(function, name)``), ``binop`` or ``unary`` (``attr`` the operator)."""
    if op == "prim":
        return scalar.INLINE_CALLS[attr[0]].derivs
    return scalar.INLINE_BINOPS[attr] if op == "binop" else [scalar.INLINE_UNARY[attr]]


def array_call(f):
    """The inlined NumPy rule (``rules.numpy.ArrayInline``) of ``f`` on arrays, or None."""
    return _get(numpy.ARRAY_INLINE, f)


def array_method(name: str):
    """The NumPy function that an argument-less ``x.name()`` on an array is inlined as, or None."""
    return numpy.ARRAY_METHODS.get(name)


def makes_float_array(f) -> bool:
    """Whether ``f`` called with a shape alone (no dtype) makes a new float64 array (``np.zeros(n)``)."""
    return any(f is g for g in numpy.FLOAT_ARRAY_MAKERS)


def box_free(rule) -> bool:
    """Whether ``rule`` neither makes nor reads boxes (the NumPy rules: values in, values out)."""
    return str(getattr(rule, "__module__", "")).endswith("rules.numpy")


def binop_rule(op: str):
    """The rule of ``a op b`` (``op=`` for the augmented form) on values of any kind."""
    return operators.BINOPS[op]


def unary_rule(op: str):
    return operators.UNARY[op]


def operator_function(op: str):
    """The function of binary operator ``op`` (``operator.add`` for ``+``, ``operator.iadd`` for ``+=``)."""
    return operators.PYOP[op] if op in operators.PYOP else operators.PYIOP[op]


def pure_method(name: str) -> bool:
    """Whether a method of this name never writes to its object (``sum``, ``reshape``, ``keys`` ...)."""
    return name in _PURE_METHODS


def stores(name: str) -> bool:
    """Whether a method of this name stores its arguments in its object by the box rules (``append`` ...)."""
    return any(n == name for _, n in BOX_METHODS)


def linear_rule(rule) -> bool:
    """Whether ``rule``'s pullback does not depend on the values its primitive was called with or returned
    (``np.fft.fft``, ``np.sum``, ``+``)."""
    record = rule_owner(rule)
    return record is not None and (record.linear is not None or record.cross is LINEAR_PULLBACK)


def linear_method(name: str) -> bool:
    """Whether the pullback of a method of this name reads no values (``x.copy()``, ``x.sum()``)."""
    return name in numpy.LINEAR_METHODS or name in numpy.VIEW_METHODS


def view_method(name: str) -> bool:
    """Whether a method (or NumPy function) of this name may return a view of its first argument."""
    return name in numpy.VIEW_METHODS
