"""Calibration records: what ``atoll judge calibrate`` measured of a judge, kept in the trial
store under the judge's identity id (:class:`atoll.judge.JudgeIdentity`), so a report can
say how far its judge is to be trusted."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import insert, select

from atoll.jsonio import dumps_strict
from orchestrator.store import TrialStore
from orchestrator.store_schema import judge_calibrations


@dataclass(frozen=True)
class CalibrationRecord:
    """One calibration of the judge ``judge_id``: ``n`` decided labels, its ``accuracy``
    (None when undefined), when (epoch seconds) and the whole summary (OUT.json)."""

    judge_id: str
    judge_model: str | None
    n: int
    accuracy: float | None
    created_at: float
    summary: dict[str, Any]


def record_calibration(store: TrialStore, summary: dict[str, Any]) -> CalibrationRecord:
    """Keep ``summary`` (the report of :func:`grader.calibrate.calibration_report`, whose
    ``judge`` holds the identity and its ``id``) in ``store``; returns the record."""
    record = CalibrationRecord(
        judge_id=summary["judge"]["id"],
        judge_model=summary["judge"].get("model"),
        n=int(summary["n"]),
        accuracy=summary.get("accuracy"),
        created_at=time.time(),
        summary=summary,
    )
    with store.engine.begin() as connection:
        connection.execute(
            insert(judge_calibrations).values(
                judge_id=record.judge_id,
                judge_model=record.judge_model,
                n=record.n,
                accuracy=record.accuracy,
                created_at=record.created_at,
                summary_json=dumps_strict(summary),
            )
        )
    return record


def latest_calibration(store: TrialStore, judge_id: str) -> CalibrationRecord | None:
    """The newest calibration of the judge whose identity id is ``judge_id``, or None."""
    query = (
        select(judge_calibrations)
        .where(judge_calibrations.c.judge_id == judge_id)
        .order_by(judge_calibrations.c.created_at.desc(), judge_calibrations.c.id.desc())
        .limit(1)
    )
    with store.engine.connect() as connection:
        row = connection.execute(query).mappings().first()
    if row is None:
        return None
    return CalibrationRecord(
        judge_id=row["judge_id"],
        judge_model=row["judge_model"],
        n=row["n"],
        accuracy=row["accuracy"],
        created_at=row["created_at"],
        summary=json.loads(row["summary_json"]),
    )


def calibration_line(record: CalibrationRecord | None) -> str:
    """For reports: ``judge calibrated: accuracy 0.953 on 747 labels (2026-12-06)``, or
    ``uncalibrated`` without a record (accuracy ``undefined`` when no label was decided)."""
    if record is None:
        return "uncalibrated"
    accuracy = "undefined" if record.accuracy is None else f"{record.accuracy:.3f}"
    day = datetime.fromtimestamp(record.created_at, UTC).date().isoformat()
    return f"judge calibrated: accuracy {accuracy} on {record.n} labels ({day})"


__all__ = ["CalibrationRecord", "calibration_line", "latest_calibration", "record_calibration"]
