"""Second differentiation through the box store: the gradient code of a function that writes (``append``,
``pop``, ``insert``, ``extend``, ``update``, ``x[i] = v``, ``o.a = v``) differentiated again
(``ad.grad(ad.grad(f))``, ``ad.gradient`` of a function that calls ``ad.gradient``).

The gradient code of f keeps the gradients of the objects f writes to in a box store (``runtime``): added
by ``acc_into``, handed out by ``take`` where the object was made, and moved by the pullbacks of the writes
(``rules.structures``: an appended item's gradient is cut out of the list's, a popped one's put back, a
written slot's cleared).  Differentiated again, each level keeps its own state:

* the inner store, used by the gradient code being differentiated: each nested gradient has a fresh one;
* the outer store, of the differentiation around it: the objects f writes to are boxes there too, since
  f's writes run in the function being differentiated; their pullbacks there are the same write pullbacks,
  run on the outer store, and move the outer gradients of the values written;
* the adjoint of the inner store: the outer cotangent of each gradient the inner store holds, under the
  same key.  Every operation on the inner store is linear, and its transpose acts on the adjoint:
  ``take`` hands a gradient out (its transpose sets the entry), ``acc_into`` adds into one (its
  transpose reads the entry), each write pullback has its ``transpose`` (cutting an item out of a list's
  gradient inserts the item's cotangent, putting one back removes it).

The operations run forward in the inner store while the outer differentiation records them, and their
transposes run in reverse order in the outer pullback, so the adjoint holds, at each step, the cotangent of
the inner store as it was then.  An entry that an operation creates has no cotangent before it.
"""
from __future__ import annotations

import types
from numbers import Number

import numpy as np

from ...errors import BeyondOrder, UnsupportedError
from .context import Store, current, within
from .cotangent import dense
from .registry import PAIRS, primitive
from .rules.scatter import ADDED
from .rules.structures import flat_places, setitem, store_attr
from .tangent import JVP_RULES, code_jvp, tangent_of
from .runtime import (HELPERS, RULES, ZERO, J, Writes, acc, acc_into, box_of, cut, item_grads, keep, kept,
                      like_grads, method_rule, own, part_of, register, snap, take, with_nested_boxes)


class Level:
    """The gradient code of a nested derivative, being differentiated: its own store, the adjoint of that
    store (key -> cotangent) and the copies of arrays the outer differentiation made.  The store around it
    (the outer differentiation's) stays the current one: the objects its transformed code makes and writes
    are its boxes."""

    __slots__ = ("inner", "adjoint", "copies", "stored")

    def __init__(self):
        self.inner, self.adjoint, self.copies = Store(), {}, {}
        self.stored: set[int] = set()   # the arrays whose writes it does not follow (``runtime.unfollowed``)

    def original(self, v):
        """``v``, or the array that the outer differentiation gave a copy of (``runtime.snap``)."""
        hit = self.copies.get(id(v))
        return v if hit is None else hit[1]

    def run(self, f, *args):
        """``f(*args)``, an operation of the gradient code, on its own store."""
        return within(current().but(store=self.inner), f, *args)


def nested_gradient(run, args):
    """``run()``, the forward pass of differentiating the gradient code of a function at ``args``, with a
    box store of its own.  A gradient left in that store for an object the arguments hold (a function that
    writes into its arguments) is refused: the nested gradient would not include it."""
    lv = Level()
    out = within(current().but(level=lv, copies=lv.copies), run)
    if lv.inner.grads and any(g is not None for g in lv.run(with_nested_boxes, args, (None,) * len(args))):
        raise UnsupportedError("a second differentiation of a function that writes into its arguments (or "
                               "into objects they hold) is not supported")
    return out


def _level(what):
    lv = current().level
    if lv is None:
        raise UnsupportedError(f"a second differentiation through {what} is supported only in the gradient "
                               f"code of a nested derivative")
    return lv


