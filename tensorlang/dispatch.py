"""Dispatch on a node's class: the one idiom by which tensorlang picks the code for a kind of node.

A class that handles several kinds of node names its methods ``<prefix><Class>`` (``_print_Add``,
``_emit_Mul``, ``_cost_Sum``) and calls ``dispatch(self, prefix, node, ...)``, which runs the method for
the node's class or for the nearest of its bases that has one, as SymPy's printers do
(``_print_<Class>`` along the MRO): a subclass of a node is handled as its base until it has a method of
its own, and a subclass of the handler overrides one kind by defining one method.  The method found is
cached per (handler class, prefix, node class).
"""
from __future__ import annotations

__all__ = ["dispatch", "method_for"]

_FOUND: dict = {}


def method_for(owner: type, prefix: str, kind: type):
    """The function ``<prefix><Class>`` of ``owner`` for the nearest class in ``kind``'s MRO that has one, or
    None (a handler that reports unknown kinds in its own words asks this)."""
    key = (owner, prefix, kind)
    if key not in _FOUND:
        _FOUND[key] = next((getattr(owner, prefix + c.__name__) for c in kind.__mro__
                            if hasattr(owner, prefix + c.__name__)), None)
    return _FOUND[key]


def dispatch(handler, prefix: str, node, *args):
    """``handler.<prefix><Class>(node, *args)`` for ``node``'s class (see the module docstring)."""
    method = method_for(type(handler), prefix, type(node))
    if method is None:
        raise TypeError(f"{type(handler).__name__} has no {prefix}<Class> method for a {type(node).__name__}")
    return method(handler, node, *args)
