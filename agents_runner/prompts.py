"""The opening of a conversation: system prompt plus the task's initial messages."""

from __future__ import annotations

from typing import Any

from agents_runner.conversation import restore
from agents_runner.state import AgentRun


def start_context(run: AgentRun, default_system_prompt: str) -> None:
    """Fill ``run.context`` (and the transcript) with the system prompt and the task messages.

    The system prompt is ``config.system_prompt`` or the agent's default; system messages in the
    initial messages (e.g. an Archipelago ``initial_messages.json``) are appended to it, since
    the agent's own instructions describe tools the task's prompt does not know about. Assistant
    turns recorded by an earlier run (a trajectory's messages) get their provider state back in
    the context (:func:`agents_runner.conversation.restore`)."""
    system_parts = [run.config.system_prompt or default_system_prompt]
    rest: list[dict[str, Any]] = []
    for message in run.initial_messages:
        if message.get("role") == "system":
            content = message.get("content")
            if isinstance(content, str) and content.strip():
                system_parts.append(content.strip())
        else:
            rest.append(dict(message))
    if run.config.system_prompt_suffix:
        system_parts.append(run.config.system_prompt_suffix)
    run.add({"role": "system", "content": "\n\n".join(system_parts)})
    for message in rest:
        context_message, record = restore(message)
        run.add(context_message, record=record)
