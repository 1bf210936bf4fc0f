"""The rules of portable tool definitions, checked (the rules and their sources: :mod:`atoll.tool_schemas`)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

#: OpenAI Chat Completions: "A max of 128 functions are supported".
MAX_TOOLS = 128
#: Azure OpenAI's limit on a function description (the strictest of the three).
MAX_DESCRIPTION = 1024
#: OpenAI/Anthropic ``[a-zA-Z0-9_-]{1,64}``, Google: starts with a letter or underscore.
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
#: Google: parameter names start with a letter or underscore; letters, digits, underscores; ≤ 64.
PROPERTY_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")

#: JSON Schema types inside the subset (``null`` is not: Vertex's Type enum has no NULL).
TYPES = frozenset({"string", "number", "integer", "boolean", "array", "object"})
#: The keywords of a portable JSON Schema: those of Gemini's v1beta Schema that JSON Schema
#: validators (AJV strict) also know.
KEYWORDS = frozenset(
    {
        "type", "description", "enum", "properties", "required", "items", "anyOf", "default",
        "minimum", "maximum", "minItems", "maxItems", "minLength", "maxLength", "pattern",
        "minProperties", "maxProperties", "format",
    }
)  # fmt: skip
#: Gemini v1beta ``Schema`` fields (what litellm may send to Google).
GEMINI_KEYWORDS = KEYWORDS | {"title", "nullable", "example", "propertyOrdering"}
#: The Gemini Developer API accepts only these formats ("otherwise requests will fail").
FORMATS = frozenset({"date-time", "enum"})

Dialect = Literal["json_schema", "gemini"]


@dataclass(frozen=True)
class Problem:
    """One broken rule: which tool, which rule, where in the definition, what is wrong."""

    tool: str
    rule: str
    where: str
    detail: str

    def __str__(self) -> str:
        return f"{self.tool}: {self.rule} at {self.where or '/'}: {self.detail}"


def tool_problems(
    name: str, description: str | None, parameters: dict[str, Any] | None, *, dialect: Dialect = "json_schema"
) -> list[Problem]:
    """Every rule the tool ``name`` breaks (empty when it is portable). ``parameters`` None
    means the tool takes no arguments; ``dialect`` "gemini" checks Gemini's wire form
    (upper-case types, ``nullable``) instead of JSON Schema."""
    found = []
    # OpenAI tools[].function.name and Anthropic tools[].name: [a-zA-Z0-9_-]{1,64}; Google
    # FunctionDeclaration.name: "Must start with a letter or an underscore".
    if not isinstance(name, str) or not NAME.match(name):
        found.append(
            Problem(str(name), "name", "name", f"{name!r} is not 1-64 of [A-Za-z0-9_-] from a letter or _")
        )
    # Azure OpenAI refuses function descriptions over 1024 characters (providers.md).
    if description is not None and len(description) > MAX_DESCRIPTION:
        found.append(
            Problem(name, "description", "description", f"{len(description)} characters > {MAX_DESCRIPTION}")
        )
    if parameters is not None:
        kind = parameters.get("type") if isinstance(parameters, dict) else type(parameters).__name__
        # Anthropic Messages tools[].input_schema: "type: 'object'"; Google
        # FunctionDeclaration.parameters "must describe an object".
        if _type_of(kind, dialect) != "object":
            found.append(Problem(name, "parameters-object", "parameters", f"type is {kind!r}, not 'object'"))
        if isinstance(parameters, dict):
            # A tool without arguments is {"type": "object", "properties": {}} for MCP, OpenAI and
            # Anthropic; for Gemini its parameters are left out (never an empty OBJECT).
            no_arguments_ok = dialect == "json_schema"
            for rule, where, detail in schema_problems(parameters, dialect=dialect, root=no_arguments_ok):
                found.append(Problem(name, rule, f"parameters{where}", detail))
    return found


def schema_problems(
    schema: Any, *, dialect: Dialect = "json_schema", root: bool = False
) -> list[tuple[str, str, str]]:
    """``(rule, where, detail)`` for every rule ``schema`` breaks; ``root`` True allows it to be
    an object with no properties (the parameters of a tool without arguments)."""
    found: list[tuple[str, str, str]] = []
    _check(schema, "", dialect, found, items=False, empty_ok=root)
    return found


def _check(
    node: Any,
    where: str,
    dialect: Dialect,
    found: list[tuple[str, str, str]],
    *,
    items: bool,
    empty_ok: bool = False,
) -> None:
    gemini = dialect == "gemini"
    if not isinstance(node, dict):
        found.append(("schema", where, f"a schema must be an object, got {type(node).__name__}"))
        return
    # Gemini v1beta Schema (ai.google.dev/api/caching#Schema): its fields only; "$ref"/"$defs"
    # are JSON Schema's, unknown to it ("Unknown name ... Cannot find field").
    allowed = GEMINI_KEYWORDS if gemini else KEYWORDS
    for key in node:
        if key in ("$ref", "$defs", "definitions"):
            found.append(("ref", where, f"{key} (references must be inlined)"))
        elif key not in allowed:
            found.append(("keyword", where, f"{key!r} is outside Gemini's Schema subset"))
    # Gemini Schema.type is one Type (STRING, NUMBER, INTEGER, BOOLEAN, ARRAY, OBJECT; Vertex's
    # enum has no NULL): never a list, never "null".
    written = node.get("type")
    kind = _type_of(written, dialect)
    if isinstance(written, list):
        found.append(("type-list", where, f"type {written} (use anyOf)"))
    elif written is not None and kind not in TYPES:
        rule = "null-type" if str(written).lower() == "null" else "type"
        found.append((rule, where, f"type {written!r} (one of {', '.join(sorted(TYPES))})"))
    # An untyped schema: Gemini's items is "Schema of the elements of Type.ARRAY" (a type is
    # needed; litellm replaces an empty one with OBJECT, which is then refused as empty).
    branches = node.get("anyOf")
    if kind is None and not branches and "properties" not in node:
        rule = "untyped-items" if items else "untyped"
        found.append((rule, where, "no type (say what the value is)"))
    # Gemini Schema.enum: "Possible values of the element of Type.STRING with enum format";
    # litellm turns an empty string into null, which Google refuses.
    if "enum" in node:
        values = node["enum"]
        strings = isinstance(values, list) and all(isinstance(v, str) and v for v in values)
        if kind != "string" or not strings:
            found.append(("enum", where, f"enum {values!r} on type {kind!r} (only non-empty strings)"))
    # Gemini Developer API: format "must be either 'enum' or 'date-time', otherwise requests will
    # fail" (Firebase AI Logic SchemaShared.format).
    if "format" in node and gemini and node["format"] not in FORMATS:
        found.append(("format", where, f"format {node['format']!r} (Gemini API: enum or date-time)"))
    # Gemini, 2025: "properties: should be non-empty for OBJECT type" (providers.md).
    properties = node.get("properties")
    if (kind == "object" or properties is not None) and not properties and not empty_ok:
        found.append(("empty-object", where, "an object without properties"))
    if isinstance(properties, dict):
        for name, sub in properties.items():
            # Google FunctionDeclaration: "Parameter names must start with a letter or an
            # underscore and must only contain chars a-z, A-Z, 0-9, or underscores ... 64".
            if not PROPERTY_NAME.match(name):
                found.append(
                    (
                        "property-name",
                        f"{where}/properties/{name}",
                        f"{name!r} is not [A-Za-z_][A-Za-z0-9_]{{0,63}}",
                    )
                )
            _check(sub, f"{where}/properties/{name}", dialect, found, items=False)
        # Schema.required names properties of this object.
        for name in node.get("required") or []:
            if name not in properties:
                found.append(("required", where, f"required {name!r} is not a property"))
    if kind == "array" and "items" not in node:
        found.append(("untyped-items", where, "an array without items"))
    if "items" in node:
        _check(node["items"], f"{where}/items", dialect, found, items=True)
    if branches is not None:
        if not isinstance(branches, list) or not branches:
            found.append(("anyOf", where, "anyOf must be a non-empty list"))
        else:
            for index, branch in enumerate(branches):
                _check(branch, f"{where}/anyOf/{index}", dialect, found, items=items)


def _type_of(written: Any, dialect: Dialect) -> Any:
    """The JSON Schema type ``written`` names: Gemini's Type enum is upper-case (STRING), and its
    documentation's own function declarations write the types in lower case; both are read."""
    if dialect == "gemini" and isinstance(written, str):
        return written.lower()
    return written


