"""The world diff made readable: what the agent changed between the before and after snapshots.

The grader's own diff (``grader.diff.diff_snapshots``) supplies the typed changes and each
changed file's extracted text; spreadsheets additionally get their cell changes as rows
(sheet, cell, before, after). Snapshots on an object store are downloaded once per viewer
process; diffs are kept in a small in-memory cache (a finished trial's snapshots never change).
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import fsspec

from atoll.errors import AtollError

MAX_CELLS = 500
MAX_FILE_TEXT = 50_000
_SHEETS = {"xlsx", "xlsm", "xls", "csv", "ods"}


class SnapshotCache:
    """Local paths of snapshot URIs, and the diffs computed from them."""

    def __init__(self, max_diffs: int = 64) -> None:
        self._folder = Path(tempfile.mkdtemp(prefix="atoll-view-"))
        self._lock = threading.Lock()
        self._diffs: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()
        self._max_diffs = max_diffs

    def local(self, uri: str) -> Path:
        """A local file holding the snapshot at ``uri`` (file:// URIs are used in place)."""
        parsed = urlparse(uri)
        if parsed.scheme in ("", "file"):
            return Path(unquote(parsed.path))
        target = self._folder / (hashlib.sha256(uri.encode()).hexdigest() + ".snapshot")
        with self._lock:
            if not target.exists():
                partial = target.with_suffix(".partial")
                try:
                    with fsspec.open(uri, "rb") as source, open(partial, "wb") as sink:
                        shutil.copyfileobj(source, sink, 1 << 20)
                except (OSError, ValueError) as exc:
                    raise AtollError("artifact_unreadable", f"snapshot {uri}: {exc}") from None
                partial.replace(target)
        return target

    def snapshot(self, uri: str):
        from grader.snapshot import Snapshot

        return Snapshot(self.local(uri))

    def remembered(self, key: tuple[str, str]) -> dict[str, Any] | None:
        with self._lock:
            if key in self._diffs:
                self._diffs.move_to_end(key)
                return self._diffs[key]
        return None

    def remember(self, key: tuple[str, str], diff: dict[str, Any]) -> None:
        with self._lock:
            self._diffs[key] = diff
            while len(self._diffs) > self._max_diffs:
                self._diffs.popitem(last=False)

    def close(self) -> None:
        shutil.rmtree(self._folder, ignore_errors=True)


def _cell_changes(
    before_bytes: bytes | None, after_bytes: bytes | None, path: str, options
) -> list[dict[str, Any]]:
    from grader.extract import extract

    old = extract(path, before_bytes, options) if before_bytes is not None else None
    new = extract(path, after_bytes, options) if after_bytes is not None else None
    old_parts = {p.name: p.cells or {} for p in (old.parts if old and not old.error else [])}
    new_parts = {p.name: p.cells or {} for p in (new.parts if new and not new.error else [])}
    rows: list[dict[str, Any]] = []
    for sheet in list(new_parts) + [name for name in old_parts if name not in new_parts]:
        was, now = old_parts.get(sheet, {}), new_parts.get(sheet, {})
        for cell in sorted(was.keys() | now.keys(), key=_cell_order):
            if was.get(cell) != now.get(cell):
                rows.append({"sheet": sheet, "cell": cell, "before": was.get(cell), "after": now.get(cell)})
                if len(rows) >= MAX_CELLS:
                    return rows
    return rows


def _cell_order(coordinate: str) -> tuple[int, int, str]:
    letters = "".join(ch for ch in coordinate if ch.isalpha()).upper()
    digits = "".join(ch for ch in coordinate if ch.isdigit())
    column = 0
    for ch in letters:
        column = column * 26 + (ord(ch) - 64)
    return (int(digits) if digits else 0, column, coordinate)


def world_diff(cache: SnapshotCache, before_uri: str, after_uri: str) -> dict[str, Any]:
    """Files added/changed/deleted (with extracted text and cell changes), mails sent, calendar
    events and chat posts. Raises ``AtollError`` when a snapshot cannot be read."""
    key = (before_uri, after_uri)
    remembered = cache.remembered(key)
    if remembered is not None:
        return remembered
    from grader.diff import diff_snapshots
    from grader.extract import ExtractOptions, extension
    from grader.snapshot import virtual_path

    # No OCR and no LibreOffice recalculation: the page shows what the files hold, quickly.
    options = ExtractOptions(ocr=False, recalculate=False)
    before, after = cache.snapshot(before_uri), cache.snapshot(after_uri)
    diff = diff_snapshots(before, after, options)
    texts = {artifact.path: artifact for artifact in diff.artifacts if artifact.kind == "file"}
    sheets = [
        c for c in diff.changes.files if c.path.startswith("filesystem/") and extension(c.path) in _SHEETS
    ]
    old_bytes = before.read_many({c.path for c in sheets if c.change != "created"})
    new_bytes = after.read_many({c.path for c in sheets if c.change != "deleted"})
    files = []
    for change in diff.changes.files:
        shown = virtual_path(change.path) if change.path.startswith("filesystem/") else change.path
        artifact = texts.get(shown)
        text = artifact.text if artifact else ""
        files.append(
            {
                "path": change.path,
                "display_path": shown,
                "change": change.change,
                "size_before": change.size_before,
                "size_after": change.size_after,
                "sub_items": change.sub_items,
                "text": text[:MAX_FILE_TEXT]
                + (f"\n[… {len(text) - MAX_FILE_TEXT} more characters]" if len(text) > MAX_FILE_TEXT else ""),
                "extract_error": artifact.error if artifact else None,
                "cell_changes": _cell_changes(
                    old_bytes.get(change.path), new_bytes.get(change.path), change.path, options
                )
                if change in sheets
                else [],
            }
        )
    result = {
        "files": files,
        "mails_sent": [m.model_dump(mode="json", by_alias=True) for m in diff.changes.mails_sent],
        "events": [e.model_dump(mode="json") for e in diff.changes.events],
        "chat": [c.model_dump(mode="json") for c in diff.changes.chat],
        "errors": diff.errors,
    }
    cache.remember(key, result)
    return result


def snapshot_member(cache: SnapshotCache, uri: str, member: str) -> bytes:
    """One file of a snapshot, by its member path (``filesystem/…``). Only paths the snapshot
    lists are served, so nothing outside it can be named. Raises ``AtollError`` otherwise."""
    snapshot = cache.snapshot(uri)
    if member not in snapshot.entries:
        raise AtollError("unknown_file", f"no file {member!r} in this snapshot")
    return snapshot.read(member)
