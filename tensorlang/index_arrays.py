"""The values of index arrays (``g : [p]index[n]``): a one-dimensional array of integers, each in ``[0, n)``,
read as the relation ``{(i, g[i])}``.  NumPy only, so that the evaluator's inputs and the kernels' runtime
(which imports nothing else of tensorlang) check them alike; ``fail`` raises each caller's error."""
from __future__ import annotations

from typing import Callable, NoReturn

import numpy as np


def index_array(name: str, value, fail: Callable[[str], NoReturn]) -> np.ndarray:
    """``value`` as a one-dimensional int64 array, or ``fail`` naming ``name`` and what is wrong."""
    if hasattr(value, "tocoo") or hasattr(value, "dask"):
        fail(f"index array {name} must be a one-dimensional array of integers (a NumPy array or a list), "
             f"got a {type(value).__name__}")
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as exc:
        fail(f"index array {name} must be a one-dimensional array of integers: {exc}")
    if arr.ndim != 1:
        fail(f"index array {name} must be one-dimensional (one index per row), got shape {arr.shape}")
    if arr.dtype.kind not in "iu" and not (arr.size == 0 and arr.dtype.kind == "f"):
        fail(f"index array {name} must hold integers, got dtype {arr.dtype}")
    return arr.astype(np.int64, copy=False)


def check_extent(name: str, g: np.ndarray, extent: int, fail: Callable[[str], NoReturn]) -> None:
    """Every index of ``g`` in ``[0, extent)``, or ``fail`` naming the first that is not and where it is."""
    if g.size and (g.min() < 0 or g.max() >= extent):
        k = int(np.argmax((g < 0) | (g >= extent)))
        fail(f"index array {name} holds {g[k]} at position {k}, outside [0, {extent})")
