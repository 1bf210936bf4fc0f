"""Declaring a server: typed Python functions, registered once, exposed in both modes.

A server module builds one :class:`ServerDefinition` and decorates plain functions::

    SERVER = ServerDefinition("mail", consolidated_name="mail", state=MailStore)

    @SERVER.tool(action="send")
    def send_mail(store: MailStore, to_email: str | list[str], subject: str, body: str = "") -> SentMail:
        \"\"\"Send an email from the world's user. ...

        Args:
            to_email: recipient address or list of addresses.
        \"\"\"

The first parameter always receives the server's state (what ``state(ctx)`` returned, or
the :class:`ServerContext` itself). The other parameters become the tool's arguments: a
pydantic model is built from their annotations and defaults (``Annotated[int, Field(le=100)]``
and ``= Field(...)`` work), the docstring before ``Args:`` is the tool description and
each ``Args:`` entry describes its argument. :mod:`mcp_servers._core.build` derives the
individual tools and the consolidated ``NAME(action=…)`` tool from these definitions.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Annotated, Any, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, create_model
from pydantic.fields import FieldInfo

from atoll.tool_schemas import fit_description, portable_schema
from mcp_servers._core.context import ServerContext
from mcp_servers._core.options import ServerOptions
from mcp_servers._core.outputs import model_schema, output_schema, portable, result_model_of, value_schema
from mcp_servers._core.schema_cache import cached_schema

_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Returns|Raises|Errors|Example|Examples):\s*$")
_ARG_LINE = re.compile(r"^\s*(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")

#: A table cell as an argument: any value is accepted (and written as text), but the schema
#: says "text, number or boolean", since an untyped value is refused by Gemini
#: (atoll.tool_schemas, "typed array items").
TABLE_CELL_SCHEMA = {"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "boolean"}]}
TableCell = Annotated[Any, WithJsonSchema(TABLE_CELL_SCHEMA)]


class ArgumentsBase(BaseModel):
    """Base of every generated arguments model: unknown arguments are refused, numbers
    given for string fields are accepted (agents send ``subject=2024``)."""

    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True, arbitrary_types_allowed=True)


@dataclass
class ToolDef:
    """One tool as declared: the function, its argument model and its descriptions."""

    name: str
    action: str
    function: Callable[..., Any]
    description: str
    summary: str
    arguments: type[BaseModel]
    read_only: bool = False
    destructive: bool = False
    #: The function's return annotation: a result model, ``ToolOutput[Model]``, or another type.
    returns: Any = Any

    @cached_property
    def result_model(self) -> type[BaseModel] | None:
        """The model the structured content is validated against (None: sent as it is)."""
        return result_model_of(self.returns)

    @cached_property
    def result_schema(self) -> dict[str, Any]:
        """The JSON schema of a successful call's structured content."""
        return cached_schema(self.function, self.name, "result", self._result_schema)

    def _result_schema(self) -> dict[str, Any]:
        if self.result_model is not None:
            return model_schema(self.result_model)
        return portable(value_schema(self.returns))

    @cached_property
    def output_schema(self) -> dict[str, Any]:
        """The tool's MCP ``outputSchema``: the result schema or the error shape."""
        return output_schema([self.result_schema])

    @cached_property
    def input_schema(self) -> dict[str, Any]:
        """The JSON schema of the arguments (``$defs`` inlined, portable to strict validators);
        read from :mod:`mcp_servers._core.schema_cache` when it holds it."""
        return cached_schema(self.function, self.name, "input", self._input_schema)

    def _input_schema(self) -> dict[str, Any]:
        schema = portable(self.arguments.model_json_schema())
        schema.pop("title", None)
        schema.setdefault("properties", {})
        return schema

    @cached_property
    def published_schema(self) -> dict[str, Any]:
        """The arguments' schema as ``tools/list`` publishes it: :attr:`input_schema` within the
        subset every model provider accepts (:func:`atoll.tool_schemas.portable_schema`: no
        ``null`` branches, ``additionalProperties``, titles…). Validation still follows
        :attr:`input_schema` (the pydantic model), which ``NAME_schema`` shows in full."""
        return cached_schema(self.function, self.name, "published", self._published_schema)

    def _published_schema(self) -> dict[str, Any]:
        schema = portable_schema(self.input_schema, keep_extensions=True)  # x-mcp-header stays
        schema["type"] = "object"
        schema.setdefault("properties", {})
        return schema

    @property
    def published_description(self) -> str:
        """The description within every provider's limit (the full text: ``NAME_schema``)."""
        return fit_description(self.description)

    @cached_property
    def json_arguments(self) -> frozenset[str]:
        """Arguments taking an array/object and never a string (JSON text is decoded for them)."""
        return frozenset(
            name
            for name, schema in self.input_schema["properties"].items()
            if "string" not in _types_of(schema) and _types_of(schema) & {"array", "object"}
        )

    @cached_property
    def defaulted_non_nullable(self) -> frozenset[str]:
        """Optional arguments whose schema does not accept null."""
        properties = self.input_schema["properties"]
        return frozenset(
            name
            for name, info in self.arguments.model_fields.items()
            if not info.is_required() and "null" not in _types_of(properties.get(name, {}))
        )

    @property
    def argument_names(self) -> list[str]:
        return list(self.arguments.model_fields)

    @property
    def required_arguments(self) -> list[str]:
        return [name for name, info in self.arguments.model_fields.items() if info.is_required()]


