"""``Kernel``: a compiled program, callable like ``tl.evaluate``.

``Kernel(expr, target="c", dtype="float64", sanitize=False)`` generates the program's source
(``codegen.generate``: lowered by ``codegen.lower``, emitted by the emitter of its target, ``TARGETS``: C,
``codegen.c``, or CUDA, ``codegen.cuda``), builds and loads it (``codegen.build``; with the sanitizers
where ``sanitize``), and wraps the entry point in a runner whose ``codegen.runtime.Arguments`` check every
input's shape and dtype (raising ``ShapeError``) before any generated code runs.  ``kernel.source`` is
the generated code; ``kernel.flags`` the C compiler's flags; ``kernel.meta`` the plain-data description
of its arguments that ``tl.export`` writes out; ``kernel.explain()`` prints every stage.
"""
from __future__ import annotations

import threading
import time

import numpy as np

from tensorlang.errors import ShapeError, TensorLangError, UnsupportedError, check_keywords, user_traceback
from tensorlang.hooks import Hooks
from tensorlang.progress import stage
from tensorlang.nodes import Expr, R

from .dask_graph import lazy, like_values
from .generate import explain, generate
from .ir import affine_meta
from .runtime import UNCHECKED
from .scatter import Positions
from .target import TARGETS, target_of

__all__ = ["Kernel", "TARGETS", "generate", "explain"]

_ADJOINT_LOCK = threading.RLock()

# the programs a kernel's derivatives are compiled from, built by the derivative layer above codegen, which
# installs them when imported: ``adjoint(expr, wrt)`` (tl.adjoint), ``value_and_derivative(expr, wrt)``
# (the pair of the program and tl.derivative, sharing their statements, and the input that takes the tangent
# of each wrt input) and ``value_and_grad(expr, wrt)`` (a scalar program paired with tl.grad, sharing theirs)
DERIVATIVES = Hooks("tensorlang.codegen.kernel")


def _tracing(inputs: dict):
    """The kernel rule of the tracers in an input that is an object array of them (``tensorlang.ad``'s sparsity
    tracing: their type's ``through_kernel``), or of an input whose type declares one for its values
    (``__tl_kernel__``: ``ad.vmap``'s batches, refused), or None."""
    for v in inputs.values():
        rule = getattr(type(v), "__tl_kernel__", None)
        if rule is not None:
            return rule
        if isinstance(v, np.ndarray) and v.dtype == object and v.size:
            rule = getattr(type(v.flat[0]), "through_kernel", None)
            if rule is not None:
                return rule
    return None


