"""The GradBench protocol: one JSON message per line on stdin, one answer per line on stdout
(``start`` -> the tool's name; ``define`` -> compile the eval's programs; ``evaluate`` -> output and
timings; anything else -> its id).  An eval this tool does not implement fails at ``define``, with why."""
from __future__ import annotations

import importlib
import json
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
        return {"success": True}
    if kind == "evaluate":
        try:
            return defined[message["module"]][message["function"]](message["input"])
        except Exception as e:
            return {"success": False, "error": "".join(traceback.format_exception(e))}
    return {}


def main() -> None:
    defined: dict = {}
    for line in sys.stdin:
        message = json.loads(line)
        print(json.dumps({"id": message["id"]} | answer(message, defined)), flush=True)


if __name__ == "__main__":
    main()
