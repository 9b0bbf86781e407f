"""The derivative calls of the public API (docs/derive.md): ``derivative``, ``adjoint``, ``grad``, ``jacobian``,
``hessian`` and ``certify``, each an ``Expr`` to ``Expr`` (or ``Certificate``) function.

Every derivative is taken on the Tensor SSA form of the program (Theorems 6.1 and 6.35 are stated on
it) and then simplified (``derive/simplify.py``), which never raises the cost, so the results print
readably, evaluate, cost, normalise and can be differentiated again.  ``adjoint`` and
``value_and_derivative`` (the program paired with its derivative) and ``value_and_grad`` (a scalar program
paired with its gradient) are also what a compiled kernel's derivatives are compiled from: this module
installs them into ``codegen.kernel.DERIVATIVES`` (``Kernel.adjoint``, ``Kernel.forward``,
``Kernel.value_and_grad``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from tensorlang.codegen.kernel import DERIVATIVES
from tensorlang.cost import concrete_cost, ratio, sizes_and_relations, type_size
from tensorlang.declarations import body_of, declare, keeps_declarations
from tensorlang.errors import TypeCheckError
from tensorlang.nodes import (
    Const, Expr, Guard, IndexVar, Pair, RealType, RelType, Var, compare, conj, gens,
    tensor_dims,
)
from tensorlang.normalize import gen_pushout, let_lift, pair_elim, to_ssa
from tensorlang.progress import stage
from tensorlang.spelling import did_you_mean
from tensorlang.substitute import fresh_var, substitute_vars
from tensorlang.traversal import free_vars, size_vars, value_inputs

from .adjoint import adjoint_ssa
from .forward import forward
from .simplify import simplify_program
from .sparse import SparseJacobian, sparse_jacobian
from .structure import keep_structure


def wrt_vars(expr: Expr, wrt) -> list[Var]:
    """``wrt`` (a name, an input variable, or a list of them) as the input variables of ``expr``."""
    inputs = {v.name: v for v in free_vars(expr)}
    items = [wrt] if isinstance(wrt, (str, Var)) else list(wrt) if isinstance(wrt, (list, tuple)) else None
    if items is None or not all(isinstance(item, (str, Var)) for item in items):
        values = [v.name for v in value_inputs(expr)]
        hint = f'; did you mean "{values[0]}"?' if len(values) == 1 else f" (inputs: {', '.join(values)})"
        raise TypeCheckError(
            f"wrt is a name or an input variable, or a list of them, not {type(wrt).__name__} (a value)" + hint
        )
    if not items:
        raise TypeCheckError("wrt names no variable")
    out = []
    for item in items:
        name = item.name if isinstance(item, Var) else item
        var = inputs.get(name)
        if var is None:
            raise TypeCheckError(
                f"{name} is not an input of this program (inputs: {', '.join(inputs) or 'none'})"
                f"{did_you_mean(name, inputs)}"
            )
        if isinstance(var.type, RelType):
            raise TypeCheckError(f"{name} is a relation: a sparsity pattern has no derivative")
        if any(v is var for v in out):
            raise TypeCheckError(f"{name} is named twice in wrt")
        out.append(var)
    return out


@keeps_declarations
def simplify(expr: Expr) -> Expr:
    """Let-lifting, pair elimination and gen pushout, then the simplification rules S1-S8: what makes
    a composed program (a trace of a Jacobian, say) cost what it should."""
    return simplify_program(gen_pushout(pair_elim(let_lift(expr))))


def _derived(result: Expr, primal: Expr, new_inputs=()) -> Expr:
    """A derived program: it takes its primal's inputs and sizes, and its own new inputs after them."""
    return declare(result, [*free_vars(primal), *new_inputs], size_vars(primal))


def derivative(expr: Expr, wrt) -> Expr:
    """``tl.derivative``: D (Fig. 13), with a new input ``d<name>`` per variable in wrt (numbered where that
    name is taken)."""
    d, sigma = _derivative(expr, wrt_vars(expr, wrt))
    return _derived(d, expr, sigma.values())


def value_and_derivative(expr: Expr, wrt) -> tuple[Expr, dict[str, str]]:
    """The pair ``(expr, tl.derivative(expr, wrt))`` as one Tensor SSA program, the statements they share
    computed once (fix-up 4), and the name of the tangent input of each variable in wrt: what a kernel's
    forward mode compiles, so that one call gives a value and its tangent."""
    d, sigma = _derivative(expr, wrt_vars(expr, wrt))
    with stage("sharing the value's statements with its derivative's"):
        both = to_ssa(Pair(body_of(expr), d))
    return _derived(both, expr, sigma.values()), {v.name: t.name for v, t in sigma.items()}


