"""A worker's local spool: finished results that could not be written to the store yet.

When the database is unreachable past the store's retry window, a finished result is not
dropped: it is appended (one JSON line, fsynced) to ``<spool dir>/<worker>.jsonl`` and kept
in memory, and the worker keeps trying to write it. Once written it leaves the spool. A
worker that dies with a non-empty spool loses nothing either: the next worker started on the
same machine with the same spool directory writes those results first. Every entry carries
the write id of its store write, so a result whose write landed just before the fault is
recognised by the store and never recorded twice.

Spool directory: ``--spool-dir``, else ``$ATOLL_SPOOL_DIR``, else ``spool`` in atoll's cache
folder (``~/.cache/atoll/spool`` by default: :mod:`atoll.cache_paths`);
one subdirectory per store.
Each live worker holds a lock on its own file, so workers never replay each other's live
spools.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from atoll.cache_paths import cache_path
from atoll.jsonio import dumps_strict
from atoll.trial import TrialResult, TrialSpec
from orchestrator.store import Completion, Lease, TrialStore, normalise_store_url

log = logging.getLogger("atoll.orchestrator.spool")


def default_spool_dir() -> Path:
    """``$ATOLL_SPOOL_DIR``, else ``spool`` in atoll's cache folder (:mod:`atoll.cache_paths`)."""
    return cache_path("spool", "ATOLL_SPOOL_DIR")


def spool_for(store_url: str, worker_id: str, directory: Path | None = None) -> ResultSpool:
    """The spool of ``worker_id`` for one store: each store has its own subdirectory, so a
    spooled result is only ever replayed into the store it belongs to."""
    digest = hashlib.sha256(normalise_store_url(store_url).encode()).hexdigest()[:16]
    return ResultSpool((directory or default_spool_dir()) / digest, worker_id)


@dataclass(frozen=True)
class SpooledWrite:
    """One pending store write: a final result, or an infrastructure failure."""

    kind: str  # "complete" | "infra"
    completion: Completion
    error: str | None = None
    max_attempts: int = 1

    def to_json(self) -> str:
        lease = self.completion.lease
        return dumps_strict(
            {
                "kind": self.kind,
                "write_id": self.completion.write_id,
                "worker": self.completion.worker,
                "experiment": lease.experiment,
                "trial_id": lease.trial_id,
                "token": lease.token,
                "attempt": lease.attempt,
                "spec": lease.spec.model_dump(mode="json"),
                "result": self.completion.result.model_dump(mode="json"),
                "error": self.error,
                "max_attempts": self.max_attempts,
            }
        )

    @classmethod
    def from_json(cls, line: str) -> SpooledWrite:
        raw: dict[str, Any] = json.loads(line)
        lease = Lease(
            raw["experiment"],
            raw["trial_id"],
            raw["token"],
            raw["attempt"],
            TrialSpec.model_validate(raw["spec"]),
        )
        completion = Completion(
            lease, raw["worker"], TrialResult.model_validate(raw["result"]), raw["write_id"]
        )
        return cls(raw["kind"], completion, raw.get("error"), raw.get("max_attempts", 1))

    def write(self, store: TrialStore) -> None:
        """Apply to the store (idempotent by write id)."""
        if self.kind == "complete":
            store.complete_many([self.completion])
        else:
            store.fail_infra(
                self.completion.lease,
                self.completion.worker,
                self.error or "infrastructure error",
                max_attempts=self.max_attempts,
                result=self.completion.result,
                write_id=self.completion.write_id,
            )


class ResultSpool:
    """The spool file of one worker (see the module doc)."""

    def __init__(self, directory: Path, worker_id: str) -> None:
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in worker_id)
        self.path = directory / f"{safe}.jsonl"
        self._lock = FileLock(str(self.path) + ".lock")
        self._lock.acquire()
        self.entries: dict[str, SpooledWrite] = {}

    def __len__(self) -> int:
        return len(self.entries)

    def add(self, entry: SpooledWrite) -> None:
        """Keep ``entry`` until it is written: in memory and, durably, in the spool file."""
        self.entries[entry.completion.write_id] = entry
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(entry.to_json() + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def flush(self, store: TrialStore) -> int:
        """Write every spooled entry; those written leave the spool. Returns how many are
        left; raises the store's error only if nothing could be written."""
        for write_id, entry in list(self.entries.items()):
            entry.write(store)  # an unreachable store raises here; the rest stay spooled
            del self.entries[write_id]
            self._rewrite()
        return len(self.entries)

    def adopt_orphans(self) -> int:
        """Take over the spool files of workers of this machine that are gone (their lock
        is free). Returns how many entries were adopted."""
        adopted = 0
        for path in sorted(self.directory.glob("*.jsonl")):
            if path == self.path:
                continue
            lock = FileLock(str(path) + ".lock")
            try:
                lock.acquire(timeout=0)
            except Timeout:
                continue  # a live worker's spool
            try:
                for line in path.read_text(encoding="utf-8").splitlines():
                    if line.strip():
                        entry = SpooledWrite.from_json(line)
                        self.entries[entry.completion.write_id] = entry
                        adopted += 1
                self._rewrite()
                path.unlink()
            finally:
                lock.release()
                Path(str(path) + ".lock").unlink(missing_ok=True)
        if adopted:
            log.warning("adopted %d unwritten results from the spools of workers that are gone", adopted)
        return adopted

    def _rewrite(self) -> None:
        if not self.entries:
            self.path.unlink(missing_ok=True)
            return
        scratch = self.path.with_suffix(".tmp")
        scratch.write_text(
            "".join(entry.to_json() + "\n" for entry in self.entries.values()), encoding="utf-8"
        )
        os.replace(scratch, self.path)

    def close(self) -> None:
        self._lock.release()
        if not self.entries:
            Path(str(self.path) + ".lock").unlink(missing_ok=True)
