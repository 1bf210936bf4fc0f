"""`atoll export …`: a trial's files in other tools' formats (docs/interop.md)."""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(
    help="Write a trial's files in other tools' formats (docs/interop.md).", no_args_is_help=True
)


@app.command()
def atif(
    trajectory: Path = typer.Argument(..., help="Trajectory JSON (atoll, ATIF or Archipelago shape)."),
    output: Path = typer.Option(..., "-o", "--output", help="Where to write the ATIF trajectory."),
) -> None:
    """Write TRAJECTORY as ATIF-v1.7 (Harbor's Agent Trajectory Interchange Format)."""
    from atoll.atif import atif_json
    from grader.inputs import load_trajectory

    loaded = load_trajectory(trajectory)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(atif_json(loaded) + "\n", encoding="utf-8")
    typer.echo(f"{trajectory} -> {output} (ATIF-v1.7, {len(loaded.messages)} messages)", err=True)
