"""Executors turn one TrialSpec into one TrialResult; they register themselves by name.

An executor lives in ``orchestrator/executors/<name>.py`` and registers its class (or any
factory ``(benchmark, experiment) -> Executor``) with ``@executor("<name>")``; the module is
imported the first time :func:`get_executor` asks for the name, so an unused executor costs nothing. Adding
one is that module plus its name in ``ExperimentSpec.executor`` (atoll/experiment.py), a
``Literal`` because the contract cannot import the orchestrator and the experiment's JSON schema
lists the names (docs/architecture.md, "Extension points");
tests/orchestrator/test_executor_registry.py fails when the two disagree.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar, get_args

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
        from atoll.experiment import ExperimentSpec

        known = ", ".join(get_args(ExperimentSpec.model_fields["executor"].annotation))
        raise AtollError("bad_experiment", f"unknown executor {name!r} ({known})") from None


__all__ = ["ExecutorFactory", "executor", "get_executor"]
