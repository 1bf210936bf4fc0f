"""`atoll grade …` commands."""

from __future__ import annotations

import typer

app = typer.Typer(help="grade commands", no_args_is_help=True)
