"""The CUDA emitter: the C emitter's loop nests as CUDA C, and a CuPy runner.

``CudaEmitter`` subclasses ``CEmitter`` and overrides what differs (launch and indexing), as loopy's
``CudaTarget`` does:

* every statement ``T[g] = [P] * b`` with generator variables is one ``__global__`` kernel with a
  thread per point of the generator box (row-major over ``g``); the guard is a test in the thread
  (isl-gisted against the box), reductions inside run the same isl loop nests as in C, accumulating in
  registers; no atomics, no scatter;
* a scalar statement whose value is a reduction is two kernels: a grid-stride loop over the outermost
  loop of the reduction's isl nest with a per-thread register accumulator and a shared-memory tree
  per block writing one partial sum per block, then one block summing the partials; any other scalar
  statement is one thread;
* black boxes are ``__device__`` functions printed by SymPy's C printer; temporaries are allocated by
  the host (they are arguments, like inputs and outputs), scalar temporaries are one-element arrays.

Every kernel takes ``(const int64_t *tl_sizes, void **tl_args)`` (device arrays), like the C entry
point, so the argument layout of ``codegen.runtime`` is shared.  ``CudaRunner`` builds the source with
nvcc when nvcc is present (a check that it compiles; ``CompileError`` otherwise) and runs it through
CuPy (``RawModule``) when CuPy and a GPU are present.
"""
from __future__ import annotations

import numpy as np

from tensorlang.errors import UnsupportedError
from tensorlang.nodes import TRUE, Affine, Expr, Guard, box
from tensorlang.predicates import over_approximation

from . import domains as D
from .build import build_cuda_object, nvcc_path
from .c import CEmitter
from .c_runtime import cuda_prelude
from .ir import Array, MaxReduce, Reduce, Stmt, affine_meta
from .loop_ir import Line, print_c, scheduled
from .loops import Block, For, If, User
from .runtime import UNCHECKED, Arguments, aff_value
from .scalar import Scope
from .schedule import MAX, SUM, unparen
from .target import Capabilities

__all__ = ["CudaEmitter", "CudaRunner", "BLOCK", "FEW_POINTS", "REDUCE_BLOCKS", "load"]

BLOCK = 256
REDUCE_BLOCKS = 1024
# fewer points than this (a thread each would leave most of a GPU idle): a reduction's points get blocks
FEW_POINTS = 1 << 16


# how the threads' parts of a reduction combine, by the reduction's kind
_COMBINE = {Reduce: SUM, MaxReduce: MAX}


def _shareable(pred, body) -> bool:
    """Whether ``[pred] * body`` is a reduction whose loop threads can share: a sum, or a maximum with no
    guard (a guarded-out maximum is 0, which no thread's part could say)."""
    return isinstance(body, Reduce) or (isinstance(body, MaxReduce) and pred is TRUE)


def splits(total: int) -> int:
    """How many blocks share each of ``total`` points' reductions (``tl_splits`` in the kernels' text): about
    ``REDUCE_BLOCKS`` blocks in all, so that few points still fill the GPU."""
    return REDUCE_BLOCKS // total if total < REDUCE_BLOCKS else 1

