"""Code generation (issue 6): compiled kernels against the reference evaluator, the shape of the loops
isl produces, input checking, compiler failures, the build cache, export, CSR relations, CUDA.

Generated programs are compiled in batches: many kernels (distinct entry points) in one translation
unit per compiler call, so hundreds of programs cost a few compiler runs.
"""
from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import strategies as st
from scipy.special import logsumexp as scipy_logsumexp

import tensorlang as tl
from tensorlang.codegen import Kernel, compile as tl_compile, export as tl_export
from tensorlang.codegen.build import build_c, c_flags, load, nvcc_path, vector_math_available
from tensorlang.codegen.c import CEmitter
from tensorlang.codegen.generate import generate, program_meta
from tensorlang.codegen.lower import lower
from tensorlang.codegen.runtime import Runner
from tensorlang.errors import CompileError, ShapeError
from tensorlang.nodes import IndexMapType

try:  # tests/ on sys.path (pytest's default for a folder without __init__.py)
    import nvrtc
    from oracles import close
    from strategies import collect, examples_and_gradients, nested_let_programs, program_and_inputs, type_shape
except ImportError:  # tests/ as a package
    from tests import nvrtc
    from tests.oracles import close
    from tests.strategies import (
        collect, examples_and_gradients, nested_let_programs, program_and_inputs, type_shape,
    )

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
ROOT = Path(__file__).resolve().parent.parent


def run_batch(exprs_and_inputs, fuse: bool = True, dtype: str = "float64", lanes: int = CEmitter.lanes,
              sources: list | None = None, vector_math: bool | None = None):
    """Compile every program into one library and return ``[(expr, inputs, got, ref)]`` (the entry points'
    C text appended to ``sources`` if given)."""
    emitters, progs = [], []
    for k, (e, _) in enumerate(exprs_and_inputs):
        prog, namer = lower(e, fuse_lets=fuse)
        em = CEmitter(prog, namer, dtype, f"tl_t{k}")
        em.lanes = lanes
        text = em.emit_entry()
        if sources is not None:
            sources.append(text)
        emitters.append(em)
        progs.append(prog)
    lib = load(build_c(CEmitter.translation_unit(emitters), flags=c_flags(vector_math=vector_math)))
    out = []
    for k, ((e, ins), prog) in enumerate(zip(exprs_and_inputs, progs)):
        runner = Runner(program_meta(prog, CEmitter, dtype, f"tl_t{k}"), lib, error=ShapeError)
        got = runner(**ins)
        with np.errstate(all="ignore"):
            ref = tl.evaluate(e, **ins)
        out.append((e, ins, got, ref))
    return out


def _check(results):
    bad = [(str(e), ins, got, ref) for e, ins, got, ref in results if not close(got, ref)]
    assert not bad, f"{len(bad)} of {len(results)} kernels differ from the evaluator; first: {bad[0]}"


# -- correctness on generated programs ----------------------------------------------------------------


def test_generated_programs_match_the_evaluator():
    cases = collect(program_and_inputs(), 300)
    _check(run_batch(cases))


def _same_bits(a, b) -> bool:
    if isinstance(a, tuple):
        return all(_same_bits(x, y) for x, y in zip(a, b))
    return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)


_SUMMANDS = ("A[i, j]", "z[i + j]", "y[j] * z[i + j]", "A[i, j] * y[j]", "exp(A[i, j])", "z[i + j] * z[i + j]",
             "sin(z[i + j]) * y[j]", "A[k, j] * A[i, j]", "[j <= k] * A[i, j]")
_GUARDS = ("", "[j < m - 1] * ", "[j >= 1] * ", "[2 * j < m] * ", "[j <= k] * ", "[j <= i] * ", "[i + j < m] * ")
_OUTERS = ("gen(i:n) {R}", "gen(i:n) {R} * x[i]", "sum(i:n) ({R} - x[i]) * ({R} - x[i])",
           "gen(i:n) tanh({R}) + {Q}", "sum(i:n) [i >= 1] * {R} * {Q}", "gen(k:n, i:n) {R} + S[k, i]",
           "gen(k:n) sum(i:n) {R} * {Q}", "gen(i:n) [i >= 2] * {R}")


@st.composite
def lane_programs(draw):
    """Reductions inside the loops of generators and sums, in the shapes lane blocking sees: the
    reduction's domain fixed (or depending on an outer variable ``k``, or on the blocked ``i`` itself),
    two reductions in one body, guards around the point."""
    outer = draw(st.sampled_from(_OUTERS))
    red = [f"(sum(j:m) {draw(st.sampled_from(_GUARDS))}{draw(st.sampled_from(_SUMMANDS))})" for _ in range(2)]
    src = outer.replace("{R}", red[0]).replace("{Q}", red[1])
    if "k" not in outer:
        src = src.replace("k", "i")
    return tl.parse(src, x="[n]R", y="[m]R", A="[n][m]R", z="[n + m - 1]R", S="[n][n]R")


