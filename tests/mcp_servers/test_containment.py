"""Every path argument that ``tools/list`` shows, attacked through chains of links.

The pointers come from the servers' own schemas (:mod:`tests.mcp_servers.attack_table`),
so a new path argument is attacked the day it appears, or the coverage test fails.
Each one gets link chains that look inside on paper and lead out when followed for real
(``a/up -> ..``, ``e1 -> a/up/..``, ``e2 -> e1/..``, …) plus the classic escapes; an escape
is a canary's secret in any result or any change outside the two roots.
"""

from __future__ import annotations

import os

import pytest

from mcp_servers import create_server
from tests.mcp_servers.attack_table import Pointer, path_pointers, place, row_for
from tests.mcp_servers.helpers import McpSession, text_of
from tests.mcp_servers.traversal import APPS_SECRET, OUTSIDE_SECRET, make_traversal_world

POINTERS = path_pointers()


def test_every_path_argument_in_tools_list_is_attacked():
    assert len(POINTERS) >= 70  # the walk found the servers' path arguments at all
    unreachable = [pointer.id for pointer in POINTERS if place(pointer) is None]
    assert unreachable == [], (
        "path arguments with no way to attack them: add a traversal_table row for the tool "
        f"or a NESTED template in attack_table.py: {unreachable}"
    )


def _chain_links(fs_root) -> None:
    """Links that each look inside the root on paper; followed for real they climb out."""
    (fs_root / "a").mkdir(exist_ok=True)
    os.symlink("..", fs_root / "a" / "up")  # the root itself
    os.symlink("a/up/..", fs_root / "e1")  # the world folder (holds .apps_data)
    os.symlink("e1/..", fs_root / "e2")  # the folder holding the world and outside/
    os.symlink("e2/outside", fs_root / "e3")
    os.symlink("a/up/e3", fs_root / "e4")


def _values(tw) -> list[str]:
    return [
        "/e1/.apps_data/canary_secret.txt",
        "/e1/.apps_data",
        "/e2/outside/canary.txt",
        "/e3/canary.txt",
        "/e3",
        "/e3/new_file.txt",
        "/e3/sub/new.xlsx",
        "/e4/canary.xlsx",
        "/a/up/e3/canary.txt",
        "../outside/canary.txt",
        "/link_out/canary.txt",
        "/link_file",
        "/link_apps/canary_secret.txt",
        str(tw.canary),
    ]


@pytest.mark.parametrize("pointer", POINTERS, ids=lambda pointer: pointer.id)
def test_no_escape_through_link_chains(tmp_path, pointer: Pointer) -> None:
    arguments_for = place(pointer)
    if arguments_for is None:
        pytest.fail(f"{pointer.id}: not in the attack table (see the coverage test)")
    row = row_for(pointer)
    tw = make_traversal_world(tmp_path)
    _chain_links(tw.world.fs_root)
    if row.setup is not None:
        row.setup(tw.world)
    server = create_server(
        pointer.server, fs_root=tw.world.fs_root, apps_data_root=tw.world.apps_root, options=row.options
    )
    session = McpSession(server)
    escapes = []
    try:
        before = tw.fingerprint()
        for value in _values(tw):
            result = session.call(pointer.tool, arguments_for(value))
            blob = text_of(result) + repr(result.structured_content)
            blob += "".join(getattr(block, "data", "") or "" for block in result.content)
            if OUTSIDE_SECRET in blob or APPS_SECRET in blob:
                escapes.append(f"{value!r}: secret revealed")
            after = tw.fingerprint()
            if after != before:
                escapes.append(
                    f"{value!r}: changed outside the roots: {sorted(set(after.items()) ^ set(before.items()))[:3]}"
                )
                before = after
    finally:
        session.close()
    assert escapes == []
