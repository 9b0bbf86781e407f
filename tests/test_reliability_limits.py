"""Regression tests for the second adversarial pass over kernels, the build and Dask: each case was a
wrong number, a hang or a raw Python exception, and is now the evaluator's value or a
``TensorLangError`` naming the cause (docs/reliability.md, "Limits")."""
import errno
import os
import resource
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np
import pytest
import scipy.sparse as sp

import tensorlang as tl
from tensorlang.errors import CompileError, ShapeError, TensorLangError, TypeCheckError, UnsupportedError

BEYOND = "10000000000000000000"  # 10^19 > 2^63
FAR_BEYOND = "1" + "0" * 100


def _both(src: str, **inputs):
    e = tl.parse(src)
    return tl.evaluate(e, **inputs), tl.compile(e)(**inputs)


# --------------------------------------------------------------------------------------------------
# extents, bounds and counts never wrap around in a kernel's 64-bit integers


@pytest.mark.parametrize("src, inputs, value", [
    (f"a : R\nsum(i:n - {BEYOND}) a", {"a": 1.5, "n": 3}, 0.0),
    (f"a : R\nsum(i:n - {FAR_BEYOND}, j:n - 1) a * a", {"a": 1.5, "n": 3}, 0.0),
    (f"a : R\nsum(i:n, j:n - {BEYOND}) a", {"a": 1.5, "n": 2**53}, 0.0),
    ("a : R\nsum(i:n, j:m) a", {"a": 1.5, "n": 2**40, "m": 2**40}, 1.5 * 2.0**80),
    (f"a : R\nsum(i:n + {BEYOND}) a", {"a": 1.5, "n": 3}, 1.5e19),
    ("a : R\nsum(i:n, j:n, k:n) a", {"a": 1.0, "n": 2**53}, 2.0**159),
    (f"x : [n]R\nsum(i:n) [i < {BEYOND}] * x[i]", {"x": np.ones(4)}, 4.0),
    (f"x : [n]R\nsum(i:n) [i + {BEYOND} > 3] * x[i]", {"x": np.ones(4)}, 4.0),
])
def test_extents_beyond_int64_are_what_the_evaluator_says(src, inputs, value):
    assert _both(src, **inputs) == (value, value)


def test_an_output_extent_beyond_int64_is_empty_in_both_paths():
    ref, got = _both(f"a : R\ngen(i:n - {BEYOND}) a", a=1.5, n=3)
    assert ref.shape == got.shape == (0,)


def test_a_constant_beyond_int64_in_an_unreachable_access_compiles():
    src = ("b : [m][q]R\ngen(j:m + 1) sum(k:m) [0 <= 2*j + m + 9223372036854775807 < m and 0 <= j + 3 < q] * "
           "b[2*j + m + 9223372036854775807, j + 3]")
    ref, got = _both(src, b=np.ones((5, 5)))
    assert np.array_equal(ref, got) and not got.any()


def test_a_loop_that_int64_cannot_count_is_refused_by_name():
    e = tl.parse(f"x : [n]R\nsum(i:n, j:{BEYOND}) x[i]")
    with pytest.raises(UnsupportedError, match="extent 10000000000000000000 reaches .* beyond a kernel.s 64-bit"):
        tl.compile(e)


# --------------------------------------------------------------------------------------------------
# inputs a kernel cannot take are refused by name before anything is allocated or run


def test_an_output_too_large_to_allocate_names_its_shape_and_bytes():
    k = tl.compile(tl.parse("x : [n]R\ngen(i:n, j:n) x[i] * x[j]"))
    with pytest.raises(ShapeError, match=r"output of shape \(3200000, 3200000\) takes 81,920,000,000,000 bytes"):
        k(x=np.ones(3_200_000))


def test_an_input_copy_too_large_to_allocate_names_the_input():
    k = tl.compile(tl.parse("x : [n]R\nsum(i:n) x[i]"))
    view = np.broadcast_to(np.ones(1), (2**40,))
    with pytest.raises(ShapeError, match=r"input x \(shape \(1099511627776,\)\) must be copied .* 8,796,093,022,208"):
        k(x=view)


def test_more_dimensions_than_numpy_has_is_refused_when_compiling():
    e = tl.parse("x : R\ngen(" + ", ".join(f"z{k}:1" for k in range(70)) + ") x")
    with pytest.raises(UnsupportedError, match="output has 70 dimensions, and a NumPy array at most 64"):
        tl.compile(e)


def _coo_past_its_shape():
    coo = sp.coo_matrix(np.eye(3))
    coo.row[0] = 7
    return coo


