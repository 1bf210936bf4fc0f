"""`atoll run`, `atoll report`, `atoll regrade`, `atoll worker` (the orchestrator)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the orchestrator's commands to the root app."""
