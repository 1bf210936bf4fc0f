"""Tool definitions that every model provider accepts: the rules, a check, and the conversion.

A tool reaches a model as a name, a description and a parameter schema. OpenAI, Anthropic
and Google each refuse some definitions the others accept; a *portable* definition passes
the strictest documented rule of all three, so it works unchanged with every provider
(litellm converts it to each provider's wire form, docs/mcp_servers.md "Portable tool
schemas"). The rules, each with the documentation it comes from:

- **name** ``^[A-Za-z_][A-Za-z0-9_-]{0,63}$``. OpenAI: "Must be a-z, A-Z, 0-9, or contain
  underscores and dashes, with a maximum length of 64" (Chat Completions ``tools[].function.name``);
  Anthropic: ``^[a-zA-Z0-9_-]{1,64}$`` (Messages ``tools[].name``); Google: "Must start with a
  letter or an underscore … maximum length of 64" (Vertex AI ``FunctionDeclaration.name``).
- **description** at most 1024 characters: Azure OpenAI refuses longer function descriptions
  (api.openai.com lifted its limit in 2025; shared/reference/providers.md).
- **tools per request** at most 128: OpenAI Chat Completions ``tools`` ("A max of 128 functions
  are supported").
- **parameters** are an object: Anthropic "``input_schema.type`` must be ``object``"; Google
  ``FunctionDeclaration.parameters`` "must describe an object where the properties are the
  parameters"; a tool without arguments may omit them (OpenAI: "Omitting ``parameters``
  defines a function with an empty parameter list"; Google: "For function with no
  parameters, this can be left unset").
- **schema subset**: the Gemini API's ``Schema`` is "a select subset of an OpenAPI 3.0 schema
  object" (generativelanguage v1beta ``Schema``: type, format, title, description, nullable,
  enum, items, minItems, maxItems, properties, required, minProperties, maxProperties,
  minLength, maxLength, pattern, example, anyOf, propertyOrdering, default, minimum, maximum).
  So no ``$ref``/``$defs``, ``oneOf``, ``allOf``, ``const``, ``additionalProperties``; ``type``
  one of STRING, NUMBER, INTEGER, BOOLEAN, ARRAY, OBJECT (never a list, and no NULL in the
  Vertex ``Type`` enum: an optional argument is simply not required); ``enum`` "of the element
  of Type.STRING"; ``format`` only ``enum``/``date-time`` on the Gemini Developer API.
- **no object without properties**: Gemini refused ``{"type": "OBJECT"}`` with
  "properties: should be non-empty for OBJECT type" (2025; shared/reference/providers.md).
- **typed array items**: Gemini's ``items`` is the "Schema of the elements of Type.ARRAY"; an
  untyped one is refused.
- **property names** ``^[A-Za-z_][A-Za-z0-9_]{0,63}$``: Google "Parameter names must start with
  a letter or an underscore and must only contain chars a-z, A-Z, 0-9, or underscores with a
  maximum length of 64".

:func:`portable_schema` converts a JSON Schema into that subset (what it cannot express it
drops, since the server validates arguments anyway); :func:`tool_problems` and the
``*_tools_problems`` functions check a tool, or a provider request's tools, and name every
broken rule.
"""

from atoll.tool_schemas.check import (
    FORMATS,
    GEMINI_KEYWORDS,
    KEYWORDS,
    MAX_DESCRIPTION,
    MAX_TOOLS,
    NAME,
    PROPERTY_NAME,
    TYPES,
    Problem,
    anthropic_tools_problems,
    gemini_tools_problems,
    openai_tools_problems,
    responses_tools_problems,
    schema_problems,
    tool_problems,
)
from atoll.tool_schemas.convert import fit_description, inline_refs, portable_schema

__all__ = [
    "FORMATS",
    "GEMINI_KEYWORDS",
    "KEYWORDS",
    "MAX_DESCRIPTION",
    "MAX_TOOLS",
    "NAME",
    "PROPERTY_NAME",
    "TYPES",
    "Problem",
    "anthropic_tools_problems",
    "fit_description",
    "gemini_tools_problems",
    "inline_refs",
    "openai_tools_problems",
    "portable_schema",
    "responses_tools_problems",
    "schema_problems",
    "tool_problems",
]
