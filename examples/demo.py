"""``make demo``: the end-to-end story on the paper's programs.

Part 1, for each example of section 2 (``examples/*.tl``): parse it, print it back (as text and in the
paper's notation), evaluate it on random inputs, give its exact work cost (symbolically in the sizes
and at concrete sizes), differentiate it, certify the derivative's cost (Theorems 6.1 and 6.35), and
check a compiled C kernel against the reference evaluator.

Part 2 (``examples/deconv_fit.py``): the deconvolution problem of section 2.1 in full: parse the loss,
derive and certify its gradient, compile both, and fit the kernel with L-BFGS.
"""
from pathlib import Path

import numpy as np

import tensorlang as tl
from tensorlang.nodes import PairType, RelType, TensorType

HERE = Path(__file__).resolve().parent
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


def tour(path: Path, rng) -> None:
    expr = tl.parse(path.read_text(), filename=path.name)
    sizes = {s: SIZES[s] for s in expr.sizes}
    inputs = {name: random_value(t, sizes, rng) for name, t in expr.free_vars.items()}
    print(f"== {path.name} " + "=" * (66 - len(path.name)))
    print(expr)
    print(f"  LaTeX   : {expr._repr_latex_()[:90]}...")
    print(f"  value   : {show(tl.evaluate(expr, **inputs, **sizes))}")
    print(f"  cost    : {tl.cost(expr)}  =  {tl.cost(expr, **sizes)} at {sizes or 'no sizes'}")
    wrt = [name for name, t in expr.free_vars.items() if not isinstance(t, RelType)][:1]
    if wrt:
        adjoint = tl.adjoint(expr, wrt)
        print(f"  adjoint for {wrt[0]}:")
        print("    " + str(adjoint).replace("\n", "\n    "))
        cert = tl.certify(expr, wrt, **sizes)
        print(f"  certify : forward/primal {cert.forward_ratio:.2f}, $_IO ratio {cert.adjoint_ratio:.2f}: "
              f"{'ok' if cert.ok else 'BOUND VIOLATED'}")
    kernel = tl.compile(expr)
    assert same(kernel(**inputs, **sizes), tl.evaluate(expr, **inputs, **sizes))
    print("  compiled: C kernel agrees with the evaluator")


def main():
    rng = np.random.default_rng(0)
    for path in sorted(HERE.glob("*.tl")):
        tour(path, rng)
    print()
    from deconv_fit import main as fit

    result = fit()
    assert result["certificate"].ok and result["error_lstsq"] < 1e-6
    print("demo ok")


if __name__ == "__main__":
    main()
