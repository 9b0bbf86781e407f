"""Binding user inputs to a program: sizes inferred from shapes, values checked and converted.

Sizes are found by solving the declared shape equations (each tensor dimension of an input's declared
type is an affine form in the sizes, equal to the array's extent there), with sizes passed by name as
known values.  Every mismatch is a ``ShapeError`` that names the input and both shapes.  Relations may
be given as boolean arrays, ``scipy.sparse`` matrices (their nonzero pattern) or lists of index tuples;
they are bound as dense boolean arrays of their declared shape.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from fractions import Fraction
from collections.abc import Iterable
from typing import Mapping

import numpy as np

from .errors import ShapeError, check_keywords
from .index_arrays import check_extent, index_array
from .nodes import Affine, Expr, IndexMapType, PairType, RealType, RelType, TensorType, Type, Var
from .traversal import free_vars, size_vars


@dataclass
class Binding:
    """Sizes by name, and the value of every free input (relations as dense boolean arrays)."""

    sizes: dict[str, int]
    values: dict[Var, object] = field(default_factory=dict)

    def size(self, a: Affine) -> int:
        """The extent ``a`` at these sizes; one that is negative is empty, as in Python's ``range``."""
        return max(0, int(a.evaluate({v: self.sizes[v.name] for v in a.size_vars})))


def bind(expr: Expr, inputs: Mapping[str, object], *, need_values: bool = True) -> Binding:
    """Match ``inputs`` (input values and sizes by name) against the free inputs of ``expr``."""
    free, sizes, values, arrays, equations = _equations(expr, inputs, need_values)
    binding = Binding(sizes)
    for name, value in values.items():
        var = free[name]
        if isinstance(var.type, RelType):
            binding.values[var] = relation_array(name, var.type, value, binding)
        else:
            binding.values[var] = arrays[name]
    _check_shapes(equations, binding)
    return binding


def infer_sizes(expr: Expr, inputs: Mapping[str, object]) -> dict[str, int]:
    """The sizes of ``expr`` at ``inputs``, the shape equations solved and checked as ``bind`` does, reading
    only shapes: no value is converted or copied (a Dask array is not computed, a sparse relation is not
    made dense)."""
    stand_ins = {name: _shape_only(name, v) for name, v in inputs.items()}
    _, sizes, _, _, equations = _equations(expr, stand_ins, True)
    _check_shapes(equations, Binding(sizes))
    return sizes


def _shape_only(name: str, value):
    """A lazy array (anything with a shape and a ``__dask_graph__``) as a zero-strided NumPy array of its
    shape; pairs element-wise; anything else as it is.  A Dask array whose chunk sizes are unknown (the
    result of boolean indexing) is a ``ShapeError`` saying how to learn them."""
    if isinstance(value, (tuple, list)) and not isinstance(value, np.ndarray):
        return type(value)(_shape_only(f"{name}.{k}", v) for k, v in enumerate(value)) if len(value) == 2 else value
    if hasattr(value, "__dask_graph__") and hasattr(value, "shape"):
        if any(d != d for d in value.shape):  # NaN: not known until computed
            raise ShapeError(f"input {name} is a Dask array of unknown shape {value.shape} (its chunk sizes are "
                             f"not known, as after boolean indexing): call {name}.compute_chunk_sizes() first")
        return np.broadcast_to(np.float64(0), tuple(int(d) for d in value.shape))
    return value


def _equations(expr: Expr, inputs: Mapping[str, object], need_values: bool):
    """``(free vars by name, sizes, values by name, arrays by name, shape equations)`` with every size
    solved (``ShapeError`` naming the input where one cannot be)."""
    free = {v.name: v for v in free_vars(expr)}
    size_names = [s.name for s in size_vars(expr)]
    check_keywords(inputs, free, size_names)
    sizes: dict[str, int] = {}
    values: dict[str, object] = {}
    for name, value in inputs.items():
        if name in free:
            values[name] = value
        else:
            sizes[name] = _size_value(name, value)
    if need_values:
        missing = [n for n in free if n not in values]
        if missing:
            raise ShapeError(f"missing input(s): {', '.join(missing)}")
    equations: list[tuple[Affine, int, str, str]] = []
    arrays: dict[str, object] = {}
    for name, value in values.items():
        var = free[name]
        if isinstance(var.type, RelType):
            continue
        arrays[name] = _as_value(name, var.type, value, equations)
    for name, value in values.items():
        var = free[name]
        if isinstance(var.type, RelType):
            _relation_equations(name, var.type, value, equations)
    _solve(equations, sizes)
    missing = [n for n in size_names if n not in sizes]
    if missing:
        raise ShapeError(
            f"size(s) {', '.join(missing)} cannot be inferred from the inputs' shapes; pass them by name, "
            f"e.g. {missing[0]}=10"
        )
    return free, sizes, values, arrays, equations


# the largest size: loop counters and offsets stay exact in int64 (and counts in float64) beyond any
# array that can exist; compiled kernels assume it too (codegen.domains.base_context)
MAX_SIZE = 2**53