class CudaEmitter(CEmitter):
    # contractions stay loops (their Reduce bodies); temporaries are device arrays passed by the runner;
    # a thread per target point, so no interchange ...
    caps = Capabilities(restrict="__restrict__", openmp=False, blas=False, workspace=False, interchange=False,
                        function_qualifier="__device__ static inline", stored_reductions=True)
    lanes = 0  # ... and a thread per point of an inner loop: consecutive threads read consecutive elements

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.kernels: list[dict] = []
        self._kernel_texts: list[str] = []
        self._strided_loops = 0  # grid-stride loops emitted so far (a reduction without one is thread 0's)

    # ---------------------------------------------------------------------------------------------

    def prelude(self) -> str:
        return cuda_prelude(self.real)

    def array_ref(self, arr: Array, idx) -> str:
        if arr.kind == "temp" and arr.is_scalar:
            return f"{arr.cname}[0]"
        return super().array_ref(arr, idx)

    def declarations(self) -> list[str]:
        out = self.arg_declarations()
        k = self.n_args_before_temps()
        for a in self.prog.temps:
            out.append(f"real *{self.caps.restrict} {a.cname} = (real *)tl_args[{k}];")
            k += 1
        out.append(f"real *{self.caps.restrict} tl_partial = (real *)tl_args[{k}];")
        return out

    def n_args_before_temps(self) -> int:
        n = len(self.prog.inputs) + len(self.prog.output_arrays())
        for r in self.prog.relations:
            n += len(self.relation_views(r))
        return n

    def emit_entry(self) -> str:
        if self._entry_text is None:
            top = Scope([], self.base_ctx, ())
            for k, stmt in enumerate(self.prog.stmts):
                self.emit_stmt_kernel(k, stmt, top)
            # declarations last: the relation views are known once every statement is emitted
            self._entry_text = "\n".join(self.kernel_text(name, lines) for name, lines in self._kernel_texts)
        return self._entry_text

    def kernel_text(self, name: str, body: list[str]) -> str:
        decls = self.declarations()
        src = [f'extern "C" __global__ void {name}(const int64_t *tl_sizes, void **tl_args) {{']
        src += ["  " + d for d in decls]
        src += body
        src.append("}")
        return "\n".join(src)

    # ---------------------------------------------------------------------------------------------
    # statements

    def emit_stmt_kernel(self, k: int, stmt: Stmt, top: Scope) -> None:
        arr = stmt.target
        gv = stmt.vars
        name = f"{self.entry}_s{k}"
        pred, body = self._split(stmt.body)
        nodes: list = [Line(f"/* {arr.label} */")]
        if gv:
            self._points_kernel(name, arr, gv, pred, body, nodes)
            if _shareable(pred, body):  # also blocks per point, for few points of long reductions
                self._points_kernel(name + "_blocks", arr, gv, pred, body,
                                    [Line(f"/* {arr.label}: blocks of threads per point */")], blocks=True)
            return
        ref = self.array_ref(arr, [])
        if _shareable(pred, body):
            combine = _COMBINE[type(body)]
            sc = Scope(nodes, self.base_ctx, (), parallel_ok=True)
            sc.line("const int64_t tl_gtid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;")
            sc.line("const int64_t tl_gsize = (int64_t)gridDim.x * blockDim.x;")
            sc.line(f"real tl_part = {combine.identity};")
            cond = self.pred(pred, sc) if pred is not TRUE else None
            if cond != "0":
                if cond is not None:
                    inner = sc.branch(cond, ctx=sc.ctx & D.params_set(over_approximation(pred), (), self.names))
                else:
                    inner = sc.child()
                self._shared_reduction_part(body, inner)
            sc.line(f"__shared__ real tl_sh[{BLOCK}];")
            self._block_reduce(sc, "tl_part", "tl_partial[blockIdx.x]", combine)
            self._kernel_texts.append((name, print_c(scheduled(nodes, self.caps))))
            fin = [Line(f"/* {arr.label}: the blocks' partial results combined */")]
            fs = Scope(fin, self.base_ctx, ())
            fs.line(f"real tl_part = {combine.identity};")
            fs.loop("b", "int64_t b = threadIdx.x", f"b < {REDUCE_BLOCKS}", "b += blockDim.x").line(
                combine.into("tl_part", "tl_partial[b]"))
            fs.line(f"__shared__ real tl_sh[{BLOCK}];")
            self._block_reduce(fs, "tl_part", ref, combine)
            self._kernel_texts.append((name + "_fin", print_c(scheduled(fin, self.caps))))
            self.loop_ir += [(name, nodes), (name + "_fin", fin)]
            self.kernels.append({"name": name, "kind": "reduce"})
            self.kernels.append({"name": name + "_fin", "kind": "single_block"})
            return
        sc = Scope(nodes, self.base_ctx, (), parallel_ok=False)
        sc.line("if (blockIdx.x != 0 || threadIdx.x != 0) return;")
        self.emit_scalar_stmt(arr, pred, body, sc)
        self._kernel_texts.append((name, print_c(scheduled(nodes, self.caps))))
        self.loop_ir.append((name, nodes))
        self.kernels.append({"name": name, "kind": "single"})

    def _points_kernel(self, name: str, arr: Array, gv, pred, body, nodes: list, blocks: bool = False) -> None:
        """``arr[gv] = [pred] * body``: a thread per point; or (``blocks``, ``body`` a reduction, for few
        points) ``tl_splits`` blocks of threads per point sharing out the reduction's outermost loop, as a
        scalar reduction's threads do, each writing its partial sum, then a thread per point adding them."""
        sc = Scope(nodes, self.base_ctx, (), parallel_ok=False)
        self._point_of(sc, arr, gv, "blockIdx.x / tl_splits" if blocks else
                       "(int64_t)blockIdx.x * blockDim.x + threadIdx.x")
        if blocks:
            sc.line("const int64_t tl_gtid = (blockIdx.x % tl_splits) * blockDim.x + threadIdx.x;")
            sc.line("const int64_t tl_gsize = tl_splits * blockDim.x;")
        points = D.domain(box(zip(gv, arr.dims)), gv, (), self.names)
        inner = Scope(nodes, D.lift_to_context(points) & self.base_ctx, tuple(gv), parallel_ok=blocks)
        ref = self.array_ref(arr, [Affine.var(v) for v in gv])
        cond = self.pred(pred, inner) if pred is not TRUE else None
        if blocks:  # every thread reaches the block's reduction: the guard only chooses what it adds
            combine = _COMBINE[type(body)]
            inner.line(f"real tl_part = {combine.identity};")
            if cond != "0":
                sub = inner.child() if cond is None else inner.branch(
                    cond, ctx=inner.ctx & D.params_set(over_approximation(pred), inner.bound, self.names))
                self._shared_reduction_part(body, sub)
            inner.line(f"__shared__ real tl_sh[{BLOCK}];")
            self._block_reduce(inner, "tl_part", "tl_partial[blockIdx.x]", combine)
            fin = [Line(f"/* {arr.label}: each point's partial results combined */")]
            fs = Scope(fin, self.base_ctx, (), parallel_ok=False)
            self._point_of(fs, arr, gv, "(int64_t)blockIdx.x * blockDim.x + threadIdx.x")
            fs.line(f"real tl_part = {combine.identity};")
            fs.loop("b", "int64_t b = 0", "b < tl_splits", "b += 1").line(
                combine.into("tl_part", "tl_partial[tl_tid * tl_splits + b]"))
            fs.line(f"{ref} = tl_part;")
            self._kernel_texts += [(name, print_c(scheduled(nodes, self.caps))),
                                   (name + "_fin", print_c(scheduled(fin, self.caps)))]
            self.loop_ir += [(name, nodes), (name + "_fin", fin)]
            self.kernels[-1]["blocks"] = name  # launched in place of the thread-per-point kernel for few points
            return
        if cond == "0":
            inner.line(f"{ref} = 0;")
        elif cond is None:
            inner.line(f"{ref} = {self.expr(body, inner)};")
        else:
            known = D.params_set(over_approximation(pred), inner.bound, self.names)
            sub, zero = inner.branch(cond, orelse=True, ctx=inner.ctx & known)
            sub.line(f"{ref} = {self.expr(body, sub)};")
            zero.line(f"{ref} = 0;")
        self._kernel_texts.append((name, print_c(scheduled(nodes, self.caps))))
        self.loop_ir.append((name, nodes))
        self.kernels.append({"name": name, "kind": "points", "total": [affine_meta(d) for d in arr.dims]})

    def _point_of(self, sc: Scope, arr: Array, gv, index: str) -> None:
        """The generator variables ``gv`` of the point numbered ``index`` (row-major over ``arr``'s box); the
        number of points ``tl_total`` and of blocks per point ``tl_splits`` (the runner's ``splits``)."""
        sc.line(f"const int64_t tl_total = {self.size_product(arr.dims)};")
        sc.line(f"const int64_t tl_splits = tl_total < {REDUCE_BLOCKS} ? {REDUCE_BLOCKS} / tl_total : 1;")
        sc.line(f"const int64_t tl_tid = {index};")
        sc.line("if (tl_tid >= tl_total) return;")
        rest = "tl_tid"
        for j in reversed(range(len(gv))):
            vname = self.names.var(gv[j])
            if j == 0:
                sc.line(f"const int64_t {vname} = {rest};")
            else:
                sc.line(f"const int64_t {vname} = {rest} % ({self.affine(arr.dims[j])});")
                sc.line(f"const int64_t tl_q{j} = {rest} / ({self.affine(arr.dims[j])});")
                rest = f"tl_q{j}"

    def _shared_reduction_part(self, body: Reduce | MaxReduce, scope: Scope) -> None:
        """``tl_part = `` this thread's part of the reduction ``body`` (a sum or a maximum), whose outermost
        loop the threads ``tl_gtid`` of ``tl_gsize`` share; a reduction with no loop (a closed form) is thread
        0's alone, the others contributing the identity."""
        strided = self._strided_loops
        value = self.expr(body, scope)
        if self._strided_loops == strided:
            value = f"tl_gtid == 0 ? {value} : {_COMBINE[type(body)].identity}"
        scope.line(f"tl_part = {value};")

    def _emit_MaxReduce(self, e: MaxReduce, scope: Scope) -> str:
        """As C's (``-INFINITY``, then ``tl_fmax`` at every point), the outermost loop shared out among the
        threads where the scope is a shared reduction's (``_shared_reduction_part``)."""
        if not scope.parallel_ok:
            return super()._emit_MaxReduce(e, scope)
        acc = self.fresh("max")
        scope.line(f"real {acc} = -(real)INFINITY;")
        self.reduce_nest(e, scope, lambda inner: inner.line(MAX.into(acc, self.expr(e.body, inner))))
        return acc

    @staticmethod
    def _split(body: Expr):
        if isinstance(body, Guard):
            return body.pred, body.body
        return TRUE, body

    @staticmethod
    def _block_reduce(sc: Scope, value: str, target: str, combine) -> None:
        """The block's threads' ``value``s combined (``combine``: a sum's or a maximum's) in shared memory, in
        a tree, and written to ``target`` by thread 0."""
        sc.line(f"tl_sh[threadIdx.x] = {value};")
        sc.line("__syncthreads();")
        halving = sc.loop("s", "int s = blockDim.x / 2", "s > 0", "s >>= 1")
        halving.line(f"if (threadIdx.x < s) {combine.into('tl_sh[threadIdx.x]', 'tl_sh[threadIdx.x + s]')}")
        halving.line("__syncthreads();")
        sc.line(f"if (threadIdx.x == 0) {target} = tl_sh[0];")

    # ---------------------------------------------------------------------------------------------
    # loop trees: in a reduction kernel, the outermost loops are grid-stride loops and the work outside
    # them is done by thread 0 only

    def emit_tree(self, tree, scope: Scope, user, parallel: bool = False, work: str = "0",
                  reduction: str | None = None) -> None:
        if not parallel:
            return super().emit_tree(tree, scope, user, False, work, reduction)
        self._strided_tree(tree, scope, user)

    def _strided_tree(self, tree, scope: Scope, user) -> None:
        if isinstance(tree, Block):
            for c in tree.children:
                self._strided_tree(c, scope, user)
        elif isinstance(tree, For) and tree.degenerate:
            inner = scope.block()
            inner.line(f"const int64_t {tree.var} = {tree.init};")
            self._strided_tree(tree.body, inner, user)
        elif isinstance(tree, For):
            self._strided_loops += 1
            body = scope.loop(tree.var, f"int64_t {tree.var} = {tree.init} + tl_gtid * {tree.inc}", unparen(tree.cond),
                              f"{tree.var} += tl_gsize * {tree.inc}")
            super().emit_tree(tree.body, body, user, False)
        elif isinstance(tree, If):
            if tree.orelse is None:
                self._strided_tree(tree.then, scope.branch(tree.cond), user)
                return
            then, orelse = scope.branch(tree.cond, orelse=True)
            self._strided_tree(tree.then, then, user)
            self._strided_tree(tree.orelse, orelse, user)
        elif isinstance(tree, User):
            user(tree, scope.branch("tl_gtid == 0"))

    def target_meta(self) -> dict:
        """What the runner needs besides ``generate.program_meta``: the kernels and how to launch them."""
        return {"launch": self.launch_meta()}

    def launch_meta(self) -> dict:
        return {"kernels": self.kernels, "block": BLOCK, "reduce_blocks": REDUCE_BLOCKS,
                "temps": [[affine_meta(d) for d in self.layout(a)] for a in self.prog.temps]}


