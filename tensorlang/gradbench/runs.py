"""Running an eval's function as GradBench asks: the input converted to arrays (a ``prepare`` timing, which
GradBench does not count), the function run at least ``min_runs`` times and until the runs add up to
``min_seconds``, one ``evaluate`` timing per run, and the output converted to plain JSON."""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable


@dataclasses.dataclass(frozen=True)
class Function:
    """An eval's function: ``prepare(input) -> args`` (the ``prepare`` timing), ``run(*args)`` (timed) and
    ``output(result) -> JSON``; ``repeated``: whether the input carries ``min_runs``/``min_seconds``."""

    prepare: Callable[[Any], tuple]
    run: Callable[..., Any]
    output: Callable[[Any], Any]
    repeated: bool = True

    def __call__(self, raw) -> dict:
        start = time.perf_counter_ns()
        args = self.prepare(raw)
        prepared = {"name": "prepare", "nanoseconds": time.perf_counter_ns() - start}
        min_runs = raw.get("min_runs", 1) if self.repeated else 1
        min_seconds = raw.get("min_seconds", 0) if self.repeated else 0
        timings, elapsed, result = [], 0, None
        while len(timings) < min_runs or elapsed < min_seconds * 1e9:
            start = time.perf_counter_ns()
            result = self.run(*args)
            took = time.perf_counter_ns() - start
            timings.append({"name": "evaluate", "nanoseconds": took})
            elapsed += took
        return {"success": True, "output": self.output(result), "timings": [prepared, *timings]}


# calls a ``define`` makes of its functions on a small input: Python's interpreter specialises a function's
# bytecode in its first few calls, and an eval times as few as three runs of each function (ode's first
# gradient at s = 1 took 313 us, its tenth 32)
WARM_CALLS = 20


def warm(fn: Callable, *args) -> None:
    """``fn(*args)`` ``WARM_CALLS`` times (the first builds what it needs: adjoint kernels, caches)."""
    for _ in range(WARM_CALLS):
        fn(*args)
