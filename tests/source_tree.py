"""Our own packages, for the tests that read the source tree (architecture, error codes, one
home per mechanism): one list, the one pyproject.toml packages (checked in test_architecture)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (
    "atoll",
    "mcp_servers",
    "environment",
    "agents_runner",
    "grader",
    "orchestrator",
    "atoll_sample",
    "atoll_cli",
)