def _size_value(name: str, value) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ShapeError(f"size {name} must be a non-negative integer, got {value!r}")
    if value > MAX_SIZE:
        raise ShapeError(f"size {name} = {value} is larger than 2**53, the largest size there is")
    return int(value)


def _as_value(name: str, t: Type, value, equations: list, path: str = ""):
    """Convert ``value`` to the evaluator's representation of type ``t``, collecting shape equations."""
    where = f"{name}{path}"
    if isinstance(t, RealType):
        if isinstance(value, (int, float, Fraction, np.floating, np.integer, np.bool_)):
            return float(value)
        arr = _real_array(where, t, value)
        if arr.shape != ():
            raise ShapeError(f"input {where} must be a real scalar of type R, got shape {arr.shape}")
        return float(arr)
    if isinstance(t, PairType):
        if not isinstance(value, (tuple, list)) or len(value) != 2:
            raise ShapeError(f"input {where} has pair type {t}: pass a tuple of two values")
        return (
            _as_value(name, t.first, value[0], equations, path + ".0"),
            _as_value(name, t.second, value[1], equations, path + ".1"),
        )
    dims = []
    elem: Type = t
    while isinstance(elem, TensorType):
        dims.append(elem.size)
        elem = elem.elem
    if isinstance(elem, PairType):
        # struct of arrays: [n](T0, T1) is passed as a pair of [n]T0 and [n]T1 (section 5.2)
        if not isinstance(value, (tuple, list)) or len(value) != 2:
            raise ShapeError(f"input {where} has type {t}: pass a pair of arrays (struct of arrays)")
        lift = lambda e: _wrap(dims, e)  # noqa: E731
        return (
            _as_value(name, lift(elem.first), value[0], equations, path + ".0"),
            _as_value(name, lift(elem.second), value[1], equations, path + ".1"),
        )
    if _is_sparse(value):
        raise ShapeError(f"input {where} of type {t} must be a dense array, got a sparse matrix")
    arr = _real_array(where, t, value)
    if arr.ndim != len(dims):
        raise ShapeError(
            f"input {where} has shape {arr.shape}, but its type {t} needs {len(dims)} dimension(s)"
        )
    for k, (size, extent) in enumerate(zip(dims, arr.shape)):
        equations.append((size, int(extent), where, (k, t)))
    return arr


# NumPy kinds that are real numbers: bool (as 0 and 1), signed and unsigned integers, floats
_REAL_KINDS = "biuf"


def _real_array(where: str, t: Type, value) -> np.ndarray:
    """``value`` as a float64 array; anything that is not real numbers (complex, strings, dates,
    ragged nestings, dicts, None) is a ``ShapeError`` naming the input."""
    try:
        arr = np.asarray(value)
    except ValueError:  # a ragged nesting of lists
        raise ShapeError(f"input {where} of type {t} is ragged: its rows have different lengths") from None
    if arr.dtype.kind == "O":  # Python objects: real numbers (Fraction, ...) convert, nothing else does
        bad = [x for x in arr.flat if not isinstance(x, numbers.Real)][:1]
        if bad:
            what = f"a {type(bad[0]).__name__}" + (f" in a {type(value).__name__}" if arr.ndim else "")
            raise ShapeError(f"input {where} of type {t} must hold real numbers, got {what}")
        arr = arr.astype(np.float64)
    if arr.dtype.kind not in _REAL_KINDS:
        raise ShapeError(f"input {where} of type {t} must hold real numbers, got dtype {arr.dtype}")
    return arr.astype(np.float64, copy=False)


def _wrap(dims, elem: Type) -> Type:
    for s in reversed(dims):
        elem = TensorType(s, elem)
    return elem


def _is_sparse(value) -> bool:
    return hasattr(value, "tocoo") and hasattr(value, "nnz")


def _fail(message: str):
    raise ShapeError(message)


def _relation_equations(name: str, t: RelType, value, equations: list) -> None:
    if isinstance(t, IndexMapType):
        equations.append((t.length, len(index_array(name, value, _fail)), name, f"the length of {t}"))
        return
    if _is_sparse(value) or (isinstance(value, np.ndarray) and value.ndim == len(t.sizes)):
        shape = value.shape
        if len(shape) != len(t.sizes):
            raise ShapeError(f"relation {name} has shape {shape}, but its type {t} needs {len(t.sizes)} dims")
        for k, (size, extent) in enumerate(zip(t.sizes, shape)):
            equations.append((size, int(extent), name, f"dimension {k} of {t}"))


def relation_array(name: str, t: RelType, value, binding: Binding) -> np.ndarray:
    """The relation as a dense boolean array of its declared shape."""
    shape = tuple(binding.size(s) for s in t.sizes)
    if not isinstance(t, IndexMapType) and isinstance(value, np.ndarray) and value.ndim == len(shape) \
            and value.dtype != object:
        _check_mask(name, t, value, shape)
        return value.astype(bool)
    out = np.zeros(shape, dtype=bool)
    index = relation_tuples(name, t, value, shape)
    if all(len(a) for a in index):
        out[index] = True
    return out


