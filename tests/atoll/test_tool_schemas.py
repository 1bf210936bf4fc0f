"""The portable-tool check (atoll/tool_schemas.py) fires on each kind of violation, naming the tool
and the rule; the conversion makes what it can portable and leaves the rest for the check."""

from __future__ import annotations

from typing import Any

import pytest

from atoll.tool_schemas import (
    MAX_DESCRIPTION,
    MAX_TOOLS,
    anthropic_tools_problems,
    fit_description,
    gemini_tools_problems,
    openai_tools_problems,
    portable_schema,
    responses_tools_problems,
    tool_problems,
)

GOOD = {
    "type": "object",
    "properties": {"path": {"type": "string", "description": "a file"}},
    "required": ["path"],
}


def _with(prop: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {"value": prop}}


# (rule, tool name, description, parameters): one row per kind of violation
BROKEN = [
    ("name", "x" * 65, "d", GOOD),  # OpenAI/Anthropic: at most 64 characters
    ("name", "mail.send", "d", GOOD),  # OpenAI/Anthropic: [a-zA-Z0-9_-] only
    ("name", "9lives", "d", GOOD),  # Google: starts with a letter or an underscore
    ("description", "t", "d" * (MAX_DESCRIPTION + 1), GOOD),  # Azure OpenAI: 1024 characters
    ("parameters-object", "t", "d", {"type": "array", "items": {"type": "string"}}),  # Anthropic
    # Gemini v1beta Schema (ai.google.dev/api/caching#Schema) has none of these fields:
    ("ref", "t", "d", {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": GOOD}}),
    ("keyword", "t", "d", {**GOOD, "additionalProperties": False}),  # not in Gemini's Schema
    ("keyword", "t", "d", _with({"oneOf": [{"type": "string"}, {"type": "integer"}]})),
    ("keyword", "t", "d", _with({"type": "string", "const": "x"})),
    ("type-list", "t", "d", _with({"type": ["string", "null"]})),  # Schema.type: one Type
    ("null-type", "t", "d", _with({"anyOf": [{"type": "string"}, {"type": "null"}]})),  # Vertex Type: no NULL
    ("enum", "t", "d", _with({"type": "integer", "enum": [1, 2]})),  # Schema.enum: of Type.STRING
    ("enum", "t", "d", _with({"type": "string", "enum": ["a", ""]})),  # no empty strings
    ("empty-object", "t", "d", _with({"type": "object"})),  # Gemini: properties non-empty
    ("empty-object", "t", "d", _with({"type": "object", "properties": {}})),
    ("untyped-items", "t", "d", _with({"type": "array"})),  # Schema.items: the elements' Schema
    ("untyped-items", "t", "d", _with({"type": "array", "items": {}})),
    ("untyped", "t", "d", _with({"description": "anything"})),  # a value needs a type
    # Google FunctionDeclaration: parameter names [A-Za-z_][A-Za-z0-9_]*, at most 64
    ("property-name", "t", "d", {"type": "object", "properties": {"file-path": {"type": "string"}}}),
    ("required", "t", "d", {**GOOD, "required": ["path", "mode"]}),  # required names properties
]


@pytest.mark.parametrize(("rule", "name", "description", "parameters"), BROKEN)
def test_each_kind_of_violation_is_named_with_its_tool_and_rule(rule, name, description, parameters):
    problems = tool_problems(name, description, parameters)
    assert rule in {p.rule for p in problems}, problems
    assert all(str(p).startswith(f"{name}: ") for p in problems)


def test_a_portable_tool_and_a_tool_without_arguments_pass():
    assert tool_problems("files_read", "Read a file.", GOOD) == []
    assert (
        tool_problems("market_data_list_coverage", "What is covered.", {"type": "object", "properties": {}})
        == []
    )
    assert tool_problems("market_data_list_coverage", "What is covered.", None) == []


def test_request_level_rules():
    def openai(name: str) -> dict[str, Any]:
        return {"type": "function", "function": {"name": name, "description": "d", "parameters": GOOD}}

    assert openai_tools_problems([openai(f"t{i}") for i in range(MAX_TOOLS)]) == []
    (too_many,) = openai_tools_problems([openai(f"t{i}") for i in range(MAX_TOOLS + 1)])
    assert too_many.rule == "tool-count" and "129 tools > 128" in str(too_many)
    assert {p.rule for p in openai_tools_problems([openai("a.b")])} == {"name"}
    responses = [{"type": "function", "name": f"t{i}", "parameters": GOOD} for i in range(MAX_TOOLS + 1)]
    assert [p.rule for p in responses_tools_problems(responses)] == ["tool-count"]
    # Anthropic requires input_schema, of type object
    assert [p.rule for p in anthropic_tools_problems([{"name": "t", "description": "d"}])] == [
        "parameters-object"
    ]
    anthropic = [{"name": "t", "input_schema": {"type": "object", "properties": {}}}]
    assert anthropic_tools_problems(anthropic) == []


def test_gemini_wire_form_rules():
    def gemini(parameters: Any) -> list[dict[str, Any]]:
        return [{"function_declarations": [{"name": "t", "description": "d", "parameters": parameters}]}]

    good = {
        "type": "OBJECT",
        "properties": {"x": {"type": "STRING", "nullable": True, "format": "date-time"}},
    }
    assert gemini_tools_problems(gemini(good)) == []
    assert gemini_tools_problems(gemini({"type": "object", "properties": {"x": {"type": "string"}}})) == []
    # an OBJECT without properties, even as the parameters: a tool without arguments sends none
    assert {p.rule for p in gemini_tools_problems(gemini({"type": "OBJECT"}))} == {"empty-object"}
    assert gemini_tools_problems([{"functionDeclarations": [{"name": "t", "description": "d"}]}]) == []
    email = {"type": "OBJECT", "properties": {"x": {"type": "STRING", "format": "email"}}}
    assert {p.rule for p in gemini_tools_problems(gemini(email))} == {"format"}
    extra = {**good, "additionalProperties": False}
    assert {p.rule for p in gemini_tools_problems(gemini(extra))} == {"keyword"}


def test_portable_schema_converts_what_it_can():
    pydantic_like = {
        "type": "object",
        "title": "SendArguments",
        "additionalProperties": False,
        "$defs": {"Attendee": {"type": "object", "properties": {"email": {"type": "string"}}, "title": "A"}},
        "properties": {
            "cc": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None, "title": "Cc"},
            "who": {"anyOf": [{"$ref": "#/$defs/Attendee"}, {"type": "null"}], "description": "guest"},
            "kind": {"const": "set_cell", "type": "string"},
            "op": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
            "count": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10.5},
            "size": {"type": "integer", "enum": [8, 16]},
            "when": {"type": "string", "format": "date-time"},
            "path": {"type": "string", "format": "path"},
            "tags": {"type": ["array", "null"], "items": {"type": "string"}},
        },
        "required": ["kind"],
    }
    converted = portable_schema(pydantic_like)
    assert tool_problems("t", "d", converted) == []
    props = converted["properties"]
    assert props["cc"] == {"type": "string"}
    assert props["who"] == {
        "type": "object",
        "properties": {"email": {"type": "string"}},
        "description": "guest",
    }
    assert props["kind"] == {"enum": ["set_cell"], "type": "string"}
    assert props["op"] == {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert props["count"] == {"type": "integer", "minimum": 1, "maximum": 10}
    assert props["size"] == {"type": "integer", "description": "One of: 8, 16."}
    assert props["when"]["format"] == "date-time" and "format" not in props["path"]
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    assert "additionalProperties" not in converted and "title" not in converted
    assert pydantic_like["properties"]["cc"]["anyOf"][1] == {"type": "null"}  # the input is untouched
    assert portable_schema(converted) == converted
    # what it cannot express is left for the check to report
    assert {p.rule for p in tool_problems("t", "d", portable_schema(_with({"type": "object"})))} == {
        "empty-object"
    }


def test_fit_description_cuts_at_a_sentence_and_says_where_the_rest_is():
    text = "First sentence. " * 100
    short = fit_description(text, more="See docs.")
    assert len(short) <= MAX_DESCRIPTION and short.endswith("sentence. See docs.")
    assert fit_description("short") == "short"


def test_mcp_annotations_stay_when_publishing_and_go_when_sent_to_a_model():
    routed = _with({"type": "string", "x-mcp-header": "Region"})
    assert portable_schema(routed, keep_extensions=True)["properties"]["value"]["x-mcp-header"] == "Region"
    assert portable_schema(routed)["properties"]["value"] == {"type": "string"}
