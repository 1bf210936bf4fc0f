"""The run lifecycle: what a client can learn of a run and ask of it, as plain functions over
the trial store that the HTTP API (:mod:`orchestrator.api_lifecycle`) and the CLI (``atoll
runs``, ``cancel``, ``pause``, ``resume``, ``requeue``, ``resize``, ``archive``) both call.

Every verb is recorded in the store, so every worker obeys it on its next lease: a paused or
cancelled run gives no trial to any worker, a concurrency cap bounds its trials in flight
across all workers, and a cancel that stops running trials takes their leases back (their
workers stop them within a second: :data:`orchestrator.scheduler.CANCEL_CHECK_S`).

Errors are AtollError: ``unknown_run`` and ``unknown_trial`` (404 over HTTP), ``bad_run_name``
(400), ``run_not_active`` (409: the verb does not apply to the run as it stands),
and for idempotent submissions (:mod:`orchestrator.idempotency`) ``idempotency_conflict`` and
``idempotency_in_progress`` (409).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from atoll.errors import AtollError, ErrorCode
from atoll.experiment import check_run_name
from atoll.grade import CriterionVerdict
from atoll.judge import JudgeIdentity
from atoll.llm.profiles import experiment_judge
from orchestrator.lifecycle_models import (
    ArtifactLinks,
    Eta,
    InFlight,
    Progress,
    RunChange,
    RunPage,
    RunState,
    RunStatus,
    RunSummary,
    StopRecord,
    TrialDetail,
    TrialPage,
    TrialSummary,
)
from orchestrator.store import TrialStore
from orchestrator.store_control import CANCELLED, PAUSED, RUNNING, RunControl, TrialFilter
from orchestrator.store_runs import FINISHED, RunRecord, TrialRow

log = logging.getLogger(__name__)

RunChangeListener = Callable[[RunChange], None]
_listeners: list[RunChangeListener] = []

MAX_PAGE = 500
#: The largest offset or id a client may name: the store's SQL takes signed 64-bit integers
#: (a larger one was a 500 from the database driver, not a page).
MAX_POSITION = 2**63 - 1


def on_run_change(listener: RunChangeListener) -> Callable[[], None]:
    """Call ``listener`` with every RunChange a verb of this process makes (event streams,
    webhooks); returns the function that removes it. A listener that raises is logged, never
    the verb's failure."""
    _listeners.append(listener)
    return lambda: _listeners.remove(listener)


def _announce(change: RunChange) -> RunChange:
    for listener in list(_listeners):
        try:
            listener(change)
        except Exception:  # noqa: BLE001 - a listener's bug never fails the verb
            log.exception("run change listener failed for run %s", change.name)
    return change


# --- reading ---------------------------------------------------------------------------------


def require_run(store: TrialStore, name: str) -> RunRecord:
    """The run's record; AtollError ``bad_run_name`` or ``unknown_run``."""
    check_run_name(name)  # before the store sees it
    record = store.run_record(name)
    if record is None:
        raise AtollError(ErrorCode.unknown_run, f"no run named {name!r} in the store")
    return record


def run_state(control: RunControl, counts: dict[str, int], stop: dict[str, Any] | None) -> RunState:
    """Where a run stands: cancelled and paused as asked (paused only while trials are left),
    else from its trials."""
    if control.control == CANCELLED:
        return RunState.cancelled
    if not counts.get("total"):
        return RunState.empty
    if counts.get("pending", 0) + counts.get("leased", 0) == 0:
        return RunState.finished
    if control.control == PAUSED:
        return RunState.paused
    if counts.get("leased"):
        return RunState.running
    return RunState.stopped if stop else RunState.queued


def _stop_record(stop: dict[str, Any] | None) -> StopRecord | None:
    if not stop:
        return None
    at = stop.get("at")
    return StopRecord(
        reason=str(stop.get("reason")),
        detail=stop.get("detail"),
        at=datetime.fromtimestamp(at, UTC) if at else None,
    )


def _eta(state: RunState, done: int, total: int, elapsed_s: float, stop: StopRecord | None) -> Eta:
    if state is RunState.finished:
        return Eta(seconds=0.0, reason=None)
    unknown = {
        RunState.empty: "the run has no trials",
        RunState.paused: "the run is paused",
        RunState.cancelled: "the run is cancelled",
        RunState.stopped: f"the run stopped ({stop.reason if stop else 'unknown reason'})",
    }
    if state in unknown:
        return Eta(seconds=None, reason=unknown[state])
    if done == 0 or elapsed_s <= 0:
        return Eta(seconds=None, reason="no trial has finished yet")
    return Eta(seconds=round((total - done) * elapsed_s / done, 1), reason=None)


def _judge(record: RunRecord) -> JudgeIdentity | None:
    """The run's recorded judge (orchestrator.judging), else its stored spec's; None: checks only."""
    from orchestrator.judging import recorded_judge
    from orchestrator.policy import stored_spec

    if (recorded := recorded_judge(record)) is not None:
        return recorded if recorded.model is not None else None
    spec = record.spec
    try:
        config = experiment_judge(stored_spec(spec))
    except (ValidationError, AtollError):  # a spec this atoll refuses: no judge to show
        return None
    return config.identity() if config is not None else None


