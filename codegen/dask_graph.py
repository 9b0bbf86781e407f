"""Blockwise plans (``codegen.blocks``) as lazy Dask collections.

Every block of a statement is one task: ``run_block(library, sizes, args, pieces)`` runs the
statement's block program on the windows of its inputs and intermediates that isl computed for it, and
returns the block as a NumPy array.  A split generator's blocks are concatenated (``da.concatenate``), a
split sum's partial results are added by ``da.stack(...).sum(axis=0)`` (Dask's tree reduction), a
statement left whole is one task.  A window of a Dask array is the grid of its chunks' parts (a slicing
task per chunk it overlaps, run where the chunk lives; none for a whole chunk), joined in the block's
task; windows of NumPy inputs and of relations are cut on the client and travel with their task.
``like_values`` gives gradients (of a kernel's inputs, for ``tensorlang.ad``) as their values are: lazy
in the chunks of a Dask input, computed for a NumPy one.

**Workers build nothing.**  A block program's compiled library travels as data: a ``BlockLibrary``
(the shared library's bytes and the runtime's plain-data description of its arguments) is one key of
the graph, so Dask sends it once to each worker that needs it.  Unpickled, it writes the library to a
worker-local cache named by the hash of its bytes (atomically: a temporary name, then a rename; sealed
with its size and checksum like the kernel cache's entries) and loads it with ``codegen.runtime`` (NumPy and ctypes).  Workers need NumPy, Dask and this package; no C
compiler and no tensorlang build step.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
import threading

import numpy as np

from tensorlang.errors import ShapeError

__all__ = ["BlockLibrary", "collection", "known_shape", "lazy", "lazy_array", "like_values", "run_block"]

_RUNNERS: dict = {}  # library key -> Runner, per process
_LOCK = threading.Lock()


class BlockLibrary:
    """A compiled block program that can travel to a worker (module docstring): the bytes of the shared
    library holding its entry point, and the runtime's description of its arguments."""

    def __init__(self, meta: dict, data: bytes):
        self.meta, self.data = meta, data
        self.library_key = hashlib.sha256(data).hexdigest()[:32]
        self.key = f"{self.library_key}-{meta['entry']}"

    def __reduce__(self):
        return BlockLibrary, (self.meta, self.data)

    def __dask_tokenize__(self):
        return self.key

    def runner(self):
        """The runtime's ``Runner`` of this entry point in this process, loading the library on first use."""
        with _LOCK:
            if self.key not in _RUNNERS:
                from tensorlang.codegen.build import load
                from tensorlang.codegen.runtime import Runner

                _RUNNERS[self.key] = Runner(self.meta, load(self._materialise()), error=ShapeError)
            return _RUNNERS[self.key]

    def _materialise(self) -> str:
        from tensorlang.codegen.build import install, intact

        directory = _library_folder()
        path = os.path.join(directory, f"{self.library_key}.so")
        if not intact(path):  # sealed like the kernel cache's entries (codegen.build)
            tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
            with open(tmp, "wb") as f:
                f.write(self.data)
            install(tmp, path)
        return path


_FOLDER: list = []  # this process's folder for block libraries, once found
_FOLDER_LOCK = threading.Lock()


def _library_folder() -> str:
    """Where this worker keeps block libraries: ``$TMPDIR/tensorlang-dask-<uid>``, shared by the worker
    processes of one user, when it is a folder of this user's (not a file, a link or another user's);
    otherwise a private folder of this process."""
    with _FOLDER_LOCK:
        if not _FOLDER:
            shared = os.path.join(tempfile.gettempdir(), f"tensorlang-dask-{os.getuid()}")
            try:
                os.makedirs(shared, mode=0o700, exist_ok=True)
                info = os.lstat(shared)
                usable = os.path.isdir(shared) and not os.path.islink(shared) and info.st_uid == os.getuid()
            except OSError:
                usable = False
            _FOLDER.append(shared if usable else tempfile.mkdtemp(prefix="tensorlang-dask-"))
        return _FOLDER[0]


def run_block(library: BlockLibrary, sizes: dict, args: dict, pieces: dict) -> np.ndarray:
    """One task: the block program on its windows; a scalar result as a 0-d array.  ``pieces`` holds the
    windows of Dask arrays as the grids of their chunks' parts (nested lists), joined here."""
    joined = {name: np.block(grid) for name, grid in pieces.items()}
    return np.asarray(library.runner()(**args, **joined, **sizes))


# --------------------------------------------------------------------------------------------------


def collection(plan, inputs: dict):
    """The lazy Dask collection of ``plan`` (a ``codegen.blocks.Plan``) on ``inputs``: an array (0-d for a
    scalar), or tuples."""
    import dask
    import dask.array as da

    dtype = np.float32 if plan.dtype == "float32" else np.float64
    env: dict = {}
    for sp in plan.statements:
        for v in sp.stmt.reads:
            if v.name in inputs and v not in env:
                env[v] = _input(v, inputs[v.name])
    done: dict = {}
    for sp in plan.statements:
        result = _statement(sp, env, plan.sizes, dtype, dask, da)
        done[id(sp.stmt)] = result
        if sp.stmt.var is not None:
            env[sp.stmt.var] = result

    def build(o):
        if isinstance(o, tuple):
            return tuple(build(p) for p in o)
        if id(o) in done:
            return done[id(o)]
        value = env.get(o, inputs.get(getattr(o, "name", None)))
        return value if hasattr(value, "__dask_graph__") else da.asarray(np.asarray(value, dtype=dtype))

    return build(plan.output)


