"""Second derivatives (``ad.grad(ad.grad(f))``, ``ad.gradient`` of a function calling ``ad.gradient``, a
Hessian as the Jacobian of the gradient by reverse mode) of functions that write: lists built by
``append`` (an RNN collecting its states, then ``np.stack``), ``pop``, ``insert``, ``extend``, dicts by
``update`` and ``d[k] = v``, list, array and attribute writes.  The oracle is f alone: second central
differences (``conftest.hvp_by_differences``); what is not supported is a clear ``UnsupportedError``."""
import numpy as np
import pytest

from conftest import hvp_by_differences   # tests/ad is on the path (rootdir conftest)
from tensorlang import ad
from tensorlang.derive.ad import context
from tensorlang.errors import UnsupportedError


def _rnn(w, x):
    h = np.zeros(3)
    hs = []
    for t in range(x.shape[0]):
        h = np.tanh(w @ h + x[t])
        hs.append(h)
    return np.sum(np.stack(hs) ** 2)


def _pops(w, x):
    stack = [w[0] * x[0], np.sin(w[1]) * x[1], w[2] * w[2]]
    s = 0.0
    while stack:
        s = s + stack.pop() * x[2]
    first = [w * x, w * w]
    return s + np.sum(first.pop(0) * first.pop())


def _inserts(w, x):
    xs = [w[0]]
    xs.insert(0, x[1] * w[1])
    xs.insert(-1, np.exp(w[2]) * x[0])
    xs.insert(10, w[0] * x[2])
    return xs[0] * xs[1] + xs[2] * xs[3] * w[1]


def _extends(w, x):
    xs = [w[0] * x[0]]
    xs.extend([w[1] * w[2], np.cos(x[1])])
    xs.extend((w[2] * x[2],))
    return xs[0] * xs[1] + xs[2] * xs[3] + xs[1] ** 2


def _dict_update(w, x):
    d = {"a": w[0] * x[0]}
    d.update({"b": w[1] * w[2], "a": np.sin(w[0]) * x[1]})
    d["c"] = d["a"] * x[2]
    return d["a"] * d["b"] + d["c"] ** 2


def _list_writes(w, x):
    xs = [0.0, 0.0, 0.0, 0.0]
    xs[0] = w[0] * x[0]
    xs[1:3] = [w[1] * w[2], w[2] * x[1]]
    xs[-1] = xs[0] * xs[1]
    return sum(v * v for v in xs) * w[0]


def _array_writes(w, x):
    y = np.zeros(4)
    y[0] = w[0] * w[1]
    y[1:3] = w[1:] ** 2 * x[:2]
    y[[3, 3]] = w[2] * x[2]
    v = y[1:]
    v *= w[0]
    return np.sum(y * y) + y[1] * w[2]


def _preallocated_rnn(w, x):
    hs = np.zeros((x.shape[0], 3))
    h = np.zeros(3)
    for t in range(x.shape[0]):
        h = np.tanh(w @ h + x[t])
        hs[t] = h
    return np.sum(hs ** 2)


class _Cell:
    def __init__(self):
        self.state = 0.0


def _attribute_writes(w, x):
    c = _Cell()
    c.state = w[0] * x[0]
    c.state = c.state * w[1] + np.sin(w[2])
    return c.state ** 2 * x[1]


def _nested_lists(w, x):
    rows = []
    for i in range(3):
        row = []
        row.append(w[i] * x[i])
        row.append(w[i] ** 2)
        rows.append(row)
    rows[1].append(rows[0].pop() * w[2])
    return sum(r[0] * r[-1] for r in rows)


def _helper_appends(xs, v):
    xs.append(v * v)
    xs.append(np.sin(v))


def _calls_a_writing_helper(w, x):
    xs = []
    for i in range(3):
        _helper_appends(xs, w[i] * x[i])
    return sum(a * b for a, b in zip(xs, xs[1:]))


def _written_after_stored(w, x):
    v = np.zeros(3)
    held = [v, {"v": v}]
    v[0] = w[0] * x[0]               # written after a list and a dict took it: read back through them
    v[1:] = np.sin(w[1:]) * x[1:]
    held.append(held[0] * w[2])
    return np.sum(held[1]["v"] * held[2]) + np.sum(held[0])