def value_and_grad(expr: Expr, wrt) -> Expr:
    """The pair ``(expr, tl.grad(expr, wrt))`` of a scalar program as one Tensor SSA program, the statements
    they share computed once: what a kernel's reverse mode compiles for a scalar output, so that the one
    call of a differentiated function's forward pass gives the value and the gradient at the cotangent 1
    (the adjoint is linear in the cotangent: the pullback scales it)."""
    return _derived(_grad(expr, wrt, with_value=True), expr)


def _derivative(expr: Expr, variables: Sequence[Var]) -> tuple[Expr, dict]:
    """D of the program's expression (its declarations are the caller's) and the tangent inputs."""
    sigma: dict = {}
    for v in variables:
        sigma[v] = fresh_var("d" + v.name, v.type, avoid=[expr, *sigma.values()])
    with stage("normalising to Tensor SSA"):
        ssa = to_ssa(body_of(expr))
    with stage("deriving the forward derivative"):
        d = forward(ssa, sigma)
    with stage("simplifying"):
        return simplify_program(d), sigma


def adjoint(expr: Expr, wrt, check: dict | None = None) -> Expr:
    """``tl.adjoint``: D^T (Fig. 14-16) with the new input ``dy`` of expr's type; for several wrt
    variables the output is right-nested pairs in the order given.  ``check`` (sizes by name) verifies
    every rule application against the extended cost of Fig. 17."""
    a, dy = _adjoint(expr, wrt_vars(expr, wrt), check)
    return _derived(a, expr, [dy])


def _adjoint(expr: Expr, variables: Sequence[Var], check: dict | None = None) -> tuple[Expr, Var]:
    """D^T of the program's expression (its declarations are the caller's) and the cotangent input."""
    dy = fresh_var("dy", expr.type, avoid=[expr])
    with stage("normalising to Tensor SSA"):
        ssa = to_ssa(body_of(expr))
    with stage("deriving the adjoint"):
        a = adjoint_ssa(ssa, variables, dy, check)
    with stage("simplifying"):
        return simplify_program(a), dy


def grad(expr: Expr, wrt) -> Expr:
    """``tl.grad``: for a scalar program, the adjoint with ``dy = 1``."""
    return _derived(_grad(expr, wrt), expr)


def _grad(expr: Expr, wrt, with_value: bool = False) -> Expr:
    """D^T of a scalar program with the cotangent 1 itself (6.14 reads it like any dy), so that the program
    is simplified once; with ``with_value``, paired with the program's value (``value_and_grad``)."""
    if not isinstance(expr.type, RealType):
        raise TypeCheckError(f"grad needs a scalar program, this one has type {expr.type}; use adjoint")
    with stage("normalising to Tensor SSA"):
        ssa = to_ssa(body_of(expr))
    with stage("deriving the adjoint"):
        a = adjoint_ssa(ssa, wrt_vars(expr, wrt), Const(1), with_value=with_value)
    with stage("simplifying"):
        return simplify_program(a)


def jacobian(expr: Expr, wrt, sparse: bool = False) -> Expr | SparseJacobian:
    """``tl.jacobian``: the materialised Jacobian, output indices first (``probed_jacobian``), simplified
    so that its structure survives: its tensors keep only the loops they read and are bracketed and stored
    by where they can be nonzero (``derive/structure.py``), so it costs the work of its nonzeros.
    ``sparse=True``: a ``SparseJacobian``, whose value is a ``scipy.sparse.csr_array`` (``derive/sparse.py``)."""
    (var,) = wrt_vars(expr, wrt)
    out_sizes, _ = tensor_dims(expr.type)
    jac = probed_jacobian(expr, var)
    with stage("keeping the Jacobian's structure"):
        structured = keep_structure(jac)
    if sparse:
        with stage("splitting the Jacobian into its nonzero pieces"):
            return sparse_jacobian(structured, lambda body: _derived(body, expr), len(out_sizes))
    return _derived(structured, expr)


