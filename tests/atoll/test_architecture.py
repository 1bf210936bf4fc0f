"""The allowed arrows between atoll's parts (docs/architecture.md), checked on every import."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PARTS = (
    "atoll",
    "mcp_servers",
    "environment",
    "agents_runner",
    "grader",
    "orchestrator",
    "atoll_sample",
    "atoll_cli",
)
SERVICES = {"mcp_servers", "environment", "agents_runner", "grader", "orchestrator"}
# part -> the parts it may import (anywhere, lazily included). Nothing imports atoll_cli and only
# atoll_cli imports atoll_sample (tests and benchmarks aside, which are no part).
ALLOWED = {
    "atoll": set(),  # contracts and the shared kit: nothing of ours, not even lazily
    "mcp_servers": {"atoll"},  # servers run standalone
    "environment": {"atoll", "mcp_servers"},
    "agents_runner": {"atoll"},  # never the grader (rubrics) nor the environment (only over MCP)
    "grader": {"atoll"},
    "orchestrator": {"atoll", "mcp_servers", "environment", "agents_runner", "grader"},
    "atoll_sample": {"atoll"},  # the sample benchmark generator writes contracts and files
    "atoll_cli": {"atoll", "atoll_sample", *SERVICES},
}
# part -> the parts it may import only inside a function: `atoll --help` and a bad argument
# load no service (tests/atoll/test_cli_startup.py).
LAZY_ONLY = {"atoll_cli": {"atoll_sample", *SERVICES}}


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
                if imported != part and imported not in ALLOWED[part]:
                    wrong.append(f"{relative} imports {imported}")
                elif module_level and imported in LAZY_ONLY.get(part, ()):
                    wrong.append(f"{relative} imports {imported} at module level")
    assert wrong == []