def test_lane_blocking_changes_no_bit():
    """Lane blocking computes 8 points of an innermost loop at once, each sum in its own order: on
    generated programs at sizes up to 20 (full blocks and remainders) the kernels equal the evaluator
    and, bit for bit, the same kernels without blocking (both with glibc's scalar ``exp`` and friends:
    the vector ones, which a vectorised loop may call, differ in the last bits)."""
    cases = collect(program_and_inputs(exprs=lane_programs(), max_size=20), 150)
    cases += collect(program_and_inputs(max_size=20), 100)
    sources: list = []
    _check(run_batch(cases))
    blocked = run_batch(cases, sources=sources, vector_math=False)
    plain = run_batch(cases, lanes=0, vector_math=False)
    _check(blocked)
    assert sum("tl_lacc" in src for src in sources) >= 75  # the blocked path is exercised
    diff = [str(e) for (e, _, got, _), (_, _, ref, _) in zip(blocked, plain) if not _same_bits(got, ref)]
    assert not diff, f"{len(diff)} kernels change with lane blocking; first: {diff[0]}"


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 37])
@pytest.mark.parametrize("m", [1, 5, 16])
def test_lane_blocked_convolution_loss_and_gradient(n, m):
    """The convolution loss and its gradient: blocked outputs, the remainder, fewer points than lanes."""
    e = tl.parse((EXAMPLES / "deconv_loss.tl").read_text())
    r = np.random.default_rng(n * 100 + m)
    ins = {"x": r.standard_normal(n + m - 1), "c": r.standard_normal(m), "z": r.standard_normal(n)}
    for prog in (e, tl.grad(e, wrt="c"), tl.grad(e, wrt="x")):
        k = tl_compile(prog)
        assert "tl_lacc" in _body(k)
        assert close(k(**ins), tl.evaluate(prog, **ins))


def test_nested_let_programs_with_stored_temporaries():
    """Without fusion every let is a malloc'd temporary (or a scalar local): the other code path."""
    cases = collect(program_and_inputs(exprs=nested_let_programs()), 40)
    _check(run_batch(cases, fuse=False))
    _check(run_batch(cases[:20], fuse=True))


def test_float32_on_request():
    cases = collect(program_and_inputs(allow_black_boxes=False), 30)
    for e, ins, got, ref in run_batch(cases, dtype="float32"):
        g = got if isinstance(got, tuple) else (got,)
        r = ref if isinstance(ref, tuple) else (ref,)
        for a, b in zip(_flat(g), _flat(r)):
            a, b = np.asarray(a), np.asarray(b)
            assert np.allclose(a, b, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(b).max(initial=0)))), str(e)


def _flat(t):
    for x in t:
        if isinstance(x, tuple):
            yield from _flat(x)
        else:
            yield x


def test_adjoints_of_generated_programs():
    cases = collect(program_and_inputs(allow_pairs=False, allow_relations=False), 60)
    rng = np.random.default_rng(0)
    batch = []
    for e, ins in cases:
        wrt = [n for n, t in e.free_vars.items()][:1]
        if not wrt:
            continue
        a = tl.adjoint(e, wrt)
        sizes = {s: ins[s] for s in e.sizes if s in ins}
        ains = {}
        for name, t in a.free_vars.items():
            if name in ins:
                ains[name] = ins[name]
            else:
                shape = type_shape(t, {**sizes, **{s: ins.get(s, 2) for s in a.sizes}})
                ains[name] = rng.uniform(-1, 1, shape) if shape else float(rng.uniform(-1, 1))
        for s in a.sizes:
            ains[s] = ins.get(s, 2)
        batch.append((a, ains))
    assert len(batch) >= 20
    _check(run_batch(batch))


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.tl")), ids=lambda p: p.stem)
def test_examples(path):
    e = tl.parse(path.read_text())
    k = tl_compile(e)
    rng = np.random.default_rng(1)
    sizes = {"n": 9, "m": 4, "B": 3, "k": 3, "p": 11}
    ins = {}
    for name, t in e.free_vars.items():
        if isinstance(t, IndexMapType):
            ins[name] = rng.integers(0, sizes[t.extent.size_vars[0].name], sizes[t.length.size_vars[0].name])
            continue
        shape = type_shape(t, sizes)
        ins[name] = rng.standard_normal(shape) if shape else 0.75
    for s in e.sizes:
        ins[s] = sizes[s]
    assert close(k(**ins), tl.evaluate(e, **ins))
    assert "void tl_kernel" in k.source


# -- the loops isl produces ---------------------------------------------------------------------------


def _body(k: Kernel) -> str:
    return k.source[k.source.index("void tl_kernel"):]


def test_fusion_diag_dot_is_constant_time():
    """``let A = diag(x) in dot(A[:,0], A[0,:])``: A is never stored, the sum collapses to one point."""
    k = tl_compile(tl.parse((EXAMPLES / "diag_dot.tl").read_text()))
    body = _body(k)
    assert "for (" not in body and "malloc" not in body
    x = np.arange(1.0, 6.0)
    assert k(x=x) == 1.0


def test_fusion_conv_loss_stores_nothing():
    k = tl_compile(tl.parse((EXAMPLES / "deconv_loss.tl").read_text()))
    assert "malloc" not in _body(k)
    # the loss's sum runs in parallel: chunks of fixed length (per-chunk partial sums, no atomics)
    assert "#pragma omp parallel for" in _body(k) and "tl_part" in _body(k)


@pytest.mark.parametrize("src, numpy", [
    ("let s = gen(i:n) max(j:m) x[i, j] in sum(i:n) s[i] + log(sum(j:m) exp(x[i, j] - s[i]))",
     lambda x: np.sum(scipy_logsumexp(x, axis=1))),
    ("let s = gen(i:n) sum(j:m) x[i, j] in sum(i:n) s[i] * sum(j:m) x[i, j] * s[i]",
     lambda x: np.sum(x.sum(axis=1) ** 3)),
])
def test_fusion_keeps_a_reduction_read_again_inside_a_loop(src, numpy):
    """A binding whose value is a maximum or a sum, read as ``s[i]`` both outside and inside ``sum(j:m)`` (one
    node of the program's DAG in two places), is stored: substituted, it would be computed ``m`` times more
    for every ``i`` (``O(n m^2)`` work where the certificate counts ``O(n m)``)."""
    k = tl_compile(tl.parse(src, x="[n][m]R"))
    assert "temp s[n]" in k.explain("statements")
    x = np.random.default_rng(5).normal(size=(7, 11))
    assert k(x=x) == pytest.approx(numpy(x), rel=1e-12)


