"""Verdict cache: regrading unchanged evidence with the same judge and prompt costs nothing.

Keyed by everything that can change a verdict: the criterion (text, grading target, check),
the evidence digest, the prompt version and the judge's verdict settings — model, api_base,
temperature, top_p, seed, extra args, samples, quorum and verdict format
(:func:`grader.judge.verdict_settings`), so the same model name pointed at
another endpoint or sampled differently is a different judge.  Stored in a
SQLite file (``*.sqlite``/``*.db`` or any existing file) or a directory of JSON files (one
per key, written atomically).  Only real verdicts (met / not met) are cached, so a
judge outage is retried on the next grading.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import tempfile
import threading
from pathlib import Path
from typing import Any

from atoll.benchmark import Criterion
from atoll.jsonio import dumps_strict


def cache_key(
    criterion: Criterion, evidence_digest: str, judge_settings: dict[str, Any], prompt_version: str
) -> str:
    """sha256 over the criterion (text, target, check), the evidence and the judging setup."""
    payload = {
        "criterion": {
            "verifier_id": criterion.verifier_id,
            "criteria": criterion.criteria,
            "grading_target": criterion.grading_target.model_dump() if criterion.grading_target else None,
            "check": criterion.check.model_dump() if criterion.check else None,
        },
        "evidence": evidence_digest,
        "judge": judge_settings,
        "prompt_version": prompt_version,
    }
    # default=str: extra args may hold values JSON does not know; their text still counts.
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


class VerdictCache:
    """A persistent ``key -> verdict record`` map, safe to share between threads."""

    def __init__(self, location: str | Path) -> None:
        self.location = Path(location)
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        suffix = self.location.suffix.lower()
        self._sqlite = self.location.is_file() or (
            not self.location.exists() and suffix in (".sqlite", ".db", ".sqlite3")
        )
        if self._sqlite:
            self.location.parent.mkdir(parents=True, exist_ok=True)
            self._connection = sqlite3.connect(self.location, check_same_thread=False)
            self._connection.execute(
                "CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, record TEXT NOT NULL,"
                " created_at TEXT DEFAULT CURRENT_TIMESTAMP)"
            )
            self._connection.commit()
        else:
            self.location.mkdir(parents=True, exist_ok=True)

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            record = self._get(key)
            if record is None:
                self.misses += 1
            else:
                self.hits += 1
            return record

    def _get(self, key: str) -> dict[str, Any] | None:
        if self._sqlite:
            row = self._connection.execute("SELECT record FROM verdicts WHERE key = ?", (key,)).fetchone()
            return json.loads(row[0]) if row else None
        path = self.location / f"{key}.json"
        try:
            return json.loads(path.read_text())
        except (FileNotFoundError, ValueError):
            return None

    def put(self, key: str, record: dict[str, Any]) -> None:
        text = dumps_strict(record, sort_keys=True)
        with self._lock:
            if self._sqlite:
                self._connection.execute(
                    "INSERT OR REPLACE INTO verdicts (key, record) VALUES (?, ?)", (key, text)
                )
                self._connection.commit()
                return
            handle, temporary = tempfile.mkstemp(dir=self.location, suffix=".tmp")
            with os.fdopen(handle, "w") as out:
                out.write(text)
            os.replace(temporary, self.location / f"{key}.json")

    def __len__(self) -> int:
        with self._lock:
            if self._sqlite:
                return int(self._connection.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0])
            return sum(1 for _ in self.location.glob("*.json"))

    def close(self) -> None:
        if self._sqlite:
            self._connection.close()
