"""The public API (``import tensorlang as tl``): the one module that joins the language core and the passes.

Each call is defined where its work is done and re-exported here (and so as ``tl.<name>``).
"""
from __future__ import annotations

import functools
import inspect
import os
import sys

from . import checker, collector, cost as _cost, evaluate as _evaluate, parser, progress
from . import normalize  # tl.normalize.let_lift, ...: the passes one by one
from .codegen import api as _codegen
from .derive import api as _derive
from .derive.api import Certificate
from .derive import sparse as _sparse
from .derive.sparse import SparseJacobian
from .codegen.kernel import Kernel, SparseKernel
from .errors import ParseError, TensorLangError, TypeCheckError, UnsupportedError, user_traceback
from .nodes import Expr


# what each public call's arguments must be, by parameter name: (accepted types, how the message says it)
PROGRAM = ((Expr, SparseJacobian), "a program (an Expr, as tl.parse returns: tl.{call}(tl.parse(text), ...))")
SPARSE_CALLS = ("evaluate", "cost", "compile")   # the calls that take a sparse Jacobian as their program
TEXT = (str, "program text (a str)")
NAME = (str, "a str")
FLAG = (bool, "True or False")
ARGUMENTS = {
    "src": TEXT, "filename": NAME, "expr": PROGRAM, "target": NAME, "sanitize": FLAG, "native": FLAG,
    "name": NAME, "directory": ((str, os.PathLike), "a folder's path (a str or a pathlib.Path)"),
    "kernels": ((Kernel, Expr, dict, list, tuple), "a Kernel or program, or a dict or list of them"),
}


def _checked(fn):
    """``fn`` (or the function it wraps: ``functools.wraps``) with its arguments bound and checked against ``ARGUMENTS`` before it runs: a missing or
    unknown argument, or one of the wrong type, is a ``TypeCheckError`` naming the argument and the call."""
    signature = inspect.signature(fn)
    checked = [p for p in signature.parameters if p in ARGUMENTS]

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs).arguments
        except TypeError as exc:
            raise TypeCheckError(f"tl.{fn.__name__}: {exc}") from None
        for p in checked:
            if isinstance(bound.get(p), SparseJacobian) and fn.__name__ not in SPARSE_CALLS:
                raise TypeCheckError(f"tl.{fn.__name__}: {p} is a sparse Jacobian, a result that tl.evaluate, tl.compile "
                                     f"and tl.cost take; call tl.{fn.__name__} on the program it was derived from")
            if p in bound and not isinstance(bound[p], ARGUMENTS[p][0]):
                value = bound[p]
                raise TypeCheckError(f"tl.{fn.__name__}: {p} must be {ARGUMENTS[p][1].format(call=fn.__name__)}, "
                                     f"got {type(value).__name__} {_short(value)}")
        return fn(*args, **kwargs)

    return call


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _reported(fn):
    """``fn`` with its errors raised as the user's: a ``TensorLangError`` without the library's own
    frames in its traceback, a ``RecursionError`` (a program nested more deeply than the recursive
    passes can follow, e.g. thousands of chained ``+``) reported as an ``UnsupportedError``, and an
    integer longer than Python converts as a ``ParseError``; its arguments are checked first
    (``_checked``)."""
    checked = _checked(fn)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return checked(*args, **kwargs)
        except TensorLangError as err:
            raise err.with_traceback(user_traceback(err.__traceback__)) from None
        except RecursionError:
            raise UnsupportedError(
                f"tl.{fn.__name__}: the program is nested too deeply for Python's recursion limit "
                f"({sys.getrecursionlimit()}); a long chain of '+' or '*' can often be a sum over an index"
            ) from None
        except ValueError as exc:  # Python's limit on converting long integers (sys.set_int_max_str_digits)
            if not str(exc).startswith("Exceeds the limit"):
                raise
            raise ParseError(f"tl.{fn.__name__}: an integer has more than {sys.get_int_max_str_digits()} "
                             f"digits ({exc}); a real constant that large can be written 1e5000") from None

    return call


def _symbolic(fn):
    """``_reported(fn)`` run with the cycle collector paused, its time logged (``progress.call``): the calls that
    build programs and kernels."""

    @functools.wraps(fn)
    def call(*args, **kwargs):
        with collector.paused(), progress.call(f"tl.{fn.__name__}"):
            return fn(*args, **kwargs)

    return _reported(call)


parse = _reported(parser.parse)
check = _reported(checker.check)


def _evaluate_program(expr, **inputs):
    return _sparse.evaluate(expr, **inputs) if isinstance(expr, SparseJacobian) else _evaluate.evaluate(expr, **inputs)


def _cost_program(expr, **sizes_or_inputs):
    return _sparse.cost(expr, **sizes_or_inputs) if isinstance(expr, SparseJacobian) else _cost.cost(expr, **sizes_or_inputs)


def _compile_program(expr, target: str = "c", dtype: str = "float64", sanitize: bool = False):
    if isinstance(expr, SparseJacobian):
        return SparseKernel(expr, target=target, dtype=_codegen.dtype_name(dtype), sanitize=sanitize)
    return _codegen.compile(expr, target, dtype, sanitize)


_evaluate_program.__name__, _evaluate_program.__doc__ = "evaluate", _evaluate.evaluate.__doc__
_cost_program.__name__, _cost_program.__doc__ = "cost", _cost.cost.__doc__
_compile_program.__name__ = "compile"
_compile_program.__doc__ = _codegen.compile.__doc__ + """
    A sparse Jacobian (``tl.jacobian(..., sparse=True)``) gives a ``SparseKernel``, which returns a
    ``csr_array``."""
evaluate = _reported(_evaluate_program)
cost = _reported(_cost_program)
to_ssa = _symbolic(normalize.to_ssa)
derivative = _symbolic(_derive.derivative)
adjoint = _symbolic(_derive.adjoint)
grad = _symbolic(_derive.grad)
jacobian = _symbolic(_derive.jacobian)
hessian = _symbolic(_derive.hessian)
certify = _symbolic(_derive.certify)
simplify = _symbolic(_derive.simplify)
compile = _symbolic(_compile_program)  # noqa: A001 (tl.compile, as the API names it)
export = _symbolic(_codegen.export)

__all__ = [
    "Certificate", "adjoint", "certify", "check", "compile", "cost", "derivative", "evaluate", "export",
    "grad", "hessian", "jacobian", "normalize", "parse", "simplify", "to_ssa",
]
