"""Regression tests for defects found by an adversarial pass over the language core: each was a wrong
number, a hang or a raw Python exception, and each is now a right value or a ``TensorLangError`` naming
the cause (docs/reliability.md)."""
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import scipy.sparse as sp
import sympy

import tensorlang as tl
from tensorlang.cli import main
from tensorlang.errors import ParseError, ShapeError, TensorLangError, TypeCheckError

# --------------------------------------------------------------------------------------------------
# an extent that is negative at the given sizes is empty, as in Python's range


@pytest.mark.parametrize("src, value", [
    ("a : R; sum(i:n - 1, j:n - 1) a", lambda n: max(n - 1, 0) ** 2),
    ("a : R; sum(i:n - 1) a", lambda n: max(n - 1, 0)),
    ("a : R; sum(i:n - 3) a * a", lambda n: max(n - 3, 0)),
])
def test_negative_extent_is_empty(src, value):
    e = tl.parse(src)
    for n in range(5):
        assert tl.evaluate(e, a=1.0, n=n) == value(n)
        assert tl.cost(e, n=n) >= 0


def test_negative_extent_is_empty_under_an_access():
    e = tl.parse("x : [n]R; sum(i:n - 3) x[0]")
    assert tl.evaluate(e, x=np.zeros(0)) == 0.0  # nothing is read, so nothing is out of range
    assert tl.evaluate(e, x=np.arange(5.0) + 1) == 2.0


def test_negative_extent_of_a_generator_is_an_empty_array():
    e = tl.parse("x : [n]R; gen(i:n - 1) x[i]")
    assert tl.evaluate(e, x=np.zeros(0)).shape == (0,)
    assert tl.evaluate(e, x=np.arange(3.0)).tolist() == [0.0, 1.0]


def test_gradient_at_a_negative_extent():
    e = tl.parse("a : R; sum(i:n - 1, j:n - 1) a * a")
    g = tl.grad(e, "a")
    assert [tl.evaluate(g, a=2.0, n=n) for n in range(4)] == [0.0, 0.0, 4.0, 16.0]
    assert [tl.cost(e, n=n) for n in range(4)] == [0, 0, 1, 7]


# --------------------------------------------------------------------------------------------------
# inputs: only real numbers, in every form the contract names


@pytest.mark.parametrize("value, words", [
    (np.array([1 + 5j, 2]), "complex"),
    (np.array(["a", "b"]), "dtype <U1"),
    (np.array(["2020-01-01"], dtype="datetime64[D]"), "datetime64"),
    ([[1, 2], [3]], "ragged"),
    ({"a": 1}, "a dict"),
    ([1.0, None], "a NoneType in a list"),
])
def test_input_that_is_not_real_numbers(value, words):
    e = tl.parse("x : [n]R; sum(i:n) x[i]")
    with pytest.raises(ShapeError, match="input x") as info:
        tl.evaluate(e, x=value)
    assert words in str(info.value)


def test_complex_scalar_is_refused():
    with pytest.raises(ShapeError, match="input a of type R must hold real numbers"):
        tl.evaluate(tl.parse("a : R; a * 2"), a=1 + 2j)


def test_bool_is_a_number_as_in_numpy():
    # True is 1 and False is 0, for a scalar as for an array (the kernel takes them the same way)
    assert tl.evaluate(tl.parse("a : R; a * 2"), a=True) == 2.0
    assert tl.evaluate(tl.parse("a : R; a * 2"), a=np.bool_(False)) == 0.0
    assert tl.evaluate(tl.parse("x : [n]R; sum(i:n) x[i]"), x=np.array([True, False, True])) == 2.0


REL = "R : rel[n, n]; x : [n]R; gen(i:n) sum(j:n) [R(i, j)] * x[j]"


@pytest.mark.parametrize("value", [1.5, None, "abc", [(0, 1.5)], [("a", 0)], [(True, 0)]])
def test_relation_of_the_wrong_kind(value):
    with pytest.raises(ShapeError, match="relation R"):
        tl.evaluate(tl.parse(REL), R=value, x=np.ones(2))


def _malformed_csr(field, k, value):
    m = sp.csr_matrix(np.eye(3))
    getattr(m, field)[k] = value
    return m


