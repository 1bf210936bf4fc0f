"""An emulator of the Gemini API's ``generateContent`` (v1beta), Gemini 3 thought signatures included.

Use with litellm as ``model="gemini/gemini-3-pro-preview"`` (or ``gemini/gemini-3-flash-preview``,
``gemini/gemini-2.5-flash``), ``api_base=emu.api_base`` (root + ``/v1beta``) and any ``api_key``.
It serves ``POST /v1beta/models/{model}:generateContent`` and
``:streamGenerateContent?alt=sse`` (each SSE event one ``GenerateContentResponse``).

Gemini 3 models (and any model asked to think by ``thinkingConfig``) think: the answer's usage
has ``thoughtsTokenCount``, a thought-summary part (``"thought": true``) comes first when
``thinkingConfig.includeThoughts`` is true, and, for Gemini 3, the first ``functionCall`` part of
the answer carries a ``thoughtSignature`` (an HMAC of the call under this emulator's secret), or
the last part does when there is no call -- as https://ai.google.dev/gemini-api/docs/thought-signatures
("Signatures in function calling parts") describes.  Google's documented placeholder signatures
(``skip_thought_signature_validator``, ``context_engineering_is_the_way_to_go``, raw or base64) are
accepted and recorded in ``emu.placeholder_signatures`` as ``(request index, function name)``, so
a test can assert they were not used.  ``usage`` in an item is merged over ``usageMetadata``
(``promptTokenCount``, ``candidatesTokenCount``, ``thoughtsTokenCount``,
``cachedContentTokenCount``; ``totalTokenCount`` is recomputed).
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

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

__all__ = ["PLACEHOLDER_SIGNATURES", "GeminiEmulator"]

DOCS_SIGNATURES = "https://ai.google.dev/gemini-api/docs/thought-signatures"
DOCS_FUNCTION_CALLING = "https://ai.google.dev/gemini-api/docs/function-calling"
DOCS_SCHEMA = "https://ai.google.dev/api/caching#Schema"
DOCS_THINKING = "https://ai.google.dev/gemini-api/docs/thinking"

# DOCS_SIGNATURES, FAQ: "you can set the following dummy signatures … to skip validation:
# "context_engineering_is_the_way_to_go" or "skip_thought_signature_validator"".
_PLACEHOLDER_TEXTS = ("skip_thought_signature_validator", "context_engineering_is_the_way_to_go")
PLACEHOLDER_SIGNATURES = frozenset(
    [*_PLACEHOLDER_TEXTS, *(base64.b64encode(text.encode()).decode() for text in _PLACEHOLDER_TEXTS)]
)
"""Google's documented skip-validation placeholders, as sent raw or base64-encoded."""

_ROUTE = re.compile(r"^/v1beta/models/(?P<model>[^/:]+):(?P<method>generateContent|streamGenerateContent)$")
# DOCS_SCHEMA: the fields of the v1beta Schema object; anything else is an unknown field.
_SCHEMA_FIELDS = frozenset(
    [
        "type",
        "format",
        "title",
        "description",
        "nullable",
        "enum",
        "maxItems",
        "minItems",
        "properties",
        "required",
        "minProperties",
        "maxProperties",
        "minLength",
        "maxLength",
        "pattern",
        "example",
        "anyOf",
        "propertyOrdering",
        "default",
        "items",
        "minimum",
        "maximum",
    ]
)
_TYPES = frozenset({"STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", "NULL"})
# DOCS_THINKING, "Thinking levels": Gemini 3 Pro takes low/high, Gemini 3 Flash minimal/low/medium/high.
_LEVELS_PRO = ("low", "high")
_LEVELS_FLASH = ("minimal", "low", "medium", "high")
_LEVELS_LATER_PRO = ("low", "medium", "high")  # Gemini 3.1 Pro added medium; minimal stays Flash-only
_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


def _is_gemini_3(model: str) -> bool:
    return model.startswith("gemini-3")


def _get(message: dict[str, Any], name: str) -> Any:
    """A field by its camelCase name or its snake_case spelling (the API's JSON parser takes both,
    and litellm sends ``function_call``, ``function_response``, ``function_declarations``)."""
    if name in message:
        return message[name]
    return message.get(re.sub(r"([A-Z])", lambda match: "_" + match[1].lower(), name))


