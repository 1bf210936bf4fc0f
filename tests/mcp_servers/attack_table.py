"""The attack table, derived from each server's ``tools/list`` (not kept by hand).

:func:`path_pointers` walks every tool's input schema (nested objects and arrays too)
and names each argument that holds a path (by its name: ``path``, ``file_path``,
``directory``, ``file_name``, ``*_path``, ``save_attachments_to``, ``attachments``, …).
Each such pointer is attacked with :func:`place`: the hostile value goes where the
pointer says, the other arguments come from the traversal suite's row for that tool
(``base``/``setup``/``options``), and a nested pointer (an image block's ``path`` inside
``content``) needs a template in :data:`NESTED`. A pointer that cannot be attacked (no
row for its tool, or a nested one without a template) is a failure of the coverage test,
so a new path argument cannot be forgotten.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_servers import OPTIONAL_SERVER_NAMES, SERVER_NAMES, create_server
from tests.mcp_servers.helpers import McpSession, make_world
from tests.mcp_servers.traversal import TraversalCase
from tests.mcp_servers.traversal_table import TRAVERSAL_CASES

# Every server of the one table (atoll.apps, re-exported by mcp_servers): a new server is
# walked the day it is added. (code_exec takes code, not paths: its containment is the
# sandbox's, tests/mcp_servers/test_code.py.)
SERVERS = (*SERVER_NAMES, *OPTIONAL_SERVER_NAMES)
PATH_NAME = re.compile(
    r"^(path|paths|file|files|folder|directory|dir|file_name|filename|attachments|save_attachments_to)$"
    r"|_(path|paths|file|folder|directory|dir)$"
)


@dataclass(frozen=True)
class Pointer:
    """One path argument: ``server.tool`` and where in the arguments (``content[].path``)."""

    server: str
    tool: str
    where: str  # "file_path", "attachments[]", "content[].path", "operations[].image_path"

    @property
    def id(self) -> str:
        return f"{self.server}.{self.tool}:{self.where}"


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> list[dict[str, Any]]:
    """The alternatives a schema stands for ($ref followed, anyOf/oneOf/allOf flattened)."""
    if "$ref" in schema:
        return _resolve(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    found = []
    for key in ("anyOf", "oneOf", "allOf"):
        for option in schema.get(key, []):
            found += _resolve(option, defs)
    return found or [schema]


def _walk(schema: dict[str, Any], defs: dict[str, Any], prefix: str, seen: set[str]) -> set[str]:
    out: set[str] = set()
    for option in _resolve(schema, defs):
        if option.get("type") == "array" or "items" in option:
            items = option.get("items") or {}
            for item in _resolve(items, defs):
                if item.get("type") == "string" and PATH_NAME.search(prefix.rsplit(".", 1)[-1]):
                    out.add(prefix + "[]")
                out |= _walk(item, defs, prefix + "[]", seen)
        for name, sub in (option.get("properties") or {}).items():
            where = f"{prefix}.{name}" if prefix else name
            if where in seen:
                continue
            alternatives = _resolve(sub, defs)
            if PATH_NAME.search(name) and any(alt.get("type") == "string" for alt in alternatives):
                out.add(where)
            out |= _walk(sub, defs, where, seen | {where})
    return out


def path_pointers() -> list[Pointer]:
    """Every path argument of every tool, as the servers list them now."""
    with tempfile.TemporaryDirectory(prefix="atoll-attack-table-") as folder:
        return _pointers(make_world(Path(folder)))


def _pointers(world) -> list[Pointer]:
    pointers: list[Pointer] = []
    for server in SERVERS:
        session = McpSession(create_server(server, fs_root=world.fs_root, apps_data_root=world.apps_root))
        try:
            for tool in session.tools():
                schema = tool.input_schema if hasattr(tool, "input_schema") else tool.inputSchema
                for where in sorted(_walk(schema, schema.get("$defs", {}), "", set())):
                    pointers.append(Pointer(server, tool.name, where))
        finally:
            session.close()
    return pointers


# Arguments a nested pointer needs around it: the hostile value goes where VALUE is.
VALUE = object()
NESTED: dict[str, dict[str, Any]] = {
    "documents.header_footer:content[].path": {
        "action": "set",
        "area": "header",
        "section_index": 0,
        "content": [{"type": "image", "path": VALUE}],
    },
    "documents.create_document:content[].path": {"content": [{"type": "image", "path": VALUE}]},
    "documents.insert_content:content[].path": {"content": [{"type": "image", "path": VALUE}]},
    "spreadsheets.edit_spreadsheet:operations[].image_path": {
        "operations": [{"type": "add_image", "sheet": "Data", "cell": "E1", "image_path": VALUE}]
    },
}


def _fill(template: Any, value: str) -> Any:
    if template is VALUE:
        return value
    if isinstance(template, dict):
        return {key: _fill(item, value) for key, item in template.items()}
    if isinstance(template, list):
        return [_fill(item, value) for item in template]
    return template


def row_for(pointer: Pointer) -> TraversalCase | None:
    """The traversal suite's row for the pointer's tool (its base arguments and world)."""
    top = pointer.where.split(".", 1)[0].removesuffix("[]")
    rows = [case for case in TRAVERSAL_CASES if (case.server, case.tool) == (pointer.server, pointer.tool)]
    attacked = [
        case for case in rows if top in (*case.path_arguments, *case.path_list_arguments, *case.id_arguments)
    ]
    return (attacked or rows or [None])[0]


def place(pointer: Pointer) -> Callable[[str], dict[str, Any]] | None:
    """A function giving the tool's arguments with ``value`` at the pointer, or None when
    the table does not know how to reach it (the coverage test then fails)."""
    row = row_for(pointer)
    if row is None:
        return None
    base = dict(row.base)
    if "." in pointer.where:
        template = NESTED.get(pointer.id)
        if template is None:
            return None
        return lambda value: {**base, **_fill(template, value)}
    if pointer.where.endswith("[]"):
        name = pointer.where[:-2]
        return lambda value: {**base, name: [value]}
    return lambda value: {**base, pointer.where: value}
