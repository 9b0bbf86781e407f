"""The code generator's intermediate form: a program as a list of statements over arrays.

After normalisation (let-lifting, pair elimination, gen pushout: section 5.3 of the paper) a program is
``let X1 = G1 in ... in Out`` with every right-hand side a generator nest over a scalar expression of
sums, guards and accesses.  Here that becomes:

* ``Array``: a C buffer: an input component (a pair input is a struct of arrays, one per projection
  path), a let-bound temporary, or an output.  ``dims`` are affine in the sizes.
* ``Stmt``: ``target[vars] = body``, gather form: every element of the target written once by the
  point of the generator nest that owns it.  ``body`` is a scalar ``Expr`` in which tensor accesses are
  full (``A[i][j]``), reductions are ``Reduce`` nodes (a sum over several variables with one guard:
  nested sums merged so that isl sees the whole domain) and guards are pulled out of products.
* ``Program``: sizes, inputs, relations, statements in order, and the output structure;
  ``str(program)`` prints it (each stage of a kernel prints: ``Kernel.explain``).

``Reduce`` is a node of this package only (hash-consed like the core nodes): ``sum(vars) [pred] * body``;
``MaxReduce`` is ``max(vars) body``, a run of maxima (``max(i:n) e``) over one box.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tensorlang.nodes import (
    TRUE, Access, Affine, Expr, IndexVar, Pred, Proj, R, Sum, TypeCheckError, Var, guard, maxes,
)
from tensorlang.printer import affine_str, expr_str
from tensorlang.substitute import rebuild


class Reduce(Expr):
    """``sum(v0:s0, v1:s1, ...) [pred] * body``: a multi-variable sum over one isl domain."""

    __slots__ = ()
    _fields = ("vars", "sizes", "pred", "body")

    def _check(self) -> None:
        if not all(isinstance(v, IndexVar) for v in self.vars) or len(self.vars) != len(self.sizes):
            raise TypeCheckError("malformed Reduce")
        if not isinstance(self.pred, Pred) or not isinstance(self.body, Expr) or self.body.type is not R:
            raise TypeCheckError("malformed Reduce")
        self._set_type(R)


class MaxReduce(Expr):
    """``max(v0:s0, v1:s1, ...) body``: a maximum over a box (``-inf`` where it is empty).  Its body's
    brackets are values (0 where false), never a restriction of the box, so it has no predicate of its
    own: ``pred`` is ``true``, for the loop nest it shares with ``Reduce``.  Not a ``Reduce``: nothing
    that schedules, splits or chunks sums applies to it."""

    __slots__ = ()
    _fields = ("vars", "sizes", "body")
    pred = TRUE

    def _check(self) -> None:
        if not all(isinstance(v, IndexVar) for v in self.vars) or len(self.vars) != len(self.sizes):
            raise TypeCheckError("malformed MaxReduce")
        if not isinstance(self.body, Expr) or self.body.type is not R:
            raise TypeCheckError("malformed MaxReduce")
        self._set_type(R)


@dataclass(eq=False)
class Array:
    """A buffer: ``kind`` is ``input``, ``temp`` or ``output``; ``key`` identifies an input component
    (``(Var, (proj, ...))``); ``cname`` is its C name; ``dims`` its extents (affine in sizes)."""

    cname: str
    dims: tuple[Affine, ...]
    kind: str
    key: object = None
    label: str = ""

    @property
    def is_scalar(self) -> bool:
        return not self.dims


@dataclass(eq=False)
class Relation:
    """A data relation input: ``var`` of type ``rel[s0, ...]``; which C views of it the kernel reads:
    ``csr`` (row pointers and column indices), ``csc`` (the same of the transpose), ``dense``
    (a flat ``unsigned char`` membership array, for 1-D and >2-D relations)."""

    var: Var
    cname: str
    dims: tuple[Affine, ...]
    csr: bool = False
    csc: bool = False
    dense: bool = False


@dataclass(eq=False)
class Stmt:
    """``target[vars] = body`` (gather form); ``contraction``: the ``codegen.contract.Contraction`` a
    BLAS call computes it with, if ``codegen.contract`` found one."""

    target: Array
    vars: tuple[IndexVar, ...]
    body: Expr
    contraction: object = None

    def __str__(self) -> str:
        index = "".join(f"[{v.name}]" for v in self.vars)
        lhs = f"{self.target.cname}{index}"
        if self.contraction is not None:
            return f"{lhs} = {self.contraction.kind}: {expr_str(core(self.body))}"
        return f"{lhs} = {expr_str(core(self.body))}"


@dataclass(eq=False)
class Program:
    expr: Expr
    sizes: list[str]
    inputs: list[Array]
    relations: list[Relation]
    stmts: list[Stmt]
    outputs: object  # an Array, or a tuple tree of Arrays (pairs)
    temps: list[Array] = field(default_factory=list)
    size_cnames: dict[str, str] = field(default_factory=dict)  # size name -> its C name
    let_arrays: dict[int, Array] = field(default_factory=dict)  # id of a let-bound Var -> its temporary
    blas: bool = False  # whether some statement is a BLAS call (set by codegen.contract)

    def output_arrays(self) -> list[Array]:
        out: list[Array] = []

        def walk(o):
            if isinstance(o, tuple):
                for p in o:
                    walk(p)
            elif o not in out:
                out.append(o)

        walk(self.outputs)
        return out

    def __str__(self) -> str:
        def arrays(kind, items):
            return [f"{kind} {a.cname}" + "".join(f"[{affine_str(d)}]" for d in a.dims) + (f"  ({a.label})" if a.label else "")
                    for a in items]

        def structure(o):
            return "(" + ", ".join(structure(p) for p in o) + ")" if isinstance(o, tuple) else o.cname

        lines = [f"sizes {', '.join(self.sizes)}" if self.sizes else "sizes (none)"]
        lines += arrays("input", self.inputs)
        lines += [f"relation {r.cname}: {r.var.type}" for r in self.relations]
        lines += arrays("temp", self.temps)
        lines += [str(s) for s in self.stmts]
        lines.append(f"output {structure(self.outputs)}")
        return "\n".join(lines)


def core(e: Expr) -> Expr:
    """``e`` with every ``Reduce`` (and ``MaxReduce``) written as the core nodes it stands for (nested sums
    over a guard, nested maxima), so that the core printer prints it."""
    if isinstance(e, Reduce):
        out = guard(e.pred, core(e.body))
        for v, s in reversed(list(zip(e.vars, e.sizes))):
            out = Sum(v, s, out)
        return out
    if isinstance(e, MaxReduce):
        return maxes(zip(e.vars, e.sizes), core(e.body))
    return rebuild(e, core) if e.children else e


def path_of(e: Expr):
    """``(base Var, projections, indices)`` when ``e`` is a path (``x``, ``p.0[i]``, ``A[i][j]``)."""
    projs: list[int] = []
    idx: list[Affine] = []
    while isinstance(e, (Proj, Access)):
        if isinstance(e, Proj):
            projs.append(e.index)
            e = e.pair
        else:
            idx.append(e.index)
            e = e.tensor
    if not isinstance(e, Var):
        return None
    return e, tuple(reversed(projs)), tuple(reversed(idx))


def affine_meta(a: Affine) -> list:
    """An affine form in the sizes as the run time's plain data: ``[const, [[size, coeff], ...]]``."""
    return [a.const, [[v.name, c] for v, c in a.terms]]


__all__ = ["Reduce", "MaxReduce", "Array", "Relation", "Stmt", "Program", "core", "path_of", "affine_meta", "TRUE"]
