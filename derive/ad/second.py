"""Forward over reverse: the tangent of a pullback, so that forward mode can run generated reverse code
(``ad.hessian``, ``ad.hvp``).

Generated gradient code calls reverse rules, ``y, back = rule(*args)``, and later ``back(dy)``.  Under
forward mode the pair gets a tangent ``(ty, tback)``: ``ty`` from the primitive's forward rule, and
``tback`` the derivative of ``x -> back_x(dy)`` along the tangents, a ``PullbackTangent``.  Calling
``back`` with tangent ``tback`` then gives ``back(tdy) + tback(dy)`` (``back`` is linear in ``dy``).

``tback`` comes from the same data the first-order rules are made of:

* linear primitives (sums, reshapes, indexing, ``+``): the pullback does not depend on the primal
  values, so ``tback`` is zero;
* elementwise NumPy functions and operators: their partial derivatives are Python functions
  (``rules.numpy.PARTIALS_UNARY``/``PARTIALS_BINARY``, ``rules.operators.NUMERIC_GRADS``), whose
  own forward mode gives the derivative of the pullback;
* bilinear primitives (``@``, ``dot``, ``outer``, ``*``): the pullback at ``(a, tb)`` and ``(ta, b)``;
* rules that declare their pullback (``runtime.LINEAR``/``MULTILINEAR``, see ``nested``): the function
  along the tangents, and zero (linear) or the pullback with one operand replaced by its tangent
  (multilinear);
* any other rule written in Python: the forward mode of its own code, keyword arguments bound to its
  parameters; its pullback is a closure, and the tangent of what it captured gives ``tback``.

Complex values follow the rules' convention (``rules.complexes``): a holomorphic primitive's pullback is
``conj(back(conj(dy)))``, so the cross term made from its real partials is wrapped the same way; ``abs`` of a
complex number has a cross term of its own, other rules go through their code.

Anything else raises ``UnsupportedError`` naming the function called.  Pullbacks through mutation (the box
store) get the store's tangent, a second store on which the store's helpers and the box rules' pullbacks run
again with the tangents (below).
"""
from __future__ import annotations

import operator
import types

import numpy as np

from ...errors import BeyondOrder, UnsupportedError
from .rules import structures
from .rules.complexes import HOLOMORPHIC, holomorphic
from .rules.jvp import operand_tangent, write_item
from .rules.numpy import PARTIALS_BINARY, PARTIALS_UNARY, operand, product
from .rules.scatter import IN_PLACE
from .rules.operators import BINOPS, NUMERIC_GRADS, PYOP, UNARY, is_numeric
from .context import Store, current, within
from .nested import positional, multilinear_along
from .registry import CROSS, LINEAR_PULLBACK, METHOD_PAIRS, PAIRS, rule_owner  # noqa: F401  (read through here)
from .runtime import (BOX_LOCK, HELPERS, LINEAR, MULTILINEAR, RULES, acc, asarray, check_keywords, is_complex,
                      unbroadcast)
from .tangent import (JVP, JVP_RULES, REVERSE_RULE_JVP, JVPkw, PullbackTangent, active, code_jvp, mutable,
                      numpy_filled, pullback_tangent, write_attr, zero)


ZERO = PullbackTangent(lambda dy: None)   # the tangent of a pullback that does not depend on the primal
# the tangent of a pair ``(y, back)`` made from values without tangents: ``back`` called with a cotangent
# that has one gives ``back(tdy)`` alone (its own code is not differentiated)
NO_TANGENT = (None, ZERO)


# -- the derivative of a pullback, per primitive ---------------------------------------------------------------------
def _partials_unary(f, d):
    mul = product(f)

    def cross(args, ts, y, ty):
        (x, *_), t = args, ts[0]
        td = JVP(d, None, (x, y), (t, ty))[1]
        return None if td is None else (lambda dy: (mul(dy, td),))
    return cross


def _partials_binary(f, d):
    mul = product(f)

    def cross(args, ts, y, ty):
        a, b = args
        tp = JVP(d, None, (a, b, y), (*ts, ty))[1]
        if tp is None:
            return None
        return lambda dy: tuple(None if t is None else unbroadcast(mul(dy, t), x) for t, x in zip(tp, (a, b)))
    return cross


def _partials_operator(grads):
    def cross(args, ts, y, ty):
        a, b = args

        def apply(dy):   # (dy's tangent an explicit zero: not the one a write into dy registered, ``call_pullback``)
            tg = JVP(grads, None, (dy, a, b, y), (zero(dy), *ts, ty))[1]
            return (None, None) if tg is None else tuple(unbroadcast(t, x) for t, x in zip(tg, (a, b)))
        return apply
    return cross


