"""``make demo``: tensorlang's story on one screen.

1. A program: the squared error of a deconvolution (``examples/kernel_fit.tl``).
2. Its gradient, derived by tensorlang as another program.
3. The certificate that the gradient costs at most 4 times the loss (Theorems 6.1 and 6.35 of the paper).
4. Both compiled to C and driven by SciPy's optimiser: the fit, checked against NumPy's least squares.
5. ``tensorlang.ad``: an ordinary Python function with a loop, differentiated by source transformation.

Every example program, one by one: ``python -m tensorlang.examples``.
"""
import inspect

import numpy as np

import tensorlang as tl
from tensorlang import ad
from tensorlang.examples import reference, source
from tensorlang.examples.deconv_fit import main as fit


def indented(text: str) -> str:
    return "    " + str(text).replace("\n", "\n    ")


def smooth_max(x, steps):
    """An ordinary Python function: a loop, a branch, NumPy calls."""
    acc = 0.0
    for k in range(steps):
        w = np.exp(x * (k + 1) / steps)
        acc = acc + np.sum(w * x) / np.sum(w) if k % 2 == 0 else acc
    return acc


def main() -> None:
    loss = tl.parse(source("kernel_fit"), filename="kernel_fit.tl")
    print("1. A tensorlang program: how far the signal x convolved with a kernel c is from the observed z")
    print("   (gen/sum are loops over i = 0 .. n-1; sizes n, m come from the arrays):")
    print(indented(loss))
    gradient = tl.grad(loss, "c")
    print("2. Its gradient in c, derived as another program (tl.grad: the loss's derivative in every c[k] at")
    print("   once, by one pass backwards through the program: reverse mode; X8, dX8 are names it made up):")
    print(indented(gradient))
    result = fit(verbose=False)
    cert, res = result["certificate"], result["result"]
    print("3. Certified at n = 100000, m = 16 (tl.certify): derivatives cost at most 4x the loss, as the paper")
    print(f"   proves; counted exactly: directional derivative / loss = {cert.forward_ratio:.2f}, gradient / loss "
          f"= {cert.adjoint_ratio:.2f}")
    print(f"   (arithmetic plus reading inputs and writing outputs, '$_IO' in the paper): "
          f"{'ok' if cert.ok else 'BOUND VIOLATED'}")
    print("4. Both compiled to C (tl.compile) and handed to SciPy's L-BFGS-B optimiser, to find the 16 weights")
    print("   of c from a known signal x and its noisy convolution z:")
    print(f"   {res.nit} iterations, {res.nfev} loss+gradient calls in {result['fit_s'] * 1e3:.0f} ms; the fit "
          f"differs from NumPy's exact least squares by {result['error_lstsq']:.1e}")
    print("5. tensorlang.ad differentiates ordinary Python (loops, branches, NumPy) by rewriting its source:")
    print(indented(inspect.getsource(smooth_max).rstrip()))
    x = np.array([0.5, -1.0, 2.0])
    g = ad.grad(smooth_max)(x, 3)
    h = 1e-6
    fd = np.array([(smooth_max(x + h * e, 3) - smooth_max(x - h * e, 3)) / (2 * h) for e in np.eye(3)])
    shown = np.array2string(g, precision=5, suppress_small=True)
    print(f"   ad.grad(smooth_max)(x, 3) at x = {x}: {shown} (finite differences agree to "
          f"{np.max(np.abs(g - fd)):.0e})")
    assert cert.ok and result["error_lstsq"] < 1e-6 and np.allclose(g, fd, atol=1e-6)
    print(f"More: python -m tensorlang.examples (each example program); the language: {reference()}")


if __name__ == "__main__":
    main()
