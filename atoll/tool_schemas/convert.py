"""Converting tool definitions into the portable subset (:mod:`atoll.tool_schemas`)."""

from __future__ import annotations

import math
from typing import Any

from atoll.tool_schemas.check import KEYWORDS, MAX_DESCRIPTION


def fit_description(text: str, *, limit: int = MAX_DESCRIPTION, more: str = "") -> str:
    """``text`` if it fits in ``limit`` characters, else its longest prefix that ends a line
    or a sentence, followed by ``more`` (where the full text is), within ``limit``."""
    if len(text) <= limit:
        return text
    tail = f" {more}".rstrip() if more else " …"
    room = limit - len(tail)
    cut = text[:room]
    end = max(cut.rfind("\n"), cut.rfind(". ") + 1, cut.rfind(".\n") + 1)
    return (cut[:end] if end > room // 2 else cut).rstrip() + tail


def portable_schema(schema: dict[str, Any], *, keep_extensions: bool = False) -> dict[str, Any]:
    """``schema`` (a JSON Schema of a tool's parameters) within the portable subset.

    References are inlined; ``oneOf`` becomes ``anyOf`` and ``const`` a one-value ``enum``;
    ``null`` leaves every union (a ``null`` argument means "not given" to our servers, and an
    optional argument is simply not required); a one-branch ``anyOf`` is merged into its
    property; an integer's ``exclusiveMinimum``/``exclusiveMaximum`` becomes ``minimum``/
    ``maximum``; a non-string ``enum`` moves into the description; every other keyword outside
    :data:`KEYWORDS` (``additionalProperties``, ``title``, ``examples``, formats other than
    ``date-time``, …) is dropped: the server validates the arguments itself. What cannot be
    expressed (an untyped value, an object without properties) is left for
    :func:`tool_problems` to report. The input is not modified.

    ``keep_extensions`` keeps ``x-…`` keys (MCP's own annotations, such as ``x-mcp-header``,
    which route an argument to an HTTP header): a server publishing its tools keeps them; what
    goes to a model provider drops them.
    """
    return _portable(inline_refs(schema), keep_extensions)


def _portable(node: Any, extensions: bool) -> Any:
    if not isinstance(node, dict):
        return node
    node = dict(node)
    all_of = node.pop("allOf", None)
    if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], dict):
        node = {**all_of[0], **node}
    elif all_of is not None:
        node["allOf"] = all_of  # left for the check to report
    if "oneOf" in node and "anyOf" not in node:
        node["anyOf"] = node.pop("oneOf")
    if "const" in node and "enum" not in node:
        node["enum"] = [node.pop("const")]
    kind = node.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        if len(kinds) == 1:
            node["type"] = kinds[0]
        else:
            del node["type"]
            node["anyOf"] = [{"type": k} for k in kinds]
    if "anyOf" in node:
        node = _portable_union(node, extensions)
    if "enum" in node:
        node = _portable_enum(node)
    if node.get("type") == "integer":
        # the integers above/below an exclusive bound
        if isinstance(node.get("exclusiveMinimum"), int | float):
            node.setdefault("minimum", math.floor(node["exclusiveMinimum"]) + 1)
        if isinstance(node.get("exclusiveMaximum"), int | float):
            node.setdefault("maximum", math.ceil(node["exclusiveMaximum"]) - 1)
    result: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties" and isinstance(value, dict):
            result[key] = {name: _portable(sub, extensions) for name, sub in value.items()}
        elif key in ("items", "anyOf", "allOf"):
            result[key] = (
                [_portable(sub, extensions) for sub in value]
                if isinstance(value, list)
                else _portable(value, extensions)
            )
        elif key == "format":
            if value == "date-time":
                result[key] = value
        elif key == "default":
            if value is not None:
                result[key] = value
        elif key in KEYWORDS or key == "allOf" or (extensions and key.startswith("x-")):
            result[key] = value
    if isinstance(result.get("required"), list) and isinstance(result.get("properties"), dict):
        result["required"] = [name for name in result["required"] if name in result["properties"]]
    return result


def _portable_union(node: dict[str, Any], extensions: bool) -> dict[str, Any]:
    """``anyOf`` without ``null`` branches, nested unions flattened, duplicates removed; one
    branch left is merged into ``node`` (whose own description and default win)."""
    branches: list[Any] = []
    for branch in node.pop("anyOf"):
        branch = _portable(branch, extensions)
        nested = isinstance(branch, dict) and list(branch) == ["anyOf"]
        candidates = branch["anyOf"] if nested else [branch]
        for candidate in candidates:
            if isinstance(candidate, dict) and candidate.get("type") == "null":
                continue
            if candidate not in branches:
                branches.append(candidate)
    if len(branches) == 1 and isinstance(branches[0], dict):
        return {**branches[0], **node}
    if branches:
        node["anyOf"] = branches
    return node


def _portable_enum(node: dict[str, Any]) -> dict[str, Any]:
    values = [value for value in node["enum"] if value is not None]
    if (
        values
        and all(isinstance(value, str) and value for value in values)
        and node.get("type", "string") == "string"
    ):
        node["type"] = "string"
        node["enum"] = values
        return node
    # Gemini takes enums of strings only: the allowed values become prose.
    del node["enum"]
    choices = "One of: " + ", ".join(repr(value) for value in values) + "."
    node["description"] = f"{node['description'].rstrip()} {choices}" if node.get("description") else choices
    if "type" not in node and "anyOf" not in node and values:
        kinds = {_json_type(value) for value in values}
        if len(kinds) == 1:
            node["type"] = kinds.pop()
    return node


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "string"


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """Return ``schema`` with local ``#/$defs/…`` references replaced by their targets.

    Recursive models keep their reference (and the needed ``$defs``) at the point where
    they recur, so the result is always finite.
    """
    defs = schema.get("$defs", {})
    used: set[str] = set()

    def walk(node: Any, stack: tuple[str, ...]) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                key = ref.split("/")[-1]
                if key in stack or key not in defs:
                    used.add(key)
                    return node
                target = walk(defs[key], (*stack, key))
                siblings = {k: walk(v, stack) for k, v in node.items() if k != "$ref"}
                return {**target, **siblings}
            return {k: walk(v, stack) for k, v in node.items() if k != "$defs"}
        if isinstance(node, list):
            return [walk(item, stack) for item in node]
        return node

    result = walk(schema, ())
    if used:
        # A kept $def may itself refer to others: keep their closure, refs intact.
        pending, kept = list(used), {}
        while pending:
            key = pending.pop()
            if key in kept or key not in defs:
                continue
            kept[key] = defs[key]
            pending.extend(_refs_in(defs[key]))
        result["$defs"] = kept
    return result


def _refs_in(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = []
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            found.append(ref.split("/")[-1])
        for value in node.values():
            found.extend(_refs_in(value))
        return found
    if isinstance(node, list):
        return [ref for item in node for ref in _refs_in(item)]
    return []