@pytest.mark.parametrize("relation, words", [
    (_coo_past_its_shape, r"malformed sparse matrix: entry \(7, 0\) is outside its shape \(3, 3\)"),
    (lambda: np.array(True), "got a 0-d array"),
])
def test_malformed_relations_are_the_same_error_in_both_paths(relation, words):
    e = tl.parse("E : rel[n, n]\nx : [n]R\ngen(i:n) sum(j:n) [E(i, j)] * x[j]")
    for run in (lambda **kw: tl.evaluate(e, **kw), tl.compile(e)):
        with pytest.raises(ShapeError, match=words):
            run(E=relation(), x=np.ones(3))


@pytest.mark.parametrize("value", [
    np.array([1.0, 2.5], dtype=object),
    np.array([1, 2], dtype=object),
    [__import__("fractions").Fraction(1, 2), 2],
    np.array([True, 3.0], dtype=object),
])
def test_object_arrays_of_real_numbers_are_taken_by_both_paths(value):
    ref, got = _both("x : [n]R\nsum(i:n) x[i] * x[i]", x=value)
    assert got == pytest.approx(ref)


@pytest.mark.parametrize("value", [np.array([1.0, "a"], dtype=object), np.array([1.0, None], dtype=object)])
def test_object_arrays_of_other_things_are_refused_by_both_paths(value):
    e = tl.parse("x : [n]R\nsum(i:n) x[i]")
    for run in (lambda **kw: tl.evaluate(e, **kw), tl.compile(e)):
        with pytest.raises(ShapeError, match="input x .*must hold real numbers"):
            run(x=value)


def test_a_value_beyond_float32_is_refused_by_a_float32_kernel():
    k = tl.compile(tl.parse("x : [n]R\nsum(i:n) x[i]"), dtype="float32")
    with pytest.raises(ShapeError, match=r"input x holds 1e\+308, beyond the range .* float32 .*dtype='float64'"):
        k(x=np.array([1.0, 1e308]))
    assert k(x=np.array([1.0, 3e38, -np.inf])) == -np.inf  # infinities are values, not overflows


# --------------------------------------------------------------------------------------------------
# the public calls check their arguments' types


@pytest.mark.parametrize("call, words", [
    (lambda e: tl.compile("x : R; x"), "tl.compile: expr must be a program .*got str"),
    (lambda e: tl.evaluate("x", x=1.0), "tl.evaluate: expr must be a program"),
    (lambda e: tl.cost("x"), "tl.cost: expr must be a program"),
    (lambda e: tl.to_ssa("x"), "tl.to_ssa: expr must be a program"),
    (lambda e: tl.simplify(3), "tl.simplify: expr must be a program .*got int 3"),
    (lambda e: tl.check(None), "tl.check: expr must be a program"),
    (lambda e: tl.parse(3), "tl.parse: src must be program text .*got int 3"),
    (lambda e: tl.parse(b"x : R; x"), "tl.parse: src must be program text .*got bytes"),
    (lambda e: tl.compile(e, target=3), "tl.compile: target must be a str"),
    (lambda e: tl.compile(e, sanitize="yes"), "tl.compile: sanitize must be True or False"),
    (lambda e: tl.export(e, "m"), "tl.export: missing a required argument: 'directory'"),
    (lambda e: tl.export(e, 3, "/tmp"), "tl.export: name must be a str"),
    (lambda e: tl.export(3, "m", "/tmp"), "tl.export: kernels must be a Kernel or program"),
    (lambda e: tl.grad(e, 3), "wrt is a name or an input variable"),
    (lambda e: tl.derivative(e), "tl.derivative: missing a required argument: 'wrt'"),
    (lambda e: tl.adjoint(e, "x", "y", "z"), "tl.adjoint: too many positional arguments"),
])
def test_wrong_argument_types_are_named(call, words):
    e = tl.parse("x : [n]R\nsum(i:n) x[i] * x[i]")
    with pytest.raises(TypeCheckError, match=words):
        call(e)


@pytest.mark.parametrize("dtype", [np.float32, np.dtype("float32"), "float32", "f4"])
def test_numpy_dtypes_name_a_kernel_dtype(dtype):
    assert tl.compile(tl.parse("x : R; x * 0.5"), dtype=dtype).dtype == "float32"


# --------------------------------------------------------------------------------------------------
# the build: time limits, a cache that heals from any damage it can see, a full disk, a read-only cache