class NestedWrite:
    """The pullback of a write, in gradient code being differentiated again: ``op`` (a write pullback of
    ``rules.structures``) run on the inner store, padded to ``n`` gradients.  The outer differentiation calls
    it through ``__ad_pullback__``, whose pullback is ``op``'s transpose on the adjoint of the inner store."""

    __slots__ = ("op", "n", "level")

    def __init__(self, op, n, level):
        self.op, self.n, self.level = op, n, level

    def __call__(self, dy):
        g = self.op(dy)
        return g + (None,) * (self.n - len(g))

    def __ad_pullback__(self, dy):
        s, adjoint = self.level.inner, self.level.adjoint
        key = id(box_of(self.op.obj))
        existed = key in s.grads
        g = self.level.run(self, dy)
        after = s.grads.get(key)
        if not existed and after is None:   # no gradient to move
            return g, _zero1
        form = len(after) if type(after) is list else _form(after)

        def back(dd):
            a, ddy = self.op.transpose(adjoint.get(key), form, dd)
            if existed and a is not None:
                adjoint[key] = a
            else:
                adjoint.pop(key, None)
            return (ddy,)
        return g, Writes(back)


def _zero1(dd):
    return (None,)


def _form(g):
    return (g.shape, g.dtype) if type(g) is np.ndarray else None


def _write(obj, what, run, spread, n):
    """The rule of a write ``run(obj)`` to ``obj`` in gradient code being differentiated: the write's pair, its
    pullback a ``NestedWrite``; the write itself is one of the outer function too, so the object written is
    a box of the outer store, and the outer pullback is the write's own pullback run there (``spread``
    places its gradients as the rule's arguments are)."""
    lv = _level(what)
    register(obj)
    y, op = lv.run(run, obj)
    if op is ZERO:   # (an item written into an object without a derivative)
        return (y, ZERO), _zero3

    def back(d):
        return spread(op(None if d is None else d[0]))
    return (y, NestedWrite(op, n, lv)), Writes(back)


def box_method(name, kwnames, obj, *args):
    """The rule of ``Jm`` (``J(Jm, name, kwnames, obj, *args)``) for a method that writes to ``obj``."""
    if name in ("pop", "insert"):
        raise BeyondOrder(f"a second differentiation through the method {type(obj).__qualname__}.{name} is not "
                          f"supported")
    k = len(kwnames)
    pos, kw = args[:len(args) - k], dict(zip(kwnames, args[len(args) - k:]))
    if name == "append" and pos and type(pos[0]) is np.ndarray:
        _level(f"the method {type(obj).__qualname__}.{name}").stored.add(id(box_of(pos[0])))   # (as x[i] = v)
    rule, n = method_rule(obj, name), len(args) + 1
    return _write(obj, f"the method {type(obj).__qualname__}.{name}", lambda o: rule(o, *pos, **kw),
                  lambda g: (None, None, *g, *(None,) * (n - len(g))), n)


def _setitem_rule(obj, idx, val):
    if type(obj) is np.flatiter:   # x.flat[i] = v: a write into x (as structures.setitem takes it)
        return _setitem_rule(*flat_places(obj, idx), val)
    if isinstance(getattr(type(obj), "__setitem__", None), types.FunctionType):
        raise UnsupportedError(f"a second differentiation through {type(obj).__qualname__}.__setitem__ is not "
                               f"supported")
    lv = _level("x[i] = v")
    obj = lv.original(obj)
    if isinstance(obj, (list, dict)) and type(val) is np.ndarray:
        lv.stored.add(id(box_of(val)))
    else:
        _refuse_write_into_stored(lv, obj)
    return _write(obj, "x[i] = v", lambda o: setitem(o, idx, val), _same, 3)


def _refuse_write_into_stored(lv, obj):
    """``BeyondOrder`` for a write into an array that the gradient code wrote into a list's or dict's item (``p[0] =
    p[0] + v; p[0][1] = w``, ``lst.append(a); lst[-1][0] = w``), iterated over (``for row in m: row[0] = v``) or got back from a call (a view of an
    argument): the transform's second differentiation lost the gradients of the item replaced, of the rows
    written, of the view written (causes not found); the recording is right where it can be made."""
    if type(obj) is np.ndarray and id(box_of(obj)) in lv.stored:
        raise BeyondOrder("a second differentiation through a write into an array that was written into an item "
                          "of a list or dict, iterated over by a for loop, or returned (or a view of it) by the "
                          "function it was passed to, is not supported")