class CudaRunner:
    """Compiles CUDA source with nvcc where present; runs it with CuPy where CuPy and a GPU are."""

    def __init__(self, source: str, meta: dict, error=ValueError):
        self.arguments = Arguments(meta, error)
        self.source = source
        self.meta = meta
        self.error = error
        self.object_path = build_cuda_object(source) if nvcc_path() else None
        self._module = None

    def _cupy(self):
        try:
            import cupy
        except ImportError:
            raise UnsupportedError(
                "target='cuda' runs through CuPy, which is not installed here; the kernel was generated"
                + (" and compiled with nvcc" if self.object_path else "") + " (see kernel.source)") from None

        try:
            if cupy.cuda.runtime.getDeviceCount() < 1:
                raise UnsupportedError("no GPU is present to run the CUDA kernel")
        except cupy.cuda.runtime.CUDARuntimeError:
            raise UnsupportedError("no GPU is present to run the CUDA kernel") from None
        return cupy

    def plain(self, inputs: dict):
        """As ``Arguments.plain``: the host's checks are the C runner's."""
        return self.arguments.plain(inputs)

    def __call__(self, **inputs):
        return self.run(inputs)

    def run(self, inputs: dict, plain=UNCHECKED, outputs=None):
        """The kernel's results on ``inputs`` (``plain``: as ``Arguments.prepare`` takes it).  ``outputs``
        (arrays written in the outputs' places, the C runner's for a scattered kernel) is refused."""
        if outputs is not None:
            raise UnsupportedError("a kernel that writes its values at given positions (a sparse Jacobian's or "
                                   "Hessian's values) runs on the C target only")
        cp = self._cupy()
        if self._module is None:
            self._module = cp.RawModule(code=self.source, options=("-std=c++17",))
        host = self.arguments
        resident = _holds_device_arrays(cp, inputs)
        if resident:  # the checks and sizes from stand-ins of the same shapes (np.empty: no memory touched)
            size_arr, args, outs = host.prepare(_stand_ins(cp, inputs, host.dtype))
            dense = self._device_components(cp, inputs)
            args = dense + args[len(dense):]  # (after the dense inputs, the relations' views)
        else:
            size_arr, args, outs = host.prepare(inputs, plain)
        sizes = dict(zip(self.meta["sizes"], size_arr.tolist()))
        launch = self.meta["launch"]
        d_args = [cp.asarray(a) for a in args]
        d_outs = [cp.empty(o.shape, dtype=o.dtype) for o in outs]
        temps = []
        for dims in launch["temps"]:
            n = 1
            for d in dims:
                n *= aff_value(d, sizes)
            temps.append(cp.empty(max(n, 1), dtype=host.dtype))
        partial = cp.zeros(max(REDUCE_BLOCKS, FEW_POINTS), dtype=host.dtype)  # (FEW_POINTS * splits fit)
        every = d_args + d_outs + temps + [partial]
        ptrs = cp.asarray(np.array([a.data.ptr for a in every], dtype=np.uint64))
        d_sizes = cp.asarray(size_arr)
        block = launch["block"]
        for k in launch["kernels"]:
            fn = self._module.get_function(k["name"])
            if k["kind"] == "points":
                total = 1
                for d in k["total"]:
                    total *= aff_value(d, sizes)
                if total == 0:
                    continue
                if "blocks" in k and total < FEW_POINTS:
                    self._module.get_function(k["blocks"])((total * splits(total),), (block,), (d_sizes, ptrs))
                    fn = self._module.get_function(k["blocks"] + "_fin")
                fn(((total + block - 1) // block,), (block,), (d_sizes, ptrs))
            elif k["kind"] == "reduce":
                fn((launch["reduce_blocks"],), (block,), (d_sizes, ptrs))
            elif k["kind"] == "single_block":
                fn((1,), (block,), (d_sizes, ptrs))
            else:
                fn((1,), (1,), (d_sizes, ptrs))
        if resident:  # CuPy arrays in, CuPy arrays out (a scalar is read back as a float)
            return host.results(d_outs)
        cp.cuda.Stream.null.synchronize()
        return host.results([cp.asnumpy(o) for o in d_outs])

    def _device_components(self, cp, inputs: dict) -> list:
        """The inputs' arrays in argument order (``Arguments``'): each on the GPU, contiguous, of the
        kernel's dtype (a CuPy array of another dtype or order is converted there, a NumPy one copied)."""
        host = self.arguments
        return [cp.ascontiguousarray(cp.asarray(host._component(inp["name"], inputs[inp["name"]], comp["projs"])[1]),
                                     dtype=host.dtype)
                for inp in host.inputs for comp in inp["components"]]


def _holds_device_arrays(cp, value) -> bool:
    """Whether ``value`` (a dict of inputs, a tuple, an array) holds a CuPy array."""
    if isinstance(value, dict):
        return any(_holds_device_arrays(cp, v) for v in value.values())
    if isinstance(value, tuple):
        return any(_holds_device_arrays(cp, v) for v in value)
    return isinstance(value, cp.ndarray)


def _stand_ins(cp, value, dtype):
    """``value`` with each CuPy array replaced by an uninitialised NumPy array of its shape and ``dtype``."""
    if isinstance(value, dict):
        return {k: _stand_ins(cp, v, dtype) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_stand_ins(cp, v, dtype) for v in value)
    return np.empty(value.shape, dtype) if isinstance(value, cp.ndarray) else value


def load(source: str, meta: dict, error, sanitize: bool = False) -> tuple[CudaRunner, str | None, None]:
    """The ``Target.load`` of CUDA: the runner and the object nvcc built (``None`` without nvcc); the
    sanitizers are the C target's (CUDA has ``compute-sanitizer``, run from outside the process)."""
    if sanitize:
        raise UnsupportedError("sanitize=True builds C kernels with AddressSanitizer and UBSan; the CUDA "
                               "target has no such build (run the process under compute-sanitizer)")
    runner = CudaRunner(source, meta, error=error)
    return runner, runner.object_path, None
