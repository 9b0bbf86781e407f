"""CUDA kernels on a GPU against the C kernel and JAX and PyTorch on the same GPU.

The deconvolution loss (``examples/deconv_loss.tl``, m = 16) and its gradients in ``x`` and ``c``, float64,
at n = 2^20, 2^22 and 2^24, and ``examples/logsumexp.tl`` (a maximum, then a sum) and its gradient at 2^24.
Columns, each the best of a few runs (wall time, ``harness.best``):

* tensorlang C: ``tl.compile(program)``, OpenMP on the machine's cores;
* tensorlang CUDA: ``tl.compile(program, target="cuda")`` called as a user calls it, with NumPy arrays: the
  time holds the copies to and from the GPU, as the kernel's call makes them;
* the copies alone: the same bytes to the GPU and the result back with CuPy (what of the CUDA column is
  transfer);
* tensorlang CUDA with CuPy arrays: the inputs already on the GPU, the result left there;
* JAX and PyTorch on the GPU, jit/eager, with inputs already on the GPU and the result waited for
  (``block_until_ready``, ``torch.cuda.synchronize``), and JAX again from NumPy inputs to a NumPy result.

Needs a GPU, nvcc and CuPy; without them it says so and stops (``make bench`` does not run it).  Writes
``--out`` (Markdown) and prints the same table.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import best, options  # noqa: E402

import tensorlang as tl  # noqa: E402

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "deconv_loss.tl"
M = 16


def _peers():
    fns = {}
    try:
        import jax

        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp

        def loss(x, c, z):
            f = sum(x[j:j + z.shape[0]] * c[j] for j in range(c.shape[0]))
            return jnp.sum((f - z) ** 2)

        fns["jax"] = (jax, jnp, loss)
    except Exception as err:  # noqa: BLE001
        print("JAX not measured:", err)
    try:
        import torch

        if torch.cuda.is_available():
            def tloss(x, c, z):
                f = sum(x[j:j + z.shape[0]] * c[j] for j in range(c.shape[0]))
                return ((f - z) ** 2).sum()

            fns["torch"] = (torch, tloss)
    except Exception as err:  # noqa: BLE001
        print("PyTorch not measured:", err)
    return fns


def ours(program, inputs: dict, what: str) -> tuple[dict, object]:
    """The C kernel's value, and the times of the C kernel, of the CUDA kernel called with NumPy arrays and
    called with CuPy arrays (its result waited for), each CUDA result checked against C first."""
    import cupy as cp

    cpu, gpu = tl.compile(program), tl.compile(program, target="cuda")
    want = cpu(**inputs)
    on_gpu = {k: cp.asarray(v) for k, v in inputs.items()}
    assert np.allclose(gpu(**inputs), want, rtol=1e-9, atol=1e-9), what
    assert np.allclose(cp.asnumpy(cp.asarray(gpu(**on_gpu))), want, rtol=1e-9, atol=1e-9), what

    def resident():
        gpu(**on_gpu)
        cp.cuda.Stream.null.synchronize()

    return dict(c=best(lambda: cpu(**inputs)), cuda=best(lambda: gpu(**inputs)), cuda_resident=best(resident)), want


def torch_time(torch, f, args: list, wrt: int | None, want, what: str) -> float:
    """PyTorch's time for ``f(*args)`` (``wrt`` None: under ``no_grad``) or its gradient in ``args[wrt]``,
    the result waited for and checked against ``want`` first."""
    def run():
        if wrt is None:
            with torch.no_grad():
                r = f(*args)
        else:
            (r,) = torch.autograd.grad(f(*args), args[wrt])
        torch.cuda.synchronize()
        return r

    assert np.allclose(run().detach().cpu().numpy(), want, rtol=1e-9, atol=1e-9), f"PyTorch {what}"
    return best(run)


def measure(n: int, peers: dict) -> list[dict]:
    import cupy as cp

    rng = np.random.default_rng(0)
    inputs = dict(x=rng.normal(size=n + M - 1), c=rng.normal(size=M), z=rng.normal(size=n))
    loss = tl.parse(EXAMPLE.read_text())
    rows = []
    for what, program, argnum in (("loss", loss, None), ("gradient in x", tl.grad(loss, "x"), 0),
                                  ("gradient in c", tl.grad(loss, "c"), 1)):
        times, want = ours(program, inputs, what)
        row = dict(n=n, what=what, **times)
        out_bytes = np.asarray(want).nbytes

        def copies():
            d = [cp.asarray(v) for v in inputs.values()]
            cp.cuda.Stream.null.synchronize()
            cp.asnumpy(cp.empty(max(out_bytes // 8, 1)))
            return d

        row["copies"] = best(copies)
        if "jax" in peers:
            jax, jnp, f = peers["jax"]
            fn = jax.jit(f if argnum is None else jax.grad(f, argnums=argnum))
            dev = [jax.device_put(inputs[k]) for k in ("x", "c", "z")]
            assert np.allclose(np.asarray(fn(*dev)), want, rtol=1e-9, atol=1e-9), f"JAX {what}"
            row["jax"] = best(lambda: fn(*dev).block_until_ready())
            host = [inputs[k] for k in ("x", "c", "z")]
            row["jax_host"] = best(lambda: np.asarray(fn(*host)))
        if "torch" in peers:
            torch, f = peers["torch"]
            dev = [torch.tensor(inputs[k], device="cuda", requires_grad=argnum == i) for i, k in
                   enumerate(("x", "c", "z"))]
            row["torch"] = torch_time(torch, f, dev, argnum, want, what)
        rows.append(row)
    return rows


def measure_logsumexp(n: int, peers: dict) -> list[dict]:
    """``examples/logsumexp.tl`` (a maximum, then a sum shifted by it) and its gradient, CuPy arrays in and
    out, against C and the peers' own ``logsumexp`` on the GPU."""
    x = np.random.default_rng(0).normal(size=n)
    program = tl.parse((EXAMPLE.parent / "logsumexp.tl").read_text())
    rows = []
    for what, p in (("logsumexp", program), ("logsumexp gradient", tl.grad(program, "x"))):
        times, want = ours(p, dict(x=x), what)
        row = dict(n=n, what=what, **times)
        if "jax" in peers:
            jax = peers["jax"][0]
            from jax.scipy.special import logsumexp as f
            fn = jax.jit(f if p is program else jax.grad(f))
            dev = jax.device_put(x)
            assert np.allclose(np.asarray(fn(dev)), want, rtol=1e-9, atol=1e-9), f"JAX {what}"
            row["jax"] = best(lambda: fn(dev).block_until_ready())
        if "torch" in peers:
            torch, _ = peers["torch"]
            t = torch.tensor(x, device="cuda", requires_grad=p is not program)
            row["torch"] = torch_time(torch, lambda v: torch.logsumexp(v, 0), [t], None if p is program else 0,
                                      want, what)
        rows.append(row)
    return rows


