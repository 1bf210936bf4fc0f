"""`atoll bench …`: load, validate and summarise benchmarks; generate the sample one."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from atoll.jsonio import dumps_strict

app = typer.Typer(help="Benchmark directories (APEX-Agents v1 or v1.1 layout).", no_args_is_help=True)


@app.command("load")
def load(
    path: str = typer.Argument(
        ..., help="benchmark directory (v1 or v1.1 layout, detected), or hf://ORG/DATASET"
    ),
    as_json: bool = typer.Option(False, "--json", help="print the summary as JSON"),
    verify: bool = typer.Option(True, help="check every archive member's CRC"),
) -> None:
    """Validate a benchmark directory and print a summary."""
    from atoll.loader import load_benchmark, summarize

    summary = summarize(load_benchmark(path, verify_archives=verify))
    if as_json:
        typer.echo(dumps_strict(summary, indent=2))
        return
    _print_summary(summary)


@app.command("sample")
def sample(
    out: Path = typer.Argument(..., help="directory to write the sample benchmark into"),
    seed: int = typer.Option(0, help="generator seed (same seed, same bytes)"),
) -> None:
    """Generate the sample benchmark (APEX layout) into OUT."""
    from atoll_sample import generate_sample_benchmark

    root = generate_sample_benchmark(out, seed=seed)
    typer.echo(f"sample benchmark written to {root}")


def _print_summary(summary: dict) -> None:
    console = Console()
    criteria = summary["criteria_per_task"]
    console.print(
        f"[bold]{summary['root']}[/bold]: {summary['tasks']} tasks, {len(summary['worlds'])} worlds"
    )
    console.print(
        f"criteria per task: mean {criteria['mean']}, min {criteria['min']}, max {criteria['max']} "
        f"({criteria['total']} in all, {summary['criteria_with_check']} with a programmatic check)"
    )
    console.print(
        f"layout {summary['layout']}; gold outputs: {summary['tasks_with_gold_output']} "
        f"({summary['gold_text_answers']} text answers, {summary['gold_files']} files), reference solutions: "
        f"{summary['tasks_with_reference_solution']}, tasks with input files: {summary['tasks_with_input_files']}"
    )
    for title, counts in (
        ("domain", summary["tasks_per_domain"]),
        ("expected output", summary["expected_outputs"]),
    ):
        table = Table(title=f"tasks per {title}")
        table.add_column(title)
        table.add_column("tasks", justify="right")
        for name, count in counts.items():
            table.add_row(name, str(count))
        console.print(table)
    targets = Table(title="criteria per grading target")
    targets.add_column("target")
    targets.add_column("criteria", justify="right")
    for name, count in summary["grading_targets"].items():
        targets.add_row(name, str(count))
    console.print(targets)
    table = Table(title="worlds")
    for column in ("world_id", "name", "tasks", "files", "app-data files"):
        table.add_column(
            column, justify="right" if column in {"tasks", "files", "app-data files"} else "left"
        )
    for world in summary["worlds"]:
        table.add_row(
            world["world_id"],
            world["world_name"],
            str(world["tasks"]),
            str(world["files"]),
            str(world["app_data_files"]),
        )
    console.print(table)
    for entry in summary["unavailable_apps"]:
        console.print(
            f"[yellow]unavailable app[/yellow] {entry['app']!r} in world {entry['world_id']}: {entry['reason']}; "
            f"affects {len(entry['tasks'])} task(s): {', '.join(entry['tasks'])}",
            soft_wrap=True,
        )
    from rich.markup import escape

    for warning in summary["warnings"]:
        console.print(f"[yellow]warning[/yellow] {escape(warning)}", soft_wrap=True)