def _bilinear(rule):
    from .rules.jvp import operand_tangent
    def cross(args, ts, y, ty):
        a, b = args
        ta, tb = map(operand_tangent, ts, args)

        def apply(dy):
            ga = None if tb is None else rule(a, tb)[1](dy)[0]
            gb = None if ta is None else rule(ta, b)[1](dy)[1]
            return ga, gb
        return apply
    return cross




def _register():
    CROSS.update({f: _partials_unary(f, d) for f, d in PARTIALS_UNARY.items()})
    CROSS.update({f: _partials_binary(f, d) for f, d in PARTIALS_BINARY.items()})
    CROSS.update({PYOP[op]: _partials_operator(g) for op, g in NUMERIC_GRADS.items() if op not in ("+", "-")})
    for f in (operator.add, operator.sub, operator.neg, operator.pos, np.sum, np.mean, np.reshape, np.transpose,
              np.ravel, np.squeeze, np.expand_dims, np.concatenate, np.stack, np.add, np.subtract, np.negative,
              np.positive, np.array, np.asarray, structures.getitem, structures.getattr_, getattr, np.real,
              np.imag, np.conj, sum, list, tuple, float, max, min, sorted):
        CROSS[f] = LINEAR_PULLBACK
    CROSS.update({np.matmul: _bilinear(RULES[np.matmul]), operator.matmul: _bilinear(BINOPS["@"]),
                  np.dot: _bilinear(RULES[np.dot]), np.outer: _bilinear(RULES[np.outer]),
                  np.multiply: _bilinear(RULES[np.multiply])})


def _complex_abs(args, ts, y, ty):
    """``|z|``'s pullback is ``dy * z / |z|``: its cross term ``dy * d(z / |z|)`` (NumPy's sign of a complex
    number is ``z / |z|``, not constant as a real sign is)."""
    z, t = asarray(args[0]), ts[0]   # (a recording's stand-in stays one)
    if t is None:
        return None
    r = np.where(y == 0, 1.0, y)
    d = np.where(y == 0, 0, t / r - z * np.real(np.conj(z) * t) / r ** 3)[()]
    return lambda dy: (dy * d,)


_register()
_OPERATORS = {*PYOP.values(), operator.neg, operator.pos}
# cross terms right for complex values as they are: a bilinear primitive's is its (wrapped) rule's pullback
_COMPLEX_READY = {CROSS[f] for f in (np.matmul, operator.matmul, np.dot, np.outer, np.multiply)}
_COMPLEX_READY.add(_complex_abs)
# complex arguments: the cross terms of primitives that are not holomorphic, where the real ones do not hold
COMPLEX_CROSS = {**CROSS, np.abs: _complex_abs, np.absolute: _complex_abs, abs: _complex_abs}


def pair_jvp(f, rule, args, ts, kw=None, tkw=None, name=None):
    """``((y, back), (ty, tback))`` for ``rule(*args, **kw) = (y, back)``, the reverse rule of primitive ``f``
    (None for a method; ``name`` names it then), ``tkw`` the keyword arguments' tangents."""
    kw, tkw = kw or {}, tkw or {}
    ts = numpy_filled(f, ts, args)
    if kw:
        check_keywords(f if f is not None else name, rule, tuple(kw))
    if "key" in tkw:   # a key function only orders (sorted, max, min): no derivative flows through it
        tkw = {**tkw, "key": None}
    name = name or called_name(f)
    if all(t is None for t in (*ts, *tkw.values())):
        return rule(*args, **kw), NO_TANGENT
    if f in PAIRS and not kw:
        return PAIRS[f](args, ts)
    if f in PARTIALS_UNARY or f in PARTIALS_BINARY:   # (a list's or tuple's: the array it stands for)
        args, ts = tuple(map(operand, args)), tuple(map(operand_tangent, ts, args))
    bound = positional(rule, args, kw) if (f in PAIRS and kw or any(map(active, tkw.values()))) \
        and type(rule) is types.FunctionType else None
    if bound is not None:   # a differentiable keyword argument (np.stack(arrays=...)), or keyword arguments of a
        # function with a pair (np.put(a, i, v, mode=...)): called positionally
        return pair_jvp(f, rule, bound[0], _placed(ts, tkw, bound), name=name)
    cplx = any(map(is_complex, args))
    how = (COMPLEX_CROSS if cplx else CROSS).get(f) if f is not None else None
    if f in _OPERATORS and not all(map(is_numeric, args)):
        how = None   # sequences, user types' __add__ ...: the operator rule's code
    if f is structures.getattr_ and (structures.getter(args[0], args[1]) is not None
                                     or structures.computed_attribute(args[0], args[1])):
        how = None   # a property, a class's __getattr__: its code (the rule calls J of it), whose pullback is not linear
    if how is None or kw and how is not LINEAR_PULLBACK or cplx and how not in _COMPLEX_READY and f not in HOLOMORPHIC \
            and how is not LINEAR_PULLBACK:
        return _declared_or_code(name, rule, args, ts, kw, tkw)
    y, back = _called(name, rule, args, kw, tkw)
    if f in _STRUCTURAL:
        ty = _STRUCTURAL[f](args, ts)
    else:
        ty = JVPkw(tuple(kw), f, None, (*args, *kw.values()), (*ts, *(None,) * len(kw)))[1] if kw \
            else JVP(f, None, args, ts)[1]
    cross = None if how is LINEAR_PULLBACK else how(args, ts, y, ty)
    if cross is not None and how not in _COMPLEX_READY and (cplx or is_complex(y)):
        cross = holomorphic(cross, args)   # the plain partials' cross term, in the convention as the rule is
    return (y, back), (ty, ZERO if cross is None else PullbackTangent(cross))


