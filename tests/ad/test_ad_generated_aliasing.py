"""Random programs with mutation and aliasing, written as Python source from a small grammar: a list with a
second name and held twice by another list, a dict with a second name, an object with a second name
(attribute writes, builtin ``getattr``/``setattr``, a method that writes, also held as a bound method by a
dict, a Python ``__iadd__``), a closure that writes into the list, an array with a view of it and in a
list with another array (``np.stack`` of them), stored in a list, a slice of the list, and a function that writes into
whatever it is given; each statement writes through one name and reads through others (branches and
loops included).  Each program is executed, differentiated and compared with central differences."""
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import check_generated_program   # tests/ad is on the path (rootdir conftest)

N = 4

PRELUDE = '''
class Obj:
    def __init__(self, v):
        self.v = v
        self.items = []

    def bump(self, a):
        self.v = self.v + a

    def __iadd__(self, a):
        self.items.append(a)
        return self


def fill(out, i, v):
    out[i] = v


def f(x):
    lst = [x[0], x[1] * 2.0, 0.5]
    alias = lst
    rows = [lst, lst]
    d = {"a": x[2], "b": 1.0}
    e = d
    o = Obj(x[3])
    p = o
    y = x * 1.0
    v = y[1:]
    ws = [y, x * 2.0]
    ops = {"bump": o.bump}
    holder = [0.0]

    def add(a):
        lst[0] = lst[0] + a
    s = 0.0
'''
RESULT = ("    return s + sum(lst) + d['a'] * d['b'] + o.v + sum(o.items) + np.sum(y * y) + np.sum(ws[1])"
          " + np.sum(holder[0] * x)\n")


def _read(draw):
    """An expression that reads through one of the names."""
    j, i, k = draw(st.integers(0, 2)), draw(st.integers(0, N - 1)), draw(st.integers(0, 2))
    return draw(st.sampled_from([f"x[{i}]", f"lst[{j}]", f"alias[{j}]", f"rows[1][{j}]", "d['a']", "e['b']",
                                 "o.v", "p.v", f"y[{i}]", f"v[{k}]", f"ws[1][{i}]", "getattr(o, 'v')"]))


def _expr(draw):
    a, b = _read(draw), _read(draw)
    c = draw(st.sampled_from(["0.5", "1.5", "-0.75"]))
    return draw(st.sampled_from([f"{a} * {b}", f"{a} + {c} * {b}", f"np.sin({a}) * {c}", f"{c} * {a}"]))


def _statement(draw):
    j, i, k = draw(st.integers(0, 2)), draw(st.integers(0, N - 1)), draw(st.integers(0, 2))
    ex = _expr(draw)
    c = draw(st.sampled_from(["0.5", "1.5", "-0.75"]))
    return draw(st.sampled_from([
        f"alias[{j}] = {ex}",
        f"rows[0][{j}] = {ex}",
        f"lst[{j}] = lst[{j}] * {ex}",
        f"alias.append({ex})",
        f"e['a'] = {ex}",
        f"d['b'] += {ex}",
        f"p.v = {ex}",
        f"o.bump({ex})",
        f"p += {ex}",
        f"add({ex})",
        f"v[{k}] = {ex}",
        f"y[{i}] += {ex}",
        f"fill(y, {i}, {ex})",
        f"fill(alias, {j}, {ex})",
        f"v *= {c}",
        f"s = s + {ex}",
        f"if {ex} > 0:\n        alias[{j}] = {ex}\n    else:\n        p.v = {ex}",
        f"for t in range(2):\n        s = s + alias[t] * {ex}\n        v[t] = v[t + 1] * {c}",
        f"ops['bump']({ex})",
        f"ws[1][{i}] = {ex}",
        f"fill(ws[0], {i}, {ex})",
        f"s = s + np.sum(np.stack(ws)) * {c}",
        f"r = alias[::-1]\n    r[0] = {ex}\n    s = s + r[0] * r[-1]",
        f"setattr(p, 'v', {ex})",
        "holder[0] = y",
    ]))


@st.composite
def programs(draw):
    body = [_statement(draw) for _ in range(draw(st.integers(1, 6)))]
    return PRELUDE + "".join(f"    {b}\n" for b in body) + RESULT


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.integers(0, 2 ** 16))
def test_generated_aliasing_programs_match_finite_differences(src, seed):
    check_generated_program(src, seed, N, {"np": np}, "aliasing program")
