"""The allowed arrows between atoll's parts (docs/architecture.md), checked on every import."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PARTS = ("atoll", "mcp_servers", "environment", "agents_runner", "grader", "orchestrator")
# part -> the parts it may import (anywhere, lazily included)
ALLOWED = {
    "atoll": set(),  # contracts; only its command layer loads services, and only lazily
    "mcp_servers": {"atoll"},  # servers run standalone
    "environment": {"atoll", "mcp_servers"},
    "agents_runner": {"atoll"},  # never the grader (rubrics) nor the environment (only over MCP)
    "grader": {"atoll"},
    "orchestrator": {"atoll", "mcp_servers", "environment", "agents_runner", "grader"},
}
COMMAND_LAYER = ("atoll/cli.py", "atoll/commands/")


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(imported part, at module level) for every import of another part in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    top_level = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [
            (name.split(".")[0], id(node) in top_level) for name in names if name.split(".")[0] in PARTS
        ]
    return found


def test_every_import_follows_an_allowed_arrow():
    wrong = []
    for part in PARTS:
        for path in sorted((ROOT / part).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            for imported, module_level in _imports(path):
                if imported == part or imported in ALLOWED[part]:
                    continue
                if relative.startswith(COMMAND_LAYER) and not module_level:
                    continue
                wrong.append(f"{relative} imports {imported}")
    assert wrong == []