def test_parallel_loops_have_a_serial_copy_below_the_threshold():
    """Each OpenMP loop runs as a plain serial loop when its work is under the threshold (an ``if(false)``
    clause still enters the OpenMP runtime, about half a microsecond per loop); both copies give the
    evaluator's value: the serial one at a small size, the parallel one at a size above the threshold."""
    from codegen.loop_ir import PARALLEL_WORK

    e = tl.parse("gen(i:n) sum(j:m) x[i + j] * c[j]", x="[n + m - 1]R", c="[m]R")
    k = tl_compile(e)
    body = _body(k)
    pragmas = body.count("#pragma omp parallel for")
    if pragmas == 0:
        pytest.skip("the C compiler has no OpenMP")
    assert " if((" not in body and body.count("} else {") >= pragmas
    rng = np.random.default_rng(0)
    for n in (5, PARALLEL_WORK // 8 + 1):
        x, c = rng.normal(size=n + 7), rng.normal(size=8)
        np.testing.assert_allclose(k(x=x, c=c), np.convolve(x, c[::-1], "valid"), rtol=1e-12)


def test_serial_copies_is_a_pass_over_the_loop_ir():
    """The pass turns each OpenMP loop with a work condition into that condition choosing between the parallel
    loop and a serial copy; nested and serial loops are kept as they are."""
    from codegen.loop_ir import Branch, Line, Loop, Parallel, print_c, serial_copies

    inner = Loop("j", "int64_t j = 0", "j < m", "j += 1", [Line("y[i] += x[j];")])
    loop = Loop("i", "int64_t i = 0", "i < n", "i += 1", [inner], parallel=Parallel("static", None, "(n) >= 10"))
    (out, done) = serial_copies([loop, Line("done();")])
    assert isinstance(out, Branch) and out.cond == "(n) >= 10" and done == Line("done();")
    (parallel,), (serial,) = out.then, out.orelse
    assert parallel.parallel == Parallel("static", None, "") and serial.parallel is None
    assert parallel.body == serial.body == [inner]
    assert print_c(serial_copies([loop])) == [
        "  if ((n) >= 10) {", "    #pragma omp parallel for schedule(static)",
        "    for (int64_t i = 0; i < n; i += 1) {", "      for (int64_t j = 0; j < m; j += 1) {",
        "        y[i] += x[j];", "      }", "    }", "  } else {", "    for (int64_t i = 0; i < n; i += 1) {",
        "      for (int64_t j = 0; j < m; j += 1) {", "        y[i] += x[j];", "      }", "    }", "  }"]


def test_black_boxes_are_hoisted_out_of_the_loops_they_do_not_read():
    """``exp(q[k])`` in ``gen(i, k)`` is one binding over ``k``; inside a sum over another variable it leaves
    the sum with the factors that do not read that variable (``codegen.hoist.factored``: ``exp(q[k]) * sum(i:n)
    x[i]``); a call under a guard on sizes is hoisted under that guard.  Each kernel's C run with ``exp``
    counting its calls: once per value of the variables it reads, where the loops it was taken out of are not
    empty and the guard holds (n m calls, or m n, before).  The results are the evaluator's, at an empty loop
    too and where the guard is false (``tests/sanitized.py`` runs these under AddressSanitizer)."""
    from test_gmm_kernel import counted

    rng = np.random.default_rng(4)
    cases = [("q : [m]R; x : [n]R; gen(i:n, k:m) exp(q[k]) * x[i]", lambda n, m: m * (n >= 1)),
             ("q : [m]R; x : [n]R; gen(k:m) sum(i:n) exp(q[k]) * x[i]", lambda n, m: m * (n >= 1)),
             ("x : [n + m - 1]R; y : [n]R; sum(i:n, j:m) exp(x[j + n - 1]) * y[i]", lambda n, m: m * (n >= 1)),
             ("x : [m]R; y : [n]R; sum(i:n, j:m + 1) [j >= 1] * exp(x[j - 1]) * y[i]", lambda n, m: m * (n >= 1)),
             ("x : [n]R; y : [m]R; gen(i:n, j:m) [n >= 5] * exp(x[4]) * y[j]", lambda n, m: int(n >= 5 and m >= 1))]
    for src, calls in cases:
        e = tl.parse(src)
        runner, counter = counted(tl_compile(e), r"static inline real tl_f_exp\(real a0\) \{")
        for n, m in ((0, 3), (1, 1), (5, 4), (6, 0)):
            ins = {name: rng.normal(size=type_shape(t, {"n": n, "m": m})) for name, t in e.free_vars.items()}
            before = counter.value
            assert close(runner(**ins, n=n, m=m), tl.evaluate(e, **ins, n=n, m=m)), (src, n, m)
            assert counter.value - before == calls(n, m), (src, n, m, counter.value - before)


def test_pinned_sum_variable_is_an_assignment():
    import re

    e = tl.parse("sum(i:n, j:n) [i = j] * A[i, j]", A="[n][n]R")
    body = _body(tl_compile(e))
    # one loop variable from isl (the sum over i, cut into chunks and lanes), none for j
    assert len(set(re.findall(r"\btl_r\d+\b", body))) == 1 and "tl_part" in body


def test_empty_guard_produces_no_code():
    e = tl.parse("sum(i:n) [i < 0] * x[i]", x="[n]R")
    body = _body(tl_compile(e))
    assert "for (" not in body and "x[" not in body.split("out0")[-1]


def test_guards_become_loop_bounds():
    k = tl_compile(tl.parse("sum(i:n) [i >= 2 and i < n - 1] * x[i]", x="[n]R"))
    body = _body(k)
    loop = body[body.index("for ("):]
    # the sum's loop starts at 2 (its chunks at 2 + q * chunk), with no test inside
    assert "= (2) + " in body and "if (" not in loop
    assert k(x=np.arange(6.0)) == 2 + 3 + 4


def test_skip_x1_has_no_test_inside_its_loop():
    k = tl_compile(tl.parse((EXAMPLES / "skip_x1.tl").read_text()))
    body = _body(k)
    loop = body[body.index("for ("):]
    assert "if (" not in loop
    assert k(x=np.arange(5.0)) == 0 + 2 + 3 + 4


def test_user_function_prints_through_sympy():
    import sympy

    tl.define_function("softplus_cg", lambda u: sympy.log(1 + sympy.exp(u)))
    e = tl.parse("gen(i:n) softplus_cg(x[i]) + softplus_cg_d0(x[i])", x="[n]R")
    k = tl_compile(e)
    x = np.linspace(-2, 2, 7)
    assert close(k(x=x), tl.evaluate(e, x=x))


# -- input checking -----------------------------------------------------------------------------------


def test_shape_and_dtype_errors_before_any_c_runs():
    e = tl.parse((EXAMPLES / "deconv_loss.tl").read_text())
    k = tl_compile(e)
    calls = []
    k._runner.fn = lambda *a: calls.append(a)  # the C entry point must not be reached
    x, c, z = np.zeros(9), np.zeros(3), np.zeros(7)
    with pytest.raises(ShapeError, match=r"input x has shape \(9,\).*\(8,\)"):
        k(x=x, c=c, z=np.zeros(6))
    with pytest.raises(ShapeError, match="dtype complex128"):
        k(x=x.astype(complex), c=c, z=z)
    with pytest.raises(ShapeError, match="dtype"):
        k(x=np.array(["a"] * 9), c=c, z=z)
    with pytest.raises(ShapeError, match="needs 1 dimension"):
        k(x=np.zeros((9, 1)), c=c, z=z)
    with pytest.raises(ShapeError, match="missing input"):
        k(x=x, c=c)
    with pytest.raises(ShapeError, match="unknown input"):
        k(x=x, c=c, z=z, w=1.0)
    with pytest.raises(ShapeError, match="size n"):
        k(x=x, c=c, z=z, n=-1)
    assert not calls
    e2 = tl.parse("sum(i:n) p.0[i] * p.1", p="([n]R, R)")
    k2 = tl_compile(e2)
    with pytest.raises(ShapeError, match="pair"):
        k2(p=np.zeros(3))
    assert k2(p=(np.array([2.0, 0.0]), 3.0)) == 6.0


def test_float32_kernel_returns_float32():
    e = tl.parse("gen(i:n) x[i] * 2", x="[n]R")
    k = tl_compile(e, dtype="float32")
    out = k(x=np.arange(4, dtype=np.float64))
    assert out.dtype == np.float32 and np.array_equal(out, [0, 2, 4, 6])
    assert "typedef float real;" in k.source


# -- compiler failures and the cache ------------------------------------------------------------------


def test_compiler_failure_carries_source_and_message(tmp_path, monkeypatch):
    monkeypatch.setenv("TENSORLANG_CACHE", str(tmp_path))
    src = "void tl_kernel(void) { this is not C; }\n"
    with pytest.raises(CompileError) as info:
        build_c(src)
    msg = str(info.value)
    assert "this is not C" in msg and "error" in msg
    assert info.value.source == src and info.value.compiler_message


def test_cache_reuses_the_library(tmp_path, monkeypatch):
    monkeypatch.setenv("TENSORLANG_CACHE", str(tmp_path))
    e = tl.parse("gen(i:n) x[i] + 17", x="[n]R")
    k1 = tl_compile(e)
    mtime = os.stat(k1.library).st_mtime_ns
    k2 = tl_compile(e)
    assert k2.library == k1.library and os.stat(k2.library).st_mtime_ns == mtime
    assert str(tmp_path) in k1.library
    assert not [p for p in os.listdir(tmp_path) if ".tmp" in p]


def test_two_processes_build_at_once(tmp_path):
    code = textwrap.dedent("""
        import sys, numpy as np, tensorlang as tl
        from tensorlang.codegen import compile
        e = tl.parse("gen(i:n) sum(j:n) [j <= i] * x[j] * 3.25", x="[n]R")
        k = compile(e)
        assert np.allclose(k(x=np.ones(4)), [3.25, 6.5, 9.75, 13.0])
        print(k.library)
    """)
    env = {**os.environ, "TENSORLANG_CACHE": str(tmp_path), "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
    assert outs[0][0] == outs[1][0]
    assert not [p for p in os.listdir(tmp_path) if ".tmp" in p]


def test_a_pair_input_returned_whole():
    """An output that is a pair-valued input (no pair literal left after normalisation) is compiled as its
    two components; found by a generated program."""
    e = tl.parse("p : ([n]R, ([n]R, R)); (p.1, p)")
    p = (np.arange(3.0), (np.ones(3), 5.0))
    got, ref = tl_compile(e)(p=p), tl.evaluate(e, p=p)
    assert close(got, ref) and close(tl_compile(tl.parse("p : ([n]R, R); p"))(p=p[1]), p[1])


# -- export -------------------------------------------------------------------------------------------


def test_export_runs_with_numpy_alone(tmp_path):
    loss = tl.parse((EXAMPLES / "deconv_loss.tl").read_text())
    zw = tl.parse((EXAMPLES / "linear_zw.tl").read_text())
    spmv = tl.parse("gen(i:n) sum(j:m) [E(i, j)] * y[j]", E="rel[n, m]", y="[m]R")
    mm = tl.parse("gen(i:n, j:n) sum(k:n) A[i, k] * B[j, k]", A="[n][n]R", B="[n][n]R")
    softmax = tl.parse(SOFTMAX_CE)  # exp and log: glibc's vector math library where there is one
    out = tmp_path / "out"
    tl_export({"loss": tl_compile(loss), "zw": zw, "spmv": spmv, "mm": mm, "softmax": softmax}, "mykernels",
              str(out))
    # a directory holding numpy alone (and its bundled libraries): no tensorlang, scipy, sympy or islpy
    only = tmp_path / "only_numpy"
    only.mkdir()
    site = Path(np.__file__).resolve().parent.parent
    for p in site.iterdir():
        if p.name == "numpy" or p.name.startswith("numpy.libs") or p.name.startswith("numpy-"):
            (only / p.name).symlink_to(p)
    code = textwrap.dedent(f"""
        import sys
        sys.path[:0] = [{str(out)!r}, {str(only)!r}]
        for name in ("tensorlang", "scipy", "sympy", "islpy"):
            try:
                __import__(name)
            except ImportError:
                pass
            else:
                raise SystemExit(name + " should not be importable here")
        import numpy as np, mykernels
        x, c, z = np.arange(9.0), np.ones(3), np.zeros(7)
        print(mykernels.loss(x=x, c=c, z=z))
        print(mykernels.zw(x=1.0, y=2.0))
        print(mykernels.spmv(E=[(0, 1), (1, 0), (1, 1)], y=np.array([2.0, 5.0]), n=2))
        try:
            mykernels.loss(x=x, c=c, z=np.zeros(6))
        except mykernels.ShapeError as e:
            print("ShapeError")
        A = np.arange(12.0).reshape(3, 4)[:, :3]
        print(float(np.abs(mykernels.mm(A=A, B=A.T) - A @ A).max()))
        print(mykernels.blas_table(np.float64)[1])
        print(repr(mykernels.softmax(x=np.linspace(-3, 3, 1001), y=np.linspace(0, 1, 1001))))
        try:
            mykernels.loss(x=x, C=c, z=z)
        except mykernels.ShapeError as e:
            print(e)
    """)
    r = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True,
                       env={"PATH": os.environ.get("PATH", "")}, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split("\n")
    x, c, z = np.arange(9.0), np.ones(3), np.zeros(7)
    assert float(lines[0]) == pytest.approx(tl.evaluate(loss, x=x, c=c, z=z))
    assert lines[1] == "(8.0, 112.0)"
    assert lines[2].replace(" ", "") == "[5.7.]"
    assert lines[3] == "ShapeError"
    assert float(lines[4]) == 0.0
    print("exported module's BLAS:", lines[5])  # NumPy's own OpenBLAS where NumPy ships one
    assert not lines[5].startswith("scipy")
    ref = tl.evaluate(softmax, x=np.linspace(-3, 3, 1001), y=np.linspace(0, 1, 1001))
    assert float(lines[6]) == pytest.approx(ref, rel=1e-12)
    with pytest.raises(ShapeError) as in_process:  # a misspelt keyword: the same message as tl.evaluate's
        tl.evaluate(loss, x=x, C=c, z=z)
    assert lines[7] == in_process.value.message and "did you mean 'c'" in lines[7]


def _load_module(path: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_export_is_portable_unless_asked_for_native(tmp_path):
    conv = tl.parse((EXAMPLES / "conv.tl").read_text())
    portable = _load_module(tl.export(conv, "portable", str(tmp_path)))
    native = _load_module(tl.export(conv, "native", str(tmp_path), native=True))
    assert portable.BUILD["native"] is False and native.BUILD["native"] is True
    assert not [f for f in portable.BUILD["flags"] if f.startswith("-march")]
    assert "-march=native" in native.BUILD["flags"]
    assert portable.BUILD["compiler"] and "for any CPU of its architecture" in portable.__doc__
    assert "-march=native" in native.__doc__
    x, c = np.arange(9.0), np.array([1.0, -2.0, 0.5])
    want = np.correlate(x, c, mode="valid")
    assert np.allclose(portable.kernel(x=x, c=c), want) and np.allclose(native.kernel(x=x, c=c), want)
    if platform.machine() == "x86_64" and shutil.which("objdump"):  # baseline x86-64: SSE2, no AVX registers
        code = subprocess.run(["objdump", "-d", str(tmp_path / "portable_lib.so")], capture_output=True, text=True)
        assert code.returncode == 0 and "%ymm" not in code.stdout and "%zmm" not in code.stdout


SOFTMAX_CE = "x : [n]R\ny : [n]R\nlet s = sum(i:n) exp(x[i]) in sum(i:n) y[i] * (log(s) - x[i])"


@pytest.mark.skipif(not vector_math_available(), reason="no glibc vector math library (libmvec) here")
def test_vectorised_loops_call_the_vector_math_library():
    """Where libmvec works, the softmax's ``exp`` runs in vectorised loops through it (its symbols are in
    the library) and the kernel and its gradient still equal the evaluator."""
    e = tl.parse(SOFTMAX_CE)
    x, y = np.linspace(-5, 5, 10_001), np.random.default_rng(0).dirichlet(np.ones(10_001))
    for prog in (e, tl.grad(e, wrt="x")):
        k = tl_compile(prog)
        assert b"_ZGV" in Path(k.library).read_bytes()
        assert close(k(x=x, y=y), tl.evaluate(prog, x=x, y=y))


# -- dense contractions handed to BLAS -----------------------------------------------------------------

MATMUL_LOSS = ("A : [n][n]R\nB : [n][n]R\nC : [n][n]R\nsum(i:n, j:n) ((sum(k:n) A[i, k] * B[k, j]) - C[i, j]) * "
               "((sum(k:n) A[i, k] * B[k, j]) - C[i, j])")


def test_matrix_product_loss_and_gradient_call_gemm():
    from tensorlang.derive.api import grad

    e = tl.parse(MATMUL_LOSS)
    k, gk = tl_compile(e), tl_compile(grad(e, "A"))
    assert _body(k).count("tl_gemm(") == 1  # the repeated A @ B is one temporary
    assert _body(gk).count("tl_gemm(") == 2 and "tl_r" not in _body(gk)  # no reduction loop is left
    rng = np.random.default_rng(5)
    for n in (0, 1, 7, 70):
        A, B, C = (rng.standard_normal((n, n)) for _ in range(3))
        assert k(A=A, B=B, C=C) == pytest.approx(np.sum((A @ B - C) ** 2), rel=1e-10, abs=1e-12)
        assert np.allclose(gk(A=A, B=B, C=C), 2 * (A @ B - C) @ B.T, rtol=1e-10, atol=1e-10)


CONTRACTIONS = [
    "gen(i:n) sum(k:m) A[i, k] * x[k]",
    "gen(i:m) sum(k:n) A[k, i] * y[k] * 3",
    "gen(i:m, j:m) sum(k:n) A[k, i] * A[k, j]",
    "gen(j:m, i:n) sum(k:m) A[i, k] * -2 * D[k, j]",
    "gen(i:n, j:n) sum(k:m) A[i, k] * A[j, k]",
    "sum(i:n) y[i] * sum(k:m) A[i, k] * x[k]",
    "gen(i:n, j:m) exp(sum(k:m) A[i, k] * D[k, j]) + sum(k:m) A[i, k] * D[k, j]",
]


@pytest.mark.parametrize("blas", ["default", "loops", "scipy"])
def test_contractions_in_every_form(blas, monkeypatch):
    from tensorlang.codegen import runtime

    if blas == "loops":
        monkeypatch.setenv("TENSORLANG_BLAS", "0")
    elif blas == "scipy":
        pytest.importorskip("scipy.linalg.cython_blas")
        monkeypatch.setattr(runtime, "_BLAS_TABLES", {})
        monkeypatch.setattr(runtime, "_numpy_blas", lambda prefix: None)
    cases = []
    rng = np.random.default_rng(2)
    for src in CONTRACTIONS:
        e = tl.parse(src, A="[n][m]R", x="[m]R", y="[n]R", D="[m][m]R")
        for n, m in [(5, 3), (0, 2), (3, 0), (40, 33)]:
            vals = dict(A=rng.standard_normal((n, m)), x=rng.standard_normal(m), y=rng.standard_normal(n),
                        D=rng.standard_normal((m, m)), n=n, m=m)
            cases.append((e, {k: v for k, v in vals.items() if k in e.free_vars or k in e.sizes}))
    results = run_batch(cases)
    _check(results)
    for e, _, _, _ in results[::4]:
        assert "tl_gemm(" in tl_compile(e).source or "tl_gemv(" in tl_compile(e).source, str(e)
    k32 = tl_compile(cases[-1][0], dtype="float32")
    got, ref = k32(**cases[-1][1]), tl.evaluate(cases[-1][0], **cases[-1][1])
    assert np.allclose(got, ref, rtol=1e-4, atol=1e-3)


def test_a_restricted_contraction_stays_loops():
    """``[j < i]`` restricts the output variables: a whole product would do needless work."""
    e = tl.parse("gen(i:n) sum(j:n) [j < i] * sum(k:m) A[i, k] * A[j, k]", A="[n][m]R")
    assert "tl_gemm(" not in tl_compile(e).source


# -- memory: workspace, recycled outputs, interchanged reductions ---------------------------------------


def test_large_outputs_are_recycled_only_when_dropped():
    k = tl_compile(tl.parse("gen(i:n) x[i] * 2", x="[n]R"))
    x = np.arange(300_000.0)  # 2.4 MB: above the pool's threshold
    r1 = k(x=x)
    view = r1[10:]
    addr = r1.ctypes.data
    del r1
    r2 = k(x=x + 1)  # r1's memory is still reachable through view: not reused
    assert r2.ctypes.data != addr and np.array_equal(view, 2 * x[10:])
    del view
    r3 = k(x=x + 2)  # now it is
    assert r3.ctypes.data == addr and np.array_equal(r3, 2 * (x + 2)) and np.array_equal(r2, 2 * (x + 1))


def test_the_output_pool_keeps_what_its_budget_allows():
    """Results held together and then dropped (the blocks of a Dask graph) are all recycled while their
    bytes stay within the runner's budget; past it, two per size are kept."""
    k = tl_compile(tl.parse("gen(i:n) x[i] * 2", x="[n]R"))
    x = np.arange(300_000.0)   # 2.4 MB each
    for budget, kept in ((1 << 30, 5), (0, 2)):
        k._runner.pool_budget, k._runner.out_pool = budget, {}
        held = [k(x=x) for _ in range(5)]
        addresses = {r.ctypes.data for r in held}
        del held
        pooled = [b for p in k._runner.out_pool.values() for b in p]
        assert len(pooled) == kept and {b.ctypes.data for b in pooled} <= addresses
        del pooled
        again = [k(x=x + 1) for _ in range(5)]
        assert all(np.array_equal(r, 2 * (x + 1)) for r in again)


def test_temporaries_live_in_a_reused_workspace():
    from tensorlang.derive.api import grad

    e = tl.parse((EXAMPLES / "deconv_loss.tl").read_text())
    gk = tl_compile(grad(e, "c"))
    assert "malloc" not in _body(gk) and "tl_ws" in _body(gk)
    rng = np.random.default_rng(4)
    sizes = [(50, 3), (5, 3), (400, 300), (1, 1)]  # the chunked form and the gather form
    for n, m in sizes:
        ins = dict(x=rng.standard_normal(n + m - 1), c=rng.standard_normal(m), z=rng.standard_normal(n))
        assert close(gk(**ins), tl.evaluate(grad(e, "c"), **ins))
    kept = {id(w) for w, _ in gk._runner._workspaces}
    assert 1 <= len(kept) <= 4
    for n, m in sizes:  # sizes seen before, in turn (the runs of a Dask block alternate so): no workspace made
        gk(x=np.ones(n + m - 1), c=np.ones(m), z=np.ones(n))
    assert {id(w) for w, _ in gk._runner._workspaces} == kept
    assert "tl_part" in _body(gk)  # sum(i0:n) dX[i0] * x[i0 + k0] runs in chunks of i0 (partial sums)


def test_a_sum_of_many_chunks_adds_them_in_runs():
    """A chunked sum of more than ``PARTIALS / |T|`` chunks adds runs of consecutive chunks into one partial
    sum each, its chunks ``REDUCE_CHUNK`` terms long whatever the length (longer chunks had sent the
    gradient's fused residual out of its group buffer and through memory past about 1.7 * 10^7 terms)."""
    from tensorlang.codegen.schedule import PARTIALS, REDUCE_CHUNK
    from tensorlang.derive.api import grad

    e = tl.parse((EXAMPLES / "deconv_loss.tl").read_text())
    gk = tl_compile(grad(e, "c"))
    m = 64
    n = 2 * (PARTIALS // m) * REDUCE_CHUNK + 4097   # 258 chunks: three chunks a run
    rng = np.random.default_rng(9)
    x, c, z = rng.standard_normal(n + m - 1), rng.standard_normal(m), rng.standard_normal(n)
    residual = np.correlate(x, c, mode="valid") - z
    want = 2 * np.array([residual @ x[k:k + n] for k in range(m)])
    assert np.allclose(gk(x=x, c=c, z=z), want, rtol=1e-12, atol=1e-9)


# -- relations as CSR ---------------------------------------------------------------------------------


def test_relation_inputs_in_every_form():
    sp = pytest.importorskip("scipy.sparse")
    e = tl.parse("gen(i:n) sum(j:m) [E(i, j) and j != i] * A[i, j] * y[j]", E="rel[n, m]", A="[n][m]R",
                 y="[m]R")
    et = tl.parse("gen(j:m) sum(i:n) [E(i, j)] * A[i, j] * x[i]", E="rel[n, m]", A="[n][m]R", x="[n]R")
    k, kt = tl_compile(e), tl_compile(et)
    assert "_ptr[" in _body(k) and "_tptr[" in _body(kt)
    rng = np.random.default_rng(3)
    mask = rng.random((6, 5)) < 0.4
    A, x, y = rng.standard_normal((6, 5)), rng.standard_normal(6), rng.standard_normal(5)
    forms = [mask, sp.csr_matrix(mask), sp.coo_matrix(mask), sp.csc_matrix(mask), list(zip(*np.nonzero(mask)))]
    for form in forms:
        extra = {"n": 6, "m": 5} if isinstance(form, list) else {}
        assert close(k(E=form, A=A, y=y, **extra), tl.evaluate(e, E=mask, A=A, y=y))
        assert close(kt(E=form, A=A, x=x, **extra), tl.evaluate(et, E=mask, A=A, x=x))
    # stored zeros are not in the relation (as in the evaluator)
    m = sp.csr_matrix(mask.astype(float))
    m.data[:] = 0
    assert np.all(k(E=m, A=A, y=y) == 0)


def test_csr_sum_costs_nnz_not_n_times_m():
    sp = pytest.importorskip("scipy.sparse")
    import time

    e = tl.parse("gen(i:n) sum(j:m) [E(i, j)] * y[j]", E="rel[n, m]", y="[m]R")
    et = tl.parse("gen(j:m) sum(i:n) [E(i, j)] * x[i]", E="rel[n, m]", x="[n]R")
    k, kt = tl_compile(e), tl_compile(et)
    n = 200_000  # a dense n x m pass would be 4e10 steps
    rng = np.random.default_rng(0)
    rows, cols = np.repeat(np.arange(n), 5), rng.integers(0, n, 5 * n)
    E = sp.csr_matrix((np.ones(5 * n), (rows, cols)), shape=(n, n))
    E.sum_duplicates()
    E.data[:] = 1.0
    y = rng.standard_normal(n)
    t = time.perf_counter()
    got = k(E=E, y=y)
    elapsed = time.perf_counter() - t
    assert np.allclose(got, E @ y)
    assert np.allclose(kt(E=E, x=y), E.T @ y)
    assert elapsed < 2.0


def test_sparse_product_gradient_costs_nnz():
    """The adjoint of ``E y`` in ``y`` is the transposed product (no ``exists`` bracket left to test in
    O(n) per output: S8), and the compiled gradient of ``|E y - z|^2`` runs in O(nnz) on a 200,000 x
    200,000 relation; the transpose the run time keeps is rebuilt when the relation changes in place."""
    sp = pytest.importorskip("scipy.sparse")
    import time

    from tensorlang.nodes import Exists, walk

    spmv = tl.parse("gen(i:n) sum(j:m) [E(i, j)] * y[j]", E="rel[n, m]", y="[m]R")
    adj = tl.adjoint(spmv, wrt="y")
    assert not any(isinstance(x, Exists) for x in walk(adj))
    loss = tl.parse("sum(i:n) ((sum(j:m) [E(i, j)] * y[j]) - z[i]) * ((sum(j:m) [E(i, j)] * y[j]) - z[i])",
                    E="rel[n, m]", y="[m]R", z="[n]R")
    g = tl_compile(tl.grad(loss, wrt="y"))
    n = 200_000
    rng = np.random.default_rng(1)
    E = sp.csr_matrix((np.ones(5 * n), (np.repeat(np.arange(n), 5), rng.integers(0, n, 5 * n))), shape=(n, n))
    E.sum_duplicates()
    E.data[:] = 1.0
    y, z = rng.standard_normal(n), rng.standard_normal(n)
    t = time.perf_counter()
    got = g(E=E, y=y, z=z)
    assert time.perf_counter() - t < 2.0
    assert np.allclose(got, 2 * (E.T @ (E @ y - z)))
    row0 = slice(E.indptr[0], E.indptr[1])
    E.indices[row0] = np.arange(E.indptr[1] - E.indptr[0])  # row 0's columns changed in place (still canonical)
    assert np.allclose(g(E=E, y=y, z=z), 2 * (E.T @ (E @ y - z)))
    k = tl_compile(adj)
    dy = rng.standard_normal(n)
    assert np.allclose(k(E=E, y=y, dy=dy), E.T @ dy)  # the adjoint takes its primal's inputs


# -- CUDA -----------------------------------------------------------------------------------------------


@pytest.mark.skipif(nvcc_path() is None, reason="nvcc is not installed")
def test_generated_cuda_compiles_with_nvcc():
    from tensorlang.codegen.build import build_cuda_object
    from tensorlang.codegen.cuda import CudaEmitter

    exprs = [tl.parse(p.read_text()) for p in sorted(EXAMPLES.glob("*.tl"))]
    exprs += [e for e, _ in collect(program_and_inputs(), 80)]
    emitters = []
    for k, e in enumerate(exprs):
        prog, namer = lower(e, fuse_lets=k % 2 == 0)
        em = CudaEmitter(prog, namer, "float64", f"tl_c{k}")
        em.emit_entry()
        emitters.append(em)
    src = CudaEmitter.translation_unit(emitters)
    assert src.count("__global__") >= len(exprs)
    assert os.path.exists(build_cuda_object(src))


@pytest.mark.skipif(not nvrtc.available(), reason="NVRTC is not installed (nvidia-cuda-nvrtc, of the dev extra)")
def test_generated_cuda_compiles_with_nvrtc():
    """CuPy runs kernels through NVRTC, which has no C headers: what nvcc accepts (``INFINITY``, ``NAN`` from
    ``math.h``) must compile there too, for the examples, their gradients and generated programs."""
    programs = [e for _, e in examples_and_gradients()] + [e for e, _ in collect(program_and_inputs(), 80)]
    failed = [(str(e), log) for e in programs if (log := nvrtc.compile_errors(generate(e, target="cuda")[0]))]
    assert not failed, f"{len(failed)} of {len(programs)} fail under NVRTC; first: {failed[0]}"


def test_cuda_reduction_without_a_loop_is_summed_by_one_thread():
    """A sum in closed form (``sum(i:n) 1`` is ``n``) has no loop to share out among the reduction's threads:
    thread 0 alone contributes it (every thread did, and the GPU returned n times 262,144)."""
    src, meta = generate(tl.parse("x : R\nsum(i:n) x"), target="cuda")
    assert [k["kind"] for k in meta["launch"]["kernels"]] == ["reduce", "single_block"]
    assert "tl_part = tl_gtid == 0 ?" in src


def test_cuda_reductions_are_kernels_of_their_own():
    """On CUDA a maximum and a sum inside a scalar statement are statements of their own, each shared out
    among the threads (a sum with ``+``, a maximum with ``tl_fmax`` from ``-INFINITY``); in C the sum stays in
    the statement that reads it, and the maximum, read both outside the sum and inside it, is a scalar
    statement of its own (computed once)."""
    e = tl.parse((EXAMPLES / "logsumexp.tl").read_text())
    src, meta = generate(e, target="cuda")
    kinds = [k["kind"] for k in meta["launch"]["kernels"]]
    assert kinds == ["reduce", "single_block", "reduce", "single_block", "single"]
    assert "tl_sh[threadIdx.x] = tl_fmax(tl_sh[threadIdx.x], tl_sh[threadIdx.x + s]);" in src
    assert "real tl_part = -(real)INFINITY;" in src
    assert len(lower(e)[0].stmts) == 2 and len(lower(e, stored_reductions=True)[0].stmts) == 3


def test_cuda_target_generates_kernels():
    e = tl.parse((EXAMPLES / "deconv_loss.tl").read_text())
    if nvcc_path() is None:
        src, meta = generate(e, target="cuda")
    else:
        k = tl_compile(e, target="cuda")
        src, meta = k.source, k.meta
    assert "__global__" in src and "tl_partial" in src and "atomic" not in src
    assert [k["kind"] for k in meta["launch"]["kernels"]] == ["reduce", "single_block"]


def test_the_openmp_pass_decides_which_marked_loops_run_on_threads():
    """A loop marked as one whose iterations may run on threads (``Threads``) becomes an OpenMP loop where the
    target has OpenMP: a gather dealt out dynamically in its chunks, a reduction in static shares with its
    variable in the clause, both parallel from ``PARALLEL_WORK`` on; without OpenMP it is a plain loop.  The
    printers refuse a loop no pass decided."""
    from codegen.loop_ir import PARALLEL_WORK, Line, Loop, Parallel, Threads, openmp, print_c
    from codegen.target import TARGETS

    body = [Line("y[i] = x[i];")]
    gather = Loop("i", "int64_t i = 0", "i < n", "i += 1", body, threads=Threads("n", None, "tl_max(1, n / 32)"))
    total = Loop("i", "int64_t i = 0", "i < n", "i += 1", [Line("s += x[i];")], threads=Threads("n * 2", "s"))
    nested = Loop("k", "int64_t k = 0", "k < 3", "k += 1", [gather])
    c, cuda = TARGETS["c"].emitter.caps, TARGETS["cuda"].emitter.caps
    (g, t, (inner,)) = (*openmp([gather, total], c), openmp([nested], c)[0].body)
    assert g.parallel == Parallel("dynamic, tl_max(1, n / 32)", None, f"(n) >= {PARALLEL_WORK}") and g.threads is None
    assert t.parallel == Parallel("static", "s", f"(n * 2) >= {PARALLEL_WORK}") and inner == g
    assert [(node.parallel, node.threads) for node in openmp([gather, total], cuda)] == [(None, None)] * 2
    assert gather.threads is not None   # (a pass leaves its input as it is)
    with pytest.raises(ValueError, match="before the openmp pass decided its threads"):
        print_c([gather])
