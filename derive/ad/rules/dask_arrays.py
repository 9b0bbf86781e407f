"""Dask's calls that move a value between NumPy and Dask, whose derivative is the identity: the method
``compute`` of a Dask array (``dask.base.DaskMethodsMixin.compute``), ``dask.array.from_array`` and
``dask.array.asarray``.  Each gradient is as its value is (``codegen.dask_graph.like_values``): a Dask
array's a Dask array in the array's chunks, a NumPy array's (a number's) computed; so a lazy scalar's
``.compute()`` and a NumPy parameter made a Dask array inside the differentiated function both
differentiate.  Arithmetic on Dask arrays goes through the operator rules, as on NumPy arrays; Dask's
own functions (``da.sum`` ...) have no rules here.

``register`` imports Dask and writes the rules; ``runtime.library_rules`` calls it the first time a function
of Dask's is met without a rule, so that importing ``tensorlang.ad`` (or this module) does not import Dask.
"""
from __future__ import annotations

from ....codegen.dask_graph import like_values
from ....errors import UnsupportedError
from ..runtime import RULES


def _as_value(g, x):
    """Gradient ``g`` of ``x`` as ``x`` is."""
    return like_values((g,), (x,))[0]


def _compute(x, **kw):
    import dask.array as da

    if not isinstance(x, da.Array):
        raise UnsupportedError(f"tensorlang.ad differentiates .compute() of a Dask array, not of a "
                               f"{type(x).__qualname__}")
    return x.compute(**kw), lambda dy: (_as_value(dy, x),)


def _from_array(x, *args, **kw):
    import dask.array as da

    return da.from_array(x, *args, **kw), lambda dy: (_as_value(dy, x),)


def _asarray(a, *args, **kw):
    import dask.array as da

    return da.asarray(a, *args, **kw), lambda dy: (_as_value(dy, a),)


def register() -> None:
    """Dask's rules, written into the registry (Dask imported here)."""
    import dask.array as da
    from dask.base import DaskMethodsMixin

    RULES.update({DaskMethodsMixin.compute: _compute, da.from_array: _from_array, da.asarray: _asarray})
