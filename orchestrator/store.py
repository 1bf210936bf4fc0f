"""The durable trial queue: SQLAlchemy over SQLite (one machine) or PostgreSQL (many workers).

A trial row moves ``pending → leased → done`` (or ``infra_error`` once its infra retries
are spent).  A lease carries a random token and an expiry that the holder's heartbeat
extends; a result is accepted only with the current token while the row is still leased,
so a worker that lost its lease (it stalled, the lease expired, another worker took the
trial) cannot complete the trial a second time.  Every attempt is kept as history.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    and_,
    bindparam,
    create_engine,
    event,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import OperationalError

from atoll.errors import AtollError
from atoll.trial import TrialResult, TrialSpec, TrialState

metadata = MetaData()

experiments = Table(
    "experiments",
    metadata,
    Column("name", String(200), primary_key=True),
    Column("spec_json", Text, nullable=False),
    Column("created_at", Float, nullable=False),
)

trials = Table(
    "trials",
    metadata,
    Column("experiment", String(200), primary_key=True),
    Column("trial_id", String(64), primary_key=True),
    Column("task_id", String(300), nullable=False),
    Column("agent_name", String(200), nullable=False),
    Column("run_index", Integer, nullable=False),
    Column("spec_json", Text, nullable=False),
    Column("state", String(20), nullable=False, index=True),
    Column("lease_owner", String(200)),
    Column("lease_token", String(64)),
    Column("lease_expires", Float),
    Column("attempts", Integer, nullable=False, default=0),
    Column("outcome", String(20)),
    Column("result_json", Text),
    Column("updated_at", Float, nullable=False),
    Index("ix_trials_queue", "experiment", "state", "run_index", "trial_id"),
)

attempts = Table(
    "attempts",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("experiment", String(200), nullable=False, index=True),
    Column("trial_id", String(64), nullable=False, index=True),
    Column("attempt", Integer, nullable=False),
    Column("worker", String(200), nullable=False),
    Column("outcome", String(20), nullable=False),
    Column("accepted", Integer, nullable=False),
    Column("error", Text),
    Column("result_json", Text),
    Column("finished_at", Float, nullable=False),
)


@dataclass(frozen=True)
class Lease:
    experiment: str
    trial_id: str
    token: str
    attempt: int
    spec: TrialSpec


def _held(lease: Lease, *, leased_only: bool = True) -> Any:
    """The row of ``lease``'s trial, only while this lease (its token) still holds it."""
    condition = and_(
        trials.c.experiment == lease.experiment,
        trials.c.trial_id == lease.trial_id,
        trials.c.lease_token == lease.token,
    )
    return and_(condition, trials.c.state == TrialState.leased.value) if leased_only else condition


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


