"""Outputs written at positions read from an index array: the C of a sparse Jacobian's values kernel.

A kernel emitted with ``scatter`` (the C type of the positions, ``int32_t`` or ``int64_t``) takes, in each
output's place, an array of that type over the output's points (C order), and after them one array of
reals, ``tl_data``: the point ``g`` of output ``k`` is written to ``tl_data[outk[g]]``, and not at all where
``outk[g]`` is negative.  So the values of every piece of a sparse Jacobian go straight to their positions
in the CSR ``data`` (``derive.sparse.SparseJacobian.pattern``), in the one pass that computes them.  No
output is a BLAS call's target there (``emit_stmt``).
"""
from __future__ import annotations

from .ir import Array

__all__ = ["Scatter"]


class Scatter:
    """The scattered-output half of an emitter (needs ``scatter``, ``prog``, ``caps``, ``linear`` and
    ``layout``); with ``scatter`` None, outputs are plain arrays."""

    scatter: str | None = None

    def scattered(self, arr: Array) -> bool:
        return self.scatter is not None and arr.kind == "output"

    def store(self, arr: Array, idx, value: str) -> str:
        """The C statement that writes ``value`` at ``idx`` of ``arr``."""
        if not self.scattered(arr):
            return super().store(arr, idx, value)
        at = f"{arr.cname}[{self.linear(self.layout(arr), idx)}]"
        return f"{{ const int64_t tl_at = {at}; if (tl_at >= 0) tl_data[tl_at] = {value}; }}"

    def output_declarations(self, k: int) -> list[str]:
        """The outputs' arguments from ``tl_args[k]`` on (positions, then ``tl_data``, when scattered)."""
        restrict = self.caps.restrict
        if self.scatter is None:
            return [f"real *{restrict} {a.cname} = (real *)tl_args[{k + j}];"
                    for j, a in enumerate(self.prog.output_arrays())]
        outs = self.prog.output_arrays()
        lines = [f"const {self.scatter} *{restrict} {a.cname} = (const {self.scatter} *)tl_args[{k + j}];"
                 for j, a in enumerate(outs)]
        return lines + [f"real *{restrict} tl_data = (real *)tl_args[{k + len(outs)}];"]

    def parameter_type(self, name: str, target: Array) -> str:
        """The C type of array ``name`` as a parameter of the function of a statement writing ``target``."""
        if name == "tl_data":
            return "real *"
        if self.scatter is not None and name in {a.cname for a in self.prog.output_arrays()}:
            return f"const {self.scatter} *"
        return "real *" if name == target.cname else "const real *"
