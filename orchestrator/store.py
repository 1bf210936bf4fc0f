"""The durable trial queue: SQLAlchemy over SQLite (one machine) or PostgreSQL (many workers).

A trial row moves ``pending → leased → done`` (or ``infra_error`` once its infra retries
are spent; ``cancelled`` when its run is cancelled first).  A lease carries a random token and an expiry that the holder's heartbeat
extends; a result is accepted only with the current token while the row is still leased,
so a worker that lost its lease (it stalled, the lease expired, another worker took the
trial) cannot complete the trial a second time.  Every attempt is kept as history.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import and_, bindparam, case, create_engine, event, or_, select, update
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, OperationalError
from sqlalchemy.pool import ConnectionPoolEntry
from sqlalchemy.sql import ColumnElement

from atoll.errors import AtollError, ErrorCode
from atoll.jsonio import model_json
from atoll.trial import TrialResult, TrialSpec, TrialState
from orchestrator.store_control import RunControls
from orchestrator.store_delete import RunDeletions, run_exists
from orchestrator.store_events import RunEvents
from orchestrator.store_retry import StoreRetry, first_connection, retried
from orchestrator.store_runs import RunRecords, TrialRow
from orchestrator.store_schema import attempts, create_schema, insert_rows, trials

__all__ = [
    "Budget",
    "Completion",
    "Lease",
    "TrialRow",
    "TrialStore",
    "normalise_store_url",
    "worker_identity",
]


@dataclass(frozen=True)
class Lease:
    experiment: str
    trial_id: str
    token: str
    attempt: int
    spec: TrialSpec


@dataclass(frozen=True)
class Completion:
    """A final result to record; ``write_id`` makes a retried or replayed write land once."""

    lease: Lease
    worker: str
    result: TrialResult
    write_id: str = field(default_factory=lambda: uuid.uuid4().hex)


@dataclass(frozen=True)
class Budget:
    """A run's cost ceiling, enforced by the store for every worker at once.

    A trial is leased only while the money spent on the run so far plus the mean cost of an
    attempt for every trial in flight (any worker's) and for the new one stays within
    ``ceiling_usd``. Before any attempt has a cost, at most ``unpriced_in_flight`` trials
    run at once across the workers, so the first costs are learnt before the run fans out.
    """

    ceiling_usd: float
    unpriced_in_flight: int = 1


def _held(lease: Lease, *, leased_only: bool = True) -> ColumnElement[bool]:
    """The row of ``lease``'s trial, only while this lease (its token) still holds it."""
    condition = and_(
        trials.c.experiment == lease.experiment,
        trials.c.trial_id == lease.trial_id,
        trials.c.lease_token == lease.token,
    )
    return and_(condition, trials.c.state == TrialState.leased.value) if leased_only else condition


def _attempt_row(
    lease: Lease,
    worker: str,
    outcome: str,
    accepted: bool,
    error: str | None,
    result: TrialResult | None,
    now: float,
    write_id: str,
) -> dict[str, Any]:
    return {
        "experiment": lease.experiment,
        "trial_id": lease.trial_id,
        "attempt": lease.attempt,
        "worker": worker,
        "outcome": outcome,
        "accepted": int(accepted),
        "error": error,
        "result_json": model_json(result) if result else None,
        "finished_at": now,
        # What the attempt cost, paid whether or not its result was accepted.
        "cost_usd": result.cost_usd if result else 0.0,
        "write_id": write_id,
    }


def _trial_event(lease: Lease) -> dict[str, Any]:
    """What every trial event says of its trial."""
    return {
        "trial_id": lease.trial_id,
        "agent": lease.spec.agent_name,
        "task": lease.spec.task_id,
        "run_index": lease.spec.run_index,
        "attempt": lease.attempt,
    }


def _finished_event(
    lease: Lease, result: TrialResult | None, outcome: str
) -> tuple[str, str, dict[str, Any]]:
    return (
        lease.experiment,
        "trial.finished",
        {**_trial_event(lease), "outcome": outcome, "score": result.score if result else None},
    )


def worker_identity() -> str:
    """host:pid:random — the pid lets a restarted run on the same host reclaim its leases."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def normalise_store_url(url: str) -> str:
    """Accept a bare SQLite path, ``sqlite:///…``, or ``postgresql://…`` (psycopg 3 driver)."""
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    if "://" not in url:
        return f"sqlite:///{url}"
    return url


def shown_store_url(url: str) -> str:
    """The store's URL as messages and pages show it: any password replaced by ``***``."""
    if "://" not in url or url.startswith("sqlite"):
        return url
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url.split("://", 1)[0] + "://***"  # unparsable: show no part that may be secret


class TrialStore(RunRecords, RunEvents, RunControls, RunDeletions):
    """Experiments, trials and attempts in one database. Every operation retries database
    errors for a bounded time (``retry``; see orchestrator.store_retry). Every change to a run
    appends its event to the run's event log in the same transaction (orchestrator.store_events)."""

    def __init__(self, url: str, *, retry: StoreRetry | None = None, wait: bool = False) -> None:
        """Open (and create or upgrade) the store. An unreachable database is an error at
        once (a mistyped URL should not hang a command) unless ``wait``: then opening
        retries for the short first-connection window (``retry.connect_s``; workers starting
        while the database restarts). Raises AtollError("store_unreachable") naming the
        store (password hidden) and why."""
        self.retry = retry or StoreRetry.from_env()
        self.display_url = shown_store_url(url)
        self.url = normalise_store_url(url)
        if self.url.startswith("sqlite:///"):
            path = self.url.removeprefix("sqlite:///")
            if path and path != ":memory:":
                os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        try:
            self.engine = self._create_engine()
            if wait:
                self._open()
            else:
                create_schema(self.engine)
        except OperationalError as exc:
            raise AtollError(
                ErrorCode.store_unreachable, f"trial store {self.display_url}: {exc.orig}"
            ) from None
        except ImportError as exc:
            raise AtollError(
                ErrorCode.store_unreachable, f"trial store {self.display_url}: driver missing ({exc})"
            ) from None

    @first_connection
    def _open(self) -> None:
        create_schema(self.engine)

    def _create_engine(self) -> Engine:
        if self.url.startswith("sqlite"):
            engine = create_engine(self.url, connect_args={"timeout": 60})

            # pysqlite's own transaction handling defers BEGIN; take the write lock up
            # front so two processes never lease the same row.
            @event.listens_for(engine, "connect")
            def _connect(dbapi_connection: sqlite3.Connection, _record: ConnectionPoolEntry) -> None:
                dbapi_connection.isolation_level = None
                dbapi_connection.execute("PRAGMA journal_mode=WAL")
                dbapi_connection.execute("PRAGMA synchronous=NORMAL")

            @event.listens_for(engine, "begin")
            def _begin(connection: Connection) -> None:
                connection.exec_driver_sql("BEGIN IMMEDIATE")

            return engine
        # A dead server or a dropped route is noticed in seconds, not at the kernel's TCP
        # timeout; pre-ping replaces connections that died while idle in the pool.
        return create_engine(
            self.url,
            pool_pre_ping=True,
            pool_size=5,
            max_overflow=5,
            connect_args={
                "connect_timeout": 10,
                "keepalives": 1,
                "keepalives_idle": 10,
                "keepalives_interval": 5,
                "keepalives_count": 3,
            },
        )

    # --- planning ---------------------------------------------------------------------------

    @retried
    def enqueue(self, specs: Iterable[TrialSpec]) -> int:
        """Add trials that are not there yet; returns how many were new. Existing trials,
        finished or not, are left exactly as they are."""
        specs = list(specs)
        if not specs:
            return 0
        now = time.time()
        added = 0
        with self._tx() as tx:
            by_experiment: dict[str, set[str]] = {}
            for spec in specs:
                by_experiment.setdefault(spec.experiment, set())
            for experiment in by_experiment:
                by_experiment[experiment] = set(
                    tx.execute(select(trials.c.trial_id).where(trials.c.experiment == experiment)).scalars()
                )
            rows: list[dict[str, Any]] = []
            for spec in specs:
                trial_id = spec.trial_id
                if trial_id in by_experiment[spec.experiment]:
                    continue
                by_experiment[spec.experiment].add(trial_id)
                rows.append(
                    {
                        "experiment": spec.experiment,
                        "trial_id": trial_id,
                        "task_id": spec.task_id,
                        "agent_name": spec.agent_name,
                        "run_index": spec.run_index,
                        # Pydantic's own writer (4x faster over 100,000 planned trials): a
                        # spec's numbers come from an experiment that refuses NaN and Infinity.
                        "spec_json": spec.model_dump_json(),
                        "state": TrialState.pending.value,
                        "attempts": 0,
                        "updated_at": now,
                    }
                )
            for start in range(0, len(rows), 1000):
                tx.execute(trials.insert(), rows[start : start + 1000])
                added += len(rows[start : start + 1000])
            new: dict[str, int] = {}
            for row in rows:
                new[row["experiment"]] = new.get(row["experiment"], 0) + 1
            self._append_events(
                tx, [(name, "run.enqueued", {"trials": count}) for name, count in new.items()]
            )
        return added

    @retried
    def reclaim(self, experiment: str, *, retry_infra_errors: bool = True) -> int:
        """Before resuming: requeue trials leased by processes of this host that are gone,
        and (by default) trials whose infra retries were spent. Returns how many."""
        host = socket.gethostname()
        reclaimed = 0
        with self._tx() as tx:
            leased: Sequence[tuple[Any, ...]] = tx.execute(
                select(trials.c.trial_id, trials.c.lease_owner).where(
                    and_(trials.c.experiment == experiment, trials.c.state == TrialState.leased.value)
                )
            ).all()
            dead = []
            for trial_id, owner in leased:
                owner_host, _, rest = (owner or "").partition(":")
                pid = rest.partition(":")[0]
                if owner_host == host and pid.isdigit() and not _pid_alive(int(pid)):
                    dead.append(trial_id)
            states = [TrialState.infra_error.value] if retry_infra_errors else []
            conditions = [trials.c.trial_id.in_(dead)] if dead else []
            if states:
                conditions.append(trials.c.state.in_(states))
            if conditions:
                result = tx.execute(
                    update(trials)
                    .where(and_(trials.c.experiment == experiment, or_(*conditions)))
                    .values(
                        state=TrialState.pending.value,
                        lease_owner=None,
                        lease_token=None,
                        updated_at=time.time(),
                    )
                )
                reclaimed = result.rowcount
                if reclaimed:
                    self._append_events(tx, [(experiment, "run.requeued", {"trials": reclaimed})])
        return reclaimed

    # --- leasing ----------------------------------------------------------------------------

    def lease(self, worker: str, *, limit: int, lease_s: float, experiment: str | None = None) -> list[Lease]:
        """Lease up to ``limit`` runnable trials: pending ones, and leased ones whose lease
        expired (their worker is gone). Safe under concurrent workers on both databases."""
        return self.lease_within_budget(worker, limit=limit, lease_s=lease_s, experiment=experiment)[0]

    def lease_within_budget(
        self,
        worker: str,
        *,
        limit: int,
        lease_s: float,
        experiment: str | None = None,
        budget: Budget | None = None,
    ) -> tuple[list[Lease], bool]:
        """``lease``, within ``budget`` (which needs ``experiment``). Returns the leases and
        whether the budget is exhausted: nothing more can be leased, now or later."""
        if budget is not None and experiment is None:
            raise ValueError("a budget applies to one experiment")
        # The token is chosen once, outside the retries: a try whose commit landed but whose
        # reply was lost is found again by it instead of leaving orphaned leases.
        return self._lease(worker, limit, lease_s, experiment, budget, uuid.uuid4().hex, [])

    @retried
    def _lease(
        self,
        worker: str,
        limit: int,
        lease_s: float,
        experiment: str | None,
        budget: Budget | None,
        token: str,
        tries: list[int],
    ) -> tuple[list[Lease], bool]:
        now = time.time()
        columns = (trials.c.experiment, trials.c.trial_id, trials.c.spec_json, trials.c.attempts)
        # One run, or every run that is neither paused nor cancelled (orchestrator.store_control).
        scope = (
            [trials.c.experiment == experiment]
            if experiment is not None
            else [trials.c.experiment.not_in(self.held_back())]
        )
        tries.append(1)
        with self._tx() as tx:
            if len(tries) > 1:  # a retry: did an earlier try of this very call commit?
                landed: Sequence[tuple[Any, ...]] = tx.execute(
                    select(*columns).where(
                        and_(*scope, trials.c.lease_token == token, trials.c.state == TrialState.leased.value)
                    )
                ).all()
                if landed:
                    return [
                        Lease(e, t, token, a, TrialSpec.model_validate_json(j)) for e, t, j, a in landed
                    ], False
            exhausted = False
            if experiment is not None:  # paused, cancelled, or at its run-wide cap: fewer or none
                limit = self.lease_room(tx, experiment, limit, now)
                if limit <= 0:
                    return [], False
            if budget is not None:
                limit, exhausted = self._budget_room(tx, experiment or "", budget, limit, now)
                if limit <= 0:
                    return [], exhausted
            # Pending trials in queue order (an index serves this), then leases whose holder is gone.
            pending = (
                select(*columns)
                .where(and_(*scope, trials.c.state == TrialState.pending.value))
                .order_by(trials.c.run_index, trials.c.trial_id)
                .limit(limit)
            )
            expired = (
                select(*columns)
                .where(and_(*scope, trials.c.state == TrialState.leased.value, trials.c.lease_expires < now))
                .order_by(trials.c.lease_expires)
            )
            if not self.is_sqlite:
                pending = pending.with_for_update(skip_locked=True)
                expired = expired.with_for_update(skip_locked=True)
            rows: list[tuple[Any, ...]] = list(tx.execute(pending).all())
            if len(rows) < limit:
                rows += tx.execute(expired.limit(limit - len(rows))).all()
            if not rows:
                return [], exhausted
            tx.execute(
                update(trials)
                .where(
                    and_(
                        trials.c.experiment == bindparam("b_experiment"),
                        trials.c.trial_id == bindparam("b_trial_id"),
                    )
                )
                .values(
                    state=TrialState.leased.value,
                    lease_owner=worker,
                    lease_token=token,
                    lease_expires=now + lease_s,
                    attempts=bindparam("b_attempts"),
                    updated_at=now,
                ),
                [{"b_experiment": e, "b_trial_id": t, "b_attempts": a + 1} for e, t, _spec, a in rows],
            )
            leases = [
                Lease(
                    experiment_name,
                    trial_id,
                    token,
                    attempt_count + 1,
                    TrialSpec.model_validate_json(spec_json),
                )
                for experiment_name, trial_id, spec_json, attempt_count in rows
            ]
            self._append_events(
                tx,
                [
                    (lease.experiment, "trial.leased", {**_trial_event(lease), "worker": worker})
                    for lease in leases
                ],
            )
        return leases, False

    @retried
    def heartbeat(self, leases: Iterable[Lease], *, lease_s: float) -> int:
        """Extend the given leases; returns how many are still held."""
        held = 0
        with self._tx() as tx:
            for lease in leases:
                result = tx.execute(
                    update(trials).where(_held(lease)).values(lease_expires=time.time() + lease_s)
                )
                held += result.rowcount
        return held

    @retried
    def release(self, leases: Iterable[Lease]) -> int:
        """Give back leases this process will not finish (an interrupted run, a draining
        worker): each trial still held by its lease goes back to pending at once — not after
        the lease expires — and the attempt it was given does not count against its infra
        retries. A lease lost or finished meanwhile is left alone. Returns how many were given back."""
        released = 0
        with self._tx() as tx:
            given_back = []
            for lease in leases:
                result = tx.execute(
                    update(trials)
                    .where(_held(lease))
                    .values(
                        state=TrialState.pending.value,
                        lease_owner=None,
                        lease_token=None,
                        lease_expires=None,
                        attempts=case((trials.c.attempts > 0, trials.c.attempts - 1), else_=0),
                        updated_at=time.time(),
                    )
                )
                released += result.rowcount
                if result.rowcount:
                    given_back.append((lease.experiment, "trial.released", _trial_event(lease)))
            self._append_events(tx, given_back)
        return released

    @staticmethod
    def _written(tx: Connection, write_ids: Sequence[str]) -> dict[str, bool]:
        """Which of these writes already landed (an earlier try committed), and accepted or not."""
        if not write_ids:
            return {}
        rows: Iterable[tuple[Any, ...]] = tx.execute(
            select(attempts.c.write_id, attempts.c.accepted).where(attempts.c.write_id.in_(write_ids))
        )
        return {write_id: bool(accepted) for write_id, accepted in rows}

    @staticmethod
    def _runs_in(tx: Connection, items: Sequence[Completion]) -> set[str]:
        """Which runs of these completions still exist."""
        return {name for name in {item.lease.experiment for item in items} if run_exists(tx, name)}

    def complete(self, lease: Lease, worker: str, result: TrialResult) -> bool:
        """Record a final result (pass, fail or ungradeable). Returns False, and keeps the
        attempt only as history, when the lease was lost in the meantime."""
        return self.complete_many([Completion(lease, worker, result)])[0]

    def complete_many(self, items: Sequence[Completion | tuple[Lease, str, TrialResult]]) -> list[bool]:
        """``complete`` for several trials in one transaction (one commit, many results).
        A Completion whose write id was already recorded is not written again; its earlier
        answer is returned."""
        completions = [item if isinstance(item, Completion) else Completion(*item) for item in items]
        return self._complete_many(completions) if completions else []

    @retried
    def _complete_many(self, items: list[Completion]) -> list[bool]:
        now = time.time()
        with self._tx() as tx:
            written = self._written(tx, [item.write_id for item in items])
            fresh = [item for item in items if item.write_id not in written]
            # Which of these leases still hold their trial? (The rows stay locked until commit:
            # SQLite's write lock, PostgreSQL's FOR UPDATE.)
            held: set[tuple[str, str, str]] = set()
            for experiment in {item.lease.experiment for item in fresh}:
                ids = [item.lease.trial_id for item in fresh if item.lease.experiment == experiment]
                query = select(trials.c.trial_id, trials.c.lease_token).where(
                    and_(
                        trials.c.experiment == experiment,
                        trials.c.trial_id.in_(ids),
                        trials.c.state == TrialState.leased.value,
                    )
                )
                if not self.is_sqlite:
                    query = query.with_for_update()
                found: Sequence[tuple[Any, ...]] = tx.execute(query).all()
                held.update((experiment, trial_id, token) for trial_id, token in found)
            for item in fresh:
                written[item.write_id] = (
                    item.lease.experiment,
                    item.lease.trial_id,
                    item.lease.token,
                ) in held
            finished = [
                {
                    "b_experiment": item.lease.experiment,
                    "b_trial_id": item.lease.trial_id,
                    "b_outcome": item.result.outcome.value,
                    "b_result": model_json(item.result),
                }
                for item in fresh
                if written[item.write_id]
            ]
            if finished:
                tx.execute(
                    update(trials)
                    .where(
                        and_(
                            trials.c.experiment == bindparam("b_experiment"),
                            trials.c.trial_id == bindparam("b_trial_id"),
                        )
                    )
                    .values(
                        state=TrialState.done.value,
                        outcome=bindparam("b_outcome"),
                        result_json=bindparam("b_result"),
                        lease_owner=None,
                        lease_token=None,
                        updated_at=now,
                    ),
                    finished,
                )
            # A run deleted meanwhile keeps no history: a late result of a lease it took back
            # must not leave rows under its name (a new run of that name would count them). Only
            # refused results need the look (an accepted one's trial row is there), which keeps
            # the common result transaction a statement shorter.
            existing = self._runs_in(tx, [item for item in fresh if not written[item.write_id]])
            kept = [item for item in fresh if written[item.write_id] or item.lease.experiment in existing]
            if kept:
                insert_rows(
                    tx,
                    attempts,
                    [
                        _attempt_row(
                            item.lease,
                            item.worker,
                            item.result.outcome.value,
                            written[item.write_id],
                            item.result.error,
                            item.result,
                            now,
                            item.write_id,
                        )
                        for item in kept
                    ],
                )
            accepted = [item for item in fresh if written[item.write_id]]
            self._append_events(
                tx,
                [_finished_event(item.lease, item.result, item.result.outcome.value) for item in accepted],
                finished=[item.lease.experiment for item in accepted],
            )
        return [written[item.write_id] for item in items]

    def fail_infra(
        self,
        lease: Lease,
        worker: str,
        error: str,
        *,
        max_attempts: int,
        result: TrialResult | None = None,
        write_id: str | None = None,
    ) -> str:
        """Record an infrastructure failure: back to pending while attempts remain, else
        ``infra_error`` (with its result, for reports). Returns the new state. A repeated
        ``write_id`` is not recorded twice."""
        return self._fail_infra(lease, worker, error, max_attempts, result, write_id or uuid.uuid4().hex)

    @retried
    def _fail_infra(
        self,
        lease: Lease,
        worker: str,
        error: str,
        max_attempts: int,
        result: TrialResult | None,
        write_id: str,
    ) -> str:
        exhausted = lease.attempt >= max_attempts
        state = TrialState.infra_error if exhausted else TrialState.pending
        values: dict[str, Any] = {
            "state": state.value,
            "lease_owner": None,
            "lease_token": None,
            "updated_at": time.time(),
        }
        if exhausted:
            values["outcome"] = "infra_error"
            values["result_json"] = model_json(result) if result else None
        with self._tx() as tx:
            if self._written(tx, [write_id]):
                return state.value
            accepted = (
                tx.execute(update(trials).where(_held(lease, leased_only=False)).values(**values)).rowcount
                == 1
            )
            if accepted or run_exists(tx, lease.experiment):  # a deleted run keeps no history
                tx.execute(
                    attempts.insert().values(
                        **_attempt_row(
                            lease, worker, "infra_error", accepted, error, result, time.time(), write_id
                        )
                    )
                )
            if accepted and exhausted:
                self._append_events(
                    tx, [_finished_event(lease, result, "infra_error")], finished=[lease.experiment]
                )
            elif accepted:
                retrying = {**_trial_event(lease), "error": error[:500]}
                self._append_events(tx, [(lease.experiment, "trial.retrying", retrying)])
        return state.value

    def dispose(self) -> None:
        self.engine.dispose()
