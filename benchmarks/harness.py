"""What the benchmarks share: their command line, best-of timing, an empty build cache, peer worker
processes and matplotlib.

* ``options(doc, quick)``: the command line of a benchmark (``--help`` prints its docstring): ``--quick``
  where it has one (smaller sizes or fewer repetitions, as ``quick`` says) and, with ``peers=True``, the
  hidden options a peer worker process is started with (``--peer``, ``--program``, ``--dir``); a
  benchmark adds its own and calls ``parse_args()``.
* ``best(fn)``: the best of a few timed runs after a warming one (the machine is shared: the minimum is
  the least disturbed run).
* ``empty_build_cache()``: a ``with`` block in which kernels are built in a fresh, empty cache (the time
  from parsing to a first compiled kernel).
* ``run_peer(script, *args)``: ``script`` run again in a fresh process as a peer worker (so that the
  peers' thread pools never share a process with ours), and what it reported with ``report``.
* ``pyplot()``: ``matplotlib.pyplot`` drawing to files, or None where matplotlib is not importable;
  ``save_plot`` finishes and writes a figure.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time


def options(doc: str, quick: str | None = None, peers: bool = False) -> argparse.ArgumentParser:
    """The benchmark's command line: ``--quick`` (help text ``quick``) if given, the peer worker's options."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    if quick is not None:
        ap.add_argument("--quick", action="store_true", help=quick)
    if peers:
        for name in ("--peer", "--program", "--dir"):
            ap.add_argument(name, help=argparse.SUPPRESS)
    return ap


def best(fn, repeat: int = 15, budget: float = 2.0, clock=time.perf_counter) -> float:
    """The best of up to ``repeat`` runs of ``fn`` within ``budget`` seconds, after one warming run, timed
    by ``clock`` (wall time unless told)."""
    fn()
    times = []
    start = time.perf_counter()
    for _ in range(repeat):
        t = clock()
        fn()
        times.append(clock() - t)
        if time.perf_counter() - start > budget:
            break
    return min(times)


@contextlib.contextmanager
def empty_build_cache():
    """Kernels built inside the block go to a temporary, empty ``TENSORLANG_CACHE``."""
    old = os.environ.get("TENSORLANG_CACHE")
    with tempfile.TemporaryDirectory() as cache:
        os.environ["TENSORLANG_CACHE"] = cache
        try:
            yield cache
        finally:
            if old is None:
                del os.environ["TENSORLANG_CACHE"]
            else:
                os.environ["TENSORLANG_CACHE"] = old


def report(result) -> None:
    """A peer worker's result, for ``run_peer`` in the parent process."""
    print("RESULT " + json.dumps(result), flush=True)


def run_peer(script: str, *args: str):
    """``(result, process)``: ``python script *args`` run in a fresh process, and the last result it
    reported (None when it reported none; a process that crashed after reporting one has it too)."""
    r = subprocess.run([sys.executable, script, *args], capture_output=True, text=True)
    res = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    return (json.loads(res[-1][len("RESULT "):]) if res else None), r


def pyplot():
    """``matplotlib.pyplot`` with the file backend (Agg), or None."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def save_plot(fig, ax, title: str, path, legend_size: int = 8) -> None:
    """``ax`` titled, gridded and with its legend; ``fig`` laid out and written to ``path``."""
    ax.set_title(title, fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=legend_size)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
