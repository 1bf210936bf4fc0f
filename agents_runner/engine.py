"""Turn machinery shared by the model-driven agents.

``model_turn`` is one step: limit checks, limit notices, summarisation, the model call (with one
compact-and-retry on a context-window error), and the assistant message appended.
``run_gateway_call`` executes one tool call on the gateway and records it; ``answer`` adds the
``role: tool`` message.  Agents decide what the calls mean.
"""

from __future__ import annotations

import json
import time
from typing import Any

from agents_runner.checkpoint import at_step_boundary
from agents_runner.gateway import GatewayUnavailable, ImagePart
from agents_runner.model import ContextWindowExceeded, ModelReply
from agents_runner.state import AgentRun, RunEnded
from agents_runner.summarize import compact, needs_compaction
from agents_runner.text import truncate
from atoll import telemetry
from atoll.jsonio import loads_strict
from atoll.trajectory import ErrorKind, RunStatus, ToolCall


async def model_turn(run: AgentRun, tools: list[dict[str, Any]] | None, *, finish_hint: str) -> ModelReply:
    """Ask the model for its next move and append its message.

    A checkpoint due is taken first (this is the step boundary: the agent keeps
    ``run.agent_state`` current before calling). Raises :class:`RunEnded` (max_steps) when no
    step is left; provider errors and budgets propagate as raised by
    :class:`~agents_runner.model.ModelClient`."""
    client = run.model_client
    assert client is not None, "model-driven agents need a model client"
    config = run.config
    if run.steps >= config.max_steps:
        raise RunEnded(RunStatus.max_steps, f"stopped after {run.steps} steps (max_steps={config.max_steps})")
    await at_step_boundary(run)
    _limit_notice(run, finish_hint)
    if needs_compaction(run, tools):
        await compact(run, reason=f"context passed {config.summarize_at:.0%} of the model's window")
    run.steps += 1
    try:
        reply = await client.complete(run.context, tools, step=run.steps)
    except ContextWindowExceeded as exc:
        if not await compact(run, reason="the model reported that the prompt exceeds its context window"):
            raise RunEnded(
                RunStatus.error,
                f"prompt exceeds the model's context window and nothing is left to compact: {exc}",
                kind=ErrorKind.model_provider,
            ) from exc
        try:
            reply = await client.complete(run.context, tools, step=run.steps)
        except ContextWindowExceeded as again:
            raise RunEnded(
                RunStatus.error,
                f"prompt exceeds the model's context window even after summarisation: {again}",
                kind=ErrorKind.model_provider,
            ) from again
    run.add(reply.message, record=reply.record)
    return reply


def _limit_notice(run: AgentRun, finish_hint: str) -> None:
    """Tell the model how many steps and how much time it has left when either runs low."""
    config = run.config
    steps_left = config.max_steps - run.steps
    time_left = run.remaining_s
    low_steps = steps_left <= config.limit_warning_steps
    low_time = time_left <= config.timeout_s * config.limit_warning_fraction
    if not (low_steps or low_time):
        return
    run.add(
        {
            "role": "user",
            "content": (
                f"[harness] {steps_left} of {config.max_steps} steps left (this reply is one), "
                f"about {time_left:.0f} s of {config.timeout_s:.0f} s left. {finish_hint}"
            ),
        }
    )


def parse_arguments(raw: str) -> tuple[dict[str, Any] | None, str | None]:
    """Tool-call arguments as a dict, or ``(None, reason)`` when they are not a JSON object."""
    if raw is None or not str(raw).strip():
        return {}, None
    try:
        value = loads_strict(raw)
    except json.JSONDecodeError as exc:
        return None, f"arguments are not valid JSON ({exc.msg} at position {exc.pos})"
    except ValueError as exc:  # NaN or Infinity: no tool takes it, and no trajectory can hold it
        return None, f"arguments are not valid JSON ({exc})"
    if not isinstance(value, dict):
        return None, f"arguments must be a JSON object, got {type(value).__name__}"
    return value, None


