"""An atoll trajectory as ATIF (docs/interop.md, "ATIF": what maps to what).

Each message becomes one step: system and user messages (harness notices and compaction
summaries included) keep their role; an assistant turn is an agent step carrying its text,
its reasoning, its tool calls and, as its observation, the ``role: tool`` messages that answer
them, with each call's recorded outcome (error, truncation, duration) in the result's
``extra``. A step's metrics sum the model calls atoll numbered with that step. What ATIF has no
field for (the run's status, final answer, error, limits, resumes, provider state) travels in
``extra``, so :func:`atoll.atif.from_atif` gets the same trajectory back.
"""

from __future__ import annotations

import json
from typing import Any

from atoll.atif.models import (
    ATIF_VERSION,
    AtifAgent,
    AtifFinalMetrics,
    AtifMetrics,
    AtifObservation,
    AtifObservationResult,
    AtifStep,
    AtifToolCall,
    AtifTrajectory,
)
from atoll.jsonio import dumps_strict
from atoll.trajectory import ModelCall, ToolCall, Trajectory, Usage

PROVIDER_FIELDS = "provider_fields"  # agents_runner.conversation's key for an assistant turn's provider state
ATOLL_KEY = "atoll"  # the root extra's key for what ATIF has no field for
RAW_ARGUMENTS = "raw_arguments"  # a tool call's extra: the arguments as sent, when not a JSON object
# A step's extra: the message's content as recorded, where the step's text would not give it
# back (parts of a multimodal message; an empty string where a turn of calls alone reads as null).
CONTENT = "content"
# The trajectory's own fields that ATIF fields carry; every other one travels in extra.atoll.
_MAPPED_FIELDS = frozenset(
    {"messages", "tool_calls", "model_calls", "usage", "agent", "model", "agent_config"}
)


def to_atif(trajectory: Trajectory) -> AtifTrajectory:
    """``trajectory`` as an ``ATIF-v1.7`` trajectory (never fails on a valid atoll trajectory)."""
    from atoll import __version__

    calls_by_step: dict[int, list[ModelCall]] = {}
    for call in trajectory.model_calls:
        calls_by_step.setdefault(call.step, []).append(call)
    records = {call.id: call for call in trajectory.tool_calls}
    steps: list[AtifStep] = []
    agent_turns = 0
    pending: dict[str, AtifStep] = {}  # tool-call id -> the agent step that made it, until answered
    for message in trajectory.messages:
        role = message.get("role")
        if role == "assistant":
            agent_turns += 1
            step = _agent_step(len(steps) + 1, message, calls_by_step.get(agent_turns, []), trajectory.model)
            steps.append(step)
            pending.update({call.tool_call_id: step for call in step.tool_calls or []})
        elif role == "tool" and str(message.get("tool_call_id")) in pending:
            call_id = str(message.get("tool_call_id"))
            owner = pending.pop(call_id)
            if owner.observation is None:
                owner.observation = AtifObservation(results=[])
            owner.observation.results.append(_result(call_id, message, records.get(call_id)))
        else:
            steps.append(_other_step(len(steps) + 1, role, message))
    if not steps:  # ATIF needs one step; a run that never started has none
        steps.append(
            AtifStep(
                step_id=1, source="system", message=f"(the run recorded no messages: {trajectory.status})"
            )
        )
    return AtifTrajectory(
        schema_version=ATIF_VERSION,
        session_id=trajectory.trial_id,
        agent=AtifAgent(
            name=trajectory.agent,
            version=__version__,
            model_name=trajectory.model,
            extra={"harness": "atoll", "agent_config": trajectory.agent_config}
            if trajectory.agent_config
            else {"harness": "atoll"},
        ),
        steps=steps,
        notes=_notes(trajectory),
        final_metrics=_final_metrics(trajectory.usage, len(steps)),
        extra={ATOLL_KEY: _root_extra(trajectory)},
    )


def atif_json(trajectory: Trajectory) -> str:
    """The ATIF file of ``trajectory`` (indented JSON, absent fields left out, as Harbor writes)."""
    return dumps_strict(to_atif(trajectory).model_dump(mode="json", exclude_none=True), indent=2)


def _text(content: Any) -> str:
    """An OpenAI message content as ATIF text: parts joined; an image (which atoll's
    transcripts replace by a note) becomes a note of its kind, never its bytes."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = []
    for part in content if isinstance(content, list) else [content]:
        if isinstance(part, dict) and part.get("type") == "text":
            texts.append(str(part.get("text", "")))
        elif isinstance(part, dict) and part.get("type") == "image_url":
            texts.append("[image omitted]")
        else:
            texts.append(json.dumps(part, ensure_ascii=False, default=str))
    return "\n".join(texts)


def _arguments(raw: Any) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A call's arguments as ATIF's object, and its extra keeping them when they were not one."""
    if isinstance(raw, dict):
        return raw, None
    if raw is None or not str(raw).strip():
        return {}, None
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if isinstance(value, dict):
        return value, None
    return {}, {RAW_ARGUMENTS: str(raw)}