def run_status(store: TrialStore, name: str, *, now: float | None = None) -> RunStatus:
    """Counts, progress, elapsed time, ETA, cost so far, judge and fingerprint of one run."""
    record = require_run(store, name)
    control = store.run_controls(name).get(name, RunControl())
    counts = store.counts(name)
    state = run_state(control, counts, record.stop)
    done = counts["done"] + counts["infra_error"]
    total = counts["total"] - counts["cancelled"]
    last = store.last_finished_at(name)
    end = last if state is RunState.finished and last else (now or time.time())
    elapsed = max(0.0, end - record.created_at)
    stop = _stop_record(record.stop)
    judge = _judge(record)
    return RunStatus(
        name=name,
        state=state,
        archived=control.archived_at is not None,
        counts=counts,
        progress=Progress(done=done, total=total, fraction=round(done / total, 4) if total else None),
        created_at=datetime.fromtimestamp(record.created_at, UTC),
        elapsed_s=round(elapsed, 1),
        eta=_eta(state, done, total, elapsed, stop),
        cost_usd=round(store.spent_usd(name), 6),
        concurrency=control.max_in_flight,
        judge=judge,
        judge_id=judge.id if judge else None,
        fingerprint=record.fingerprint,
        stop=stop,
        executor=record.spec.get("executor"),
        artifacts=record.spec.get("artifacts"),
    )


def _page_bounds(limit: int, offset: int) -> None:
    if not 1 <= limit <= MAX_PAGE:
        raise AtollError(ErrorCode.bad_input, f"limit {limit}: must be 1 to {MAX_PAGE}")
    if not 0 <= offset <= MAX_POSITION:
        raise AtollError(ErrorCode.bad_input, f"offset {offset}: must be 0 to {MAX_POSITION}")


def list_runs(
    store: TrialStore,
    *,
    state: RunState | None = None,
    prefix: str | None = None,
    include_archived: bool = False,
    limit: int = 100,
    offset: int = 0,
) -> RunPage:
    """The runs, oldest first, filtered by state and name prefix (archived ones only with
    ``include_archived``), one page of ``limit`` from ``offset``, with the total that match."""
    _page_bounds(limit, offset)
    controls = store.run_controls()
    counts_of = store.counts_of_runs()
    matching = []
    for record in store.run_overview():
        control = controls.get(record.name, RunControl())
        if control.archived_at is not None and not include_archived:
            continue
        if prefix and not record.name.startswith(prefix):
            continue
        counts = counts_of.get(record.name) or store.counts(record.name)
        run = RunSummary(
            name=record.name,
            state=run_state(control, counts, record.stop),
            archived=control.archived_at is not None,
            counts=counts,
            created_at=datetime.fromtimestamp(record.created_at, UTC),
        )
        if state is None or run.state is state:
            matching.append(run)
    page = matching[offset : offset + limit]
    following = offset + limit
    return RunPage(
        runs=page,
        total=len(matching),
        offset=offset,
        limit=limit,
        next_offset=following if following < len(matching) else None,
    )


def _summary(trial_id: str, row: TrialRow) -> dict[str, Any]:
    result = row.result if row.state in FINISHED else None
    return {
        "trial_id": trial_id,
        "task_id": row.spec.task_id,
        "agent": row.spec.agent_name,
        "model": row.spec.model,
        "run_index": row.spec.run_index,
        "state": row.state,
        "outcome": result.outcome if result else None,
        "score": result.score if result else None,
        "attempts": row.attempts,
        "updated_at": datetime.fromtimestamp(row.updated_at, UTC),
    }


def list_trials(
    store: TrialStore, name: str, where: TrialFilter | None = None, *, limit: int = 100, offset: int = 0
) -> TrialPage:
    """One page of the run's trials (by agent, task, run index, id) matching ``where``."""
    require_run(store, name)
    _page_bounds(limit, offset)
    rows, total = store.trial_page(name, where or TrialFilter(), limit=limit, offset=offset)
    following = offset + limit
    return TrialPage(
        trials=[TrialSummary(**_summary(trial_id, row)) for trial_id, row in rows],
        total=total,
        offset=offset,
        limit=limit,
        next_offset=following if following < total else None,
    )


def _verdicts(uri: str | None) -> tuple[list[CriterionVerdict], str | None]:
    if not uri:
        return [], None
    from orchestrator.viewer.data import load_json_artifact

    try:
        grade = load_json_artifact(uri) or {}
        return [CriterionVerdict.model_validate(item) for item in grade.get("criteria") or []], None
    except AtollError as exc:
        return [], exc.message
    except (ValueError, ValidationError) as exc:  # not JSON, or not a grade
        return [], f"grade {uri}: {str(exc).splitlines()[0]}"


