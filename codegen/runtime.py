"""The run-time side of a compiled kernel: NumPy and ctypes only.

This module imports nothing from tensorlang but ``spelling`` (the standard library alone), so that
``tl.export`` can copy both verbatim next to a compiled library and the exported module runs where only
NumPy is installed.  ``Runner(meta, library)``
is called with the same inputs as ``tl.evaluate``: its ``Arguments`` (shared with the CUDA runner)
check every input's type, shape and dtype
against the declared types (solving the shape equations for the sizes, as ``tensorlang.inputs.bind``
does) and raises ``error`` (``ShapeError``) *before* any C runs; converts the arrays (contiguous,
float64 or float32); turns relations into the views the kernel reads (CSR row pointers and column
indices as int32, of the relation or of its transpose, or a dense byte mask); allocates the outputs;
and calls the entry point ``void entry(const int64_t *sizes, void **args)``.

``meta`` is plain data (JSON): affine forms are ``[const, [[size, coeff], ...]]``.
"""
from __future__ import annotations

import ctypes
import glob
import math
import numbers
import os
import threading
import weakref

import numpy as np

from tensorlang.index_arrays import check_extent, index_array
from tensorlang.spelling import unknown_input

__all__ = ["Arguments", "Runner", "RuntimeShapeError", "blas_table", "aff_value", "argument_bytes", "workspace_bytes"]

# ---- BLAS for dense contractions ------------------------------------------------------------------
# A kernel with matrix products (codegen.contract) takes a table {gemm, gemv, ilp64 flag} of Fortran
# BLAS entry points.  First choice: the OpenBLAS that NumPy itself ships and uses for ``@`` (found next
# to NumPy, so an exported module gets it with NumPy alone; ILP64 symbols ``scipy_dgemm_64_``...);
# then SciPy's ``scipy.linalg.cython_blas`` (function pointers from its capsules, 32-bit integers);
# otherwise NULLs, and the kernel runs its own tiled loops.  ``TENSORLANG_BLAS=0`` forces the loops (read
# when a kernel first runs: a runner keeps the table's address it got then).

_BLAS_TABLES: dict = {}


def _numpy_blas(prefix):
    here = os.path.dirname(os.path.abspath(np.__file__))
    paths = sorted(glob.glob(os.path.join(here, os.pardir, "numpy.libs", "*openblas*")))
    paths += sorted(glob.glob(os.path.join(here, ".libs", "*openblas*")))
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for pre, suf, ilp64 in (("scipy_", "_64_", True), ("", "_64_", True), ("scipy_", "_", False),
                                ("", "_", False)):
            try:
                gemm = getattr(lib, f"{pre}{prefix}gemm{suf}")
                gemv = getattr(lib, f"{pre}{prefix}gemv{suf}")
            except AttributeError:
                continue
            return (ctypes.cast(gemm, ctypes.c_void_p).value, ctypes.cast(gemv, ctypes.c_void_p).value, ilp64,
                    "numpy:" + os.path.basename(path))
    return None


def _scipy_blas(prefix):
    try:
        from scipy.linalg import cython_blas
    except Exception:  # noqa: BLE001 - SciPy is optional
        return None
    api = ctypes.pythonapi
    api.PyCapsule_GetName.restype = ctypes.c_char_p
    api.PyCapsule_GetName.argtypes = [ctypes.py_object]
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    ptrs = []
    for name in (prefix + "gemm", prefix + "gemv"):
        cap = cython_blas.__pyx_capi__[name]
        ptrs.append(api.PyCapsule_GetPointer(cap, api.PyCapsule_GetName(cap)))
    return ptrs[0], ptrs[1], False, "scipy.linalg.cython_blas"


def blas_address(dtype) -> int:
    """The address of ``blas_table(dtype)``'s table, as a kernel is passed it."""
    hit = _BLAS_TABLES.get((dtype, os.environ.get("TENSORLANG_BLAS", "")))
    return _addressof((hit or blas_table(dtype))[0])


