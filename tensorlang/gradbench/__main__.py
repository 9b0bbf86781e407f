"""The GradBench protocol: one JSON message per line on stdin, one answer per line on stdout
(``start`` -> the tool's name; ``define`` -> compile the eval's programs; ``evaluate`` -> output and
timings; anything else -> its id), in one thread.  An eval this tool does not implement fails at ``define``,
with why.  After a ``define`` what the process holds (modules, compiled programs, the symbolic machinery) is
moved out of the cyclic collector's sight (``gc.freeze``): it lives as long as the process, and a full
collection triggered by an ``evaluate``'s small objects would otherwise scan all of it again."""
from __future__ import annotations

import gc
import importlib
import json
import os
import sys
import traceback

from . import EVALS


def answer(message: dict, defined: dict) -> dict:
    kind = message.get("kind")
    if kind == "start":
        return {"tool": "tensorlang"}
    if kind == "define":
        module = message["module"]
        if module not in EVALS:
            return {"success": False, "error": f"tensorlang does not implement the eval {module!r} yet "
                                               f"(it implements {', '.join(EVALS)})"}
        try:
            defined[module] = importlib.import_module(f"{__package__}.{module}").define()
        except Exception as e:   # a define that fails is the eval's answer, with the cause
            return {"success": False, "error": "".join(traceback.format_exception(e))}
        gc.collect()
        gc.freeze()
        return {"success": True}
    if kind == "evaluate":
        try:
            return defined[message["module"]][message["function"]](message["input"])
        except Exception as e:
            return {"success": False, "error": "".join(traceback.format_exception(e))}
    return {}


_ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def main() -> None:
    if any(os.environ.get(k) != v for k, v in _ONE_THREAD.items()):
        # one thread, as GradBench compares tools (its JAX tool pins itself to one CPU); NumPy's BLAS reads
        # these when it loads, which importing this package already did: run again with them set
        os.execve(sys.executable, [sys.executable, "-m", __package__, *sys.argv[1:]], {**os.environ, **_ONE_THREAD})
    defined: dict = {}
    for line in sys.stdin:
        message = json.loads(line)
        print(json.dumps({"id": message["id"]} | answer(message, defined)), flush=True)


if __name__ == "__main__":
    main()
