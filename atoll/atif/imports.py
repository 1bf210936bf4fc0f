"""An ATIF trajectory as an atoll trajectory: what the grader and the viewer read
(docs/interop.md, "ATIF": what maps to what, what is lost).

Steps become OpenAI chat messages again: a system or user step one message of its role; an
agent step an assistant message (text, reasoning, tool calls) followed by one ``role: tool``
message per observation result that answers a call (a call left unanswered gets a note, so
every call is answered once, as atoll's trajectories promise); a result that answers no call
becomes a user message. Agent steps with metrics become model calls. A trajectory atoll
exported carries its own record in ``extra.atoll`` (status, final answer, error …), which is
taken back; from another harness, the run counts as completed and its final answer is the
last agent step's text.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from atoll.atif.export import ATOLL_KEY, CONTENT, PROVIDER_FIELDS, RAW_ARGUMENTS
from atoll.atif.models import AtifContentPart, AtifStep, AtifTrajectory
from atoll.errors import AtollError, ErrorCode, describe_validation
from atoll.trajectory import ModelCall, RunStatus, ToolCall, Trajectory, Usage

UNANSWERED = "(no observation recorded for this call)"


def parse_atif(data: Any, source: str = "trajectory") -> AtifTrajectory:
    """``data`` validated as ATIF; AtollError("bad_input") naming ``source`` and the problem."""
    try:
        return AtifTrajectory.model_validate(data)
    except ValidationError as exc:
        raise AtollError(
            ErrorCode.bad_input, f"{source}: not a valid ATIF trajectory: {describe_validation(exc)}"
        ) from None


def from_atif(data: Any, source: str = "trajectory") -> Trajectory:
    """The atoll trajectory of ATIF ``data`` (a parsed JSON object or an :class:`AtifTrajectory`);
    raises AtollError("bad_input") naming ``source`` when it is not valid ATIF."""
    atif = data if isinstance(data, AtifTrajectory) else parse_atif(data, source)
    own = dict((atif.extra or {}).get(ATOLL_KEY) or {})
    messages: list[dict[str, Any]] = []
    tool_calls: list[ToolCall] = []
    model_calls: list[ModelCall] = []
    agent_turns = 0
    last_answer: str | None = None
    for step in atif.steps:
        if step.source == "agent":
            agent_turns += 1
            message = _assistant(step)
            messages.append(message)
            text = message.get("content") or ""
            last_answer = text if text.strip() else last_answer
            if step.metrics is not None:
                model_calls.append(_model_call(agent_turns, step, atif.agent.model_name))
        else:
            extra = step.extra or {}
            content = extra[CONTENT] if CONTENT in extra else _text(step.message)
            messages.append({"role": own_role(step), "content": content})
        results = {r.source_call_id: r for r in (step.observation.results if step.observation else [])}
        for call in step.tool_calls or []:
            result = results.pop(call.tool_call_id, None)
            content = _text(result.content) if result is not None else UNANSWERED
            messages.append({"role": "tool", "tool_call_id": call.tool_call_id, "content": content})
            tool_calls.append(_tool_call(agent_turns, call, result, content))
        for result in results.values():  # results that answer no tool call
            extra = result.extra or {}
            if extra.get("tool_call_id"):
                messages.append(
                    {"role": "tool", "tool_call_id": extra["tool_call_id"], "content": _text(result.content)}
                )
            else:
                messages.append({"role": "user", "content": _text(result.content)})
    usage = _usage(atif, model_calls)
    now = datetime.now(UTC)
    stamps = [step.timestamp for step in atif.steps if step.timestamp]
    values: dict[str, Any] = {
        "trial_id": atif.session_id,
        "agent": atif.agent.name,
        "model": atif.agent.model_name or "unknown",
        "agent_config": (atif.agent.extra or {}).get("agent_config") or {},
        "status": RunStatus.completed,
        "final_answer": last_answer,
        "started_at": _instant(stamps[0]) if stamps else now,
        "ended_at": _instant(stamps[-1]) if stamps else now,
        "steps": agent_turns,
    }
    own.pop("schema_version", None)
    values.update(own)
    values.update(messages=messages, tool_calls=tool_calls, model_calls=model_calls, usage=usage)
    try:
        return Trajectory.model_validate(values)
    except ValidationError as exc:
        raise AtollError(
            ErrorCode.bad_input, f"{source}: extra.{ATOLL_KEY}: {describe_validation(exc)}"
        ) from None


def _instant(stamp: str) -> datetime:
    """An ISO 8601 step timestamp (valid: the model checked it) as an aware datetime (UTC when
    it names no zone)."""
    moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def own_role(step: AtifStep) -> str:
    """The chat role of a non-agent step (atoll's export keeps a role ATIF has no source for)."""
    role = (step.extra or {}).get("role")
    return role if isinstance(role, str) and role else step.source


def _text(content: str | list[AtifContentPart] | None) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(
        part.text
        if part.type == "text" and part.text is not None
        else f"[{part.type}: {getattr(part.source, 'path', '')}]"
        for part in content
    )


def _assistant(step: AtifStep) -> dict[str, Any]:
    text = _text(step.message)
    # A turn of tool calls alone has no content in OpenAI's form (ATIF needs a message: "").
    content = None if step.tool_calls and not text else text
    if CONTENT in (step.extra or {}):  # atoll's export: the content as recorded
        content = (step.extra or {})[CONTENT]
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if step.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.tool_call_id,
                "type": "function",
                "function": {
                    "name": call.function_name,
                    "arguments": _raw_arguments(call.arguments, call.extra),
                },
            }
            for call in step.tool_calls
        ]
    if step.reasoning_content:
        message["reasoning_content"] = step.reasoning_content
    provider = (step.extra or {}).get(PROVIDER_FIELDS)
    if provider:
        message[PROVIDER_FIELDS] = provider
    return message


