"""The agent registry: agents register themselves by name; adding one is one module and one row.

An agent is an async function ``(run: AgentRun) -> RunStatus`` in a module of
``agents_runner/agents/`` that returns how the run ended (``completed`` or ``failed``) or raises
:class:`~agents_runner.state.RunEnded` for any other ending, registered with
:func:`register_agent`. :data:`AGENT_TABLE` says, without importing any agent (which would load
litellm and fastmcp's client: seconds of CPU), which agents exist, in which module, what flags
they carry and which model validates their options: what an experiment is checked against
before anything runs (:func:`agent_entry`). An agent's module is imported when the agent is
looked up to run (:func:`get_agent`). ``tests/agents_runner/test_registry.py`` fails when the
table and the registered agents disagree.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from atoll.agent_config import AgentConfig
from atoll.errors import AtollError
from atoll.trajectory import RunStatus

if TYPE_CHECKING:
    from agents_runner.state import AgentRun

AgentFunction = Callable[["AgentRun"], Awaitable[RunStatus]]


@dataclass(frozen=True)
class AgentEntry:
    """What is known of an agent before its module is imported (one row of :data:`AGENT_TABLE`)."""

    module: str
    #: False for an agent that calls no model (the replay oracle): no model client is built
    #: for it and the run's preflight does not probe its model.
    uses_model: bool = True
    #: True for an agent that replays the task's reference solution: a run without one is
    #: refused before it starts.
    needs_reference_solution: bool = False
    #: The model an experiment's options for this agent are validated with (extra keys refused).
    options: type[AgentConfig] = AgentConfig


AGENT_TABLE: dict[str, AgentEntry] = {
    "loop": AgentEntry("agents_runner.agents.loop"),
    "react_toolbelt": AgentEntry("agents_runner.agents.react_toolbelt"),
    "replay": AgentEntry("agents_runner.agents.replay", uses_model=False, needs_reference_solution=True),
}


@dataclass(frozen=True)
class AgentSpec:
    name: str
    run: AgentFunction
    description: str
    #: See :class:`AgentEntry` for the flags.
    uses_model: bool = True
    needs_reference_solution: bool = False
    options: type[AgentConfig] = AgentConfig


_AGENTS: dict[str, AgentSpec] = {}
_loaded = False


def register_agent(
    name: str,
    *,
    description: str,
    uses_model: bool = True,
    needs_reference_solution: bool = False,
    options: type[AgentConfig] = AgentConfig,
) -> Callable[[AgentFunction], AgentFunction]:
    """Decorator registering ``function`` as agent ``name`` (see :class:`AgentEntry` for the flags)."""

    def decorate(function: AgentFunction) -> AgentFunction:
        if name in _AGENTS and _AGENTS[name].run is not function:
            raise ValueError(f"agent {name!r} is registered twice")
        _AGENTS[name] = AgentSpec(
            name=name,
            run=function,
            description=description,
            uses_model=uses_model,
            needs_reference_solution=needs_reference_solution,
            options=options,
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


def _unknown(name: str, known: list[str]) -> AtollError:
    return AtollError("unknown_agent", f"unknown agent {name!r}; known agents: {', '.join(known)}")


def agent_entry(name: str) -> AgentEntry:
    """The table row of agent ``name``, without importing any agent; raises
    AtollError(unknown_agent) naming the known ones. An agent registered outside the table (a
    test's, a plugin's) is found in the registry, which this then loads."""
    entry = AGENT_TABLE.get(name)
    if entry is not None:
        return entry
    spec = get_agent(name)
    return AgentEntry(
        spec.run.__module__,
        uses_model=spec.uses_model,
        needs_reference_solution=spec.needs_reference_solution,
        options=spec.options,
    )


def get_agent(name: str) -> AgentSpec:
    """The agent registered as ``name``, importing its module (only that one when the table
    names it); raises AtollError(unknown_agent) naming the known ones."""
    if name not in _AGENTS:
        entry = AGENT_TABLE.get(name)
        if entry is not None:
            importlib.import_module(entry.module)
        else:
            _load()
    try:
        return _AGENTS[name]
    except KeyError:
        raise _unknown(name, agent_names()) from None


def agent_names() -> list[str]:
    _load()
    return sorted(_AGENTS)


def agents() -> list[AgentSpec]:
    _load()
    return [_AGENTS[name] for name in sorted(_AGENTS)]
