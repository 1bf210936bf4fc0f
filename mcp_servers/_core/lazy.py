"""Heavy libraries imported on first use, so that building a server and listing its tools
never pays for them.

``pymupdf = lazy_module("pymupdf")`` at module level binds a stand-in; the real import runs
the first time an attribute is read (``pymupdf.open(...)``) and later reads go straight to the
module. Python's import lock makes the first import safe from several threads at once (sync
tools run in worker threads). Annotations naming the module (``-> pymupdf.Document``) are
strings under ``from __future__ import annotations`` and never touch it.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    """Stands in for module ``name`` until an attribute is read; then imports and delegates."""

    __slots__ = ("_lazy_module", "_lazy_name")

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_lazy_name", name)
        object.__setattr__(self, "_lazy_module", None)

    def _load(self) -> ModuleType:
        module = self._lazy_module
        if module is None:
            module = importlib.import_module(self._lazy_name)
            object.__setattr__(self, "_lazy_module", module)
        return module

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._load(), attribute)

    def __repr__(self) -> str:
        state = "loaded" if self._lazy_module is not None else "not loaded"
        return f"<lazy module {self._lazy_name!r} ({state})>"


def lazy_module(name: str) -> Any:
    """A stand-in for ``import name`` that imports on first attribute access (typed ``Any``)."""
    return LazyModule(name)