def _raw_arguments(arguments: dict[str, Any], extra: dict[str, Any] | None) -> str:
    raw = (extra or {}).get(RAW_ARGUMENTS)
    return raw if isinstance(raw, str) else json.dumps(arguments, ensure_ascii=False)


def _tool_call(step: int, call: Any, result: Any, content: str) -> ToolCall:
    extra = (result.extra if result is not None else None) or {}
    raw = (call.extra or {}).get(RAW_ARGUMENTS)
    return ToolCall(
        id=call.tool_call_id,
        step=step,
        name=call.function_name,
        arguments=raw if isinstance(raw, str) else call.arguments,
        result=content,
        is_error=bool(extra.get("is_error", False)),
        truncated=bool(extra.get("truncated", False)),
        duration_s=float(extra.get("duration_s") or 0.0),
        error=extra.get("error") if isinstance(extra.get("error"), str) else None,
    )


def _model_call(step_number: int, step: AtifStep, root_model: str | None) -> ModelCall:
    metrics = step.metrics
    assert metrics is not None
    extra = metrics.extra or {}
    errors = extra.get("errors")
    return ModelCall(
        step=step_number,
        model=step.model_name or root_model or "unknown",
        usage=Usage(
            prompt_tokens=metrics.prompt_tokens or 0,
            completion_tokens=metrics.completion_tokens or 0,
            cached_tokens=metrics.cached_tokens or 0,
            reasoning_tokens=int(extra.get("reasoning_tokens") or 0),
            cache_write_tokens=int(extra.get("cache_write_tokens") or 0),
            cost_usd=metrics.cost_usd or 0.0,
        ),
        duration_s=float(extra.get("duration_s") or 0.0),
        retries=int(extra.get("retries") or 0),
        error="; ".join(str(e) for e in errors) if isinstance(errors, list) and errors else None,
    )


def _usage(atif: AtifTrajectory, model_calls: list[ModelCall]) -> Usage:
    """The final metrics' totals when given, else the steps' sums."""
    summed = sum((call.usage for call in model_calls), Usage())
    final = atif.final_metrics
    if final is None:
        return summed
    extra = final.extra or {}
    return Usage(
        prompt_tokens=final.total_prompt_tokens
        if final.total_prompt_tokens is not None
        else summed.prompt_tokens,
        completion_tokens=final.total_completion_tokens
        if final.total_completion_tokens is not None
        else summed.completion_tokens,
        cached_tokens=final.total_cached_tokens
        if final.total_cached_tokens is not None
        else summed.cached_tokens,
        reasoning_tokens=int(extra.get("reasoning_tokens") or summed.reasoning_tokens),
        cache_write_tokens=int(extra.get("cache_write_tokens") or summed.cache_write_tokens),
        cost_usd=final.total_cost_usd if final.total_cost_usd is not None else summed.cost_usd,
    )
