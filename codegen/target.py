"""What a code-generation target is and can do.

``Capabilities`` is what an emitter class declares about the code it writes (``CEmitter.caps``,
``CudaEmitter.caps``); ``Target`` joins a target's name, its emitter class and how its source becomes
something callable.  ``codegen.kernel.TARGETS`` is the table ``tl.compile(target=...)`` reads.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

__all__ = ["Capabilities", "Target"]


@dataclass(frozen=True)
class Capabilities:
    restrict: str  # the qualifier of pointers that alias nothing
    openmp: bool  # outermost loops carry OpenMP pragmas
    blas: bool  # statements marked by codegen.contract become tl_gemm/tl_gemv calls (else loops)
    workspace: bool  # non-scalar temporaries are cut from a workspace argument (else passed as arguments)
    interchange: bool  # reductions into small targets may run with the target's loops innermost
    function_qualifier: str  # how a black box's C function is declared


@dataclass(frozen=True)
class Target:
    """``emitter(prog, namer, dtype, entry)`` writes the source; ``load(source, meta, error)`` returns
    ``(runner, library path or None)``, where ``runner(**inputs)`` checks the inputs (raising ``error``)
    and runs the kernel."""

    name: str
    emitter: type
    load: Callable

    @property
    def caps(self) -> Capabilities:
        return self.emitter.caps
