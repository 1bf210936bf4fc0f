"""`atoll demo`: the main job on embedded defaults."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import typer

from atoll.jsonio import model_json


def register(app: typer.Typer) -> None:
    """Add `atoll demo` to the root app."""
    app.command(name="demo")(demo)


def demo(
    output: Path = typer.Option(Path("atoll-out/demo"), help="where the benchmark, store and reports go"),
    runs: int = typer.Option(1, min=1, help="runs per task and agent"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress display"),
    no_preflight: bool = typer.Option(
        False, "--no-preflight", help="skip the one-token check of the model endpoints"
    ),
) -> None:
    """Generate the sample benchmark, run the oracle (and a configured model), grade, report."""
    from atoll_cli.commands.run import preflight_models, print_leaderboard
    from atoll_sample import generate_sample_benchmark
    from orchestrator.demo import configured_model, demo_experiment, judge_every_trial
    from orchestrator.report import write_report
    from orchestrator.runner import run_experiment
    from orchestrator.store import TrialStore

    spec = demo_experiment(output, runs=runs)
    generate_sample_benchmark(Path(spec.benchmark))
    model = configured_model()
    typer.echo(f"sample benchmark: {spec.benchmark}")
    typer.echo(
        f"agents: {', '.join(a.name for a in spec.agents)}"
        + ("" if model else " (set ATOLL_MODEL, optionally ATOLL_API_BASE, to add a ReAct agent)")
    )
    typer.echo(
        f"grading: programmatic checks{' + LLM judge ' + spec.judge.model if spec.judge.model else ' only'}"
    )
    if not no_preflight:
        preflight_models([spec], quiet=quiet)
    # The demo's run is the demo: a changed model or sample replaces the earlier trials
    # (archived under the run) instead of refusing.
    outcome = asyncio.run(run_experiment(spec, quiet=quiet, replace=True))
    if spec.judge.model:
        # Trials kept from an earlier demo graded by another judge (or by the checks alone) are
        # judged too, so the report counts every trial under this judge.
        regraded = asyncio.run(judge_every_trial(spec))
        if regraded:
            typer.echo(f"judged {regraded} trials kept from an earlier demo with {spec.judge.model}")
            store = TrialStore(spec.store)
            try:
                write_report(store, spec.name, Path(spec.output_dir) / spec.name, seed=spec.seed)
            finally:
                store.dispose()
    print_leaderboard(outcome.report_paths["md"])
    report = json.loads(outcome.report_paths["json"].read_text(encoding="utf-8"))
    ungradeable = sum(agent["outcomes"].get("ungradeable", 0) for agent in report["agents"].values())
    if ungradeable and not spec.judge.model:
        typer.echo(
            f"{ungradeable} trials are ungradeable, not failed: their rubrics include criteria only an LLM judge "
            "can decide. 'Checks pass' scores the programmatic checks alone; set ATOLL_JUDGE_MODEL (or "
            "ATOLL_MODEL) to grade every criterion."
        )
    typer.echo(f"report: {outcome.report_paths['html']} (also report.md, report.json)")
    if spec.judge.model:
        _validate_gold(spec, quiet=quiet)


def _validate_gold(spec, *, quiet: bool) -> None:
    """Grade every gold output of the sample benchmark with the configured judge: the judge
    should accept them all, and the report says where it does not."""
    from atoll.judge import PROMPT_VERSION
    from atoll.loader import load_benchmark
    from atoll_cli.commands.grade import _print_gold_results
    from grader import JudgeConfig
    from grader.validate import ValidationReport, validate_gold

    judge = JudgeConfig(
        model=spec.judge.model,
        api_base=spec.judge.api_base,
        samples=spec.judge.samples,
        extra_args=spec.judge.extra_args,
        thinking=spec.judge.thinking,
    )
    report = ValidationReport(judge_model=judge.model, prompt_version=PROMPT_VERSION)
    typer.echo(f"validating the judge on the gold outputs ({judge.model})")
    asyncio.run(validate_gold(load_benchmark(spec.benchmark), judge, report))
    _print_gold_results(report)
    path = Path(spec.output_dir) / "gold-validation.json"
    path.write_text(model_json(report, indent=2), encoding="utf-8")
    typer.echo(f"gold validation: {path}")
