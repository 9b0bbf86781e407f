"""Compiled gradients against their forwards, JAX jit and PyTorch, and the cost of deriving and compiling
deep programs.  Standalone: ``python benchmarks/bench_gradients.py [--quick]``.

* The deconvolution loss of section 2.1 (n = 2^21, m = 16) with gradients in ``c``, in ``x`` and in both;
  a 2-D convolution loss (image and kernel gradients, and both); a long reduction (the log of a sum of
  exponentials, n = 10^6).  Every time is the best of several runs (``harness.best``), every
  ours and PyTorch on one thread, JAX with its default thread pool; the ratio gradient / forward is
  taken from this one run, in one process, forward and gradients timed in alternation.  Ours is also
  timed in CPU time of the calling thread (``time.thread_time``: the kernel runs on it), which the other
  agents on this shared machine disturb much less than wall time; its ratio is the second one.  JAX (``jax.jit``, float64) and
  PyTorch (eager, float64, one thread, ``.backward()``) run in a worker process per program and per
  forward or gradient, on the same inputs, right after ours: their OpenMP and XLA thread pools never
  share a process with ours.
* A ``k``-layer tanh network written as one program (``mlp_source``), ``tl.grad`` with respect to every
  weight: the time to derive it and the time to compile the gradient (generate C, build it with an
  empty cache) against ``k``.  The derivation time is CPU time of this process (``time.process_time``),
  which other agents on this shared machine disturb less than wall time; each program's variables have
  fresh names per repeat, so that no node is shared with an earlier repeat.  Generating and building
  C are timed in wall time and in CPU time (this process's for generation, the C compiler's for the
  build).  ``--depth-only`` replaces only this table in ``docs/gradients_bench.md``.

Results go to ``docs/gradients_bench.md`` and, when matplotlib is importable, ``docs/gradients_bench.png``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from harness import best, empty_build_cache, options, pyplot, report, run_peer, save_plot

# ours on one thread: on this machine (2 cores shared with other agents) a parallel region waits for its
# slowest thread at every barrier, and timings of 2-thread runs varied 10-fold between runs.  JAX keeps
# its default thread pool (single-threaded, XLA's f64 convolution was 30x slower), PyTorch runs on one.
os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DECONV = (ROOT / "examples" / "deconv_loss.tl").read_text()
CONV2D = """x : [n + m - 1][n + m - 1]R
w : [m][m]R
z : [n][n]R
let f = gen(i:n, j:n) sum(a:m, b:m) x[i + a, j + b] * w[a, b] in
sum(i:n, j:n) (f[i, j] - z[i, j]) * (f[i, j] - z[i, j])"""
LOGSUMEXP = "x : [n]R\nlog(sum(i:n) exp(x[i]))"


def _deconv_inputs(n, m, r):
    return {"x": r.standard_normal(n + m - 1), "c": r.standard_normal(m), "z": r.standard_normal(n)}


def _conv2d_inputs(n, m, r):
    return {"x": r.standard_normal((n + m - 1, n + m - 1)), "w": r.standard_normal((m, m)),
            "z": r.standard_normal((n, n))}


# name -> (source, argument names in order, inputs(r), [wrt lists])
PROGRAMS = {
    "deconvolution, n = 2^21, m = 16": (DECONV, ("x", "c", "z"), lambda r: _deconv_inputs(1 << 21, 16, r),
                                        [["c"], ["x"], ["c", "x"]]),
    "2-D convolution, n = 1024, m = 5": (CONV2D, ("x", "w", "z"), lambda r: _conv2d_inputs(1024, 5, r),
                                         [["w"], ["x"], ["x", "w"]]),
    "log-sum-exp, n = 10^6": (LOGSUMEXP, ("x",), lambda r: {"x": r.standard_normal(10**6)}, [["x"]]),
}
QUICK = {
    "deconvolution, n = 2^21, m = 16": lambda r: _deconv_inputs(1 << 16, 16, r),
    "2-D convolution, n = 1024, m = 5": lambda r: _conv2d_inputs(128, 5, r),
    "log-sum-exp, n = 10^6": lambda r: {"x": r.standard_normal(10**5)},
}


ALTERNATIVE = " (shift and add)"
WITH_ALTERNATIVE = {"deconvolution, n = 2^21, m = 16"}


def _peer_losses(pk):
    """program name -> the loss as the peer's user writes it (arguments in PROGRAMS' order).  Where JAX
    crashes three times, the deconvolution (shift and add) is timed instead (marked * in the table)."""
    if pk == "jax":
        import jax

        jax.config.update("jax_enable_x64", True)
        jax.config.update("jax_platforms", "cpu")
        import jax.numpy as jnp

        def conv2d(x, w, z):
            f = jax.lax.conv_general_dilated(x[None, None], w[None, None], (1, 1), "VALID")[0, 0]
            return jnp.sum((f - z) ** 2)

        def shift_add(x, c, z):  # what a user falls back to when jnp.correlate's gradient crashes
            f = sum(c[j] * x[j:j + z.shape[0]] for j in range(c.shape[0]))
            return jnp.sum((f - z) ** 2)

        return {"deconvolution, n = 2^21, m = 16": lambda x, c, z: jnp.sum((jnp.correlate(x, c, "valid") - z) ** 2),
                "deconvolution, n = 2^21, m = 16 (shift and add)": shift_add,
                "2-D convolution, n = 1024, m = 5": conv2d,
                "log-sum-exp, n = 10^6": lambda x: jnp.log(jnp.sum(jnp.exp(x)))}
    import torch

    F = torch.nn.functional
    return {"deconvolution, n = 2^21, m = 16":
            lambda x, c, z: torch.sum((F.conv1d(x.view(1, 1, -1), c.view(1, 1, -1)).view(-1) - z) ** 2),
            "2-D convolution, n = 1024, m = 5":
            lambda x, w, z: torch.sum((F.conv2d(x[None, None], w[None, None])[0, 0] - z) ** 2),
            "log-sum-exp, n = 10^6": lambda x: torch.log(torch.sum(torch.exp(x)))}


def peer_worker(pk: str, name: str, folder: str, what: str) -> None:
    """Times one peer on one program's forward (``what`` = ``fwd``) or gradient (``what`` = the inputs,
    comma-separated) and prints ``RESULT {json}``: one process each, so that a peer that crashes (JAX
    0.10's XLA segfaults now and then on the deconvolution's gradients at n = 2^21) loses one try."""
    data = np.load(Path(folder) / "inputs.npz")
    ref = json.loads((Path(folder) / "ref.json").read_text())
    _, argnames, _, _ = PROGRAMS[name.replace(ALTERNATIVE, "")]
    f = _peer_losses(pk)[name]
    wrt = what.split(",")
    if pk == "jax":
        import jax

        args = [jax.numpy.asarray(data[a]) for a in argnames]
        if what == "fwd":
            jf = jax.jit(f)
            out = {"time": best(lambda: jf(*args).block_until_ready(), budget=3.0), "ok": True}
        else:
            jg = jax.jit(jax.grad(f, argnums=tuple(argnames.index(w) for w in wrt)))
            got = jg(*args)
            out = {"time": best(lambda: jax.block_until_ready(jg(*args)), budget=3.0),
                   "ok": _agrees([np.asarray(g) for g in got], ref[what])}
    else:
        import torch

        torch.set_num_threads(1)  # its 2-thread pool stalls on this shared machine (bench_codegen)
        args = [torch.from_numpy(np.ascontiguousarray(data[a])) for a in argnames]
        if what == "fwd":
            with torch.no_grad():
                out = {"time": best(lambda: f(*args), budget=3.0), "ok": True}
        else:
            def grad():
                leaves = [a.clone().requires_grad_(n in wrt) for n, a in zip(argnames, args)]
                f(*leaves).backward()
                return [leaves[argnames.index(w)].grad for w in wrt]
            got = grad()
            out = {"time": best(grad, budget=3.0), "ok": _agrees([g.numpy() for g in got], ref[what])}
    report(out)


def _agrees(got, ref) -> bool:
    return all(np.allclose(g, np.asarray(r), rtol=1e-6, atol=1e-8 * max(1.0, float(np.abs(r).max())))
               for g, r in zip(got, ref))


def _as_list(v, n):
    return [np.asarray(v)] if n == 1 else [np.asarray(x) for x in v]


def kernels_table(quick: bool, rng) -> list[str]:
    import tensorlang as tl

    rows = ["| program | wrt | ours fwd (ms) | ours grad (ms) | grad / fwd | grad / fwd (CPU time) | JAX fwd (ms) | "
            "JAX grad (ms) | ours / JAX grad | PyTorch fwd (ms) | PyTorch grad (ms) | ours / PyTorch grad |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, (src, argnames, inputs, wrts) in PROGRAMS.items():
        d = (QUICK[name] if quick else inputs)(rng)
        expr = tl.parse(src)
        fk = tl.compile(expr)
        ins = {a: d[a] for a in argnames}
        gks = {",".join(w): tl.compile(tl.grad(expr, w if len(w) > 1 else w[0])) for w in wrts}
        ref = {k: [r.tolist() for r in _as_list(g(**ins), len(k.split(",")))] for k, g in gks.items()}
        for k, g in gks.items():  # the evaluator is the oracle at a small size; here NumPy-free agreement
            assert all(np.all(np.isfinite(r)) for r in _as_list(g(**ins), len(k.split(",")))), name
        # ours: forward and gradients interleaved, best of rounds
        times = {"fwd": float("inf"), **{k: float("inf") for k in gks}}
        cpu = dict(times)
        for _ in range(5):
            for k, f in [("fwd", fk), *gks.items()]:
                times[k] = min(times[k], best(lambda: f(**ins), budget=1.0))
                cpu[k] = min(cpu[k], best(lambda: f(**ins), budget=1.0, clock=time.thread_time))
        peers = {}
        with tempfile.TemporaryDirectory() as folder:
            np.savez(Path(folder) / "inputs.npz", **ins)
            (Path(folder) / "ref.json").write_text(json.dumps(ref))
            for pk in ("jax", "torch"):
                for what in ["fwd", *gks]:
                    for _ in range(3):  # JAX 0.10's XLA segfaults now and then on the deconvolution's gradients
                        res, r = run_peer(__file__, "--peer", pk, "--program", name, "--dir", folder, "--what", what)
                        if res is not None:
                            break
                    if res is None and pk == "jax" and name in WITH_ALTERNATIVE:
                        res, r = run_peer(__file__, "--peer", pk, "--program", name + ALTERNATIVE, "--dir", folder,
                                          "--what", what)
                        if res is not None:
                            res["alternative"] = True
                    peers[(pk, what)] = res
                    if res is None:
                        print(f"  {pk} failed on {name} ({what}): exit {r.returncode} {r.stderr[-300:]}", flush=True)
        for k in gks:
            cells = [name, k, f"{times['fwd']*1e3:.3f}", f"{times[k]*1e3:.3f}", f"{times[k]/times['fwd']:.2f}",
                     f"{cpu[k]/cpu['fwd']:.2f}"]
            for pk in ("jax", "torch"):
                pf, pg = peers.get((pk, "fwd")), peers.get((pk, k))
                cells.append(f"{pf['time']*1e3:.3f}" if pf else "failed")
                if pg is None:
                    cells += ["crashed", "n/a"]
                    continue
                flag = ("" if pg["ok"] else " (disagrees)") + ("*" if pg.get("alternative") else "")
                cells += [f"{pg['time']*1e3:.3f}{flag}", f"{times[k]/pg['time']:.2f}"]
            rows.append("| " + " | ".join(cells) + " |")
            print(rows[-1], flush=True)
    return rows


def mlp_source(k: int, prefix: str = "W") -> str:
    """A k-layer tanh network as one program: h_l = tanh(W_l h_(l-1)), loss = |h_k - y|^2."""
    lines = ["x : [n]R", "y : [n]R"] + [f"{prefix}{l} : [n][n]R" for l in range(1, k + 1)]
    prev = "x"
    for l in range(1, k + 1):
        lines.append(f"let h{l} = gen(i:n) tanh(sum(j:n) {prefix}{l}[i, j] * {prev}[j]) in")
        prev = f"h{l}"
    lines.append(f"sum(i:n) ({prev}[i] - y[i]) * ({prev}[i] - y[i])")
    return "\n".join(lines)


def depth_table(ks, repeats: int = 3):
    """[(k, derive s, generate s, generate CPU s, build s, build CPU s, C bytes)], each the best of
    ``repeats`` (the build's CPU time: the C compiler's, a child process)."""
    import resource

    import tensorlang as tl
    from tensorlang.codegen.kernel import Kernel

    def children_cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime

    out = []
    for k in ks:
        derive, gen, gen_cpu, build, build_cpu, size = [], [], [], [], [], 0
        for r in range(repeats):
            prefix = f"W{k}_{r}_"
            e = tl.parse(mlp_source(k, prefix))
            t = time.process_time()
            g = tl.grad(e, [f"{prefix}{l}" for l in range(1, k + 1)])
            derive.append(time.process_time() - t)
            if r == 0 or k <= 16:
                with empty_build_cache():
                    c = children_cpu()
                    kern = Kernel(g)
                    build_cpu.append(children_cpu() - c)
                gen.append(kern.timings["generate_s"])
                gen_cpu.append(kern.timings["generate_cpu_s"])
                build.append(kern.timings["build_s"])
                size = len(kern.source)
        out.append((k, min(derive), min(gen), min(gen_cpu), min(build), min(build_cpu), size))
        print(f"k={k:3d}  derive {min(derive):.3f} s  generate {min(gen):.3f} s ({min(gen_cpu):.3f} CPU)  "
              f"build {min(build):.3f} s ({min(build_cpu):.3f} CPU)  C {size} bytes", flush=True)
    return out


def main() -> None:
    ap = options(__doc__, "small sizes (rows keep their names), k up to 16", peers=True)
    ap.add_argument("--what", help=argparse.SUPPRESS)
    ap.add_argument("--depth-only", action="store_true", help="only the k-layer table")
    args = ap.parse_args()
    if args.peer:
        peer_worker(args.peer, args.program, args.dir, args.what)
        return
    rng = np.random.default_rng(0)
    load0 = os.getloadavg()[0]
    text = ["# Compiled gradients (generated by benchmarks/bench_gradients.py)", ""]
    if not args.depth_only:
        text += kernels_table(args.quick, rng)
        text += ["", "Ours and PyTorch on one thread, JAX with its default thread pool. `*`: JAX crashed (XLA "
                 "segfault) three times on `jnp.correlate`'s gradient, so the same loss written as a sum of 16 "
                 "shifted slices was timed. `crashed`: no time.", ""]
    ks = [4, 8, 16] if args.quick else [4, 8, 16, 32, 64, 128]
    depth = depth_table(ks)
    out = ROOT / "docs" / "gradients_bench.md"
    if args.depth_only and out.exists():  # the other tables as they are
        kept = out.read_text().splitlines()
        text = kept[:next((i for i, line in enumerate(kept) if line.startswith("| layers k")), len(kept))]
    text += ["| layers k | derive tl.grad (s, CPU) | generate C (s, wall) | generate C (s, CPU) | build C (s, wall) | "
             "build C (s, gcc CPU) | C source (KB) | derive / k (ms) | build / k (ms) |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    text += [f"| {k} | {d:.3f} | {g:.3f} | {gc:.3f} | {b:.3f} | {bc:.3f} | {s / 1024:.0f} | {1e3 * d / k:.1f} | "
             f"{1e3 * b / k:.0f} |" for k, d, g, gc, b, bc, s in depth]
    text += ["", f"Load average at the start and end of the run that made the k-layer table: {load0:.2f} / {os.getloadavg()[0]:.2f} "
             f"(2 cores shared with other agents): wall times are noisy, ratios are from this one run."]
    out.write_text("\n".join(text) + "\n")
    print("\n".join(text))
    plt = pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(5, 3.6))
    kk = [r[0] for r in depth]
    ax.plot(kk, [r[1] for r in depth], "o-", label="derive (tl.grad, CPU s)")
    ax.plot(kk, [r[2] for r in depth], "s-", label="generate C (s, wall)")
    ax.plot(kk, [r[4] for r in depth], "^-", label="build C (s, wall)")
    ax.set_xlabel("layers k")
    ax.set_ylabel("seconds")
    save_plot(fig, ax, "k-layer tanh network: gradient wrt every weight", ROOT / "docs" / "gradients_bench.png")


if __name__ == "__main__":
    main()