class Kernel:
    """A compiled program: ``kernel(**inputs)`` returns what ``tl.evaluate(expr, **inputs)`` does (NumPy
    arrays, floats, tuples for pairs), computed by generated code; ``kernel.source`` is that code."""

    def __init__(self, expr: Expr, target: str = "c", dtype: str = "float64", sanitize: bool = False,
                 scatter=None):
        if not isinstance(expr, Expr):
            raise TypeError(f"tl.compile needs an Expr, got {type(expr).__name__}")
        t0, c0 = time.perf_counter(), time.process_time()
        self.expr = expr
        self.target = target
        self.dtype = dtype
        self.sanitize = sanitize
        self.scatter = scatter   # outputs written at positions (a codegen.scatter.Positions), or None
        with stage(f"generating {target} code ({dtype}) from isl loop nests"):
            self.source, self.meta = generate(expr, target, dtype, scatter=scatter)
        t1, c1 = time.perf_counter(), time.process_time()
        # flags: the C compiler's (codegen.build.c_flags), -fsanitize=... among them when sanitized
        self._runner, self.library, self.flags = target_of(target).load(self.source, self.meta, ShapeError,
                                                                        sanitize)
        # wall times, and generation's CPU time (this process's: isl and the emitter run in it)
        self.timings = {"generate_s": t1 - t0, "build_s": time.perf_counter() - t1, "generate_cpu_s": c1 - c0}

    @property
    def input_names(self) -> list[str]:
        """The inputs the kernel is called with, relations included (its sizes are ``meta["sizes"]``)."""
        return [i["name"] for i in self.meta["inputs"]] + [r["name"] for r in self.meta["relations"]]

    def __call__(self, *args, **inputs):
        if args:
            call = ", ".join(f"{n}=..." for n in self.input_names)
            raise TensorLangError(
                f"a kernel takes its inputs by name (keywords), not by position: kernel({call}) (sizes, where "
                f"they cannot be inferred from the shapes, by name too: {', '.join(self.meta['sizes']) or 'none'})"
            )
        return self._call(inputs)

    def _call(self, inputs: dict):
        """``self(**inputs)``."""
        if self.scatter is not None:
            raise TensorLangError("this kernel writes its outputs at positions it is given (codegen.scatter): it "
                                  "is the values kernel of a SparseKernel, which is the one to call")
        plain = self._runner.plain(inputs)
        if plain is not None:   # NumPy arrays of its dtype, no Dask, no tracers
            return self._run(inputs, plain)
        if any(lazy(v) for v in inputs.values()):
            inputs = self._index_arrays_as_relations(inputs)
            return self.blocks(inputs).collection(inputs)  # blocks() checks the keywords
        check_keywords(inputs, self.input_names, self.meta["sizes"])
        traced = _tracing(inputs)
        if traced is not None:
            return traced(self, inputs)
        return self._run(inputs)

    def _run(self, inputs: dict, plain=UNCHECKED, outputs=None):
        try:
            return self._runner.run(inputs, plain, outputs)
        except TensorLangError as err:  # a bad input: shown as the caller's error, not the runtime's
            raise err.with_traceback(user_traceback(err.__traceback__)) from None

    def explain(self, stage: str | None = None) -> str:
        """Every stage of this kernel's compilation as text, or the stage named ``stage`` alone (``"loops"``,
        ``"loops after serial copies"``, ``"c source"`` ...: ``codegen.generate.explain``)."""
        return explain(self.expr, self.target, self.dtype, self.scatter, stage)

    _blocked = None  # the program as statements with their block programs (codegen.blocks), once built

    def blocks(self, inputs: dict, chunks: int | None = None, fuse: bool = True):
        """The blockwise plan of this kernel on ``inputs`` (Dask arrays, NumPy arrays, relations, sizes):
        printable (every block, the statements fused into one block program and the footprint isl
        computed for it); ``plan.collection(inputs)`` is the lazy Dask collection ``kernel(**inputs)``
        returns.  ``chunks`` cuts every split dimension into blocks of that many elements instead of
        following the inputs' chunks; ``fuse=False`` runs every statement as blocks of its own."""
        from tensorlang.nodes import IndexMapType, RelType, Var
        from tensorlang.substitute import substitute_vars
        from tensorlang.traversal import free_vars

        from .blocks import Blocked

        check_keywords(inputs, self.input_names, self.meta["sizes"])
        inputs = self._index_arrays_as_relations(inputs)
        with _ADJOINT_LOCK:
            if self._blocked is None:
                # an index array runs as the relation it is (see _index_arrays_as_relations)
                retyped = {v: Var(v.name, RelType(v.type.sizes)) for v in free_vars(self.expr)
                           if isinstance(v.type, IndexMapType)}
                self._blocked = Blocked(substitute_vars(self.expr, retyped), self.target, self.dtype)
        return self._blocked.plan(inputs, chunks, fuse)

    def _index_arrays_as_relations(self, inputs: dict) -> dict:
        """``inputs`` with each index array ``g : [p]index[n]`` as the relation ``rel[p, n]`` it is: the CSR
        matrix of the pairs ``(i, g[i])``, its values checked as on every call (a Dask index array computed
        first).  Blocks cut a relation into windows, and a window of an index array (the rows of a block of
        ``n``) is no longer one index per row, so the blockwise plan reads it as a relation."""
        names = [r["name"] for r in self.meta["relations"] if r.get("index_array") and r["name"] in inputs
                 and not hasattr(inputs[r["name"]], "tocsr")]
        if not names:
            return inputs
        import scipy.sparse

        from tensorlang.inputs import Binding, infer_sizes, relation_tuples

        given = {k: (np.asarray(v.compute()) if k in names and lazy(v) else v) for k, v in inputs.items()}
        sizes = Binding(infer_sizes(self.expr, given))
        for name in names:
            t = self.expr.free_vars[name]
            shape = (sizes.size(t.length), sizes.size(t.extent))
            rows, g = relation_tuples(name, t, given[name], shape)
            given[name] = scipy.sparse.csr_array((np.ones(len(g)), (rows, g)), shape=shape)
        return given

    # ---------------------------------------------------------------------------------------------
    # tensorlang.ad: a compiled kernel is a primitive whose pullback is its compiled adjoint

    adjoint_kernels: dict | None = None  # the compiled tl.adjoint(expr, wrt) per tuple wrt, once built each
    wrt: list[str] = []  # an adjoint kernel's: the inputs its outputs are the gradients in, in order
    dy_name: str | None = None  # an adjoint kernel's: the input that takes the output's cotangent

    _differentiable: tuple | None = None   # differentiable_inputs(), once found

    def differentiable_inputs(self) -> tuple[str, ...]:
        """The inputs that get a gradient: every input but the relations (a sparsity pattern has none)."""
        if self._differentiable is None:
            from tensorlang.traversal import value_inputs

            self._differentiable = tuple(v.name for v in value_inputs(self.expr))
        return self._differentiable

    def adjoint(self, wrt: tuple | None = None) -> "Kernel":
        """``tl.compile(tl.adjoint(expr, wrt=wrt))`` with this kernel's target, dtype and sanitizers, ``wrt``
        the differentiable inputs named in it, in their order (all of them where None), built on first use
        for each and cached (thread-safe: built at most once)."""
        found = self.adjoint_kernels.get(wrt) if self.adjoint_kernels else None
        if found is not None:   # (the hot path: generated code asks for the same tuple at every call)
            return found
        wrt = self._differentiable_among(wrt)

        def build() -> "Kernel":
            from tensorlang.traversal import free_vars

            aexpr = DERIVATIVES.adjoint(self.expr, list(wrt))
            known = {v.name for v in free_vars(self.expr)}
            dy = [v.name for v in free_vars(aexpr) if v.name not in known]
            k = self._derived(aexpr)
            k.wrt = list(wrt)
            k.dy_name = dy[0] if dy else None
            return k

        return self._kept("adjoint_kernels", wrt, build)

    def _kept(self, cache: str, wrt: tuple, build) -> "Kernel":
        """The kernel ``build()`` makes, kept per ``wrt`` in the dict ``self.<cache>``: built on first use for
        each and cached (thread-safe: built at most once)."""
        k = (getattr(self, cache) or {}).get(wrt)
        if k is None:
            with _ADJOINT_LOCK:
                built = getattr(self, cache) or {}
                setattr(self, cache, built)
                k = built.get(wrt)
                if k is None:
                    k = built[wrt] = build()
        return k

    def _derived(self, expr: Expr) -> "Kernel":
        """``expr`` (a derivative of this kernel's program) compiled with this kernel's target, dtype and
        sanitizers."""
        return Kernel(expr, target=self.target, dtype=self.dtype, sanitize=self.sanitize)

    def _differentiable_among(self, names) -> tuple:
        """The differentiable inputs named in ``names`` (all where None), in their order (found once for each
        ``names``: generated code passes the same tuple on every call)."""
        found = self._among.get(names)
        if found is None:
            every = self.differentiable_inputs()
            found = every if names is None else tuple(n for n in every if n in names)
            _remember(self, "_among", names, found)
        return found

    _among: dict = {}   # names -> _differentiable_among(names), once found
    _places: dict = {}   # an adjoint kernel's: the input names of a call -> where their gradients are (_gradients)

    forward_kernels: dict | None = None  # the compiled value and derivative per tuple wrt, once built each
    tangent_names: dict = {}  # a forward kernel's: the input that takes the tangent of each wrt input

    def forward(self, wrt: tuple) -> "Kernel":
        """The kernel of ``(expr, tl.derivative(expr, wrt))``, one program whose shared statements run once (a
        call returns the value and its tangent), with this kernel's target, dtype and sanitizers, built on
        first use for each ``wrt`` and cached (thread-safe: built at most once)."""
        def build() -> "Kernel":
            dexpr, names = DERIVATIVES.value_and_derivative(self.expr, list(wrt))
            k = self._derived(dexpr)
            k.tangent_names = names
            return k

        return self._kept("forward_kernels", wrt, build)

    value_grad_kernels: dict | None = None  # the compiled value and gradient per tuple wrt, once built each

    def value_and_grad(self, wrt: tuple) -> "Kernel":
        """The kernel of ``(expr, tl.grad(expr, wrt))`` for a scalar program, one program whose shared
        statements run once (a call returns the value and the gradient at the cotangent 1, right-nested pairs
        over ``wrt``), with this kernel's target, dtype and sanitizers, built on first use for each ``wrt`` and
        cached (thread-safe: built at most once)."""
        def build() -> "Kernel":
            k = self._derived(DERIVATIVES.value_and_grad(self.expr, list(wrt)))
            k.wrt = list(wrt)
            return k

        return self._kept("value_grad_kernels", wrt, build)

    # for ``tensorlang.ad``: a call reads its inputs and returns new arrays, so a differentiated function
    # passes it its arrays as they are (no copies kept for the pullback)
    __ad_write_free__ = True

    def __ad_jvp__(self, args, ts, inputs=None, tangents=None):
        """``(kernel(**inputs), tangent)`` for ``tensorlang.ad``'s forward mode, ``tangents`` those of the
        keyword arguments (None for zero; relations and sizes have none): one call of the compiled value and
        derivative in the inputs that have a tangent (``forward``), with the inputs and their tangents (zeros
        for the parts of a pair without one); the kernel alone where no input has one."""
        inputs, tangents = inputs or {}, tangents or {}
        wrt = tuple(n for n in self.differentiable_inputs() if tangents.get(n) is not None)
        if args or not wrt:   # (positional arguments: the kernel's own error)
            return self(*args, **inputs), None
        fwd = self.forward(wrt)
        call = dict(inputs)
        for name in wrt:
            call[fwd.tangent_names[name]] = _zeros_where_none(tangents[name], inputs[name])
        return fwd(**call)

    def __ad_pullback__(self, *args, **inputs):
        """``(kernel(**inputs), back)`` for ``tensorlang.ad``: ``back(dy)`` runs the compiled adjoint
        and returns one gradient per keyword argument in call order (``None`` for relations and
        sizes).  Where an input or ``dy`` is a Dask collection the adjoint runs blockwise like the kernel,
        and each gradient is as its input is (``dask_graph.like_values``)."""
        return self.__ad_pullback_read__(None, *args, **inputs)

    def __ad_pullback_read__(self, read, *args, **inputs):
        """``__ad_pullback__`` where the caller reads the gradients of the inputs named in ``read`` alone (all
        where None): the adjoint kernel is the one in those inputs (``adjoint(read)``), and the gradients of
        the others are ``None`` (``runtime.Jkw_read``: the inputs whose values carry no derivative where a
        differentiated function calls the kernel, such as the data of a fit).  A kernel of a scalar called with
        NumPy arrays computes its value and its gradient in one call (``value_and_grad``: their statements
        shared), and ``back`` scales the gradient by ``dy``."""
        if args:
            self(*args, **inputs)   # (the kernel's own error: it takes keywords)
        wrt = self._differentiable_among(read)
        plain = self._runner.plain(inputs)
        if plain is not None and self.scatter is None:
            if wrt and self._scalar_output:
                return self._value_and_scaled_gradient(wrt, inputs)
            y = self._run(inputs, plain)
        else:
            y = self._call(inputs)

        def back(dy):
            if not wrt:
                return (None,) * len(inputs)
            adj = self.adjoint(wrt)
            return self._gradients(adj, adj._call(self._adjoint_inputs(adj, inputs, dy, y)), inputs)

        return y, back

    @property
    def _scalar_output(self) -> bool:
        return self.expr.type is R

    def _value_and_scaled_gradient(self, wrt: tuple, inputs: dict):
        """``(value, back)`` from one call of ``value_and_grad(wrt)``; ``back(dy)`` is the gradient at 1 times
        ``dy`` (the adjoint is linear in it), in the kernel's dtype: the arrays themselves at ``dy = 1`` the
        first time, copies after (a caller may add into what it was given)."""
        vg = self.value_and_grad(wrt)
        y, at_one = vg._call(inputs)
        grads = self._gradients(vg, at_one, inputs)
        given = []

        def back(dy):
            if dy is not None and dy == 1 and not given:
                given.append(True)
                return grads
            return tuple(_scaled(g, dy) for g in grads)

        return y, back

    def __ad_pullback_jvp__(self, args, ts, inputs, tangents):
        """``((y, back), (ty, call))`` for ``tensorlang.ad``'s forward over reverse (``ad.hessian``,
        ``ad.hvp``): ``y, ty`` as ``__ad_jvp__`` gives them, ``back`` as ``__ad_pullback__``'s, and
        ``call(dy, tdy)`` the pair ``(back(dy), its tangent)``, the tangent along the inputs' ``tangents``
        and ``dy``'s ``tdy`` at once: the compiled derivative of the adjoint kernel (linear in ``dy``) in
        its inputs and ``dy``."""
        y, ty = self.__ad_jvp__(args, ts, inputs, tangents)

        def back(dy):
            return call(dy, None)[0]

        def call(dy, tdy):
            if not self.differentiable_inputs():
                return (None,) * len(inputs), None
            adj = self.adjoint()
            along = {n: t for n, t in tangents.items() if t is not None}
            if tdy is not None and adj.dy_name is not None:
                along[adj.dy_name] = _zeros_where_none(tdy, y)
            g, tg = adj.__ad_jvp__((), (), self._adjoint_inputs(adj, inputs, dy, y), along)
            return self._gradients(adj, g, inputs), None if tg is None else self._gradients(adj, tg, inputs)

        return (y, back), (ty, call)

    def __ad_pullback_vjp__(self, inputs: dict, dy, y, dgrads: tuple) -> tuple:
        """For ``tensorlang.ad``'s reverse over reverse (``ad.grad`` of ``ad.grad``): the pullback of
        ``back(dy)`` (``__ad_pullback__``'s, one gradient per keyword input in call order) at cotangents
        ``dgrads`` of those gradients, as ``(the inputs' cotangents by name, dy's)``.  ``back`` is the
        adjoint kernel, linear in ``dy``; its own compiled adjoint (the adjoint of the adjoint program, in
        every input and ``dy``) gives both at once."""
        adj = self.adjoint()
        if not adj.differentiable_inputs():
            return {}, None
        by_name = dict(zip(inputs, dgrads))
        wanted = [by_name.get(name) for name in adj.wrt]
        if all(d is None for d in wanted):
            return {}, None
        call = self._adjoint_inputs(adj, inputs, dy, y)
        out, back = adj.__ad_pullback__(**call)
        dout = _zeros_where_none(_right_nested(wanted), out)
        got = dict(zip(call, back(dout)))
        return {name: got.get(name) for name in inputs}, got.get(adj.dy_name)

    @staticmethod
    def _adjoint_inputs(adj: "Kernel", inputs: dict, dy, y) -> dict:
        """The adjoint kernel's keyword arguments: every input of its primal and the cotangent ``dy``."""
        call = dict(inputs)
        if adj.dy_name is not None:
            call[adj.dy_name] = _zeros_where_none(dy, y)
        return call

    @staticmethod
    def _gradients(adj: "Kernel", out, inputs: dict) -> tuple:
        """The adjoint kernel's output (right-nested pairs over ``adj.wrt``) as one gradient per input in
        call order (``None`` for relations and sizes), each as its input is where one is a Dask collection."""
        names = tuple(inputs)
        places = adj._places.get(names)
        if places is None:   # (where each input's gradient is among the adjoint's outputs, -1: none; once per names)
            places = tuple(adj.wrt.index(n) if n in adj.wrt else -1 for n in names)
            _remember(adj, "_places", names, places)
        items = right_nested_items(out, len(adj.wrt))
        found = tuple([None if k < 0 else items[k] for k in places])
        for g in found:
            if type(g) is not np.ndarray and g is not None:
                break
        else:
            return found
        return like_values(found, tuple(inputs.values())) if lazy(found) else found

    def __repr__(self) -> str:
        return f"<Kernel target={self.target} dtype={self.dtype} inputs={[i['name'] for i in self.meta['inputs']]}>"

    def _table(self) -> tuple:
        """The kernel as a notebook table: its program, inputs, sizes, output and generated code."""
        from tensorlang.display import Code
        from tensorlang.printer import type_str

        inputs = [f"{name} : {type_str(t)}" for name, t in self.expr.free_vars.items()]
        rows = [
            ("program", Code(str(self.expr))),
            ("inputs", Code("\n".join(inputs) or "none")),
            ("sizes", ", ".join(self.meta["sizes"]) + " (inferred from the inputs' shapes, or given by name)"
             if self.meta["sizes"] else "none"),
            ("output", Code(type_str(self.expr.type))),
            ("generated code", f"{len(self.source.splitlines())} lines of {self.target.upper()} (kernel.source)"),
        ]
        return f"Kernel ({self.target.upper()}, {self.dtype})", ("", ""), rows

    def _repr_html_(self) -> str:
        from tensorlang.display import html_table

        return html_table(*self._table())

    def _repr_markdown_(self) -> str:
        from tensorlang.display import markdown_table

        return markdown_table(*self._table())


