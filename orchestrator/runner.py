"""``atoll run`` and ``atoll worker``: plan, enqueue, execute, report — resumable.

Running the same experiment again resumes it: trials with a final result are never
re-run or deleted, interrupted ones (their process is gone) and infra failures are
retried, and every attempt stays in the history.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from atoll.benchmark import Benchmark
from atoll.errors import AtollError
from atoll.experiment import ExperimentSpec
from atoll.loader import load_benchmark
from orchestrator.executors.base import Executor, InstantExecutor
from orchestrator.planner import plan_trials, unavailable_app_exclusions
from orchestrator.progress import ProgressView
from orchestrator.report import write_report
from orchestrator.scheduler import Scheduler, SchedulerSummary
from orchestrator.store import TrialStore, worker_identity

ExecutorFactory = Callable[[Benchmark, ExperimentSpec], Executor]

# How long a lease lasts without a heartbeat; a worker that dies costs at most this.
LEASE_S = 120.0


def default_executor(name: str) -> ExecutorFactory:
    """The executor factory for ``spec.executor`` (or ``instant``, for dry runs)."""
    if name == "local":
        from orchestrator.executors.local import LocalExecutor

        return LocalExecutor
    if name == "instant":
        return InstantExecutor
    if name == "kubernetes":
        from orchestrator.executors.kubernetes import KubernetesExecutor

        return KubernetesExecutor
    raise AtollError("bad_experiment", f"unknown executor {name!r} (local, kubernetes, instant)")


@dataclass
class RunOutcome:
    experiment: str
    planned: int
    newly_enqueued: int
    reclaimed: int
    summary: SchedulerSummary
    counts: dict[str, int]
    report_paths: dict[str, Path]


def _spent_so_far(store: TrialStore, experiment: str) -> float:
    return sum(
        result.agent_cost_usd + result.judge_cost_usd
        for _spec, result, _state, _attempts in store.results(experiment)
        if result is not None
    )


async def run_experiment(
    spec: ExperimentSpec,
    *,
    executor_factory: ExecutorFactory | None = None,
    quiet: bool = False,
    json_events: bool = False,
    progress_out: Any = None,
    enqueue_only: bool = False,
) -> RunOutcome:
    """Plan, enqueue, execute and report one experiment (or resume it).

    Raises AtollError for a bad benchmark or experiment, an unreachable store, or an
    abort because the infrastructure error rate passed ``spec.infra_error_abort_rate``
    (the report is written first). With ``enqueue_only`` it plans and enqueues, then returns
    without executing (``atoll worker`` processes do the work).
    """
    benchmark = load_benchmark(spec.benchmark)
    trials = plan_trials(benchmark, spec)
    # The executor checks the agents' options before anything is written to the store.
    executor = None if enqueue_only else (executor_factory or default_executor(spec.executor))(benchmark, spec)
    store = TrialStore(spec.store)
    try:
        # Skipped tasks travel with the stored spec so every report states them and why.
        excluded = unavailable_app_exclusions(benchmark, spec)
        store.save_experiment(spec.name, {**spec.model_dump(mode="json"), "excluded_tasks": excluded})
        added = store.enqueue(trials)
        reclaimed = store.reclaim(spec.name)
        if executor is None:
            return RunOutcome(spec.name, len(trials), added, reclaimed, SchedulerSummary(),
                              store.counts(spec.name), {})
        view = ProgressView(spec.name, store, quiet=quiet, json_events=json_events, out=progress_out,
                            runs=spec.runs, seed=spec.seed)
        scheduler = Scheduler(
            store,
            lambda _experiment: executor,
            worker_id=worker_identity(),
            concurrency=spec.concurrency.trials,
            experiment=spec.name,
            lease_s=LEASE_S,
            max_attempts=1 + spec.max_infra_retries,
            infra_abort_rate=spec.infra_error_abort_rate,
            cost_ceiling_usd=spec.max_total_cost_usd,
            spent_usd=_spent_so_far(store, spec.name) if spec.max_total_cost_usd is not None else 0.0,
            retry_backoff_s=spec.infra_retry_backoff_s,
            on_event=view.event,
        )
        try:
            with view:
                summary = await scheduler.run()
        finally:
            await executor.aclose()
        counts = store.counts(spec.name)
        paths = write_report(store, spec.name, Path(spec.output_dir) / spec.name, seed=spec.seed)
    finally:
        store.dispose()
    outcome = RunOutcome(spec.name, len(trials), added, reclaimed, summary, counts, paths)
    if summary.stopped_reason == "infra_error_rate":
        raise AtollError(
            "infra_abort",
            f"run {spec.name} aborted: {summary.infra_errors} of {summary.attempts} attempts failed in atoll's "
            f"own infrastructure (threshold {spec.infra_error_abort_rate:.0%}); see {paths['md']} and the "
            "attempt history; fix the cause and run again to resume",
        )
    return outcome


async def run_worker(
    store_url: str,
    *,
    experiment: str | None = None,
    concurrency: int = 2,
    executor_name: str | None = None,
    quiet: bool = False,
    exit_when_idle: bool = True,
) -> SchedulerSummary:
    """Lease and execute trials of any experiment in a shared store (PostgreSQL for many
    machines). Each experiment's spec is read from the store; executors are made lazily."""
    store = TrialStore(store_url)
    executors: dict[str, Executor] = {}

    def executor_for(name: str) -> Executor:
        if name not in executors:
            raw = store.experiment_spec(name)
            if raw is None:
                raise AtollError("unknown_run", f"experiment {name!r} has no spec in the store")
            spec = ExperimentSpec.model_validate(raw)
            executors[name] = default_executor(executor_name or spec.executor)(load_benchmark(spec.benchmark), spec)
        return executors[name]

    scheduler = Scheduler(store, executor_for, worker_id=worker_identity(), concurrency=concurrency,
                          experiment=experiment, lease_s=LEASE_S)
    try:
        while True:
            summary = await scheduler.run(wait_for_others=False)
            if exit_when_idle:
                return summary
            await asyncio.sleep(5)
    finally:
        for executor in executors.values():
            await executor.aclose()
        store.dispose()