@pytest.mark.parametrize("matrix", [
    _malformed_csr("indices", 0, 5),  # a column index past its extent
    _malformed_csr("indices", 1, -1),
    _malformed_csr("indptr", 1, 7),  # a row pointer past the end
    _malformed_csr("indptr", 2, 0),  # a decreasing row pointer
])
def test_malformed_csr_is_an_error(matrix):
    with pytest.raises(ShapeError, match="relation R is a malformed sparse matrix"):
        tl.evaluate(tl.parse(REL), R=matrix, x=np.ones(3))


def test_queried_relation_of_extent_zero():
    e = tl.parse("R : rel[n]; a : R; [R(0)] * a")
    k = tl.compile(e)
    for f in (tl.evaluate, lambda e, **ins: k(**ins)):
        assert f(e, R=np.zeros(0, bool), a=1.0) == 0.0
        assert f(e, R=[], n=0, a=1.0) == 0.0
        assert f(e, R=[0], n=1, a=3.0) == 3.0


# --------------------------------------------------------------------------------------------------
# numbers and sizes at the edges


def test_huge_integer_literal():
    # beyond float64: inf, as the literal 1e999
    assert tl.evaluate(tl.parse("a : R; a * 1" + "0" * 400), a=-1.0) == float("-inf")
    assert tl.evaluate(tl.parse("a : R; a + 18446744073709551617"), a=0.0) == 18446744073709551617.0
    # beyond what Python converts: an error that says so, for a value as for an index
    for src in ("a : R; a * " + "9" * 5000, "x : [n]R; sum(i:n) [i < " + "9" * 5000 + "] * x[i]"):
        with pytest.raises(ParseError, match="an integer has more than 4300 digits"):
            tl.parse(src)


BIG = "99999999999999999999999"


@pytest.mark.parametrize("pred, value", [
    (f"i < {BIG}", 3.0), (f"i + {BIG} < n", 0.0), (f"{BIG} * i < n", 1.0), (f"i < n - {BIG}", 0.0),
    ("9223372036854775807 * i < 9223372036854775807", 1.0),  # i = 2 would wrap around in int64
    (f"i < {BIG} and i > 0", 2.0),
])
def test_huge_constant_in_an_index_predicate(pred, value):
    e = tl.parse(f"x : [n]R; sum(i:n) [{pred}] * x[i]")
    assert tl.evaluate(e, x=np.ones(3)) == value
    assert tl.cost(e, n=3) == max(value - 1, 0)


def test_huge_constant_in_a_relation_atom():
    e = tl.parse(f"R : rel[n]; x : [n]R; sum(i:n) [R(i + {BIG})] * x[i]")
    assert tl.evaluate(e, R=[0], x=np.ones(3)) == 0.0


@pytest.mark.parametrize("m", [1, 2])
def test_a_relation_atom_with_a_constant_beyond_int64_outside_any_loop(m):
    """The fuzzer's program: its gradient is ``[real(0, 10^23)] * -1`` (the sum solved away, the bounds the
    atom implies dropped), a relation atom at one point whose argument no int64 holds: false, in the
    evaluator (it raised a raw OverflowError) and in a kernel alike."""
    e = tl.parse("""x : R
real : rel[m, m]
(-(sum(i:m) ([0 <= -i < m and 0 <= i + 99999999999999999999999 < m and real(-i, i + 99999999999999999999999)] * x)))""")
    g = tl.grad(e, "x")
    inputs = {"x": 1.5, "real": np.ones((m, m), dtype=bool)}
    assert tl.evaluate(e, **inputs) == 0.0
    assert tl.evaluate(g, **inputs) == 0.0
    assert tl.compile(g)(**inputs) == 0.0


@pytest.mark.parametrize("src, sizes", [
    ("gen(i:n, j:n) 1.0", {"n": 10**9}),
    ("gen(i:n) 1.0", {"n": 10**15}),
    (f"x : [n]R; sum(i:n) [exists(j:{BIG}) i = j] * x[i]", {"x": np.ones(3)}),
])
def test_sizes_too_large_to_allocate(src, sizes):
    with pytest.raises(ShapeError, match="too large to allocate at .* points .* bytes"):
        tl.evaluate(tl.parse(src), **sizes)


def test_sizes_beyond_2_to_the_53_are_refused():
    e = tl.parse("a : R; sum(i:n) a")
    assert tl.evaluate(e, a=1.0, n=2**53) == 2.0**53
    with pytest.raises(ShapeError, match="size n = 100000000000000000000 is larger than 2"):
        tl.evaluate(e, a=1.0, n=10**20)
    with pytest.raises(ShapeError, match="size n = 100000000000000000000 is larger than 2"):
        tl.compile(e)(a=1.0, n=10**20)