def _scatter_rule(f):
    """The rule of ``f``'s rule (``np.add.at``, ``np.subtract.at``: a write whose pullback is a box rule's,
    ``rules.scatter.Added``), as ``x[i] = v``'s."""
    rule, what = RULES[f], primitive(f).name

    def scattered(obj, idx, val):
        lv = _level(what)
        obj = lv.original(obj)
        _refuse_write_into_stored(lv, obj)
        return _write(obj, what, lambda o: rule(o, idx, val), _same, 3)
    return scattered


def _zero3(d):
    return (None, None, None)


def _same(g):
    return g


def _setattr_rule(obj, name, val):
    t = type(obj)
    if isinstance(t.__setattr__, types.FunctionType) or isinstance(getattr(t, name, None), property):
        raise UnsupportedError(f"a second differentiation through {t.__qualname__}.{name} = v (a __setattr__ or "
                               f"property setter of the class) is not supported")
    return _write(obj, "o.a = v", lambda o: store_attr(o, name, val, setattr, 1), lambda g: (g[0], None, g[1]), 2)


# -- acc_into and take -----------------------------------------------------------------------------------
def _box_key(s, v):
    """The key in store ``s`` of the box a gradient of ``v`` goes into (v's or the array v is a view of)."""
    if not s.boxes:
        return None
    key = id(box_of(v))
    return key if key in s.boxes else None


def _original(v):
    lv = current().level
    return v if lv is None else lv.original(v)


def _inner_store():
    context = current()
    return context.store if context.level is None else context.level.inner


def _acc_into_rule(v, d, c):
    v, s = _original(v), _inner_store()
    key = None if c is None else _box_key(s, v)
    if key is None:
        if type(d) is not type(c) and d is not None:   # a list's gradient and an array's (a rule read it as one)
            return acc(d, c), lambda dy: (None, _shaped_as(dy, d), _shaped_as(dy, c))
        return acc(d, c), _sum_back
    lv, existed = _level("a gradient added into a box"), key in s.grads
    y = lv.run(acc_into, v, d, c)

    def back(dy):
        a = lv.adjoint.get(key)
        if not existed:
            lv.adjoint.pop(key, None)
        return (None, dy, None if a is None else _shaped_as(own(part_of(v, a)), c))
    return y, Writes(back)


def _sum_back(dy):
    return (None, dy, dy)


def _shaped_as(dc, c):
    """``dc``, the cotangent of gradient ``c`` that went into a list as a list, as an array like ``c``; or
    that went into it as an array, as a list like ``c``."""
    if type(dc) is list and type(c) is np.ndarray:
        return np.array([np.zeros_like(x) if t is None else t for t, x in zip(dc, c)])
    if type(dc) is np.ndarray and (type(c) is list or type(c) is tuple):
        return type(c)(dc)
    return dc


def _take_rule(v, d):
    v, s = _original(v), _inner_store()
    key = _box_key(s, v)
    if key is None or key not in s.grads or id(v) in current().shared:
        return dense(d), _identity_back
    lv, form = _level("a box's gradient taken"), _form(s.grads[key])
    y = lv.run(take, v, d)

    def back(dy):
        if key == id(v):   # the box's gradient, handed out
            if dy is None:
                lv.adjoint.pop(key, None)
            else:
                lv.adjoint[key] = own(dy)
        else:   # the part of an array's gradient that view v covers, handed out and zeroed
            a = lv.adjoint.get(key)
            if a is None:
                a = lv.adjoint[key] = np.zeros(*form)
            part_of(v, a)[...] = 0 if dy is None else dense(dy)
        return (None, dy)
    return y, Writes(back)