def relation_tuples(name: str, t: RelType, value, shape: tuple) -> tuple[np.ndarray, ...]:
    """The index tuples of a relation given in any accepted form, checked against ``shape``: one int64 array
    per dimension (in no particular order, duplicates possible).  An index array ``g`` gives ``(i, g[i])``."""
    if isinstance(t, IndexMapType):
        g = index_array(name, value, _fail)
        check_extent(name, g, shape[1], _fail)
        return np.arange(len(g), dtype=np.int64), g
    if _is_sparse(value):
        return tuple(np.asarray(a, dtype=np.int64) for a in _sparse_pattern(name, value))
    if isinstance(value, np.ndarray) and value.ndim == len(shape) and value.dtype != object:
        _check_mask(name, t, value, shape)
        return tuple(np.asarray(a, dtype=np.int64) for a in np.nonzero(value))
    zero_d = getattr(value, "ndim", None) == 0
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable) or zero_d:
        raise ShapeError(
            f"relation {name} must be a boolean array, a scipy.sparse matrix or a list of index tuples, "
            f"got a {'0-d array' if zero_d else type(value).__name__}"
        )
    tuples = []
    for tup in value:
        tup = tuple(_index(name, a) for a in (tup if isinstance(tup, (tuple, list, np.ndarray)) else (tup,)))
        if len(tup) != len(shape) or any(not 0 <= a < s for a, s in zip(tup, shape)):
            raise ShapeError(f"relation {name}: index tuple {tup} is outside its declared shape {shape}")
        tuples.append(tup)
    arr = np.array(tuples, dtype=np.int64).reshape(-1, len(shape))
    return tuple(arr[:, k] for k in range(len(shape)))


def _check_mask(name: str, t: RelType, value: np.ndarray, shape: tuple) -> None:
    if value.shape != shape:
        raise ShapeError(f"relation {name} has shape {value.shape}, but its type {t} needs {shape}")
    if value.dtype.kind not in _REAL_KINDS:
        raise ShapeError(f"relation {name} must be a boolean array, got dtype {value.dtype}")


def _index(name: str, a) -> int:
    """One index of a relation's tuple: an integer (never a float, a bool or a string)."""
    if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
        raise ShapeError(f"relation {name}: an index tuple holds {a!r}, which is not an integer")
    return int(a)


def checked_sparse(name: str, value):
    """The ``scipy.sparse`` matrix ``value`` after checking its structure (an index past its extent, a row
    pointer that decreases or runs past the end: an error, never read)."""
    try:
        if hasattr(value, "check_format"):
            value.check_format(full_check=True)
    except (ValueError, IndexError) as exc:
        raise ShapeError(f"relation {name} is a malformed sparse matrix: {exc}") from None
    return value


def _sparse_pattern(name: str, value) -> tuple[np.ndarray, np.ndarray]:
    """The rows and columns of the stored nonzeros of a ``scipy.sparse`` matrix, after checking its
    structure (a malformed CSR, with an index past its extent or a decreasing row pointer, is an
    error, never read)."""
    try:
        coo = checked_sparse(name, value).tocoo()
    except (ValueError, IndexError) as exc:
        raise ShapeError(f"relation {name} is a malformed sparse matrix: {exc}") from None
    rows, cols = np.asarray(coo.row), np.asarray(coo.col)
    bad = (rows < 0) | (rows >= coo.shape[0]) | (cols < 0) | (cols >= coo.shape[1])
    if bad.any():
        k = int(np.argmax(bad))
        raise ShapeError(
            f"relation {name} is a malformed sparse matrix: entry ({rows[k]}, {cols[k]}) is outside its "
            f"shape {coo.shape}"
        )
    keep = np.asarray(coo.data) != 0
    return rows[keep], cols[keep]


def _solve(equations: list, sizes: dict[str, int]) -> None:
    """Solve ``affine = extent`` equations for unknown sizes, one unknown at a time."""
    progress = True
    while progress:
        progress = False
        for affine, extent, where, what in equations:
            unknown = [(v, c) for v, c in affine.terms if v.name not in sizes]
            if len(unknown) != 1:
                continue
            (var, coeff), = unknown
            rest = affine.const + sum(c * sizes[v.name] for v, c in affine.terms if v.name in sizes)
            value, remainder = divmod(extent - rest, coeff)
            if remainder or value < 0:
                raise ShapeError(
                    f"input {where} has extent {extent} in dimension {what[0]} of its type {what[1]}, "
                    f"which no non-negative size "
                    f"{var.name} satisfies ({affine!r} = {extent})"
                )
            sizes[var.name] = int(value)
            progress = True


def _check_shapes(equations: list, binding: Binding) -> None:
    by_input: dict[str, list] = {}
    for eq in equations:
        by_input.setdefault(eq[2], []).append(eq)
    for where, eqs in by_input.items():
        actual = tuple(e[1] for e in eqs)
        expected = tuple(binding.size(e[0]) for e in eqs)
        if actual != expected:
            declared = ", ".join(repr(e[0]) for e in eqs)
            sizes = ", ".join(f"{k} = {v}" for k, v in binding.sizes.items())
            raise ShapeError(
                f"input {where} has shape {actual}, but its declared shape ({declared}) is {expected} "
                f"with {sizes}"
            )