def probed_jacobian(expr: Expr, var: Var) -> Expr:
    """The Jacobian of a program's expression in ``var``, by probing D with one-hot tensors ``gen(k:s) [k =
    i]`` (section 2.1), simplified: ``gen(outputs, inputs) D(e_inputs)[outputs]``."""
    out_sizes, out_elem = tensor_dims(expr.type)
    in_sizes, in_elem = tensor_dims(var.type)
    if not isinstance(out_elem, RealType) or not isinstance(in_elem, RealType):
        raise TypeCheckError("jacobian needs real tensors in and out (no pairs)")
    d, sigma = _derivative(expr, [var])
    inputs = [IndexVar(f"j{k}") for k in range(len(in_sizes))]
    outputs = [IndexVar(f"i{k}") for k in range(len(out_sizes))]
    ks = [IndexVar(f"k{k}") for k in range(len(in_sizes))]
    one_hot = gens(
        list(zip(ks, in_sizes)), Guard(conj(*(compare("=", k, j) for k, j in zip(ks, inputs))), Const(1))
    )
    probed = substitute_vars(d, {sigma[var]: one_hot})
    entry = probed
    for i in outputs:
        entry = entry[i]
    return body_of(simplify(gens(list(zip(outputs, out_sizes)) + list(zip(inputs, in_sizes)), entry)))


def hessian(expr: Expr, wrt, sparse: bool = False) -> Expr | SparseJacobian:
    """``tl.hessian``: the Jacobian of the gradient (a scalar program, one input); ``sparse=True`` as for
    ``jacobian``."""
    (var,) = wrt_vars(expr, wrt)
    return jacobian(grad(expr, var), var.name, sparse)


# ------------------------------------------------------------------------------------------------
# certificates


@dataclass(frozen=True)
class Certificate:
    """The costs of a program, its forward derivative and its adjoint at given sizes, and the ratios of
    Theorems 6.1 and 6.35."""

    primal: int
    forward: int
    adjoint: int
    io_primal: int
    io_adjoint: int
    forward_ratio: float
    adjoint_ratio: float
    sizes: dict
    wrt: tuple[str, ...]

    BOUND = 4

    @property
    def ok(self) -> bool:
        return self.forward_ratio <= self.BOUND and self.adjoint_ratio <= self.BOUND

    def rows(self) -> list[tuple[str, str, str]]:
        return [
            ("primal cost", str(self.primal), ""),
            ("forward cost", str(self.forward), ""),
            ("adjoint cost", str(self.adjoint), ""),
            ("$_IO(primal)", str(self.io_primal), "cost + $(inputs) + $(output)"),
            ("$_IO(adjoint)", str(self.io_adjoint), ""),
            ("forward / primal", f"{self.forward_ratio:.3f}", f"<= {self.BOUND} (Theorem 6.1)"),
            ("$_IO(adjoint) / $_IO(primal)", f"{self.adjoint_ratio:.3f}", f"<= {self.BOUND} (Theorem 6.35)"),
        ]

    def title(self) -> str:
        sizes = ", ".join(f"{k} = {v}" for k, v in self.sizes.items()) or "no sizes"
        return f"certificate for wrt {', '.join(self.wrt)} at {sizes}: {'ok' if self.ok else 'BOUND VIOLATED'}"

    def __str__(self) -> str:
        width = max(len(r[0]) for r in self.rows())
        lines = [self.title()] + [f"  {name:<{width}}  {value:>12}  {note}".rstrip() for name, value, note in self.rows()]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        from tensorlang.display import html_table

        return html_table(self.title(), ("", "value", "bound"), self.rows())

    def _repr_markdown_(self) -> str:
        from tensorlang.display import markdown_table

        return markdown_table(self.title(), ("", "value", "bound"), self.rows())


def certify(expr: Expr, wrt, **sizes_or_inputs) -> Certificate:
    """``tl.certify``: costs and the ratios of Theorems 6.1 and 6.35 at the given sizes (or inputs)."""
    variables = wrt_vars(expr, wrt)
    sizes, relations = sizes_and_relations(expr, sizes_or_inputs)
    d, a = derivative(expr, variables), adjoint(expr, variables)
    primal = concrete_cost(expr, sizes, relations)
    fwd = concrete_cost(d, sizes, relations)
    adj = concrete_cost(a, sizes, relations)
    io = sum(type_size(v.type, sizes) for v in free_vars(expr)) + type_size(expr.type, sizes)
    return Certificate(
        primal, fwd, adj, primal + io, adj + io, ratio(fwd, primal), ratio(adj + io, primal + io),
        dict(sizes), tuple(v.name for v in variables),
    )


DERIVATIVES.install(adjoint=adjoint, value_and_derivative=value_and_derivative, value_and_grad=value_and_grad)
