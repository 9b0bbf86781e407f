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
* ``Program``: sizes, inputs, relations, statements in order, and the output structure.

``Reduce`` is a node of this package only (hash-consed like the core nodes): ``sum(vars) [pred] * body``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tensorlang.nodes import TRUE, Affine, Expr, IndexVar, Pred, R, TypeCheckError, Var


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
    """``target[vars] = body`` (gather form)."""

    target: Array
    vars: tuple[IndexVar, ...]
    body: Expr


@dataclass(eq=False)
class Program:
    expr: Expr
    sizes: list[str]
    inputs: list[Array]
    relations: list[Relation]
    stmts: list[Stmt]
    outputs: object  # an Array, or a tuple tree of Arrays (pairs)
    temps: list[Array] = field(default_factory=list)

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


__all__ = ["Reduce", "Array", "Relation", "Stmt", "Program", "TRUE"]