def called_name(f):
    """How an error names a function the user called: ``numpy.roll``, ``math.exp``, or its qualified name."""
    module = getattr(f, "__module__", None) or ""
    qualname = getattr(f, "__qualname__", None) or f"a {type(f).__qualname__} object"
    return f"{module}.{qualname}" if module.split(".")[0] in ("numpy", "math", "builtins") else qualname


def _called(name, rule, args, kw, tkw):
    """``rule(*args, **kw)`` for a rule whose keyword arguments have no tangents (``tkw``)."""
    if any(map(active, tkw.values())):
        raise BeyondOrder(f"forward over reverse (ad.hessian, ad.hvp) through {name} with a differentiable "
                          f"keyword argument is not supported")
    return rule(*args, **kw)


def _declared_or_code(name, rule, args, ts, kw, tkw):
    """``pair_jvp`` for a rule that declares its pullback (``LINEAR``/``MULTILINEAR``) or whose own code is
    differentiated by forward mode (its pullback is then a closure, whose tangent comes with it)."""
    if rule in LINEAR and getattr(LINEAR[rule], "keyword_tangents", False):
        y, back = rule(*args, **kw)
        return (y, back), (LINEAR[rule](args, kw, ts, tkw), ZERO)
    if rule in LINEAR or rule in MULTILINEAR:
        y, back = _called(name, rule, args, kw, tkw)
        if rule in LINEAR:
            return (y, back), (LINEAR[rule](args, kw, ts), ZERO)
        ty = multilinear_along(rule, args, kw, ts, None)[0]
        return (y, back), (ty, PullbackTangent(lambda dy: multilinear_along(rule, args, kw, ts, dy)[1]))
    bound = positional(rule, args, kw) if type(rule) is types.FunctionType else None
    if bound is None:
        raise BeyondOrder(f"forward over reverse (ad.hessian, ad.hvp) through {name} is not supported: "
                          f"its pullback has no forward-mode derivative")
    try:
        (y, back), tpair = code_jvp(rule, None, bound[0], _placed(ts, tkw, bound))
    except UnsupportedError as e:
        raise BeyondOrder(f"forward over reverse (ad.hessian, ad.hvp) through {name} is not supported: "
                          f"its rule is outside what forward mode differentiates") from e
    ty, tb = (None, None) if tpair is None else tpair
    return (y, back), (ty, pullback_tangent(back, tb) or ZERO)


def _placed(ts, tkw, bound):
    """The tangents of a call's positional and keyword arguments at the places ``nested.positional`` bound
    them to (None for the defaults between)."""
    full, where = bound
    tfull = [None] * len(full)
    for t, i in zip((*ts, *tkw.values()), where):
        tfull[i] = t
    return tuple(tfull)


def _structural_getitem(args, ts):
    from .rules.jvp import getitem
    return getitem(args[0], ts[0], args[1], ts[1])[1]


def _structural_getattr(args, ts):
    from .rules.jvp import getattr_
    return getattr_(args[0], ts[0], args[1])[1]


_STRUCTURAL = {structures.getitem: _structural_getitem, structures.getattr_: _structural_getattr}


# -- rules that are reverse rules themselves (called from generated reverse code) ---------------------------------------
# rules that generated code calls for primitives it does not name (operators, indexing)
_OPERATOR_OWNERS = {id(UNARY["-"]): operator.neg, id(UNARY["+"]): operator.pos,
                    id(structures.getitem): structures.getitem, id(structures.getattr_): structures.getattr_}


def reverse_rule_owner(r):
    """The primitive (a function) whose reverse rule ``r`` is (None if it is not one)."""
    if id(r) in _OPERATOR_OWNERS:
        return _OPERATOR_OWNERS[id(r)]
    record = rule_owner(r)
    return None if record is None or isinstance(record.key, tuple) else record.key


