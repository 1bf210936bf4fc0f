"""The judge's verdict protocol: one schema, asked for structurally, accepted only whole.

The judge is asked for ``{"rationale": str, "verdict": "met" | "not_met"}`` in the strongest
form the model supports:

- ``json_schema``: ``response_format`` with the JSON schema (strict), when litellm says the
  model supports response schemas;
- ``json_object``: ``response_format`` ``{"type": "json_object"}`` (JSON mode), for models
  whose provider has no schema form (Kimi K2, most gpt-oss hosts);
- ``tool``: a forced call of the ``submit_verdict`` tool whose parameters are the schema, when
  it supports function calling but not response schemas;
- ``prompt``: the system prompt alone asks for the JSON object (every other model).

Whatever the form, a reply is accepted only when the WHOLE of it — the message text, or the
arguments of exactly one ``submit_verdict`` call — parses as that schema, with no other keys.
Nothing is ever searched for inside prose: a judge that quotes the agent's ``{"verdict":
"met"}`` while explaining itself has not replied with a verdict, and is asked again.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, StrictStr, ValidationError

from atoll.errors import CodedError, ErrorCode, first_problem
from atoll.grade import Verdict
from atoll.judge import VerdictFormat

TOOL_NAME = "submit_verdict"


class VerdictReply(BaseModel):
    """The only reply shape the judge may give."""

    model_config = ConfigDict(extra="forbid", strict=True)

    rationale: StrictStr
    verdict: Literal["met", "not_met"]


VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "rationale": {"type": "string", "description": "short explanation citing the evidence"},
        "verdict": {"type": "string", "enum": ["met", "not_met"]},
    },
    "required": ["rationale", "verdict"],
    "additionalProperties": False,
}


class MalformedOutput(CodedError, ValueError):
    """The judge's reply is not exactly the verdict object asked for."""

    code = ErrorCode.malformed_verdict


def resolve_format(requested: VerdictFormat, model: str, thinking: str | None = None) -> VerdictFormat:
    """The form to ask in: ``requested``, or for ``auto`` the strongest the model supports
    with ``thinking`` (:func:`atoll.llm.profiles.structured_output`: atoll's table for the
    models it knows, litellm's model information for the others; unknown models, e.g. most
    self-hosted ones, get ``prompt``)."""
    if requested != "auto":
        return requested
    from atoll.llm.profiles import structured_output

    try:
        return structured_output(model, thinking)
    except Exception:  # noqa: BLE001 - a model nothing is known about is asked in the prompt
        return "prompt"


def request_arguments(form: VerdictFormat) -> dict[str, Any]:
    """The litellm arguments that ask for a verdict in ``form``."""
    if form == "json_schema":
        return {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "verdict", "strict": True, "schema": VERDICT_SCHEMA},
            }
        }
    if form == "json_object":
        # JSON mode: the reply is some JSON object (the system prompt gives its shape, and
        # says "JSON", which OpenAI-compatible JSON modes require); parsed whole as below.
        return {"response_format": {"type": "json_object"}}
    if form == "tool":
        tool = {
            "type": "function",
            "function": {
                "name": TOOL_NAME,
                "description": "Submit the verdict on the criterion.",
                "parameters": VERDICT_SCHEMA,
            },
        }
        return {"tools": [tool], "tool_choice": {"type": "function", "function": {"name": TOOL_NAME}}}
    return {}


def reply_text(message: Any, form: VerdictFormat) -> str:
    """What must parse as the verdict: the arguments of the one ``submit_verdict`` call in
    ``tool`` form, else the message text. Raises MalformedOutput for any other shape."""
    calls = list(getattr(message, "tool_calls", None) or [])
    if form == "tool":
        if len(calls) != 1 or getattr(calls[0].function, "name", None) != TOOL_NAME:
            names = [getattr(call.function, "name", None) for call in calls]
            raise MalformedOutput(f"expected exactly one {TOOL_NAME} call, got {names or 'none'}")
        return calls[0].function.arguments or ""
    if calls:
        raise MalformedOutput("expected a JSON object as the reply, got a tool call")
    return getattr(message, "content", None) or ""


def parse_verdict(text: str | None) -> tuple[Verdict, str]:
    """``(verdict, rationale)`` when ``text`` as a whole is the verdict object; raises
    MalformedOutput naming what is wrong otherwise."""
    if not text or not text.strip():
        raise MalformedOutput("empty reply")
    try:
        reply = VerdictReply.model_validate_json(text)
    except ValidationError as exc:
        where, message, _ = first_problem(exc, top="reply")
        raise MalformedOutput(f"not the verdict object ({where}: {message})") from None
    return Verdict(reply.verdict), reply.rationale
