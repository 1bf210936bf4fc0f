"""`atoll run`, `atoll report`, `atoll worker` (the orchestrator)."""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from atoll.defaults import DEFAULT_STORE, OUTPUT_DIR
from atoll.errors import ErrorCode
from atoll.logs import JSON_LOGS_HELP
from atoll_cli.commands.completeness import ALLOW_INCOMPLETE_HELP, exit_if_run_incomplete

if TYPE_CHECKING:
    from atoll.experiment import ExperimentSpec
    from orchestrator.runner import RunOutcome

NO_PREFLIGHT_HELP = "skip the one-token check of every model endpoint (agents and judge) before scheduling"
VIEWER_URL_HELP = (
    "link each trial in the report to its page in `atoll view` served at this URL (e.g. "
    "http://127.0.0.1:8090); without it trials link to their artifact folders"
)


def register(app: typer.Typer) -> None:
    """Add the orchestrator's commands to the root app."""
    app.command(name="run")(run)
    app.command(name="report")(report)
    app.command(name="worker")(worker)
    app.command(name="regrade")(regrade)


def run(
    experiment: Path = typer.Argument(..., help="experiment YAML file"),
    executor: str = typer.Option(None, help="local | kubernetes | instant (dry run); default: the file's"),
    store: str = typer.Option(None, help="override the store URL (sqlite path or postgresql://…)"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress display"),
    json_logs: bool = typer.Option(
        False, "--json-logs", help="one JSON line per trial event on stderr, and logs as JSON lines"
    ),
    enqueue_only: bool = typer.Option(
        False, "--enqueue-only", help="plan and enqueue, then exit; `atoll worker` processes execute"
    ),
    new_run: str = typer.Option(
        None, "--new-run", metavar="NAME", help="run the experiment under this run name instead of its own"
    ),
    replace: bool = typer.Option(
        False,
        "--replace",
        help="the run exists with another configuration: archive its trials that no longer fit (kept, not "
        "deleted) and run this one under the same name",
    ),
    no_preflight: bool = typer.Option(False, "--no-preflight", help=NO_PREFLIGHT_HELP),
    viewer_url: str = typer.Option(None, "--viewer-url", metavar="URL", help=VIEWER_URL_HELP),
    allow_incomplete: bool = typer.Option(False, "--allow-incomplete", help=ALLOW_INCOMPLETE_HELP),
) -> None:
    """Run an experiment, or resume it: finished trials are never re-run. A run whose
    configuration changed is refused unless --new-run NAME or --replace is given.
    Ctrl-C stops scheduling, waits a few seconds for running trials (again: abandons them)
    and gives their leases back; running the same command resumes. Exit status 4 when
    trials ended in an infra error or ungradeable, or were cancelled with the run (`atoll
    cancel`, POST /runs/RUN/cancel) (--allow-incomplete: 0)."""
    from atoll.errors import AtollError
    from atoll.experiment import experiment_endpoints
    from atoll.experiment_file import load_experiment
    from atoll.llm.endpoints import trust_endpoints
    from atoll.logs import configure_logging
    from atoll.runtime import freeze_once_loaded, resume_full_collections
    from orchestrator.runner import run_experiment

    configure_logging("WARNING", json_logs=json_logs or None)
    spec = load_experiment(experiment)
    # The operator's own file: this process may send its provider keys to the endpoints the
    # file names (a worker leasing work from a shared store trusts only its settings).
    trust_endpoints(experiment_endpoints(spec))
    if new_run is not None and replace:
        raise AtollError(ErrorCode.invalid_option, "--new-run and --replace exclude each other: pick one")
    if new_run is not None and not new_run.strip():
        raise AtollError(ErrorCode.invalid_option, "--new-run needs a run name")
    updates = {
        key: value for key, value in {"executor": executor, "store": store, "name": new_run}.items() if value
    }
    if updates:
        spec = spec.model_copy(update=updates)
    viewer = _viewer_url(viewer_url)

    async def check_endpoints(planned: ExperimentSpec) -> None:
        await check_models([planned], quiet=quiet)

    # Trials in this process (the local executor) load the environments, app servers, agents
    # runner and grader while the run works: their heap is frozen once the first trial is over.
    freeze_once_loaded()
    # An enqueue-only run calls no model (its workers check); the run skips the check when the
    # store already holds every planned trial's final result.
    try:
        outcome = asyncio.run(
            run_experiment(
                spec,
                quiet=quiet,
                json_events=json_logs,
                enqueue_only=enqueue_only,
                replace=replace,
                interruptible=True,
                viewer_url=viewer,
                preflight=None if no_preflight else check_endpoints,
            )
        )
    finally:
        resume_full_collections()  # no trial ran here (e.g. --enqueue-only, or all done)
    if outcome.archived:
        typer.echo(
            f"{outcome.experiment}: archived {outcome.archived} trials of the earlier configuration "
            "(kept under the run; the report lists them)"
        )
    if enqueue_only:
        typer.echo(
            f"{outcome.experiment}: {outcome.planned} trials planned, {outcome.newly_enqueued} new, "
            f"{outcome.counts['done']} already done; store {spec.store}"
        )
        return
    if outcome.summary.stopped_reason == "interrupted":
        resume = " ".join(
            [
                "atoll run",
                shlex.quote(str(experiment)),
                *(
                    f"{flag} {shlex.quote(value)}"
                    for flag, value in (("--new-run", new_run), ("--store", store), ("--executor", executor))
                    if value
                ),
            ]
        )
        typer.echo(
            f"interrupted: {outcome.counts['done']}/{outcome.counts['total']} done; `{resume}` resumes",
            err=True,
        )
        raise typer.Exit(130)
    print_leaderboard(outcome.report_paths["md"])
    typer.echo(f"{outcome.experiment}: {resume_summary(outcome)}; report: {outcome.report_paths['html']}")
    if outcome.summary.stopped_reason == "cost_ceiling":
        typer.echo("stopped scheduling: the experiment's cost ceiling would have been passed", err=True)
    exit_if_run_incomplete(outcome.report_paths["json"], f"run {outcome.experiment}", allow=allow_incomplete)


def _viewer_url(url: str | None) -> str | None:
    """``--viewer-url`` checked: an http(s) URL, or AtollError(bad_option) naming the problem."""
    if url is None:
        return None
    from urllib.parse import urlsplit

    from atoll.errors import AtollError

    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise AtollError(
            ErrorCode.invalid_option,
            f"--viewer-url {url!r}: give the http(s) URL `atoll view` serves, e.g. http://127.0.0.1:8090",
        )
    return url.strip().rstrip("/")


def resume_summary(outcome: RunOutcome) -> str:
    """'64 of 64 trials done: 57 run now (2 left unfinished by an earlier run), 7 already done'."""
    done, ran = outcome.counts["done"], outcome.summary.completed
    taken_up = f" ({outcome.reclaimed} left unfinished by an earlier run)" if outcome.reclaimed else ""
    return (
        f"{done} of {outcome.counts['total']} trials done: {ran} run now{taken_up}, "
        f"{max(done - ran, 0)} already done"
    )


def report(
    run_name: str = typer.Argument(..., help="experiment (run) name"),
    store: str = typer.Option(DEFAULT_STORE, help="store URL"),
    output: Path = typer.Option(None, help="output directory (default atoll-out/RUN)"),
    seed: int = typer.Option(0, help="bootstrap seed"),
    viewer_url: str = typer.Option(None, "--viewer-url", metavar="URL", help=VIEWER_URL_HELP),
) -> None:
    """Compute metrics of a run and write report.json, report.md and report.html."""
    from atoll_cli.commands.known_runs import require_known_run
    from orchestrator.report import write_report
    from orchestrator.store import TrialStore

    viewer = _viewer_url(viewer_url)  # a bad URL is refused before anything is read
    trial_store = TrialStore(store)
    try:
        require_known_run(trial_store, run_name)
        paths = write_report(
            trial_store, run_name, output or Path(OUTPUT_DIR) / run_name, seed=seed, viewer_url=viewer
        )
    finally:
        trial_store.dispose()
    print_leaderboard(paths["md"])
    typer.echo(f"report: {paths['md']}, {paths['json']}, {paths['html']}")


def worker(
    store: str = typer.Option(
        ..., envvar="ATOLL_STORE", help="shared store URL, e.g. postgresql://user@host/db"
    ),
    experiment: str = typer.Option(None, help="only this experiment"),
    concurrency: int = typer.Option(2, min=1, help="trials at once"),
    executor: str = typer.Option(None, help="override the experiments' executor"),
    forever: bool = typer.Option(
        False, help="keep polling for new trials instead of exiting when nothing is pending or leased"
    ),
    spool_dir: Path = typer.Option(
        None,
        envvar="ATOLL_SPOOL_DIR",
        help="where results wait while the database is unreachable (default: ~/.cache/atoll/spool, atoll.cache_paths)",
    ),
    healthy_interval: float = typer.Option(
        300.0,
        min=0,
        help="with --forever: seconds without an infra failure after which a run stopped for its "
        "error rate is tried again",
    ),
    no_preflight: bool = typer.Option(False, "--no-preflight", help=NO_PREFLIGHT_HELP),
    json_logs: bool = typer.Option(False, "--json-logs", help=JSON_LOGS_HELP),
) -> None:
    """Lease and execute trials from a shared store (run any number of these). Each run's
    cost ceiling, infra retries, backoff and abort rate are read from the store."""
    from atoll.logs import configure_logging
    from orchestrator.runner import run_worker

    configure_logging("WARNING", json_logs=json_logs or None)
    if not no_preflight:
        preflight_models(_experiments_with_work(store, experiment, executor), quiet=False)

    summary = asyncio.run(
        run_worker(
            store,
            experiment=experiment,
            concurrency=concurrency,
            executor_name=executor,
            exit_when_idle=not forever,
            spool_dir=spool_dir,
            healthy_interval_s=healthy_interval,
        )
    )
    typer.echo(
        f"worker finished: {summary.completed} trials completed, {summary.infra_errors} infra errors, "
        f"{summary.lost_leases} lost leases, {summary.spooled} results spooled during store outages"
    )
    for run_name, reason in sorted(summary.stopped.items()):
        why = {
            "cost_ceiling": "its cost ceiling would have been passed",
            "model_configuration": "its model endpoint is misconfigured (see the log for the endpoint)",
        }.get(reason, "its infrastructure error rate passed the threshold")
        typer.echo(f"run {run_name}: stopped scheduling: {why}", err=True)


def regrade(
    run_name: str = typer.Argument(..., help="experiment (run) name"),
    store: str = typer.Option(DEFAULT_STORE, help="store URL"),
    judge_model: str = typer.Option(None, help="judge model (default: the experiment's)"),
    api_base: str = typer.Option(None, help="OpenAI-compatible endpoint of the judge"),
    viewer_url: str = typer.Option(None, "--viewer-url", metavar="URL", help=VIEWER_URL_HELP),
    allow_incomplete: bool = typer.Option(False, "--allow-incomplete", help=ALLOW_INCOMPLETE_HELP),
) -> None:
    """Re-judge recorded trajectories and snapshots without re-running agents. Exit status 4
    when trials are left in an infra error or ungradeable (--allow-incomplete: 0).

    --judge-model / --api-base first become the run's judge (so the experiment updated to
    that judge resumes the run); only trials that judge has not graded are judged, so a
    regrade that was interrupted is finished by running it again."""
    from atoll_cli.commands.known_runs import require_known_run
    from orchestrator.regrade import regrade_run
    from orchestrator.report import write_report
    from orchestrator.store import TrialStore

    viewer = _viewer_url(viewer_url)  # a bad URL is refused before anything is read
    trial_store = TrialStore(store)
    try:
        require_known_run(trial_store, run_name)
        summary = asyncio.run(regrade_run(trial_store, run_name, judge_model=judge_model, api_base=api_base))
        spec = trial_store.experiment_spec(run_name) or {}
        paths = write_report(
            trial_store, run_name, Path(spec.get("output_dir", OUTPUT_DIR)) / run_name, viewer_url=viewer
        )
    finally:
        trial_store.dispose()
    print_leaderboard(paths["md"])
    typer.echo(
        f"regraded {summary['trials_regraded']} trials under judge {summary['judge']['describe']} "
        f"({summary['trials_already_graded']} already graded by it): {summary['verdicts_changed']} verdicts and "
        f"{summary['outcomes_changed']} outcomes changed, {summary['cache_hits']} cached verdicts; "
        f"provenance in {paths['md'].parent}/regrade-{summary['regraded_at']}.json"
    )
    exit_if_run_incomplete(paths["json"], f"run {run_name}", allow=allow_incomplete)


def preflight_models(specs: list[ExperimentSpec], *, quiet: bool) -> None:
    """:func:`check_models`, from outside an event loop (``atoll worker``, ``atoll demo``)."""
    asyncio.run(check_models(specs, quiet=quiet))


async def check_models(specs: list[ExperimentSpec], *, quiet: bool) -> None:
    """Try the exact call of every distinct agent and judge call the experiments make (one
    tool-calling turn, one verdict; :mod:`atoll.llm.preflight`); AtollError("model_endpoint")
    naming the first that fails.

    Calls made elsewhere are not checked here: nothing under the instant executor, the
    agents when ATOLL_AGENTS_RUNNER_URL and the judge when ATOLL_GRADER_URL name services
    (they hold their own keys), everything under the kubernetes executor (its pods do)."""
    specs = [spec for spec in specs if spec.executor == "local"]
    if not specs:  # decided before importing the model client (litellm: seconds of CPU)
        return
    from atoll.llm.preflight import Probe, experiment_probes, preflight
    from orchestrator.executors.local import ServiceSettings

    services = ServiceSettings()
    probes: dict[tuple, Probe] = {}
    for spec in specs:
        # The agent registry's declarations say which agents call a model, without importing them.
        probes_of = experiment_probes(
            spec,
            uses_model=_agent_uses_model,
            agents=not services.agents_runner_url,
            judge=not services.grader_url,
            judge_call=_judge_call,
        )
        for probe in probes_of:
            known = probes.setdefault(probe.key, probe)
            if known is not probe:
                known.used_by.extend(probe.used_by)
    if not probes:
        return
    checked = await preflight(probes.values())
    if not quiet:
        typer.echo(f"preflight: {checked} model endpoint(s) answered", err=True)


def _judge_call(config: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from grader.judge import preflight_call

    return preflight_call(config)


def _agent_uses_model(name: str) -> bool:
    from agents_runner.registry import agent_entry

    return agent_entry(name).uses_model


def _experiments_with_work(store_url: str, only: str | None, executor: str | None) -> list[ExperimentSpec]:
    """Specs of the experiments in the store with pending or leased trials (or just ``only``)."""
    from orchestrator.policy import stored_spec
    from orchestrator.store import TrialStore

    # A worker starts while the database may be briefly away: retry like every store call.
    trial_store = TrialStore(store_url, wait=True)
    try:
        specs = []
        for name in [only] if only else trial_store.experiments():
            raw = trial_store.experiment_spec(name)
            counts = trial_store.counts(name)
            if raw is None or counts.get("pending", 0) + counts.get("leased", 0) == 0:
                continue
            spec = stored_spec(raw)
            specs.append(spec.model_copy(update={"executor": executor}) if executor else spec)
        return specs
    finally:
        trial_store.dispose()


def print_leaderboard(markdown_path: Path) -> None:
    """The report's leaderboard section: drawn as a table on a terminal, Markdown when piped
    (so it can be pasted or parsed)."""
    import sys

    lines = markdown_path.read_text(encoding="utf-8").splitlines()
    start = lines.index("## Leaderboard")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    section = "\n".join(lines[start:end]).rstrip()
    if not sys.stdout.isatty():
        typer.echo(section)
        return
    from rich.console import Console
    from rich.markdown import Markdown

    Console().print(Markdown(section))
