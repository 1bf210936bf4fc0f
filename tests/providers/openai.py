"""An emulator of OpenAI's Chat Completions (``POST /v1/chat/completions``) and Responses
(``POST /v1/responses``) APIs, reasoning models included.

One class, :class:`OpenAIEmulator`, serves both endpoints, because litellm picks the endpoint
from the model (``openai/gpt-5.2-pro`` and ``openai/responses/<model>`` go to Responses, other
``openai/<model>`` to Chat Completions); ``OpenAIChatEmulator`` and ``OpenAIResponsesEmulator``
are the same class under the names the rest of the suite may use.  ``emu.request_paths`` tells
which endpoint each request reached.  Use with ``api_base=emu.api_base`` (root + ``/v1``).

Reasoning models (``gpt-5*`` but ``gpt-5-chat*``, ``o1``/``o3``/``o4*``) reason on every answer:
Chat Completions reports it only as ``usage.completion_tokens_details.reasoning_tokens``;
Responses returns a ``reasoning`` output item (``rs_…`` id) before the message or function
calls, with its summary when ``reasoning.summary`` is asked for and an ``encrypted_content``
(an HMAC token binding id and text) when ``include`` has ``reasoning.encrypted_content``.
A function call it returned that comes back without the reasoning item that preceded it is
accepted (as OpenAI accepts it when the call has no ``fc_`` id) but recorded in
``emu.dropped_reasoning`` as ``(request index, call_id)``: that turn started cold.
``usage`` in an item is merged over the native usage (Chat: ``prompt_tokens``,
``completion_tokens``, ``prompt_tokens_details``, ``completion_tokens_details``; Responses:
``input_tokens``, ``output_tokens``, ``input_tokens_details``, ``output_tokens_details``).

Rules shared by both endpoints are checked here; the Responses-only ones (reasoning items
replayed unchanged and with their function calls, outputs answering calls) in
``tests/providers/_openai_responses.py``.  Refusals are 400 ``{"error": {"message", "type":
"invalid_request_error", "param", "code"}}`` as OpenAI sends them.
"""

from __future__ import annotations

import re
from typing import Any

from atoll.testing.scripted_llm import chat_completion, chat_completion_chunks
from tests.providers import _openai_responses as responses
from tests.providers._openai_models import (
    EFFORTS,
    SAMPLING_WITH_EFFORT_NONE,
    default_effort,
    family,
    is_reasoning_model,
)
from tests.providers._server import (
    ProviderEmulator,
    Rejected,
    Reply,
    Request,
    Script,
    ScriptItem,
    estimate_tokens,
    thinking_text,
)

__all__ = ["OpenAIChatEmulator", "OpenAIEmulator", "OpenAIResponsesEmulator", "is_reasoning_model"]

DOCS_FUNCTION_CALLING = "https://platform.openai.com/docs/guides/function-calling"
DOCS_REASONING = "https://platform.openai.com/docs/guides/reasoning"
DOCS_GPT_5 = "https://platform.openai.com/docs/guides/latest-model"
DOCS_CHAT = "https://platform.openai.com/docs/api-reference/chat/create"
DOCS_STRUCTURED = "https://platform.openai.com/docs/guides/structured-outputs"

_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]+$")
_ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 404: "invalid_request_error"}


def reject(rule: str, message: str, param: str | None, code: str | None) -> Rejected:
    """A :class:`Rejected` carrying OpenAI's ``param`` and ``code``."""
    return Rejected(rule, message, fields={"param": param, "code": code})


