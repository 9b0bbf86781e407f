"""Mutation and aliasing in functions differentiated by tensorlang.ad, each case checked against central
differences: two names for one list, dict, object or array, writes through views, containers of
containers, globals, objects with Python ``__iadd__``, properties and ``__getattr__``.  A construct the
box rules cannot follow is an ``UnsupportedError``, never a wrong number."""
import numpy as np
import pytest

from tensorlang import ad
from tensorlang.errors import UnsupportedError

X4 = np.array([0.3, -0.7, 1.1, 0.4])
TABLE = [0.0]
SCORES = {"a": 0.0}


# -- module globals written inside f ------------------------------------------------------------------------
def _global_list(x):
    TABLE[0] = x
    return TABLE[0] * x


def _global_dict_alias(x):
    d = SCORES
    d["a"] = x
    return SCORES["a"] * x


def _set_table(v):
    TABLE[0] = v


def _global_written_by_callee(x):
    _set_table(x * x)
    return TABLE[0] * x


@pytest.mark.parametrize("f", [_global_list, _global_dict_alias, _global_written_by_callee])
def test_a_global_container_written_in_f_passes_gradients(check, f):
    check(f, 1.3)


# -- augmented assignment on objects with a Python __iadd__ ----------------------------------------------
class _Bag:
    def __init__(self):
        self.items = []

    def __iadd__(self, v):
        self.items.append(v)
        return self

    def total(self):
        return sum(self.items)


class _Counter:
    def __init__(self):
        self.n = 0.0

    def __iadd__(self, v):
        self.n = self.n + v
        return self.n * 1.0


def test_iadd_of_an_object_calls_its_iadd(check):
    def f(x):
        b = _Bag()
        b += x
        b += x * x
        return b.total()
    check(f, 1.3)


def test_iadd_whose_result_is_unused_still_differentiates_its_writes(check):
    def f(x):
        c = _Counter()
        alias = c
        alias += x
        alias += x * 3
        return c.n * 2
    check(f, 1.3)
