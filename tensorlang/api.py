"""The public API of LANGUAGE.md section 2: the one module that joins the language core and the passes.

Each call is defined where its work is done and re-exported here (and so as ``tl.<name>``).
"""
from __future__ import annotations

from . import normalize  # tl.normalize.let_lift, ...: the passes one by one
from .checker import check
from .codegen.api import compile, export  # noqa: A004 (tl.compile, as LANGUAGE.md names it)
from .cost import cost
from .derive.api import Certificate, adjoint, certify, derivative, grad, hessian, jacobian, simplify
from .evaluate import evaluate
from .normalize import to_ssa
from .parser import parse

__all__ = [
    "Certificate", "adjoint", "certify", "check", "compile", "cost", "derivative", "evaluate", "export",
    "grad", "hessian", "jacobian", "normalize", "parse", "simplify", "to_ssa",
]
