"""Blockwise plans (``codegen.blocks``) as lazy Dask collections.

Every block of a statement is one task: ``run_block(library, sizes, args, pieces)`` runs the
statement's block program (with the statements fused into it) on the windows that isl computed for it of
the inputs and intermediates it reads, once per run of the block (``codegen.blocks``, "Runs": pieces of a
block split along a sum, whose partial results it adds), and returns the block as a NumPy array; a fused statement is
computed inside the task and is no key of the graph.  A split generator's blocks are the chunks of the statement's
result, a split sum's partial results are added by a tree of tasks (``Graph.FAN_IN`` at a time), a
statement left whole is one task.  A window of a Dask array is the grid of its chunks' parts (a slicing
task per chunk it overlaps, run where the chunk lives; none for a whole chunk, nor for a part of the chunk
the block reads most of, which its task cuts itself), joined in the block's task; windows of NumPy inputs
and of relations are cut on the client and travel with their task.

**Made once per plan.**  A plan's ``Graph`` (every task with its sizes, windows and keys) depends only
on the plan, which is cached per sizes and chunking; a call of the kernel names its tasks after the
call's inputs (the keys of its Dask inputs, a hash of its NumPy ones) and cuts its NumPy windows, a few
dictionary entries a task.  Nothing else is made per call: no slicing or concatenation through Dask's
collections, and ``dask.delayed`` only for a lazy input that is not a chunked array (a ``Delayed``, a
pair holding a Dask array).

``like_values`` gives gradients (of a kernel's inputs, for ``tensorlang.ad``) as their values are: lazy
in the chunks of a Dask input, computed for a NumPy one.

**Workers build nothing.**  A block program's compiled library travels as data: a ``BlockLibrary``
(the shared library's bytes and the runtime's plain-data description of its arguments) is one key of
the graph, so Dask sends it once to each worker that needs it.  Unpickled, it writes the library to a
worker-local cache named by the hash of its bytes (atomically: a temporary name, then a rename; sealed
with its size and checksum like the kernel cache's entries) and loads it with ``codegen.runtime`` (NumPy
and ctypes), once per process (``_RUNNERS``): a task looks its runner up.  A runner recycles the slabs of
dropped results (``runtime.Arguments.output``) in one pool shared by the process's block programs, which
keeps as many idle ones as ``pool_budget`` allows.
Workers need NumPy, Dask and this package; no C compiler and no tensorlang build step.
"""
from __future__ import annotations

import hashlib
import itertools
import operator
import os
import sys
import tempfile
import threading

import numpy as np

from tensorlang.errors import ShapeError

__all__ = ["BlockLibrary", "Graph", "collection", "known_shape", "lazy", "lazy_array", "like_values", "one_memory",
           "run_block"]

_RUNNERS: dict = {}  # library key -> Runner, per process
_SLABS: dict = {}  # the block programs' recycled output buffers, by size: one pool, so one budget, per process
POOL_SHARE = 8   # a block runner keeps idle output buffers of at most this part of its worker's memory limit
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
                from tensorlang.codegen.entry_caller import caller
                from tensorlang.codegen.runtime import Runner

                runner = Runner(self.meta, load(self._materialise()), error=ShapeError, caller=caller())
                runner.out_pool, runner.pool_budget = _SLABS, pool_budget()   # one pool for all block programs
                _RUNNERS[self.key] = runner
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


