"""The agent registry: one :class:`atoll.registry.Registry` entry per agent, flags included.

An agent is an async function ``(run: AgentRun) -> RunStatus`` that returns how the run ended
(``completed`` or ``failed``) or raises :class:`~agents_runner.state.RunEnded` for any other
ending. A built-in agent is one module of ``agents_runner/agents/`` whose function carries
``@register_agent("name")``, and one :meth:`~atoll.registry.Registry.declare` line below saying
where it lives and what it is (description, flags, options model): the entry an experiment is
checked against before anything runs (:func:`agent_entry`), without importing any agent (which
would load litellm and fastmcp's client: seconds of CPU). The module is imported when the
agent is looked up to run (:func:`get_agent`).

An agent from elsewhere (a test, a package's ``atoll.agents`` entry point, a module of
``agents_runner/agents/`` without a declaration) states its flags in ``@register_agent`` and is
imported to learn them. ``tests/agents_runner/test_registry.py`` fails when a built-in agent's
module and its declaration disagree.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from atoll.agent_config import AgentConfig
from atoll.errors import ErrorCode
from atoll.registry import Registry
from atoll.trajectory import RunStatus

if TYPE_CHECKING:
    from agents_runner.state import AgentRun

AgentFunction = Callable[["AgentRun"], Awaitable[RunStatus]]

AGENTS: Registry[AgentFunction] = Registry(
    "agent",
    group="atoll.agents",
    package="agents_runner.agents",
    unknown_code=ErrorCode.unknown_agent,
    unavailable_code=ErrorCode.agent_unavailable,
    unknown_message="unknown {kind} {name!r}; known agents: {known}",
)

# The built-in agents: where each lives and what it is, known without importing it.
AGENTS.declare(
    "loop",
    "agents_runner.agents.loop",
    description="Baseline loop: all tools exposed, ends when the model stops calling tools",
)
AGENTS.declare(
    "react_toolbelt",
    "agents_runner.agents.react_toolbelt",
    description="ReAct loop with a self-managed toolbelt, todos and final_answer",
)
AGENTS.declare(
    "replay",
    "agents_runner.agents.replay",
    description="Oracle: replays the task's reference solution",
    uses_model=False,
    needs_reference_solution=True,
)


@dataclass(frozen=True)
class AgentEntry:
    """What is known of an agent before its module is imported."""

    module: str
    description: str = ""
    #: False for an agent that calls no model (the replay oracle): no model client is built
    #: for it and the run's preflight does not probe its model.
    uses_model: bool = True
    #: True for an agent that replays the task's reference solution: a run without one is
    #: refused before it starts.
    needs_reference_solution: bool = False
    #: The model an experiment's options for this agent are validated with (extra keys refused).
    options: type[AgentConfig] = AgentConfig


@dataclass(frozen=True)
class AgentSpec:
    name: str
    run: AgentFunction
    description: str
    #: See :class:`AgentEntry` for the flags.
    uses_model: bool = True
    needs_reference_solution: bool = False
    options: type[AgentConfig] = AgentConfig


def register_agent(
    name: str,
    *,
    description: str | None = None,
    uses_model: bool | None = None,
    needs_reference_solution: bool | None = None,
    options: type[AgentConfig] | None = None,
) -> Callable[[AgentFunction], AgentFunction]:
    """Decorator registering ``function`` as agent ``name``. A declared agent gives only its
    name (its flags are in its declaration; a flag that contradicts it raises ValueError);
    any other states its flags here (see :class:`AgentEntry`)."""
    given = {
        "description": description,
        "uses_model": uses_model,
        "needs_reference_solution": needs_reference_solution,
        "options": options,
    }
    return AGENTS.register(name, **{key: value for key, value in given.items() if value is not None})


def agent_entry(name: str) -> AgentEntry:
    """What is known of agent ``name``: a declared agent without importing it, any other by
    importing it; raises AtollError(unknown_agent) naming the known ones."""
    entry = AGENTS.entry(name)
    return AgentEntry(entry.module or "", **entry.metadata)


def get_agent(name: str) -> AgentSpec:
    """The agent registered as ``name``, importing its module (only that one); raises
    AtollError(unknown_agent) naming the known ones."""
    run = AGENTS.get(name)
    entry = agent_entry(name)
    return AgentSpec(
        name=name,
        run=run,
        description=entry.description,
        uses_model=entry.uses_model,
        needs_reference_solution=entry.needs_reference_solution,
        options=entry.options,
    )


def agent_names() -> list[str]:
    """Every agent's name (each module of ``agents_runner/agents/`` imported to learn them)."""
    return AGENTS.names()


def agents() -> list[AgentSpec]:
    return [get_agent(name) for name in agent_names()]