class TrialStore:
    """Experiments, trials and attempts in one database."""

    def __init__(self, url: str) -> None:
        self.url = normalise_store_url(url)
        if self.url.startswith("sqlite:///"):
            path = self.url.removeprefix("sqlite:///")
            if path and path != ":memory:":
                os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        try:
            self.engine = self._create_engine()
            metadata.create_all(self.engine)
        except OperationalError as exc:
            raise AtollError("store_unreachable", f"trial store {url}: {exc.orig}") from None
        except ImportError as exc:
            raise AtollError("store_unreachable", f"trial store {url}: driver missing ({exc})") from None

    def _create_engine(self) -> Engine:
        if self.url.startswith("sqlite"):
            engine = create_engine(self.url, connect_args={"timeout": 60})

            # pysqlite's own transaction handling defers BEGIN; take the write lock up
            # front so two processes never lease the same row.
            @event.listens_for(engine, "connect")
            def _connect(dbapi_connection: Any, _record: Any) -> None:
                dbapi_connection.isolation_level = None
                dbapi_connection.execute("PRAGMA journal_mode=WAL")
                dbapi_connection.execute("PRAGMA synchronous=NORMAL")

            @event.listens_for(engine, "begin")
            def _begin(connection: Connection) -> None:
                connection.exec_driver_sql("BEGIN IMMEDIATE")

            return engine
        return create_engine(self.url, pool_pre_ping=True, pool_size=5, max_overflow=5)

    @property
    def is_sqlite(self) -> bool:
        return self.url.startswith("sqlite")

    @contextmanager
    def _tx(self) -> Iterator[Connection]:
        with self.engine.begin() as connection:
            yield connection

    # --- planning ---------------------------------------------------------------------------

    def save_experiment(self, name: str, spec: dict[str, Any]) -> None:
        with self._tx() as tx:
            row = tx.execute(select(experiments.c.name).where(experiments.c.name == name)).first()
            if row is None:
                tx.execute(
                    experiments.insert().values(name=name, spec_json=json.dumps(spec), created_at=time.time())
                )
            else:
                tx.execute(
                    update(experiments).where(experiments.c.name == name).values(spec_json=json.dumps(spec))
                )

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
            rows = []
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
                        "spec_json": spec.model_dump_json(),
                        "state": TrialState.pending.value,
                        "attempts": 0,
                        "updated_at": now,
                    }
                )
            for start in range(0, len(rows), 1000):
                tx.execute(trials.insert(), rows[start : start + 1000])
                added += len(rows[start : start + 1000])
        return added

    def reclaim(self, experiment: str, *, retry_infra_errors: bool = True) -> int:
        """Before resuming: requeue trials leased by processes of this host that are gone,
        and (by default) trials whose infra retries were spent. Returns how many."""
        host = socket.gethostname()
        reclaimed = 0
        with self._tx() as tx:
            leased = tx.execute(
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
        return reclaimed

    # --- leasing ----------------------------------------------------------------------------

    def lease(self, worker: str, *, limit: int, lease_s: float, experiment: str | None = None) -> list[Lease]:
        """Lease up to ``limit`` runnable trials: pending ones, and leased ones whose lease
        expired (their worker is gone). Safe under concurrent workers on both databases."""
        now = time.time()
        columns = (trials.c.experiment, trials.c.trial_id, trials.c.spec_json, trials.c.attempts)
        scope = [trials.c.experiment == experiment] if experiment is not None else []
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
            .limit(limit)
        )
        if not self.is_sqlite:
            pending = pending.with_for_update(skip_locked=True)
            expired = expired.with_for_update(skip_locked=True)
        with self._tx() as tx:
            rows = tx.execute(pending).all()
            if len(rows) < limit:
                rows += tx.execute(expired.limit(limit - len(rows))).all()
            if not rows:
                return []
            # One token per call: a lease is (trial id, token), so it is unique all the same.
            token = uuid.uuid4().hex
            tx.execute(
                update(trials)
                .where(and_(trials.c.experiment == bindparam("b_experiment"),
                            trials.c.trial_id == bindparam("b_trial_id")))
                .values(state=TrialState.leased.value, lease_owner=worker, lease_token=token,
                        lease_expires=now + lease_s, attempts=bindparam("b_attempts"), updated_at=now),
                [{"b_experiment": e, "b_trial_id": t, "b_attempts": a + 1} for e, t, _spec, a in rows],
            )
        return [
            Lease(experiment_name, trial_id, token, attempt_count + 1, TrialSpec.model_validate_json(spec_json))
            for experiment_name, trial_id, spec_json, attempt_count in rows
        ]

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

    def _record_attempt(
        self,
        tx: Connection,
        lease: Lease,
        worker: str,
        outcome: str,
        accepted: bool,
        error: str | None,
        result: TrialResult | None,
    ) -> None:
        tx.execute(
            attempts.insert().values(
                experiment=lease.experiment,
                trial_id=lease.trial_id,
                attempt=lease.attempt,
                worker=worker,
                outcome=outcome,
                accepted=int(accepted),
                error=error,
                result_json=result.model_dump_json() if result else None,
                finished_at=time.time(),
            )
        )

    def complete(self, lease: Lease, worker: str, result: TrialResult) -> bool:
        """Record a final result (pass, fail or ungradeable). Returns False, and keeps the
        attempt only as history, when the lease was lost in the meantime."""
        return self.complete_many([(lease, worker, result)])[0]

    def complete_many(self, items: list[tuple[Lease, str, TrialResult]]) -> list[bool]:
        """``complete`` for several trials in one transaction (one commit, many results)."""
        if not items:
            return []
        now = time.time()
        with self._tx() as tx:
            # Which of these leases still hold their trial? (The rows stay locked until commit:
            # SQLite's write lock, PostgreSQL's FOR UPDATE.)
            held: set[tuple[str, str, str]] = set()
            for experiment in {lease.experiment for lease, _, _ in items}:
                ids = [lease.trial_id for lease, _, _ in items if lease.experiment == experiment]
                query = select(trials.c.trial_id, trials.c.lease_token).where(
                    and_(trials.c.experiment == experiment, trials.c.trial_id.in_(ids),
                         trials.c.state == TrialState.leased.value)
                )
                if not self.is_sqlite:
                    query = query.with_for_update()
                held.update((experiment, trial_id, token) for trial_id, token in tx.execute(query).all())
            accepted = [(lease.experiment, lease.trial_id, lease.token) in held for lease, _, _ in items]
            finished = [
                {"b_experiment": lease.experiment, "b_trial_id": lease.trial_id, "b_outcome": result.outcome.value,
                 "b_result": result.model_dump_json()}
                for (lease, _, result), ok in zip(items, accepted, strict=True) if ok
            ]
            if finished:
                tx.execute(
                    update(trials)
                    .where(and_(trials.c.experiment == bindparam("b_experiment"),
                                trials.c.trial_id == bindparam("b_trial_id")))
                    .values(state=TrialState.done.value, outcome=bindparam("b_outcome"),
                            result_json=bindparam("b_result"), lease_owner=None, lease_token=None, updated_at=now),
                    finished,
                )
            tx.execute(
                attempts.insert(),
                [
                    {"experiment": lease.experiment, "trial_id": lease.trial_id, "attempt": lease.attempt,
                     "worker": worker, "outcome": result.outcome.value, "accepted": int(ok), "error": result.error,
                     "result_json": result.model_dump_json(), "finished_at": now}
                    for (lease, worker, result), ok in zip(items, accepted, strict=True)
                ],
            )
        return accepted

    def fail_infra(
        self, lease: Lease, worker: str, error: str, *, max_attempts: int, result: TrialResult | None = None
    ) -> str:
        """Record an infrastructure failure: back to pending while attempts remain, else
        ``infra_error`` (with its result, for reports). Returns the new state."""
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
            values["result_json"] = result.model_dump_json() if result else None
        with self._tx() as tx:
            accepted = (
                tx.execute(update(trials).where(_held(lease, leased_only=False)).values(**values)).rowcount
                == 1
            )
            self._record_attempt(tx, lease, worker, "infra_error", accepted, error, result)
        return state.value

    def replace_result(self, experiment: str, trial_id: str, result: TrialResult, *, note: str) -> None:
        """Swap a finished trial's result (a regrade), keeping the old one in the history."""
        with self._tx() as tx:
            row = tx.execute(
                select(trials.c.result_json, trials.c.attempts).where(
                    and_(trials.c.experiment == experiment, trials.c.trial_id == trial_id)
                )
            ).first()
            if row is None:
                raise AtollError("unknown_trial", f"no trial {trial_id} in run {experiment!r}")
            tx.execute(
                update(trials)
                .where(and_(trials.c.experiment == experiment, trials.c.trial_id == trial_id))
                .values(
                    outcome=result.outcome.value, result_json=result.model_dump_json(), updated_at=time.time()
                )
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
                )
            )

    # --- reading ----------------------------------------------------------------------------

    def counts(self, experiment: str) -> dict[str, int]:
        with self.engine.connect() as connection:
            rows = connection.execute(
                select(trials.c.state, func.count())
                .where(trials.c.experiment == experiment)
                .group_by(trials.c.state)
            ).all()
        counts = {state.value: 0 for state in TrialState}
        counts.update({state: count for state, count in rows})
        counts["total"] = sum(count for _, count in rows)
        return counts

    def results(self, experiment: str) -> list[tuple[TrialSpec, TrialResult | None, str, int]]:
        """Every trial of the experiment: (spec, final result or None, state, attempts)."""
        with self.engine.connect() as connection:
            rows = connection.execute(
                select(trials.c.spec_json, trials.c.result_json, trials.c.state, trials.c.attempts)
                .where(trials.c.experiment == experiment)
                .order_by(trials.c.agent_name, trials.c.task_id, trials.c.run_index)
            ).all()
        return [
            (
                TrialSpec.model_validate_json(spec_json),
                TrialResult.model_validate_json(result_json) if result_json else None,
                state,
                attempt_count,
            )
            for spec_json, result_json, state, attempt_count in rows
        ]

    def attempt_history(self, experiment: str, trial_id: str | None = None) -> list[dict[str, Any]]:
        query = select(attempts).where(attempts.c.experiment == experiment).order_by(attempts.c.id)
        if trial_id is not None:
            query = query.where(attempts.c.trial_id == trial_id)
        with self.engine.connect() as connection:
            return [dict(row._mapping) for row in connection.execute(query)]

    def experiment_spec(self, name: str) -> dict[str, Any] | None:
        with self.engine.connect() as connection:
            row = connection.execute(
                select(experiments.c.spec_json).where(experiments.c.name == name)
            ).first()
        return json.loads(row[0]) if row else None

    def experiments(self) -> list[str]:
        with self.engine.connect() as connection:
            return list(
                connection.execute(select(experiments.c.name).order_by(experiments.c.created_at)).scalars()
            )

    def dispose(self) -> None:
        self.engine.dispose()
