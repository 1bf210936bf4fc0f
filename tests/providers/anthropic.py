"""An emulator of Anthropic's Messages API (``POST /v1/messages``), extended thinking included.

Use with litellm as ``model="anthropic/claude-opus-4-5-20251101"``, ``api_base=emu.api_base``
(the server root: litellm appends ``/v1/messages``) and any ``api_key``.

When the request enables thinking (``thinking: {"type": "enabled", ...}``) every answer starts
with a ``thinking`` block whose ``signature`` is an HMAC of its text under this emulator's
secret, so a block that comes back edited, reordered away or re-signed is refused, as
Anthropic refuses it.  ``usage`` in a script item is merged over the native usage object
(``input_tokens``, ``output_tokens``, ``cache_creation_input_tokens``,
``cache_read_input_tokens``).  ``stop_reason`` in an item overrides the default
(``tool_use`` when there are tool calls, else ``end_turn``).  ``redacted_thinking: True`` in an
item adds a ``redacted_thinking`` block (opaque ``data`` the emulator verifies) after the thinking
block, as Claude returns when its safety systems flag reasoning.

Each rule below is checked in :meth:`AnthropicEmulator.check` next to the documentation that
states it; a broken rule is answered 400 ``invalid_request_error`` in Anthropic's error
format and recorded in ``emu.rejections`` as ``(rule id, message)``.
"""

from __future__ import annotations

import json
import re
import secrets
from typing import Any

from tests.providers._server import (
    ProviderEmulator,
    Rejected,
    Reply,
    Request,
    ScriptItem,
    estimate_tokens,
    thinking_text,
)

__all__ = ["AnthropicEmulator"]

DOCS_THINKING = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
DOCS_TOOL_USE = "https://docs.claude.com/en/docs/agents-and-tools/tool-use/implement-tool-use"
DOCS_MESSAGES = "https://docs.claude.com/en/api/messages"

# Tool names: "Must match the regex ^[a-zA-Z0-9_-]{1,64}$" (DOCS_TOOL_USE, "Specifying client
# tools"); the API reference allows 128 since 2025, we hold the documented stricter limit.
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
_THINKING_TYPES = ("thinking", "redacted_thinking")


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [block for block in content or [] if isinstance(block, dict)]