def blas_table(dtype):
    """``(ctypes table of 3 pointers, description)`` for ``float64``/``float32`` (cached, under the dtype as
    given: this runs on every call of a kernel that calls BLAS)."""
    key = (dtype, os.environ.get("TENSORLANG_BLAS", ""))
    hit = _BLAS_TABLES.get(key)
    if hit is None:
        prefix = "s" if np.dtype(dtype).name == "float32" else "d"
        found = None
        if key[1] != "0":
            for finder in (_numpy_blas, _scipy_blas):
                try:
                    found = finder(prefix)
                except Exception:  # noqa: BLE001 - any trouble: the kernel's own loops
                    found = None
                if found is not None:
                    break
        table = (ctypes.c_void_p * 3)()
        desc = "loops (no BLAS found)"
        if found is not None:
            table[0], table[1], table[2] = found[0], found[1], 1 if found[2] else None
            desc = found[3]
        hit = _BLAS_TABLES[key] = (table, desc)
    return hit


# the largest size (tensorlang.inputs.MAX_SIZE, which this NumPy-only module cannot import)
MAX_SIZE = 2**53


def sorted_unique(a: np.ndarray) -> np.ndarray:
    """The distinct values of the integers ``a``, sorted (by a sort: NumPy's hash-based ``unique`` is 60x
    slower on the linear indices of a relation's entries)."""
    a = np.sort(a)
    return a[np.concatenate(([True], a[1:] != a[:-1]))] if a.size else a