def _remember(kernel: Kernel, cache: str, key, value) -> None:
    """``value`` kept under ``key`` in ``kernel``'s dict attribute ``cache`` (at most 64 entries), the dict
    replaced whole: a reader in another thread sees it before or after, never while it is written."""
    table = getattr(kernel, cache)
    if len(table) < 64:
        setattr(kernel, cache, {**table, key: value})


def right_nested_items(pairs, n: int) -> list:
    """The ``n`` items of right-nested pairs ``(a, (b, (c, d)))`` (one item: ``pairs`` itself; none: [])."""
    if n <= 2:
        return [] if n == 0 else [pairs] if n == 1 else list(pairs)
    items = []
    for _ in range(n - 1):
        first, pairs = pairs
        items.append(first)
    return items + [pairs]


def _right_nested(items: list):
    """``items`` as right-nested pairs (one item as itself): how an adjoint kernel returns its gradients."""
    return items[0] if len(items) == 1 else (items[0], _right_nested(items[1:]))


def _scaled(g, dy):
    """``g * dy`` for a gradient ``g`` (an array, kept in its dtype; a number; ``None`` for none), zeros for the
    cotangent ``None`` (zero)."""
    if g is None:
        return None
    if isinstance(g, np.ndarray):
        return np.zeros_like(g) if dy is None else np.multiply(g, dy).astype(g.dtype, copy=False)
    return 0.0 if dy is None else g * dy