def _take_items_rule(v, d):
    """``take_items``: of a tuple a primitive made, each item's gradient taken (``_take_rule``)."""
    items = item_grads(v, d) if isinstance(v, tuple) and _inner_store().boxes else None
    if items is None:
        return _take_rule(v, d)
    taken = [_take_rule(x, g) for x, g in zip(v, items)]

    def back(dy):
        dys = (None,) * len(v) if dy is None else dy
        return (None, like_grads(dy, tuple(b(g)[1] for (_, b), g in zip(taken, dys))))
    return like_grads(d, tuple(y for y, _ in taken)), Writes(back)


def _identity_back(dy):
    return (None, dy)


def _snap_rule(x):
    """The gradient code's own copies (not recorded: its store operations act on them as they are)."""
    return (x.copy() if type(x) is np.ndarray else x), _pass


def _pass(dy):
    return (dy,)


def _cut_rule(y, back, copy, x):
    """``runtime.cut`` in gradient code differentiated again: views of the copy made views of the array
    (the same values); a call that wrote into the copy it was given (its pullback a ``NestedWrite``, or the copy
    a box) is refused: ``cut``'s bridge of the copy's box to the array's is not differentiated."""
    if copy is not x and (id(copy) in _inner_store().boxes or type(getattr(back, "back", back)) is NestedWrite):
        raise UnsupportedError(_WRITTEN_COPY)
    lv = current().level
    return (cut(y, back, copy, x) if lv is None else lv.run(cut, y, back, copy, x)), _cut_back


_WRITTEN_COPY = ("a second differentiation through a call that writes into an array argument written again after "
                 "it (np.add.at(y, i, v) then y *= 2) is not supported by reverse over reverse (mutation); forward "
                 "over reverse (ad.hessian, ad.hvp) is")


def _cut_back(d):
    return (None, None, None, None) if d is None else (d[0], d[1], None, None)


def _copy_jvp(args, ts):
    """A copy on capture and its tangent: a copy of the array's tangent, which a later write into the array
    changes in place."""
    t = tangent_of(args[0], ts[0])
    return _snap_rule(args[0])[0], (t.copy() if type(t) is np.ndarray else t)


def _cut_jvp(args, ts):
    return code_jvp(cut, None, args, ts)


def _take_captured_rule(v, d):
    """(``take_captured`` hands out a box's gradient only where it is not a box, as ``take``; ``v`` may be the
    outer differentiation's copy of the box.)"""
    s = _inner_store()
    if s.boxes and _box_key(s, _original(v)) is not None:
        return dense(d), _identity_back
    return _take_rule(v, d)


def _take_again(v, d):
    """``_take_rule`` differentiated (a third derivative): where ``v`` has no box, the identity in ``d``."""
    _no_box(v)
    return _take_rule(v, d), _first_of_pair


def _acc_into_again(v, d, c):
    """``_acc_into_rule`` differentiated (a third derivative): where ``v`` has no box, the sum of ``d`` and
    ``c``."""
    if c is not None:
        _no_box(v)
    return _acc_into_rule(v, d, c), _first_of_pair_twice


def _no_box(v):
    """Refuses ``v`` that is a box or not a number or an array (a list's gradient moves through the store, which the
    third derivative does not follow)."""
    if _box_key(_inner_store(), _original(v)) is not None or not (type(v) is np.ndarray or isinstance(v, Number)):
        raise BeyondOrder(_BOXES_AGAIN)


def _first_of_pair(d):
    return None, None if d is None else d[0]


def _first_of_pair_twice(d):
    dy = None if d is None else d[0]
    return None, dy, dy


def _take_pair(args, ts):
    """``J(take, v, d)`` in forward mode (a third derivative): where ``v`` has no box, the identity in ``d``."""
    _no_box(args[0])
    return _take_rule(*args), (None if ts[1] is None else dense(ts[1]), ZERO)


def _acc_into_pair(args, ts):
    if args[2] is not None:
        _no_box(args[0])
    return _acc_into_rule(*args), (acc(ts[1], ts[2]), ZERO)