def test_a_compiler_that_never_returns_is_stopped_with_the_command_and_its_limit(tmp_path, monkeypatch):
    hung = tmp_path / "cc"
    hung.write_text("#!/bin/sh\nsleep 1000\n")
    hung.chmod(0o755)
    monkeypatch.setenv("TENSORLANG_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CC", str(hung))
    monkeypatch.setenv("TENSORLANG_BUILD_TIMEOUT", "1")
    start = time.monotonic()
    with pytest.raises(CompileError, match=rf"command '{hung} .*' did not finish within its time limit of 1 s"
                                           r".*TENSORLANG_BUILD_TIMEOUT=<seconds>"):
        tl.compile(tl.parse("x : R; x * 2.5"))
    assert time.monotonic() - start < 30  # the three probes and the build, a second each
    assert not [p for p in (tmp_path / "cache").iterdir()]  # no temporary left behind


def test_a_build_time_limit_that_is_not_a_number_is_named(monkeypatch):
    from tensorlang.codegen.build import build_timeout

    monkeypatch.setenv("TENSORLANG_BUILD_TIMEOUT", "soon")
    with pytest.raises(TensorLangError, match="TENSORLANG_BUILD_TIMEOUT='soon' is not a positive number"):
        build_timeout()


@pytest.mark.parametrize("damage", ["folder", "link"])
def test_a_seal_that_is_not_a_file_is_healed(tmp_path, monkeypatch, damage):
    from tensorlang.codegen.build import build_c, intact
    from tensorlang.codegen.kernel import generate

    monkeypatch.setenv("TENSORLANG_CACHE", str(tmp_path))
    e = tl.parse(f"gen(i:n) x[i] * {3.25 if damage == 'folder' else 3.75}", x="[n]R")
    path = build_c(generate(e)[0])
    os.unlink(path + ".sum")
    if damage == "folder":
        os.mkdir(path + ".sum")
        (tmp_path / (os.path.basename(path) + ".sum") / "inside").write_text("x")
    else:
        os.symlink("/dev/null", path + ".sum")
    kernel = tl.compile(e)
    assert kernel.library == path and intact(path) and os.path.isfile(path + ".sum")
    assert kernel(x=np.ones(2)).tolist() == [3.25, 3.25] if damage == "folder" else [3.75, 3.75]


def test_a_full_cache_builds_in_a_temporary_folder_and_leaves_nothing_half_written(tmp_path, monkeypatch):
    from tensorlang.codegen import build

    cache = tmp_path / "cache"
    monkeypatch.setenv("TENSORLANG_CACHE", str(cache))
    staged = build._staged

    def full_disk(source, directory, *rest):
        if os.path.samefile(directory, cache):
            partial = os.path.join(directory, "partial.tmp.c")
            open(partial, "w").close()  # what a write cut short leaves, which _staged removes
            os.unlink(partial)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return staged(source, directory, *rest)

    monkeypatch.setattr(build, "_staged", full_disk)
    with pytest.warns(RuntimeWarning, match=r"kernel cache .* has no room left \(No space left on device\)"):
        kernel = tl.compile(tl.parse("x : R; x * 6.5"))
    assert kernel(x=2.0) == 13.0
    assert not list(cache.iterdir())
    assert not kernel.library.startswith(str(cache))


