"""The SSA AD layer (``tensorlang.ad``): reverse mode for Python functions, by source transformation.

Python source (``inspect`` + ``ast``) becomes a control-flow graph in SSA form (``lower``, ``ssa``);
the primal gets a pullback per call and a branch tag per join (``primal``), the adjoint mirrors the CFG
with loop values on a stack (``adjoint``), and both are emitted as Python source, compiled once per
function and argument kinds (``emit``).  Rules live apart from the core, in ``rules``.
"""
from .api import (checkpoint, code_adjoint, code_ir, code_recording, grad, gradient, hook, pullback, rule,
                  stop_gradient,
                  value_and_grad)
from .mixed import forwarddiff, hvp, jvp, jvp_rule, wirtinger
from .sparsity import hessian, jacobian
from .batching import vmap
from .registry import primitive
from .source import code_source, define
from . import threads  # noqa: F401,E402  (rules for ThreadPoolExecutor and threading.Thread)
from . import over_forward  # noqa: F401,E402  (the rules of ad.jvp itself: reverse and forward over forward)

__all__ = [
    "gradient", "grad", "value_and_grad", "pullback", "rule", "code_ir", "code_adjoint", "code_recording", "code_source", "define",
    "checkpoint", "hook", "stop_gradient", "jvp", "jacobian", "hessian", "hvp", "forwarddiff", "wirtinger", "jvp_rule",
    "primitive", "vmap",
]
