"""``make demo``: the end-to-end story so far, on the paper's programs of section 2.

For each example: parse it, print it back (as text and in the paper's notation), evaluate it on random
inputs, and give its exact work cost, symbolically in the sizes and at concrete sizes.
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
    shape = []
    while isinstance(t, TensorType):
        shape.append(t.size.evaluate({v: sizes[v.name] for v in t.size.size_vars}))
        t = t.elem
    if isinstance(t, RelType):
        return rng.random([s.evaluate({v: sizes[v.name] for v in s.size_vars}) for s in t.sizes]) < 0.5
    return rng.normal(size=shape) if shape else float(rng.normal())


def main():
    rng = np.random.default_rng(0)
    for path in sorted(HERE.glob("*.tl")):
        expr = tl.parse(path.read_text(), filename=path.name)
        sizes = {s: SIZES[s] for s in expr.sizes}
        inputs = {name: random_value(t, sizes, rng) for name, t in expr.free_vars.items()}
        value = tl.evaluate(expr, **inputs, **sizes)
        print(f"== {path.name} " + "=" * (60 - len(path.name)))
        print(expr)
        print(f"  LaTeX : {expr._repr_latex_()[:100]}...")
        print(f"  value : {np.array2string(np.asarray(value, dtype=object if isinstance(value, tuple) else float), precision=3, threshold=8)}")
        print(f"  cost  : {tl.cost(expr)}  (symbolic in {', '.join(expr.sizes) or 'no sizes'})")
        print(f"          {tl.cost(expr, **sizes)} at {sizes}")
    print("demo ok")


if __name__ == "__main__":
    main()
