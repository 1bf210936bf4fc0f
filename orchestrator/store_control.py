"""What clients ask of a run, kept in the trial store (part of ``TrialStore``): pause, cancel,
a run-wide concurrency cap, archive, requeue of errored trials, idempotency keys of
submissions, and the paged reads the lifecycle API serves (:mod:`orchestrator.lifecycle`).

Workers obey it where it counts, inside the lease transaction (:meth:`RunControls.lease_room`):
a paused or cancelled run gives no trial to any worker, and a capped run never has more
trials leased at once than its cap, whichever workers hold them.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Select, and_, func, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql import ColumnElement

from atoll.errors import AtollError, ErrorCode
from atoll.jsonio import dumps_strict
from atoll.trial import TrialResult, TrialSpec, TrialState
from orchestrator.store_parts import StoreParts
from orchestrator.store_retry import retried
from orchestrator.store_runs import TrialRow, leased_in_flight
from orchestrator.store_schema import attempts, experiments, submissions, trials

if TYPE_CHECKING:
    from orchestrator.store import Lease

RUNNING, PAUSED, CANCELLED = "running", "paused", "cancelled"

#: An idempotency key claimed this long ago whose request never got its reply (the API that
#: was answering it stopped) may be claimed again: otherwise the key answered "still being
#: answered; retry" for ever and the client's retries could never succeed.
ABANDONED_SUBMISSION_S = 900.0
#: How long an idempotency key is kept: older ones are forgotten when a new key is claimed, so
#: the ``submissions`` table holds a day of keys, not every key ever sent (the same key and
#: request later is a new submission, which plans nothing new: trials are enqueued once).
SUBMISSION_KEPT_S = 24 * 3600.0


@dataclass(frozen=True)
class RunControl:
    """What was asked of one run: ``control`` (running, paused, cancelled), its run-wide cap
    on trials in flight (None: none) and when it was archived (None: not archived)."""

    control: str = RUNNING
    max_in_flight: int | None = None
    archived_at: float | None = None


@dataclass(frozen=True)
class RunHeader:
    """A run as the run list shows it: name, when first submitted, why it last stopped early."""

    name: str
    created_at: float
    stop: dict[str, Any] | None


@dataclass(frozen=True)
class TrialFilter:
    """Which trials of a run to read; None matches everything."""

    state: str | None = None
    outcome: str | None = None
    agent: str | None = None
    task: str | None = None


class RunControls(StoreParts):
    """Mixin of TrialStore; uses its ``engine``, ``_tx``, ``is_sqlite``, ``retry`` and
    ``_append_events`` (every change is logged in its own transaction)."""

    # --- what was asked ---------------------------------------------------------------------

    @retried
    def run_controls(self, name: str | None = None) -> dict[str, RunControl]:
        """The control record of one run (or of every run), by run name."""
        query = select(
            experiments.c.name, experiments.c.control, experiments.c.max_in_flight, experiments.c.archived_at
        )
        if name is not None:
            query = query.where(experiments.c.name == name)
        with self.engine.connect() as connection:
            rows: Sequence[tuple[Any, ...]] = connection.execute(query).all()
        return {run: RunControl(control or RUNNING, cap, archived) for run, control, cap, archived in rows}

    @retried
    def set_control(self, name: str, control: str) -> None:
        """Mark the run running or paused (cancel has its own verb: it changes trials too);
        logged as ``run.paused`` or ``run.resumed``. A cancelled run is left cancelled (only
        :meth:`uncancel_run` undoes a cancel): a pause racing a cancel never turns it back into
        a run whose cancelled trials a resume would leave behind."""
        with self._tx() as tx:
            changed = tx.execute(
                update(experiments)
                .where(
                    and_(
                        experiments.c.name == name,
                        experiments.c.control.is_distinct_from(CANCELLED),
                    )
                )
                .values(control=control)
            ).rowcount
            if changed:
                kind = "run.paused" if control == PAUSED else "run.resumed"
                self._append_events(tx, [(name, kind, {"trials": 0})])

    @retried
    def cancel_run(self, name: str, *, stop_in_flight: bool) -> tuple[int, int]:
        """Cancel the run: no worker leases it again, its pending trials (and leases whose worker
        is gone) become ``cancelled``; with ``stop_in_flight`` its leased trials too, their leases
        taken back (the workers running them notice and stop them; a result they still send is
        kept as history only). The run's stop is recorded (reports show it) and logged as
        ``run.cancelled``. Returns (trials cancelled that were not running, running trials
        stopped)."""
        now = time.time()
        with self._tx() as tx:
            row: tuple[Any, ...] = tx.execute(
                select(experiments.c.control, experiments.c.stop_json).where(experiments.c.name == name)
            ).one()
            control, stop_json = row
            # Cancelled again (a client retrying, or stopping what it first let finish): what the
            # first cancel did stays counted, and a cancel that changes nothing is not logged.
            earlier = json.loads(stop_json) if control == CANCELLED and stop_json else {}
            tx.execute(update(experiments).where(experiments.c.name == name).values(control=CANCELLED))
            waiting = self._cancel_where(
                tx,
                name,
                (trials.c.state == TrialState.pending.value)
                | and_(trials.c.state == TrialState.leased.value, trials.c.lease_expires < now),
                now,
            )
            stopped = (
                self._cancel_where(tx, name, trials.c.state == TrialState.leased.value, now)
                if stop_in_flight
                else 0
            )
            if control == CANCELLED and not waiting and not stopped:
                return 0, 0
            total_waiting = waiting + int(earlier.get("cancelled", 0))
            total_stopped = stopped + int(earlier.get("stopped", 0))
            running = tx.execute(
                select(func.count()).where(
                    and_(trials.c.experiment == name, trials.c.state == TrialState.leased.value)
                )
            ).scalar_one()
            detail = (
                f"cancelled: {total_waiting} trials not run"
                + (f", {total_stopped} running trials stopped" if total_stopped else "")
                + (f", {running} running trials left to finish" if running else "")
            )
            stop = {
                "reason": "cancelled",
                "detail": detail,
                "at": earlier.get("at", now),
                "cancelled": total_waiting,
                "stopped": total_stopped,
            }
            tx.execute(
                update(experiments).where(experiments.c.name == name).values(stop_json=dumps_strict(stop))
            )
            payload = {"reason": "cancelled", "detail": detail, "cancelled": waiting, "stopped": stopped}
            self._append_events(tx, [(name, "run.cancelled", payload)])
        return waiting, stopped

    @staticmethod
    def _cancel_where(tx: Connection, name: str, condition: ColumnElement[bool], now: float) -> int:
        return tx.execute(
            update(trials)
            .where(and_(trials.c.experiment == name, condition))
            .values(
                state=TrialState.cancelled.value,
                lease_owner=None,
                lease_token=None,
                lease_expires=None,
                updated_at=now,
            )
        ).rowcount

    @retried
    def uncancel_run(self, name: str) -> int:
        """Undo a cancel: the run is running again, its cancelled trials pending, its recorded
        stop cleared; logged as ``run.resumed``. Returns how many trials are pending again."""
        with self._tx() as tx:
            tx.execute(
                update(experiments).where(experiments.c.name == name).values(control=RUNNING, stop_json=None)
            )
            moved = self._move(tx, name, TrialState.cancelled, TrialState.pending)
            self._append_events(tx, [(name, "run.resumed", {"trials": moved})])
            return moved

    @retried
    def requeue_errored(self, name: str) -> int:
        """Trials of the run whose infrastructure retries were spent (``infra_error``) become
        pending again (one more attempt each, as a resume gives them). Returns how many."""
        with self._tx() as tx:
            moved = self._move(tx, name, TrialState.infra_error, TrialState.pending)
            if moved:
                self._append_events(tx, [(name, "run.requeued", {"trials": moved})])
            return moved

    @staticmethod
    def _move(tx: Connection, name: str, source: TrialState, target: TrialState) -> int:
        return tx.execute(
            update(trials)
            .where(and_(trials.c.experiment == name, trials.c.state == source.value))
            .values(state=target.value, lease_owner=None, lease_token=None, updated_at=time.time())
        ).rowcount

    @retried
    def set_max_in_flight(self, name: str, cap: int | None) -> None:
        """Cap the run's trials in flight across every worker (None: no run-wide cap); logged as
        ``run.resized``."""
        with self._tx() as tx:
            tx.execute(update(experiments).where(experiments.c.name == name).values(max_in_flight=cap))
            self._append_events(tx, [(name, "run.resized", {"concurrency": cap})])

    @retried
    def set_archived(self, name: str, archived: bool) -> None:
        with self._tx() as tx:
            tx.execute(
                update(experiments)
                .where(experiments.c.name == name)
                .values(archived_at=time.time() if archived else None)
            )

    def lease_room(self, tx: Connection, experiment: str, limit: int, now: float) -> int:
        """How many of ``limit`` trials the run's control lets be leased now, inside the lease
        transaction: none while it is paused or cancelled (a cancelled run's expired leases are
        cancelled here rather than taken over), at most its cap minus its live leases."""
        row: tuple[Any, ...] | None = tx.execute(
            select(experiments.c.control, experiments.c.max_in_flight).where(experiments.c.name == experiment)
        ).first()
        if row is None:
            return limit
        control, cap = row
        if control == CANCELLED:
            expired = and_(trials.c.state == TrialState.leased.value, trials.c.lease_expires < now)
            self._cancel_where(tx, experiment, expired, now)
            return 0
        if control == PAUSED:
            return 0
        if cap is None:
            return limit
        lock = select(experiments.c.name).where(experiments.c.name == experiment)
        if not self.is_sqlite:  # SQLite's BEGIN IMMEDIATE already serialises writers
            tx.execute(lock.with_for_update())
        in_flight = leased_in_flight(tx, experiment, now)
        return max(0, min(limit, cap - in_flight))

    @staticmethod
    def held_back() -> Select[str]:
        """Runs no worker may lease from (paused or cancelled), as a subquery of run names."""
        return select(experiments.c.name).where(experiments.c.control.in_((PAUSED, CANCELLED)))

    @retried
    def stopped_leases(self, leases: Iterable[Lease]) -> dict[tuple[str, str], str]:
        """Of these leases, those their holder should stop, keyed by (run, trial id): the
        trial was cancelled meanwhile (a cancel that stops running trials; ``"cancelled"``), or
        the lease no longer holds it (another worker took it over after it expired, or it was
        given back or finished elsewhere; ``"lost"``) — a result would be history only."""
        by_run: dict[str, dict[str, str]] = defaultdict(dict)
        for lease in leases:
            by_run[lease.experiment][lease.trial_id] = lease.token
        found: dict[tuple[str, str], str] = {}
        with self.engine.connect() as connection:
            for run, tokens in by_run.items():
                rows: Iterable[tuple[Any, ...]] = connection.execute(
                    select(trials.c.trial_id, trials.c.state, trials.c.lease_token).where(
                        and_(trials.c.experiment == run, trials.c.trial_id.in_(list(tokens)))
                    )
                )
                for trial_id, state, token in rows:
                    if state == TrialState.cancelled.value:
                        found[(run, trial_id)] = "cancelled"
                    elif state != TrialState.leased.value or token != tokens[trial_id]:
                        found[(run, trial_id)] = "lost"
        return found

    # --- idempotency keys -------------------------------------------------------------------

    def reserve_submission(self, key: str, digest: str) -> tuple[str, str | None]:
        """Claim idempotency ``key`` for a request of ``digest``. Returns (holder, None) when the
        key is new (answer the request, then :meth:`record_submission` or
        :meth:`drop_submission`), or ("", reply) when the same request was answered before.
        Raises AtollError ``idempotency_conflict`` when the key was used with another request,
        ``idempotency_in_progress`` while its first request is still being answered (for at
        most :data:`ABANDONED_SUBMISSION_S`: then the key is claimed again). Keys older than
        :data:`SUBMISSION_KEPT_S` are forgotten here."""
        return self._reserve_submission(key, digest, uuid.uuid4().hex)

    @retried
    def _reserve_submission(self, key: str, digest: str, holder: str) -> tuple[str, str | None]:
        try:
            with self._tx() as tx:
                tx.execute(
                    submissions.delete().where(submissions.c.created_at < time.time() - SUBMISSION_KEPT_S)
                )
                tx.execute(
                    submissions.insert().values(
                        key=key, request_digest=digest, holder=holder, created_at=time.time()
                    )
                )
            return holder, None
        except IntegrityError:
            pass
        with self.engine.connect() as connection:
            row: tuple[Any, ...] | None = connection.execute(
                select(
                    submissions.c.request_digest,
                    submissions.c.holder,
                    submissions.c.reply_json,
                    submissions.c.created_at,
                ).where(submissions.c.key == key)
            ).first()
        if row is None:  # dropped meanwhile (its first request failed): claim it now
            return self._reserve_submission(key, digest, holder)
        stored_digest, stored_holder, reply, claimed_at = row
        if stored_holder == holder and reply is None:  # our own insert landed on an earlier try
            return holder, None
        if stored_digest != digest:
            raise AtollError(
                ErrorCode.idempotency_conflict,
                f"Idempotency-Key {key!r} was already used with another request; use a new key",
            )
        if reply is None and time.time() - claimed_at >= ABANDONED_SUBMISSION_S:
            with self._tx() as tx:
                taken = tx.execute(
                    update(submissions)
                    .where(
                        and_(
                            submissions.c.key == key,
                            submissions.c.holder == stored_holder,
                            submissions.c.reply_json.is_(None),
                        )
                    )
                    .values(holder=holder, created_at=time.time())
                ).rowcount
            return (holder, None) if taken else self._reserve_submission(key, digest, holder)
        if reply is None:
            raise AtollError(
                ErrorCode.idempotency_in_progress,
                f"Idempotency-Key {key!r}: the first request with it is still being answered; retry",
            )
        return "", reply

    @retried
    def record_submission(self, key: str, holder: str, reply_json: str) -> None:
        """Keep the reply of the request that claimed ``key`` (replayed to the same request)."""
        with self._tx() as tx:
            tx.execute(
                update(submissions)
                .where(and_(submissions.c.key == key, submissions.c.holder == holder))
                .values(reply_json=reply_json)
            )

    @retried
    def drop_submission(self, key: str, holder: str) -> None:
        """Forget a claimed key whose request failed, so the client may send it again."""
        with self._tx() as tx:
            tx.execute(
                submissions.delete().where(
                    and_(
                        submissions.c.key == key,
                        submissions.c.holder == holder,
                        submissions.c.reply_json.is_(None),
                    )
                )
            )

    # --- paged reads ------------------------------------------------------------------------

    @retried
    def run_overview(self) -> list[RunHeader]:
        """Every run, oldest first."""
        with self.engine.connect() as connection:
            rows: Sequence[tuple[Any, ...]] = connection.execute(
                select(experiments.c.name, experiments.c.created_at, experiments.c.stop_json).order_by(
                    experiments.c.created_at
                )
            ).all()
        return [RunHeader(name, created, json.loads(stop) if stop else None) for name, created, stop in rows]

    @retried
    def counts_of_runs(self) -> dict[str, dict[str, int]]:
        """Trials per state (and total) of every run, in one query."""
        with self.engine.connect() as connection:
            rows: Sequence[tuple[Any, ...]] = connection.execute(
                select(trials.c.experiment, trials.c.state, func.count()).group_by(
                    trials.c.experiment, trials.c.state
                )
            ).all()
        found: dict[str, dict[str, int]] = defaultdict(lambda: {state.value: 0 for state in TrialState})
        for run, state, count in rows:
            found[run][state] = int(count)
        for counts in found.values():
            counts["total"] = sum(counts.values())
        return found

    @retried
    def trial_page(
        self, name: str, where: TrialFilter, *, limit: int, offset: int
    ) -> tuple[list[tuple[str, TrialRow]], int]:
        """One page of the run's trials matching ``where`` (by agent, task, run index, id),
        each with its trial id, and how many match in all."""
        conditions = [trials.c.experiment == name]
        for column, value in (
            (trials.c.state, where.state),
            (trials.c.outcome, where.outcome),
            (trials.c.agent_name, where.agent),
            (trials.c.task_id, where.task),
        ):
            if value is not None:
                conditions.append(column == value)
        if where.outcome is not None:  # an outcome is final: a trial requeued since has none
            conditions.append(trials.c.state.in_((TrialState.done.value, TrialState.infra_error.value)))
        matching = and_(*conditions)
        with self.engine.connect() as connection:
            total = connection.execute(select(func.count()).where(matching)).scalar_one()
            rows: Sequence[tuple[Any, ...]] = connection.execute(
                select(
                    trials.c.trial_id,
                    trials.c.spec_json,
                    trials.c.result_json,
                    trials.c.state,
                    trials.c.attempts,
                    trials.c.updated_at,
                )
                .where(matching)
                .order_by(trials.c.agent_name, trials.c.task_id, trials.c.run_index, trials.c.trial_id)
                .limit(limit)
                .offset(offset)
            ).all()
        page = [
            (
                trial_id,
                TrialRow(
                    TrialSpec.model_validate_json(spec_json),
                    TrialResult.model_validate_json(result_json) if result_json else None,
                    TrialState(state),
                    attempt_count,
                    updated_at,
                ),
            )
            for trial_id, spec_json, result_json, state, attempt_count, updated_at in rows
        ]
        return page, int(total)

    @retried
    def last_finished_at(self, name: str) -> float | None:
        """When the run's latest attempt finished (None: none has)."""
        with self.engine.connect() as connection:
            return connection.execute(
                select(func.max(attempts.c.finished_at)).where(attempts.c.experiment == name)
            ).scalar()
