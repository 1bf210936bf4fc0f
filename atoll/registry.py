"""The one registry mechanism: things registered by name, found lazily, extendable by packages.

Agents (``agents_runner.registry``), executors (``orchestrator.executors``), grader check kinds
(``grader.checks``) and app servers (``mcp_servers``) are each one :class:`Registry`. An entry
comes from one of four places, looked up in this order:

1. registered in-process: ``@REGISTRY.register("name", **metadata)`` on the implementation, or
   ``REGISTRY.add("name", value)``;
2. declared ahead: ``REGISTRY.declare("name", "pkg.module[:attribute]", **metadata)`` says where
   the implementation lives and what is known of it (an agent's flags) *without importing it*;
   the reference is imported on the first :meth:`Registry.get`;
3. a module of the registry's ``package`` named after the entry (``orchestrator.executors.local``
   for executor ``local``), imported on first use;
4. an entry point of the registry's ``group`` (``atoll.agents``, ``atoll.executors``,
   ``atoll.checks``, ``atoll.servers``) of an installed distribution: its name is the entry's,
   its value (``module`` or ``module:attribute``) the reference. The group is read once, on the
   first look-up that needs it, and an entry point is loaded only when its name is asked for.
   A built-in name wins over an entry point of the same name.

A reference ``module:attribute`` makes the attribute the value, unless importing the module
registered the name itself; a bare ``module`` must register it. An unknown name raises
:class:`UnknownName` (or the registry's own subclass) naming the known ones.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar

from atoll.errors import AtollError, ErrorCode

T = TypeVar("T")
_V = TypeVar("_V")

__all__ = ["Entry", "Registry", "UnknownName", "Unavailable"]


class UnknownName(AtollError):
    """A name no entry of a registry has; the message names the known ones."""


class Unavailable(AtollError):
    """A known name whose implementation cannot be loaded (its module or attribute is missing)."""


@dataclass(frozen=True)
class Entry(Generic[T]):
    """One name of a registry: where its implementation lives, what is known of it before
    import (``metadata``), and the implementation once loaded (``value``)."""

    name: str
    reference: str | None = None  # "module" or "module:attribute"; None when registered directly
    metadata: Mapping[str, Any] = field(default_factory=dict)
    value: T | None = None

    @property
    def module(self) -> str | None:
        """The module the implementation lives in (known before importing it)."""
        if self.reference is not None:
            return self.reference.partition(":")[0]
        return getattr(self.value, "__module__", None)


class Registry(Generic[T]):
    """Named ``T``s, registered in-process, declared ahead, found in ``package`` or in the
    entry points of ``group`` (see the module's docstring for the order).

    ``kind`` names one entry in messages (``"agent"``, ``"MCP server"``); ``unknown_code`` and
    ``unavailable_code`` are the codes of the errors :meth:`get` raises, ``unknown_message`` the
    text of the first (``{kind}``, ``{name!r}`` and ``{known}`` filled in) and ``unknown_error``
    its class (a subclass of :class:`UnknownName`).
    """

    def __init__(
        self,
        kind: str,
        *,
        group: str,
        package: str | None = None,
        unknown_code: ErrorCode,
        unavailable_code: ErrorCode,
        unknown_message: str = "unknown {kind} {name!r} (known: {known})",
        unknown_error: type[UnknownName] = UnknownName,
    ) -> None:
        self.kind = kind
        self.group = group
        self.package = package
        self._unknown_code = unknown_code
        self._unavailable_code = unavailable_code
        self._unknown_message = unknown_message
        self._unknown_error = unknown_error
        self._entries: dict[str, Entry[T]] = {}
        self._plugins: dict[str, str] | None = None  # entry point name -> reference, read once
        self._package_scanned = False
        self._lock = threading.RLock()

    # --- registering -----------------------------------------------------------------------

    def register(self, name: str, **metadata: Any) -> Callable[[_V], _V]:
        """Decorator registering the decorated object as ``name``. ``metadata`` adds to what a
        declaration said; a name registered twice with different objects, or metadata that
        contradicts the declaration, raises ValueError (a bug in the registering code)."""

        def decorate(value: _V) -> _V:
            self.add(name, value, **metadata)  # type: ignore[arg-type]
            return value

        return decorate

    def add(self, name: str, value: T, **metadata: Any) -> None:
        """Register ``value`` as ``name`` (see :meth:`register`)."""
        with self._lock:
            known = self._entries.get(name)
            if known is not None and known.value is not None and known.value is not value:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            declared = dict(known.metadata) if known is not None else {}
            for key, given in metadata.items():
                if key in declared and declared[key] != given:
                    raise ValueError(
                        f"{self.kind} {name!r}: {key}={given!r} contradicts its declaration ({declared[key]!r})"
                    )
            reference = known.reference if known is not None else None
            self._entries[name] = Entry(name, reference, {**declared, **metadata}, value)

    def declare(self, name: str, reference: str, **metadata: Any) -> None:
        """Say that ``name`` lives at ``reference`` (``module`` or ``module:attribute``), with what
        is known of it before import; nothing is imported until :meth:`get` asks for it."""
        with self._lock:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} is declared twice")
            self._entries[name] = Entry(name, reference, dict(metadata))

    def remove(self, name: str) -> None:
        """Forget ``name`` (no-op when absent); a declaration is kept, only its value is dropped."""
        with self._lock:
            known = self._entries.get(name)
            if known is None:
                return
            if known.reference is None:
                del self._entries[name]
            else:
                self._entries[name] = Entry(name, known.reference, known.metadata)

    # --- looking up ------------------------------------------------------------------------

    def entry(self, name: str) -> Entry[T]:
        """What is known of ``name`` *without importing it* when it was declared or registered;
        otherwise (a module of the package, an entry point) it is loaded first. Raises
        :class:`UnknownName` naming the known ones."""
        with self._lock:
            known = self._entries.get(name)
        if known is not None:
            return known
        self.get(name)
        return self._entries[name]

    def get(self, name: str) -> T:
        """The implementation of ``name``, importing it on first use. Raises :class:`UnknownName`
        naming the known ones, :class:`Unavailable` when its module or attribute is missing."""
        with self._lock:
            known = self._entries.get(name)
            if known is not None and known.value is not None:
                return known.value
            reference = known.reference if known is not None else None
        if reference is None:
            reference = self._package_module(name)
        if reference is None:
            reference = self._plugin_references().get(name)
        if reference is None:
            names = ", ".join(self.names())
            message = self._unknown_message.format(kind=self.kind, name=name, known=names)
            raise self._unknown_error(self._unknown_code, message)
        self._load(name, reference)
        return self._entries[name].value  # type: ignore[return-value]

    def names(self) -> list[str]:
        """Every known name, sorted: registered, declared, the package's modules (imported to
        learn what they register) and the group's entry points (not loaded)."""
        self._scan_package()
        with self._lock:
            return sorted({*self._entries, *self._plugin_references()})

    def entries(self) -> list[Entry[T]]:
        """Every entry, each loaded, sorted by name."""
        names = self.names()
        for name in names:
            self.get(name)
        with self._lock:
            return [self._entries[name] for name in names]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.names()

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    # --- loading ---------------------------------------------------------------------------

    def _load(self, name: str, reference: str) -> None:
        module_name, _, attribute = reference.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            raise self._unavailable(name, f"{module_name} is missing") from None
        with self._lock:
            loaded = self._entries.get(name)
            if loaded is not None and loaded.value is not None:
                return  # importing the module registered it
            if not attribute:
                raise self._unavailable(name, f"{module_name} registers no {self.kind} {name!r}")
            value: Any = module
            for part in attribute.split("."):
                value = getattr(value, part, None)
                if value is None:
                    raise self._unavailable(name, f"{module_name}.{attribute} is missing")
            metadata = loaded.metadata if loaded is not None else {}
            self._entries[name] = Entry(name, reference, metadata, value)

    def _unavailable(self, name: str, reason: str) -> Unavailable:
        return Unavailable(self._unavailable_code, f"{self.kind} {name!r} is not available: {reason}")

    def _package_module(self, name: str) -> str | None:
        if self.package is None or not name.isidentifier() or name.startswith("_"):
            return None
        module = f"{self.package}.{name}"
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            return None
        with self._lock:
            return module if name in self._entries else None

    def _scan_package(self) -> None:
        if self.package is None or self._package_scanned:
            return
        package = importlib.import_module(self.package)
        for module in pkgutil.iter_modules(package.__path__):
            if not module.name.startswith("_"):
                importlib.import_module(f"{self.package}.{module.name}")
        self._package_scanned = True

    def _plugin_references(self) -> dict[str, str]:
        with self._lock:
            if self._plugins is None:
                self._plugins = {point.name: point.value for point in entry_points(group=self.group)}
            return {name: ref for name, ref in self._plugins.items() if name not in self._entries}
