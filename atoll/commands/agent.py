"""`atoll agent …` commands."""

from __future__ import annotations

import typer

app = typer.Typer(help="agent commands", no_args_is_help=True)