def _written_with_the_max(w, x):
    s = np.max(w)                    # its pullback writes its gradient into an array of zeros
    v = w.copy()
    v[1] = s * v[0]
    return np.sum(v * v * x)


def _augmented(w, x):
    xs = [w[0] * x[0]]
    xs += [w[1] * xs[-1], np.sin(w[2])]   # list.__iadd__ (extend), dict.__ior__ (update)
    d = {"a": xs[1] * x[1]}
    d |= {"b": np.exp(w[0]) * x[2]}
    return xs[0] * xs[2] + d["a"] * d["b"]


def _max_then_written(w, x):
    s = np.max(w * x)                # (its pullback's gradient is written into np.zeros: a write that forward
    marks = np.zeros(2)              # mode registers, which its cross term counted again)
    marks[0] = 1.0                   # (any write after it made the function not box-free)
    return s ** 2 + np.sum(w * w * x)


def _columns_of_a_transpose(w, x):
    m = np.outer(w, x)               # (a loop over m.T: rows of an array not in C order, which the derivative of
    out = 0.0                        # the layer below writes into: views of it followed as slices of its axes)
    for col in m.T:
        z = (col - col.mean()) / (col.std() + 1e-3)
        out = out + np.sum(np.tanh(z) * col)
    return out


CASES = {
    "rnn: append in a loop, np.stack": (_rnn, (3, 3), (4, 3)),
    "pop, pop(0)": (_pops, (3,), (3,)),
    "insert at 0, -1 and past the end": (_inserts, (3,), (3,)),
    "extend by a list and a tuple": (_extends, (3,), (3,)),
    "dict update and d[k] = v": (_dict_update, (3,), (3,)),
    "list items and a slice written": (_list_writes, (3,), (3,)),
    "array items, slices, a fancy index and a view written": (_array_writes, (3,), (3,)),
    "rnn: states written into a preallocated array": (_preallocated_rnn, (3, 3), (4, 3)),
    "attribute writes": (_attribute_writes, (3,), (3,)),
    "lists of lists": (_nested_lists, (3,), (3,)),
    "a helper appending to a list it is given": (_calls_a_writing_helper, (3,), (3,)),
    "an array written after a list and a dict hold it": (_written_after_stored, (3,), (3,)),
    "a copy written with np.max of the argument": (_written_with_the_max, (3,), (3,)),
    "+= on a list, |= on a dict": (_augmented, (3,), (3,)),
    "np.max of a product, a write after it": (_max_then_written, (3,), (3,)),
    "a loop over the columns of a transpose": (_columns_of_a_transpose, (3,), (3,)),
}


def _args(name):
    f, sw, sx = CASES[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    w, x = rng.normal(size=sw) * 0.7, rng.normal(size=sx) * 0.7
    vw, vx = rng.normal(size=sw), rng.normal(size=sx)
    return f, (w, x), (vw, vx)


@pytest.mark.parametrize("name", list(CASES))
def test_hvp_of_nested_gradients(name):
    f, args, vs = _args(name)

    def directional(w, x):
        gw, gx = ad.gradient(f, w, x)
        return np.sum(gw * vs[0]) + np.sum(gx * vs[1])

    got = ad.gradient(directional, *args)
    for g, want in zip(got, hvp_by_differences(f, args, vs)):
        np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-5)
    assert not context.current().store.boxes   # the stores of both levels are left empty


@pytest.mark.parametrize("name", ["rnn: append in a loop, np.stack", "pop, pop(0)", "dict update and d[k] = v",
                                  "array items, slices, a fancy index and a view written",
                                  "an array written after a list and a dict hold it",
                                  "a copy written with np.max of the argument"])
def test_hessian_as_the_jacobian_of_the_gradient(name):
    f, (w, x), _ = _args(name)
    got = ad.jacobian(ad.grad(f, 1), 1, mode="reverse")(w, x)
    n = x.size
    want = np.stack([hvp_by_differences(f, (w, x), (np.zeros_like(w), e.reshape(x.shape)))[1].ravel()
                     for e in np.eye(n)], axis=1).reshape(x.shape + x.shape)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_grad_of_grad_through_append_and_pop():
    def f(x):
        xs = []
        xs.append(x * x)
        xs.append(np.sin(x))
        return xs.pop(0) * xs.pop() * x

    x = 0.7
    want = hvp_by_differences(f, (x,), (1.0,))[0]
    assert ad.grad(ad.grad(f))(x) == pytest.approx(want, rel=1e-5)


