"""agents_runner: run an agent (ReAct toolbelt, loop baseline, replay oracle) against an MCP gateway.

Python API::

    from agents_runner import run_agent
    trajectory = await run_agent(prompt="...", gateway_url="http://127.0.0.1:8080/mcp",
                                 model="openai/gpt-4o", agent="react_toolbelt")

The agent reaches the world only over MCP HTTP; it never imports the environment or the grader.
"""

from agents_runner.config import AgentConfig, load_agent_config
from agents_runner.registry import agent_names, get_agent, register_agent
from agents_runner.runner import execute, prepare_run, run_agent

__all__ = [
    "AgentConfig",
    "agent_names",
    "execute",
    "get_agent",
    "load_agent_config",
    "prepare_run",
    "register_agent",
    "run_agent",
]
