"""`atoll bench …`: load, validate and summarise benchmarks; generate the sample one."""

from __future__ import annotations

import typer

app = typer.Typer(help="Benchmark directories (APEX-Agents layout).", no_args_is_help=True)
