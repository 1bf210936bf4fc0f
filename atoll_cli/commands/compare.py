"""`atoll compare`: two runs side by side in the terminal (or as JSON), as the viewer's compare
page shows them: per-task changes and McNemar's paired test per agent."""

from __future__ import annotations

import json

import typer

from atoll_cli.commands.lifecycle import _opened, _store_option


def register(app: typer.Typer) -> None:
    """Add `atoll compare` to the root app."""
    app.command(name="compare")(compare)


def compare(
    run_a: str = typer.Argument(..., help="the run compared against (a)"),
    run_b: str = typer.Argument(..., help="the run compared (b)"),
    store: str = _store_option(),
    json_output: bool = typer.Option(
        False, "--json", help="the comparison as JSON (as GET /api/compare answers)"
    ),
) -> None:
    """Compare run B with run A: metric deltas, McNemar's paired test and the tasks that changed."""
    from atoll_cli.commands.known_runs import require_known_run
    from orchestrator.viewer.compare import compare_lines, compare_runs

    with _opened(store, run_a) as trial_store:
        require_known_run(trial_store, run_b)
        result = compare_runs(trial_store, run_a, run_b)
    if json_output:
        typer.echo(json.dumps(result, indent=2))
        return
    typer.echo("\n".join(compare_lines(result)))
