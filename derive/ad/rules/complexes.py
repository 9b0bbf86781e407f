"""Complex numbers in Zygote's convention: the gradient of a real loss ``L`` in ``z = x + iy`` is
``dL/dx + i dL/dy``.  With the real inner product ``<a, b> = Re(conj(a) b)`` a pullback is the adjoint of
the derivative, so for a complex-differentiable (holomorphic) primitive with derivative ``f'`` it is
``dy * conj(f'(z))``: the plain rules' pullback (``dy * f'``, written for reals) conjugated on both sides,
``conj(back(conj(dy)))`` (``holomorphic``).  The gradient of a real argument is the real part (a real
input mixed with complex values gets a real gradient).  Functions that are not holomorphic (``abs``,
``real``, ``imag``, ``conj``, ``angle``) have rules of their own, written in the convention directly.
"""
from __future__ import annotations

import cmath
import inspect
import itertools
import operator

import numpy as np

from ..runtime import METHOD_RULES, NONDIFF, RULES, is_complex
from ..source import generated


def project(g, x):
    """Gradient ``g`` of argument ``x``: its real part where ``x`` is real."""
    if g is None or not is_complex(g) or is_complex(x) or isinstance(x, (list, tuple)):
        return g
    return g.real if type(g) is complex or isinstance(g, np.complexfloating) else np.real(g)


def holomorphic(back, args):
    """Zygote's pullback of a holomorphic primitive from its plain pullback ``back`` (``dy * f'``)."""
    def zback(dy):
        g = back(np.conj(dy) if dy is not None else None)
        return tuple(None if gi is None else project(np.conj(gi), x) for gi, x in zip(g, args))
    return zback


def _real(x):
    return np.real(x), lambda dy: (project(dy, x) if not is_complex(x) else dy + 0j,)


def _imag(x):
    return np.imag(x), lambda dy: (None if not is_complex(x) else 1j * dy,)


def _conj(x):
    return np.conj(x), lambda dy: (project(np.conj(dy), x),)


def _angle(x, deg=False):
    y = np.angle(x, deg)
    scale = 180 / np.pi if deg else 1.0
    # angle = atan2(Im z, Re z): d/dx = -Im z / |z|^2, d/dy = Re z / |z|^2, so the gradient is i z / |z|^2, that
    # is i / conj(z) (written so: differentiated again, |z|^2 of a complex z took a third derivative wrong)
    return y, lambda dy: (project(scale * dy * 1j / np.conj(x), x), None)


def _sign(x):
    """``np.sign``: a step of a real value (no derivative), ``z / |z|`` of a complex one, whose derivative
    (``sign_tangent``) is self-adjoint, so that it is its pullback too."""
    y = np.sign(x)
    if not is_complex(x):
        return y, lambda dy: (None,)
    return y, lambda dy: (sign_tangent(x, dy),)


def sign_tangent(x, t):
    """The tangent of ``np.sign(x)`` along ``t``: 0 for a real x, ``t / r - z Re(conj(z) t) / r^3`` (``r =
    |z|``; 0 at 0, where sign has no derivative)."""
    if not is_complex(x):
        return None
    r = np.abs(x)
    r = np.where(r == 0, np.inf, r)
    return t / r - x * np.real(np.conj(x) * t) / r ** 3


def _cmath(f, d):
    """A ``cmath`` function with complex derivative ``d(z, w)`` (``w = f(z)``), in the convention."""
    def rule(z):
        w = f(z)
        return w, lambda dy: (project(dy * np.conj(d(z, w)), z),)
    return rule


CMATH = {
    cmath.exp: lambda z, w: w, cmath.log: lambda z, w: 1 / z, cmath.sqrt: lambda z, w: 0.5 / w,
    cmath.sin: lambda z, w: cmath.cos(z), cmath.cos: lambda z, w: -cmath.sin(z), cmath.tanh: lambda z, w: 1 - w * w,
    cmath.sinh: lambda z, w: cmath.cosh(z), cmath.cosh: lambda z, w: cmath.sinh(z), cmath.tan: lambda z, w: 1 + w * w,
}