# --------------------------------------------------------------------------------------------------
# the parser, the command line and registered functions


def test_parsing_grows_linearly_with_nesting_depth():
    # 800 nested sums took 15 s (the bounds proof of each access intersected every loop around it)
    for binder in ("sum", "gen"):
        src = "x : [n]R\n" + "".join(f"{binder}(i{k}:n) " for k in range(800)) + "x[i0]"
        start = time.perf_counter()
        tl.parse(src)
        assert time.perf_counter() - start < 10


def test_tl_cost_on_a_file_that_is_not_utf8(tmp_path, capsys):
    path = tmp_path / "bad.tl"
    path.write_bytes(b"x : R\nx \xff\xfe * 2\n")
    assert main([str(path), "--wrt", "x"]) == 2
    assert "not UTF-8 text (byte 0xff at offset 8)" in capsys.readouterr().err


@pytest.mark.parametrize("name, body, words", [
    ("sq", "u**2", "must be a function of SymPy symbols"),
    ("gen", lambda u: u**2, "not a keyword"),
    ("sum", lambda u: u**2, "not a keyword"),
    ("my fn", lambda u: u, "not a valid function name"),
    ("undef", lambda u: sympy.Function("g")(u), "uses g"),
    ("free", lambda u: u * sympy.Symbol("c"), "uses c"),
    ("zeta_", lambda u: sympy.zeta(u), "cannot be evaluated by NumPy"),
    ("fails", lambda u: 1 / 0, "fails on SymPy symbols: ZeroDivisionError"),
])
def test_define_function_checks_its_body(name, body, words):
    with pytest.raises(TypeCheckError, match=words):
        tl.define_function(name, body)
    if name.isidentifier():
        with pytest.raises(TensorLangError):
            tl.parse(f"a : R; {name}(a)")


def test_define_function_still_defines():
    tl.define_function("softplus_r", lambda u: sympy.log(1 + sympy.exp(u)))
    assert tl.evaluate(tl.parse("a : R; softplus_r(a)"), a=0.0) == pytest.approx(np.log(2))


# --------------------------------------------------------------------------------------------------
# NaN propagates through relu, max and min, as in IEEE 754 and NumPy


@pytest.mark.parametrize("src", ["relu(a)", "max(a, 1)", "min(a, 1)", "max(1, a)", "min(1, a)"])
def test_nan_propagates_in_the_evaluator(src):
    assert np.isnan(tl.evaluate(tl.parse(f"a : R; {src}"), a=float("nan")))


# --------------------------------------------------------------------------------------------------
# the kernel cache heals: an entry is used only when its seal (size and checksum) matches


