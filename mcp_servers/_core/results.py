"""What tools return: structured content plus readable text (plus images when needed).

A tool function may return a pydantic model, a dict, a list, a string, None or a
:class:`ToolOutput`. Structured content is always a JSON object (lists and strings are
wrapped as ``{"result": …}``). The readable text is the ``text`` given in ToolOutput, else
what the model's ``render_text()`` returns when it has one, else indented JSON.

When the tool's return annotation names a result model (``-> Listing``, ``-> SentMail`` on a
function returning a dict, ``-> ToolOutput[MailPage]``), a returned dict is validated into
that model, so the structured content always matches the tool's declared ``outputSchema``
(:mod:`mcp_servers._core.outputs`); a mismatch is our bug and fails the call as ``internal``.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from mcp_servers._core.outputs import ResultModel


@dataclass
class ImageBlock:
    """An image to send as MCP image content next to the text."""

    data: bytes
    mime_type: str


Data = TypeVar("Data")


@dataclass
class ToolOutput(Generic[Data]):
    """Full control over a tool result: structured ``data``, ``text`` and extra ``images``.

    Annotate the tool as ``-> ToolOutput[ResultModel]`` so its output schema is known.
    """

    data: Data
    text: str | None = None
    images: list[ImageBlock] = field(default_factory=list)


def to_structured(value: Any, model: type[BaseModel] | None = None) -> dict[str, Any]:
    """The JSON object sent as structured content for a tool's return value.

    With ``model``, a value that is not already a model is validated into it (raising
    pydantic's ValidationError when it does not fit); only the keys it had are sent.
    """
    if isinstance(value, ToolOutput):
        value = value.data
    if isinstance(value, BaseModel):
        # A result model is sent with the fields it was given, as a dict is (below): an optional
        # field left out stays out rather than arriving as null.
        value = value.model_dump(mode="json", by_alias=True, exclude_unset=isinstance(value, ResultModel))
    else:
        value = json_values(value)
        if model is not None:
            value = model.model_validate(value).model_dump(mode="json", by_alias=True, exclude_unset=True)
    if isinstance(value, dict):
        return value
    return {"result": value}


def json_values(value: Any) -> Any:
    """``value`` as JSON values: what a returned dict's content is sent as (datetimes ISO text,
    tuples and sets lists, bytes text, anything else its ``str``)."""
    return json.loads(json.dumps(value, default=_json_default, ensure_ascii=False))


def to_text(value: Any, structured: dict[str, Any]) -> str:
    """The readable text for a tool's return value (see the module docstring)."""
    if isinstance(value, ToolOutput):
        if value.text is not None:
            return value.text
        value = value.data
    render = getattr(value, "render_text", None)
    if callable(render):
        return str(render())
    if isinstance(value, str):
        return value
    return json.dumps(structured, indent=2, ensure_ascii=False)


def images_of(value: Any) -> list[ImageBlock]:
    return list(value.images) if isinstance(value, ToolOutput) else []


def encode_image(image: ImageBlock) -> str:
    return base64.b64encode(image.data).decode("ascii")


def _json_default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)
