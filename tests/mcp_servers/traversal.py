"""Traversal harness: feed every path-like argument of every tool hostile values.

A :class:`TraversalCase` names one tool, which of its arguments are virtual paths
(``path_arguments``, resolved under the filesystem root; ``path_list_arguments`` for lists
of paths) or ids that become path components (``id_arguments``), valid values for its other arguments (``base``) and an
optional ``setup`` that seeds the world. Rows live in ``traversal_table.py``; adding a
server's tools there is all it takes to put them under test (``test_traversal.py`` runs
every row in both modes).

The world has canaries the server must never reveal or change:
- ``<tmp>/outside/canary.txt`` and ``<tmp>/outside/`` (a sibling of the world),
- ``<apps_root>/canary_secret.txt`` (app data is not part of the agent's filesystem),
and links inside the filesystem root pointing at them (``/link_out`` -> outside folder,
``/link_file`` -> canary file, ``/link_apps`` -> app-data root).
An escape = a canary's secret in any result, or any change outside the two roots
(a file created, modified or deleted), or any change to the app-data canary.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.mcp_servers.helpers import McpSession, World, make_world, text_of

OUTSIDE_SECRET = "CANARY-OUTSIDE-7f3a9c"
APPS_SECRET = "CANARY-APPSDATA-51b2e0"


@dataclass
class TraversalCase:
    server: str
    tool: str
    path_arguments: tuple[str, ...] = ()
    id_arguments: tuple[str, ...] = ()
    #: arguments taking a list of paths (each hostile value is sent as a one-element list)
    path_list_arguments: tuple[str, ...] = ()
    base: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    setup: Callable[[World], None] | None = None
    #: consolidated action name (defaults to looking the tool up in the server definition)
    action: str | None = None

    @property
    def id(self) -> str:
        return f"{self.server}.{self.tool}"


@dataclass
class TraversalWorld:
    world: World
    outside: Path
    canary: Path
    apps_canary: Path

    def fingerprint(self) -> dict[str, str]:
        """Everything outside the two roots (plus the app-data canary), with content hashes."""
        seen: dict[str, str] = {}
        tmp = self.world.base.parent
        roots = {str(self.world.fs_root), str(self.world.apps_root)}
        for dirpath, dirnames, filenames in os.walk(tmp, followlinks=False):
            dirnames[:] = [d for d in dirnames if os.path.join(dirpath, d) not in roots]
            for name in dirnames + filenames:
                path = os.path.join(dirpath, name)
                seen[path] = _digest(path)
        seen[str(self.apps_canary)] = _digest(str(self.apps_canary))
        return seen


def _digest(path: str) -> str:
    if os.path.islink(path):
        return "link:" + os.readlink(path)
    if os.path.isdir(path):
        return "dir"
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def make_traversal_world(tmp_path: Path) -> TraversalWorld:
    world = make_world(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    canary = outside / "canary.txt"
    canary.write_text(OUTSIDE_SECRET + "\n")
    (outside / "canary.xlsx").write_text(OUTSIDE_SECRET)
    apps_canary = world.apps_root / "canary_secret.txt"
    apps_canary.write_text(APPS_SECRET + "\n")
    world.file("ok.txt", "inside\n")
    os.symlink(outside, world.fs_root / "link_out")
    os.symlink(canary, world.fs_root / "link_file")
    os.symlink(world.apps_root, world.fs_root / "link_apps")
    return TraversalWorld(world=world, outside=outside, canary=canary, apps_canary=apps_canary)


def hostile_paths(tw: TraversalWorld) -> list[str]:
    """Path values that must never reach outside the filesystem root."""
    real_canary = str(tw.canary)
    return [
        "../outside/canary.txt",
        "../../outside/canary.txt",
        "/../outside/canary.txt",
        "/a/../../outside/canary.txt",
        "..",
        "../",
        "../.apps_data/canary_secret.txt",
        "/filesystem/../../outside/canary.txt",
        real_canary,
        str(tw.outside),
        "/link_out/canary.txt",
        "/link_out",
        "/link_out/new_file.txt",
        "/link_out/sub/new_file.xlsx",
        "/link_file",
        "/link_apps/canary_secret.txt",
        "/link_apps",
        "ok.txt\x00../../outside/canary.txt",
        "\x00",
        "/" + "a" * 300,
        "/" + "/".join(["d"] * 3000),
        "x" * 5000,
        "~/canary.txt",
        "..\\..\\outside\\canary.txt",
        "%2e%2e/%2e%2e/outside/canary.txt",
        "file:///" + real_canary.lstrip("/"),
    ]


def hostile_ids(tw: TraversalWorld) -> list[str]:
    """Id values that must never become a path outside the app's folder."""
    return [
        "..",
        ".",
        "../outside",
        "../../outside/canary.txt",
        "../../../outside",
        "a/../../..",
        "/",
        str(tw.outside),
        "DM ../../..",
        "Space /../../canary_secret.txt",
        "x\x00y",
        "\x00",
        "z" * 5000,
        "..\\..\\outside",
        "",
        " ",
    ]


def run_case(
    session: McpSession,
    tw: TraversalWorld,
    case: TraversalCase,
    *,
    tool_name: str,
    wrap: Callable[[dict], dict],
) -> list[str]:
    """Call the tool with every hostile value in every path-like argument; return escapes found."""
    escapes: list[str] = []
    before = tw.fingerprint()
    plans: list[tuple[str, list[str]]] = [(arg, hostile_paths(tw)) for arg in case.path_arguments]
    plans += [(arg, hostile_ids(tw)) for arg in case.id_arguments]
    plans += [(arg, hostile_paths(tw)) for arg in case.path_list_arguments]
    for argument, values in plans:
        for value in values:
            arguments = dict(case.base)
            arguments[argument] = [value] if argument in case.path_list_arguments else value
            result = session.call(tool_name, wrap(arguments))
            blob = text_of(result) + repr(result.structured_content)
            for block in result.content:
                data = getattr(block, "data", None)
                if isinstance(data, str):
                    blob += data
            if OUTSIDE_SECRET in blob or APPS_SECRET in blob:
                escapes.append(f"{case.id} {argument}={value[:60]!r}: secret revealed")
            after = tw.fingerprint()
            if after != before:
                changed = sorted(set(after.items()) ^ set(before.items()))
                escapes.append(
                    f"{case.id} {argument}={value[:60]!r}: changed outside the roots: {changed[:3]}"
                )
                before = after
    return escapes
