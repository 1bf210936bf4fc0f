"""Agent configuration: the contract lives in :mod:`atoll.agent_config` (the orchestrator
validates experiments against it too); re-exported here for the agents."""

from __future__ import annotations

from atoll.agent_config import AgentConfig, load_agent_config

__all__ = ["AgentConfig", "load_agent_config"]
