"""The derivatives of the scalar functions, written once: the table that the tensor language's built-in
black boxes (``tensorlang/functions.py``) and ``tensorlang.ad``'s rules for numbers and arrays
(``derive/ad/rules/scalar.py``, ``numpy.py``, and the forward-mode rules made from them) all read.

A derivative is the gradient template of each argument, a Python expression: ``{dy}`` the incoming
gradient, ``{0}``, ``{1}`` the arguments, ``{y}`` the function's result, ``{m}`` the module of the
elementary functions (``math`` for numbers, NumPy for arrays, SymPy for the tensor language).  Each reader
takes the entries of the functions it has, by name (``math.atan``, ``np.arctan`` and the language's
``atan`` all read ``"atan"``).

* ``unbounded``: the arguments whose partial derivative can be infinite or undefined where the function
  is finite (``log`` and ``sqrt`` at 0, a quotient by 0).  For arrays their gradient is the strong product
  ``_ad_times({dy}, partial)``, exactly 0 where either factor is, so that a branch that ``np.where`` or
  ``maximum`` leaves out contributes an exact 0.
* A function whose derivative is piecewise (``abs``, ``max``, ``pow`` at 0) has its templates written for
  each representation, ``number`` (Python conditionals; the power's partial below an exponent of 1 through
  ``_ad_powd``, where a Python float power would raise) and ``array`` (the ``_ad_*`` helpers of
  ``tensorlang.ad``'s generated code); the tensor language takes those from the SymPy body of the
  function.  ``array`` alone marks a function ``tensorlang.ad`` has only for arrays (``sinc``).
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ScalarDerivative", "SCALAR_DERIVATIVES", "partial_template"]


@dataclass(frozen=True)
class ScalarDerivative:
    """The derivative of one scalar function (see the module docstring)."""

    name: str
    grads: tuple[str, ...] = ()
    unbounded: tuple[int, ...] = ()
    number: tuple[str, ...] | None = None
    array: tuple[str, ...] | None = None

    @property
    def smooth(self) -> bool:
        """Whether one template serves every representation (no piecewise forms)."""
        return self.number is None and self.array is None

    def for_numbers(self) -> tuple[str, ...]:
        """The gradient templates on Python numbers (``{m}`` the ``math`` module)."""
        return self.number if self.number is not None else self.grads

    def for_arrays(self) -> tuple[str, ...]:
        """The gradient templates on arrays (``{np}`` NumPy), strong products where a partial is unbounded."""
        if self.array is not None:
            return tuple(t.replace("{m}", "{np}") for t in self.array)
        return tuple((f"_ad_times({{dy}}, {partial_template(t)})" if k in self.unbounded else t)
                     .replace("{m}", "{np}") for k, t in enumerate(self.grads))

    def partials(self) -> tuple[str, ...]:
        """The partial derivatives (the gradient templates with ``{dy}`` taken out) of a smooth function."""
        return tuple(partial_template(t) for t in self.grads)


def partial_template(template: str) -> str:
    """The partial derivative in a gradient template, as a template: ``"{dy} * {m}.cos({0})"`` gives
    ``"{m}.cos({0})"``, ``"-{dy} / {1}"`` gives ``"-1 / {1}"``, ``"_ad_times({dy}, 1 / {0})"`` gives
    ``"1 / {0}"``."""
    if template.startswith("_ad_times({dy}, ") and template.endswith(")"):
        return template[len("_ad_times({dy}, "):-1]
    for head, tail in (("{dy} * ", ""), ("-{dy} * ", "-"), ("{dy} / ", "1 / "), ("-{dy} / ", "-1 / ")):
        if template.startswith(head):
            return tail + template[len(head):]
    if template in ("{dy}", "-{dy}"):
        return template.replace("{dy}", "1")
    raise ValueError(f"not a gradient template: {template}")


_SIGN = "({dy} if {0} > 0 else -{dy} if {0} < 0 else 0)"
# the doubles nearest log(2), log(10) and 2 / sqrt(pi)
_LN2, _LN10, _TWO_OVER_SQRT_PI = "0.6931471805599453", "2.302585092994046", "1.1283791670955126"


def _entry(name, *grads, unbounded=(), number=None, array=None) -> ScalarDerivative:
    return ScalarDerivative(name, tuple(grads), tuple(unbounded), number and tuple(number), array and tuple(array))


SCALAR_DERIVATIVES: dict[str, ScalarDerivative] = {e.name: e for e in [
    # one argument
    _entry("exp", "{dy} * {y}"),
    _entry("expm1", "{dy} * ({y} + 1)"),
    _entry("exp2", f"{{dy}} * {{y}} * {_LN2}"),
    _entry("log", "{dy} / {0}", unbounded=(0,)),
    _entry("log1p", "{dy} / (1 + {0})", unbounded=(0,)),
    _entry("log2", f"{{dy}} / ({{0}} * {_LN2})", unbounded=(0,)),
    _entry("log10", f"{{dy}} / ({{0}} * {_LN10})", unbounded=(0,)),
    _entry("sqrt", "{dy} / (2 * {y})", unbounded=(0,)),
    _entry("cbrt", "{dy} / (3 * {y} * {y})", unbounded=(0,)),
    _entry("recip", "-{dy} * {y} * {y}", unbounded=(0,)),
    _entry("square", "{dy} * 2 * {0}"),
    _entry("sin", "{dy} * {m}.cos({0})"),
    _entry("cos", "-{dy} * {m}.sin({0})"),
    _entry("tan", "{dy} * (1 + {y} * {y})"),
    _entry("asin", "{dy} / {m}.sqrt(1 - {0} * {0})", unbounded=(0,)),
    _entry("acos", "-{dy} / {m}.sqrt(1 - {0} * {0})", unbounded=(0,)),
    _entry("atan", "{dy} / (1 + {0} * {0})"),
    _entry("sinh", "{dy} * {m}.cosh({0})"),
    _entry("cosh", "{dy} * {m}.sinh({0})"),
    _entry("tanh", "{dy} * (1 - {y} * {y})"),
    _entry("asinh", "{dy} / {m}.sqrt({0} * {0} + 1)"),
    _entry("acosh", "{dy} / {m}.sqrt({0} * {0} - 1)", unbounded=(0,)),
    _entry("atanh", "{dy} / (1 - {0} * {0})", unbounded=(0,)),
    _entry("erf", f"{{dy}} * {_TWO_OVER_SQRT_PI} * {{m}}.exp(-{{0}} * {{0}})"),
    _entry("erfc", f"-{{dy}} * {_TWO_OVER_SQRT_PI} * {{m}}.exp(-{{0}} * {{0}})"),
    _entry("expit", "{dy} * {y} * (1 - {y})"),
    _entry("radians", "{dy} * ({m}.pi / 180)"),
    _entry("degrees", "{dy} * (180 / {m}.pi)"),
    _entry("positive", "{dy}"),
    _entry("negative", "-{dy}"),
    _entry("float", "{dy}"),
    _entry("abs", number=[_SIGN], array=["{dy} * {m}.sign({0})"]),
    _entry("sinc", array=["{dy} * _ad_sinc_d({0}, {y})"]),
    _entry("nan_to_num", array=["{dy} * {m}.isfinite({0})"]),
    # two arguments
    _entry("add", "{dy}", "{dy}"),
    _entry("subtract", "{dy}", "-{dy}"),
    _entry("multiply", "{dy} * {1}", "{dy} * {0}"),
    _entry("divide", "{dy} / {1}", "-{dy} * {y} / {1}", unbounded=(0, 1)),
    _entry("mod", "{dy}", "-{dy} * ({0} // {1})"),
    _entry("atan2", "{dy} * {1} / ({0} * {0} + {1} * {1})", "-{dy} * {0} / ({0} * {0} + {1} * {1})",
           unbounded=(0, 1)),
    _entry("hypot", "{dy} * {0} / {y}", "{dy} * {1} / {y}", unbounded=(0, 1)),
    _entry("logaddexp", "{dy} * {m}.exp({0} - {y})", "{dy} * {m}.exp({1} - {y})"),
    _entry("logaddexp2", "{dy} * {m}.exp2({0} - {y})", "{dy} * {m}.exp2({1} - {y})"),
    # (at 0: 0 for x ** 0, inf where the derivative is infinite, as NumPy's float gives it: 0 ** 0.5)
    _entry("pow", number=["({dy} * {1} * {0} ** ({1} - 1) if {1} >= 1 else _ad_times({dy}, _ad_powd({0}, {1})) "
                          "if {0} != 0 else 0 * {dy} if {1} == 0 else {dy} * {m}.inf)", "({dy} * {y} * {m}.log({0}) if {0} > 0 else 0)"],
           array=["_ad_times({dy}, _ad_powd({0}, {1}))", "_ad_times({dy}, {y} * _ad_logbase({0}))"]),
    # ties: the first argument's (max(a, b) is a where a >= b)
    _entry("max", number=["({dy} if {0} >= {1} else 0)", "(0 if {0} >= {1} else {dy})"],
           array=["_ad_times({dy}, 1 - _ad_gt({1}, {0}))", "_ad_times({dy}, _ad_gt({1}, {0}))"]),
    _entry("min", number=["({dy} if {0} <= {1} else 0)", "(0 if {0} <= {1} else {dy})"],
           array=["_ad_times({dy}, 1 - _ad_gt({0}, {1}))", "_ad_times({dy}, _ad_gt({0}, {1}))"]),
    _entry("fmod", array=["{dy}", "-{dy} * {m}.trunc({m}.divide({0}, {1}))"]),
]}
