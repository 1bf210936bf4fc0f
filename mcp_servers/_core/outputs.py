"""Output schemas: what every tool declares its structured content to be.

A tool's result model comes from its return annotation (a pydantic model, or
``ToolOutput[Model]``); any other annotation (``str``, ``list[...]``, ``dict[...]``) is
described as it is sent (lists and strings wrapped as ``{"result": …}``). The tool's
``outputSchema`` is that model's JSON schema *or* the error shape (``{"error": {"code",
"message", "argument"}}``), because an error result carries structured content too and some
clients (the TypeScript SDK) validate it against the same schema.

Schemas are made portable: ``$ref``s are inlined (only recursive models keep theirs, with
the ``$defs`` they need at the root), pydantic's OpenAPI-only ``discriminator`` is dropped
(its mapping points into ``$defs`` that inlining removed), and ``format`` values that
standard validators do not know (pydantic's ``path``) are dropped, so AJV in strict mode and
``jsonschema`` both accept every schema.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, TypeAdapter, create_model

from atoll.tool_schemas import inline_refs

#: Formats ajv-formats and jsonschema understand; any other is dropped (it only annotates).
KNOWN_FORMATS = frozenset(
    {
        "date", "time", "date-time", "duration", "uri", "uri-reference", "uri-template", "url",
        "email", "hostname", "ipv4", "ipv6", "regex", "uuid", "json-pointer",
        "relative-json-pointer", "byte", "int32", "int64", "float", "double", "password", "binary",
    }
)  # fmt: skip
_DROPPED_KEYS = frozenset({"discriminator"})
_NAMED_SCHEMAS = frozenset({"properties", "$defs", "patternProperties"})
_LITERALS = frozenset({"default", "examples", "const", "enum"})


class ResultModel(BaseModel):
    """Base of tool result models. Undeclared keys are kept (a world file's own fields travel
    through untouched), so declare the fields clients rely on."""

    model_config = ConfigDict(extra="allow")

    @classmethod
    def from_fields(cls, fields: Mapping[str, Any]) -> Self:
        """The result built from a dict of fields (a service's, a world file's), its values first
        made JSON values as a returned dict's are (datetimes ISO text, tuples and sets lists), so
        what is sent is exactly what the dict gave; ValidationError when it does not fit."""
        from mcp_servers._core.results import json_values

        return cls.model_validate(json_values(dict(fields)))


class ToolErrorDetail(BaseModel):
    code: str
    message: str
    argument: str | None = None


class ToolErrorResult(BaseModel):
    """The structured content of every failed call (see :mod:`mcp_servers._core.errors`)."""

    model_config = ConfigDict(extra="forbid")

    error: ToolErrorDetail


def result_model_of(annotation: Any) -> type[BaseModel] | None:
    """The result model named by a tool's return annotation, or None when it names none."""
    from mcp_servers._core.results import ToolOutput

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) is ToolOutput:
        (inner,) = typing.get_args(annotation)
        return result_model_of(inner)
    return None


def value_schema(annotation: Any) -> dict[str, Any]:
    """The structured content of a tool whose annotation is not a model (wrapped when not an object)."""
    from mcp_servers._core.results import ToolOutput

    if annotation is Any or annotation is ToolOutput or annotation is None or annotation is type(None):
        return {"type": "object"}
    schema = TypeAdapter(annotation).json_schema(mode="serialization")
    if schema.get("type") == "object":
        return schema
    return create_model("WrappedResult", result=(annotation, ...)).model_json_schema(mode="serialization")


@cache
def error_schema() -> dict[str, Any]:
    return portable(ToolErrorResult.model_json_schema(mode="serialization"))


def model_schema(model: type[BaseModel]) -> dict[str, Any]:
    return portable(model.model_json_schema(mode="serialization"))


def output_schema(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """``{"type": "object", "anyOf": [each result schema…, the error schema]}``.

    ``$defs`` kept by recursive models are moved to the root, where their ``$ref``s point.
    """
    branches: list[dict[str, Any]] = []
    defs: dict[str, Any] = {}
    seen: set[str] = set()
    for schema in [*results, error_schema()]:
        branch = dict(schema)
        defs.update(branch.pop("$defs", {}))
        key = repr(sorted(branch.items()))
        if key not in seen:
            seen.add(key)
            branches.append(branch)
    combined: dict[str, Any] = {"type": "object", "anyOf": branches}
    if defs:
        combined["$defs"] = defs
    return combined


def portable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with refs inlined and the keywords strict validators refuse removed."""
    return _strip(inline_refs(schema))


def _strip(node: Any) -> Any:
    if isinstance(node, dict):
        cleaned = {}
        for key, value in node.items():
            if key in _DROPPED_KEYS or (key == "format" and value not in KNOWN_FORMATS):
                continue
            if key in _NAMED_SCHEMAS and isinstance(value, dict):
                # Names, not keywords: a property may well be called "format".
                cleaned[key] = {name: _strip(sub) for name, sub in value.items()}
            elif key in _LITERALS:
                cleaned[key] = value  # data, not schema
            else:
                cleaned[key] = _strip(value)
        return cleaned
    if isinstance(node, list):
        return [_strip(item) for item in node]
    return node