class OpenAIEmulator(ProviderEmulator):
    """OpenAI Chat Completions and Responses on 127.0.0.1; see the module docstring."""

    api_prefix = "/v1"
    thread_name = "openai-emulator"

    def __init__(self, script: Script, *, secret: bytes | None = None) -> None:
        super().__init__(script, secret=secret)
        # Responses output items by id (with the reasoning item that preceded each, whether stored),
        # and each response's output by response id (for previous_response_id).
        self.issued: dict[str, dict[str, Any]] = {}
        self.issued_responses: dict[str, list[dict[str, Any]]] = {}
        self.call_ids: dict[str, str] = {}  # call_id -> fc_ id of the function calls it returned
        self.dropped_reasoning: list[tuple[int, str]] = []

    def reset(self) -> None:
        super().reset()
        self.dropped_reasoning.clear()

    def endpoint(self, request: Request) -> str | None:
        path = request.path.rstrip("/")
        return {"/v1/chat/completions": "chat", "/v1/responses": "responses"}.get(path)

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        # https://platform.openai.com/docs/guides/error-codes: {"error": {message, type, param, code}}
        kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
        return {"error": {"message": message, "type": kind, "param": None, "code": None}}

    def check(self, endpoint: str, request: Request) -> None:
        body = request.body
        model = str(body.get("model") or "")
        tools = body.get("tools") or []
        # DOCS_CHAT, tools: "A max of 128 functions are supported."
        if len(tools) > 128:
            raise reject(
                "openai.tools_max",
                f"Invalid 'tools': array too long. Expected an array with maximum length 128, but got an array "
                f"with length {len(tools)} instead.",
                "tools",
                "array_above_max_length",
            )
        for position, tool in enumerate(tools):
            if tool.get("type") != "function":
                continue
            function = tool.get("function", tool) if endpoint == "chat" else tool
            self._check_tool_name(function.get("name"), f"tools[{position}].function.name")
            if function.get("strict"):
                check_strict_schema(function.get("parameters") or {}, f"function '{function.get('name')}'")
        self._check_reasoning_parameters(endpoint, model, body)
        if endpoint == "chat":
            self._check_chat_messages(body.get("messages") or [])
            response_format = body.get("response_format") or {}
            json_schema = response_format.get("json_schema") or {}
            if response_format.get("type") == "json_schema" and json_schema.get("strict"):
                check_strict_schema(
                    json_schema.get("schema") or {}, f"response_format '{json_schema.get('name')}'"
                )
        else:
            text_format = (body.get("text") or {}).get("format") or {}
            if text_format.get("type") == "json_schema" and text_format.get("strict"):
                check_strict_schema(
                    text_format.get("schema") or {}, f"response_format '{text_format.get('name')}'"
                )
            responses.check_input(self, request)

    def _check_tool_name(self, name: Any, where: str) -> None:
        # DOCS_CHAT, tools[].function.name: "Must be a-z, A-Z, 0-9, or contain underscores and dashes,
        # with a maximum length of 64."
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            raise reject(
                "openai.tool_name",
                f"Invalid '{where}': string does not match pattern. Expected a string that matches the "
                "pattern '^[a-zA-Z0-9_-]+$'.",
                where,
                "invalid_value",
            )
        if len(name) > 64:
            raise reject(
                "openai.tool_name",
                f"Invalid '{where}': string too long. Expected a string with maximum length 64, but got a "
                f"string with length {len(name)} instead.",
                where,
                "string_above_max_length",
            )

    def _check_reasoning_parameters(self, endpoint: str, model: str, body: dict[str, Any]) -> None:
        if not is_reasoning_model(model):
            return
        # DOCS_REASONING / DOCS_CHAT, max_tokens: "deprecated in favor of max_completion_tokens, and
        # is not compatible with o-series models".
        if endpoint == "chat" and body.get("max_tokens") is not None:
            raise reject(
                "openai.reasoning_max_tokens",
                "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                "'max_completion_tokens' instead.",
                "max_tokens",
                "unsupported_parameter",
            )
        effort = (
            body.get("reasoning_effort")
            if endpoint == "chat"
            else (body.get("reasoning") or {}).get("effort")
        )
        allowed = EFFORTS[family(model)]
        if effort is not None and effort not in allowed:
            param = "reasoning_effort" if endpoint == "chat" else "reasoning.effort"
            raise reject(
                "openai.reasoning_effort",
                f"Unsupported value: '{param}' does not support '{effort}' with this model. Supported values "
                f"are: {', '.join(repr(value) for value in allowed)}.",
                param,
                "unsupported_value",
            )
        effort = effort or default_effort(model)
        # DOCS_GPT_5, "GPT-5.2 parameter compatibility": temperature, top_p and logprobs "are only
        # supported when using GPT-5.2 with reasoning effort set to none"; older reasoning models
        # accept only the default value 1.
        sampling_allowed = (
            model.startswith(SAMPLING_WITH_EFFORT_NONE) and "pro" not in model and effort == "none"
        )
        for name in ("temperature", "top_p"):
            value = body.get(name)
            if value is not None and value != 1 and not sampling_allowed:
                raise reject(
                    "openai.reasoning_sampling",
                    f"Unsupported value: '{name}' does not support {value} with this model. Only the default (1) "
                    "value is supported.",
                    name,
                    "unsupported_value",
                )

    def _check_chat_messages(self, messages: list[dict[str, Any]]) -> None:
        # DOCS_FUNCTION_CALLING ("Handling function calls"): every tool call of an assistant message
        # is answered by a tool message with its tool_call_id before the conversation goes on.
        pending: list[str] = []
        for position, message in enumerate(messages):
            role = message.get("role")
            if role == "tool":
                if message.get("tool_call_id") not in pending:
                    raise reject(
                        "openai.tool_message_without_call",
                        "Invalid parameter: messages with role 'tool' must be a response to a preceeding message "
                        "with 'tool_calls'.",
                        f"messages.[{position}].role",
                        None,
                    )
                pending.remove(message["tool_call_id"])
                continue
            if pending:
                raise reject(
                    "openai.tool_calls_answered",
                    "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                    f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(pending)}",
                    f"messages.[{position}].role",
                    None,
                )
            for index, call in enumerate(message.get("tool_calls") or [] if role == "assistant" else []):
                call_id = str(call.get("id"))
                # DOCS_CHAT, messages[].tool_calls[].id; the API refuses ids over 40 characters.
                if len(call_id) > 40:
                    raise reject(
                        "openai.tool_call_id_length",
                        f"Invalid 'messages[{position}].tool_calls[{index}].id': string too long. Expected a "
                        f"string with maximum length 40, but got a string with length {len(call_id)} instead.",
                        f"messages[{position}].tool_calls[{index}].id",
                        "string_above_max_length",
                    )
                pending.append(call_id)
        if pending:
            raise reject(
                "openai.tool_calls_answered",
                "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(pending)}",
                f"messages.[{len(messages)}].role",
                None,
            )

    # --- answers --------------------------------------------------------------------------

    def answer(self, endpoint: str, request: Request, item: ScriptItem) -> Reply:
        if endpoint == "responses":
            return responses.answer(self, request, item)
        body = request.body
        model = str(body.get("model") or "")
        usage: dict[str, Any] = {
            "prompt_tokens": estimate_tokens(body.get("messages")),
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0},
        }
        reasoning = 0
        if is_reasoning_model(model) and (body.get("reasoning_effort") or default_effort(model)) != "none":
            reasoning = estimate_tokens(thinking_text(item))
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
        usage["completion_tokens"] = reasoning + 1 + len(item.get("content") or "") // 4
        usage.update(item.get("usage") or {})
        completion = chat_completion({**item, "usage": usage}, body, request.index, model)
        if body.get("stream"):
            events: list[tuple[str | None, Any]] = [
                (None, chunk) for chunk in chat_completion_chunks(completion)
            ]
            return Reply(events=[*events, (None, "[DONE]")])
        return Reply(payload=completion)


