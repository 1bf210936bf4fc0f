"""`atoll env …` commands."""

from __future__ import annotations

import typer

app = typer.Typer(help="env commands", no_args_is_help=True)