@REVERSE_RULE_JVP.provide
def reverse_rule_jvp(r, args, ts):
    """The JVP of a call of ``r`` when it is a primitive's reverse rule (``pair_jvp``), else None."""
    owner = reverse_rule_owner(r)
    return None if owner is None else pair_jvp(owner, r, args, ts)



# -- the box store under forward mode -------------------------------------------------------------------------------
# Reverse code moves the gradients of objects written to (boxes) through the box store (``runtime``): the
# helpers ``_ad_acci``/``_ad_take`` add into it and take out of it, and the pullbacks of the box rules (``x[i] =
# v``, ``o.a = v``, ``append`` ...) read and clear the slots they wrote.  All of these are linear in their
# gradient arguments and the store's gradients together, and depend on the primal only through indices and
# shapes; so the store's tangent is a second store with the same boxes, on which each of them runs again with
# the tangents.
def on_tangent_store(f, *args):
    """``f(*args)`` with the tangent store of the current box store (made, empty, on first use) as the box
    store."""
    context = current()
    s = context.store
    if s.tangent is None:
        with BOX_LOCK:   # (pullbacks of work that ran in threads run in parallel)
            if s.tangent is None:
                s.tangent = Store(s.boxes)
    return within(context.but(store=s.tangent), f, *args)


def with_stores(run):
    """``run()`` with a fresh box store and its tangent store (dropped after)."""
    return within(current().but(store=Store()), run)


def _on_both(f):
    """The JVP of a helper linear in its gradient arguments (all but the first) and the store."""
    return lambda args, ts: (f(*args), on_tangent_store(f, args[0], *ts[1:]))


def store_linear(back):
    """The tangent of a box rule's pullback: the pullback itself, on the tangent store, along ``tdy``."""
    return PullbackTangent(None, lambda dy, tdy: (back(dy), on_tangent_store(back, tdy)))


def box_write(write, rule):
    """The JVP of a box rule: ``write(args, ts)`` writes the tangent into the object's own (``rules.jvp``),
    then ``rule(*args)`` writes the object and registers it as a box."""
    def jvp(args, ts):
        ty = write(args, ts)
        y, back = rule(*args)
        return (y, back), (ty, store_linear(back))
    return jvp


def _write_item(args, ts):
    obj, idx, val = args
    if type(obj) is np.flatiter and obj.base.flags.c_contiguous:   # x.flat[i] = v, as the box rule writes it
        obj, ts = obj.base.reshape(-1), (None if ts[0] is None else np.reshape(ts[0].base, -1), *ts[1:])
    if type(obj) not in (list, dict, np.ndarray):
        raise BeyondOrder(f"forward over reverse (ad.hessian, ad.hvp) through an item write into "
                          f"{type(obj).__qualname__} (its __setitem__) is not supported")
    write_item(obj, ts[0], idx, val, ts[2])


def _scatter_pair(f):
    """The pair of ``f(a, index, values, ...)``, which writes ``values`` into ``a`` in place, linearly in
    ``a`` and ``values`` together (``np.add.at``, ``np.put`` ...): the same call writes the tangent of
    ``values`` into ``a``'s tangent, and the pullback, a box rule's, runs again on the tangent store."""
    def write(args, ts):
        a, index, values, *rest = args
        f(mutable(a, ts[0]), index, 0.0 if ts[2] is None else ts[2], *rest)
    return box_write(write, RULES[f])


PAIRS.update({f: _scatter_pair(f) for f in IN_PLACE})
_WRITE_ATTR = box_write(lambda a, t: (write_attr(a[0], t[0], a[1], t[2]), None)[1], HELPERS["_ad_setattr"])


def _setattr_pair(args, ts):
    """The pair of ``obj.name = val``: the tangent written into ``obj``'s as the value into ``obj``, by the box
    rules; but a property's setter is code (the rule calls J of it), differentiated by forward mode as it is."""
    obj, name = args[0], args[1]
    static = getattr(type(obj), name, None)
    if isinstance(static, property) and isinstance(static.fset, types.FunctionType):
        return _declared_or_code(f"the setter of {type(obj).__qualname__}.{name}", HELPERS["_ad_setattr"], args, ts,
                                 {}, {})
    return _WRITE_ATTR(args, ts)


JVP_RULES.update({
    HELPERS["_ad_take"]: _on_both(HELPERS["_ad_take"]), HELPERS["_ad_takef"]: _on_both(HELPERS["_ad_takef"]),
    HELPERS["_ad_takei"]: _on_both(HELPERS["_ad_takei"]),
    HELPERS["_ad_acci"]: _on_both(HELPERS["_ad_acci"]),
    HELPERS["_ad_setitem"]: box_write(_write_item, HELPERS["_ad_setitem"]),
    HELPERS["_ad_setattr"]: _setattr_pair,
})
