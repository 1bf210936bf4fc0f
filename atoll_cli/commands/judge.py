"""`atoll judge …`: measure the judge — against human labels (`calibrate`, `agreement`), on the
gold outputs (`gold`), against another judge (`compare`, `self-preference`)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import typer

from atoll.defaults import DEFAULT_STORE
from atoll.errors import AtollError, ErrorCode
from atoll.jsonio import dumps_strict

app = typer.Typer(
    help="Measure the judge: against human labels, on the gold outputs, against another judge.",
    no_args_is_help=True,
)

_STATISTICS = ("accuracy", "precision", "recall", "f1", "cohen_kappa")
_SEED_HELP = "Bootstrap seed (the same rows and seed give the same intervals)."


def _judge_config(
    judge_model: str | None, api_base: str | None, api_key_env: str | None, judge_config: str | None
) -> Any:
    from atoll_cli.commands.grade import _judge

    judge = _judge(judge_model, api_base, api_key_env, judge_config, None, None, None)
    if judge is None:
        raise AtollError(
            ErrorCode.bad_input, "give the judge: --judge-model MODEL or --judge-config JSON|FILE"
        )
    return judge


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _interval(interval: list[float] | None) -> str:
    return "" if interval is None else f"[{interval[0]:.3f}, {interval[1]:.3f}]"


def print_summary(report: dict[str, Any], title: str) -> None:
    """The statistics with their intervals, overall and per domain, as a table on stdout."""
    from rich.console import Console
    from rich.table import Table

    domains = report.get("per_domain", {}) if len(report.get("per_domain", {})) > 1 else {}
    table = Table(title=title)
    for column in ("statistic", "all", "95% CI", *(domain or "(no domain)" for domain in domains)):
        table.add_column(column)
    table.add_row("n", str(report["n"]), "", *(str(stats["n"]) for stats in domains.values()))
    table.add_row(
        "ungradeable",
        str(report["ungradeable"]),
        "",
        *(str(stats["ungradeable"]) for stats in domains.values()),
    )
    for name in _STATISTICS:
        table.add_row(
            name,
            _cell(report[name]),
            _interval(report["ci95"][name]),
            *(_cell(stats[name]) for stats in domains.values()),
        )
    console = Console()
    console.print(table)
    confusion = report["confusion"]
    console.print(
        f"confusion (met positive): tp {confusion['tp']}  fp {confusion['fp']}  tn {confusion['tn']}  "
        f"fn {confusion['fn']}; {report['ungradeable']} ungradeable verdicts left out; "
        f"{len(report.get('disagreements', []))} disagreements",
        soft_wrap=True,
    )
    for name, reason in report.get("undefined", {}).items():
        console.print(f"{name} undefined: {reason}", soft_wrap=True)


def _write(output: Path, report: dict[str, Any]) -> None:
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(dumps_strict(report, indent=2) + "\n", encoding="utf-8")


@app.command()
def calibrate(
    benchmark: Path = typer.Option(..., help="Benchmark directory the labelled tasks are in."),
    labels: Path = typer.Option(
        ...,
        help='JSONL of {"task_id", "verifier_id", "answer", "label": "met"|"not_met"} '
        '(optionally "trajectory", "before"/"after" snapshots).',
    ),
    judge_model: str | None = typer.Option(None, help="litellm model of the judge, e.g. openai/gpt-4.1."),
    api_base: str | None = typer.Option(None, help="Base URL of an OpenAI-compatible judge endpoint."),
    api_key_env: str | None = typer.Option(None, help="Environment variable holding the judge's key."),
    judge_config: str | None = typer.Option(
        None,
        help="JudgeConfig as inline JSON or a file (or Archipelago's grading_settings.json); options "
        "override it.",
    ),
    output: Path = typer.Option(..., help="Where to write OUT.json."),
    store: str = typer.Option(DEFAULT_STORE, help="Trial store that keeps the calibration record."),
    no_record: bool = typer.Option(False, "--no-record", help="Do not keep a record in the store."),
    seed: int = typer.Option(0, help=_SEED_HELP),
    concurrency: int = typer.Option(
        1,
        min=1,
        help="Rows judged at once (1: one after another, in file order, reproducible call for call).",
    ),
    check_gold: bool = typer.Option(
        False,
        "--gold",
        help="Also grade every gold output (as `atoll judge gold`): OUT.json gets 'gold'; exit 1 if one fails.",
    ),
    cache: Path | None = typer.Option(None, help="Verdict cache: a .sqlite file or a directory."),
) -> None:
    """The judge against human labels: each row is graded as in grading (the label never shown),
    then n, accuracy, precision, recall, F1 and Cohen's kappa ("met" positive), each with a 95%
    bootstrap interval, the confusion matrix, per-domain rows and every disagreement go to
    OUT.json, and a record of it to the store (docs/grader.md)."""
    from rich.console import Console
    from rich.progress import Progress

    from atoll.loader import load_benchmark
    from grader.cache import VerdictCache
    from grader.calibrate import calibration_report, judge_rows, read_labels

    judge = _judge_config(judge_model, api_base, api_key_env, judge_config)
    loaded = load_benchmark(benchmark)
    rows = read_labels(labels, loaded)  # every row checked before the first judge call
    domains = {task.task_id: task.domain for task in loaded.tasks}
    console = Console(stderr=True)
    with Progress(console=console, transient=True) as progress:
        bar = progress.add_task(f"judging {len(rows)} labelled rows", total=len(rows))
        verdicts, cost = asyncio.run(
            judge_rows(
                rows,
                {task.task_id: task for task in loaded.tasks},
                judge,
                cache=VerdictCache(cache) if cache else None,
                concurrency=concurrency,
                on_row=lambda: progress.advance(bar),
            )
        )
    report = calibration_report(
        rows,
        verdicts,
        [domains[row.task_id] for row in rows],
        judge=judge,
        labels=labels,
        seed=seed,
        benchmark=str(benchmark),
        judge_cost_usd=round(cost, 6),
    )
    if check_gold:
        report["gold"] = _gold_check(loaded, judge, None, cache)
    _write(output, report)
    print_summary(report, f"judge {report['judge']['describe']} against {len(rows)} labels")
    if not no_record:
        from orchestrator.calibrations import record_calibration
        from orchestrator.store import TrialStore

        trial_store = TrialStore(store)
        try:
            record_calibration(trial_store, report)
        finally:
            trial_store.dispose()
        console.print(f"calibration recorded for judge {report['judge']['id']} in {store}", soft_wrap=True)
    console.print(f"calibration: {output}", soft_wrap=True)
    if check_gold and report["gold"]["failing"]:
        raise typer.Exit(1)


@app.command()
def agreement(
    run: str = typer.Argument(..., help="Run (experiment) name."),
    labels: Path = typer.Option(
        ..., help='JSONL of {"trial_id", "verifier_id", "label": "met"|"not_met"} rows.'
    ),
    store: str = typer.Option(DEFAULT_STORE, help="Store URL."),
    allow_missing: bool = typer.Option(
        False,
        "--allow-missing",
        help="Count rows whose trial or criterion the run lacks under 'missing' instead of refusing.",
    ),
    output: Path | None = typer.Option(None, help="Write the JSON here."),
    seed: int = typer.Option(0, help=_SEED_HELP),
) -> None:
    """The verdicts a run recorded against human labels: the same statistics as `calibrate`."""
    from atoll_cli.commands.known_runs import require_known_run
    from orchestrator.judge_agreement import run_agreement
    from orchestrator.store import TrialStore

    trial_store = TrialStore(store)
    try:
        require_known_run(trial_store, run)
        report = run_agreement(trial_store, run, labels, allow_missing=allow_missing, seed=seed)
    finally:
        trial_store.dispose()
    judges = ", ".join(j["describe"] for j in report["judges"]) or "no recorded judge"
    print_summary(report, f"run {run} ({judges}) against {report['rows'] + len(report['missing'])} labels")
    if report["missing"]:
        typer.echo(f"{len(report['missing'])} label rows missing from the run, left out (see 'missing')")
    if output is not None:
        _write(output, report)
        typer.echo(f"agreement: {output}", err=True)


def _gold_check(benchmark: Any, judge: Any, task_ids: list[str] | None, cache: Path | None) -> dict[str, Any]:
    """Grade every gold output of ``benchmark`` (loaded) through the judge path
    (:func:`grader.validate.validate_gold`), print each failing one with its criterion and
    rationale and the count that pass; returns the JSON document (``passed``, ``total``,
    ``failing`` task ids, the validation report)."""
    from rich.console import Console

    from atoll.judge import PROMPT_VERSION
    from grader.cache import VerdictCache
    from grader.validate import ValidationReport, validate_gold

    report = ValidationReport(judge_model=judge.model, prompt_version=PROMPT_VERSION)
    with Console(stderr=True).status("grading gold outputs"):
        asyncio.run(
            validate_gold(
                benchmark, judge, report, task_ids=task_ids, cache=VerdictCache(cache) if cache else None
            )
        )
    identity = judge.identity()
    failing = [result for result in report.gold_results if not result.passed]
    for result in failing:
        for criterion in result.criteria:
            if criterion.verdict.value != "met":
                typer.echo(
                    f"FAIL {result.task_id} {criterion.verifier_id} ({criterion.verdict.value}, "
                    f"by {criterion.decided_by}): {criterion.criterion}\n    {criterion.rationale}"
                )
    total = len(report.gold_results)
    typer.echo(
        f"gold outputs: {total - len(failing)}/{total} pass with judge {identity.describe()}"
        + (f"; failing: {', '.join(r.task_id for r in failing)}" if failing else "")
    )
    return {
        "judge": {**identity.model_dump(mode="json"), "id": identity.id, "describe": identity.describe()},
        "passed": total - len(failing),
        "total": total,
        "failing": [result.task_id for result in failing],
        **report.model_dump(mode="json"),
    }


@app.command()
def gold(
    benchmark: Path = typer.Option(..., help="Benchmark whose gold outputs are graded."),
    judge_model: str | None = typer.Option(None, help="litellm model of the judge."),
    api_base: str | None = typer.Option(None, help="Base URL of an OpenAI-compatible judge endpoint."),
    api_key_env: str | None = typer.Option(None, help="Environment variable holding the judge's key."),
    judge_config: str | None = typer.Option(
        None, help="JudgeConfig as inline JSON or a file, or grading_settings.json."
    ),
    task_id: list[str] = typer.Option([], help="Only these tasks (repeatable)."),
    output: Path | None = typer.Option(None, help="Write the JSON here."),
    cache: Path | None = typer.Option(None, help="Verdict cache: a .sqlite file or a directory."),
) -> None:
    """Grade every gold output through the judge path: each should pass (the paper's bar is
    480/480). Lists each failing gold output with its criterion and rationale; exit 1 if any fails."""
    from atoll.loader import load_benchmark

    judge = _judge_config(judge_model, api_base, api_key_env, judge_config)
    document = _gold_check(load_benchmark(benchmark), judge, task_id or None, cache)
    if output is not None:
        _write(output, document)
    if document["failing"]:
        raise typer.Exit(1)


@app.command()
def compare(
    first: Path = typer.Argument(..., help="OUT.json of `atoll judge calibrate` with one judge."),
    second: Path = typer.Argument(..., help="OUT.json of the other judge, on the same labels."),
    output: Path | None = typer.Option(None, help="Write the JSON here."),
) -> None:
    """Two judges on the same labelled rows: each one's accuracy, and the McNemar exact test on
    which rows each got right (rows either judge left ungradeable are left out and counted)."""
    from orchestrator.judge_agreement import compare_calibrations, read_calibration

    result = compare_calibrations(read_calibration(first), read_calibration(second))
    for side in ("a", "b"):
        judge = result[side]
        typer.echo(
            f"{side.upper()}: {judge['describe']}: {judge['correct']}/{result['n']} right "
            f"(accuracy {_cell(judge['accuracy'])})"
        )
    typer.echo(
        f"only A right: {result['only_a_right']}, only B right: {result['only_b_right']}; "
        f"McNemar exact p = {result['p_value']:.4g}; {result['left_out']} rows left out (ungradeable)"
    )
    if output is not None:
        _write(output, result)


@app.command("self-preference")
def self_preference(
    run: str = typer.Argument(..., help="Run (experiment) name."),
    judge_model: str | None = typer.Option(None, help="litellm model of the second judge."),
    api_base: str | None = typer.Option(None, help="Base URL of the second judge's endpoint."),
    api_key_env: str | None = typer.Option(None, help="Environment variable holding its key."),
    judge_config: str | None = typer.Option(
        None, help="The second judge's JudgeConfig, inline JSON or a file."
    ),
    store: str = typer.Option(DEFAULT_STORE, help="Store URL."),
    output: Path | None = typer.Option(None, help="Write the JSON here."),
    seed: int = typer.Option(0, help=_SEED_HELP),
) -> None:
    """Per agent of a run: agreement (rate and Cohen's kappa) between the verdicts the run
    recorded and a second judge's on that agent's trials. A judge that is also one of the
    agents and agrees with itself more than with the others shows here. Nothing is stored."""
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    from atoll_cli.commands.known_runs import require_known_run
    from orchestrator.judge_agreement import self_preference as measure
    from orchestrator.store import TrialStore

    second = _judge_config(judge_model, api_base, api_key_env, judge_config)
    trial_store = TrialStore(store)
    try:
        require_known_run(trial_store, run)
        with Progress(console=Console(stderr=True), transient=True) as progress:
            bar = progress.add_task("grading the run's trials with the second judge", total=None)
            report = asyncio.run(
                measure(trial_store, run, second, seed=seed, on_trial=lambda: progress.advance(bar))
            )
    finally:
        trial_store.dispose()
    recorded = ", ".join(j["describe"] for j in report["run_judges"]) or "no recorded judge"
    table = Table(title=f"run {run}: recorded ({recorded}) vs {report['second_judge']['describe']}")
    for column in ("agent", "model", "criteria", "agreement", "kappa", "kappa 95% CI"):
        table.add_column(column)
    for agent, stats in report["agents"].items():
        table.add_row(
            agent,
            stats["model"],
            str(stats["n"]),
            _cell(stats["agreement_rate"]),
            _cell(stats["cohen_kappa"]),
            _interval(stats["ci95"]["cohen_kappa"]),
        )
    Console().print(table)
    if output is not None:
        _write(output, report)
