"""Run-level records of the trial store: spec and fingerprint, archives, money spent, what
is still outstanding, and the reads reports are built from (part of ``TrialStore``)."""

from __future__ import annotations

import json
import math
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import and_, case, delete, func, insert, or_, select, update
from sqlalchemy.engine import Connection

from atoll.errors import AtollError, ErrorCode
from atoll.jsonio import dumps_strict, model_json
from atoll.trial import TrialResult, TrialSpec, TrialState
from orchestrator.store_delete import run_exists
from orchestrator.store_parts import StoreParts
from orchestrator.store_retry import retried
from orchestrator.store_schema import TRIAL_FIELDS, archived_trials, attempts, experiments, trials

if TYPE_CHECKING:
    from orchestrator.store import Budget


def leased_in_flight(tx: Connection, experiment: str, now: float) -> int:
    """Trials of ``experiment`` under a lease that has not expired at ``now``."""
    return int(
        tx.execute(
            select(func.count()).where(
                and_(
                    trials.c.experiment == experiment,
                    trials.c.state == TrialState.leased.value,
                    trials.c.lease_expires >= now,
                )
            )
        ).scalar_one()
    )


@dataclass(frozen=True)
class RunRecord:
    name: str
    spec: dict[str, Any]
    fingerprint: str | None  # None: recorded before runs had fingerprints
    identity: dict[str, Any] | None
    created_at: float
    # Why the run last stopped early: {"reason", "detail", "at"}; None while it runs or ran to the end.
    stop: dict[str, Any] | None = None


# The states of a trial with its final result (done, or out of infrastructure retries).
FINISHED = (TrialState.done, TrialState.infra_error)


@dataclass(frozen=True)
class TrialRow:
    spec: TrialSpec
    result: TrialResult | None
    state: TrialState
    attempts: int
    updated_at: float


# The columns a TrialRow is read from, in _trial_row's order.
_TRIAL_ROW_COLUMNS = (
    trials.c.spec_json,
    trials.c.result_json,
    trials.c.state,
    trials.c.attempts,
    trials.c.updated_at,
)


def _trial_row(
    spec_json: str, result_json: str | None, state: str, attempts: int, updated_at: float
) -> TrialRow:
    return TrialRow(
        TrialSpec.model_validate_json(spec_json),
        TrialResult.model_validate_json(result_json) if result_json else None,
        TrialState(state),
        attempts,
        updated_at,
    )


def is_finished(row: TrialRow) -> bool:
    """A row with its final result (done, or out of infrastructure retries)."""
    return row.result is not None and row.state in FINISHED


def one_per_key(rows: list[TrialRow]) -> tuple[list[TrialRow], int]:
    """One row per (agent, task, run index) — a finished one before an unfinished one, then
    the latest — and how many were dropped. Reports, the viewer and comparisons count a trial
    recorded twice for one key (stores written before runs had fingerprints) once, so."""
    chosen: dict[tuple[str, str, int], TrialRow] = {}
    duplicates = 0
    for row in rows:
        key = (row.spec.agent_name, row.spec.task_id, row.spec.run_index)
        if key in chosen:
            duplicates += 1
            if (is_finished(row), row.updated_at) < (is_finished(chosen[key]), chosen[key].updated_at):
                continue
        chosen[key] = row
    return list(chosen.values()), duplicates


@dataclass(frozen=True)
class Outstanding:
    """Trials of one run that are not finished: waiting, running, or held by a lease that
    expired (its worker is gone; any worker may take it)."""

    pending: int = 0
    leased: int = 0
    expired: int = 0

    @property
    def runnable(self) -> int:
        return self.pending + self.expired


