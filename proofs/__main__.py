"""``python -m proofs``: check every rule's obligations and print a table; non-zero exit on failure.

Options: ``--programs K`` (programs per unit of source weight, default 10), ``--per-rule N`` (instances
checked per rule, default 20), ``--symbolic S`` (SymPy instances per polynomial rule, default 2),
``--pass NAME`` (only that pass; repeatable).  The draws are the same in every run (``proofs.runner``).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests.strategies


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m proofs", description=__doc__.splitlines()[0])
    ap.add_argument("--programs", type=int, default=10)
    ap.add_argument("--per-rule", type=int, default=20)
    ap.add_argument("--symbolic", type=int, default=2)
    ap.add_argument("--pass", dest="only", action="append")
    args = ap.parse_args(argv)
    from .runner import run

    failures = run(programs=args.programs, per_rule=args.per_rule, symbolic=args.symbolic, only=args.only)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
