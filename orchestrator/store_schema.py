"""The trial store's tables, and the one migration step that older stores need.

``experiments`` holds each run's spec (its policy: cost ceiling, infra retries, backoff,
abort rate — every worker reads it from here), its fingerprint and the identity document
the fingerprint is taken of, why it last stopped early (reports show it as a banner), and what
a client asked of it (paused, cancelled, a concurrency cap, archived). ``trials`` is the queue; ``archived_trials`` keeps the trials
that ``atoll run --replace`` took out of a run; ``attempts`` is the history of every
attempt, with its cost and the write id that makes a retried write land once;
``submissions`` holds the idempotency keys of ``POST /runs``.
``judge_calibrations`` keeps every calibration of a judge against human labels, keyed by the
judge's identity id (:mod:`orchestrator.calibrations`).

``run_events`` is the run's event log (orchestrator.store_events): one row per change, its
id allocated from the one row of ``event_sequence`` inside the transaction that makes the
change, so ids grow in commit order. ``webhooks``, ``webhook_cursors`` and
``webhook_deliveries`` are the webhooks a run registered, how far each target was sent, and
every delivery attempt (orchestrator.webhooks).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Float,
    Index,
    Insert,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    insert,
    inspect,
    select,
    text,
)
from sqlalchemy.engine import Connection, Engine

metadata = MetaData()

experiments = Table(
    "experiments",
    metadata,
    Column("name", String(200), primary_key=True),
    Column("spec_json", Text, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("fingerprint", String(64)),
    Column("identity_json", Text),
    # Why the run last stopped before its trials were done (abort, cost ceiling, interrupt);
    # NULL while it runs or once `atoll run` starts it again.
    Column("stop_json", Text),
    # What a client asked of the run (orchestrator.lifecycle): NULL or "running", "paused",
    # "cancelled"; workers lease nothing of a paused or cancelled run.
    Column("control", String(20)),
    # Most trials of the run in flight at once across every worker (NULL: no run-wide cap).
    Column("max_in_flight", Integer),
    # When the run was archived (hidden from the default run list; its data kept).
    Column("archived_at", Float),
)

# Idempotency keys of ``POST /runs``: the request they were first used with (its digest) and
# the reply it got, so the same key with the same request gets the same reply.
submissions = Table(
    "submissions",
    metadata,
    Column("key", String(200), primary_key=True),
    Column("request_digest", String(64), nullable=False),
    Column("holder", String(32), nullable=False),
    Column("reply_json", Text),  # NULL while the first request is still being answered
    Column("created_at", Float, nullable=False),
)


def _trial_columns() -> list[Column]:
    return [
        Column("task_id", String(300), nullable=False),
        Column("agent_name", String(200), nullable=False),
        Column("run_index", Integer, nullable=False),
        Column("spec_json", Text, nullable=False),
        Column("state", String(20), nullable=False),
        Column("lease_owner", String(200)),
        Column("lease_token", String(64)),
        Column("lease_expires", Float),
        Column("attempts", Integer, nullable=False, default=0),
        Column("outcome", String(20)),
        Column("result_json", Text),
        Column("updated_at", Float, nullable=False),
    ]


trials = Table(
    "trials",
    metadata,
    Column("experiment", String(200), primary_key=True),
    Column("trial_id", String(64), primary_key=True),
    *_trial_columns(),
    Index("ix_trials_queue", "experiment", "state", "run_index", "trial_id"),
    Index("ix_trials_state", "state"),
    Index("ix_trials_trial_id", "trial_id"),  # the viewer finds a trial by id across runs
)

# Columns the archive copies from ``trials`` (everything but the key, which it extends).
TRIAL_FIELDS = [column.name for column in trials.columns]

archived_trials = Table(
    "archived_trials",
    metadata,
    Column("experiment", String(200), primary_key=True),
    Column("archive", String(64), primary_key=True),
    Column("trial_id", String(64), primary_key=True),
    *_trial_columns(),
    Column("archived_at", Float, nullable=False),
    Column("archived_fingerprint", String(64)),
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
    Column("cost_usd", Float),
    Column("write_id", String(64), unique=True),
)

judge_calibrations = Table(
    "judge_calibrations",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("judge_id", String(64), nullable=False, index=True),
    Column("judge_model", String(300)),
    Column("n", Integer, nullable=False),
    Column("accuracy", Float),
    Column("created_at", Float, nullable=False),
    Column("summary_json", Text, nullable=False),
)

run_events = Table(
    "run_events",
    metadata,
    # Allocated from event_sequence, never by the database: ids must grow in commit order.
    Column("id", BigInteger, primary_key=True, autoincrement=False),
    Column("experiment", String(200), nullable=False),
    Column("type", String(40), nullable=False),
    Column("at", Float, nullable=False),
    Column("payload_json", Text, nullable=False),
    Index("ix_run_events_experiment", "experiment", "id"),
)

# One row ("events", last id given out). Its row lock, taken last in a writing transaction and
# held to the commit, is what orders event ids by commit on PostgreSQL.
event_sequence = Table(
    "event_sequence",
    metadata,
    Column("name", String(20), primary_key=True),
    Column("last_id", BigInteger, nullable=False),
)

webhooks = Table(
    "webhooks",
    metadata,
    Column("experiment", String(200), primary_key=True),
    Column("url", String(2000), primary_key=True),
    Column("created_at", Float, nullable=False),
)

webhook_cursors = Table(
    "webhook_cursors",
    metadata,
    # "<run> <url>" for a run's webhook, "* <url>" for the operator's
    Column("target", String(2300), primary_key=True),
    Column("last_event_id", BigInteger, nullable=False),
)

webhook_deliveries = Table(
    "webhook_deliveries",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("event_id", BigInteger, nullable=False),
    Column("experiment", String(200), nullable=False),
    Column("url", String(2000), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("status_code", Integer),
    Column("error", Text),
    Column("at", Float, nullable=False),
    Index("ix_webhook_deliveries_experiment", "experiment", "id"),
)

# Columns added after the first release: (table, column, SQL type). A store created before
# them gets them on open; nothing is dropped or rewritten.
_ADDED_COLUMNS = (
    ("experiments", "fingerprint", "VARCHAR(64)"),
    ("experiments", "identity_json", "TEXT"),
    ("experiments", "stop_json", "TEXT"),
    ("experiments", "control", "VARCHAR(20)"),
    ("experiments", "max_in_flight", "INTEGER"),
    ("experiments", "archived_at", "FLOAT"),
    ("attempts", "cost_usd", "FLOAT"),
    ("attempts", "write_id", "VARCHAR(64)"),
)


def insert_rows(tx: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
    """Insert ``rows`` (all with the same keys) as multi-row INSERT statements, not as an
    executemany: psycopg pipelines an executemany, and behind a proxy that batches small
    packets every pipeline costs a stall (tens of ms) that makes a transaction more likely to
    be cut by a connection fault. Chunked to stay within the databases' bound-value limits."""
    per_statement = max(1, 10_000 // max(1, len(rows[0]))) if rows else 1
    for start in range(0, len(rows), per_statement):
        tx.execute(insert(table).values(rows[start : start + per_statement]))


def create_schema(engine: Engine) -> None:
    """Create missing tables and add the columns an older store lacks."""
    metadata.create_all(engine)
    _create_event_sequence(engine)
    # create_all skips the indexes of a table that exists: a store made before this index gets it here.
    for index in trials.indexes:
        index.create(engine, checkfirst=True)
    existing = {
        table: {column["name"] for column in inspect(engine).get_columns(table)}
        for table in {table for table, _, _ in _ADDED_COLUMNS}
    }
    missing = [
        (table, column, kind) for table, column, kind in _ADDED_COLUMNS if column not in existing[table]
    ]
    if not missing:
        return
    with engine.begin() as connection:
        for table, column, kind in missing:
            connection.execute(text(f"ALTER TABLE {table} ADD COLUMN {column} {kind}"))
            if column == "write_id":
                connection.execute(
                    text("CREATE UNIQUE INDEX IF NOT EXISTS ix_attempts_write_id ON attempts (write_id)")
                )


def _create_event_sequence(engine: Engine) -> None:
    """The sequence's one row, once (two processes opening a new store at once: one inserts)."""
    with engine.begin() as connection:
        if connection.execute(select(event_sequence.c.name)).first() is not None:
            return
        dialect = engine.dialect.name
        if dialect == "postgresql":
            from sqlalchemy.dialects import postgresql

            first: Insert = (
                postgresql.insert(event_sequence).values(name="events", last_id=0).on_conflict_do_nothing()
            )
        elif dialect == "sqlite":
            from sqlalchemy.dialects import sqlite

            first = sqlite.insert(event_sequence).values(name="events", last_id=0).on_conflict_do_nothing()
        else:  # pragma: no cover - the store speaks SQLite and PostgreSQL only
            connection.execute(insert(event_sequence).values(name="events", last_id=0))
            return
        connection.execute(first)
