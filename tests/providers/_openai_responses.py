"""The Responses API half of :class:`tests.providers.openai.OpenAIEmulator`: its input rules and
its native answers (``response`` objects and their streaming events)."""

from __future__ import annotations

import json
import secrets
import time
from typing import TYPE_CHECKING, Any

from tests.providers._openai_models import default_effort, is_reasoning_model
from tests.providers._server import Rejected, Reply, Request, ScriptItem, estimate_tokens, thinking_text

if TYPE_CHECKING:
    from tests.providers.openai import OpenAIEmulator

DOCS_REASONING = "https://platform.openai.com/docs/guides/reasoning"
DOCS_FUNCTION_CALLING = "https://platform.openai.com/docs/guides/function-calling"


def _reject(rule: str, message: str, param: str | None = "input", code: str | None = None) -> Rejected:
    return Rejected(rule, message, fields={"param": param, "code": code})


def input_items(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's ``input`` as a list of items (a string is one user message)."""
    given = body.get("input")
    if isinstance(given, str):
        return [{"role": "user", "content": given}]
    return [item for item in given or [] if isinstance(item, dict)]


def _summary_texts(item: dict[str, Any]) -> list[str]:
    return [str(part.get("text")) for part in item.get("summary") or [] if isinstance(part, dict)]


def check_input(emu: OpenAIEmulator, request: Request) -> None:
    """Refuse input that breaks the Responses API's item rules (each cited below)."""
    body = request.body
    stored = body.get("store", True) is not False
    replayed: set[str] = set()
    calls: list[str] = []
    answered: set[str] = set()
    previous = emu.issued_responses.get(str(body.get("previous_response_id")), [])
    for earlier in previous:  # previous_response_id brings that response's items into context
        replayed.add(str(earlier.get("id")))
        if earlier.get("type") == "function_call":
            calls.append(str(earlier.get("call_id")))
    for item in input_items(body):
        kind = item.get("type") or ("message" if "role" in item else None)
        item_id = str(item.get("id") or "")
        issued = emu.issued.get(item_id)
        if kind == "reasoning":
            _check_reasoning_item(emu, item, issued, stored)
            replayed.add(item_id)
        elif item_id and issued and issued.get("reasoning_id") and issued["reasoning_id"] not in replayed:
            # DOCS_REASONING, "Keeping reasoning items in context": when a function call (or message)
            # is passed back with its id, the reasoning item that preceded it must be passed back too;
            # the API answers with these words otherwise.
            raise _reject(
                "openai.responses.reasoning_item_required",
                f"Item '{item_id}' of type '{kind}' was provided without its required 'reasoning' item: "
                f"'{issued['reasoning_id']}'.",
            )
        if kind == "function_call":
            calls.append(str(item.get("call_id")))
            origin = emu.issued.get(emu.call_ids.get(str(item.get("call_id")), ""))
            if origin and origin.get("reasoning_id") and origin["reasoning_id"] not in replayed:
                # Accepted (without its fc_ id the call is not tied to its reasoning), but the model
                # starts this turn cold; recorded so a test can assert it does not happen.
                with emu._lock:
                    emu.dropped_reasoning.append((request.index, str(item.get("call_id"))))
        elif kind == "function_call_output":
            call_id = str(item.get("call_id"))
            # DOCS_FUNCTION_CALLING, "Handling function calls": the output names the call_id it answers.
            if call_id not in calls:
                raise _reject(
                    "openai.responses.function_call_output",
                    f"No tool call found for function call output with call_id {call_id}.",
                )
            answered.add(call_id)
    unanswered = [call_id for call_id in calls if call_id not in answered]
    if unanswered:
        # DOCS_FUNCTION_CALLING: every function call in the input needs its function_call_output.
        raise _reject(
            "openai.responses.function_call_output",
            f"No tool output found for function call {unanswered[0]}.",
        )


def _check_reasoning_item(
    emu: OpenAIEmulator, item: dict[str, Any], issued: dict[str, Any] | None, stored: bool
) -> None:
    # DOCS_REASONING, "Encrypted reasoning items": with store=false the reasoning item must come back
    # with its encrypted_content (include ["reasoning.encrypted_content"]), unchanged; it is verified.
    item_id = str(item.get("id"))
    encrypted = item.get("encrypted_content")
    if encrypted is not None:
        thinking = issued["thinking"] if issued else ""
        if not emu.verify("reasoning", f"{item_id}\0{thinking}", encrypted):
            raise _reject(
                "openai.responses.reasoning_unchanged",
                f"The encrypted content for item {item_id} could not be verified.",
                code="invalid_encrypted_content",
            )
    elif issued is None or not stored or not issued["stored"]:
        raise _reject(
            "openai.responses.reasoning_unchanged",
            f"Item with id '{item_id}' not found. Items are not persisted when `store` is set to false. Try again "
            "with `store` set to true, or remove this item from your input.",
        )
    if issued is not None and _summary_texts(item) != _summary_texts(issued["item"]):
        raise _reject(
            "openai.responses.reasoning_unchanged",
            f"Item '{item_id}' of type 'reasoning' does not match the item the API returned; pass reasoning items "
            "back unchanged.",
        )


def answer(emu: OpenAIEmulator, request: Request, item: ScriptItem) -> Reply:
    """The ``response`` object for ``item`` (JSON, or its SSE events when ``stream`` is true)."""
    body = request.body
    model = str(body.get("model") or "")
    reasoning_config = body.get("reasoning") or {}
    effort = reasoning_config.get("effort") or default_effort(model)
    stored = body.get("store", True) is not False
    tag = secrets.token_hex(6)
    output: list[dict[str, Any]] = []
    reasoning_id = None
    reasoning_tokens = 0
    if is_reasoning_model(model) and effort != "none":
        thinking = thinking_text(item)
        reasoning_id = f"rs_{tag}"
        summary = [{"type": "summary_text", "text": thinking}] if reasoning_config.get("summary") else []
        reasoning: dict[str, Any] = {"type": "reasoning", "id": reasoning_id, "summary": summary}
        if "reasoning.encrypted_content" in (body.get("include") or []):
            reasoning["encrypted_content"] = emu.sign("reasoning", f"{reasoning_id}\0{thinking}")
        output.append(reasoning)
        emu.issued[reasoning_id] = {"item": reasoning, "thinking": thinking, "stored": stored}
        reasoning_tokens = estimate_tokens(thinking)
    if item.get("content"):
        text = str(item["content"])
        content = [{"type": "output_text", "text": text, "annotations": []}]
        message = {
            "type": "message",
            "id": f"msg_{tag}",
            "status": "completed",
            "role": "assistant",
            "content": content,
        }
        output.append(message)
    for position, call in enumerate(item.get("tool_calls") or []):
        arguments = call.get("arguments", {})
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{tag}{position:02d}",
                "call_id": call.get("id") or f"call_{tag}{position:02d}",
                "name": call["name"],
                "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                "status": "completed",
            }
        )
    for entry in output:
        if entry["type"] != "reasoning":
            emu.issued[entry["id"]] = {"item": entry, "reasoning_id": reasoning_id, "stored": stored}
        if entry["type"] == "function_call":
            emu.call_ids[entry["call_id"]] = entry["id"]
    response_id = f"resp_{tag}"
    emu.issued_responses[response_id] = output
    usage: dict[str, Any] = {
        "input_tokens": estimate_tokens(body.get("input")),
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": reasoning_tokens
        + estimate_tokens([entry for entry in output if entry["type"] != "reasoning"]),
        "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
    }
    usage.update(item.get("usage") or {})
    usage["total_tokens"] = int(usage["input_tokens"]) + int(usage["output_tokens"])
    response = {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "model": model,
        "output": output,
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": body.get("previous_response_id"),
        "reasoning": {"effort": effort if reasoning_id else None, "summary": reasoning_config.get("summary")},
        "store": stored,
        "temperature": body.get("temperature", 1.0),
        "text": body.get("text") or {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "top_p": body.get("top_p", 1.0),
        "usage": usage,
        "metadata": {},
    }
    if body.get("stream"):
        return Reply(events=_events(response))
    return Reply(payload=response)


def _events(response: dict[str, Any]) -> list[tuple[str | None, Any]]:
    """The Responses streaming events for ``response``
    (https://platform.openai.com/docs/api-reference/responses-streaming)."""
    events: list[tuple[str | None, Any]] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append((kind, {"type": kind, "sequence_number": len(events), **fields}))

    opening = {**response, "status": "in_progress", "output": [], "usage": None}
    emit("response.created", response=opening)
    emit("response.in_progress", response=opening)
    for index, item in enumerate(response["output"]):
        where = {"item_id": item["id"], "output_index": index}
        if item["type"] == "reasoning":
            emit("response.output_item.added", output_index=index, item={**item, "summary": []})
            for summary_index, part in enumerate(item["summary"]):
                empty = {"type": "summary_text", "text": ""}
                emit(
                    "response.reasoning_summary_part.added", **where, summary_index=summary_index, part=empty
                )
                emit(
                    "response.reasoning_summary_text.delta",
                    **where,
                    summary_index=summary_index,
                    delta=part["text"],
                )
                emit(
                    "response.reasoning_summary_text.done",
                    **where,
                    summary_index=summary_index,
                    text=part["text"],
                )
                emit("response.reasoning_summary_part.done", **where, summary_index=summary_index, part=part)
        elif item["type"] == "message":
            emit(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "content": []},
            )
            part = item["content"][0]
            empty = {**part, "text": ""}
            emit("response.content_part.added", **where, content_index=0, part=empty)
            emit("response.output_text.delta", **where, content_index=0, delta=part["text"])
            emit("response.output_text.done", **where, content_index=0, text=part["text"])
            emit("response.content_part.done", **where, content_index=0, part=part)
        else:
            emit(
                "response.output_item.added",
                output_index=index,
                item={**item, "arguments": "", "status": "in_progress"},
            )
            emit("response.function_call_arguments.delta", **where, delta=item["arguments"])
            emit("response.function_call_arguments.done", **where, arguments=item["arguments"])
        emit("response.output_item.done", output_index=index, item=item)
    emit("response.completed", response=response)
    return events