def _complex_ctor(re=0.0, im=0.0):
    return complex(re, im), lambda dy: (project(dy, re), project(-1j * dy, im) if dy is not None else None)


RULES.update({np.real: _real, np.imag: _imag, np.conj: _conj, np.conjugate: _conj, np.angle: _angle,
              complex: _complex_ctor, np.sign: _sign})
RULES.update({f: _cmath(f, d) for f, d in CMATH.items()})
METHOD_RULES.update({(t, name): rule for t in (np.ndarray, complex) for name, rule in
                     (("conj", _conj), ("conjugate", _conj))})


def zygote(rule):
    """A holomorphic primitive's rule in the convention: its pullback wrapped by ``holomorphic`` when the
    result is complex.  The wrapper has the rule's own signature and its source is kept, so that nested
    derivatives can transform it as they transform the rule."""
    sig = inspect.signature(rule)
    params, call = [], []
    for p in sig.parameters.values():
        star = "*" if p.kind is p.VAR_POSITIONAL else "**" if p.kind is p.VAR_KEYWORD else ""
        params.append(star + p.name)
        call.append(star + p.name if star or p.kind is not p.KEYWORD_ONLY else f"{p.name}={p.name}")
    # the arguments the gradients are of, in order (``np.einsum(spec, *operands)``'s operands too)
    first = [p.name if p.kind is p.POSITIONAL_OR_KEYWORD else "*" + p.name for p in sig.parameters.values()
             if p.kind in (p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
    name = f"zygote_{getattr(rule, '__name__', 'rule')}"
    src = (f"def {name}({', '.join(params)}):\n"
           f"    y, back = rule({', '.join(call)})\n"
           f"    return y, (holomorphic(back, ({''.join(a + ', ' for a in first)})) if is_complex(y) else back)\n")
    z = generated(name, src, f"<tensorlang.ad complex convention {name} {next(_COUNT)}>",
                  {"rule": rule, "holomorphic": holomorphic, "is_complex": is_complex})
    z.__defaults__, z.__kwdefaults__ = rule.__defaults__, rule.__kwdefaults__
    return z


_COUNT = itertools.count()


HOLOMORPHIC: set = set()   # the primitives whose rules ``zygote`` wraps


def _wrap_holomorphic():
    from . import numpy as rnp
    from . import operators
    for f in [*rnp.ELEMENTWISE_UNARY, *rnp.ELEMENTWISE_BINARY, np.dot, np.matmul, np.outer, np.tensordot,
              np.linalg.solve, np.linalg.inv, np.prod, np.cumprod, np.kron, np.cross, np.linalg.det]:
        if f is not np.abs and f in RULES:
            RULES[f] = zygote(RULES[f])
            HOLOMORPHIC.add(f)
    for name in ("prod", "cumprod"):   # (the methods' rules are the functions', wrapped as they are)
        METHOD_RULES[(np.ndarray, name)] = zygote(METHOD_RULES[(np.ndarray, name)])
    for op, name in operators.DUNDER.items():   # a op b, then a op= b made again over the wrapped a op b
        operators.BINOPS[op] = RULES[operators.PYOP[op]] = zygote(operators.BINOPS[op])
        operators.BINOPS[op + "="] = RULES[getattr(operator, f"i{name}")] = operators.make_inplace(op)
        HOLOMORPHIC.add(operators.PYOP[op])
    operators.UNARY["-"] = RULES[operator.neg] = zygote(operators.UNARY["-"])
    HOLOMORPHIC.add(operator.neg)
    METHOD_RULES[(np.ndarray, "dot")] = zygote(METHOD_RULES[(np.ndarray, "dot")])
    # the strong product of a gradient and a partial, which a higher derivative differentiates
    RULES[operators.times] = zygote(RULES[operators.times])
    HOLOMORPHIC.add(operators.times)
    NONDIFF.add(is_complex)


_wrap_holomorphic()