def test_writes_into_arguments_at_second_order():
    def f(xs, x):   # the list argument's own gradient is handed out by the gradient code: supported
        xs[0] = x * x
        return xs[0] * x + xs[1] * x

    assert ad.gradient(lambda x: ad.gradient(f, [1.0, 3.0], x)[1], 2.0) == (pytest.approx(12.0),)
    assert ad.gradient(lambda x: ad.gradient(f, [1.0, 3.0], x)[0][1], 2.0) == (pytest.approx(1.0),)

    def g(m, x):   # a list the argument holds: its gradient stays in the store, refused
        m[0][1] = x * x
        return m[0][1] * x + m[0][0] * x

    assert ad.gradient(g, [[1.0, 2.0]], 2.0) == ([[2.0, None]], pytest.approx(13.0))
    with pytest.raises(UnsupportedError, match="writes into its arguments"):
        ad.gradient(lambda x: ad.gradient(g, [[1.0, 2.0]], x)[1], 2.0)


def test_a_user_setitem_is_refused_at_second_order():
    class Grid:
        def __init__(self):
            self.cells = {}

        def __setitem__(self, k, v):
            self.cells[k] = v

    def f(x):
        g = Grid()
        g[0] = x * x
        return g.cells[0] * x

    assert ad.gradient(f, 2.0) == (pytest.approx(12.0),)
    with pytest.raises(UnsupportedError):
        ad.grad(ad.grad(f))(2.0)


@pytest.mark.parametrize("name", list(CASES))
def test_hvp_by_forward_over_reverse(name):
    f, args, vs = _args(name)
    for g, want in zip(ad.hvp(f, args, vs), hvp_by_differences(f, args, vs)):
        np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-5)


def test_forward_over_reverse_through_list_methods_is_right_or_refused():
    # ad.hessian and ad.hvp run forward mode over the gradient code: through the box store it gives the
    # second derivative or a clear UnsupportedError naming what it could not differentiate
    f, (w, x), vs = _args("rnn: append in a loop, np.stack")
    try:
        got = ad.hvp(f, (w, x), vs)
    except UnsupportedError as e:
        assert "list.append" in str(e) or "mutation" in str(e)
    else:
        for g, want in zip(got, hvp_by_differences(f, (w, x), vs)):
            np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-5)


WRITTEN_COPIES = ["np.copy", "copy()", "astype", "flatten", "resize", "hstack", "roll", "tile", "np.array", "v * 1"]


def _written_copy(v, how):
    """A copy-like primitive's result (``WRITTEN_COPIES[how]``) written into."""
    if how == 0:
        y = np.copy(v)
    elif how == 1:
        y = v.copy()
    elif how == 2:
        y = v.astype(float)
    elif how == 3:
        y = v.flatten()
    elif how == 4:
        y = np.resize(v, 3)
    elif how == 5:
        y = np.hstack([v])
    elif how == 6:
        y = np.roll(v, 1)
    elif how == 7:
        y = np.tile(v, 1)
    elif how == 8:
        y = np.array(v)
    else:
        y = v * 1.0
    y[0] = y[0] * 2.0
    y[2] = 3.0
    return np.sum(y * y) + y[1] * np.sin(y[0])


@pytest.mark.parametrize("how", range(len(WRITTEN_COPIES)), ids=WRITTEN_COPIES)
def test_second_derivative_through_a_copy_written_into(how):
    """A write into what a copy-like primitive returned: reverse over reverse lost the copy's part (``None``, or
    zeros) for the declared linear ones (``np.copy``, ``.copy()``, ``np.roll`` ...): the generated code of the
    second level did not take the written array's gradient out of the store, as it does for any primitive's
    result (``nested._declared_rule``, ``runtime.made_by_primitive``).  Against second differences of f."""
    def f(u):
        return _written_copy(u, how)

    x, v = np.array([0.3, -0.7, 1.1]), np.array([1.0, 0.5, -2.0])
    want = hvp_by_differences(f, (x,), (v,))[0]
    got = ad.grad(lambda u: np.dot(ad.grad(f)(u), v))(x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ad.hvp(f, (x,), (v,))[0], want, rtol=1e-5, atol=1e-6)
