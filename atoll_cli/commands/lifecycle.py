"""`atoll runs`, `atoll cancel`, `atoll pause`, `atoll resume`, `atoll requeue`, `atoll resize`,
`atoll archive`, `atoll delete`, `atoll gc`: the run lifecycle on the command line, over the
same functions as the orchestrator API (:mod:`orchestrator.lifecycle`,
:mod:`orchestrator.run_deletion`), so what one says the other does."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import typer

from atoll.defaults import DEFAULT_ARTIFACTS, DEFAULT_STORE
from atoll.errors import AtollError, ErrorCode
from atoll.jsonio import model_json

if TYPE_CHECKING:
    from orchestrator.lifecycle_models import RunChange
    from orchestrator.store import TrialStore

STORE_HELP = "store URL (sqlite path or postgresql://…)"


def register(app: typer.Typer) -> None:
    """Add the lifecycle commands to the root app."""
    app.command(name="runs")(runs)
    app.command(name="cancel")(cancel)
    app.command(name="pause")(pause)
    app.command(name="resume")(resume)
    app.command(name="requeue")(requeue)
    app.command(name="resize")(resize)
    app.command(name="archive")(archive)
    app.command(name="delete")(delete)
    app.command(name="gc")(gc)


def _store_option() -> str:
    return typer.Option(DEFAULT_STORE, "--store", envvar="ATOLL_STORE", help=STORE_HELP)


@contextmanager
def _opened(url: str, run_name: str | None = None) -> Iterator[TrialStore]:
    """The store at ``url`` (never created here: a mistyped path is an error), with ``run_name``
    checked to be one of its runs."""
    from atoll_cli.commands.known_runs import require_known_run
    from orchestrator.runner import store_exists
    from orchestrator.store import TrialStore

    if not store_exists(url):
        raise AtollError(
            ErrorCode.no_store, f"no trial store at {url}; pass --store URL (or set ATOLL_STORE)"
        )
    store = TrialStore(url)
    try:
        if run_name is not None:
            require_known_run(store, run_name)
        yield store
    finally:
        store.dispose()


def _said(change: RunChange, what: str) -> None:
    counts = change.counts
    typer.echo(
        f"run {change.name}: {what}; now {change.state.value} ({counts['done']} done, {counts['pending']} "
        f"pending, {counts['leased']} running, {counts['cancelled']} cancelled of {counts['total']})"
    )


def _verb(
    run_name: str, store: str, act: Callable[[TrialStore], RunChange], what: Callable[[RunChange], str]
) -> None:
    with _opened(store, run_name) as trial_store:
        change = act(trial_store)
    _said(change, what(change))


def runs(
    store: str = _store_option(),
    state: str = typer.Option(
        None, help="only runs in this state: empty, queued, running, paused, cancelled, stopped, finished"
    ),
    prefix: str = typer.Option(None, help="only runs whose name starts with this"),
    archived: bool = typer.Option(False, "--archived", help="also list archived runs"),
    limit: int = typer.Option(100, min=1, max=500, help="most runs shown"),
    offset: int = typer.Option(0, min=0, help="runs skipped first"),
    json_output: bool = typer.Option(False, "--json", help="the page as JSON (as GET /runs answers)"),
) -> None:
    """List the runs of a store, oldest first, with their state and progress."""
    from orchestrator import lifecycle
    from orchestrator.lifecycle_models import RunState

    try:
        wanted = RunState(state) if state else None
    except ValueError:
        known = ", ".join(item.value for item in RunState)
        raise AtollError(ErrorCode.bad_input, f"--state {state!r}: not a run state ({known})") from None
    with _opened(store) as trial_store:
        page = lifecycle.list_runs(
            trial_store, state=wanted, prefix=prefix, include_archived=archived, limit=limit, offset=offset
        )
    if json_output:
        typer.echo(model_json(page, indent=2))
        return
    if not page.runs:
        typer.echo("no runs" + (" match" if state or prefix else ""))
        return
    width = max(len(run.name) for run in page.runs)
    for run in page.runs:
        counts = run.counts
        done = counts["done"] + counts["infra_error"]
        total = counts["total"] - counts["cancelled"]
        mark = " (archived)" if run.archived else ""
        typer.echo(f"{run.name:<{width}}  {run.state.value:<9}  {done}/{total} done{mark}")
    if page.next_offset is not None:
        typer.echo(f"… {page.total - page.next_offset} more: --offset {page.next_offset}")


def cancel(
    run_name: str = typer.Argument(..., help="run name"),
    stop: bool = typer.Option(False, "--stop", help="stop the running trials now (default: let them finish)"),
    store: str = _store_option(),
) -> None:
    """Cancel a run: no trial of it is leased again, its pending trials are cancelled, its
    running ones finish (or, with --stop, are stopped). `atoll resume` undoes it."""
    from orchestrator import lifecycle
    from orchestrator.lifecycle_models import InFlight

    in_flight = InFlight.stop if stop else InFlight.finish
    _verb(
        run_name,
        store,
        lambda trial_store: lifecycle.cancel_run(trial_store, run_name, in_flight),
        lambda change: (
            f"cancelled {change.trials_changed} trials not yet run"
            + (f", stopped {change.stopped} running" if change.stopped else "")
        ),
    )


def pause(run_name: str = typer.Argument(..., help="run name"), store: str = _store_option()) -> None:
    """Pause a run: no worker leases a trial of it until `atoll resume`; running trials finish."""
    from orchestrator import lifecycle

    _verb(run_name, store, lambda trial_store: lifecycle.pause_run(trial_store, run_name), lambda _: "paused")


def resume(run_name: str = typer.Argument(..., help="run name"), store: str = _store_option()) -> None:
    """Resume a paused or cancelled run (a cancelled run's cancelled trials are pending again)."""
    from orchestrator import lifecycle

    _verb(
        run_name,
        store,
        lambda trial_store: lifecycle.resume_run(trial_store, run_name),
        lambda change: (
            "resumed"
            + (f", {change.trials_changed} cancelled trials pending again" if change.trials_changed else "")
        ),
    )


def requeue(run_name: str = typer.Argument(..., help="run name"), store: str = _store_option()) -> None:
    """Make the run's trials that ran out of infrastructure retries (infra_error) pending again."""
    from orchestrator import lifecycle

    _verb(
        run_name,
        store,
        lambda trial_store: lifecycle.requeue_run(trial_store, run_name),
        lambda change: f"requeued {change.trials_changed} errored trials",
    )


def resize(
    run_name: str = typer.Argument(..., help="run name"),
    concurrency: str = typer.Argument(
        ..., help="most trials of the run in flight across every worker, or 'none'"
    ),
    store: str = _store_option(),
) -> None:
    """Change how many trials of a run may run at once across all workers (from their next lease)."""
    from orchestrator import lifecycle

    if concurrency.lower() == "none":
        cap = None
    elif concurrency.isdigit() and int(concurrency) >= 1:
        cap = int(concurrency)
    else:
        raise AtollError(
            ErrorCode.bad_input, f"concurrency {concurrency!r}: a whole number of 1 or more, or 'none'"
        )
    _verb(
        run_name,
        store,
        lambda trial_store: lifecycle.set_concurrency(trial_store, run_name, cap),
        lambda _: f"at most {cap} trials in flight" if cap else "no run-wide concurrency cap",
    )


def archive(run_name: str = typer.Argument(..., help="run name"), store: str = _store_option()) -> None:
    """Archive a run that is not running: `atoll runs` leaves it out (--archived shows it); its
    trials, results and artifacts are kept."""
    from orchestrator import lifecycle

    _verb(
        run_name,
        store,
        lambda trial_store: lifecycle.archive_run(trial_store, run_name),
        lambda _: "archived",
    )


def _grace_option() -> float:
    return typer.Option(
        24.0, "--grace-hours", min=0, help="keep unreferenced seeds and blobs written less than this long ago"
    )


def delete(
    run_name: str = typer.Argument(..., help="run name"),
    store: str = _store_option(),
    artifacts: str = typer.Option(None, help="the run's artifact store (default: the one its spec names)"),
    yes: bool = typer.Option(False, "--yes", "-y", help="do not ask for confirmation"),
    no_gc: bool = typer.Option(False, "--no-gc", help="leave the stored worlds to a later `atoll gc`"),
    grace_hours: float = _grace_option(),
    json_output: bool = typer.Option(
        False, "--json", help="what was removed as JSON (as DELETE /runs/{name})"
    ),
) -> None:
    """Delete a run for good: its trials, results, history and events, the artifact folders its
    trials' results point to, then (unless --no-gc) the stored worlds no trial uses any more.
    Refused while any trial of it is pending or running (`atoll cancel --stop` first)."""
    from orchestrator.artifacts import ArtifactStore
    from orchestrator.run_deletion import delete_run
    from orchestrator.world_gc import described

    with _opened(store, run_name) as trial_store:
        if not yes and not typer.confirm(f"delete run {run_name} and its artifacts for good?", default=False):
            raise AtollError(
                ErrorCode.not_confirmed, f"run {run_name} not deleted (pass --yes to skip the question)"
            )
        deletion = delete_run(
            trial_store,
            run_name,
            artifacts=ArtifactStore(artifacts) if artifacts else None,
            gc=not no_gc,
            grace_hours=grace_hours,
        )
    if json_output:
        typer.echo(model_json(deletion, indent=2))
        return
    rows = ", ".join(f"{count} {table}" for table, count in deletion.rows.items() if count)
    typer.echo(f"run {run_name}: deleted ({rows or 'no rows'})")
    typer.echo(
        f"removed {len(deletion.folders)} artifact folders ({deletion.folder_bytes} bytes) from {deletion.artifacts}"
    )
    for uri in deletion.left:
        typer.echo(f"  left {uri}")
    for problem in deletion.problems:
        typer.echo(f"  problem: {problem}")
    if deletion.gc is not None:
        for line in described(deletion.gc):
            typer.echo(line)


def gc(
    store: str = _store_option(),
    artifacts: list[str] = typer.Option(
        None, "--artifacts", help="artifact store URL (repeatable; default: every store the runs name)"
    ),
    grace_hours: float = _grace_option(),
    dry_run: bool = typer.Option(False, "--dry-run", help="say what would be removed; remove nothing"),
    json_output: bool = typer.Option(False, "--json", help="the reports as a JSON list"),
) -> None:
    """Remove the stored worlds no trial in the store uses: seeds (manifests, archives) of no
    trial, then blobs no manifest names, each only when older than the grace period."""
    from orchestrator.artifacts import ArtifactStore
    from orchestrator.world_gc import collect_garbage, described

    with _opened(store) as trial_store:
        urls = list(artifacts or [])
        if not urls:
            named = (trial_store.experiment_spec(name) or {} for name in trial_store.experiments())
            urls = sorted({spec.get("artifacts") or DEFAULT_ARTIFACTS for spec in named}) or [
                DEFAULT_ARTIFACTS
            ]
        reports = [
            collect_garbage(trial_store, ArtifactStore(url), grace_hours=grace_hours, dry_run=dry_run)
            for url in urls
        ]
    if json_output:
        typer.echo("[" + ",".join(model_json(report) for report in reports) + "]")
        return
    for report in reports:
        for line in described(report):
            typer.echo(line)
