"""`atoll grade …`: grade one trial (files in, grade JSON out), `serve` the grader, `validate` a judge."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import typer

from atoll.errors import AtollError, ErrorCode, first_problem
from atoll.jsonio import model_json
from atoll.logs import JSON_LOGS_HELP
from atoll_cli.commands.completeness import exit_if_incomplete

app = typer.Typer(
    help="Grade a trial (files in, GRADE.json out); `serve` runs the grading service; `validate` measures a judge.",
    no_args_is_help=True,
    invoke_without_command=True,
)


def _judge(
    judge_model: str | None,
    api_base: str | None,
    api_key_env: str | None,
    judge_config: Path | str | None,
    samples: int | None,
    selector: str | None,
    context_budget: int | None,
    thinking: str | None = None,
) -> Any:
    from grader.inputs import load_judge_config
    from grader.judge import JudgeConfig

    config = load_judge_config(judge_config) if judge_config else None
    if config is None and judge_model is None:
        return None
    values = config.model_dump() if config else {}
    if config is not None and config.api_key is not None:
        values["api_key"] = config.api_key
    for key, value in (
        ("model", judge_model),
        ("api_base", api_base),
        ("api_key_env", api_key_env),
        ("samples", samples),
        ("selector", selector),
        ("context_budget_chars", context_budget),
        ("thinking", thinking),
    ):
        if value is not None:
            values[key] = value
    from pydantic import ValidationError

    from atoll.errors import describe_validation
    from atoll.llm.profiles import ProfileError, checked_judge

    try:
        judge = checked_judge(JudgeConfig.model_validate(values))
    except ValidationError as exc:  # one line naming the field
        raise AtollError(ErrorCode.bad_input, f"judge settings: {describe_validation(exc)}") from None
    except ProfileError as exc:  # one line naming the model and the parameter it refuses
        raise AtollError(ErrorCode.bad_input, f"judge settings: {exc.message}") from None
    from atoll.llm.endpoints import trust_endpoints

    trust_endpoints([(judge.model, judge.api_base)])  # the operator's own option or file (docs/security.md)
    return judge


def _load_task(
    benchmark: Path | None,
    task_id: str | None,
    task_file: Path | None,
    rubric: Path | None,
    prompt: str | None,
) -> Any:
    from atoll.benchmark import Task
    from grader.inputs import load_rubric, load_task_file

    if benchmark is not None:
        from atoll.loader import load_task

        if not task_id:
            raise AtollError(ErrorCode.bad_input, "--benchmark needs --task-id")
        task = load_task(benchmark, task_id)
    elif task_file is not None:
        task = load_task_file(task_file, task_id)
    elif rubric is not None:
        task = Task(
            task_id=task_id or "task",
            world_id="unknown",
            prompt=prompt or "(task prompt not given)",
            rubric=load_rubric(rubric),
        )
    else:
        raise AtollError(
            ErrorCode.bad_input, "give the task: --benchmark DIR --task-id ID, --task FILE, or --rubric FILE"
        )
    if rubric is not None and (benchmark is not None or task_file is not None):
        task = task.model_copy(update={"rubric": load_rubric(rubric)})
    return task


@app.callback()
def grade(
    ctx: typer.Context,
    benchmark: Path | None = typer.Option(None, help="Benchmark directory (APEX layout)."),
    task_id: str | None = typer.Option(None, help="Task id in the benchmark or task file."),
    task_file: Path | None = typer.Option(None, "--task", help="A task JSON (APEX task object or array)."),
    rubric: Path | None = typer.Option(
        None,
        help="Rubric JSON: APEX rubric array or Archipelago verifiers.json (replaces the task's rubric).",
    ),
    prompt: str | None = typer.Option(None, help="Task prompt, when only --rubric is given."),
    before: Path | None = typer.Option(
        None, help="Snapshot before the run: tar.gz, world zip, or a stored world's *.manifest.json."
    ),
    after: Path | None = typer.Option(
        None, help="Snapshot after the run: tar.gz, world zip, *.manifest.json or a trial's *.delta.tar.gz."
    ),
    store: str | None = typer.Option(
        None,
        help="Artifact store root that a manifest's or delta's references must stay under "
        "(default: the nearest folder above the file that holds blobs/).",
    ),
    trajectory: Path | None = typer.Option(None, help="Trajectory JSON (atoll or Archipelago shape)."),
    answer: str | None = typer.Option(None, help="Final answer text, when there is no trajectory file."),
    judge_model: str | None = typer.Option(None, help="litellm model of the judge, e.g. openai/gpt-4.1."),
    api_base: str | None = typer.Option(None, help="Base URL of an OpenAI-compatible judge endpoint."),
    api_key_env: str | None = typer.Option(
        None, help="Name of the environment variable holding the judge's key."
    ),
    judge_config: Path | None = typer.Option(
        None, help="JudgeConfig JSON or Archipelago grading_settings.json."
    ),
    samples: int | None = typer.Option(None, help="Judge samples per criterion (majority vote)."),
    selector: str | None = typer.Option(None, help="Evidence selector over the context budget: rank or llm."),
    thinking: str | None = typer.Option(
        None,
        help="How hard the judge thinks: off, low, medium or high, mapped for its provider (docs/models.md).",
    ),
    context_budget: int | None = typer.Option(None, help="Characters of evidence per judge prompt."),
    cache: Path | None = typer.Option(None, help="Verdict cache: a .sqlite file or a directory."),
    output: Path | None = typer.Option(None, help="Where to write GRADE.json."),
    allow_incomplete: bool = typer.Option(
        False,
        "--allow-incomplete",
        help="exit 0 even when criteria are ungradeable (default: exit status 4, named on the last line)",
    ),
) -> None:
    """Grade one trial: diff the snapshots, run checks, ask the judge, write GRADE.json.

    Without --judge-model/--judge-config only programmatic checks run (criteria without one
    are ungradeable). Exit status 4 when a criterion is ungradeable (--allow-incomplete: 0).
    """
    if ctx.invoked_subcommand is not None:
        return
    from rich.console import Console

    from grader import grade_trial
    from grader.cache import VerdictCache
    from grader.inputs import load_trajectory

    if before is None or after is None or output is None:
        raise AtollError(ErrorCode.bad_input, "atoll grade needs --before, --after and --output")
    task = _load_task(benchmark, task_id, task_file, rubric, prompt)
    judge = _judge(
        judge_model, api_base, api_key_env, judge_config, samples, selector, context_budget, thinking
    )
    loaded_trajectory = load_trajectory(trajectory) if trajectory else None
    if loaded_trajectory is None and answer is not None:
        from grader.inputs import trajectory_from_data

        loaded_trajectory = trajectory_from_data(
            {"messages": [{"role": "assistant", "content": answer}]}, "--answer"
        )
    verdict_cache = VerdictCache(cache) if cache else None
    console = Console(stderr=True)
    if judge is None:
        console.print("no judge model given: programmatic checks only")
    with console.status(f"grading {task.task_id}: {len(task.rubric)} criteria"):
        result = asyncio.run(
            grade_trial(task, before, after, loaded_trajectory, judge, verdict_cache, root=store)
        )
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(model_json(result, by_alias=True, indent=2))
    met = sum(v.verdict.value == "met" for v in result.criteria)
    console.print(
        f"{task.task_id}: {'PASS' if result.passed else 'FAIL'}  score {result.score:.2f} "
        f"({met}/{len(result.criteria)} met, {result.ungradeable} ungradeable)  -> {output}",
        soft_wrap=True,
    )
    # Ungradeable as a trial is: nothing decided not met, something left undecided (a failed
    # criterion already decides the outcome, whatever the others are).
    undecided = result.ungradeable > 0 and not any(v.verdict.value == "not_met" for v in result.criteria)
    exit_if_incomplete(f"grade {task.task_id}", 0, int(undecided), allow=allow_incomplete)


@app.command("verifier")
def verifier(
    task: Path = typer.Argument(
        Path("/tests"), help="The v1.1 task folder or its tests/ (grading_config.json; default /tests)."
    ),
    trajectory: Path = typer.Option(
        Path("/logs/agent/trajectory.json"), help="The agent's trajectory (ATIF, atoll or Archipelago shape)."
    ),
    snapshots: Path = typer.Option(
        Path("/logs/world"), help="Folder of initial_snapshot.tar.gz and final_snapshot.tar.gz."
    ),
    output_dir: Path = typer.Option(
        Path("/logs/verifier"),
        help="Where reward.txt, reward.json, grade_details.json (or grading_error.json) go.",
    ),
    judge_model: str | None = typer.Option(
        None, help="litellm model of the judge (default: $GRADING_MODEL, else the task's grading_settings)."
    ),
    api_base: str | None = typer.Option(None, help="Judge base URL (default: $LITELLM_PROXY_API_BASE)."),
    api_key_env: str | None = typer.Option(
        None, help="Variable holding the judge's key (default: LITELLM_PROXY_API_KEY when set)."
    ),
    judge_config: Path | None = typer.Option(None, help="JudgeConfig JSON (replaces the task's settings)."),
    cache: Path | None = typer.Option(None, help="Verdict cache: a .sqlite file or a directory."),
    allow_incomplete: bool = typer.Option(
        False,
        "--allow-incomplete",
        help="write rewards even when criteria are ungradeable (scored 0); default: grading_error.json",
    ),
) -> None:
    """Grade as an APEX-Agents v1.1 Harbor verifier: read the task's tests/, the agent's trajectory
    and the world's snapshots, write reward.txt, reward.json and grade_details.json, or
    grading_error.json and exit 1 (docs/interop.md)."""
    from rich.console import Console

    from grader.cache import VerdictCache
    from grader.harbor_verifier import (
        GradingError,
        VerifierPaths,
        grade_as_verifier,
        judge_from_settings,
        read_config,
        tests_folder,
        write_error,
    )

    console = Console(stderr=True)
    paths = VerifierPaths(tests=task, trajectory=trajectory, snapshots=snapshots, output=output_dir)
    try:
        # Inside the try: a tests folder that is not a task's is a grading error like any other
        # (grading_error.json, exit 1), so Harbor errors the trial instead of finding no reward.
        paths = VerifierPaths(
            tests=tests_folder(task), trajectory=trajectory, snapshots=snapshots, output=output_dir
        )
        tests = paths.tests
        judge = _judge(judge_model, api_base, api_key_env, judge_config, None, None, None)
        if judge is None:
            values = judge_from_settings(read_config(tests))
            if values is not None:
                judge = _judge(
                    values["model"],
                    api_base or values.get("api_base"),
                    api_key_env or values.get("api_key_env"),
                    None,
                    None,
                    None,
                    None,
                )
                if values.get("extra_args"):
                    judge = judge.model_copy(update={"extra_args": values["extra_args"]})
    except (AtollError, GradingError) as exc:
        from grader.harbor_verifier import check_output_folder, clear_outputs

        check_output_folder(paths)
        clear_outputs(paths.output)
        write_error(paths.output, exc)
        console.print(f"grading error: {getattr(exc, 'message', exc)}", soft_wrap=True)
        raise typer.Exit(1) from None
    if judge is None:
        console.print("no judge model given: programmatic checks only")
    try:
        graded_task, grade = asyncio.run(
            grade_as_verifier(
                paths, judge, VerdictCache(cache) if cache else None, allow_incomplete=allow_incomplete
            )
        )
    except GradingError as exc:
        console.print(f"grading error: {exc}  -> {output_dir / 'grading_error.json'}", soft_wrap=True)
        raise typer.Exit(1) from None
    met = sum(v.verdict.value == "met" for v in grade.criteria)
    console.print(
        f"{graded_task.task_id}: reward {grade.score:.4f} ({met}/{len(grade.criteria)} met)  -> {output_dir}",
        soft_wrap=True,
    )


@app.command()
def serve(
    host: str | None = typer.Option(
        None, help="Interface to bind (env ATOLL_GRADER_HOST, default 127.0.0.1)."
    ),
    port: int | None = typer.Option(
        None, help="Port, 0 picks a free one (env ATOLL_GRADER_PORT, default 8082)."
    ),
    judge_model: str | None = typer.Option(None, help="Default judge model (env ATOLL_GRADER_JUDGE_MODEL)."),
    api_base: str | None = typer.Option(None, help="Judge base URL (env ATOLL_GRADER_API_BASE)."),
    api_key_env: str | None = typer.Option(
        None, help="Variable holding the judge's key (env ATOLL_GRADER_API_KEY_ENV)."
    ),
    judge_config: Path | None = typer.Option(
        None, help="JudgeConfig JSON or Archipelago grading_settings.json."
    ),
    cache: Path | None = typer.Option(
        None, help="Verdict cache: .sqlite file or directory (env ATOLL_GRADER_CACHE)."
    ),
    json_logs: bool = typer.Option(False, "--json-logs", help=JSON_LOGS_HELP),
) -> None:
    """Run the grading service (POST /grade, GET /health)."""
    from pydantic import ValidationError

    from atoll.http_guard import guarded_protocol
    from atoll.serving import serve_app
    from grader.cache import VerdictCache
    from grader.service import create_app
    from grader.settings import GraderSettings

    try:
        settings = GraderSettings()
    except ValidationError as exc:
        raise AtollError(ErrorCode.bad_settings, str(first_problem(exc))) from None
    judge = _judge(judge_model, api_base, api_key_env, judge_config, None, None, None)
    if judge is None:
        judge = settings.judge()
        if judge is not None and (api_base or api_key_env):
            judge = judge.model_copy(
                update={k: v for k, v in (("api_base", api_base), ("api_key_env", api_key_env)) if v}
            )
    cache = cache or settings.cache
    app_ = create_app(
        judge,
        VerdictCache(cache) if cache else None,
        allowed_api_bases=settings.allowed_judge_endpoints(),
        token=settings.token_text(),
        max_body_bytes=settings.max_body_bytes,
        max_concurrent=settings.max_concurrent,
    )
    serve_app(
        app_,
        service="grader",
        host=host or settings.host,
        port=port if port is not None else settings.port,
        token=settings.token_text(),
        token_variable="ATOLL_GRADER_TOKEN",
        http=guarded_protocol(10.0),  # a client gets 10 s for its headers (atoll.http_guard)
        log_level="warning",
        json_logs=json_logs or None,
    )


@app.command()
def validate(
    benchmark: Path | None = typer.Option(
        None, help="Benchmark whose gold outputs are graded (all should be met)."
    ),
    labelled: Path | None = typer.Option(
        None, help="JSONL of {output, criterion, label} judged against labels."
    ),
    task_id: list[str] = typer.Option([], help="Only these tasks (repeatable)."),
    judge_model: str | None = typer.Option(None, help="Judge model (litellm name)."),
    api_base: str | None = typer.Option(None, help="Base URL of an OpenAI-compatible judge endpoint."),
    api_key_env: str | None = typer.Option(None, help="Environment variable holding the judge's key."),
    judge_config: Path | None = typer.Option(
        None, help="JudgeConfig JSON or Archipelago grading_settings.json."
    ),
    samples: int | None = typer.Option(None, help="Judge samples per criterion."),
    cache: Path | None = typer.Option(None, help="Verdict cache: a .sqlite file or a directory."),
    output: Path | None = typer.Option(None, help="Write the report JSON here."),
) -> None:
    """Measure a judge: accuracy, precision, recall, F1, FPR and FNR on gold outputs and labels."""
    from rich.console import Console
    from rich.table import Table

    from atoll.judge import PROMPT_VERSION
    from grader.cache import VerdictCache
    from grader.validate import ValidationReport, validate_gold, validate_labelled

    if benchmark is None and labelled is None:
        raise AtollError(ErrorCode.bad_input, "atoll grade validate needs --benchmark and/or --labelled")
    judge = _judge(judge_model, api_base, api_key_env, judge_config, samples, None, None)
    if judge is None:
        raise AtollError(ErrorCode.bad_input, "atoll grade validate needs --judge-model or --judge-config")
    verdict_cache = VerdictCache(cache) if cache else None
    report = ValidationReport(judge_model=judge.model, prompt_version=PROMPT_VERSION)
    console = Console(stderr=True)

    async def run() -> None:
        if benchmark is not None:
            from atoll.loader import load_benchmark

            with console.status("grading gold outputs"):
                await validate_gold(
                    load_benchmark(benchmark), judge, report, task_ids=task_id or None, cache=verdict_cache
                )
        if labelled is not None:
            with console.status("judging the labelled set"):
                await validate_labelled(labelled, judge, report, cache=verdict_cache)

    asyncio.run(run())
    table = Table(title=f"judge {judge.model} ({PROMPT_VERSION})")
    for column in ("set", "n", "ungradeable", "accuracy", "precision", "recall", "F1", "FPR", "FNR"):
        table.add_column(column)

    def cell(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    for name, metrics in (("gold", report.gold), ("labelled", report.labelled)):
        if metrics is not None:
            table.add_row(
                name,
                str(metrics.total),
                str(metrics.ungradeable),
                cell(metrics.accuracy),
                cell(metrics.precision),
                cell(metrics.recall),
                cell(metrics.f1),
                cell(metrics.false_positive_rate),
                cell(metrics.false_negative_rate),
            )
    Console().print(table)
    if report.gold_results:
        _print_gold_results(report)
    if output is not None:
        output.write_text(model_json(report, indent=2))


def _print_gold_results(report: Any) -> None:
    """Per task and per criterion: which gold outputs the judge and checks accept."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="gold outputs per task")
    for column in ("task", "gold", "passed", "score", "criterion", "verdict", "by", "rationale"):
        table.add_column(column)
    for result in report.gold_results:
        gold = ", ".join(
            part
            for part in ("answer" if result.answer else "", f"{result.files} files" if result.files else "")
            if part
        )
        for index, criterion in enumerate(result.criteria):
            first = index == 0
            table.add_row(
                result.task_id if first else "",
                gold if first else "",
                ("yes" if result.passed else "NO") if first else "",
                f"{result.score:.2f}" if first else "",
                criterion.verifier_id,
                criterion.verdict.value,
                criterion.decided_by,
                criterion.rationale[:120],
            )
    Console().print(table)
    failed = [r.task_id for r in report.gold_results if not r.passed]
    Console().print(
        f"gold outputs: {len(report.gold_results) - len(failed)} of {len(report.gold_results)} tasks fully met"
        + (f"; not met: {', '.join(failed)}" if failed else "")
    )
