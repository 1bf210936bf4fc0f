"""`atoll demo`: the main job on embedded defaults."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add `atoll demo` to the root app."""
