"""Rows for the traversal suite: every tool with a path-like argument, per server.

Add your server's tools here (see traversal.py for what the fields mean). ``base`` holds
valid values for the tool's other required arguments; ``setup`` seeds the world so those
values exist.
"""

from __future__ import annotations

from tests.mcp_servers.traversal import TraversalCase

TRAVERSAL_CASES: list[TraversalCase] = []
