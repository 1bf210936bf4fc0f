"""The run event log and the webhook records of the trial store (part of ``TrialStore``).

Every change the store makes to a run appends its event in the same transaction
(:meth:`RunEvents._append_events`): a lease that commits has its ``trial.leased``, a result
that is refused (lost lease) has none, and a retried write whose first try committed is
recognised before anything is appended again. Ids come from the one row of
``event_sequence``, locked as the last step of the transaction and held to its commit, so on
PostgreSQL as on SQLite (one writer at a time) a reader that has seen id N never later finds
a smaller id committed: ``id > cursor`` is a complete resumption.

Retention: events stay with their run (a few hundred bytes per trial state change, far less
than the attempt history beside them) until :meth:`RunEvents.prune_events` removes a run's
events and webhook deliveries (the lifecycle's archive of a run calls it).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, delete, func, insert, select, update
from sqlalchemy.engine import Connection

from atoll.trial import TrialState
from orchestrator.store_parts import StoreParts
from orchestrator.store_retry import retried
from orchestrator.store_schema import (
    event_sequence,
    insert_rows,
    run_events,
    trials,
    webhook_cursors,
    webhook_deliveries,
    webhooks,
)

#: Event types after which a run has nothing more running (until it is started again).
TERMINAL_EVENTS = frozenset({"run.finished", "run.aborted", "run.cancelled"})
#: Event types that change no trial's state: after a terminal event they leave the run ended
#: (a regrade of a finished run, a new cap or a pause of a run with nothing left to run).
AFTERMATH_EVENTS = frozenset({"trial.regraded", "run.resized", "run.paused"})


@dataclass(frozen=True)
class RunEvent:
    """One entry of a run's event log."""

    id: int
    run: str
    type: str
    at: float
    payload: dict[str, Any]


@dataclass(frozen=True)
class Delivery:
    """One attempt to POST one event to one webhook."""

    id: int
    event_id: int
    run: str
    url: str
    attempt: int
    status_code: int | None
    error: str | None
    at: float


