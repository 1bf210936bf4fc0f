"""Run-level records of the trial store: spec and fingerprint, archives, money spent, and
what is still outstanding (part of ``TrialStore``)."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, case, delete, func, insert, select, update
from sqlalchemy.engine import Connection

from atoll.trial import TrialState
from orchestrator.store_retry import retried
from orchestrator.store_schema import TRIAL_FIELDS, archived_trials, attempts, experiments, trials


@dataclass(frozen=True)
class RunRecord:
    name: str
    spec: dict[str, Any]
    fingerprint: str | None  # None: recorded before runs had fingerprints
    identity: dict[str, Any] | None
    created_at: float


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


class RunRecords:
    """Mixin of TrialStore; uses its ``engine``, ``_tx`` and ``retry``."""

    @retried
    def save_experiment(self, name: str, spec: dict[str, Any], *, fingerprint: str | None = None,
                        identity: dict[str, Any] | None = None) -> None:
        """Create or update a run's record: its spec (and so its policy), and its fingerprint."""
        values: dict[str, Any] = {"spec_json": json.dumps(spec)}
        if fingerprint is not None:
            values.update(fingerprint=fingerprint, identity_json=json.dumps(identity, sort_keys=True))
        with self._tx() as tx:
            row = tx.execute(select(experiments.c.name).where(experiments.c.name == name)).first()
            if row is None:
                tx.execute(experiments.insert().values(name=name, created_at=time.time(), **values))
            else:
                tx.execute(update(experiments).where(experiments.c.name == name).values(**values))

    @retried
    def run_record(self, name: str) -> RunRecord | None:
        with self.engine.connect() as connection:
            row = connection.execute(
                select(experiments.c.spec_json, experiments.c.fingerprint, experiments.c.identity_json,
                       experiments.c.created_at).where(experiments.c.name == name)
            ).first()
        if row is None:
            return None
        spec_json, fingerprint, identity_json, created_at = row
        return RunRecord(name, json.loads(spec_json), fingerprint, json.loads(identity_json) if identity_json else None,
                         created_at)

    @retried
    def trial_ids(self, experiment: str) -> set[str]:
        with self.engine.connect() as connection:
            return set(connection.execute(select(trials.c.trial_id).where(trials.c.experiment == experiment))
                       .scalars())

    @retried
    def archive_trials(self, experiment: str, keep: set[str], *, archive: str, fingerprint: str | None) -> int:
        """Move the run's trials whose id is not in ``keep`` to ``archived_trials`` under the
        label ``archive`` (their rows and attempt history are kept, never deleted). Returns
        how many moved. A worker still running one of them cannot complete it any more."""
        now = time.time()
        with self._tx() as tx:
            ids = [trial_id for trial_id in tx.execute(
                select(trials.c.trial_id).where(trials.c.experiment == experiment)).scalars() if trial_id not in keep]
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                where = and_(trials.c.experiment == experiment, trials.c.trial_id.in_(chunk))
                source = select(*[trials.c[name] for name in TRIAL_FIELDS]).where(where)
                rows = [dict(row._mapping) for row in tx.execute(source)]
                tx.execute(insert(archived_trials),
                           [{**row, "archive": archive, "archived_at": now, "archived_fingerprint": fingerprint}
                            for row in rows])
                tx.execute(delete(trials).where(where))
        return len(ids)

    @retried
    def archives(self, experiment: str) -> list[dict[str, Any]]:
        """The run's archives, oldest first: label, when, the fingerprint they were recorded
        under, and their trials by state and outcome."""
        with self.engine.connect() as connection:
            rows = connection.execute(
                select(archived_trials.c.archive, archived_trials.c.archived_at,
                       archived_trials.c.archived_fingerprint, archived_trials.c.state, archived_trials.c.outcome,
                       func.count())
                .where(archived_trials.c.experiment == experiment)
                .group_by(archived_trials.c.archive, archived_trials.c.archived_at,
                          archived_trials.c.archived_fingerprint, archived_trials.c.state, archived_trials.c.outcome)
            ).all()
        found: dict[str, dict[str, Any]] = {}
        for archive, archived_at, fingerprint, state, outcome, count in rows:
            entry = found.setdefault(archive, {"archive": archive, "archived_at": archived_at,
                                               "fingerprint": fingerprint, "trials": 0, "by_outcome": {}})
            entry["trials"] += count
            key = outcome if state in (TrialState.done.value, TrialState.infra_error.value) and outcome else state
            entry["by_outcome"][key] = entry["by_outcome"].get(key, 0) + count
        return sorted(found.values(), key=lambda entry: entry["archived_at"])

    @staticmethod
    def spent_in(tx: Connection, experiment: str) -> float:
        """Money spent on the run's current trials: every attempt, accepted or not."""
        current = select(trials.c.trial_id).where(trials.c.experiment == experiment)
        spent = tx.execute(
            select(func.coalesce(func.sum(attempts.c.cost_usd), 0.0))
            .where(and_(attempts.c.experiment == experiment, attempts.c.trial_id.in_(current)))
        ).scalar_one()
        return float(spent)

    @retried
    def spent_usd(self, experiment: str) -> float:
        with self.engine.connect() as connection:
            return self.spent_in(connection, experiment)

    @retried
    def outstanding(self, experiment: str | None = None) -> dict[str, Outstanding]:
        """Unfinished trials per run (of one run, or of every run), runs with none left out."""
        now = time.time()
        expired = and_(trials.c.state == TrialState.leased.value, trials.c.lease_expires < now)
        query = (
            select(trials.c.experiment, trials.c.state, func.count(),
                   func.sum(case((expired, 1), else_=0)))
            .where(trials.c.state.in_([TrialState.pending.value, TrialState.leased.value]))
            .group_by(trials.c.experiment, trials.c.state)
        )
        if experiment is not None:
            query = query.where(trials.c.experiment == experiment)
        with self.engine.connect() as connection:
            rows = connection.execute(query).all()
        counts: dict[str, dict[str, int]] = defaultdict(lambda: {"pending": 0, "leased": 0, "expired": 0})
        for name, state, count, stale in rows:
            counts[name][state] = int(count)
            if state == TrialState.leased.value:
                counts[name]["expired"] = int(stale or 0)
        return {name: Outstanding(**values) for name, values in counts.items()}
