"""Outputs written at positions read from an index array: the C of a sparse Jacobian's values kernel.

A kernel emitted with ``scatter`` (``Positions``: the C type of the positions, ``int32_t`` or ``int64_t``,
and each output's pattern) takes, in each output's place, an array of that type over the output's points
(C order), and after them one array of reals, ``tl_data``: the point ``g`` of output ``k`` is written to
``tl_data[outk[g]]``.  So the values of every piece of a sparse Jacobian go straight to their positions in
the CSR ``data`` (``derive.sparse.SparseJacobian.pattern``), in the one pass that computes them.  A gather's
loop nest runs over the output's pattern only (its points outside the pattern, whose positions are
negative, are never visited, and it needs no test); the other ways of writing a statement (interchanged or
chunked reductions, a scalar) write where the position is not negative.  No output is a BLAS call's target
there (``emit_stmt``).
"""
from __future__ import annotations

from dataclasses import dataclass

from tensorlang.nodes import TRUE, Affine, Pred
from tensorlang.substitute import substitute_index

from .ir import Array

__all__ = ["Positions", "Scatter"]


@dataclass(frozen=True)
class Positions:
    """How a kernel's outputs are written (``codegen.scatter``): ``ctype`` the C type of the positions,
    ``patterns`` for each output ``(its loop variables, the predicate over them where it is in the pattern)``."""

    ctype: str
    patterns: tuple[tuple[tuple, Pred], ...]


class Scatter:
    """The scattered-output half of an emitter (needs ``scatter``, ``prog``, ``caps``, ``linear`` and
    ``layout``); with ``scatter`` None, outputs are plain arrays."""

    scatter: str | None = None

    def scattered(self, arr: Array) -> bool:
        return self.scatter is not None and arr.kind == "output"

    def pattern(self, arr: Array, gv: tuple) -> Pred:
        """Where the statement ``arr[gv] = ...`` is in its output's pattern (TRUE for an array not scattered)."""
        if not self.scattered(arr):
            return TRUE
        variables, pred = self.scatter.patterns[self.prog.output_arrays().index(arr)]
        return substitute_index(pred, {v: Affine.var(g) for v, g in zip(variables, gv)})

    def store(self, arr: Array, idx, value: str, in_pattern: bool = False) -> str:
        """The C statement that writes ``value`` at ``idx`` of ``arr``; ``in_pattern``: ``idx`` is known to be
        in the output's pattern (a scattered one's position is not negative there)."""
        if not self.scattered(arr):
            return super().store(arr, idx, value)
        at = f"{arr.cname}[{self.linear(self.layout(arr), idx)}]"
        if in_pattern:
            return f"tl_data[{at}] = {value};"
        return f"{{ const int64_t tl_at = {at}; if (tl_at >= 0) tl_data[tl_at] = {value}; }}"

    def output_declarations(self, k: int) -> list[str]:
        """The outputs' arguments from ``tl_args[k]`` on (positions, then ``tl_data``, when scattered)."""
        restrict = self.caps.restrict
        if self.scatter is None:
            return [f"real *{restrict} {a.cname} = (real *)tl_args[{k + j}];"
                    for j, a in enumerate(self.prog.output_arrays())]
        outs, ctype = self.prog.output_arrays(), self.scatter.ctype
        lines = [f"const {ctype} *{restrict} {a.cname} = (const {ctype} *)tl_args[{k + j}];" for j, a in enumerate(outs)]
        return lines + [f"real *{restrict} tl_data = (real *)tl_args[{k + len(outs)}];"]

    def parameter_type(self, name: str, target: Array) -> str:
        """The C type of array ``name`` as a parameter of the function of a statement writing ``target``."""
        if name == "tl_data":
            return "real *"
        if self.scatter is not None and name in {a.cname for a in self.prog.output_arrays()}:
            return f"const {self.scatter.ctype} *"
        return "real *" if name == target.cname else "const real *"