DAMAGES = {
    "truncated": lambda p: os.truncate(p, os.path.getsize(p) // 2),
    "empty": lambda p: os.truncate(p, 0),
    "garbage": lambda p: open(p, "wb").write(b"garbage" * 100),
    "folder": lambda p: (os.unlink(p), os.mkdir(p), open(os.path.join(p, "f"), "w").close()),
    "no seal": lambda p: os.unlink(p + ".sum"),
    "wrong seal": lambda p: open(p + ".sum", "w").write("12 34\n"),
}


@pytest.mark.parametrize("k, damage", list(enumerate(DAMAGES.values())), ids=list(DAMAGES))
def test_a_damaged_cache_entry_is_rebuilt(tmp_path, monkeypatch, k, damage):
    from tensorlang.codegen.build import build_c, intact
    from tensorlang.codegen.kernel import generate

    monkeypatch.setenv("TENSORLANG_CACHE", str(tmp_path))
    # a library this process has never loaded (damaging a loaded one in place would kill the process)
    e = tl.parse(f"gen(i:n) x[i] * {k + 2.5} + 0.125", x="[n]R")
    path = build_c(generate(e)[0])
    assert intact(path)
    damage(path)
    assert not intact(path)
    kernel = tl.compile(e)
    assert kernel.library == path and intact(path)
    assert kernel(x=np.arange(3.0)).tolist() == [0.125, k + 2.625, 2 * k + 5.125]


def test_a_truncated_library_is_never_loaded(tmp_path):
    # in a fresh process (loading a truncated library used to kill it with SIGBUS)
    code = textwrap.dedent("""
        import os, numpy as np, tensorlang as tl
        from tensorlang.codegen.build import build_c, load
        from tensorlang.codegen.kernel import generate
        e = tl.parse("gen(i:n) x[i] * 4.5", x="[n]R")
        path = build_c(generate(e)[0])  # built, not loaded
        os.truncate(path, os.path.getsize(path) // 3)
        try:
            load(path)
        except tl.TensorLangError as exc:
            print("refused:", "damaged" in str(exc))
        print(tl.compile(e)(x=np.ones(2)).tolist())
    """)
    env = {**os.environ, "TENSORLANG_CACHE": str(tmp_path / "fresh")}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == ["refused: True", "[4.5, 4.5]"]


@pytest.mark.parametrize("where", ["a file", "under a file", "read-only"])
def test_an_unusable_cache_location_is_a_tensorlang_error(tmp_path, monkeypatch, where):
    spot = tmp_path / "spot"
    if where == "read-only":
        if os.geteuid() == 0:
            pytest.skip("root writes anywhere")
        spot.mkdir()
        spot.chmod(0o500)
    else:
        spot.write_text("not a folder")
    monkeypatch.setenv("TENSORLANG_CACHE", str(spot / "sub" if where == "under a file" else spot))
    with pytest.raises(TensorLangError, match="kernel cache .* (not a usable directory|not writable)"):
        tl.compile(tl.parse("gen(i:n) x[i] * 3.5", x="[n]R"))


# --------------------------------------------------------------------------------------------------
# compiled kernels agree with the evaluator on all of the above


def _both(src: str, **inputs):
    """``(evaluator value, kernel value)`` of ``src`` at ``inputs``."""
    e = tl.parse(src)
    with np.errstate(all="ignore"):
        return tl.evaluate(e, **inputs), tl.compile(e)(**inputs)


@pytest.mark.parametrize("src, x, value", [
    ("x : R; x * 99999999999999999999", 1.0, 1e20),
    ("x : R; x + 18446744073709551617", 0.0, 18446744073709551617.0),
    ("x : R; x + 18446744073709551616", 0.0, 2.0**64),
    ("x : R; x + -9223372036854775808", 0.0, -(2.0**63)),
    ("x : R; x * " + "9" * 400, 1.0, float("inf")),
])
def test_integer_literals_beyond_int64_in_a_kernel(src, x, value):
    assert _both(src, x=x) == (value, value)


@pytest.mark.parametrize("src, inputs, value", [
    ("a : R; sum(i:n - 1, j:n - 1) a", {"a": 1.0, "n": 0}, 0.0),
    ("a : R; sum(i:n - 1, j:n - 1) a", {"a": 1.0, "n": 3}, 4.0),
    ("a : R; sum(i:n - 1) a", {"a": 1.0, "n": 0}, 0.0),
    ("x : [n]R; sum(i:n - 3) x[0]", {"x": np.zeros(0)}, 0.0),
    ("x : [n]R; sum(i:n - 3) x[0]", {"x": np.ones(5)}, 2.0),
])
def test_negative_extents_in_a_kernel(src, inputs, value):
    assert _both(src, **inputs) == (value, value)


def test_a_constant_beyond_every_size_leaves_no_loop_in_a_kernel():
    # isl wrote a loop from 2^63 (wrapping to -2^63 in C: writes far outside the output, for ever)
    e = tl.parse("a : R; gen(k:n + 1) [k = 9223372036854775807] * a")
    assert "9223372036854775808" not in tl.compile(e).source
    for n in (0, 2):
        ref, got = _both("a : R; gen(k:n + 1) [k = 9223372036854775807] * a", a=1.0, n=n)
        assert np.array_equal(got, ref) and not got.any()


def test_negative_extent_of_a_kernel_output():
    for x in (np.zeros(0), np.arange(3.0)):
        ref, got = _both("x : [n]R; gen(i:n - 1) x[i] * 2", x=x)
        assert got.shape == ref.shape == (max(len(x) - 1, 0),) and np.array_equal(got, ref)


@pytest.mark.parametrize("body", ["relu(a)", "max(a, 1)", "min(a, 1)", "max(1, a)", "min(1, a)", "abs(a)"])
def test_nan_propagates_in_a_kernel_and_its_gradient(body):
    e = tl.parse(f"a : R; {body}")
    assert np.isnan(tl.compile(e)(a=float("nan")))
    g = tl.grad(e, "a")
    for a in (float("nan"), 2.0, -2.0):
        ref, got = tl.evaluate(g, a=a), tl.compile(g)(a=a)
        assert got == ref or (np.isnan(got) and np.isnan(ref))


@pytest.mark.parametrize("name", ["M_PI", "INFINITY", "NAN", "linux", "unix", "INT64_MAX", "_Bool", "errno",
                                  "int", "tl_x", "sizes", "out0", "x_"])
def test_names_that_clash_with_c(name):
    assert _both(f"{name} : [n]R; a : R; sum(i:n) {name}[i] * a", **{name: np.arange(3.0), "a": 2.0}) == (6.0, 6.0)


def test_names_that_start_with_tl_compile():
    src = "tl_a : R; x : [tl_n]R; sum(tl_i:tl_n) let tl_t = x[tl_i] in tl_t * tl_a"
    assert _both(src, tl_a=2.0, x=np.ones(3)) == (6.0, 6.0)


@pytest.mark.parametrize("src, inputs", [
    ("p : (R, [n]R); p", {"p": (1.0, np.arange(3.0))}),
    ("p : [n](R, R); p", {"p": (np.arange(3.0), np.ones(3))}),
    ("p : [n](R, [m]R); p", {"p": (np.arange(3.0), np.ones((3, 2)))}),
    ("x : [n]R; gen(i:n) (x[i], x[i] * 2)", {"x": np.arange(3.0)}),
    ("a : R; x : [n]R; gen(i:n) (a, (x[i], a))", {"a": 2.0, "x": np.arange(3.0)}),
])
def test_pair_inputs_and_tensors_of_pairs_as_outputs(src, inputs):
    ref, got = _both(src, **inputs)

    def same(a, b):
        if isinstance(a, tuple):
            return isinstance(b, tuple) and len(a) == len(b) and all(same(p, q) for p, q in zip(a, b))
        return np.array_equal(a, b)

    assert same(got, ref), (got, ref)


def test_bool_scalar_is_the_same_number_in_both_paths():
    assert _both("a : R; a * 2", a=True) == (2.0, 2.0)
    assert _both("a : R; a * 2", a=np.bool_(False)) == (0.0, 0.0)


@pytest.mark.parametrize("matrix", [
    _malformed_csr("indices", 0, 5), _malformed_csr("indptr", 1, 7), _malformed_csr("indptr", 2, 0),
])
def test_malformed_csr_is_refused_by_a_kernel(matrix):
    k = tl.compile(tl.parse(REL))
    with pytest.raises(ShapeError, match="relation R is a malformed sparse matrix"):
        k(R=matrix, x=np.ones(3))


@pytest.mark.parametrize("value", [1.5, None, "abc", [(0, 1.5)]])
def test_relation_of_the_wrong_kind_in_a_kernel(value):
    with pytest.raises(ShapeError, match="relation R"):
        tl.compile(tl.parse(REL))(R=value, x=np.ones(2))


# --------------------------------------------------------------------------------------------------
# non-finite values: an empty sum is 0 and a false bracket is a strong zero, in both paths


@pytest.mark.parametrize("src, inputs, value", [
    ("a : R; sum(i:n - 1) a", {"a": float("nan"), "n": 0}, 0.0),
    ("a : R; sum(i:n) a * a", {"a": float("inf"), "n": 0}, 0.0),
    ("x : [n]R; y : [m]R; sum(i:n, j:m) x[i] * y[j]", {"x": np.array([np.inf]), "y": np.zeros(0)}, 0.0),
    ("r : R; ([n > 3] * 1e999) * sin(r)", {"r": float("nan"), "n": 3}, 0.0),
    ("x : [n]R; y : [n]R; sum(i:n) [i > 0] * x[i] * y[i]", {"x": np.array([np.inf, 1.0]), "y": np.array([0.0, 2.0])},
     2.0),
    ("a : R; x : R; let t = [n > 3] * a in t * x + 1", {"a": 2.0, "x": float("inf"), "n": 3}, 1.0),  # a kernel inlines t
])
def test_empty_sums_and_false_brackets_are_zero_whatever_they_hold(src, inputs, value):
    assert _both(src, **inputs) == (value, value)


def test_more_nested_loops_than_numpy_has_axes():
    e = tl.parse("x : R; " + "".join(f"sum(z{k}:1) " for k in range(70)) + "x")
    with pytest.raises(tl.UnsupportedError, match="NumPy at most 64"):
        tl.evaluate(e, x=1.0)
    assert tl.compile(e)(x=1.5) == 1.5