def table(rows: list[dict], header: str) -> str:
    cols = [("c", "tensorlang C"), ("cuda", "tensorlang CUDA (from NumPy)"), ("copies", "the copies alone"),
            ("cuda_resident", "tensorlang CUDA (CuPy arrays)"),
            ("jax", "JAX jit (GPU arrays)"), ("jax_host", "JAX jit (from NumPy)"), ("torch", "PyTorch (GPU)")]
    cols = [(k, name) for k, name in cols if any(k in r for r in rows)]
    out = [header, "", "| n | program | " + " | ".join(name for _, name in cols) + " |",
           "|---|---|" + "---|" * len(cols)]
    for r in rows:
        cells = [f"{r[k] * 1e3:.3f} ms" if k in r else "-" for k, _ in cols]
        out.append(f"| {r['n']:,} | {r['what']} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def main() -> None:
    ap = options(__doc__, quick="n = 2^20 only")
    ap.add_argument("--out", default="cuda_bench.md", help="where the Markdown table goes")
    args = ap.parse_args()
    try:
        import cupy as cp

        name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    except Exception as err:  # noqa: BLE001
        print("no GPU here (CuPy and a device are needed):", err)
        return
    peers = _peers()
    rows = []
    for n in ([2 ** 20] if args.quick else [2 ** 20, 2 ** 22, 2 ** 24]):
        rows += measure(n, peers)
    rows += measure_logsumexp(2 ** 20 if args.quick else 2 ** 24, peers)
    versions = [f"GPU {name}", f"CPU cores {os.cpu_count()}", f"load average {os.getloadavg()[0]:.2f}"]
    for mod in ("cupy", "jax", "torch"):
        if mod in sys.modules:
            versions.append(f"{mod} {sys.modules[mod].__version__}")
    text = table(rows, f"Measured {time.strftime('%Y-%m-%d')}: " + ", ".join(versions) + ". Best of a few runs.")
    print(text)
    Path(args.out).write_text(text)
    Path(args.out).with_suffix(".json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