@dataclass
class ServerDefinition:
    """A server's tools, its consolidated tool name and how to build its state.

    ``state`` is called once per server instance with the :class:`ServerContext`; its
    return value is passed as the first argument of every tool. It must be safe to use
    from several threads (sync tools run in worker threads).
    """

    name: str
    consolidated_name: str
    description: str = ""
    state: Callable[[ServerContext], Any] | None = None
    tools: list[ToolDef] = field(default_factory=list)
    #: the options this server takes (validated by create_server and POST /apps)
    options: type[ServerOptions] = ServerOptions

    def tool(
        self,
        function: Callable[..., Any] | None = None,
        *,
        action: str | None = None,
        name: str | None = None,
        read_only: bool = False,
        destructive: bool = False,
    ) -> Any:
        """Decorator registering ``function`` as a tool (returns the function unchanged)."""

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            self.tools.append(
                make_tool_def(fn, name=name, action=action, read_only=read_only, destructive=destructive)
            )
            names = [t.name for t in self.tools]
            actions = [t.action for t in self.tools]
            if len(set(names)) != len(names) or len(set(actions)) != len(actions):
                raise ValueError(
                    f"server {self.name!r}: duplicate tool name or action in {names} / {actions}"
                )
            return fn

        return register(function) if function is not None else register

    def find(self, action_or_name: str) -> ToolDef | None:
        """The tool with this action or tool name (case-insensitive), or None."""
        key = action_or_name.strip().lower()
        for tool in self.tools:
            if key in (tool.action, tool.name):
                return tool
        return None


def make_tool_def(
    function: Callable[..., Any],
    *,
    name: str | None = None,
    action: str | None = None,
    read_only: bool = False,
    destructive: bool = False,
) -> ToolDef:
    """Build a :class:`ToolDef` from a typed function (see the module docstring)."""
    tool_name = name or function.__name__
    tool_action = action or tool_name
    for label, value in (("tool name", tool_name), ("action", tool_action)):
        if not _NAME.match(value):
            raise ValueError(f"{label} {value!r} must be snake_case")
    if tool_action == "help":
        raise ValueError("action 'help' is reserved for the consolidated tool's own help")
    description, arg_docs = split_docstring(inspect.getdoc(function) or "")
    signature = inspect.signature(function)
    hints = get_type_hints(function, include_extras=True)
    params = list(signature.parameters.values())
    if not params:
        raise ValueError(f"tool {tool_name!r}: the first parameter must take the server state")
    fields: dict[str, Any] = {}
    for param in params[1:]:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ValueError(f"tool {tool_name!r}: *args/**kwargs are not supported")
        annotation = hints.get(param.name, Any)
        doc = arg_docs.get(param.name)
        if isinstance(param.default, FieldInfo):
            info = param.default
            if info.description is None and doc:
                info.description = doc
        else:
            required = param.default is inspect.Parameter.empty
            info = Field(... if required else param.default, description=doc)
        fields[param.name] = (annotation, info)
    model_name = "".join(part.title() for part in tool_name.split("_")) + "Arguments"
    arguments = create_model(model_name, __base__=ArgumentsBase, **fields)
    summary = description.strip().splitlines()[0].strip() if description.strip() else tool_name
    return ToolDef(
        name=tool_name,
        action=tool_action,
        function=function,
        description=description.strip() or tool_name,
        summary=summary,
        arguments=arguments,
        read_only=read_only,
        destructive=destructive,
        returns=hints.get("return", Any),
    )


def split_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into (description without ``Args:``, {arg: text})."""
    kept: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for line in doc.splitlines():
        header = _SECTION.match(line)
        if header:
            section = header.group(1)
            current = None
            if section not in ("Args", "Arguments", "Parameters"):
                kept.append(line)
            continue
        if section in ("Args", "Arguments", "Parameters"):
            if not line.strip():
                continue
            match = _ARG_LINE.match(line)
            if match and (len(line) - len(line.lstrip())) <= 4:
                current = match.group(1).lstrip("*")
                args[current] = match.group(2).strip()
            elif current is not None:
                args[current] = (args[current] + " " + line.strip()).strip()
            continue
        kept.append(line)
    return "\n".join(kept).strip(), args


def _types_of(schema: dict[str, Any]) -> set[str]:
    types: set[str] = set()
    kind = schema.get("type")
    if isinstance(kind, str):
        types.add(kind)
    elif isinstance(kind, list):
        types.update(kind)
    for key in ("anyOf", "oneOf", "allOf"):
        for sub in schema.get(key, []) or []:
            if isinstance(sub, dict):
                types |= _types_of(sub)
    return types