def _without_room(limit: int) -> subprocess.CompletedProcess:
    """A fresh process whose files may hold ``limit`` bytes at most (RLIMIT_FSIZE: EFBIG for a write
    past it, as a full disk gives ENOSPC) compiling a new kernel into an empty cache."""
    code = textwrap.dedent(f"""
        import os, resource, signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        import tensorlang as tl
        from tensorlang.codegen.build import c_flags
        c_flags()  # the compiler's probes, before the limit
        resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, resource.RLIM_INFINITY))
        try:
            tl.compile(tl.parse("x : R; x * 4.5"))
        except tl.TensorLangError as exc:
            print(type(exc).__name__, exc)
        print(sorted(os.listdir(os.environ["TENSORLANG_CACHE"])))
    """)
    cache = tempfile.mkdtemp()
    return subprocess.run([sys.executable, "-c", code], env={**os.environ, "TENSORLANG_CACHE": cache},
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("limit, where", [(200, "File too large"), (8000, "File size limit exceeded")])
def test_no_room_anywhere_is_a_compile_error_saying_so(limit, where):
    r = _without_room(limit)  # 200 bytes: the source cannot be written; 8000: the linker's output cannot
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("CompileError no room to build the kernel: not in the cache") and where in lines[0]
    assert lines[1] == "[]"  # nothing half-written left in the cache


def test_a_read_only_cache_serves_the_kernels_it_holds(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("TENSORLANG_CACHE", str(cache))
    held = tl.parse("x : R; x * 5.5")
    from tensorlang.codegen.build import build_c
    from tensorlang.codegen.kernel import generate

    build_c(generate(held)[0])  # built, not loaded in this process
    cache.chmod(0o555)
    if os.geteuid() == 0:  # root writes anywhere: the cache then reads as read-only to the build alone
        access = os.access
        monkeypatch.setattr(os, "access", lambda p, mode: access(p, mode) and not (
            str(p) == str(cache) and mode & os.W_OK))
    try:
        assert tl.compile(held)(x=2.0) == 11.0
        with pytest.raises(TensorLangError, match=f"kernel cache {cache} .* not writable, and does not hold"):
            tl.compile(tl.parse("x : R; x * 7.5"))
    finally:
        cache.chmod(0o755)


# --------------------------------------------------------------------------------------------------
# Dask


@pytest.fixture
def relation_kernel():
    pytest.importorskip("dask.array")
    return tl.compile(tl.parse("E : rel[n, n]\nx : [n]R\ngen(i:n) sum(j:n) [E(i, j)] * x[j]"))


@pytest.mark.parametrize("e_chunks, x_chunks", [(2, None), (6, 2), (4, 3), ((2, 3), None)])
def test_a_relation_given_as_a_chunked_dask_array_of_bools(relation_kernel, e_chunks, x_chunks):
    import dask.array as da

    rng = np.random.default_rng(5)
    mask = rng.random((6, 6)) < 0.4
    x = np.linspace(-1, 1, 6)
    lazy_x = da.from_array(x, chunks=x_chunks) if x_chunks else x
    got = relation_kernel(E=da.from_array(mask, chunks=e_chunks), x=lazy_x).compute(scheduler="sync")
    np.testing.assert_allclose(got, mask.astype(float) @ x)
    eye = relation_kernel(E=da.from_array(np.eye(6, dtype=bool), chunks=e_chunks), x=lazy_x)
    np.testing.assert_allclose(eye.compute(scheduler="sync"), x)


def test_a_dask_input_of_unknown_chunk_sizes_says_how_to_learn_them():
    da = pytest.importorskip("dask.array")
    k = tl.compile(tl.parse("x : [n]R\nsum(i:n) x[i] * x[i]"))
    x = da.from_array(np.linspace(-3, 3, 10), chunks=3)
    with pytest.raises(ShapeError, match=r"input x is a Dask array of unknown shape .*x.compute_chunk_sizes\(\)"):
        k(x=x[x > -2])
    kept = np.linspace(-3, 3, 10)[np.linspace(-3, 3, 10) > -2]
    assert float(k(x=x[x > -2].compute_chunk_sizes()).compute(scheduler="sync")) == pytest.approx(kept @ kept)


def test_a_file_where_the_block_library_folder_goes(tmp_path):
    pytest.importorskip("dask.array")
    code = textwrap.dedent("""
        import os, tempfile, numpy as np, dask.array as da, tensorlang as tl
        open(os.path.join(tempfile.gettempdir(), f"tensorlang-dask-{os.getuid()}"), "w").write("in the way")
        k = tl.compile(tl.parse("x : [n]R\\nsum(i:n) x[i] * x[i]"))
        print(float(k(x=da.from_array(np.arange(6.0), chunks=2)).compute(scheduler="threads")))
    """)
    env = {**os.environ, "TMPDIR": str(tmp_path), "TENSORLANG_CACHE": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "55.0"


def test_temporaries_beyond_the_machines_memory_are_refused_naming_the_sizes(monkeypatch):
    """The workspace is sized before it is allocated; past the machine's memory the call is a ShapeError
    naming the bytes and the sizes (it was a NameError in the message's making)."""
    from tensorlang.codegen import runtime

    src = ("x : [n][m]R\nsum(i:n, j:m) [i < n - 1 and j < m - 1] * ((x[i+1, j] - x[i, j]) * (x[i+1, j] - x[i, j]) "
           "+ (x[i, j+1] - x[i, j]) * (x[i, j+1] - x[i, j])) * (x[i, j] * x[i, j] + 1)")
    hessian = tl.compile(tl.hessian(tl.parse(src), "x", sparse=True))
    assert hessian.values.meta.get("workspace")
    monkeypatch.setattr(runtime, "workspace_bytes", lambda meta, sizes, dtype: runtime.PHYSICAL_MEMORY + 1)
    with pytest.raises(tl.ShapeError, match="temporaries take [0-9,]+ bytes at \\{'n': 8, 'm': 8\\}"):
        hessian(x=np.zeros((8, 8)))