def pool_budget() -> int:
    """The bytes of idle output buffers the block programs of this process keep together beyond two per
    size: a worker computes a graph's blocks of one size one after another and holds each until the
    graph's result is sent, so its next computation needs as many buffers.  A 32nd of the machine's
    memory, at most 1 GiB, and at most ``1 / POOL_SHARE`` of the worker's memory limit (Dask's memory
    manager counts them)."""
    from tensorlang.codegen.runtime import PHYSICAL_MEMORY

    budget = min(PHYSICAL_MEMORY // 32, 1 << 30)
    distributed = sys.modules.get("distributed")
    try:
        limit = distributed.get_worker().memory_manager.memory_limit
    except (AttributeError, ValueError):   # no distributed, or not in a worker
        return budget
    return min(budget, limit // POOL_SHARE) if limit else budget


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


def run_block(library: BlockLibrary, sizes: list, args: list, pieces: list, rows=None) -> np.ndarray:
    """One task: the block program run on each of the block's runs (``codegen.blocks``, "Runs"), per run
    its sizes, its windows of values on the client (``args``) and of lazy values (``pieces``).  The runs'
    partial results are added; or, with ``rows`` (the block's slab shape and each run's rows in it), each
    run writes its rows of the slab."""
    if rows is not None:
        shape, spans = rows
        slab = library.runner().output(shape, 0)   # (memory recycled from an earlier slab, as a result's)
        for (a, b), at, given, grids in zip(spans, sizes, args, pieces):
            run_program(library, at, given, grids, into=slab[a:b])
        return slab
    total = run_program(library, sizes[0], args[0], pieces[0])
    for at, given, grids in zip(sizes[1:], args[1:], pieces[1:]):
        total += run_program(library, at, given, grids)
    return total


def run_program(library: BlockLibrary, sizes: dict, args: dict, pieces: dict, into=None) -> np.ndarray:
    """The block program on its windows; a scalar result as a 0-d array.  ``pieces`` holds the windows of
    lazy values: a chunk's part as it is, or the grid of its chunks' parts (nested lists), joined here.
    ``into``: the array the result is written to (of the result's shape exactly), returned."""
    joined = {name: np.block(grid) if isinstance(grid, list) else grid for name, grid in pieces.items()}
    runner = library.runner()
    if into is None:
        return np.asarray(runner(**args, **joined, **sizes))
    inputs = {**args, **joined, **sizes}
    (shape,) = runner.output_shapes(inputs)
    if tuple(shape) != into.shape:
        raise ShapeError(f"a block program's result of shape {tuple(shape)} written into rows of shape {into.shape}")
    runner.run(inputs, outputs=[into])
    return into


def _add(*parts):
    """A node of the tree that adds a split sum's partial results."""
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    return total


# --------------------------------------------------------------------------------------------------


def collection(plan, inputs: dict):
    """The lazy Dask collection of ``plan`` (a ``codegen.blocks.Plan``) on ``inputs``: an array (0-d for a
    scalar), or tuples."""
    import dask.array as da

    arrays = plan.graph(one_memory()).arrays(inputs)
    dtype = np.float32 if plan.dtype == "float32" else np.float64

    def build(o):
        if isinstance(o, tuple):
            return tuple(build(p) for p in o)
        made = arrays.get(o if hasattr(o, "name") else id(o))
        if made is not None:
            return made
        value = inputs.get(o.name)
        return value if hasattr(value, "__dask_graph__") else da.asarray(np.asarray(value, dtype=dtype))

    return build(plan.output)


class Graph:
    """The tasks of a plan, made once per plan (so once per sizes and chunking), each with what it needs
    precomputed: a block's sizes and the chunk parts of its windows, a slicing task per chunk a window
    overlaps but does not cover (run where the chunk lives) other than the block's own, and the trees adding a
    split sum's partial results.  Keys are written ``(slot, index)``: a slot is a chunked input, a statement's result, its
    partial results, its sum tree or the slicing tasks of a chunked variable, and ``arrays`` names the
    slots after a call's inputs: a chunked input's slot is the input's Dask name, and the slicing tasks
    of a variable are named after it and the part they cut (two kernels computed together share the
    parts they both read of an input).  What each call adds: the windows of its NumPy inputs and
    relations, cut on the client, and the keys of lazy inputs that are not chunked arrays (made with
    ``dask.delayed``)."""

    FAN_IN = 8  # partial results added per task of a split sum's tree

    def __init__(self, plan, local: bool = False):
        import uuid

        self.token = uuid.uuid4().hex  # the tasks of two plans never share a key
        self.local = local  # every chunk in one memory: each block's task cuts all its parts (``_grid``)
        self.dtype = np.float32 if plan.dtype == "float32" else np.float64
        self.labels: list = []  # per slot: the label of its keys, the Var of a chunked input, or the
        # slot whose chunks its slicing tasks cut (named after it: the parts of an input's chunks are
        # the same tasks in every graph that reads them)
        self.of_var: dict = {}  # a chunked Var (input or intermediate) -> (slot, chunks)
        self.libraries: dict = {}  # key -> BlockLibrary
        self.tasks: list = []  # (slot, index, function, refs, literals): slicing tasks and the sum trees
        self.blocks: list = []  # (slot, index, library key, sizes, pieces, others)
        self.outputs: dict = {}  # its variable (id(statement) for a part of the output) -> (slot, chunks)
        self.windows: dict = {}  # (ref, ((start, stop), ...)) -> ref of its slicing task
        self.parts: dict = {}  # slot -> the slot of the slicing tasks of its chunks
        self.inputs: list = []  # the inputs read, in order of first read
        made = {sp.stmt.var for sp in plan.statements}
        for sp in plan.statements:
            for v in sp.program.reads:
                if v not in made and v not in self.inputs:
                    self.inputs.append(v)
                    if v in plan.layout:
                        self.of_var[v] = (self._slot(v), plan.layout[v])
        for k, sp in enumerate(plan.statements):
            self._statement(k, sp)

    def _slot(self, label) -> int:
        self.labels.append(label)
        return len(self.labels) - 1

    def _statement(self, k: int, sp) -> None:
        bp = sp.program
        label = f"{sp.stmt.var.name if sp.stmt.var is not None else 'out'}-{k}"
        out = self._slot(label)
        summed = any(split.kind == "sum" for split in bp.splits)
        partial = self._slot(f"{label}-part") if summed else out
        self.libraries[bp.library.key] = bp.library
        wanted = set(bp.library.meta["sizes"])
        ndim = len(sp.shape)
        cut_indices = list(itertools.product(*(range(len(c)) for c in sp.cuts)))
        for run_sizes, cut_index, runs, rows, whole in zip(sp.sizes, cut_indices, sp.runs, sp.rows, sp.boxes):
            made = []
            for at, (_, boxes) in zip(run_sizes, runs):
                pieces, others = [], []
                for v in bp.reads:
                    bx, name = None, v.name
                    if v in bp.windows:
                        w, los, _ = bp.windows[v]
                        bx = boxes.get(v) or tuple((0, 0) for _ in los)
                        name = w.name
                    if v in self.of_var:
                        slot, chunks = self.of_var[v]
                        pieces.append((name, self._grid(slot, chunks, bx, _home(chunks, whole.get(v)))))
                    else:
                        others.append((name, v, bx))
                made.append(({s: int(x) for s, x in at.items() if s in wanted}, tuple(pieces), tuple(others)))
            index = cut_index if summed else _out_index(bp.splits, cut_index, ndim)
            self.blocks.append((partial, index, bp.library.key, tuple(made), rows))
        if summed:
            self._sums(out, partial, bp.splits, cut_indices, ndim)
        if sp.stmt.var is not None:
            self.of_var[sp.stmt.var] = (out, sp.chunks)
        self.outputs[id(sp.stmt) if sp.stmt.var is None else sp.stmt.var] = (out, sp.chunks)

    def _sums(self, out: int, partial: int, splits: tuple, cut_indices: list, ndim: int) -> None:
        """The trees adding each slab's partial results (one tree when no gen dimension is split)."""
        tree = self._slot(f"{self.labels[out]}-sum")
        slabs: dict = {}
        for cut_index in cut_indices:
            slabs.setdefault(_out_index(splits, cut_index, ndim), []).append((partial, cut_index))
        for index, refs in slabs.items():
            level = 0
            while len(refs) > self.FAN_IN:
                level += 1
                refs = [self._task(tree, index + (level, j), _add, refs[i:i + self.FAN_IN], ())
                        for j, i in enumerate(range(0, len(refs), self.FAN_IN))]
            self._task(out, index, _add, refs, ())

    def _task(self, slot: int, index: tuple, fn, refs: list, literals: tuple) -> tuple:
        self.tasks.append((slot, index, fn, tuple(refs), literals))
        return slot, index

    def _grid(self, slot: int, chunks: tuple, bx, home=None):
        """The window ``bx`` (None: whole) of the chunked variable in ``slot``: a ref where it lies in one
        chunk (the chunk's, or its slicing task's), else the nested lists of its chunks' parts.  A part of
        chunk ``home`` (the one the block reads most of, where Dask runs its task) is cut in the block's
        task: a ref ``(slot, index, slices)``, no task of its own; in a ``local`` graph every part is, since
        no chunk has to travel for it."""
        axes = []
        for k, ax in enumerate(chunks):
            a, b = (0, sum(ax)) if bx is None else bx[k]
            parts, start = [], 0
            for c, length in enumerate(ax):
                lo, hi = max(a, start), min(b, start + length)
                if lo < hi:
                    parts.append((c, slice(lo - start, hi - start), lo == start and hi == start + length))
                start += length
            axes.append(parts or [(0, slice(0, 0), ax[0] == 0)])  # an empty window: nothing of chunk 0
        refs = []
        for combo in itertools.product(*axes):
            ref = (slot, tuple(c for c, _, _ in combo))
            slices, cut = tuple(s for _, s, _ in combo), not all(whole for _, _, whole in combo)
            if cut and (self.local or ref[1] == home):
                ref = (*ref, slices)
            elif cut:
                at = (ref, tuple((s.start, s.stop) for s in slices))
                if at not in self.windows:
                    if slot not in self.parts:
                        self.parts[slot] = self._slot(slot)
                    index = ref[1] + tuple(b for s in slices for b in (s.start, s.stop))
                    self.windows[at] = self._task(self.parts[slot], index, _part, [ref], (slices,))
                ref = self.windows[at]
            refs.append(ref)
        return refs[0] if len(refs) == 1 else _nest(refs, tuple(len(a) for a in axes))

    # ----------------------------------------------------------------------------------------------

    def arrays(self, inputs: dict) -> dict:
        """``{variable or id(statement): Dask array}`` of every statement on ``inputs`` (keyed as
        ``outputs``): the tasks named after this call's inputs."""
        import dask
        import dask.array as da
        from dask.highlevelgraph import HighLevelGraph

        deps, delayed, client = [], {}, {}
        for v in self.inputs:
            value = inputs.get(v.name)
            if v in self.of_var:
                deps.append(value)
            elif lazy(value):
                delayed[v] = dask.delayed(value)
            else:
                client[v] = _input(v, value)
        token = dask.base.tokenize(self.token, [a.name for a in deps], [d.key for d in delayed.values()],
                                   [(v.name, c) for v, c in client.items()])
        names: list = []
        for label in self.labels:
            names.append(f"tl-{label}-{token}" if isinstance(label, str) else f"tl-part-{names[label]}"
                         if isinstance(label, int) else inputs[label.name].name)
        deps += delayed.values()
        dsk: dict = {f"tl-library-{key}": library for key, library in self.libraries.items()}
        for slot, index, fn, refs, literals in self.tasks:
            dsk[(names[slot],) + index] = (fn, *(_key(names, r) for r in refs), *literals)
        for slot, index, library, runs, rows in self.blocks:
            sizes, given, lazy_ones = [], [], []
            for at, pieces, others in runs:
                grids, args = [[name, _named(names, grid)] for name, grid in pieces], {}
                for name, v, bx in others:
                    if v in delayed:
                        d = delayed[v] if bx is None else dask.delayed(_window, pure=True)(delayed[v], bx, v)
                        deps.append(d)
                        grids.append([name, d.key])
                    else:
                        args[name] = client[v] if bx is None else _window(client[v], bx, v)
                sizes.append(at)
                given.append(args)
                lazy_ones.append((dict, grids))
            dsk[(names[slot],) + index] = (run_block, f"tl-library-{library}", sizes, given, lazy_ones, rows)
        out = {}
        for made, (slot, chunks) in self.outputs.items():
            graph = HighLevelGraph.from_collections(names[slot], dsk, dependencies=deps)
            out[made] = da.Array(graph, names[slot], chunks, dtype=self.dtype)
        return out


def _out_index(splits: tuple, cut_index: tuple, ndim: int) -> tuple:
    """The index of a block's slab in its statement's result: its gen cuts on their axes, 0 elsewhere."""
    index = [0] * ndim
    for split, c in zip(splits, cut_index):
        if split.kind == "gen":
            index[split.axis] = c
    return tuple(index)


def one_memory() -> bool:
    """Whether a graph made now runs with every chunk in one process's memory: on Dask's threaded or
    synchronous scheduler, or on a client of a cluster of one worker.  Its block tasks then read whole
    chunks and cut their windows themselves (one level of tasks fewer, whose round trips to a scheduler
    cost more than the slicing saves); elsewhere a part of another chunk is cut where that chunk lives, so
    that only the part travels.  Only the speed depends on it: a graph of either kind is right on any
    scheduler."""
    import dask

    distributed = sys.modules.get("distributed")   # (a client exists only where distributed was imported)
    try:
        client = distributed.default_client() if distributed is not None else None
    except ValueError:
        client = None
    if client is None:   # Dask's own schedulers
        return dask.config.get("scheduler", "threads") in ("threads", "threading", "sync", "synchronous",
                                                            "single-threaded")
    workers = getattr(getattr(client, "cluster", None), "workers", None)
    return workers is not None and len(workers) == 1


def _part(chunk, slices: tuple):
    """A slicing task: the part of a chunk a window reads, copied where it is at most half the chunk (a view
    keeps the whole chunk alive, while Dask's memory manager counts the part's bytes only)."""
    part = chunk[slices]
    return part.copy() if 2 * part.size <= chunk.size else part


def _nest(refs: list, shape: tuple) -> list:
    """``refs`` (row-major) as nested lists of ``shape``."""
    if len(shape) == 1:
        return list(refs)
    step = len(refs) // shape[0]
    return [_nest(refs[i:i + step], shape[1:]) for i in range(0, len(refs), step)]


def _key(names: list, ref: tuple) -> tuple:
    return (names[ref[0]],) + ref[1]


def _named(names: list, grid):
    """A grid of refs as Dask keys (a part cut in the task: the chunk's key, sliced in it)."""
    if isinstance(grid, list):
        return [_named(names, g) for g in grid]
    return _key(names, grid) if len(grid) == 2 else (operator.getitem, _key(names, grid[:2]), grid[2])


def _home(chunks: tuple, bx) -> tuple | None:
    """The index of the chunk of ``chunks`` that holds most of box ``bx`` (None for a whole read)."""
    if bx is None:
        return None
    index = []
    for (a, b), ax in zip(bx, chunks):
        edges = np.concatenate([[0], np.cumsum(ax)])
        index.append(int(np.argmax(np.minimum(b, edges[1:]) - np.maximum(a, edges[:-1]))))
    return tuple(index)


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