class RunRecords(StoreParts):
    """Mixin of TrialStore; uses its ``engine``, ``_tx``, ``retry`` and ``_append_events``."""

    @retried
    def save_experiment(
        self,
        name: str,
        spec: dict[str, Any],
        *,
        fingerprint: str | None = None,
        identity: dict[str, Any] | None = None,
        keep_stop: bool = False,
    ) -> None:
        """Create or update a run's record: its spec (and so its policy), and its fingerprint.
        A recorded stop is cleared (the run is being started again) unless ``keep_stop`` (a
        regrade records a new judge without running anything)."""
        values: dict[str, Any] = {"spec_json": dumps_strict(spec)}
        if not keep_stop:
            values["stop_json"] = None
        if fingerprint is not None:
            values.update(fingerprint=fingerprint, identity_json=dumps_strict(identity, sort_keys=True))
        with self._tx() as tx:
            row = tx.execute(select(experiments.c.name).where(experiments.c.name == name)).first()
            if row is None:
                tx.execute(experiments.insert().values(name=name, created_at=time.time(), **values))
            else:
                tx.execute(update(experiments).where(experiments.c.name == name).values(**values))

    @retried
    def record_stop(self, name: str, reason: str, detail: str) -> None:
        """Record why the run stopped before its trials were done (``infra_error_rate``,
        ``model_configuration``, ``cost_ceiling``, ``interrupted``, ``cancelled``); reports show
        it first. Logged as ``run.cancelled`` for ``cancelled``, else ``run.aborted``."""
        stop = {"reason": reason, "detail": detail, "at": time.time()}
        with self._tx() as tx:
            tx.execute(
                update(experiments).where(experiments.c.name == name).values(stop_json=dumps_strict(stop))
            )
            if not run_exists(tx, name):  # deleted meanwhile (a runner stopping late): no event
                return
            # A cancel is the user's stop (orchestrator.lifecycle); every other reason is an abort.
            kind = "run.cancelled" if reason == "cancelled" else "run.aborted"
            self._append_events(tx, [(name, kind, {"reason": reason, "detail": detail})])

    @retried
    def run_record(self, name: str) -> RunRecord | None:
        with self.engine.connect() as connection:
            row: tuple[Any, ...] | None = connection.execute(
                select(
                    experiments.c.spec_json,
                    experiments.c.fingerprint,
                    experiments.c.identity_json,
                    experiments.c.created_at,
                    experiments.c.stop_json,
                ).where(experiments.c.name == name)
            ).first()
        if row is None:
            return None
        spec_json, fingerprint, identity_json, created_at, stop_json = row
        return RunRecord(
            name,
            json.loads(spec_json),
            fingerprint,
            json.loads(identity_json) if identity_json else None,
            created_at,
            json.loads(stop_json) if stop_json else None,
        )

    @retried
    def trial_ids(self, experiment: str) -> set[str]:
        with self.engine.connect() as connection:
            return set(
                connection.execute(
                    select(trials.c.trial_id).where(trials.c.experiment == experiment)
                ).scalars()
            )

    @retried
    def archive_trials(
        self, experiment: str, keep: set[str], *, archive: str, fingerprint: str | None
    ) -> int:
        """Move the run's trials whose id is not in ``keep`` to ``archived_trials`` under the
        label ``archive`` (their rows and attempt history are kept, never deleted). Returns
        how many moved. A worker still running one of them cannot complete it any more."""
        now = time.time()
        with self._tx() as tx:
            current: Iterable[str] = tx.execute(
                select(trials.c.trial_id).where(trials.c.experiment == experiment)
            ).scalars()
            ids = [trial_id for trial_id in current if trial_id not in keep]
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                where = and_(trials.c.experiment == experiment, trials.c.trial_id.in_(chunk))
                source = select(*[trials.c[name] for name in TRIAL_FIELDS]).where(where)
                rows = [dict(row._mapping) for row in tx.execute(source)]
                tx.execute(
                    insert(archived_trials),
                    [
                        {**row, "archive": archive, "archived_at": now, "archived_fingerprint": fingerprint}
                        for row in rows
                    ],
                )
                tx.execute(delete(trials).where(where))
            if ids:
                moved = {"archive": archive, "trials": len(ids)}
                self._append_events(tx, [(experiment, "run.trials_archived", moved)])
        return len(ids)

    @retried
    def archives(self, experiment: str) -> list[dict[str, Any]]:
        """The run's archives, oldest first: label, when, the fingerprint they were recorded
        under, and their trials by state and outcome."""
        with self.engine.connect() as connection:
            rows: Sequence[tuple[Any, ...]] = connection.execute(
                select(
                    archived_trials.c.archive,
                    archived_trials.c.archived_at,
                    archived_trials.c.archived_fingerprint,
                    archived_trials.c.state,
                    archived_trials.c.outcome,
                    func.count(),
                )
                .where(archived_trials.c.experiment == experiment)
                .group_by(
                    archived_trials.c.archive,
                    archived_trials.c.archived_at,
                    archived_trials.c.archived_fingerprint,
                    archived_trials.c.state,
                    archived_trials.c.outcome,
                )
            ).all()
        found: dict[str, dict[str, Any]] = {}
        for archive, archived_at, fingerprint, state, outcome, count in rows:
            entry = found.setdefault(
                archive,
                {
                    "archive": archive,
                    "archived_at": archived_at,
                    "fingerprint": fingerprint,
                    "trials": 0,
                    "by_outcome": {},
                },
            )
            entry["trials"] += count
            key = (
                outcome
                if state in (TrialState.done.value, TrialState.infra_error.value) and outcome
                else state
            )
            entry["by_outcome"][key] = entry["by_outcome"].get(key, 0) + count
        return sorted(found.values(), key=lambda entry: entry["archived_at"])

    def _budget_room(
        self, tx: Connection, experiment: str, budget: Budget, limit: int, now: float
    ) -> tuple[int, bool]:
        """How many trials ``budget`` lets start now, and whether it is spent for good. Runs
        inside the lease transaction with the run's row locked, so workers take turns."""
        lock = select(experiments.c.name).where(experiments.c.name == experiment)
        if not self.is_sqlite:  # SQLite's BEGIN IMMEDIATE already serialises writers
            lock = lock.with_for_update()
        tx.execute(lock)
        spent = self.spent_in(tx, experiment)
        priced = tx.execute(
            select(func.count(), func.avg(attempts.c.cost_usd)).where(
                and_(
                    attempts.c.experiment == experiment,
                    attempts.c.cost_usd.is_not(None),
                    attempts.c.outcome != TrialState.infra_error.value,
                )
            )
        ).one()
        in_flight = leased_in_flight(tx, experiment, now)
        if spent >= budget.ceiling_usd:
            return 0, True
        if priced[0] == 0:
            return min(limit, max(0, budget.unpriced_in_flight - in_flight)), False
        mean = float(priced[1] or 0.0)
        if mean <= 0:
            return limit, False
        # spent + mean × (in flight + n) <= ceiling
        room = math.floor((budget.ceiling_usd - spent) / mean + 1e-9) - in_flight
        if room <= 0:
            return 0, in_flight == 0
        return min(limit, room), False

    @retried
    def replace_result(self, experiment: str, trial_id: str, result: TrialResult, *, note: str) -> None:
        """Swap a finished trial's result (a regrade), keeping the old one in the history."""
        with self._tx() as tx:
            row = tx.execute(
                select(trials.c.result_json, trials.c.attempts).where(
                    and_(trials.c.experiment == experiment, trials.c.trial_id == trial_id)
                )
            ).first()
            if row is None:
                raise AtollError(ErrorCode.unknown_trial, f"no trial {trial_id} in run {experiment!r}")
            tx.execute(
                update(trials)
                .where(and_(trials.c.experiment == experiment, trials.c.trial_id == trial_id))
                .values(outcome=result.outcome.value, result_json=model_json(result), updated_at=time.time())
            )
            tx.execute(
                attempts.insert().values(
                    experiment=experiment,
                    trial_id=trial_id,
                    attempt=row[1],
                    worker=note,
                    outcome=result.outcome.value,
                    accepted=1,
                    error=None,
                    result_json=row[0],
                    finished_at=time.time(),
                    cost_usd=None,  # a regrade is not part of the run's budget
                )
            )
            regraded = {"trial_id": trial_id, "outcome": result.outcome.value, "score": result.score}
            self._append_events(tx, [(experiment, "trial.regraded", regraded)])

    @staticmethod
    def spent_in(tx: Connection, experiment: str) -> float:
        """Money spent on the run's current trials: every attempt, accepted or not."""
        current = select(trials.c.trial_id).where(trials.c.experiment == experiment)
        spent: float = tx.execute(
            select(func.coalesce(func.sum(attempts.c.cost_usd), 0.0)).where(
                and_(attempts.c.experiment == experiment, attempts.c.trial_id.in_(current))
            )
        ).scalar_one()
        return float(spent)

    @retried
    def spent_usd(self, experiment: str) -> float:
        with self.engine.connect() as connection:
            return self.spent_in(connection, experiment)

    @retried
    def outstanding(self, experiment: str | None = None) -> dict[str, Outstanding]:
        """Unfinished trials per run (of one run, or of every run), runs with none left out.
        A cancelled run's pending trials (enqueued or requeued after the cancel) are not: no
        worker will lease them until the run is resumed (orchestrator.store_control)."""
        now = time.time()
        expired = and_(trials.c.state == TrialState.leased.value, trials.c.lease_expires < now)
        cancelled_runs = select(experiments.c.name).where(experiments.c.control == "cancelled")
        query = (
            select(trials.c.experiment, trials.c.state, func.count(), func.sum(case((expired, 1), else_=0)))
            .where(
                or_(
                    trials.c.state == TrialState.leased.value,
                    and_(
                        trials.c.state == TrialState.pending.value,
                        trials.c.experiment.not_in(cancelled_runs),
                    ),
                )
            )
            .group_by(trials.c.experiment, trials.c.state)
        )
        if experiment is not None:
            query = query.where(trials.c.experiment == experiment)
        with self.engine.connect() as connection:
            rows: Sequence[tuple[Any, ...]] = connection.execute(query).all()
        counts: dict[str, dict[str, int]] = defaultdict(lambda: {"pending": 0, "leased": 0, "expired": 0})
        for name, state, count, stale in rows:
            counts[name][state] = int(count)
            if state == TrialState.leased.value:
                counts[name]["expired"] = int(stale or 0)
        return {name: Outstanding(**values) for name, values in counts.items()}

    # --- reading ----------------------------------------------------------------------------

    @retried
    def counts(self, experiment: str) -> dict[str, int]:
        with self.engine.connect() as connection:
            rows: Sequence[tuple[Any, ...]] = connection.execute(
                select(trials.c.state, func.count())
                .where(trials.c.experiment == experiment)
                .group_by(trials.c.state)
            ).all()
        counts = {state.value: 0 for state in TrialState}
        counts.update({state: count for state, count in rows})
        counts["total"] = sum(count for _, count in rows)
        return counts

    @retried
    def results(self, experiment: str) -> list[tuple[TrialSpec, TrialResult | None, TrialState, int]]:
        """Every trial of the experiment: (spec, final result or None, state, attempts)."""
        return [(row.spec, row.result, row.state, row.attempts) for row in self.trial_rows(experiment)]

    @retried
    def trial_rows(self, experiment: str) -> list[TrialRow]:
        """Every (current, not archived) trial of the experiment, ordered by agent, task, run."""
        with self.engine.connect() as connection:
            rows: Sequence[tuple[Any, ...]] = connection.execute(
                select(*_TRIAL_ROW_COLUMNS)
                .where(trials.c.experiment == experiment)
                .order_by(trials.c.agent_name, trials.c.task_id, trials.c.run_index, trials.c.updated_at)
            ).all()
        return [_trial_row(*row) for row in rows]

    @retried
    def change_marker(self, experiment: str) -> tuple[int, float, int, str | None]:
        """What changes whenever a trial of the run is enqueued, leased, finished, regraded or
        archived, or the run is saved with another configuration: (trials, latest update,
        archived trials, fingerprint). Cheap (three small queries), so a reader can cache what
        it computed from the run until the marker moves."""
        with self.engine.connect() as connection:
            marker: tuple[Any, ...] = connection.execute(
                select(func.count(), func.max(trials.c.updated_at)).where(trials.c.experiment == experiment)
            ).one()
            count, latest = marker
            archived = connection.execute(
                select(func.count())
                .select_from(archived_trials)
                .where(archived_trials.c.experiment == experiment)
            ).scalar_one()
            fingerprint = connection.execute(
                select(experiments.c.fingerprint).where(experiments.c.name == experiment)
            ).scalar()
        return int(count), float(latest or 0.0), int(archived), fingerprint

    @retried
    def runs_holding(self, trial_id: str) -> list[str]:
        """The runs holding a trial id, oldest run first (an indexed lookup, not a scan)."""
        with self.engine.connect() as connection:
            return list(
                connection.execute(
                    select(trials.c.experiment)
                    .join(experiments, experiments.c.name == trials.c.experiment)
                    .where(trials.c.trial_id == trial_id)
                    .order_by(experiments.c.created_at)
                ).scalars()
            )

    @retried
    def trial_row(self, experiment: str, trial_id: str) -> TrialRow | None:
        """One trial of a run by its id, or None."""
        with self.engine.connect() as connection:
            row: tuple[Any, ...] | None = connection.execute(
                select(*_TRIAL_ROW_COLUMNS).where(
                    and_(trials.c.experiment == experiment, trials.c.trial_id == trial_id)
                )
            ).first()
        return None if row is None else _trial_row(*row)

    @retried
    def attempt_history(self, experiment: str, trial_id: str | None = None) -> list[dict[str, Any]]:
        query = select(attempts).where(attempts.c.experiment == experiment).order_by(attempts.c.id)
        if trial_id is not None:
            query = query.where(attempts.c.trial_id == trial_id)
        with self.engine.connect() as connection:
            return [dict(row._mapping) for row in connection.execute(query)]

    @retried
    def experiment_spec(self, name: str) -> dict[str, Any] | None:
        with self.engine.connect() as connection:
            row = connection.execute(
                select(experiments.c.spec_json).where(experiments.c.name == name)
            ).first()
        return json.loads(row[0]) if row else None

    @retried
    def experiments(self) -> list[str]:
        with self.engine.connect() as connection:
            return list(
                connection.execute(select(experiments.c.name).order_by(experiments.c.created_at)).scalars()
            )