def malformed_streak(run: AgentRun, streak: int, malformed: bool) -> int:
    """Replies in a row with malformed tool-call arguments, this one counted (0 after a good
    one). Raises RunEnded (``error``, kind ``agent``) when the streak reaches the run's
    ``max_consecutive_malformed``."""
    streak = streak + 1 if malformed else 0
    if streak >= run.config.max_consecutive_malformed:
        raise RunEnded(
            RunStatus.error,
            f"{streak} replies in a row had malformed tool-call arguments",
            kind=ErrorKind.agent,
        )
    return streak


def answer(run: AgentRun, call_id: str, content: str) -> None:
    """Append the ``role: tool`` message answering ``call_id``."""
    run.add({"role": "tool", "tool_call_id": call_id, "content": content})


def record_call(
    run: AgentRun,
    call_id: str,
    name: str,
    arguments: dict[str, Any] | str,
    result: str,
    *,
    is_error: bool = False,
    duration_s: float = 0.0,
    error: str | None = None,
) -> str:
    """Record a tool call (truncating its result as the model will see it); returns that text."""
    shown, truncated = truncate(result, run.config.tool_result_max_chars)
    run.tool_calls.append(
        ToolCall(
            id=call_id,
            step=run.steps,
            name=name,
            arguments=arguments,
            result=shown,
            is_error=is_error,
            truncated=truncated,
            duration_s=round(duration_s, 4),
            error=error,
        )
    )
    return shown


async def run_gateway_call(
    run: AgentRun, call_id: str, name: str, arguments: dict[str, Any], images: list[tuple[str, ImagePart]]
) -> str:
    """Execute one gateway tool and record it; images are queued in ``images`` for the model.

    Raises :class:`RunEnded` (error/infrastructure) when the gateway itself is unreachable.
    With traces on, the call is one ``execute_tool {name}`` span (:mod:`atoll.telemetry`)."""
    assert run.gateway is not None
    if not telemetry.ENABLED:
        return await _call_gateway(run, call_id, name, arguments, images)
    with telemetry.tool_span(name, call_id=call_id, gateway_url=run.gateway.url) as current:
        text = await _call_gateway(run, call_id, name, arguments, images)
        if run.tool_calls and run.tool_calls[-1].id == call_id and run.tool_calls[-1].is_error:
            telemetry.mark_error(current, "tool_error")
        return text


async def _call_gateway(
    run: AgentRun, call_id: str, name: str, arguments: dict[str, Any], images: list[tuple[str, ImagePart]]
) -> str:
    assert run.gateway is not None
    started = time.monotonic()
    timeout_s = min(run.config.tool_call_timeout_s, max(1.0, run.remaining_s))
    try:
        outcome = await run.gateway.call(name, arguments, timeout_s=timeout_s)
    except GatewayUnavailable as exc:
        record_call(run, call_id, name, arguments, f"error: {exc}", is_error=True, error=str(exc))
        raise RunEnded(RunStatus.error, str(exc), kind=ErrorKind.infrastructure) from exc
    text = outcome.text
    for image in outcome.images:
        if run.model_client is not None and run.model_client.supports_images:
            images.append((call_id, image))
            text += f"\n[image {image.mime_type}, {image.size_bytes} bytes: shown below]"
        else:
            text += f"\n[image {image.mime_type}, {image.size_bytes} bytes omitted: this model does not accept images]"
    error = text.strip()[:300] if outcome.is_error else None
    return record_call(
        run,
        call_id,
        name,
        arguments,
        text,
        is_error=outcome.is_error,
        duration_s=time.monotonic() - started,
        error=error,
    )


def show_images(run: AgentRun, images: list[tuple[str, ImagePart]]) -> None:
    """After a turn's tool messages, show its images to the model in one user message.

    The transcript keeps a note instead of the image bytes."""
    if not images:
        return
    parts: list[dict[str, Any]] = [{"type": "text", "text": "Images returned by the tool calls above:"}]
    notes = []
    for call_id, image in images:
        parts.append(
            {"type": "image_url", "image_url": {"url": f"data:{image.mime_type};base64,{image.data_base64}"}}
        )
        notes.append(f"{image.mime_type} ({image.size_bytes} bytes) from {call_id}")
    run.add(
        {"role": "user", "content": parts},
        record={"role": "user", "content": "[images shown to the model: " + "; ".join(notes) + "]"},
    )
