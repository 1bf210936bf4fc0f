"""Executors turn one TrialSpec into one TrialResult; they register themselves by name.

An executor lives in ``orchestrator/executors/<name>.py`` and registers its class (or any
factory ``(benchmark, experiment) -> Executor``) with ``@executor("<name>")``: that module is
all there is to adding one (a package may add one through an ``atoll.executors`` entry point).
It is imported the first time :func:`get_executor` asks for the name, so an unused executor
costs nothing; an unknown name is refused naming the known ones (:func:`known_executors`),
before a run stores anything (docs/architecture.md, "Extension points"). The registry is
:data:`EXECUTORS`, an :class:`atoll.registry.Registry`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from atoll.errors import ErrorCode
from atoll.registry import Registry

if TYPE_CHECKING:
    from atoll.benchmark import Benchmark
    from atoll.experiment import ExperimentSpec
    from orchestrator.executors.base import Executor

ExecutorFactory = Callable[["Benchmark", "ExperimentSpec"], "Executor"]
_F = TypeVar("_F", bound=Callable[..., object])

EXECUTORS: Registry[ExecutorFactory] = Registry(
    "executor",
    group="atoll.executors",
    package=__name__,
    unknown_code=ErrorCode.bad_experiment,
    unavailable_code=ErrorCode.executor_unavailable,
)


def executor(name: str) -> Callable[[_F], _F]:
    """Register the decorated class or factory as executor ``name``."""
    return EXECUTORS.register(name)


def get_executor(name: str) -> ExecutorFactory:
    """The factory of executor ``name``, importing ``orchestrator.executors.<name>`` on first use.

    Raises AtollError(bad_experiment) naming the known executors for an unknown name."""
    return EXECUTORS.get(name)


def known_executors() -> list[str]:
    """The names of every executor this package holds (each module imported to learn them)
    and of every ``atoll.executors`` entry point."""
    return EXECUTORS.names()


__all__ = ["EXECUTORS", "ExecutorFactory", "executor", "get_executor", "known_executors"]
