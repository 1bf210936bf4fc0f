"""The one lazy-import mechanism: what a module or package needs from a heavy import is
imported on first use, so that importing it costs nothing.

- :func:`lazy_attributes`: a package's public names loaded on first use (PEP 562):
  ``__getattr__, __dir__ = lazy_attributes("pkg", {"Name": "pkg.module"}, globals())``
  (atoll, atoll.llm, mcp_servers._core, orchestrator, agents_runner).
- :func:`lazy_module`: a stand-in for ``import heavy`` bound at module level
  (``pymupdf = lazy_module("pymupdf")``) that imports on the first attribute read and then
  delegates (the app servers' office and PDF libraries).

Python's import lock makes a first import safe from several threads at once (sync tools run
in worker threads). Annotations naming a lazy module (``-> pymupdf.Document``) are strings
under ``from __future__ import annotations`` and never touch it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

__all__ = ["LazyModule", "lazy_attributes", "lazy_module"]


def lazy_attributes(
    package: str, exports: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: ``exports`` maps each public name to the
    module that defines it (a name that is ``package``'s own submodule, ``{"beneath":
    "pkg.beneath"}``, is that module); a name is imported once, then kept in ``namespace``."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        loaded = importlib.import_module(module)
        value = loaded if module == f"{package}.{name}" else getattr(loaded, name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__


class LazyModule:
    """Stands in for module ``name`` until an attribute is read; then imports and delegates."""

    __slots__ = ("_lazy_module", "_lazy_name")
    _lazy_module: ModuleType | None
    _lazy_name: str

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
