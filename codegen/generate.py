"""A program's generated source and the runtime's description of its arguments: lowering and emission,
no compiler involved.

``generate(expr, target, dtype, entry)`` is ``(source, meta)``: the program lowered (``codegen.lower``)
and emitted by its target's emitter class (``TARGETS``); ``meta`` is the plain data ``codegen.runtime``
checks inputs against (``program_meta``) and ``tl.export`` writes out.  ``emitter_for`` stops before the
translation unit, so that several programs of one dtype can share one library (``tl.export``, the
block programs of ``codegen.blocks``); ``explain`` shows every stage as text, the loop IR after each of
the schedule's passes included.
"""
from __future__ import annotations

from tensorlang.errors import UnsupportedError
from tensorlang.nodes import Expr, IndexMapType

from .ir import Program, affine_meta
from .loop_ir import PASSES, print_ir
from .lower import component_type, lower, normalize
from .target import target_of

__all__ = ["program_meta", "emitter_for", "generate", "explain"]


# the most axes a NumPy array has (NumPy 2; NumPy 1 has 32): every input and output of a kernel is one
NUMPY_MAX_DIMS = 64


def program_meta(prog: Program, emitter_cls, dtype: str, entry: str) -> dict:
    """The runtime's description of the kernel's arguments (after emission: relation views are known)."""
    for a in [*prog.inputs, *prog.output_arrays()]:
        if len(a.dims) > NUMPY_MAX_DIMS:
            what = f"input {a.key[0].name}" if a.kind == "input" else "output"
            raise UnsupportedError(f"the kernel's {what} has {len(a.dims)} dimensions, and a NumPy array at most "
                                   f"{NUMPY_MAX_DIMS}: nest fewer generators, or reshape the result")
    inputs = []
    by_var: dict = {}
    for a in prog.inputs:
        var, projs = a.key
        if id(var) not in by_var:
            by_var[id(var)] = {"name": var.name, "type": str(var.type), "components": []}
            inputs.append(by_var[id(var)])
        by_var[id(var)]["components"].append(
            {"projs": list(projs), "dims": [affine_meta(d) for d in a.dims], "type": str(component_type(var.type, projs))})
    relations = []
    for r in prog.relations:
        relations.append({"name": r.var.name, "type": str(r.var.type), "dims": [affine_meta(d) for d in r.dims],
                          "views": [view for _, view, _ in emitter_cls.relation_views(r)],
                          "index_array": isinstance(r.var.type, IndexMapType)})
    outs = prog.output_arrays()
    index = {id(a): k for k, a in enumerate(outs)}

    def structure(o):
        if isinstance(o, tuple):
            return [structure(p) for p in o]
        return index[id(o)]

    return {
        "entry": entry,
        "dtype": dtype,
        "sizes": list(prog.sizes),
        "inputs": inputs,
        "relations": relations,
        "outputs": [{"dims": [affine_meta(d) for d in a.dims]} for a in outs],
        "structure": structure(prog.outputs),
        "blas": emitter_cls.caps.blas and prog.blas,
        "workspace": [[affine_meta(d) for d in emitter_cls.layout(a)] for a in prog.temps if not a.is_scalar]
        if emitter_cls.caps.workspace else [],
    }


def emitter_for(expr: Expr, target: str = "c", dtype: str = "float64", entry: str = "tl_kernel",
                scatter=None):
    """``(emitter, meta)`` for ``expr`` after emission (``emitter.emit()`` is the translation unit;
    several emitters of one dtype can share one with ``translation_unit``); ``scatter``: a ``codegen.scatter.Positions``,
    the outputs written at positions (C only)."""
    if dtype not in ("float64", "float32"):
        raise UnsupportedError(f"dtype must be 'float64' or 'float32', not {dtype!r}")
    cls = target_of(target).emitter
    prog, namer = lower(expr, stored_reductions=cls.caps.stored_reductions)
    emitter = cls(prog, namer, dtype, entry, scatter=scatter)
    emitter.emit_entry()
    meta = program_meta(prog, cls, dtype, entry)
    meta.update(emitter.target_meta())
    return emitter, meta


def generate(expr: Expr, target: str = "c", dtype: str = "float64", entry: str = "tl_kernel",
             scatter=None):
    """``(source, meta)`` for ``expr``: lowering and emission, no compiler involved."""
    emitter, meta = emitter_for(expr, target, dtype, entry, scatter)
    return emitter.emit(), meta


def explain(expr: Expr, target: str = "c", dtype: str = "float64", scatter=None, stage: str | None = None) -> str:
    """Every stage of compiling ``expr``, as text: the program, its normal form, the statement form of
    ``codegen.ir`` (after fusion and contraction marking), the loop IR of each statement as emitted and after
    each of the schedule's passes (``loop_ir.PASSES``), and the generated source.  ``stage``: that stage
    alone (its name as the headings print it, ``"loops"``, ``"loops after serial copies"`` ...)."""
    cls = target_of(target).emitter
    prog, namer = lower(expr, stored_reductions=cls.caps.stored_reductions)
    emitter = cls(prog, namer, dtype, "tl_kernel", scatter=scatter)
    source = emitter.emit()
    stages = [("program", str(expr)), ("normal form", str(normalize(expr))), ("statements", str(prog))]
    irs = emitter.loop_ir
    stages.append(("loops", _loops_text(irs)))
    for name, run in PASSES:
        irs = [(label, run(nodes, cls.caps)) for label, nodes in irs]
        stages.append((f"loops after {name}", _loops_text(irs)))
    stages.append((f"{target} source", source))
    if stage is not None:
        found = dict(stages).get(stage)
        if found is None:
            raise UnsupportedError(f"no stage {stage!r}: the stages are {', '.join(repr(n) for n, _ in stages)}")
        return found.rstrip() + "\n"
    return "\n".join(f"== {name}\n{text.rstrip()}" for name, text in stages) + "\n"


def _loops_text(irs: list) -> str:
    return "\n".join(f"-- {label}\n{print_ir(nodes)}" for label, nodes in irs)
