"""CUDA kernels run on a GPU: every example program and its gradients, generated programs, float32, and
the ``sm_90`` build, each CUDA result checked against the C kernel or the reference evaluator.

Skipped where nvcc, CuPy or a GPU is missing (``pytest tests/test_cuda_gpu.py -rs`` says which): CI has
no GPU.  ``tests/test_codegen.py`` checks, without one, that the same CUDA text compiles with nvcc.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tensorlang as tl
from tensorlang.codegen import cuda
from tensorlang.codegen.build import build_cuda_object, nvcc_path

try:
    from oracles import close
    from strategies import collect, examples_and_gradients, inputs_for, program_and_inputs
except ImportError:  # run from the repository root
    from tests.oracles import close
    from tests.strategies import collect, examples_and_gradients, inputs_for, program_and_inputs

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _gpu() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - no CuPy, no driver, no device
        return False


pytestmark = pytest.mark.skipif(nvcc_path() is None or not _gpu(), reason="needs nvcc, CuPy and a GPU")


def _failures(cases, reference) -> list[str]:
    bad = []
    for label, e, inputs in cases:
        try:
            got = tl.compile(e, target="cuda")(**inputs)
        except Exception as err:  # noqa: BLE001 - every failure is reported, not the first alone
            errors = [line for line in str(err).splitlines() if "error" in line] or [str(err)]
            bad.append(f"{label}: {type(err).__name__}: {' / '.join(errors)[:600]}")
            continue
        want = reference(e, inputs)
        if not close(got, want):
            bad.append(f"{label}: CUDA {np.ravel(got)[:4]} ... against {np.ravel(want)[:4]} ...")
    return bad


@pytest.mark.parametrize("few_points", [cuda.FEW_POINTS, 0], ids=["block-per-point", "thread-per-point"])
def test_every_example_and_its_gradients_agree_with_c(few_points, monkeypatch):
    """Reductions with fewer points than ``few_points`` get a block of threads per point, the others a thread
    each: both ways, on every example."""
    monkeypatch.setattr(cuda, "FEW_POINTS", few_points)
    cases = []
    for label, e in examples_and_gradients():
        for k, inputs in enumerate(collect(inputs_for(e, max_size=40, allow_zero=False), 2)):
            cases.append((f"{label} #{k}", e, inputs))
    bad = _failures(cases, lambda e, inputs: tl.compile(e)(**inputs))
    assert not bad, f"{len(bad)} of {len(cases)} CUDA runs differ from C:\n" + "\n".join(bad)


def test_generated_programs_agree_with_the_evaluator():
    cases = [(f"{e}", e, inputs) for e, inputs in collect(program_and_inputs(), 120)]

    def evaluate(e, inputs):
        with np.errstate(all="ignore"):
            return tl.evaluate(e, **inputs)

    bad = _failures(cases, evaluate)
    assert not bad, f"{len(bad)} of {len(cases)} CUDA runs differ from the evaluator:\n" + "\n".join(bad)


def test_cuda_kernel_agrees_with_c_on_a_gpu():
    """The check docs/codegen.md gives for a GPU run: the loss and its gradient, CUDA against C."""
    loss = tl.parse((EXAMPLES / "deconv_loss.tl").read_text())
    rng = np.random.default_rng(0)
    inputs = dict(x=rng.normal(size=100_015), c=rng.normal(size=16), z=rng.normal(size=100_000))
    for program in (loss, tl.grad(loss, "x")):
        gpu, cpu = tl.compile(program, target="cuda"), tl.compile(program)
        assert np.allclose(gpu(**inputs), cpu(**inputs), rtol=1e-10, atol=1e-12)


def test_large_loss_and_gradient_agree_with_c_in_float64_and_float32():
    loss = tl.parse((EXAMPLES / "deconv_loss.tl").read_text())
    rng = np.random.default_rng(0)
    n, m = 1_000_000, 16
    inputs = dict(x=rng.normal(size=n + m - 1), c=rng.normal(size=m), z=rng.normal(size=n))
    for program in (loss, tl.grad(loss, "x"), tl.grad(loss, "c")):
        assert np.allclose(tl.compile(program, target="cuda")(**inputs), tl.compile(program)(**inputs),
                           rtol=1e-10, atol=1e-10)
        single = {k: v.astype(np.float32) for k, v in inputs.items()}
        got = tl.compile(program, target="cuda", dtype="float32")(**single)
        assert np.allclose(got, tl.compile(program)(**inputs), rtol=1e-3, atol=1e-3 * np.sqrt(n))


def test_large_maximum_and_logsumexp_agree_with_c():
    """A maximum at size: its threads share the loop (``-INFINITY`` and ``tl_fmax`` in place of ``0`` and ``+``),
    as a kernel of its own, and so does the sum that reads it; a tie and a NaN as the evaluator has them."""
    e = tl.parse((EXAMPLES / "logsumexp.tl").read_text())
    x = np.random.default_rng(2).normal(size=3_000_001)
    for program in (e, tl.grad(e, "x")):
        assert np.allclose(tl.compile(program, target="cuda")(x=x), tl.compile(program)(x=x), rtol=1e-10)
    tied = np.full(1_000_000, -3.0)
    tied[[5, 999_999]] = 4.0
    for program in (e, tl.grad(e, "x")):
        assert np.allclose(tl.compile(program, target="cuda")(x=tied), tl.compile(program)(x=tied), rtol=1e-10)
    peak = tl.parse("x : [n]R\nmax(i:n) x[i]")
    with_nan = x.copy()
    with_nan[1234] = np.nan
    assert np.isnan(tl.compile(peak, target="cuda")(x=with_nan))
    assert tl.compile(peak, target="cuda")(x=x) == x.max()


def test_large_gather_and_scatter_add_agree_with_c():
    """Reads through index arrays (``examples/factorisation.tl``) at a million observations, and the gradient,
    whose scatter-adds read the index arrays' transposes: CUDA against C."""
    e = tl.parse((EXAMPLES / "factorisation.tl").read_text())
    rng = np.random.default_rng(3)
    n, m, k, p = 5_000, 2_000, 16, 1_000_000
    inputs = dict(user=rng.integers(0, n, p), item=rng.integers(0, m, p), U=rng.normal(size=(n, k)),
                  V=rng.normal(size=(m, k)), r=rng.normal(size=p))
    for program in (e, tl.grad(e, ["U", "V"])):
        got, want = tl.compile(program, target="cuda")(**inputs), tl.compile(program)(**inputs)
        got, want = (v if isinstance(v, tuple) else (v,) for v in (got, want))
        assert all(np.allclose(a, b, rtol=1e-10, atol=1e-9) for a, b in zip(got, want))


