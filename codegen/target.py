"""What a code-generation target is and can do, and the table of targets.

``Capabilities`` is what an emitter class declares about the code it writes (``CEmitter.caps``,
``CudaEmitter.caps``).  A ``Target`` names the module that holds its emitter class and its ``load``
(how a source becomes something callable); the module is imported on first use, so that importing
tensorlang does not load every emitter.  ``TARGETS`` is the table ``tl.compile(target=...)`` reads: a new
target is a module with an emitter class and a ``load`` function, and one row here.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass

from tensorlang.errors import UnsupportedError

__all__ = ["Capabilities", "Target", "TARGETS", "target_of"]


@dataclass(frozen=True)
class Capabilities:
    restrict: str  # the qualifier of pointers that alias nothing
    openmp: bool  # outermost loops carry OpenMP pragmas
    blas: bool  # statements marked by codegen.contract become tl_gemm/tl_gemv calls (else loops)
    workspace: bool  # non-scalar temporaries are cut from a workspace argument (else passed as arguments)
    interchange: bool  # reductions into small targets may run with the target's loops innermost
    function_qualifier: str  # how a black box's C function is declared
    # a scalar let whose value is a reduction stays a statement of its own (its threads share its loop)
    # instead of being computed inside the statement that reads it
    stored_reductions: bool = False


@dataclass(frozen=True)
class Target:
    """``emitter(prog, namer, dtype, entry)`` writes the source; ``load(source, meta, error, sanitize)``
    returns ``(runner, library path or None, compiler flags or None)``, where ``runner(**inputs)`` (and
    ``runner.run(inputs, plain)``, given ``runner.plain(inputs)`` when the caller asked it) checks the
    inputs (raising ``error``) and runs the kernel, built with the sanitizers where ``sanitize`` (an
    ``UnsupportedError`` where the target has none).  Both live in ``module``."""

    name: str
    module: str
    emitter_name: str

    @property
    def emitter(self) -> type:
        return getattr(importlib.import_module(self.module), self.emitter_name)

    @property
    def load(self):
        return importlib.import_module(self.module).load

    @property
    def caps(self) -> Capabilities:
        return self.emitter.caps


TARGETS = {
    "c": Target("c", "tensorlang.codegen.c", "CEmitter"),
    "cuda": Target("cuda", "tensorlang.codegen.cuda", "CudaEmitter"),
}


def target_of(name: str) -> Target:
    """The target called ``name`` (``UnsupportedError`` naming the targets there are otherwise)."""
    try:
        return TARGETS[name]
    except (KeyError, TypeError):
        known = ", ".join(repr(k) for k in TARGETS)
        raise UnsupportedError(f"unknown target {name!r} (targets: {known})") from None
