"""Conversation state: the assistant turn as the provider needs it back, and as it is recorded.

A reasoning model's reply carries state the provider wants back unchanged in the next request of
a tool loop, and litellm exposes it on the message it returns:

- Anthropic extended thinking: ``thinking_blocks`` (``thinking`` with its ``signature``,
  ``redacted_thinking``), which must open the assistant turn sent back;
- Gemini 3: a ``thought_signature`` per function call, in the tool call's
  ``provider_specific_fields`` and, in litellm's default mode, inside the tool-call id
  (``call_…__thought__<signature>``); text parts' signatures in the message's
  ``provider_specific_fields.thought_signatures``;
- OpenAI Responses API: ``reasoning_items`` (``rs_…`` with their encrypted content) and the
  ``openai_responses_replay`` record that puts them back in their original order;
- OpenAI-compatible reasoning servers (Kimi K2 Thinking, gpt-oss): ``reasoning_content``.

The **context** (what the model is sent) holds the message as litellm gave it
(:func:`assistant_turn`'s ``message``); the **transcript** (what the trajectory records, DESIGN §5)
holds its OpenAI chat form (``role``, ``content``, ``tool_calls`` with ``id``, ``type`` and
``function``), the reasoning text as ``reasoning_content``, and everything else the provider
returned under one key, ``provider_fields``, from which :func:`provider_message` rebuilds the
message exactly (a trajectory's messages can seed a new run: :func:`restore`). Nothing here edits
or reorders a thinking block, a signature or a reasoning item.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

PROVIDER_FIELDS = "provider_fields"
"""The record's key for the provider state of an assistant turn (see the module docstring)."""

SIGNATURE_SEPARATOR = "__thought__"
"""litellm's separator of a Gemini thought signature inside a tool-call id."""

_REPLAY_FIELDS = ("thinking_blocks", "reasoning_items", "provider_specific_fields")
_RESPONSES_REPLAY = "openai_responses_replay"  # litellm's record binding reasoning items to call ids
_CALL_KEYS = ("id", "type", "function")


@dataclass
class AssistantTurn:
    """One assistant reply: ``message`` goes back to the model, ``record`` into the transcript."""

    message: dict[str, Any]
    record: dict[str, Any]
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    reasoning: str | None = None


def assistant_turn(raw_message: Any, seen_ids: set[str]) -> AssistantTurn:
    """The turn of litellm's response message ``raw_message``.

    Tool-call ids that are empty or already used in the run (some local servers send those) are
    made unique, and ``seen_ids`` is updated; a rewritten id keeps its thought signature (only the
    part before litellm's separator changes), the call keeps its provider fields, and litellm's
    Responses replay record, which binds the old ids, is dropped (litellm would refuse it and fall
    back to sending the reasoning items before the calls, which it then does)."""
    message = _as_message(raw_message)
    rewritten = False
    for call in message.get("tool_calls") or []:
        call_id = str(call.get("id") or "")
        unique = _unique_id(call_id, seen_ids)
        seen_ids.add(unique)
        rewritten = rewritten or unique != call_id
        call["id"] = unique
    fields = message.get("provider_specific_fields")
    if rewritten and isinstance(fields, dict) and _RESPONSES_REPLAY in fields:
        fields = {key: value for key, value in fields.items() if key != _RESPONSES_REPLAY}
        if fields:
            message["provider_specific_fields"] = fields
        else:
            message.pop("provider_specific_fields")
    record = record_of(message)
    return AssistantTurn(
        message=message,
        record=record,
        tool_calls=list(record.get("tool_calls") or []),
        reasoning=record.get("reasoning_content"),
    )


def record_of(message: dict[str, Any]) -> dict[str, Any]:
    """The transcript form of an assistant message sent back to the model (see the module docstring)."""
    record: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    calls = message.get("tool_calls") or []
    extras: dict[str, Any] = {key: copy.deepcopy(message[key]) for key in _REPLAY_FIELDS if key in message}
    if calls:
        record["tool_calls"] = []
        call_extras: list[dict[str, Any]] = []
        for call in calls:
            function = dict(call.get("function") or {})
            record["tool_calls"].append(
                {
                    "id": call["id"],
                    "type": call.get("type") or "function",
                    "function": {
                        "name": function.get("name") or "",
                        "arguments": function.get("arguments") or "",
                    },
                }
            )
            extra = {key: copy.deepcopy(value) for key, value in call.items() if key not in _CALL_KEYS}
            function_extra = {
                key: copy.deepcopy(value)
                for key, value in function.items()
                if key not in ("name", "arguments")
            }
            if function_extra:
                extra["function"] = function_extra
            call_extras.append(extra)
        if any(call_extras):
            extras["tool_calls"] = call_extras
    if message.get("reasoning_content"):
        record["reasoning_content"] = message["reasoning_content"]
    if extras:
        record[PROVIDER_FIELDS] = extras
    return record


def provider_message(record: dict[str, Any]) -> dict[str, Any]:
    """The message to send back for a transcript record (the inverse of :func:`record_of`).

    Other messages (system, user, tool) and records without provider fields come back as a copy."""
    message = {key: copy.deepcopy(value) for key, value in record.items() if key != PROVIDER_FIELDS}
    extras = record.get(PROVIDER_FIELDS)
    if record.get("role") != "assistant" or not isinstance(extras, dict):
        return message
    call_extras = extras.get("tool_calls") or []
    for call, extra in zip(message.get("tool_calls") or [], call_extras, strict=False):
        for key, value in extra.items():
            if key == "function" and isinstance(value, dict):
                call["function"] = {**call.get("function", {}), **copy.deepcopy(value)}
            else:
                call[key] = copy.deepcopy(value)
    for key in _REPLAY_FIELDS:
        if key in extras:
            message[key] = copy.deepcopy(extras[key])
    return message


def restore(message: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(context message, transcript record) of a message that may come from a trajectory.

    A recorded assistant turn gets its provider state back (a run seeded with an earlier run's
    messages continues its reasoning); any other message is the same in both."""
    if message.get("role") == "assistant" and PROVIDER_FIELDS in message:
        return provider_message(message), copy.deepcopy(message)
    return dict(message), dict(message)


def _as_message(raw_message: Any) -> dict[str, Any]:
    """litellm's message as a JSON-native dict: the fields a provider needs back, nothing else.

    Dropped: ``function_call`` (legacy), ``images``, ``audio``, ``annotations`` and ``refusal``
    (outputs, not conversation state) and each tool call's stream ``index``; empty provider
    fields are left out."""
    if hasattr(raw_message, "model_dump"):
        dumped = raw_message.model_dump(mode="json", exclude_none=True)
    else:
        dumped = copy.deepcopy(dict(raw_message))
    message: dict[str, Any] = {"role": "assistant", "content": dumped.get("content")}
    calls = []
    for call in dumped.get("tool_calls") or []:
        calls.append({key: value for key, value in call.items() if key != "index"})
    if calls:
        message["tool_calls"] = calls
    if dumped.get("reasoning_content"):
        message["reasoning_content"] = dumped["reasoning_content"]
    for key in _REPLAY_FIELDS:
        if dumped.get(key):
            message[key] = dumped[key]
    return message


def _unique_id(call_id: str, seen_ids: set[str]) -> str:
    if call_id and call_id not in seen_ids:
        return call_id
    base, separator, signature = call_id.partition(SIGNATURE_SEPARATOR)
    stem = base or "call"
    number = len(seen_ids)
    candidate = f"{stem}_{number}{separator}{signature}"
    while candidate in seen_ids:
        number += 1
        candidate = f"{stem}_{number}{separator}{signature}"
    return candidate