def _input(var, value):
    """An input as the graph holds it: Dask arrays as they are; relations as given (cut on the client);
    NumPy arrays as arrays; pairs as tuples."""
    from tensorlang.nodes import RelType

    if hasattr(value, "__dask_graph__") or isinstance(var.type, RelType):
        if isinstance(var.type, RelType) and hasattr(value, "tocsr"):
            return value.tocsr()
        return value
    if isinstance(value, (tuple, list)):
        return tuple(value)
    return np.asarray(value) if not isinstance(value, (int, float)) else value


def _statement(sp, env: dict, sizes: dict, dtype, dask, da):
    """The statement plan ``sp`` (a ``codegen.blocks.StatementPlan``) as a Dask array: one task a block."""
    bp = sp.program
    library = dask.delayed(bp.library, pure=True)
    wanted = set(bp.library.meta["sizes"])
    parts = {}
    for block, boxes in zip(sp.blocks, sp.boxes):
        call_sizes = dict(sizes)
        args, pieces = {}, {}
        shape = list(sp.shape)
        for split, (off, length), (lo, hi) in zip(bp.splits, bp.sizes, block):
            call_sizes[off.name], call_sizes[length.name] = lo, hi - lo
            if split.kind == "gen":
                shape[split.axis] = hi - lo
        for v in sp.stmt.reads:
            if v in bp.windows:
                w, los, lens = bp.windows[v]
                bx = boxes.get(v)
                bx = bx if bx is not None else tuple((0, 0) for _ in los)
                for s, t, (a, b) in zip(los, lens, bx):
                    call_sizes[s.name], call_sizes[t.name] = a, b - a
                window = _window(env[v], bx, v)
                if hasattr(window, "to_delayed"):  # one task per chunk part, joined in run_block
                    pieces[w.name] = window.to_delayed().tolist()
                else:
                    args[w.name] = window
            else:
                args[v.name] = env[v]
        call_sizes = {k: int(x) for k, x in call_sizes.items() if k in wanted}
        task = dask.delayed(run_block, pure=True)(library, call_sizes, args, pieces)
        parts[block] = da.from_delayed(task, shape=tuple(shape), dtype=dtype)
    return _assemble(bp.splits, sp.cuts, parts, (), da)


def _assemble(splits: tuple, cuts: list, parts: dict, prefix: tuple, da):
    """The statement's result from its blocks: the gen splits' slabs concatenated along their axes (in
    nest order), the sum splits' partial results added (``da.stack(...).sum``: Dask's tree reduction)."""
    k = len(prefix)
    if k == len(splits):
        return parts[prefix]
    pieces = [_assemble(splits, cuts, parts, prefix + (cut,), da) for cut in cuts[k]]
    if splits[k].kind == "gen":
        return da.concatenate(pieces, axis=splits[k].axis)
    return da.stack(pieces).sum(axis=0)


def _window(value, bx: tuple, var):
    """The part of ``value`` (a Dask or NumPy array, or a relation: a sparse matrix, a Dask or NumPy array
    of bools, or a list of points) in the box ``bx``."""
    from tensorlang.nodes import RelType

    index = tuple(slice(a, b) for a, b in bx)
    if not isinstance(var.type, RelType) or hasattr(value, "tocsr") or hasattr(value, "__dask_graph__") \
            or isinstance(value, np.ndarray):
        return value[index]
    pts = np.array([tuple(t) if isinstance(t, (tuple, list, np.ndarray)) else (t,) for t in value],
                   dtype=np.int64).reshape(-1, len(bx))
    keep = np.all([(pts[:, k] >= a) & (pts[:, k] < b) for k, (a, b) in enumerate(bx)], axis=0)
    return [tuple(int(c) for c in p) for p in pts[keep] - np.array([a for a, _ in bx])]


# --------------------------------------------------------------------------------------------------


def lazy(value) -> bool:
    """A Dask collection (or a pair holding one), recognised without importing Dask."""
    if isinstance(value, (tuple, list)):
        return any(lazy(v) for v in value)
    return hasattr(value, "__dask_graph__")


def lazy_array(value) -> bool:
    """A Dask array (a lazy collection with a shape), recognised without importing Dask."""
    return hasattr(value, "__dask_graph__") and hasattr(value, "shape")


def known_shape(value):
    """``value``, refused (``ShapeError``) where it is a Dask array of unknown shape (chunks of unknown
    sizes, after a boolean mask): its gradient needs its shape."""
    if lazy_array(value) and any(n != n for n in value.shape):
        raise ShapeError(f"tensorlang.ad: a Dask array of unknown shape {value.shape} has no gradient in its "
                         f"chunks; learn its chunk sizes first with x.compute_chunk_sizes()")
    return value


def like_values(grads: tuple, values: tuple) -> tuple:
    """The gradients ``grads`` of ``values`` as those values are (``tensorlang.ad``'s gradients mirror
    their values), where some are lazy: a Dask array's a Dask array in the array's chunks; a NumPy
    array's, a number's computed, all of them in one Dask graph; tuples and lists entry by entry."""
    import dask
    import dask.array as da

    eager: list = []

    def shaped(g, x):
        if type(g) in (tuple, list):
            return type(g)(shaped(a, b) for a, b in zip(g, x))
        if lazy_array(known_shape(x)):
            return None if g is None else g.rechunk(x.chunks) if lazy(g) else \
                da.from_array(np.asarray(g), chunks=x.chunks)
        if not lazy(g) or lazy(x):   # (another lazy collection's gradient: as it came)
            return g
        eager.append(g)
        return _Computed(len(eager) - 1)

    out = shaped(grads, values)
    done = dask.compute(*eager)

    def filled(g):
        if type(g) in (tuple, list):
            return type(g)(filled(a) for a in g)
        return done[g.index] if isinstance(g, _Computed) else g

    return filled(out)


class _Computed:
    """A place in ``like_values``'s gradients for the ``index``-th of the values computed together."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index