_BOXES_AGAIN = ("a third derivative through the gradient of a list or object the function makes (np.stack([a, b])) "
                "or writes into (lst.append(v), a[i] = v) is not supported: the box store of a second derivative is "
                "not differentiated again")
JVP_RULES.update({snap: _copy_jvp, cut: _cut_jvp})   # (forward mode: their code, not the rules above)


# -- keep and kept: a result written after the call that made it (``runtime.keep``) ----------------------------
# Differentiated again, ``kept`` runs the pullback as it is where the kept arrays were not written since the call
# (the static analysis cannot tell a call that may write from one that does: ``Layer(w)``), and refuses by name
# where one was: in reverse over reverse the write's pullback would clear the gradient that the pullback of the
# kept values gives.  ``keep`` gives ``(array, copy, tangent)`` triples: in forward mode the tangent the array
# had registered then (a write registers one, ``tangent.mutable``) with a copy of its values, so that a write is
# seen in the values or in the tangent; in reverse mode, in the values.
_KEPT = ("the function writes into an array a call returned, after the call (y = np.exp(x); y *= 2), whose values "
         "its first derivative keeps for the call's pullback; a second derivative through that is not supported: "
         "write into a copy (y = np.exp(x).copy())")


def _registered_tangent(a):
    """The tangent registered for array ``a`` now, and a copy of its values (None, None where none is)."""
    hit = current().tangents.get(id(box_of(a)))
    t = None if hit is None else hit[1]
    return t, (t.copy() if type(t) is np.ndarray else None)


def _written_since(triples, forward: bool) -> bool:
    for a, c, (t, tc) in triples:
        if not np.array_equal(a, c, equal_nan=True):
            return True
        if forward:
            now = current().tangents.get(id(box_of(a)))
            if (None if now is None else now[1]) is not t or tc is not None and not np.array_equal(t, tc):
                return True
    return False


def _keep_rule(y, back):
    # (the arrays themselves: the differentiation around gave keep its copies of those written later)
    return tuple((a, c, (None, None)) for a, c in keep(_originals(y), back)), _no_gradient


def _originals(y):
    if isinstance(y, (tuple, list)):
        return [_originals(item) for item in y]
    return _original(y)


def _keep_jvp(args, ts):
    return tuple((a, c, _registered_tangent(a)) for a, c in keep(*args)), None


def _no_gradient(dy):
    return (None, None)


def pullback_of(back, dy):
    """``back(dy)``: ``kept`` where nothing was written, as code the transforms differentiate."""
    return back(dy)


def _kept_rule(triples, back, dy):
    if _written_since(triples, False):
        raise UnsupportedError(f"tensorlang.ad: {_KEPT}")
    y, pb = J(pullback_of, back, dy)
    # (run without a cotangent too: the pullback's own code takes the gradients of what it made and wrote,
    # which the store holds, out of the store: ``np.max``'s pullback writes its gradient into ``np.zeros``)
    return y, Writes(lambda d: (None, *pb(d)[1:]))


def _kept_jvp(args, ts):
    if _written_since(args[0], True):
        raise UnsupportedError(f"tensorlang.ad: {_KEPT}")
    return code_jvp(pullback_of, None, args[1:], ts[1:])


RULES.update({keep: _keep_rule, kept: _kept_rule, _take_rule: _take_again, _acc_into_rule: _acc_into_again})
PAIRS.update({HELPERS["_ad_take"]: _take_pair, HELPERS["_ad_acci"]: _acc_into_pair})
JVP_RULES.update({keep: _keep_jvp, kept: _kept_jvp})
RULES.update({HELPERS["_ad_acci"]: _acc_into_rule, HELPERS["_ad_take"]: _take_rule, snap: _snap_rule, cut: _cut_rule,
              HELPERS["_ad_takei"]: _take_items_rule,
              HELPERS["_ad_takef"]: _take_captured_rule,
              HELPERS["_ad_setitem"]: _setitem_rule, HELPERS["_ad_setattr"]: _setattr_rule})
RULES.update({RULES[f]: _scatter_rule(f) for f in ADDED})
