"""Read Archipelago's runner inputs: ``initial_messages.json`` and ``agent_config.json``.

``agent_config.json`` is ``{"agent_config_id": "react_toolbelt_agent" | "loop_agent", "agent_name",
"agent_config_values": {...}}``; its values are mapped onto :class:`AgentConfig` (``timeout`` ->
``timeout_s``, ``tool_call_timeout`` -> ``tool_call_timeout_s``, ``llm_response_timeout`` ->
``llm_timeout_s``, ``max_turns`` -> ``max_steps``, ...; 0 means "off" for budgets and "auto" for
the context window, as there).  Values we have no equivalent for are reported back, not
silently dropped.  A file without ``agent_config_id`` is read as our own AgentConfig JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agents_runner.config import AgentConfig
from atoll.errors import AtollError, ErrorCode, first_problem

AGENT_IDS = {
    "react_toolbelt_agent": "react_toolbelt",
    "loop_agent": "loop",
    "loop_truncated_tools_agent": "loop",
}

_VALUE_NAMES = {
    "timeout": "timeout_s",
    "max_steps": "max_steps",
    "max_turns": "max_steps",
    "tool_call_timeout": "tool_call_timeout_s",
    "llm_response_timeout": "llm_timeout_s",
    "context_window_tokens": "context_window",
    "token_budget": "token_budget",
    "cost_budget_usd": "cost_budget_usd",
    "input_cost_per_token": "input_cost_per_token",
    "output_cost_per_token": "output_cost_per_token",
    "turns_remaining_warning_threshold": "limit_warning_steps",
    "base_system_prompt": "system_prompt",
    "custom_system_prompt": "system_prompt_suffix",
    "stream": "stream",
}
_ZERO_MEANS_UNSET = {"context_window", "token_budget", "cost_budget_usd"}


def _read_json(path: str | Path, what: str) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AtollError(ErrorCode.bad_input, f"{what} {path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise AtollError(ErrorCode.bad_input, f"{what} {path}: not readable JSON ({exc})") from None


def load_initial_messages(path: str | Path) -> list[dict[str, Any]]:
    """A list of chat messages (``role`` and ``content``); raises AtollError(bad_input)."""
    messages = _read_json(path, "initial messages")
    if not isinstance(messages, list) or not messages:
        raise AtollError(
            ErrorCode.bad_input, f"initial messages {path}: expected a non-empty JSON array of messages"
        )
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in (
            "system",
            "user",
            "assistant",
            "developer",
        ):
            raise AtollError(
                ErrorCode.bad_input, f"initial messages {path}: message #{index} has no valid role"
            )
        if "content" not in message:
            raise AtollError(ErrorCode.bad_input, f"initial messages {path}: message #{index} has no content")
    return messages


def load_agent_config_file(path: str | Path) -> tuple[str | None, AgentConfig, list[str]]:
    """(agent name or None, config, ignored value names) from an Archipelago or atoll config file.

    Raises AtollError(bad_input) naming the file and the problem."""
    data = _read_json(path, "agent config")
    if not isinstance(data, dict):
        raise AtollError(ErrorCode.bad_input, f"agent config {path}: expected a JSON object")
    if "agent_config_id" not in data:
        try:
            return None, AgentConfig.model_validate(data), []
        except ValidationError as exc:
            raise AtollError(ErrorCode.bad_input, f"agent config {path}: {_first_error(exc)}") from None
    config_id = str(data["agent_config_id"])
    agent = AGENT_IDS.get(config_id)
    if agent is None:
        known = ", ".join(sorted(AGENT_IDS))
        raise AtollError(
            ErrorCode.bad_input,
            f"agent config {path}: agent_config_id {config_id!r} is not supported ({known})",
        )
    values = data.get("agent_config_values") or {}
    if not isinstance(values, dict):
        raise AtollError(ErrorCode.bad_input, f"agent config {path}: agent_config_values must be an object")
    mapped: dict[str, Any] = {}
    ignored: list[str] = []
    for name, value in values.items():
        target = _VALUE_NAMES.get(name)
        if target is None or value is None:
            ignored.append(name)
        elif target in _ZERO_MEANS_UNSET and not value:
            continue
        else:
            mapped[target] = value
    try:
        config = AgentConfig.model_validate(mapped)
    except ValidationError as exc:
        raise AtollError(ErrorCode.bad_input, f"agent config {path}: {_first_error(exc)}") from None
    return agent, config, ignored


def _first_error(exc: ValidationError) -> str:
    return str(first_problem(exc, top="(root)"))