OpenAIChatEmulator = OpenAIEmulator
OpenAIResponsesEmulator = OpenAIEmulator


def check_strict_schema(schema: Any, owner: str, context: str = "()") -> None:
    """Refuse a strict schema that Structured Outputs does not support (DOCS_STRUCTURED,
    "Supported schemas": "additionalProperties: false must always be set in objects" and "all
    fields or function parameters must be specified as required")."""
    if not isinstance(schema, dict):
        return
    kind = schema.get("type")
    is_object = kind == "object" or (isinstance(kind, list) and "object" in kind)
    if is_object:
        if schema.get("additionalProperties") is not False:
            raise reject(
                "openai.strict_schema",
                f"Invalid schema for {owner}: In context={context}, 'additionalProperties' is required to be "
                "supplied and to be false.",
                "response_format" if owner.startswith("response_format") else "tools",
                "invalid_function_parameters" if owner.startswith("function") else None,
            )
        properties = schema.get("properties") or {}
        missing = [name for name in properties if name not in (schema.get("required") or [])]
        if missing:
            raise reject(
                "openai.strict_schema",
                f"Invalid schema for {owner}: In context={context}, 'required' is required to be supplied and to "
                f"be an array including every key in properties. Missing '{missing[0]}'.",
                "response_format" if owner.startswith("response_format") else "tools",
                "invalid_function_parameters" if owner.startswith("function") else None,
            )
        for name, value in properties.items():
            check_strict_schema(value, owner, f"{context[:-1]}'properties', '{name}')".replace("(,", "("))
    if "items" in schema:
        check_strict_schema(schema["items"], owner, f"{context[:-1]}'items')".replace("(,", "("))
    for key in ("anyOf", "$defs", "definitions"):
        values = schema.get(key)
        for value in values.values() if isinstance(values, dict) else values or []:
            check_strict_schema(value, owner, context)