def openai_tools_problems(tools: Iterable[dict[str, Any]]) -> list[Problem]:
    """Problems of an OpenAI Chat Completions ``tools`` list (what the agent hands to litellm,
    and what litellm sends to OpenAI-compatible endpoints unchanged)."""
    tools = list(tools)
    found = [_too_many(len(tools))] if len(tools) > MAX_TOOLS else []
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or tool.get("type") != "function":
            found.append(
                Problem(f"tools[{index}]", "tool", "", "not a {type: function, function: {...}} tool")
            )
            continue
        found += tool_problems(
            function.get("name", ""), function.get("description"), function.get("parameters")
        )
    return found


def responses_tools_problems(tools: Iterable[dict[str, Any]]) -> list[Problem]:
    """Problems of an OpenAI Responses API ``tools`` list (``{type, name, description, parameters}``)."""
    tools = list(tools)
    found = [_too_many(len(tools))] if len(tools) > MAX_TOOLS else []
    for tool in tools:
        found += tool_problems(tool.get("name", ""), tool.get("description"), tool.get("parameters"))
    return found


def anthropic_tools_problems(tools: Iterable[dict[str, Any]]) -> list[Problem]:
    """Problems of an Anthropic Messages ``tools`` list (``input_schema`` is required)."""
    found = []
    for tool in tools:
        name = tool.get("name", "")
        if not isinstance(tool.get("input_schema"), dict):
            found.append(
                Problem(name, "parameters-object", "input_schema", "missing (Anthropic requires it)")
            )
            continue
        found += tool_problems(name, tool.get("description"), tool["input_schema"])
    return found


def gemini_tools_problems(tools: Iterable[dict[str, Any]]) -> list[Problem]:
    """Problems of a Gemini ``generateContent`` ``tools`` list (its ``functionDeclarations``,
    whose ``parameters`` are in Gemini's Schema form)."""
    found = []
    for tool in tools:
        # proto JSON: lowerCamelCase or the proto's snake_case field name (what litellm sends)
        for declaration in tool.get("functionDeclarations") or tool.get("function_declarations") or []:
            found += tool_problems(
                declaration.get("name", ""),
                declaration.get("description"),
                declaration.get("parameters"),
                dialect="gemini",
            )
    return found


def _too_many(count: int) -> Problem:
    # OpenAI Chat Completions tools: "A max of 128 functions are supported".
    return Problem("tools", "tool-count", "tools", f"{count} tools > {MAX_TOOLS} in one request")