def _agent_step(step_id: int, message: dict[str, Any], calls: list[ModelCall], root_model: str) -> AtifStep:
    tool_calls = []
    for requested in message.get("tool_calls") or []:
        function = requested.get("function") or {}
        arguments, extra = _arguments(function.get("arguments"))
        tool_calls.append(
            AtifToolCall(
                tool_call_id=str(requested.get("id")),
                function_name=str(function.get("name") or ""),
                arguments=arguments,
                extra=extra,
            )
        )
    extra = _content_extra(message, tool_calls=bool(tool_calls))
    if message.get(PROVIDER_FIELDS):
        extra[PROVIDER_FIELDS] = message[PROVIDER_FIELDS]
    models = {call.model for call in calls}
    return AtifStep(
        step_id=step_id,
        source="agent",
        model_name=models.pop() if len(models) == 1 and root_model not in models else None,
        message=_text(message.get("content")),
        reasoning_content=message.get("reasoning_content") or message.get("reasoning") or None,
        tool_calls=tool_calls or None,
        metrics=_metrics(calls) if calls else None,
        llm_call_count=len(calls) if calls else None,
        extra=extra or None,
    )


def _metrics(calls: list[ModelCall]) -> AtifMetrics:
    usage = sum((call.usage for call in calls), Usage())
    extra: dict[str, Any] = {
        "reasoning_tokens": usage.reasoning_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "duration_s": round(sum(call.duration_s for call in calls), 4),
        "retries": sum(call.retries for call in calls),
    }
    errors = [call.error for call in calls if call.error]
    if errors:
        extra["errors"] = errors
    return AtifMetrics(
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cached_tokens=usage.cached_tokens,
        cost_usd=usage.cost_usd,
        extra=extra,
    )


def _result(call_id: str, message: dict[str, Any], record: ToolCall | None) -> AtifObservationResult:
    extra: dict[str, Any] | None = None
    if record is not None:
        extra = {
            "is_error": record.is_error,
            "truncated": record.truncated,
            "duration_s": record.duration_s,
        }
        if record.error:
            extra["error"] = record.error
    return AtifObservationResult(source_call_id=call_id, content=_text(message.get("content")), extra=extra)


def _other_step(step_id: int, role: Any, message: dict[str, Any]) -> AtifStep:
    """A system or user message; a tool message that answers no call of the turn before it
    becomes an observation of its own (on a system step) naming the call in ``extra``."""
    if role == "tool":
        return AtifStep(
            step_id=step_id,
            source="system",
            message="",
            observation=AtifObservation(
                results=[
                    AtifObservationResult(
                        content=_text(message.get("content")),
                        extra={"tool_call_id": message.get("tool_call_id")},
                    )
                ]
            ),
        )
    source = "user" if role == "user" else "system"
    extra = _content_extra(message, tool_calls=False)
    if role not in ("user", "system"):
        extra["role"] = role
    return AtifStep(
        step_id=step_id, source=source, message=_text(message.get("content")), extra=extra or None
    )


def _content_extra(message: dict[str, Any], *, tool_calls: bool) -> dict[str, Any]:
    """``{"content": …}`` when the step's text does not give the message's content back (see
    :data:`CONTENT`), else nothing."""
    content = message.get("content")
    read_back = None if tool_calls and not _text(content) else _text(content)
    return {} if content == read_back else {CONTENT: content}


def _final_metrics(usage: Usage, steps: int) -> AtifFinalMetrics:
    return AtifFinalMetrics(
        total_prompt_tokens=usage.prompt_tokens,
        total_completion_tokens=usage.completion_tokens,
        total_cached_tokens=usage.cached_tokens,
        total_cost_usd=usage.cost_usd,
        total_steps=steps,
        extra={"reasoning_tokens": usage.reasoning_tokens, "cache_write_tokens": usage.cache_write_tokens},
    )


def _notes(trajectory: Trajectory) -> str:
    ended = f"the run ended {trajectory.status.value}"
    if trajectory.end_reason:
        ended += f" ({trajectory.end_reason})"
    return (
        f"Exported by atoll from its trajectory of {trajectory.agent} with {trajectory.model}: {ended}. "
        "One ATIF step per message; an agent step's metrics sum the model calls of that turn; "
        f"the run's own record (status, final answer, limits) is in extra.{ATOLL_KEY}."
    )


def _root_extra(trajectory: Trajectory) -> dict[str, Any]:
    """Every field of the trajectory that no ATIF field carries (status, final answer, error,
    times, resumes, coworker turns, and the keys runs add beyond the contract)."""
    dumped = trajectory.model_dump(mode="json")
    declared = Trajectory.model_fields
    kept = {
        key: value
        for key, value in dumped.items()
        # An unset contract field is left out; a key a run added is kept as it is, empty or not.
        if key not in _MAPPED_FIELDS and not (key in declared and value in (None, [], {}))
    }
    kept["schema_version"] = trajectory.schema_version
    return kept
