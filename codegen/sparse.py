"""Data relations in C: which views of a relation a kernel reads, and how it iterates them.

``sum(j) [E(a, j + c) and q] * e`` over a 2-D relation iterates row ``a`` of ``E`` in CSR form
(``E(j + c, a)``: the CSR of the transpose), so it costs O(nnz); over an index array ``g : [p]index[n]``
(``x[g[a]]``, whose row ``a`` holds the one entry ``g[a]``) it reads that entry, with no loop; any other
relation atom is a binary
search in a CSR row (``tl_csr_has``), or a lookup in a dense mask for 1-D and higher-dimensional
relations.  Choosing a view marks it on the ``ir.Relation`` (``csr``, ``csc``, ``dense``), and the run
time passes exactly the marked views, in the order of ``relation_views``.
"""
from __future__ import annotations

from tensorlang.nodes import Affine, And, IndexMapType, IndexVar, RelAtom, box, conj

from .ir import Reduce, Relation

__all__ = ["Sparse"]


class Sparse:
    """The relation half of an emitter (needs ``relations``, ``names``, ``fresh``, ``affine``, ``linear``
    and ``_filtered_add``)."""

    @staticmethod
    def relation_views(r: Relation):
        """The C arrays a relation is passed as, in argument order: ``(name, view, type)``."""
        out = []
        if r.csr:
            out += [(r.cname + "_ptr", "csr_ptr", "int32_t"), (r.cname + "_idx", "csr_idx", "int32_t")]
        if r.csc:
            out += [(r.cname + "_tptr", "csc_ptr", "int32_t"), (r.cname + "_tidx", "csc_idx", "int32_t")]
        if r.dense:
            out += [(r.cname + "_mask", "dense", "unsigned char")]
        return out

    @staticmethod
    def _csr_choice(e: Reduce):
        """``(position of the summed variable, atom, transposed)`` when a conjunct ``E(a, v + c)`` (or
        ``E(v + c, a)``) of the reduction's guard lets ``v`` run over one CSR row of a 2-D relation."""
        parts = e.pred.parts if isinstance(e.pred, And) else (e.pred,)
        for atom in parts:
            if not isinstance(atom, RelAtom) or len(atom.args) != 2:
                continue
            for k in reversed(range(len(e.vars))):
                v = e.vars[k]
                a0, a1 = atom.args
                if a1.coeff(v) == 1 and a0.coeff(v) == 0:
                    return k, atom, False
                if a0.coeff(v) == 1 and a1.coeff(v) == 0:
                    return k, atom, True
        return None

    def _csr_loop(self, acc, e: Reduce, atom: RelAtom, transposed: bool, v: IndexVar, vs: Affine, scope,
                  add=None):
        """``acc += `` the summand at each entry of the CSR row the atom picks where the rest of the guard holds;
        ``add(scope)``, if given, emits the addition instead (lane blocking: one addition per lane)."""
        rel = self.relations[id(atom.rel)]
        a0, a1 = atom.args
        row, col = (a1, a0) if transposed else (a0, a1)
        if transposed:
            rel.csc = True
            ptr, idx = rel.cname + "_tptr", rel.cname + "_tidx"
            nrows = rel.dims[1]
        else:
            rel.csr = True
            ptr, idx = rel.cname + "_ptr", rel.cname + "_idx"
            nrows = rel.dims[0]
        shift = col - Affine.var(v)  # col = v + shift
        r = self.fresh("row")
        p = self.fresh("p")
        vname = self.names.var(v)
        scope.line(f"const int64_t {r} = {self.affine(row)};")
        within = f"{r} >= 0 && {r} < {self.affine(nrows)}"
        if isinstance(atom.rel.type, IndexMapType) and not transposed:  # row r is {g[r]}: ptr[r] = r
            inner, p = scope.branch(within, bound=scope.bound + (v,)), r
        else:
            inner = scope.branch(within).loop(p, f"int64_t {p} = {ptr}[{r}]", f"{p} < {ptr}[{r} + 1]", f"{p}++",
                                              bound=scope.bound + (v,))
        inner.line(f"const int64_t {vname} = (int64_t){idx}[{p}] - {self.affine(shift)};")
        parts = e.pred.parts if isinstance(e.pred, And) else (e.pred,)
        rest = conj(box([(v, vs)]), *[q for q in parts if q is not atom])
        if add is None:
            self._filtered_add(acc, rest, e.body, inner)
            return
        cond = self.pred(rest, inner)
        if cond != "0":
            add(inner if cond is None else inner.branch(cond))

    def _member(self, atom: RelAtom) -> str:
        rel = self.relations[id(atom.rel)]
        args = [self.affine(a) for a in atom.args]
        bounds = " && ".join(f"{a} >= 0 && {a} < {self.affine(d)}" for a, d in zip(args, rel.dims))
        if len(args) == 2:
            rel.csr = True
            return f"({bounds} && tl_csr_has({rel.cname}_ptr, {rel.cname}_idx, {args[0]}, {args[1]}))"
        rel.dense = True
        lin = self.linear(rel.dims, list(atom.args))
        return f"({bounds} && {rel.cname}_mask[{lin}])"
