"""``python -m tensorlang.examples [NAME ...]``: a tour of the paper's programs, one by one (``--help``
lists their names).

For each example (all of them, or the names given): its description and program, the same program in
the paper's notation (the start of its LaTeX), its value on random inputs, its exact work cost
(symbolic in the sizes, and at small sizes), its gradient for the first input, the certificate of the
gradient's cost (Theorems 6.1 and 6.35), and a compiled C kernel checked against the evaluator.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

import tensorlang as tl
from tensorlang.examples import describe, names, reference, source
from tensorlang.nodes import PairType, RelType, TensorType

SIZES = {"n": 6, "m": 3, "B": 2}


def random_value(t, sizes, rng):
    """A random value of type ``t`` at the given sizes (pairs as tuples)."""
    if isinstance(t, PairType):
        return (random_value(t.first, sizes, rng), random_value(t.second, sizes, rng))
    if isinstance(t, RelType):
        return rng.random([s.evaluate({v: sizes[v.name] for v in s.size_vars}) for s in t.sizes]) < 0.5
    shape = []
    while isinstance(t, TensorType):
        shape.append(t.size.evaluate({v: sizes[v.name] for v in t.size.size_vars}))
        t = t.elem
    return rng.normal(size=shape) if shape else float(rng.normal())


def show(value) -> str:
    if isinstance(value, tuple):
        return "(" + ", ".join(show(v) for v in value) + ")"
    return np.array2string(np.asarray(value), precision=3, threshold=8)


def same(a, b) -> bool:
    if isinstance(a, tuple):
        return all(same(x, y) for x, y in zip(a, b))
    return np.allclose(a, b, rtol=1e-10, atol=1e-12)


def tour(name: str, rng) -> None:
    expr = tl.parse(source(name), filename=f"{name}.tl")
    sizes = {s: SIZES[s] for s in expr.sizes}
    inputs = {n: random_value(t, sizes, rng) for n, t in expr.free_vars.items()}
    print(f"== {name}: {describe(name)}")
    print(expr)
    print(f"  LaTeX   : {expr._repr_latex_()[:90]}...")
    print(f"  value   : {show(tl.evaluate(expr, **inputs, **sizes))}")
    print(f"  cost    : {tl.cost(expr)}  =  {tl.cost(expr, **sizes)} at {sizes or 'no sizes'}")
    wrt = [n for n, t in expr.free_vars.items() if not isinstance(t, RelType)][:1]
    if wrt:
        print(f"  adjoint for {wrt[0]}:")
        print("    " + str(tl.adjoint(expr, wrt)).replace("\n", "\n    "))
        cert = tl.certify(expr, wrt, **sizes)
        print(f"  certify : forward/primal {cert.forward_ratio:.2f}, $_IO ratio {cert.adjoint_ratio:.2f}: "
              f"{'ok' if cert.ok else 'BOUND VIOLATED'}")
    kernel = tl.compile(expr)
    assert same(kernel(**inputs, **sizes), tl.evaluate(expr, **inputs, **sizes))
    print("  compiled: C kernel agrees with the evaluator\n")


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m tensorlang.examples",
        description="A tour of the example programs shipped with tensorlang: each one printed (as text and "
                    "in the paper's notation), evaluated, costed, differentiated, certified and compiled.",
        epilog="examples: " + ", ".join(names()) + " (tl-cost --list-examples describes them)",
    )
    ap.add_argument("names", nargs="*", metavar="NAME", help="the examples to show (default: all of them)")
    return ap


def main(argv=None) -> int:
    try:
        args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    except SystemExit as exc:  # --help (status 0) or a bad option (status 2)
        return int(exc.code or 0)
    chosen = args.names or names()
    rng = np.random.default_rng(0)
    try:
        for name in chosen:
            tour(name.removesuffix(".tl"), rng)
    except tl.TensorLangError as exc:
        print(f"python -m tensorlang.examples: {exc}", file=sys.stderr)
        return 2
    print(f"the language reference: {reference()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
