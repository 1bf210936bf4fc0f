"""Deleting a run from the trial store (part of ``TrialStore``): every row that names it, in one
transaction, refused while any trial of it is pending or leased.

The check and the deletion are one transaction that holds the run's row (PostgreSQL:
``FOR UPDATE``; SQLite: ``BEGIN IMMEDIATE``), so a resume racing the delete either lands first
(and the delete is refused) or finds no run. A worker that still holds a lease taken back
earlier (``cancel --stop``) cannot bring the run back: its result is accepted only with the
current token on a leased row (:meth:`orchestrator.store.TrialStore.complete_many`), and an
attempt of a run that no longer exists is not kept even as history.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import and_, delete, select
from sqlalchemy.engine import Connection

from atoll.errors import AtollError, ErrorCode
from atoll.trial import TrialResult, TrialSpec, TrialState
from orchestrator.store_parts import StoreParts
from orchestrator.store_retry import retried
from orchestrator.store_schema import (
    archived_trials,
    attempts,
    experiments,
    run_events,
    submissions,
    trials,
    webhook_cursors,
    webhook_deliveries,
    webhooks,
)

#: Trial states that keep a run from being deleted: a worker may lease or hold them.
LIVE_STATES = (TrialState.pending.value, TrialState.leased.value)


@dataclass
class DeletedRows:
    """What :meth:`RunDeletions.delete_run_rows` removed: rows by table, and every result
    (current, archived and of every attempt) the run's trials had, for their artifacts."""

    rows: dict[str, int] = field(default_factory=dict)
    results: list[TrialResult] = field(default_factory=list)


def run_exists(tx: Connection, name: str) -> bool:
    """Whether the store knows the run: its row, or (a store used without one) any trial of it."""
    if tx.execute(select(experiments.c.name).where(experiments.c.name == name)).first() is not None:
        return True
    return (
        tx.execute(select(trials.c.trial_id).where(trials.c.experiment == name).limit(1)).first() is not None
    )


def _results(json_texts: Iterator[str | None]) -> Iterator[TrialResult]:
    for text in json_texts:
        if not text:
            continue
        try:
            yield TrialResult.model_validate_json(text)
        except ValueError:  # a result this atoll cannot read: its artifacts are not known
            continue


class RunDeletions(StoreParts):
    """Mixin of TrialStore; uses its ``engine``, ``_tx``, ``is_sqlite`` and ``retry``."""

    @retried
    def delete_run_rows(self, name: str) -> DeletedRows:
        """Remove the run: its trials, archived trials, attempts, events, webhooks (their
        cursors and deliveries), the idempotency keys whose reply was this run, and its row.
        AtollError ``unknown_run`` when there is no such run, ``run_not_active`` (nothing
        removed) while any of its trials is pending or leased."""
        with self._tx() as tx:
            locked = select(experiments.c.name).where(experiments.c.name == name)
            if not self.is_sqlite:
                locked = locked.with_for_update()
            if tx.execute(locked).first() is None:
                raise AtollError(ErrorCode.unknown_run, f"no run named {name!r} in the store")
            live: Sequence[str] = (
                tx.execute(
                    select(trials.c.state).where(
                        and_(trials.c.experiment == name, trials.c.state.in_(LIVE_STATES))
                    )
                )
                .scalars()
                .all()
            )
            if live:
                leased = sum(state == TrialState.leased.value for state in live)
                raise AtollError(
                    ErrorCode.run_not_active,
                    f"run {name!r} has {leased} trials leased and {len(live) - leased} pending: "
                    "nothing to delete while they may run; cancel it first (atoll cancel --stop)",
                )
            deleted = DeletedRows()
            deleted.results = [
                *_results(
                    tx.execute(select(trials.c.result_json).where(trials.c.experiment == name)).scalars()
                ),
                *_results(
                    tx.execute(
                        select(archived_trials.c.result_json).where(archived_trials.c.experiment == name)
                    ).scalars()
                ),
                *_results(
                    tx.execute(select(attempts.c.result_json).where(attempts.c.experiment == name)).scalars()
                ),
            ]
            for table in (trials, archived_trials, attempts, run_events, webhook_deliveries, webhooks):
                deleted.rows[table.name] = int(
                    tx.execute(delete(table).where(table.c.experiment == name)).rowcount
                )
            # "<run> <url>": compared in Python, as a run name may hold LIKE's wildcards.
            targets: Iterable[str] = tx.execute(select(webhook_cursors.c.target)).scalars()
            cursors = [target for target in targets if target.startswith(f"{name} ")]
            if cursors:
                tx.execute(delete(webhook_cursors).where(webhook_cursors.c.target.in_(cursors)))
            deleted.rows["webhook_cursors"] = len(cursors)
            # A retried POST /runs with the same key must not answer "enqueued" for a run that is gone.
            replies: Sequence[tuple[Any, ...]] = tx.execute(
                select(submissions.c.key, submissions.c.reply_json)
            ).all()
            keys = [key for key, reply in replies if _reply_names(reply, name)]
            if keys:
                tx.execute(delete(submissions).where(submissions.c.key.in_(keys)))
            deleted.rows["submissions"] = len(keys)
            deleted.rows["experiments"] = int(
                tx.execute(delete(experiments).where(experiments.c.name == name)).rowcount
            )
        return deleted

    @retried
    def stored_specs(self) -> tuple[list[TrialSpec], int]:
        """The spec of every trial in the store, current and archived, of every run, and how
        many specs could not be read (their seeds cannot be named)."""
        specs, unreadable = [], 0
        with self.engine.connect() as connection:
            for table in (trials, archived_trials):
                texts: Iterable[str] = connection.execute(select(table.c.spec_json)).scalars()
                for text in texts:
                    try:
                        specs.append(TrialSpec.model_validate_json(text))
                    except ValueError:
                        unreadable += 1
        return specs, unreadable

    @retried
    def stored_results(self) -> list[TrialResult]:
        """Every result in the store (current, archived, and of every attempt), of every run."""
        with self.engine.connect() as connection:
            return [
                *_results(connection.execute(select(trials.c.result_json)).scalars()),
                *_results(connection.execute(select(archived_trials.c.result_json)).scalars()),
                *_results(connection.execute(select(attempts.c.result_json)).scalars()),
            ]


def _reply_names(reply: str | None, name: str) -> bool:
    if not reply:
        return False
    try:
        return bool(json.loads(reply).get("name") == name)
    except (ValueError, AttributeError):
        return False