def canonical_csr(rows: np.ndarray, cols: np.ndarray, nrows: int, ncols: int) -> tuple[np.ndarray, np.ndarray]:
    """The CSR arrays (int32) of the pairs ``(rows[k], cols[k])``, duplicates dropped (``sorted_unique`` of
    their linear indices)."""
    lin = sorted_unique(np.asarray(rows, dtype=np.int64) * max(ncols, 1) + cols)
    r, c = (lin // max(ncols, 1), lin % max(ncols, 1)) if lin.size else (lin, lin)
    ptr = np.zeros(nrows + 1, dtype=np.int64)
    np.cumsum(np.bincount(r, minlength=nrows), out=ptr[1:])
    return ptr.astype(np.int32), c.astype(np.int32)


class RuntimeShapeError(ValueError):
    """Raised for bad inputs when no error class is given (the exported module's ShapeError)."""


def aff_value(a, sizes) -> int:
    """The extent given by the affine form ``a`` (``[const, [[size, coeff], ...]]``) at ``sizes``: 0 where
    it is negative, as in Python's ``range`` (and the evaluator)."""
    const, terms = a
    return max(0, int(const + sum(c * sizes[s] for s, c in terms)))


def workspace_bytes(meta: dict, sizes: dict, dtype) -> int:
    """The bytes of the buffer holding a kernel's temporaries at ``sizes`` (0 when it has none): each
    temporary of ``meta["workspace"]`` ``TL_WS_BYTES`` long (one element more, 64-byte aligned), and 64
    for aligning the buffer."""
    if not meta.get("workspace"):
        return 0
    item = np.dtype(dtype).itemsize
    return 64 + sum(((_elements(dims, sizes) + 1) * item + 63) & ~63 for dims in meta["workspace"])


def argument_bytes(meta: dict, sizes: dict, dtype) -> tuple[int, int, int]:
    """``(inputs, outputs, temporaries)``: the bytes of the dense arrays a kernel reads, of those it
    writes and of its workspace (``workspace_bytes``) at ``sizes``; a scalar counts one element.
    Relations are not counted (what they take depends on their nonzeros)."""
    item = np.dtype(dtype).itemsize
    ins = sum(_elements(c["dims"], sizes) * item for i in meta["inputs"] for c in i["components"])
    outs = sum(_elements(o["dims"], sizes) * item for o in meta["outputs"])
    return ins, outs, workspace_bytes(meta, sizes, dtype)


def _elements(dims, sizes) -> int:
    """The number of elements of an array of the affine extents ``dims`` at ``sizes``."""
    n = 1
    for d in dims:
        n *= aff_value(d, sizes)
    return n


def _aff_str(a) -> str:
    const, terms = a
    parts = [(s if c == 1 else f"{c}*{s}") for s, c in terms]
    if const or not parts:
        parts.append(str(const))
    return " + ".join(parts).replace("+ -", "- ")


def _physical_memory() -> int:
    """This machine's memory in bytes (no array larger can be made; unknown: no limit)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 2**63


PHYSICAL_MEMORY = _physical_memory()


def _is_sparse(v) -> bool:
    return hasattr(v, "tocoo") and hasattr(v, "nnz") and hasattr(v, "shape")


OUTPUT_POOL_BYTES = 1 << 20


def _assembler(structure, outputs: list):
    """The function from a kernel's output arrays to its value (scalars as floats, pairs as tuples), written
    out once per kernel as one expression: ``[0, [1, 2]]`` is ``lambda o: (o[0], (o[1], o[2]))``.  (It
    holds no reference to itself, so a result is freed as soon as its caller drops it, and its buffer
    returns to the output pool.)"""
    def text(s) -> str:
        if isinstance(s, list):
            return "(" + ", ".join(map(text, s)) + ("," if len(s) == 1 else "") + ")"
        return f"o[{int(s)}]" if outputs[s]["dims"] else f"float(o[{int(s)}][0])"
    return eval(f"lambda o: {text(structure)}", {"float": float})   # noqa: S307 - the text is built above


def _recycle(pools: dict, pool: list, buf, budget: int) -> None:
    """Gives the buffer of a dropped result back to its size's ``pool`` (one of ``pools``), or to the
    allocator where two of its size are kept and the idle buffers would exceed ``budget`` bytes."""
    if len(pool) < 2 or sum(size * len(p) for size, p in list(pools.items())) + buf.nbytes <= budget:
        pool.append(buf)


_addressof, _from_buffer = ctypes.addressof, ctypes.c_char.from_buffer


def address(a: np.ndarray) -> int:
    """The address of array ``a``'s data: through the buffer protocol (a tenth of ``a.ctypes.data``'s
    cost, which matters on every call of a small kernel), or ``a.ctypes.data`` where ``a`` is read-only or
    empty."""
    try:
        return _addressof(_from_buffer(a))
    except (TypeError, ValueError):
        return a.ctypes.data


UNCHECKED = object()   # ``prepare``'s ``plain`` when its caller has not asked for it
PLAIN_FLOATS = (float, np.float64)   # a scalar input a float64 kernel reads as it is
FLOAT64 = np.dtype(np.float64)


def _plain_reader(components: list, n_inputs: int, dtype: np.dtype):
    """``Arguments.plain`` for a kernel whose inputs are ``components`` (``(input, projections into its pairs,
    whether it is a scalar)`` in the order of its arguments; ``n_inputs`` inputs), as one function of straight-line
    checks written for them (a loop over the components, and their projections, cost more than the kernel
    itself on small arrays)."""
    lines = ["def plain(inputs):", f"    if len(inputs) != {n_inputs}:", "        return None"]
    taken: dict = {}
    for k, (name, projs, scalar) in enumerate(components):
        if name not in taken:
            taken[name] = f"i{len(taken)}"
            lines.append(f"    {taken[name]} = inputs.get({name!r})")
        v = taken[name]
        for depth, proj in enumerate(projs):
            lines += [f"    if type({v}) is not tuple or len({v}) != 2:", "        return None"]
            lines.append(f"    p{k}_{depth} = {v}[{proj}]")
            v = f"p{k}_{depth}"
        lines.append(f"    v{k} = {v}")
        check = f"type(v{k}) is not ndarray or v{k}.dtype is not dtype or not v{k}.flags.c_contiguous"
        if scalar and dtype is FLOAT64:   # (a float: read as a 0-d array)
            lines += [f"    if type(v{k}) in floats:", f"        s{k}, v{k} = (), array(v{k})",
                      f"    elif {check}:", "        return None", "    else:", f"        s{k} = v{k}.shape"]
        else:
            lines += [f"    if {check}:", "        return None", f"    s{k} = v{k}.shape"]
    shapes = "".join(f"s{k}, " for k in range(len(components)))
    lines.append(f"    return ({shapes}), [{', '.join(f'v{k}' for k in range(len(components)))}]")
    namespace = {"ndarray": np.ndarray, "dtype": dtype, "floats": PLAIN_FLOATS, "array": np.array}
    exec(compile("\n".join(lines), "<tensorlang kernel inputs>", "exec"), namespace)
    return namespace["plain"]


class Arguments:
    """A kernel's inputs checked against ``meta`` (raising ``error``) and laid out as its arguments:
    ``prepare(inputs)`` before the call, ``results(outputs)`` (``_assembler``) after it."""

    def __init__(self, meta: dict, error=RuntimeShapeError):
        self.meta = meta
        self.error = error
        self.dtype = np.float32 if meta["dtype"] == "float32" else np.float64
        self._dtype = np.dtype(self.dtype)
        self.inputs = meta["inputs"]
        self.relations = meta["relations"]
        self.names = [i["name"] for i in self.inputs] + [r["name"] for r in self.relations]
        self.out_pool: dict = {}  # nbytes -> recycled output buffers (see output; runners may share one)
        # the bytes of idle ones kept beyond two per size (a loop that drops each result before the next
        # call needs two): none, but for a Dask worker's block programs (codegen.dask_graph)
        self.pool_budget = 0
        self._transposes: dict = {}  # relation name -> its last transposed CSR (see _transposed)
        # a kernel whose inputs are arrays and pairs of arrays (no relations) prepares a call of arrays it
        # reads as they are from their shapes alone: what the checks found, per tuple of shapes (see plain);
        # ``(input, projections, whether it is a scalar)`` per component, in the order of the kernel's arguments
        self._read_plain = None if self.relations else _plain_reader(
            [(i["name"], tuple(c["projs"]), not c["dims"]) for i in self.inputs for c in i["components"]],
            len(self.inputs), self._dtype)
        self._prepared: dict = {}  # shapes -> (sizes array, output shapes, all below the pool's size)
        self.results = _assembler(meta["structure"], meta["outputs"])

    # ---------------------------------------------------------------------------------------------

    def _fail(self, msg: str):
        raise self.error(msg)

    def _component(self, name, value, projs):
        where = name
        for k in projs:
            if not isinstance(value, (tuple, list)) or len(value) != 2:
                self._fail(f"input {where} has a pair type: pass a tuple of two values")
            value = value[k]
            where += f".{k}"
        return where, value

    def _array(self, where, value, ndim):
        if _is_sparse(value):
            self._fail(f"input {where} must be a dense array, got a sparse matrix")
        try:
            arr = np.asarray(value)
        except Exception as exc:  # noqa: BLE001 - ragged lists and the like
            self._fail(f"input {where} cannot be read as an array: {exc}")
        if arr.dtype.kind == "O":  # Python objects: real numbers (Fraction, ...) convert, as tl.evaluate's do
            bad = [x for x in arr.flat if not isinstance(x, numbers.Real)][:1]
            if bad:
                self._fail(f"input {where} must hold real numbers, got a {type(bad[0]).__name__}")
            try:
                arr = arr.astype(np.float64)
            except OverflowError:
                self._fail(f"input {where} holds an integer beyond float64's range")
        if arr.dtype.kind not in "biuf":
            self._fail(f"input {where} has dtype {arr.dtype}; a real (float, int or bool) array is needed")
        if arr.ndim != ndim:
            if ndim == 0:
                self._fail(f"input {where} must be a real scalar of type R, got shape {arr.shape}")
            self._fail(f"input {where} has shape {arr.shape}, but its type {self._type_of(where)} needs "
                       f"{ndim} dimension(s)")
        return arr

    def _converted(self, where, arr):
        """``arr`` as the kernel reads it: C-contiguous, of the kernel's dtype; a copy that cannot be made
        (a broadcast view of 2^40 elements) or a value beyond the dtype's range (1e308 for float32) is
        refused, never allocated or rounded to infinity."""
        if arr.dtype == self.dtype and arr.flags.c_contiguous:
            return arr
        self._allocatable(arr.shape, lambda: f"input {where} (shape {arr.shape}) must be copied as a contiguous "
                                             f"{np.dtype(self.dtype).name} array, which")
        try:
            with np.errstate(over="raise"):
                return np.ascontiguousarray(arr, dtype=self.dtype)
        except FloatingPointError:
            big = np.abs(arr[np.isfinite(arr)]).max()
            self._fail(f"input {where} holds {big:g}, beyond the range of this kernel's dtype "
                       f"{np.dtype(self.dtype).name} (+-{np.finfo(self.dtype).max:g}); compile it with "
                       f"dtype='float64'")

    def _allocatable(self, shape, what) -> int:
        """The bytes of an array of ``shape`` of the kernel's dtype, refused beyond this machine's memory,
        before NumPy tries (a 74 TiB output raised a bare ``MemoryError``); ``what()`` names the array in
        the message (made only then: this runs on every call)."""
        nbytes = np.dtype(self.dtype).itemsize
        for d in shape:
            nbytes *= d
        if nbytes > PHYSICAL_MEMORY:
            self._fail(f"{what()} takes {nbytes:,} bytes, more than this machine's memory "
                       f"({PHYSICAL_MEMORY:,} bytes): too large to allocate")
        return nbytes

    def _type_of(self, where):
        for i in self.inputs:
            if i["name"] == where.split(".")[0]:
                return i["type"]
        return "?"

    def plain(self, inputs: dict) -> tuple | None:
        """``(shapes, arrays in argument order)`` where ``inputs`` are exactly this kernel's inputs, each a
        C-contiguous NumPy array of its dtype (or, for a scalar of a float64 kernel, a Python or NumPy float,
        passed as a 0-d array) or a pair (a tuple) of such (what the checks take as it is, so that shapes the
        checks accepted once are accepted again with the same sizes); None otherwise.  Its checks are one
        function written for this kernel's inputs (``_plain_reader``): this runs at every call."""
        return None if self._read_plain is None else self._read_plain(inputs)

    def prepare(self, inputs: dict, plain=UNCHECKED, allocate: bool = True):
        """``(sizes array, list of arrays in argument order, outputs)`` after all checks (once per tuple of
        shapes for plain inputs: ``plain``, whose answer a caller that asked already passes); no outputs where
        not ``allocate``."""
        if plain is UNCHECKED:
            plain = self.plain(inputs)
        found = self._prepared.get(plain[0]) if plain is not None else None
        if found is not None:
            size_arr, out_shapes, small = found
            args = plain[1]
        else:
            size_arr, args, out_shapes = self._checked(inputs)
            small = all(math.prod(shape) * self._dtype.itemsize < OUTPUT_POOL_BYTES for shape in out_shapes)
            if plain is not None and len(self._prepared) < 64:
                self._prepared[plain[0]] = (size_arr, out_shapes, small)
        if not allocate:
            return size_arr, args, []
        if small:   # (allocatable, and below the pool's size)
            return size_arr, args, [np.empty(shape, self.dtype) for shape in out_shapes]
        return size_arr, args, [self.output(shape, k) for k, shape in enumerate(out_shapes)]

    def output_shapes(self, inputs: dict) -> list:
        """The shapes of the results on ``inputs``, after all checks."""
        return self._checked(inputs)[2]

    def _checked(self, inputs: dict):
        sizes: dict[str, int] = {}
        size_names = self.meta["sizes"]
        for name, v in inputs.items():
            if name in self.names:
                continue
            if name in size_names:
                if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < 0:
                    self._fail(f"size {name} must be a non-negative integer, got {v!r}")
                if v > MAX_SIZE:
                    self._fail(f"size {name} = {v} is larger than 2**53, the largest size there is")
                sizes[name] = int(v)
            else:
                self._fail(unknown_input(name, self.names, size_names))
        missing = [n for n in self.names if n not in inputs]
        if missing:
            self._fail(f"missing input(s): {', '.join(missing)}")
        equations = []  # (affine, extent, where, k, type)
        values = []
        for inp in self.inputs:
            for comp in inp["components"]:
                where, v = self._component(inp["name"], inputs[inp["name"]], comp["projs"])
                arr = self._array(where, v, len(comp["dims"]))
                for k, (d, extent) in enumerate(zip(comp["dims"], arr.shape)):
                    equations.append((d, int(extent), where, k, comp["type"]))
                values.append((where, arr))
        rels = []
        for rel in self.relations:
            v = inputs[rel["name"]]
            shape = None
            if rel.get("index_array"):
                v = index_array(rel["name"], v, self._fail)
                equations.append((rel["dims"][0], len(v), rel["name"], 0, rel["type"]))
            elif _is_sparse(v):
                shape = tuple(v.shape)
            elif isinstance(v, np.ndarray) and v.dtype != object and v.ndim == len(rel["dims"]):
                shape = v.shape
            if shape is not None:
                if len(shape) != len(rel["dims"]):
                    self._fail(f"relation {rel['name']} has shape {shape}, but its type {rel['type']} needs "
                               f"{len(rel['dims'])} dims")
                for k, (d, extent) in enumerate(zip(rel["dims"], shape)):
                    equations.append((d, int(extent), rel["name"], k, rel["type"]))
            rels.append(v)
        self._solve(equations, sizes)
        missing = [n for n in size_names if n not in sizes]
        if missing:
            self._fail(f"size(s) {', '.join(missing)} cannot be inferred from the inputs' shapes; pass them "
                       f"by name, e.g. {missing[0]}=10")
        by_input: dict = {}
        for eq in equations:
            by_input.setdefault(eq[2], []).append(eq)
        for where, eqs in by_input.items():
            actual = tuple(e[1] for e in eqs)
            expected = tuple(aff_value(e[0], sizes) for e in eqs)
            if actual != expected:
                declared = ", ".join(_aff_str(e[0]) for e in eqs)
                sz = ", ".join(f"{k} = {v}" for k, v in sizes.items())
                self._fail(f"input {where} has shape {actual}, but its declared shape ({declared}) is "
                           f"{expected} with {sz}")
        args = [self._converted(where, a) for where, a in values]
        for rel, v in zip(self.relations, rels):
            args.extend(self._relation(rel, v, sizes))
        out_shapes = tuple(tuple(aff_value(d, sizes) for d in o["dims"]) or (1,) for o in self.meta["outputs"])
        size_arr = np.array([sizes[s] for s in size_names] + [0], dtype=np.int64)
        return size_arr, args, out_shapes

    def _solve(self, equations, sizes) -> None:
        progress = True
        while progress:
            progress = False
            for (const, terms), extent, where, k, typ in equations:
                unknown = [(s, c) for s, c in terms if s not in sizes]
                if len(unknown) != 1:
                    continue
                (var, coeff), = unknown
                rest = const + sum(c * sizes[s] for s, c in terms if s in sizes)
                value, remainder = divmod(extent - rest, coeff)
                if remainder or value < 0:
                    self._fail(f"input {where} has extent {extent} in dimension {k} of its type {typ}, which "
                               f"no non-negative size {var} satisfies ({_aff_str((const, terms))} = {extent})")
                sizes[var] = int(value)
                progress = True

    # ---------------------------------------------------------------------------------------------
    # relations

    def _pairs(self, rel, v, shape):
        """The relation's index tuples as arrays (one per dimension), without duplicates."""
        name = rel["name"]
        if rel.get("index_array"):
            return [np.arange(len(v), dtype=np.int64), v]
        if _is_sparse(v):
            coo = self._checked_sparse(name, v).tocoo()
            rows, columns = np.asarray(coo.row), np.asarray(coo.col)
            bad = (rows < 0) | (rows >= coo.shape[0]) | (columns < 0) | (columns >= coo.shape[1])
            if bad.any():
                k = int(np.argmax(bad))
                self._fail(f"relation {name} is a malformed sparse matrix: entry ({rows[k]}, {columns[k]}) is "
                           f"outside its shape {coo.shape}")
            keep = np.asarray(coo.data) != 0
            cols = [rows[keep], columns[keep]]
        elif isinstance(v, np.ndarray) and v.dtype != object and v.ndim == len(shape):
            if v.dtype.kind not in "biuf":
                self._fail(f"relation {name} must be a boolean array, got dtype {v.dtype}")
            cols = list(np.nonzero(v))
        else:
            zero_d = getattr(v, "ndim", None) == 0
            if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__") or zero_d:
                self._fail(f"relation {name} must be a boolean array, a scipy.sparse matrix or a list of index "
                           f"tuples, got a {'0-d array' if zero_d else type(v).__name__}")
            rows = [t if isinstance(t, (tuple, list, np.ndarray)) else (t,) for t in v]
            tuples = [tuple(self._index(name, a) for a in t) for t in rows]
            for t in tuples:
                if len(t) != len(shape) or any(not 0 <= a < s for a, s in zip(t, shape)):
                    self._fail(f"relation {name}: index tuple {t} is outside its declared shape {shape}")
            arr = np.array(tuples, dtype=np.int64).reshape(-1, len(shape))
            cols = [arr[:, k] for k in range(len(shape))]
        return [np.asarray(c, dtype=np.int64) for c in cols]

    def _index(self, name, a) -> int:
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
            self._fail(f"relation {name}: an index tuple holds {a!r}, which is not an integer")
        return int(a)

    def _checked_sparse(self, name, v):
        """``v`` after checking its structure: a malformed CSR/CSC (an index past its extent, a row pointer
        that decreases or runs past the end) is refused, never read by a kernel."""
        try:
            if hasattr(v, "check_format"):
                v.check_format(full_check=True)
            return v
        except (ValueError, IndexError) as exc:
            self._fail(f"relation {name} is a malformed sparse matrix: {exc}")

    def _transposed(self, name, csr, shape):
        """The CSR arrays of the transpose of a canonical CSR relation.  A gradient calls its kernel with
        the same relation again and again (an optimiser's loop), so the last transpose of each relation
        is kept with a copy of the arrays it came from, and reused while they are equal (an O(nnz)
        comparison instead of an O(nnz log nnz) sort)."""
        hit = self._transposes.get(name)
        if (hit is not None and hit[0] == shape and np.array_equal(hit[1], csr[0])
                and np.array_equal(hit[2], csr[1])):
            return hit[3]
        rows = np.repeat(np.arange(shape[0], dtype=np.int64), np.diff(csr[0]))
        views = canonical_csr(csr[1].astype(np.int64), rows, shape[1], shape[0])
        self._transposes[name] = (shape, csr[0].copy(), csr[1].copy(), views)
        return views

    def _relation(self, rel, v, sizes):
        shape = tuple(aff_value(d, sizes) for d in rel["dims"])
        views = rel["views"]
        out = []
        if not views:
            return out
        fast = None
        if rel.get("index_array"):  # checked by index_array already; one pair per row: CSR as it stands
            check_extent(rel["name"], v, shape[1], self._fail)
            fast = (np.arange(len(v) + 1, dtype=np.int32), v.astype(np.int32))
        elif _is_sparse(v) and getattr(v, "format", None) == "csr":
            # a canonical CSR matrix without stored zeros is used as it is (no copy for int32 indices)
            if self._checked_sparse(rel["name"], v).has_canonical_format and np.count_nonzero(v.data) == v.nnz:
                fast = (np.asarray(v.indptr, dtype=np.int32), np.asarray(v.indices, dtype=np.int32))
        pairs = None
        for view in views:
            if view in ("csr_idx", "csc_idx"):
                continue
            if view == "csr_ptr" and fast is not None:
                out += list(fast)
                continue
            if view == "csc_ptr" and fast is not None:
                out += list(self._transposed(rel["name"], fast, shape))
                continue
            if pairs is None:
                pairs = self._pairs(rel, v, shape)
            if view == "csr_ptr":
                out += list(canonical_csr(pairs[0], pairs[1], shape[0], shape[1]))
            elif view == "csc_ptr":
                out += list(canonical_csr(pairs[1], pairs[0], shape[1], shape[0]))
            elif view == "dense":
                mask = np.zeros(shape, dtype=np.uint8)
                if all(len(p) for p in pairs):
                    mask[tuple(pairs)] = 1
                out.append(mask)
        return out

    # ---------------------------------------------------------------------------------------------

    def output(self, shape, k: int):
        """A new output array.  A large one (``OUTPUT_POOL_BYTES`` or more) is memory recycled from an
        earlier result of this kernel that its caller has dropped: fresh memory from the operating
        system is zeroed page by page on first touch, which on this VM costs 3 to 10 times the
        kernel itself for a 32 MB gradient (the 2-D stencil at n = 2048).  The array is a view of a
        per-call holder object; every view of the result keeps the holder alive (NumPy's base chain
        stops at it), and the holder's finalizer returns the buffer to the pool only when the last
        view is gone; the pool keeps two buffers per size, and more while their bytes stay within
        ``pool_budget``.  ``k`` is the output's number, for the message where it cannot be allocated."""
        count = len(self.meta["outputs"])
        what = lambda: f"the kernel's output{f' {k}' if count > 1 else ''} of shape {shape}"  # noqa: E731
        nbytes = self._allocatable(shape, what)
        pools = self.out_pool
        if nbytes < OUTPUT_POOL_BYTES:
            return np.empty(shape, dtype=self.dtype)
        if nbytes not in pools and len(pools) >= 4:
            pools.clear()
        pool = pools.setdefault(nbytes, [])
        try:
            buf = pool.pop()
        except IndexError:
            try:
                buf = np.empty(nbytes, dtype=np.uint8)
            except MemoryError:
                self._fail(f"{what()} takes {nbytes:,} bytes, more than the memory free now: too large to allocate")
        holder = (ctypes.c_char * nbytes).from_buffer(buf)
        weakref.finalize(holder, _recycle, pools, pool, buf, self.pool_budget)
        return np.frombuffer(holder, dtype=self.dtype).reshape(shape)