class AnthropicEmulator(ProviderEmulator):
    """Anthropic Messages on 127.0.0.1; see the module docstring."""

    thread_name = "anthropic-emulator"

    def endpoint(self, request: Request) -> str | None:
        return "messages" if request.path.rstrip("/") == "/v1/messages" else None

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        # https://docs.claude.com/en/api/errors ("Error shapes")
        kind = _ERROR_TYPES.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}

    # --- rules ----------------------------------------------------------------------------

    def check(self, endpoint: str, request: Request) -> None:
        body = request.body
        # DOCS_MESSAGES, body parameters: max_tokens is "required".
        if not isinstance(body.get("max_tokens"), int):
            raise Rejected("anthropic.max_tokens_required", "max_tokens: Field required")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise Rejected("anthropic.messages_required", "messages: Field required")
        self._check_tools(body)
        self._check_roles(messages)
        self._check_tool_results(messages)
        self._check_signatures(messages)
        if (body.get("thinking") or {}).get("type") == "enabled":
            self._check_thinking_parameters(body, request.headers)
            self._check_thinking_first(messages)

    def _check_tools(self, body: dict[str, Any]) -> None:
        for position, tool in enumerate(body.get("tools") or []):
            if tool.get("type") not in (None, "custom"):
                continue  # Anthropic's own server/client tools (web_search_…, bash_…) have no schema
            name = tool.get("name")
            # DOCS_TOOL_USE, "Specifying client tools": name "Must match the regex ^[a-zA-Z0-9_-]{1,64}$".
            if not isinstance(name, str) or not _TOOL_NAME.match(name):
                raise Rejected(
                    "anthropic.tool_name",
                    f"tools.{position}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'",
                )
            # DOCS_MESSAGES, tools[].input_schema: "type: 'object'" (required, the only value).
            schema = tool.get("input_schema")
            if not isinstance(schema, dict) or schema.get("type") != "object":
                raise Rejected(
                    "anthropic.input_schema_object",
                    f"tools.{position}.custom.input_schema.type: Input should be 'object'",
                )

    def _check_roles(self, messages: list[Any]) -> None:
        # DOCS_MESSAGES, messages: "Our models are trained to operate on alternating user and
        # assistant conversational turns"; roles are "user" or "assistant" (system is a top-level
        # parameter). Consecutive same-role turns are documented as combined, so not refused.
        for position, message in enumerate(messages):
            role = message.get("role") if isinstance(message, dict) else None
            if role not in ("user", "assistant"):
                raise Rejected(
                    "anthropic.roles",
                    f"messages.{position}.role: Input should be 'user' or 'assistant'",
                )

    def _check_tool_results(self, messages: list[dict[str, Any]]) -> None:
        # DOCS_TOOL_USE, "Handling tool use and tool result content blocks": "Tool result blocks
        # must immediately follow their corresponding tool use blocks in the message history" and
        # "In the user message containing tool results, the tool_result blocks must come FIRST in
        # the content array. Any text must come AFTER all tool results."
        for position, message in enumerate(messages):
            blocks = _blocks(message)
            if message["role"] == "assistant":
                wanted = [block.get("id") for block in blocks if block.get("type") == "tool_use"]
                if not wanted:
                    continue
                following = messages[position + 1] if position + 1 < len(messages) else None
                answered: set[Any] = set()
                if following is not None and following["role"] == "user":
                    # Order within that message is the next rule's business (tool_result_first).
                    answered = {
                        block.get("tool_use_id")
                        for block in _blocks(following)
                        if block.get("type") == "tool_result"
                    }
                missing = [str(call_id) for call_id in wanted if call_id not in answered]
                if missing:
                    raise Rejected(
                        "anthropic.tool_result_follows_tool_use",
                        f"messages.{position + 1}: `tool_use` ids were found without `tool_result` blocks "
                        f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                        "corresponding `tool_result` block in the next message.",
                    )
                continue
            previous = messages[position - 1] if position > 0 else None
            offered = {
                block.get("id")
                for block in (_blocks(previous) if previous and previous["role"] == "assistant" else [])
                if block.get("type") == "tool_use"
            }
            seen_other = False
            for index, block in enumerate(blocks):
                if block.get("type") != "tool_result":
                    seen_other = True
                    continue
                if seen_other:
                    raise Rejected(
                        "anthropic.tool_result_first",
                        f"messages.{position}.content.{index}: `tool_result` blocks must come first in the "
                        "content array of a user message, before any other content.",
                    )
                if block.get("tool_use_id") not in offered:
                    raise Rejected(
                        "anthropic.tool_result_without_tool_use",
                        f"messages.{position}.content.{index}: unexpected `tool_use_id` found in "
                        f"`tool_result` blocks: {block.get('tool_use_id')}. Each `tool_result` block must "
                        "have a corresponding `tool_use` block in the previous message.",
                    )

    def _check_signatures(self, messages: list[dict[str, Any]]) -> None:
        # DOCS_THINKING, "Thinking encryption" / "Preserving thinking blocks": thinking blocks are
        # signed; "the signature field is used to verify that thinking blocks were generated by
        # Claude", so a block edited or with a foreign signature is refused.
        for position, message in enumerate(messages):
            if message["role"] != "assistant":
                continue
            for index, block in enumerate(_blocks(message)):
                if block.get("type") == "thinking" and not self.verify(
                    "thinking", str(block.get("thinking")), block.get("signature")
                ):
                    raise Rejected(
                        "anthropic.thinking_signature",
                        f"messages.{position}.content.{index}: Invalid `signature` in `thinking` block",
                    )
                if block.get("type") == "redacted_thinking" and not self._redacted_data_is_ours(
                    block.get("data")
                ):
                    raise Rejected(
                        "anthropic.thinking_signature",
                        f"messages.{position}.content.{index}: Invalid `data` in `redacted_thinking` block",
                    )

    def _redacted_data(self) -> str:
        """Opaque ``redacted_thinking`` data: a nonce and its HMAC, so the emulator can verify it."""
        nonce = secrets.token_hex(8)
        return f"{nonce}.{self.sign('redacted_thinking', nonce)}"

    def _redacted_data_is_ours(self, data: object) -> bool:
        nonce, _, mac = str(data).partition(".")
        return self.verify("redacted_thinking", nonce, mac)

    def _check_thinking_parameters(self, body: dict[str, Any], headers: dict[str, str]) -> None:
        budget = body["thinking"].get("budget_tokens")
        # DOCS_THINKING, "How to use extended thinking": the minimum budget is 1,024 tokens.
        if not isinstance(budget, int) or budget < 1024:
            raise Rejected(
                "anthropic.thinking_budget_min",
                "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024",
            )
        # DOCS_THINKING: "budget_tokens must be set to a value less than max_tokens", except with
        # interleaved thinking (beta header interleaved-thinking-2025-05-14).
        interleaved = "interleaved-thinking" in headers.get("anthropic-beta", "")
        if budget >= body["max_tokens"] and not interleaved:
            raise Rejected(
                "anthropic.thinking_budget_below_max_tokens",
                "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
                f"documentation at {DOCS_THINKING}#max-tokens-and-context-window-size",
            )
        # DOCS_THINKING, "Feature compatibility": "Thinking isn't compatible with temperature or
        # top_k modifications as well as forced tool use"; top_p may be set between 0.95 and 1.
        if "temperature" in body and body["temperature"] != 1:
            raise Rejected(
                "anthropic.thinking_temperature",
                "`temperature` may only be set to 1 when thinking is enabled. Please consult our "
                f"documentation at {DOCS_THINKING}#feature-compatibility",
            )
        if body.get("top_k") is not None:
            raise Rejected(
                "anthropic.thinking_top_k",
                f"`top_k` must be unset when thinking is enabled. Please consult our documentation at "
                f"{DOCS_THINKING}#feature-compatibility",
            )
        if body.get("top_p") is not None and not 0.95 <= float(body["top_p"]) <= 1:
            raise Rejected(
                "anthropic.thinking_top_p",
                "`top_p` must be greater than or equal to 0.95 or unset when thinking is enabled. "
                f"Please consult our documentation at {DOCS_THINKING}#feature-compatibility",
            )
        # DOCS_THINKING, "Extended thinking with tool use": "only supports tool_choice: {type: auto}
        # (the default) or tool_choice: {type: none}".
        if (body.get("tool_choice") or {}).get("type") in ("any", "tool"):
            raise Rejected(
                "anthropic.thinking_tool_choice",
                "Thinking may not be enabled when tool_choice forces tool use.",
            )

    def _check_thinking_first(self, messages: list[dict[str, Any]]) -> None:
        # DOCS_THINKING, "Preserving thinking blocks": during tool use the last assistant turn must
        # be passed back with its thinking block first, unmodified ("When thinking is enabled, a
        # final assistant message must start with a thinking block").
        last = messages[-1]
        if last["role"] != "user" or not any(b.get("type") == "tool_result" for b in _blocks(last)):
            return
        position = len(messages) - 2
        if position < 0 or messages[position]["role"] != "assistant":
            return
        blocks = _blocks(messages[position])
        found = blocks[0].get("type") if blocks else "nothing"
        if found not in _THINKING_TYPES:
            raise Rejected(
                "anthropic.thinking_block_first",
                f"messages.{position}.content.0.type: Expected `thinking` or `redacted_thinking`, but "
                f"found `{found}`. When `thinking` is enabled, a final `assistant` message must start "
                "with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` "
                "blocks). We recommend you include thinking blocks from previous turns. To avoid this "
                f"requirement, disable `thinking`. Please consult our documentation at {DOCS_THINKING}",
            )

    # --- answers --------------------------------------------------------------------------

    def answer(self, endpoint: str, request: Request, item: ScriptItem) -> Reply:
        message = self._message(request, item)
        if request.body.get("stream"):
            return Reply(events=_stream_events(message))
        return Reply(payload=message)

    def _message(self, request: Request, item: ScriptItem) -> dict[str, Any]:
        body = request.body
        content: list[dict[str, Any]] = []
        if (body.get("thinking") or {}).get("type") == "enabled":
            thought = thinking_text(item)
            content.append(
                {"type": "thinking", "thinking": thought, "signature": self.sign("thinking", thought)}
            )
            if item.get("redacted_thinking"):
                content.append({"type": "redacted_thinking", "data": self._redacted_data()})
        if item.get("content"):
            content.append({"type": "text", "text": str(item["content"])})
        for position, call in enumerate(item.get("tool_calls") or []):
            arguments = call.get("arguments", {})
            content.append(
                {
                    "type": "tool_use",
                    "id": call.get("id") or f"toolu_emu{request.index:04d}{position:02d}",
                    "name": call["name"],
                    "input": json.loads(arguments) if isinstance(arguments, str) else arguments,
                }
            )
        calls = bool(item.get("tool_calls"))
        usage = {
            "input_tokens": estimate_tokens(body.get("messages")),
            "output_tokens": estimate_tokens(content),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }
        usage.update(item.get("usage") or {})
        return {
            "id": f"msg_emu{request.index:04d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": content,
            "stop_reason": item.get("stop_reason") or ("tool_use" if calls else "end_turn"),
            "stop_sequence": None,
            "usage": usage,
        }


def _halves(text: str) -> list[str]:
    """Two deltas (so a client must concatenate them), or one for a short text."""
    middle = len(text) // 2
    return [text[:middle], text[middle:]] if middle else [text]


def _stream_events(message: dict[str, Any]) -> list[tuple[str | None, Any]]:
    """Anthropic's SSE sequence for ``message``
    (https://docs.claude.com/en/docs/build-with-claude/streaming, "Event types")."""
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    events: list[tuple[str | None, Any]] = [
        ("message_start", {"type": "message_start", "message": start}),
        ("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(message["content"]):
        kind = block["type"]
        if kind == "redacted_thinking":
            opening, deltas = block, []  # sent whole in content_block_start, as the API does
        elif kind == "thinking":
            opening = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": part} for part in _halves(block["thinking"])]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "text":
            opening = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": part} for part in _halves(block["text"])]
        else:
            opening = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": part}
                for part in _halves(json.dumps(block["input"]))
            ]
        events.append(
            ("content_block_start", {"type": "content_block_start", "index": index, "content_block": opening})
        )
        events.extend(
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
            for delta in deltas
        )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events
