"""Errors as the user reads them: a traceback through differentiated code names the user's functions (not
the generated entries ``_ad_fast``, ``_ad_pb``), and library code that the transform cannot take (or a
function whose source file is missing) is refused with what to do, ``@ad.rule``, and the user's line that
called it."""
import importlib
import inspect
import py_compile
import sys
import traceback

import numpy as np
import pytest

from tensorlang import ad
from tensorlang.errors import UnsupportedError

LIBRARY = '''
def total(x):
    try:
        return x.sum()
    except AttributeError:
        return x
'''


def divides(x, n):
    return x / n


def inverts(x):
    y = x * 2.0
    return np.sum(np.linalg.inv(y.reshape(2, 2)))


def _line(f, text):
    lines, first = inspect.getsourcelines(f)
    return first + next(k for k, line in enumerate(lines) if text in line)


def _frames(call, error=Exception):
    with pytest.raises(error) as info:
        call()
    return [(f.name, f.lineno) for f in traceback.extract_tb(info.value.__traceback__)]


@pytest.mark.parametrize("call", [
    lambda: ad.grad(divides)(1.0, 0.0),                       # a scalar function (straight-line code)
    lambda: ad.gradient(divides, 2.0, 0.0),
    lambda: ad.value_and_grad(lambda x: divides(x, 0.0))(1.0),
    lambda: ad.pullback(divides, 1.0, 0.0),
])
def test_a_traceback_names_the_users_function_at_its_line(call):
    frames = _frames(call, ZeroDivisionError)
    assert frames[-1] == ("divides", _line(divides, "x / n")), frames
    assert not any(name.startswith("_ad_") for name, _ in frames), frames


def test_an_error_in_an_array_function_is_at_its_line():
    frames = _frames(lambda: ad.grad(inverts)(np.zeros(4)), np.linalg.LinAlgError)
    assert frames[-1] == ("inverts", _line(inverts, "np.linalg.inv")), frames


@pytest.fixture
def library(tmp_path, monkeypatch):
    """A module installed in a site-packages folder whose function holds a ``try``."""
    folder = tmp_path / "site-packages"
    folder.mkdir()
    (folder / "fakelib.py").write_text(LIBRARY)
    monkeypatch.syspath_prepend(str(folder))
    sys.modules.pop("fakelib", None)
    yield importlib.import_module("fakelib")
    sys.modules.pop("fakelib", None)


def test_library_code_outside_the_subset_says_register_a_rule_and_where_it_was_called(library):
    def loss(x):
        y = x * 2.0
        return library.total(y)

    with pytest.raises(UnsupportedError) as info:
        ad.grad(loss)(np.ones(3))
    message = str(info.value)
    assert message.startswith(f"{__file__}:{_line(loss, 'library.total')}: in loss: "), message
    assert "cannot differentiate this call of fakelib.total" in message
    assert "Register a rule with `@ad.rule(fakelib.total)`" in message
    assert "'try' statements are not supported" in message   # and why, at the library's line
    frames = [f.name for f in traceback.extract_tb(info.value.__traceback__)]
    assert "loss" in frames and not any(name.startswith("_ad_") for name in frames), frames

    @ad.rule(library.total)
    def _(x):
        return library.total(x), lambda dy: (dy * np.ones_like(x),)

    assert np.allclose(ad.grad(loss)(np.ones(3)), [2.0, 2.0, 2.0])   # the rule the message asked for


def test_a_function_whose_source_file_is_missing_says_register_a_rule(tmp_path, monkeypatch):
    source = tmp_path / "gone.py"
    source.write_text("def scaled(x):\n    return 3.0 * x\n")
    py_compile.compile(str(source), cfile=str(tmp_path / "gone.pyc"))   # imported from the .pyc alone
    source.unlink()
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("gone", None)
    gone = importlib.import_module("gone")
    try:
        def loss(x):
            return np.sum(gone.scaled(x))

        with pytest.raises(UnsupportedError) as info:
            ad.grad(loss)(np.ones(2))
        message = str(info.value)
        assert message.startswith(f"{__file__}:{_line(loss, 'gone.scaled')}: in loss: "), message
        assert "Register a rule with `@ad.rule(gone.scaled)`" in message and "its file is missing" in message
    finally:
        sys.modules.pop("gone", None)


def test_dask_array_sum_says_register_a_rule():
    da = pytest.importorskip("dask.array")

    def loss(x):
        return da.sum(x * 2.0)

    with pytest.raises(UnsupportedError, match=r"Register a rule with `@ad\.rule\(dask\.array\.[\w.]*sum\)`") as info:
        ad.grad(loss)(np.ones(3))
    assert str(info.value).startswith(f"{__file__}:{_line(loss, 'da.sum')}: in loss: ")


def test_a_function_without_rule_names_the_call_site():
    def loss(x):
        return np.sum(np.unwrap(x))

    with pytest.raises(UnsupportedError, match="no derivative rule for numpy.unwrap") as info:
        ad.grad(loss)(np.ones(3))
    assert f"(called at {__file__}:{_line(loss, 'np.unwrap')}, in loss)" in str(info.value)