class Runner(Arguments):
    """Checks inputs, converts them and calls the compiled entry point (see the module docstring)."""

    def __init__(self, meta: dict, library, error=RuntimeShapeError, caller=None):
        super().__init__(meta, error)
        self.fn = getattr(library, meta["entry"])
        self.fn.restype = None
        self.fn.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
        # ``caller(entry address, sizes, arrays, extra addresses)`` calls the entry point from C where the
        # kernel's package gives one (``codegen.entry_caller``); ctypes does otherwise
        self._caller = caller
        self._entry = ctypes.cast(self.fn, ctypes.c_void_p).value
        self._blas = bool(meta.get("blas"))
        self._blas_table = None   # blas_address(dtype), read on the first call (TENSORLANG_BLAS then)
        self._has_workspace = bool(meta.get("workspace"))
        self._workspaces: list = []  # (buffer, aligned address) for the kernel's temporaries, reused between calls
        self._workspace_lock = threading.Lock()
        self._workspace_bytes: dict = {}  # the sizes array's bytes -> its workspace's (see _workspace)

    def __call__(self, **inputs):
        return self.run(inputs)

    def run(self, inputs: dict, plain=UNCHECKED, outputs=None):
        """The kernel's results on ``inputs`` (``plain``: as ``prepare`` takes it).  ``outputs``: the arrays
        passed in the outputs' places instead (a scattered kernel's positions and data, ``codegen.scatter``),
        and then ``None`` is returned: the caller holds what the kernel wrote."""
        size_arr, args, outs = self.prepare(inputs, plain, outputs is None)
        arrays = args + (outs if outputs is None else list(outputs))
        extra = []
        if self._blas:
            if self._blas_table is None:
                self._blas_table = blas_address(self.dtype)
            extra.append(self._blas_table)
        ws = self._workspace(size_arr) if self._has_workspace else None
        if ws is not None:
            extra.append(ws[1])
        try:
            if self._caller is not None:
                self._caller(self._entry, size_arr, arrays, tuple(extra))
            else:
                try:   # (``address`` inlined: this runs for every array of every call)
                    addrs = [_addressof(_from_buffer(a)) for a in arrays]
                except (TypeError, ValueError):   # a read-only or empty one among them
                    addrs = [address(a) for a in arrays]
                addrs += extra
                self.fn(address(size_arr), (ctypes.c_void_p * max(len(addrs), 1))(*addrs))
        finally:
            if ws is not None and len(self._workspaces) < 4:
                self._workspaces.append(ws)
        return self.results(outs) if outputs is None else None

    def _workspace(self, size_arr):
        """A buffer for the temporaries (the C side's ``TL_WS_BYTES`` each) and its address rounded up to 64
        bytes, taken from this runner's pool (so concurrent calls from several threads get distinct buffers)
        or made.  Its size is worked out once per sizes."""
        key = size_arr.tobytes()
        total = self._workspace_bytes.get(key)
        if total is None:
            sizes = dict(zip(self.meta["sizes"], size_arr.tolist()))
            total = workspace_bytes(self.meta, sizes, self.dtype)
            if total > PHYSICAL_MEMORY:
                self._fail(f"the kernel's temporaries take {total:,} bytes at {sizes}, more than this machine's "
                           f"memory ({PHYSICAL_MEMORY:,} bytes): too large to allocate")
            if len(self._workspace_bytes) < 64:
                self._workspace_bytes[key] = total
        with self._workspace_lock:   # (the first buffer that fits: the runs of a Dask block alternate sizes)
            for k, (ws, _) in enumerate(self._workspaces):
                if total <= ws.nbytes <= 4 * total + (1 << 20):
                    return self._workspaces.pop(k)
        ws = np.empty(total, dtype=np.uint8)
        return ws, (address(ws) + 63) & ~63
