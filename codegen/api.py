"""``tl.compile`` and ``tl.export`` (docs/codegen.md) of a program; re-exported by ``tensorlang.api``, whose
``tl.compile`` also takes a sparse Jacobian."""
from __future__ import annotations

import numpy as np

from tensorlang.errors import UnsupportedError

from .kernel import Kernel

__all__ = ["compile", "export"]


def compile(expr, target: str = "c", dtype: str = "float64", sanitize: bool = False) -> Kernel:  # noqa: A001
    """A ``Kernel`` for ``expr``: loop nests from isl emitted as C (``target="c"``: built with the system
    compiler at -O3, OpenMP where available, loaded in-process) or CUDA (``target="cuda"``: built with
    nvcc, run through CuPy where a GPU is); float64 by default, ``dtype="float32"`` on request.
    ``sanitize=True`` builds the C kernel (and its adjoint) with AddressSanitizer and UBSan instead of
    optimisation, cached apart; the process must have their runtime (docs/reliability.md)."""
    return Kernel(expr, target=target, dtype=dtype_name(dtype), sanitize=sanitize)


def dtype_name(dtype) -> str:
    """``"float64"`` or ``"float32"`` from either name or anything NumPy reads as those dtypes
    (``np.float32``, ``np.dtype("f4")``); any other is an ``UnsupportedError``."""
    try:
        name = np.dtype(dtype).name if not isinstance(dtype, str) or dtype in ("f4", "f8", "d", "f") else dtype
    except TypeError:
        name = None
    if name not in ("float64", "float32"):
        raise UnsupportedError(f"dtype must be 'float64' or 'float32' (or np.float64, np.float32), not {dtype!r}")
    return name


def export(kernels, name: str, directory: str, native: bool = False):
    """Write ``<directory>/<name>.py`` and its compiled library, importable later with NumPy alone.  The
    library runs on any CPU of this machine's architecture; ``native=True`` builds it for this CPU only
    (``-march=native``).  The module's ``BUILD`` records the compiler and its flags."""
    from .export import export as _export

    return _export(kernels, name, directory, native=native)