def test_hopper_build_with_nvcc():
    """The kernels build for the H100/H200 (``-arch=sm_90``) as for nvcc's default architecture."""
    e = tl.grad(tl.parse((EXAMPLES / "deconv_loss.tl").read_text()), "x")
    source = tl.compile(e, target="cuda").source
    assert Path(build_cuda_object(source, arch="sm_90")).exists()


def test_cupy_arrays_in_cupy_arrays_out():
    """Inputs already on the GPU stay there: CuPy arrays in, CuPy arrays out, no copy through the host."""
    import cupy as cp

    loss = tl.parse((EXAMPLES / "deconv_loss.tl").read_text())
    rng = np.random.default_rng(1)
    inputs = dict(x=rng.normal(size=10_015), c=rng.normal(size=16), z=rng.normal(size=10_000))
    on_gpu = {k: cp.asarray(v) for k, v in inputs.items()}
    for program in (tl.grad(loss, "x"), tl.grad(loss, "c")):
        got = tl.compile(program, target="cuda")(**on_gpu)
        assert isinstance(got, cp.ndarray)
        assert np.allclose(cp.asnumpy(got), tl.compile(program)(**inputs), rtol=1e-10, atol=1e-10)
    assert np.isclose(tl.compile(loss, target="cuda")(**on_gpu), tl.compile(loss)(**inputs), rtol=1e-10)
    with pytest.raises(tl.ShapeError, match="has shape"):
        tl.compile(loss, target="cuda")(x=on_gpu["x"], c=on_gpu["c"], z=on_gpu["z"][:-1])