def _has(message: dict[str, Any], name: str) -> bool:
    return _get(message, name) is not None


def _current_turn_start(contents: list[dict[str, Any]]) -> int:
    """Where the current turn starts (DOCS_SIGNATURES, Validation): the latest user content with
    standard content, not only functionResponse parts."""
    start = 0
    for position, content in enumerate(contents):
        parts = content.get("parts") or []
        if content.get("role", "user") == "user" and any(
            not _has(part, "functionResponse") for part in parts
        ):
            start = position
    return start


def _call_text(call: dict[str, Any]) -> str:
    """What a signature binds: the call's name and arguments (canonical JSON)."""
    return json.dumps([call.get("name"), call.get("args") or {}], sort_keys=True)


class GeminiEmulator(ProviderEmulator):
    """Gemini generateContent on 127.0.0.1; see the module docstring."""

    api_prefix = "/v1beta"
    thread_name = "gemini-emulator"

    def __init__(self, script: Script, *, secret: bytes | None = None) -> None:
        super().__init__(script, secret=secret)
        self.placeholder_signatures: list[tuple[int, str]] = []

    def reset(self) -> None:
        super().reset()
        self.placeholder_signatures.clear()

    def endpoint(self, request: Request) -> str | None:
        match = _ROUTE.match(request.path)
        return match["method"] if match else None

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        # https://ai.google.dev/gemini-api/docs/troubleshooting ("Backend service error codes")
        return {"error": {"code": status, "message": message, "status": _STATUS_NAMES.get(status, "UNKNOWN")}}

    def model_of(self, request: Request) -> str:
        match = _ROUTE.match(request.path)
        return match["model"] if match else ""

    # --- rules ----------------------------------------------------------------------------

    def check(self, endpoint: str, request: Request) -> None:
        body = request.body
        model = self.model_of(request)
        contents = body.get("contents")
        if not isinstance(contents, list) or not contents:
            raise Rejected(
                "gemini.contents_required", "* GenerateContentRequest.contents: contents is not specified"
            )
        self._check_roles(contents)
        self._check_function_responses(contents)
        self._check_signatures(request, model, contents)
        for t, tool in enumerate(body.get("tools") or []):
            for d, declaration in enumerate(_get(tool, "functionDeclarations") or []):
                if "parameters" in declaration:
                    self._check_schema(
                        declaration["parameters"], f"tools[{t}].function_declarations[{d}].parameters"
                    )
        config = _get(body, "generationConfig") or {}
        if _has(config, "responseSchema"):
            self._check_schema(_get(config, "responseSchema"), "generation_config.response_schema")
        self._check_thinking_config(model, _get(config, "thinkingConfig"))

    def _check_roles(self, contents: list[Any]) -> None:
        # https://ai.google.dev/api/caching#Content: role "Must be either 'user' or 'model'".
        for content in contents:
            if not isinstance(content, dict) or content.get("role", "user") not in ("user", "model"):
                raise Rejected("gemini.roles", "Please use a valid role: user, model.")

    def _check_function_responses(self, contents: list[dict[str, Any]]) -> None:
        # DOCS_FUNCTION_CALLING ("Parallel function calling" / "Function calling with thinking"):
        # the function responses are sent back in the turn right after the model's function calls,
        # one response part per call.
        for position, content in enumerate(contents):
            responses = [part for part in content.get("parts") or [] if _has(part, "functionResponse")]
            if not responses:
                continue
            previous = contents[position - 1] if position > 0 else {}
            calls = [part for part in previous.get("parts") or [] if _has(part, "functionCall")]
            if previous.get("role") != "model" or not calls:
                raise Rejected(
                    "gemini.function_response_follows_call",
                    "Please ensure that function response turn comes immediately after a function call turn.",
                )
            if len(responses) != len(calls):
                raise Rejected(
                    "gemini.function_response_count",
                    "Please ensure that the number of function response parts is equal to the number of "
                    "function call parts of the function call turn.",
                )

    def _check_signatures(self, request: Request, model: str, contents: list[dict[str, Any]]) -> None:
        start = _current_turn_start(contents)
        for position, content in enumerate(contents):
            for part in content.get("parts") or []:
                signature = _get(part, "thoughtSignature")
                if signature in PLACEHOLDER_SIGNATURES and position < start and _has(part, "functionCall"):
                    # Outside the current turn nothing is validated, but a placeholder there still
                    # stands for a signature the caller lost (DOCS_SIGNATURES: placeholders skip
                    # validation and degrade quality): recorded like one in the current turn.
                    with self._lock:
                        self.placeholder_signatures.append(
                            (request.index, str(_get(part, "functionCall").get("name")))
                        )
                if signature is None or signature in PLACEHOLDER_SIGNATURES:
                    continue
                # DOCS_SIGNATURES: "pass it back exactly as received"; an altered one is refused
                # (AI Studio answers "Corrupted thought signature.").
                call = _get(part, "functionCall")
                signed = _call_text(call) if call is not None else str(part.get("text"))
                if not self.verify("thought", signed, signature):
                    raise Rejected("gemini.thought_signature_invalid", "Corrupted thought signature.")
        if not _is_gemini_3(model):
            return
        # DOCS_SIGNATURES, "Signatures in function calling parts", Validation: the current turn starts
        # at the latest user content with standard content (not a functionResponse); in it, "the
        # first functionCall part in each step of the current turn must include its
        # thought_signature", else a 4xx.
        for position in range(start, len(contents)):
            calls = [part for part in contents[position].get("parts") or [] if _has(part, "functionCall")]
            if not calls:
                continue
            signature = _get(calls[0], "thoughtSignature")
            name = _get(calls[0], "functionCall").get("name")
            if signature in PLACEHOLDER_SIGNATURES:
                with self._lock:
                    self.placeholder_signatures.append((request.index, str(name)))
            elif signature is None:
                raise Rejected(
                    "gemini.thought_signature_missing",
                    "Function call is missing a thought_signature in functionCall parts. This is required for "
                    "tools to work correctly, and missing thought_signature may lead to degraded model "
                    f"performance. Additional data, function call `default_api:{name}` "
                    f", position {position + 1}. Please refer to {DOCS_SIGNATURES} for more details.",
                )

    def _check_schema(self, schema: Any, where: str) -> None:
        # DOCS_SCHEMA: function parameters and responseSchema are the v1beta Schema object (an
        # OpenAPI 3.0 subset), not JSON Schema.
        if not isinstance(schema, dict):
            raise Rejected("gemini.schema", f"Invalid JSON payload received. Invalid value at '{where}'")
        for key in schema:
            if key not in _SCHEMA_FIELDS:
                raise Rejected(
                    "gemini.schema",
                    f"Invalid JSON payload received. Unknown name \"{key}\" at '{where}': Cannot find field.",
                )
        kind = schema.get("type")
        if kind is not None and (not isinstance(kind, str) or kind.upper() not in _TYPES):
            raise Rejected(
                "gemini.schema",
                f"Invalid JSON payload received. Invalid value at '{where}.type' "
                f"(type.googleapis.com/google.ai.generativelanguage.v1beta.Type), {json.dumps(kind)}",
            )
        kind = (kind or "").upper()
        # DOCS_SCHEMA, enum: "Possible values of the element of Type.STRING with enum format".
        if "enum" in schema and kind != "STRING":
            raise Rejected(
                "gemini.schema", f"* GenerateContentRequest.{where}.enum: only allowed for STRING type"
            )
        # An OBJECT must name its properties (refused in 2025 with these words).
        if kind == "OBJECT" and not schema.get("properties"):
            raise Rejected(
                "gemini.schema",
                f"* GenerateContentRequest.{where}.properties: should be non-empty for OBJECT type",
            )
        for name, value in (schema.get("properties") or {}).items():
            self._check_schema(value, f"{where}.properties[{name}]")
        if "items" in schema:
            self._check_schema(schema["items"], f"{where}.items")
        for index, option in enumerate(_get(schema, "anyOf") or []):
            self._check_schema(option, f"{where}.any_of[{index}]")

    def _check_thinking_config(self, model: str, config: Any) -> None:
        if not config:
            return
        level, budget = _get(config, "thinkingLevel"), _get(config, "thinkingBudget")
        # DOCS_THINKING, "Thinking levels": thinkingLevel (Gemini 3) and thinkingBudget (2.5, kept for
        # compatibility) cannot both be set.
        if level is not None and budget is not None:
            raise Rejected(
                "gemini.thinking_config",
                "You can only set only one of thinking budget and thinking level.",
            )
        if level is not None:
            allowed = (
                _LEVELS_PRO
                if model.startswith("gemini-3-pro")
                else _LEVELS_FLASH
                if "flash" in model
                else _LEVELS_LATER_PRO
            )
            if not _is_gemini_3(model):
                raise Rejected("gemini.thinking_config", "Thinking level is not supported for this model.")
            if str(level).lower() not in allowed:
                raise Rejected(
                    "gemini.thinking_config",
                    f"Thinking level {level} is not supported for this model. Supported levels: {', '.join(allowed)}.",
                )
        # DOCS_THINKING, "Thinking budgets": 2.5 Pro cannot turn thinking off (128..32768 or -1).
        if budget is not None and "2.5-pro" in model and budget != -1 and not 128 <= budget <= 32768:
            raise Rejected(
                "gemini.thinking_config",
                f"The thinking budget {budget} is invalid. Please choose a value between 128 and 32768.",
            )

    # --- answers --------------------------------------------------------------------------

    def answer(self, endpoint: str, request: Request, item: ScriptItem) -> Reply:
        response = self._response(request, item)
        if endpoint == "streamGenerateContent":
            return Reply(events=[(None, chunk) for chunk in _chunks(response)])
        return Reply(payload=response)

    def _response(self, request: Request, item: ScriptItem) -> dict[str, Any]:
        model = self.model_of(request)
        config = _get(_get(request.body, "generationConfig") or {}, "thinkingConfig") or {}
        thinks = _is_gemini_3(model) or bool(_get(config, "thinkingBudget")) or _has(config, "thinkingLevel")
        parts: list[dict[str, Any]] = []
        if thinks and _get(config, "includeThoughts"):
            parts.append({"text": thinking_text(item), "thought": True})
        if item.get("content"):
            parts.append({"text": str(item["content"])})
        calls = []
        for position, call in enumerate(item.get("tool_calls") or []):
            arguments = call.get("arguments", {})
            function_call: dict[str, Any] = {
                "name": call["name"],
                "args": json.loads(arguments) if isinstance(arguments, str) else arguments,
            }
            if _is_gemini_3(model):
                function_call["id"] = call.get("id") or f"fc-emu{request.index:04d}{position:02d}"
            calls.append({"functionCall": function_call})
        if _is_gemini_3(model) and calls:
            calls[0]["thoughtSignature"] = self.sign("thought", _call_text(calls[0]["functionCall"]))
        parts.extend(calls)
        if _is_gemini_3(model) and not calls and parts and not parts[-1].get("thought"):
            parts[-1]["thoughtSignature"] = self.sign("thought", str(parts[-1].get("text")))
        usage = {
            "promptTokenCount": estimate_tokens(request.body.get("contents")),
            "candidatesTokenCount": estimate_tokens(parts),
        }
        if thinks:
            usage["thoughtsTokenCount"] = estimate_tokens(thinking_text(item))
        usage.update(item.get("usage") or {})
        usage["totalTokenCount"] = sum(
            int(usage.get(key) or 0)
            for key in ("promptTokenCount", "candidatesTokenCount", "thoughtsTokenCount")
        )
        return {
            "candidates": [
                {
                    "content": {"role": "model", "parts": parts},
                    "finishReason": item.get("finish_reason") or "STOP",
                    "index": 0,
                }
            ],
            "usageMetadata": usage,
            "modelVersion": model,
            "responseId": f"emu-{request.index:04d}",
        }


def _chunks(response: dict[str, Any]) -> list[dict[str, Any]]:
    """The response split as the API streams it: one part per chunk, finishReason and usage on the last."""
    candidate = response["candidates"][0]
    parts = candidate["content"]["parts"] or [{"text": ""}]
    chunks = []
    for position, part in enumerate(parts):
        last = position == len(parts) - 1
        chunk_candidate: dict[str, Any] = {"content": {"role": "model", "parts": [part]}, "index": 0}
        if last:
            chunk_candidate["finishReason"] = candidate["finishReason"]
        chunk = {"candidates": [chunk_candidate], "modelVersion": response["modelVersion"]}
        chunk["responseId"] = response["responseId"]
        if last:
            chunk["usageMetadata"] = response["usageMetadata"]
        chunks.append(chunk)
    return chunks
