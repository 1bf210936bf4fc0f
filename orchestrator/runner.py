"""``atoll run`` and ``atoll worker``: plan, enqueue, execute, report — resumable.

Running the same experiment again resumes it: trials with a final result are never
re-run or deleted, interrupted ones (their process is gone) and infra failures are
retried, and every attempt stays in the history.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from pydantic import Field, ValidationError

from atoll.errors import AtollError, ErrorCode, describe_validation
from atoll.experiment import ExperimentSpec
from atoll.judge import JudgeIdentity
from atoll.loader import load_benchmark
from atoll.settings import AtollSettings
from atoll.trial import TrialSpec
from orchestrator.artifacts import absolute_url
from orchestrator.executors import ExecutorFactory, get_executor
from orchestrator.executors.base import Executor
from orchestrator.fingerprint import (
    configuration_changed,
    fingerprint,
    identity_document,
    incompatible_changes,
)
from orchestrator.judging import JUDGES_KEY, known_judges
from orchestrator.planner import plan_trials, unavailable_app_exclusions
from orchestrator.policy import RunPolicy, stored_spec
from orchestrator.progress import ProgressView
from orchestrator.report import write_report
from orchestrator.scheduler import Scheduler, SchedulerSummary
from orchestrator.spool import spool_for
from orchestrator.store import TrialStore, normalise_store_url, worker_identity

log = logging.getLogger(__name__)


class WorkerSettings(AtollSettings):
    """``ATOLL_LEASE_S``, ``ATOLL_INTERRUPT_GRACE_S``, ``ATOLL_DRAIN_GRACE_S``,
    ``ATOLL_WORKER_ALIVE_FILE``: the timing of ``atoll run`` and ``atoll worker``."""

    lease_s: float = Field(
        120.0,
        description="how long a lease lasts without a heartbeat; a worker that dies costs at most "
        "this (shorter: faster takeover)",
    )
    interrupt_grace_s: float = Field(
        5.0, description="how long Ctrl-C during `atoll run` waits for running trials before abandoning them"
    )
    drain_grace_s: float = Field(
        20.0,
        description="how long a worker told to stop (SIGTERM: a pod being deleted, a rollout) follows its "
        "running trials before it abandons them; keep it below the pod's terminationGracePeriodSeconds",
    )
    worker_alive_file: str | None = Field(
        None,
        description="touched every few seconds while the scheduling loop turns: what a liveness probe "
        "checks (k8s/base/worker.yaml)",
    )


_WORKER = WorkerSettings()
LEASE_S = _WORKER.lease_s
INTERRUPT_GRACE_S = _WORKER.interrupt_grace_s
DRAIN_GRACE_S = _WORKER.drain_grace_s
ALIVE_EVERY_S = 5.0


def _alive_file_toucher() -> Callable[[], None] | None:
    path = WorkerSettings().worker_alive_file
    if not path:
        return None
    target, last = Path(path), [0.0]

    def touch() -> None:
        if time.monotonic() - last[0] >= ALIVE_EVERY_S:
            last[0] = time.monotonic()
            try:
                target.touch()
            except OSError as exc:  # the probe will say so; never stop scheduling for it
                log.warning("cannot touch %s: %s", target, exc)

    return touch


# How often a worker re-reads a run's policy from the store.
POLICY_REFRESH_S = 30.0


@dataclass
class RunOutcome:
    experiment: str
    planned: int
    newly_enqueued: int
    reclaimed: int
    archived: int
    summary: SchedulerSummary
    counts: dict[str, int]
    report_paths: dict[str, Path]


def register_run(
    store: TrialStore,
    spec: ExperimentSpec,
    trials: list[TrialSpec],
    *,
    replace: bool = False,
    stored_extra: dict[str, Any] | None = None,
) -> int:
    """Save the run's spec and fingerprint, refusing a changed configuration unless
    ``replace``; with ``replace``, archive the recorded trials outside the new plan.
    Returns how many trials were archived (see orchestrator.fingerprint)."""
    document = identity_document(spec, trials)
    new_fingerprint = fingerprint(document)
    record = store.run_record(spec.name)
    planned = {trial.trial_id for trial in trials}
    archived = 0
    if record is not None and record.fingerprint != new_fingerprint:
        if record.identity is not None:
            changes = incompatible_changes(record.identity, document)
        else:  # recorded before runs had fingerprints: judge by the trials themselves
            stray = len(store.trial_ids(spec.name) - planned)
            changes = [f"{stray} recorded trial(s) are not in this experiment's plan"] if stray else []
        if changes and not replace:
            recorded = sum(
                store.counts(spec.name)[state] for state in ("done", "infra_error", "pending", "leased")
            )
            raise configuration_changed(spec, record.spec, changes, recorded)
        if changes:
            archived = store.archive_trials(
                spec.name,
                planned,
                fingerprint=record.fingerprint,
                archive=f"replaced-{datetime.now(UTC):%Y%m%dT%H%M%S.%fZ}",
            )
    judges = known_judges(record, JudgeIdentity.model_validate(document["judge"]))
    stored = spec.model_dump(mode="json")
    # Absolute, as submitted: a relative `file://atoll-out/artifacts` would resolve against the
    # working folder of whoever reads it later (a viewer, a worker) instead of the submitter's.
    stored["artifacts"] = absolute_url(spec.artifacts)
    store.save_experiment(
        spec.name,
        {**stored, **(stored_extra or {}), JUDGES_KEY: judges},
        fingerprint=new_fingerprint,
        identity=document,
    )
    return archived


async def run_experiment(
    spec: ExperimentSpec,
    *,
    executor_factory: ExecutorFactory | None = None,
    quiet: bool = False,
    json_events: bool = False,
    progress_out: TextIO | None = None,
    enqueue_only: bool = False,
    replace: bool = False,
    interruptible: bool = False,
    viewer_url: str | None = None,
    preflight: Callable[[ExperimentSpec], Awaitable[object]] | None = None,
    max_trials: int | None = None,
    max_plan_bytes: int | None = None,
) -> RunOutcome:
    """Plan, enqueue, execute and report one experiment (or resume it).

    Raises AtollError for a bad benchmark or experiment, an unreachable store, or an
    abort because the infrastructure error rate passed ``spec.infra_error_abort_rate``
    (the report is written first), and AtollError("fingerprint_changed") when the run
    exists with another configuration and ``replace`` is not set. With ``enqueue_only`` it
    plans and enqueues, then returns without executing (``atoll worker`` processes do the work).

    With ``interruptible`` (``atoll run``), SIGINT (Ctrl-C) while trials run stops scheduling
    at once, waits a few seconds for the running trials (a second Ctrl-C abandons them), gives
    the leases of the unfinished ones back, writes the report so far and returns with
    ``summary.stopped_reason == "interrupted"``.

    Why the run stopped early (abort, cost ceiling, interrupt) is recorded in the store, and
    the report opens with it. ``viewer_url`` makes the report link each trial to the viewer.

    ``preflight`` (``atoll run``'s check of the model endpoints) is awaited after planning and
    before the store is created, so a failing check leaves no store behind; it is skipped when
    the store already holds every planned trial with a final result (a resume with nothing
    left to run calls no model, so it checks none). ``max_trials`` and ``max_plan_bytes`` bound
    the plan (AtollError ``too_many_trials``; the API's ``ATOLL_MAX_TRIALS`` and
    ``ATOLL_MAX_PLAN_BYTES``).
    """
    benchmark = load_benchmark(spec.benchmark)
    trials = plan_trials(benchmark, spec, max_trials=max_trials, max_plan_bytes=max_plan_bytes)
    # The executor is resolved even when only enqueuing: an unknown name is refused before
    # the store is touched. Built, it checks the agents' options, also before anything is stored.
    factory = executor_factory or get_executor(spec.executor)
    executor = None if enqueue_only else factory(benchmark, spec)
    store = TrialStore(spec.store) if store_exists(spec.store) else None
    if (
        preflight is not None
        and executor is not None
        and (store is None or work_left(store, spec.name, trials))
    ):
        try:
            await preflight(spec)
        except BaseException:
            if store is not None:
                store.dispose()
            await executor.aclose()
            raise
    if store is None:
        store = TrialStore(spec.store)
    try:
        # Skipped tasks travel with the stored spec so every report states them and why.
        excluded = unavailable_app_exclusions(benchmark, spec)
        # Task names too, so reports name tasks without reading the benchmark again.
        planned = {trial.task_id for trial in trials}
        names = {
            task.task_id: task.task_name
            for task in benchmark.tasks
            if task.task_name and task.task_id in planned
        }
        # And each criterion's grading target kind, so failures group by it (report_trials).
        kinds = {
            criterion.verifier_id: task.grading_target_for(criterion).kind
            for task in benchmark.tasks
            if task.task_id in planned
            for criterion in task.rubric
        }
        archived = register_run(
            store,
            spec,
            trials,
            replace=replace,
            stored_extra={"excluded_tasks": excluded, "task_names": names, "target_kinds": kinds},
        )
        added = store.enqueue(trials)
        reclaimed = store.reclaim(spec.name)
        if executor is None:
            return RunOutcome(
                spec.name,
                len(trials),
                added,
                reclaimed,
                archived,
                SchedulerSummary(),
                store.counts(spec.name),
                {},
            )
        view = ProgressView(
            spec.name,
            store,
            quiet=quiet,
            json_events=json_events,
            out=progress_out,
            runs=spec.runs,
            seed=spec.seed,
        )
        worker_id = worker_identity()
        spool = spool_for(spec.store, worker_id)
        scheduler = Scheduler(
            store,
            lambda _experiment: executor,
            worker_id=worker_id,
            concurrency=spec.concurrency.trials,
            experiment=spec.name,
            lease_s=LEASE_S,
            policy=RunPolicy.of(spec),
            on_event=view.event,
            spool=spool,
            interrupt_grace_s=INTERRUPT_GRACE_S,
        )
        try:
            with view, _interrupts_stop(scheduler, enabled=interruptible):
                summary = await scheduler.run()
        except BaseException as exc:
            if isinstance(exc, (KeyboardInterrupt, asyncio.CancelledError)):  # cancelled from outside
                _record_interrupt(store, spec.name)
            raise
        finally:
            await executor.aclose()
            spool.close()
        counts = store.counts(spec.name)
        if summary.stopped_reason == "interrupted":
            _record_interrupt(store, spec.name)
        else:
            record_stops(store, summary, spec)
        paths = write_report(
            store, spec.name, Path(spec.output_dir) / spec.name, seed=spec.seed, viewer_url=viewer_url
        )
    finally:
        store.dispose()
    outcome = RunOutcome(spec.name, len(trials), added, reclaimed, archived, summary, counts, paths)
    if summary.stopped_reason == "model_configuration":
        raise AtollError(
            ErrorCode.model_endpoint,
            f"run {spec.name} aborted: {summary.configuration_errors} of {summary.attempts} attempts met a model "
            f"endpoint configuration error; last: {summary.last_model_endpoint_error}; see {paths['md']}; fix "
            "the endpoint or key and run again to resume",
        )
    if summary.stopped_reason == "infra_error_rate":
        raise AtollError(
            ErrorCode.infra_abort,
            f"run {spec.name} aborted: {summary.infra_errors} of {summary.attempts} attempts failed "
            f"{failure_sides(summary)} (threshold {spec.infra_error_abort_rate:.0%}); see {paths['md']} and the "
            "attempt history; fix the cause and run again to resume",
        )
    return outcome


def store_exists(url: str) -> bool:
    """Whether opening ``url`` would find a store rather than create one: a SQLite file that
    exists (a database server is always there; opening it creates at most the empty schema)."""
    location = normalise_store_url(url)
    if not location.startswith("sqlite:///"):
        return True
    path = location.removeprefix("sqlite:///")
    return path not in ("", ":memory:") and Path(path).is_file()


def work_left(store: TrialStore, name: str, trials: list[TrialSpec]) -> bool:
    """Whether running ``trials`` as run ``name`` would execute anything: a planned trial not
    recorded yet, or one pending, leased or in ``infra_error`` (retried on resume)."""
    counts = store.counts(name)
    if counts["pending"] + counts["leased"] + counts["infra_error"]:
        return True
    recorded = store.trial_ids(name)
    return any(trial.trial_id not in recorded for trial in trials)


class _interrupts_stop:  # noqa: N801 - used as a context manager, like contextlib's
    """SIGINT on the running loop interrupts ``scheduler`` (and says so on stderr) instead of
    raising KeyboardInterrupt somewhere in a trial."""

    def __init__(
        self, scheduler: Scheduler, *, enabled: bool, signals: tuple[signal.Signals, ...] = (signal.SIGINT,)
    ) -> None:
        self.scheduler, self.enabled, self.signals = scheduler, enabled, signals
        self.loop: asyncio.AbstractEventLoop | None = None

    def _on_sigint(self) -> None:
        first = not self.scheduler.interrupts
        self.scheduler.interrupt()
        running = self.scheduler.running
        if first:
            print(
                f"\ninterrupting: no new trials; waiting up to {self.scheduler.interrupt_grace_s:.0f} s for "
                f"{running} running (Ctrl-C again abandons them)",
                file=sys.stderr,
                flush=True,
            )
        else:
            print(f"abandoning {running} running trials", file=sys.stderr, flush=True)

    def __enter__(self) -> _interrupts_stop:
        if self.enabled:
            self.loop = loop = asyncio.get_running_loop()
            try:
                for number in self.signals:
                    loop.add_signal_handler(number, self._on_sigint)
            except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals here
                self.loop = None
        return self

    def __exit__(self, *exc: object) -> None:
        if self.loop is not None:
            for number in self.signals:
                self.loop.remove_signal_handler(number)


def stop_detail(reason: str, summary: SchedulerSummary, policy: RunPolicy) -> str:
    """Why a run stopped scheduling, as the store records it (the report's banner says
    whether it was aborted or stopped)."""
    if reason == "infra_error_rate":
        return (
            f"{summary.infra_errors} of {summary.attempts} attempts failed {failure_sides(summary)} "
            f"(threshold {policy.infra_abort_rate:.0%})"
        )
    if reason == "model_configuration":
        return (
            f"{summary.configuration_errors} of {summary.attempts} attempts met a model endpoint "
            f"configuration error; last: {summary.last_model_endpoint_error}"
        )
    if reason == "cost_ceiling":
        ceiling = (
            f"${policy.cost_ceiling_usd:.4f}" if policy.cost_ceiling_usd is not None else "its cost ceiling"
        )
        return f"the run's cost ceiling ({ceiling}) would have been passed"
    return reason


def record_stops(
    store: TrialStore,
    summary: SchedulerSummary,
    spec: ExperimentSpec | None = None,
    policy_for: Callable[[str], RunPolicy] | None = None,
) -> None:
    """Record in the store why each run this scheduler stopped was stopped (best effort: a
    store that is away loses only the banner, never a result)."""
    for name, reason in summary.stopped.items():
        if reason == "interrupted":
            _record_interrupt(store, name)
            continue
        if reason == "bad_spec":  # it has no usable policy: its words are the detail
            _record_stop(store, name, reason, summary.stop_details.get(name, reason))
            continue
        policy = RunPolicy.of(spec) if spec is not None else (policy_for(name) if policy_for else RunPolicy())
        _record_stop(store, name, reason, stop_detail(reason, summary, policy))


def _record_stop(store: TrialStore, name: str, reason: str, detail: str) -> None:
    try:
        store.record_stop(name, reason, detail)
    except AtollError as exc:
        log.warning("run %s: could not record why it stopped: %s", name, exc)


def _record_interrupt(store: TrialStore, name: str) -> None:
    try:
        counts = store.counts(name)
        left = counts["pending"] + counts["leased"]
        store.record_stop(name, "interrupted", f"{left} of {counts['total']} trials were not finished")
    except Exception as exc:  # noqa: BLE001 (already unwinding from an interrupt: never mask it)
        log.warning("run %s: could not record the interrupt: %s", name, exc)


def failure_sides(summary: SchedulerSummary) -> str:
    """Where failed attempts failed: model endpoint errors are the model side's, never
    counted as atoll's own infrastructure."""
    own = summary.infra_errors - summary.model_endpoint_errors
    model = summary.model_endpoint_errors
    last = f"last: {summary.last_model_endpoint_error}"
    if model and own:
        return f"({model} on the model endpoint, {last}; {own} in atoll's own infrastructure)"
    if model:
        return f"on the model endpoint ({last})"
    return "in atoll's own infrastructure"


async def run_worker(
    store_url: str,
    *,
    experiment: str | None = None,
    concurrency: int = 2,
    executor_name: str | None = None,
    quiet: bool = False,
    exit_when_idle: bool = True,
    spool_dir: Path | None = None,
    healthy_interval_s: float = 300.0,
    give_up_after_s: float = 600.0,
) -> SchedulerSummary:
    """Lease and execute trials of any experiment in a shared store (PostgreSQL for many
    machines). Each run's spec — and so its policy: cost ceiling, infra retries, backoff,
    abort rate — is read from the store; executors are made lazily.

    It exits when no trial in scope is pending or leased (expired leases of dead workers are
    taken over first); with ``exit_when_idle=False`` it keeps polling, and a run stopped for
    its infrastructure error rate is tried again after ``healthy_interval_s`` without one.
    Raises AtollError("store_unavailable") after ``give_up_after_s`` of unreachable store
    with nothing left running (results not yet written stay in the spool).

    SIGTERM (or SIGINT) drains it: nothing more is leased, running trials are followed for
    ``ATOLL_DRAIN_GRACE_S``, then abandoned — their leases go back to the store at once,
    without counting an attempt, and the Kubernetes executor leaves their Jobs running for the
    worker that leases them next to adopt; then the executors close (releasing their Leases)."""
    store = TrialStore(store_url, wait=True)
    executors: dict[str, Executor] = {}
    policies: dict[str, tuple[float, RunPolicy]] = {}

    def spec_of(name: str) -> ExperimentSpec:
        raw = store.experiment_spec(name)
        if raw is None:
            raise AtollError(ErrorCode.unknown_run, f"experiment {name!r} has no spec in the store")
        try:
            return stored_spec(raw)
        except ValidationError as exc:
            raise AtollError(
                ErrorCode.bad_stored_spec,
                f"run {name!r}: its stored experiment is refused by this atoll: {describe_validation(exc)}",
            ) from None

    def executor_for(name: str) -> Executor:
        if name not in executors:
            spec = spec_of(name)
            executors[name] = get_executor(executor_name or spec.executor)(
                load_benchmark(spec.benchmark), spec
            )
        return executors[name]

    def policy_for(name: str) -> RunPolicy:
        # Re-read now and then: `atoll run` saves a changed policy with the run.
        cached = policies.get(name)
        if cached is None or time.monotonic() - cached[0] > POLICY_REFRESH_S:
            try:
                policies[name] = (time.monotonic(), RunPolicy.of(spec_of(name)))
            except AtollError as exc:
                if cached is None or exc.code != "store_unavailable":
                    raise
                policies[name] = (time.monotonic(), cached[1])  # keep the last one through an outage
        return policies[name][1]

    worker_id = worker_identity()
    spool = spool_for(store_url, worker_id, spool_dir)
    scheduler = Scheduler(
        store,
        executor_for,
        worker_id=worker_id,
        concurrency=concurrency,
        experiment=experiment,
        lease_s=LEASE_S,
        policy_for=policy_for,
        spool=spool,
        healthy_interval_s=None if exit_when_idle else healthy_interval_s,
        give_up_after_s=give_up_after_s,
        interrupt_grace_s=DRAIN_GRACE_S,
        on_tick=_alive_file_toucher(),
    )
    try:
        with _interrupts_stop(scheduler, enabled=True, signals=(signal.SIGTERM, signal.SIGINT)):
            summary = await scheduler.run(forever=not exit_when_idle)
        record_stops(store, summary, policy_for=policy_for)
        return summary
    finally:
        for executor in executors.values():
            await executor.aclose()
        spool.close()
        store.dispose()