def _zeros_where_none(dy, y):
    """The cotangent ``dy`` of output ``y`` with zeros for the parts of a pair that got no gradient
    (``tensorlang.ad`` gives None for a component the caller did not use)."""
    if isinstance(y, tuple):
        if type(dy) is tuple and all(type(d) is np.ndarray for d in dy):   # (the common case, first)
            return dy
        parts = (None,) * len(y) if dy is None else dy
        return tuple(_zeros_where_none(d, v) for d, v in zip(parts, y))
    if dy is None:
        return np.zeros_like(y, dtype=float)
    # (a whole number, the seed 1 of a scalar's gradient, as a float: so the call takes the fast path of
    # ``Arguments.plain`` instead of the checks for any input)
    return float(dy) if type(dy) is int else dy


def _shapes(value):
    """An input's shape, as a key: a size given by name itself, a pair's the tuple of its components'."""
    if isinstance(value, (int, np.integer)):
        return value
    return tuple(_shapes(v) for v in value) if isinstance(value, tuple) else np.shape(value)


class SparseKernel:
    """A compiled sparse Jacobian (``tl.compile`` of ``tl.jacobian(..., sparse=True)``): ``kernel(**inputs)``
    returns the ``scipy.sparse.csr_array`` that ``tl.evaluate`` does.  Its values kernel (``kernel.values``,
    whose ``source`` this is) writes every nonzero straight to its position in the result's ``data``
    (``codegen.scatter``; the positions, as the pattern, computed once per size by the sparse Jacobian): a
    call is that one pass and a shallow copy of a checked ``csr_array``.  Where one piece's points, in
    order, are the data with a point or so outside the pattern at either end (``SparseJacobian.run``), the
    kernel writes them in order (no positions read) and the data is a view of them.  On a target other than C
    the values kernel returns each piece's values and they are put at their positions in NumPy."""

    def __init__(self, jacobian, target: str = "c", dtype: str = "float64", sanitize: bool = False):
        self.jacobian = jacobian
        self._options = dict(target=target, dtype=dtype, sanitize=sanitize)
        self._kernels: dict = {}   # the C type of the positions -> the values kernel that reads them
        self.values = self._kernel(np.dtype(np.int32) if target == "c" else None)
        if len(jacobian.parts) == 1:   # (where the data may be a run of its points, SparseJacobian.run)
            self._kernel(None)
        self.source, self.meta, self.timings = self.values.source, self.values.meta, self.values.timings
        self._solved: dict = {}

    def _kernel(self, positions):
        """The values kernel reading positions of dtype ``positions`` (None: returning the pieces' values),
        built once (an int64 one only for a pattern of 2^31 nonzeros or more, on first use)."""
        kernel = self._kernels.get(positions)
        if kernel is None:
            scatter = None if positions is None else Positions(f"int{positions.itemsize * 8}_t", self.jacobian.patterns(),
                                                                 self.jacobian.entries(),
                                                                 next((size for _, size in self.jacobian.loops), None),
                                                                 self.jacobian.stored)
            kernel = self._kernels[positions] = Kernel(self.jacobian.values, scatter=scatter, **self._options)
            pieces = [[affine_meta(s) for _, s in part.loops] for part in self.jacobian.parts]
            if scatter is not None and [o["dims"] for o in kernel.meta["outputs"]] != pieces:   # (positions per point)
                raise UnsupportedError(f"a sparse Jacobian's values kernel has outputs {kernel.meta['outputs']}, not one "
                                       f"for each of its {len(pieces)} pieces over the piece's loops")
        return kernel

    @property
    def input_names(self) -> list[str]:
        return self.values.input_names

    def __call__(self, *args, **inputs):
        if args or self.values.scatter is None:   # (positional inputs: the values kernel's message)
            return self.jacobian.assemble(self.values(*args, **inputs), self._sizes(inputs), inputs)
        check_keywords(inputs, self.input_names, self.meta["sizes"])
        prepared = self.jacobian.prepared(self._sizes(inputs), inputs)
        if prepared.run is not None:   # the values as computed are the data in CSR order: a view, no positions
            return prepared.result(np.reshape(self._kernel(None)._run(inputs), -1)[prepared.run])
        positions, indices, *_ = prepared.pattern
        kernel = self._kernel(positions[0].dtype)
        data = kernel._runner.output((len(indices),), 0)   # (recycled memory where large, as a kernel's outputs)
        kernel._run(inputs, outputs=[*positions, data])
        return prepared.result(data)

    def _sizes(self, inputs: dict) -> dict:
        """The sizes at ``inputs``, solved once per tuple of the inputs' shapes (and sizes given by name)."""
        key = tuple((name, _shapes(value)) for name, value in inputs.items())
        sizes = self._solved.get(key)
        if sizes is None:
            from tensorlang.inputs import infer_sizes

            sizes = infer_sizes(self.jacobian.values, inputs)   # (shapes only: a relation is not made dense)
            if len(self._solved) < 64:
                self._solved[key] = sizes
        return sizes

    def explain(self, stage: str | None = None) -> str:
        return self.values.explain(stage)
