"""Operations that a module calls and a module above it defines: the one way a lower layer reaches up.

A lower module keeps a ``Hooks`` table and calls through it (``nodes.OPERATIONS.to_source(e)`` in
``Expr.__str__``); the module that defines an operation installs it when it is imported
(``OPERATIONS.install(to_source=to_source)`` at the end of ``printer.py``).  So no module imports one
above it, and ``import tensorlang`` (which any ``from tensorlang.<module> import ...`` runs first)
imports every installing module, after which each table is complete.
"""
from __future__ import annotations

from typing import Callable


class Hooks:
    """A table of operations by name, read as attributes (``table.name(...)``)."""

    def __init__(self, owner: str):
        self._owner = owner

    def install(self, **operations: Callable) -> None:
        """Install (or replace) the implementation of each named operation."""
        vars(self).update(operations)

    def __getattr__(self, name: str):
        # only reached for an operation not installed: a module used while the package is being imported,
        # before the module that defines the operation
        raise AttributeError(f"{self._owner}: no implementation of {name!r} is installed yet (the module that "
                             f"defines it installs it when imported, and importing tensorlang imports it)")
