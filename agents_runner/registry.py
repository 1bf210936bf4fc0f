"""The agent registry: agents register themselves by name; adding one is adding one module.

Every module in ``agents_runner/agents/`` is imported on first lookup, and each registers its
agent with :func:`register_agent`.  An agent is an async function ``(run: AgentRun) ->
RunStatus`` that returns how the run ended (``completed`` or ``failed``) or raises
:class:`~agents_runner.state.RunEnded` for any other ending.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from agents_runner.state import AgentRun
from atoll.errors import AtollError
from atoll.trajectory import RunStatus

AgentFunction = Callable[[AgentRun], Awaitable[RunStatus]]


@dataclass(frozen=True)
class AgentSpec:
    name: str
    run: AgentFunction
    description: str
    #: False for an agent that calls no model (the replay oracle): no model client is built
    #: for it and the run's preflight does not probe its model.
    uses_model: bool = True
    #: True for an agent that replays the task's reference solution: a run without one is
    #: refused before it starts.
    needs_reference_solution: bool = False


_AGENTS: dict[str, AgentSpec] = {}
_loaded = False


def register_agent(
    name: str, *, description: str, uses_model: bool = True, needs_reference_solution: bool = False
) -> Callable[[AgentFunction], AgentFunction]:
    """Decorator registering ``function`` as agent ``name`` (see :class:`AgentSpec` for the flags)."""

    def decorate(function: AgentFunction) -> AgentFunction:
        if name in _AGENTS and _AGENTS[name].run is not function:
            raise ValueError(f"agent {name!r} is registered twice")
        _AGENTS[name] = AgentSpec(
            name=name,
            run=function,
            description=description,
            uses_model=uses_model,
            needs_reference_solution=needs_reference_solution,
        )
        return function

    return decorate


def _load() -> None:
    global _loaded
    if _loaded:
        return
    import agents_runner.agents as package

    for module in pkgutil.iter_modules(package.__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"{package.__name__}.{module.name}")
    _loaded = True


def get_agent(name: str) -> AgentSpec:
    """The agent registered as ``name``; raises AtollError(unknown_agent) naming the known ones."""
    _load()
    try:
        return _AGENTS[name]
    except KeyError:
        known = ", ".join(sorted(_AGENTS))
        raise AtollError("unknown_agent", f"unknown agent {name!r}; known agents: {known}") from None


def agent_names() -> list[str]:
    _load()
    return sorted(_AGENTS)


def agents() -> list[AgentSpec]:
    _load()
    return [_AGENTS[name] for name in sorted(_AGENTS)]