def strict_json(value: Any) -> Any:
    """``value`` with every NaN or infinity replaced by None (events are strict JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: strict_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [strict_json(item) for item in value]
    return value


def _dumps(payload: dict[str, Any]) -> str:
    return json.dumps(strict_json(payload), sort_keys=True, allow_nan=False, separators=(",", ":"))


def _event(row: Any) -> RunEvent:
    return RunEvent(int(row.id), row.experiment, row.type, float(row.at), json.loads(row.payload_json))


class RunEvents(StoreParts):
    """Mixin of TrialStore; uses its ``engine``, ``_tx``, ``is_sqlite`` and ``retry``."""

    def _append_events(
        self,
        tx: Connection,
        events: Sequence[tuple[str, str, dict[str, Any]]],
        *,
        finished: Iterable[str] = (),
    ) -> None:
        """Append ``(run, type, payload)`` events, then ``run.finished`` for each run of
        ``finished`` that has no pending or leased trial left. Call it as the last step of the
        transaction that made the change: the sequence's row lock is held from here to the
        commit, and nothing is locked after it (so no lock cycle), and the check for what is
        left sees every transaction that committed before this one took the lock."""
        runs = sorted(set(finished))
        if not events and not runs:
            return
        rows = list(events)
        # Taking the ids (UPDATE … RETURNING) locks the sequence row until the commit; on SQLite
        # BEGIN IMMEDIATE already made writers take turns. Each step is one statement, not one
        # per run or per event: this runs inside every result's transaction, and the longer that
        # is, the more likely a connection fault cuts it and it is tried again.
        last = int(
            tx.execute(
                update(event_sequence)
                .where(event_sequence.c.name == "events")
                .values(last_id=event_sequence.c.last_id + len(rows))
                .returning(event_sequence.c.last_id)
            ).scalar_one()
        ) - len(rows)
        ended = self._ended(tx, runs) if runs else []
        if ended:
            outcomes = self._outcomes_of(tx, ended)
            rows += [(run, "run.finished", {"outcomes": outcomes.get(run, {})}) for run in ended]
            tx.execute(
                update(event_sequence)
                .where(event_sequence.c.name == "events")
                .values(last_id=last + len(rows))
            )
        if not rows:
            return
        now = time.time()
        insert_rows(
            tx,
            run_events,
            [
                {
                    "id": last + offset,
                    "experiment": run,
                    "type": kind,
                    "at": now,
                    "payload_json": _dumps(payload),
                }
                for offset, (run, kind, payload) in enumerate(rows, start=1)
            ],
        )

    @staticmethod
    def _ended(tx: Connection, runs: Sequence[str]) -> list[str]:
        """Those of ``runs`` with no pending or leased trial left, in the order given."""
        left: dict[str, int] = dict(
            tx.execute(
                select(trials.c.experiment, func.count())
                .where(
                    and_(
                        trials.c.experiment.in_(list(runs)),
                        trials.c.state.in_([TrialState.pending.value, TrialState.leased.value]),
                    )
                )
                .group_by(trials.c.experiment)
            ).all()
        )
        return [run for run in runs if not left.get(run)]

    @staticmethod
    def _outcomes_of(tx: Connection, runs: Sequence[str]) -> dict[str, dict[str, int]]:
        """Per run of ``runs``: how many trials ended with each outcome (or are in each state)."""
        rows: Sequence[tuple[Any, ...]] = tx.execute(
            select(trials.c.experiment, trials.c.state, trials.c.outcome, func.count())
            .where(trials.c.experiment.in_(list(runs)))
            .group_by(trials.c.experiment, trials.c.state, trials.c.outcome)
        ).all()
        outcomes: dict[str, dict[str, int]] = {}
        for run, state, outcome, count in rows:
            of_run = outcomes.setdefault(run, {})
            key = outcome or state
            of_run[key] = of_run.get(key, 0) + int(count)
        return outcomes

    @retried
    def record_event(self, run: str, kind: str, payload: dict[str, Any] | None = None) -> None:
        """Append one event in a transaction of its own (for changes made outside the store's
        own writes). A retried call whose first try committed may append it twice."""
        with self._tx() as tx:
            self._append_events(tx, [(run, kind, payload or {})])

    @retried
    def events(
        self, run: str | None = None, *, after: int = 0, limit: int = 500, runs: Sequence[str] | None = None
    ) -> list[RunEvent]:
        """Events with an id above ``after``, oldest first, at most ``limit``: of ``run``, of
        the ``runs`` listed, or (both None) of every run."""
        query = select(run_events).where(run_events.c.id > after).order_by(run_events.c.id).limit(limit)
        if run is not None:
            query = query.where(run_events.c.experiment == run)
        if runs is not None:
            query = query.where(run_events.c.experiment.in_(list(runs)))
        with self.engine.connect() as connection:
            return [_event(row) for row in connection.execute(query)]

    @retried
    def runs_with_events_after(self, after: int) -> dict[str, int]:
        """Runs with an event above ``after``, each with its latest event id."""
        query = (
            select(run_events.c.experiment, func.max(run_events.c.id))
            .where(run_events.c.id > after)
            .group_by(run_events.c.experiment)
        )
        with self.engine.connect() as connection:
            latest_ids: Iterable[tuple[Any, ...]] = connection.execute(query)
            return {run: int(latest) for run, latest in latest_ids}

    @retried
    def latest_event(self, run: str, *, ignore: frozenset[str] = frozenset()) -> RunEvent | None:
        """The run's most recent event whose type is not in ``ignore``, or None."""
        query = (
            select(run_events)
            .where(run_events.c.experiment == run, run_events.c.type.not_in(sorted(ignore)))
            .order_by(run_events.c.id.desc())
            .limit(1)
        )
        with self.engine.connect() as connection:
            row = connection.execute(query).first()
        return None if row is None else _event(row)

    @retried
    def last_event_id(self) -> int:
        """The id of the latest event of any run (0: none yet)."""
        with self.engine.connect() as connection:
            return int(
                connection.execute(
                    select(event_sequence.c.last_id).where(event_sequence.c.name == "events")
                ).scalar_one()
            )

    @retried
    def prune_events(self, run: str) -> int:
        """Delete the run's events and webhook deliveries; returns how many events went."""
        with self._tx() as tx:
            tx.execute(delete(webhook_deliveries).where(webhook_deliveries.c.experiment == run))
            return int(tx.execute(delete(run_events).where(run_events.c.experiment == run)).rowcount)

    # --- webhooks ---------------------------------------------------------------------------

    @retried
    def add_webhook(self, run: str, url: str) -> bool:
        """Register ``url`` for the run's events (the caller checked it is allowed); False when
        it was registered already."""
        with self._tx() as tx:
            found = tx.execute(
                select(webhooks.c.url).where(and_(webhooks.c.experiment == run, webhooks.c.url == url))
            ).first()
            if found is not None:
                return False
            tx.execute(insert(webhooks).values(experiment=run, url=url, created_at=time.time()))
        return True

    @retried
    def webhooks(self, run: str | None = None) -> list[tuple[str, str]]:
        """Registered (run, url) pairs, of one run or of all, oldest first."""
        query = select(webhooks.c.experiment, webhooks.c.url).order_by(webhooks.c.created_at)
        if run is not None:
            query = query.where(webhooks.c.experiment == run)
        with self.engine.connect() as connection:
            registered: Iterable[tuple[Any, ...]] = connection.execute(query)
            return [(experiment, url) for experiment, url in registered]

    @retried
    def webhook_cursor(self, target: str) -> int | None:
        """The id of the last event sent (or given up on) to ``target``; None: never started."""
        with self.engine.connect() as connection:
            value = connection.execute(
                select(webhook_cursors.c.last_event_id).where(webhook_cursors.c.target == target)
            ).scalar()
        return None if value is None else int(value)

    @retried
    def set_webhook_cursor(self, target: str, event_id: int) -> None:
        with self._tx() as tx:
            moved = tx.execute(
                update(webhook_cursors)
                .where(webhook_cursors.c.target == target)
                .values(last_event_id=event_id)
            ).rowcount
            if not moved:
                tx.execute(insert(webhook_cursors).values(target=target, last_event_id=event_id))

    @retried
    def record_delivery(
        self, event: RunEvent, url: str, attempt: int, status_code: int | None, error: str | None
    ) -> None:
        with self._tx() as tx:
            tx.execute(
                insert(webhook_deliveries).values(
                    event_id=event.id,
                    experiment=event.run,
                    url=url,
                    attempt=attempt,
                    status_code=status_code,
                    error=error,
                    at=time.time(),
                )
            )

    @retried
    def deliveries(self, run: str, *, after: int = 0, limit: int = 100) -> list[Delivery]:
        """The run's delivery attempts with an id above ``after``, oldest first."""
        query = (
            select(webhook_deliveries)
            .where(and_(webhook_deliveries.c.experiment == run, webhook_deliveries.c.id > after))
            .order_by(webhook_deliveries.c.id)
            .limit(limit)
        )
        with self.engine.connect() as connection:
            return [
                Delivery(
                    int(row.id),
                    int(row.event_id),
                    row.experiment,
                    row.url,
                    int(row.attempt),
                    row.status_code,
                    row.error,
                    float(row.at),
                )
                for row in connection.execute(query)
            ]
