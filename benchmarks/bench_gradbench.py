"""GradBench's evals run against tensorlang's tool (``python -m tensorlang.gradbench``) and, in the same
run, against GradBench's own JAX and PyTorch tools where they run in this environment (``make bench``
installs JAX, PyTorch, pydantic and dataclasses-json: the ``bench`` extra) and its C++ ``manual`` tool.
Each eval's answers are checked by the eval itself (against ``manual`` for most); each tool's time on an
eval is the sum over its inputs of each input's fastest run (``--min-runs 3``: a JIT's compilation is left
out on both sides), as the bar of the GradBench comparison counts it; GradBench's own score (the sum of
each input's mean run) is beside it.

Writes ``docs/gradbench_bench.md`` (a table per eval: valid inputs, time per tool, ratio to the fastest)
and ``docs/gradbench_bench.png``.  Every tool runs in one thread (``OMP_NUM_THREADS=1`` and the like; the
JAX tool pins itself to one core); the load average before and after each eval is printed and written.

Run: ``python benchmarks/bench_gradbench.py`` (the sizes of the GradBench snapshot's "quick" preset,
``../shared/gradbench/README.md``); ``--quick``: smaller inputs and fewer evals; ``--all``: ``particle``
and ``saddle`` too (minutes each: a whole gradient descent through nested derivatives); ``--evals a,b``:
those evals only.  GradBench's runner needs ``../shared/gradbench`` (copied to a temporary folder when
that is read-only, and built there once by its ``setup.sh``: about 3 minutes).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import runpy
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import options, pyplot, save_plot

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "gradbench"
RUNS = "--min-runs 3 --min-seconds 0"

# each eval's arguments: the snapshot README's "quick" preset, then smaller ones for --quick
SIZES = {
    "hello": "",
    "lse": "-n 2500 10000 40000",
    "llsq": "-n 16 64 256",
    "det": "-l 5 6 7",
    "ode": "-n 1000 -s 1 10",
    "gmm": "-d 2 10 -k 5 10",
    "kmeans": "-k 10 100 -n 1000 -d 8",
    "lstm": "-l 2 -c 1024",
    "ba": "--max 1",
    "ht": "--max 1",
}
QUICK_SIZES = {"hello": "", "lse": "-n 2500 10000", "llsq": "-n 16 64", "det": "-l 5 6", "ode": "-n 1000 -s 1",
               "gmm": "-d 2 -k 5", "kmeans": "-k 10 -n 1000 -d 8"}
SLOW = {"particle": "", "saddle": ""}   # only with --all

# the tools, each (name in the tables, the runner's --tool, the modules its Python needs)
TOOLS = [
    ("tensorlang", f"{sys.executable} -m tensorlang.gradbench", ()),
    ("JAX", "jax", ("jax", "pydantic", "dataclasses_json")),
    ("JAX, waited for", f"{sys.executable} {Path(__file__).resolve()} --jax-waited", ("jax", "pydantic",
                                                                                     "dataclasses_json")),
    ("PyTorch", "pytorch", ("torch", "pydantic", "dataclasses_json")),
    ("manual (C++)", "manual", ()),
]
DISPATCH_ONLY = "JAX"   # its times are not its work (below): never the baseline of a ratio
ONE_THREAD = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                                     "VECLIB_MAXIMUM_THREADS")}


def gradbench_root() -> Path:
    """A built GradBench folder: ``../shared/gradbench`` if writable, else its copy in the temporary folder
    (``setup.sh`` builds ``manual`` and the evals' environment once; it is idempotent)."""
    if not SHARED.is_dir():
        sys.exit(f"GradBench's folder {SHARED} is not there: nothing to run")
    root = SHARED if os.access(SHARED, os.W_OK) else Path(tempfile.gettempdir()) / "gradbench"
    if not (root / "run_eval.py").exists():
        shutil.copytree(SHARED, root)
    return root


def eval_python(root: Path) -> str:
    """The Python of the evals' environment, which ``setup.sh`` prints on its last line."""
    done = subprocess.run(["bash", "setup.sh"], cwd=root, capture_output=True, text=True)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        sys.exit(f"GradBench's setup.sh failed in {root}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return lines[-1].strip()


def available(modules) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in modules)


def jax_waited() -> None:
    """GradBench's JAX tool (run from the runner's folder) with each function's result waited for
    (``jax.block_until_ready``) inside its timer: what it computes, not only what it dispatches."""
    import jax
    from gradbench import wrap

    tool = Path("python/gradbench/gradbench/tools/jax").resolve()
    sys.path.insert(0, str(tool))
    for name in ("multiple_runs", "function"):
        def waiting(make=getattr(wrap, name), **kw):
            decorate = make(**kw)
            return lambda f: decorate(lambda x: jax.block_until_ready(f(x)))
        setattr(wrap, name, waiting)
    sys.argv = [str(tool / "run.py")]
    runpy.run_path(str(tool / "run.py"), run_name="__main__")


def run_one(root: Path, python: str, eval_name: str, args: str, tool: str, out: Path) -> dict:
    """The runner's summary of ``tool`` on ``eval_name`` with ``args`` (its JSON, or a failure), in a folder
    ``out`` of the tool's own (two tools are commands of the same Python)."""
    out.mkdir(exist_ok=True)
    summary = out / f"{eval_name}.json"
    cmd = [python, "run_eval.py", "--eval", eval_name, "--tool", tool, "--tool-python", sys.executable,
           "--eval-args", f"{args} {RUNS}".strip(), "--summary-json", str(summary), "--quiet",
           "--timeout", "900", "--stderr", str(summary.with_suffix(".stderr"))]
    env = dict(os.environ, **ONE_THREAD)
    subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    if not summary.exists():
        return {"outcome": "no summary", "defined": False}
    return json.loads(summary.read_text())


def cell(s: dict | None, fastest: float | None) -> tuple[str, str, str, str]:
    """(valid, time, ratio to the fastest, GradBench's score) of one summary, as table cells."""
    if s is None:
        return "not installed", "-", "-", "-"
    if not s.get("defined"):
        return "not implemented", "-", "-", "-"
    valid = f"{s['valid']}/{s['total']}"
    if s["valid"] != s["total"]:
        return valid + f" ({s['outcome']})", "-", "-", "-"
    t = s["evaluate_ms_min_sum"]
    ratio = f"{t / fastest:.2f}" if fastest else "-"
    return valid, f"{t:.3f} ms", ratio, f"{s['evaluate_ms_mean_sum']:.3f} ms"


def time_of(s: dict | None) -> float | None:
    """A tool's time on an eval (the sum of each input's fastest run), where every answer was valid."""
    ok = s and s.get("defined") and s["valid"] == s["total"]
    return s["evaluate_ms_min_sum"] if ok else None


def fastest_of(per_tool: dict) -> float | None:
    """The least time among the tools that timed their work (every one but JAX's own, which times dispatch)."""
    times = [t for name, s in per_tool.items() if name != DISPATCH_ONLY and (t := time_of(s)) is not None]
    return min(times) if times else None


def load() -> str:
    return f"{os.getloadavg()[0]:.2f}"


def main() -> None:
    ap = options(__doc__, quick="smaller inputs, fewer evals")
    ap.add_argument("--all", action="store_true", help="particle and saddle too (minutes each)")
    ap.add_argument("--evals", default=None, help="comma-separated evals to run (default: all of the preset)")
    ap.add_argument("--jax-waited", action="store_true", help=argparse.SUPPRESS)
    opts = ap.parse_args()
    if opts.jax_waited:
        return jax_waited()
    sizes = dict(QUICK_SIZES if opts.quick else SIZES)
    if opts.all:
        sizes.update(SLOW)
    if opts.evals:
        sizes = {e: ((QUICK_SIZES if opts.quick else SIZES) | SLOW).get(e, SIZES.get(e, ""))
                 for e in opts.evals.split(",")}
    t0 = time.perf_counter()
    root = gradbench_root()
    python = eval_python(root)
    tools = [(name, tool) for name, tool, modules in TOOLS if available(modules)]
    missing = [name for name, _, modules in TOOLS if not available(modules)]
    results: dict[str, dict[str, dict | None]] = {}
    loads: dict[str, tuple[str, str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for eval_name, args in sizes.items():
            before = load()
            results[eval_name] = {name: run_one(root, python, eval_name, args, tool, Path(tmp) / str(k))
                                  for k, (name, tool) in enumerate(tools)}
            results[eval_name].update({name: None for name in missing})
            loads[eval_name] = (before, load())
            row = {name: time_of(s) for name, s in results[eval_name].items()}
            print(f"{eval_name} ({args or 'defaults'}; load {before} -> {loads[eval_name][1]}): "
                  + ", ".join(f"{n} {v:.3f} ms" if v is not None else f"{n} -" for n, v in row.items()),
                  flush=True)
    write_docs(sizes, results, loads, [name for name, _, _ in TOOLS])
    print(f"docs/gradbench_bench.md and .png written ({time.perf_counter() - t0:.0f} s)")


def write_docs(sizes: dict, results: dict, loads: dict, names: list[str]) -> None:
    lines = ["# GradBench's evals: tensorlang's tool against JAX's, PyTorch's and `manual` (generated by "
             "benchmarks/bench_gradbench.py)", "",
             "Each eval's answers checked by the eval (most against `manual`). Time: the sum over the eval's "
             "inputs of each input's fastest `evaluate` run (`--min-runs 3 --min-seconds 0`), one thread per "
             "tool; GradBench's score (the sum of each input's mean run, JIT compilation included where a "
             "tool compiles on its first run) beside it. JAX's tool times its functions' dispatch: they return "
             "JAX arrays, computed asynchronously and converted after its timer stops, so its times are a lower "
             "bound on its work. tensorlang's derivation and compilation are in its `define`, not in these "
             "times (docs/gradbench.md).", ""]
    lines += ["| eval | " + " | ".join(names) + " | tensorlang over the faster of JAX (waited for) and PyTorch |",
              "| --- " * (len(names) + 2) + "|"]
    for eval_name, per_tool in results.items():
        t = {name: time_of(per_tool.get(name)) for name in names}
        peers = [t[n] for n in ("JAX, waited for", "PyTorch") if t.get(n) is not None]
        over = f"{t['tensorlang'] / min(peers):.2f}" if peers and t["tensorlang"] is not None else "-"
        lines.append(f"| `{eval_name}` | " + " | ".join("-" if t[n] is None else f"{t[n]:.3f} ms" for n in names)
                     + f" | {over} |")
    lines.append("")
    for eval_name, per_tool in results.items():
        fastest = fastest_of(per_tool)
        before, after = loads[eval_name]
        lines += [f"## `{eval_name}` ({sizes[eval_name] or 'its inputs'}; load average {before} -> {after})", "",
                  "| tool | valid | time (fastest runs) | over the fastest (JAX's own tool aside) "
                  "| GradBench score (mean runs) |",
                  "| --- | --- | --- | --- | --- |"]
        for name in names:
            lines.append(f"| {name} | " + " | ".join(cell(per_tool.get(name), fastest)) + " |")
        lines.append("")
    lines.append(f"Python {sys.version.split()[0]}; " + ", ".join(
        f"{m} {__import__(m).__version__}" for m in ("numpy", "jax", "torch") if available((m,))) + ".")
    (ROOT / "docs" / "gradbench_bench.md").write_text("\n".join(lines) + "\n")
    plot(results, names)


def plot(results: dict, names: list[str]) -> None:
    plt = pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(8, 3.6))
    evals = [e for e in results if e != "hello"]   # (hello times a scalar's square: manual's is 0 ms)
    names = [n for n in names if n != DISPATCH_ONLY]
    width = 0.8 / len(names)
    for k, name in enumerate(names):
        heights = []
        for e in evals:
            t, fastest = time_of(results[e].get(name)), fastest_of(results[e])
            heights.append(t / fastest if t is not None and fastest else float("nan"))
        ax.bar([i + k * width for i in range(len(evals))], heights, width, label=name)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(evals))], evals)
    ax.set_yscale("log")
    ax.set_ylabel("time over the fastest tool's")
    save_plot(fig, ax, "GradBench evals, one thread: time over the fastest tool's (no bar: not implemented)",
              ROOT / "docs" / "gradbench_bench.png")


if __name__ == "__main__":
    main()
