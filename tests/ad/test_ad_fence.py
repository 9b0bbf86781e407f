"""The language fence: constructs outside the supported subset raise UnsupportedError when the
transform runs, naming the file, the line and the construct."""
import re

import pytest

from tensorlang import ad
from tensorlang.errors import TensorLangError, UnsupportedError

COUNTER = [0]


def uses_try(x):
    try:
        return x * 2
    except ValueError:
        return x


def uses_with(x):
    with open("f"):
        return x


def uses_generator(x):
    yield x


async def uses_async(x):
    return x


def uses_global(x):
    global COUNTER
    COUNTER = x
    return x


def uses_nonlocal(x):
    y = x

    def inner():
        nonlocal y
        y = 2 * y
    inner()
    return y


def uses_del(x):
    y = [x]
    del y[0]
    return x


def _line_of(fn, text):
    import inspect
    src, start = inspect.getsourcelines(fn)
    for k, line in enumerate(src):
        if text in line:
            return start + k
    raise AssertionError(text)


@pytest.mark.parametrize("fn, construct, marker", [
    (uses_try, "'try' statements", "try:"),
    (uses_with, "'with' statements", "with open"),
    (uses_generator, "generators", "yield x"),
    (uses_async, "'async' functions", "async def"),
    (uses_global, "'global' statements", "global COUNTER"),
    (uses_nonlocal, "'nonlocal' statements", "nonlocal y"),
    (uses_del, "'del' statements", "del y"),
])
def test_unsupported_constructs_name_file_line_and_construct(fn, construct, marker):
    with pytest.raises(UnsupportedError) as info:
        ad.gradient(fn, 1.0)
    msg = str(info.value)
    line = _line_of(fn, marker)
    assert re.match(rf".*test_ad_fence\.py:{line}:\d+: ", msg), msg
    assert construct in msg and "not supported by tensorlang.ad" in msg
    assert isinstance(info.value, TensorLangError)


def test_fence_runs_before_anything_executes():
    calls = []

    def f(x):
        calls.append(x)
        try:
            pass
        finally:
            pass
        return x
    with pytest.raises(UnsupportedError):
        ad.gradient(f, 1.0)
    assert calls == []


def test_missing_rule_is_reported():
    import ctypes  # a C function without a derivative rule
    libm_fabs = ctypes.CDLL(None).fabs if hasattr(ctypes.CDLL(None), "fabs") else None
    if libm_fabs is None:
        pytest.skip("no libm symbol")
    libm_fabs.restype = ctypes.c_double
    libm_fabs.argtypes = [ctypes.c_double]
    with pytest.raises(UnsupportedError, match="no derivative rule"):
        ad.gradient(lambda x: libm_fabs(x), 1.0)


def test_closure_over_a_variable_assigned_later_is_refused():
    def f(x):
        a = x
        g = lambda u: u * a
        a = 2 * x
        return g(x)
    with pytest.raises(UnsupportedError, match="closure over 'a'"):
        ad.gradient(f, 1.0)