def trial_detail(store: TrialStore, name: str, trial_id: str) -> TrialDetail:
    """One trial: outcome, score, how it ended, its verdicts and its artifacts' URIs.
    AtollError ``unknown_trial`` when the run has no such trial."""
    require_run(store, name)
    row = store.trial_row(name, trial_id)
    if row is None:
        raise AtollError(ErrorCode.unknown_trial, f"no trial {trial_id!r} in run {name!r}")
    result = row.result if row.state in FINISHED else None
    verdicts, problem = _verdicts(result.grade_uri if result else None)
    return TrialDetail(
        **_summary(trial_id, row),
        end_reason=result.run_status if result else None,
        error=result.error if result else None,
        duration_s=result.duration_s if result else None,
        cost_usd=result.cost_usd if result else None,
        judge_id=result.judge_id if result else None,
        finished_at=result.finished_at if result else None,
        verdicts=verdicts,
        verdicts_problem=problem,
        artifacts=ArtifactLinks(
            trajectory=result.trajectory_uri if result else None,
            grade=result.grade_uri if result else None,
            snapshot_before=result.snapshot_before_uri if result else None,
            snapshot_after=result.snapshot_after_uri if result else None,
        ),
    )


# --- verbs -----------------------------------------------------------------------------------


def _change(store: TrialStore, name: str, action: str, changed: int = 0, stopped: int = 0) -> RunChange:
    record = store.run_record(name)
    control = store.run_controls(name).get(name, RunControl())
    counts = store.counts(name)
    state = run_state(control, counts, record.stop if record else None)
    return _announce(
        RunChange(
            name=name, action=action, state=state, trials_changed=changed, stopped=stopped, counts=counts
        )
    )


def _refuse(name: str, state: RunState, verb: str, hint: str = "") -> AtollError:
    return AtollError(ErrorCode.run_not_active, f"run {name!r} is {state.value}: nothing to {verb}{hint}")


def _refuse_archived(name: str, status: RunStatus, verb: str) -> None:
    # Workers do not look at the archive mark: a resumed or requeued archived run would run
    # hidden from the run list, its event log already pruned.
    if status.archived:
        raise AtollError(
            ErrorCode.run_not_active,
            f"run {name!r} is archived: nothing to {verb} (an archived run stays as it is)",
        )


def cancel_run(store: TrialStore, name: str, in_flight: InFlight = InFlight.finish) -> RunChange:
    """Stop scheduling the run for good: its pending trials are cancelled (never leased again)
    and its running ones finish (``finish``) or are stopped now, their leases taken back
    (``stop``). The report says it was cancelled. ``resume`` undoes it."""
    status = run_status(store, name)
    if status.state is RunState.finished:
        raise _refuse(name, status.state, "cancel")
    waiting, stopped = store.cancel_run(name, stop_in_flight=in_flight is InFlight.stop)
    return _change(store, name, "cancel", waiting, stopped)


def pause_run(store: TrialStore, name: str) -> RunChange:
    """No worker leases a trial of the run until it is resumed; running trials finish."""
    status = run_status(store, name)
    if status.state in (RunState.cancelled, RunState.finished):
        raise _refuse(name, status.state, "pause")
    store.set_control(name, PAUSED)
    return _change(store, name, "pause")


def resume_run(store: TrialStore, name: str) -> RunChange:
    """A paused run is leasable again; a cancelled one too, its cancelled trials pending again
    (how many: ``trials_changed``). A run neither paused nor cancelled is left as it is."""
    status = run_status(store, name)
    _refuse_archived(name, status, "resume")
    changed = 0
    if status.state is RunState.cancelled:
        changed = store.uncancel_run(name)
    elif store.run_controls(name)[name].control == PAUSED:
        store.set_control(name, RUNNING)
    return _change(store, name, "resume", changed)


def requeue_run(store: TrialStore, name: str) -> RunChange:
    """Trials whose infrastructure retries were spent (``infra_error``) are pending again."""
    _refuse_archived(name, run_status(store, name), "requeue")
    return _change(store, name, "requeue", store.requeue_errored(name))


def set_concurrency(store: TrialStore, name: str, concurrency: int | None) -> RunChange:
    """Cap the run's trials in flight across every worker at ``concurrency`` (None: no cap);
    workers obey it from their next lease (trials already running above it finish). A worker
    never runs more than its own slots (``--concurrency``; ``atoll run``: the experiment's)."""
    require_run(store, name)
    if concurrency is not None and concurrency < 1:
        raise AtollError(ErrorCode.bad_input, f"concurrency {concurrency}: must be 1 or more (or none)")
    store.set_max_in_flight(name, concurrency)
    return _change(store, name, "concurrency")


def archive_run(store: TrialStore, name: str) -> RunChange:
    """Hide the run from the default run list; its trials, results and artifacts are kept and
    it is still read by name (its event log and webhook deliveries are pruned). Refused while trials of it may still be leased (cancel or pause
    it first, or let it finish)."""
    status = run_status(store, name)
    if status.state in (RunState.queued, RunState.running, RunState.stopped) or status.counts["leased"]:
        raise _refuse(name, status.state, "archive while its trials may run", "; cancel or pause it first")
    store.set_archived(name, True)
    store.prune_events(name)  # its event log and webhook deliveries go (orchestrator.store_events)
    return _change(store, name, "archive")
