"""Executors turn one TrialSpec into one TrialResult; they register themselves by name.

An executor lives in ``orchestrator/executors/<name>.py`` and registers its class (or any
factory ``(benchmark, experiment) -> Executor``) with ``@executor("<name>")``: that module is
all there is to adding one. It is imported the first time :func:`get_executor` asks for the
name, so an unused executor costs nothing; an unknown name is refused naming the known ones
(:func:`known_executors`), before a run stores anything (docs/architecture.md, "Extension points").
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from atoll.errors import AtollError

if TYPE_CHECKING:
    from atoll.benchmark import Benchmark
    from atoll.experiment import ExperimentSpec
    from orchestrator.executors.base import Executor

ExecutorFactory = Callable[["Benchmark", "ExperimentSpec"], "Executor"]
_F = TypeVar("_F", bound=Callable[..., object])
_EXECUTORS: dict[str, ExecutorFactory] = {}


def executor(name: str) -> Callable[[_F], _F]:
    """Register the decorated class or factory as executor ``name``."""

    def register(factory: _F) -> _F:
        known = _EXECUTORS.get(name)
        if known is not None and known is not factory:
            raise ValueError(f"executor {name!r} is registered twice")
        _EXECUTORS[name] = factory  # type: ignore[assignment]
        return factory

    return register


def get_executor(name: str) -> ExecutorFactory:
    """The factory of executor ``name``, importing ``orchestrator.executors.<name>`` on first use.

    Raises AtollError(bad_experiment) naming the known executors for an unknown name."""
    if name not in _EXECUTORS and name.isidentifier() and not name.startswith("_"):
        module = f"{__name__}.{name}"
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
    try:
        return _EXECUTORS[name]
    except KeyError:
        known = ", ".join(known_executors())
        raise AtollError("bad_experiment", f"unknown executor {name!r} (known: {known})") from None


def known_executors() -> list[str]:
    """The names of every executor this package holds (each module imported to learn them)."""
    import pkgutil

    for module in pkgutil.iter_modules(__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"{__name__}.{module.name}")
    return sorted(_EXECUTORS)


__all__ = ["ExecutorFactory", "executor", "get_executor", "known_executors"]
