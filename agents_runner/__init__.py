"""agents_runner: run an agent (ReAct toolbelt, loop baseline, replay oracle) against an MCP gateway.

Python API::

    from agents_runner import run_agent
    trajectory = await run_agent(prompt="...", gateway_url="http://127.0.0.1:8080/mcp",
                                 model="openai/gpt-4o", agent="react_toolbelt")

The agent reaches the world only over MCP HTTP; it never imports the environment or the grader.
The names below are imported on first use, so that ``agents_runner.registry`` (which an
experiment is checked against) can be read without loading litellm.
"""

from typing import TYPE_CHECKING

from atoll._lazy import lazy_attributes

if TYPE_CHECKING:
    from agents_runner.config import AgentConfig, load_agent_config
    from agents_runner.registry import agent_names, get_agent, register_agent
    from agents_runner.runner import execute, prepare_run, run_agent
    from atoll.agent_checkpoint import AgentCheckpoint, CheckpointPolicy, load_agent_checkpoint

_EXPORTS = {
    "AgentCheckpoint": "atoll.agent_checkpoint",
    "CheckpointPolicy": "atoll.agent_checkpoint",
    "load_agent_checkpoint": "atoll.agent_checkpoint",
    "AgentConfig": "agents_runner.config",
    "load_agent_config": "agents_runner.config",
    "agent_names": "agents_runner.registry",
    "get_agent": "agents_runner.registry",
    "register_agent": "agents_runner.registry",
    "execute": "agents_runner.runner",
    "prepare_run": "agents_runner.runner",
    "run_agent": "agents_runner.runner",
}
__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS, globals())

__all__ = [
    "AgentCheckpoint",
    "AgentConfig",
    "CheckpointPolicy",
    "agent_names",
    "execute",
    "get_agent",
    "load_agent_checkpoint",
    "load_agent_config",
    "prepare_run",
    "register_agent",
    "run_agent",
]
