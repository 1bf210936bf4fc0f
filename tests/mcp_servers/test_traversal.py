"""Every path-like argument of every tool gets hostile values: 0 escapes, both modes."""

from __future__ import annotations

import pytest

from mcp_servers import create_server, get_definition
from tests.mcp_servers.helpers import McpSession
from tests.mcp_servers.traversal import TraversalCase, make_traversal_world, run_case
from tests.mcp_servers.traversal_table import TRAVERSAL_CASES


@pytest.mark.parametrize("mode", ["individual", "consolidated"])
@pytest.mark.parametrize("case", TRAVERSAL_CASES, ids=lambda case: case.id)
def test_no_escape(tmp_path, case: TraversalCase, mode: str) -> None:
    tw = make_traversal_world(tmp_path)
    if case.setup is not None:
        case.setup(tw.world)
    definition = get_definition(case.server)
    server = create_server(
        case.server,
        fs_root=tw.world.fs_root,
        apps_data_root=tw.world.apps_root,
        mode=mode,
        options=case.options,
    )
    if mode == "individual":
        tool_name = case.tool

        def wrap(arguments: dict) -> dict:
            return arguments
    else:
        tool_def = definition.find(case.action or case.tool)
        assert tool_def is not None, f"{case.id}: no such tool in {case.server}"
        tool_name = definition.consolidated_name

        def wrap(arguments: dict) -> dict:
            return {"action": tool_def.action, **arguments}

    session = McpSession(server)
    try:
        escapes = run_case(session, tw, case, tool_name=tool_name, wrap=wrap)
    finally:
        session.close()
    assert escapes == []
