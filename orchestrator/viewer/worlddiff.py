"""The world diff made readable: what the agent changed between the before and after snapshots.

The grader's own diff (``grader.diff.diff_snapshots``) supplies the typed changes and each
changed file's extracted text; a modified spreadsheet additionally gets the cells whose value
or formula changed as rows (sheet, cell, before, after), with the formula cells whose formula
stayed the same apart (counted; listed behind a fold), and a modified document, deck or text
file its lines added, removed and changed per part (``grader.diff.cell_changes`` and
``line_changes``, the judge's diff's own rules). Snapshots on an object store are downloaded once per viewer
process (a stored world's manifest and delta are read in place, and only the changed files'
blobs are fetched); diffs are kept in a small in-memory cache (a finished trial's snapshots
never change).
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import threading
from collections import OrderedDict
from dataclasses import asdict
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import fsspec

from atoll.errors import AtollError, ErrorCode
from atoll.extras import require_extra

MAX_CELLS = 500
MAX_LINES = 500
MAX_FILE_TEXT = 50_000
_SHEETS = {"xlsx", "xlsm", "xls", "csv", "ods"}
# Modified files whose parts are compared line by line (what grader.extract reads as text).
_TEXTS = {"docx", "pptx", "pdf", "txt", "md", "csv", "json", "html", "xml", "yaml", "yml"}


class SnapshotCache:
    """Local paths of snapshot URIs, the snapshots opened from them, and the diffs computed
    from them. A stored world (a seed manifest or a trial's delta, :mod:`atoll.world_store`)
    is read in place for diffs and single files, and made into its full archive only for a
    download."""

    def __init__(self, max_diffs: int = 64, max_open: int = 16) -> None:
        self._folder = Path(tempfile.mkdtemp(prefix="atoll-view-"))
        self._lock = threading.Lock()
        self._diffs: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()
        self._max_diffs = max_diffs
        self._open: OrderedDict[str, Any] = OrderedDict()
        self._max_open = max_open
        self._roots: dict[str, str] = {}

    def root(self, uri: str) -> str:
        """The artifact store root a stored world's references must stay under: the nearest
        folder above it that holds ``blobs/`` (:func:`atoll.world_store.infer_root`)."""
        from atoll.world_store import infer_root

        with self._lock:
            known = self._roots.get(uri)
        if known is None:
            known = infer_root(uri)
            with self._lock:
                self._roots[uri] = known
        return known

    def local(self, uri: str) -> Path:
        """A local file holding the full archive of the snapshot at ``uri``: a file:// archive
        is used in place, a remote one downloaded once, and a stored world's archive written
        once from its manifest and blobs (the bytes ``/data/snapshot`` gives for it)."""
        from atoll.world_store import materialize, world_kind

        stored = world_kind(uri) != "archive"
        parsed = urlparse(uri)
        if parsed.scheme in ("", "file") and not stored:
            return Path(unquote(parsed.path))
        target = self._folder / (hashlib.sha256(uri.encode()).hexdigest() + ".snapshot")
        root = self.root(uri) if stored else None
        with self._lock:
            if not target.exists():
                partial = target.with_suffix(".partial")
                try:
                    with open(partial, "wb") as sink:
                        if root is not None:
                            materialize(uri, sink, root=root)
                        else:
                            with fsspec.open(uri, "rb") as source:
                                shutil.copyfileobj(source, sink, 1 << 20)
                except (OSError, ValueError) as exc:
                    partial.unlink(missing_ok=True)
                    raise AtollError(ErrorCode.artifact_unreadable, f"snapshot {uri}: {exc}") from None
                except BaseException:
                    partial.unlink(missing_ok=True)
                    raise
                partial.replace(target)
        return target

    def snapshot(self, uri: str):
        """The snapshot at ``uri`` (kept open for the next request): a stored world read in
        place, or an archive read from :meth:`local`."""
        from atoll.world_store import world_kind
        from grader.snapshot import ManifestSnapshot, Snapshot, open_snapshot

        with self._lock:
            if uri in self._open:
                self._open.move_to_end(uri)
                return self._open[uri]
        opened: Snapshot | ManifestSnapshot
        if world_kind(uri) == "archive":
            opened = Snapshot(self.local(uri))
        else:
            opened = open_snapshot(uri, root=self.root(uri))
        with self._lock:
            self._open[uri] = opened
            while len(self._open) > self._max_open:
                # Dropped, not closed: a request may still read it; its temporary files go
                # when it is collected.
                self._open.popitem(last=False)
        return opened

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
        with self._lock:
            opened, self._open = list(self._open.values()), OrderedDict()
        for snapshot in opened:
            snapshot.close()
        shutil.rmtree(self._folder, ignore_errors=True)


def _content_changes(
    before_bytes: bytes | None, after_bytes: bytes | None, path: str, options
) -> dict[str, Any]:
    """What changed inside a modified file: ``cell_changes`` (cells whose value or formula
    changed), ``formulas_unchanged`` (how many formula cells kept their formula and differ only
    in the computed value shown) with ``formula_cells`` (those, up to MAX_CELLS) for a sheet;
    ``line_changes`` (``{part, change, before, after}``) for anything else."""
    require_extra("formats", "the viewer's document diffs")
    from grader.diff import cell_changes, line_changes
    from grader.extract import extract

    found: dict[str, Any] = {
        "cell_changes": [],
        "formulas_unchanged": 0,
        "formula_cells": [],
        "line_changes": [],
    }
    if before_bytes is None or after_bytes is None:
        return found
    old, new = extract(path, before_bytes, options), extract(path, after_bytes, options)
    if old.error or new.error:
        return found
    old_parts = {part.name: part for part in old.parts}
    for part in new.parts:
        previous = old_parts.get(part.name)
        if previous is None or previous.text == part.text:
            continue
        if part.cells is not None and previous.cells is not None:
            changed, same_formula = cell_changes(previous, part)
            found["cell_changes"] += [_cell_row(previous, part, cell) for cell in changed]
            found["formula_cells"] += [_cell_row(previous, part, cell) for cell in same_formula]
            found["formulas_unchanged"] += len(same_formula)
        else:
            found["line_changes"] += [
                {"part": part.name, "change": c.change, "before": c.before, "after": c.after}
                for c in line_changes(previous.text, part.text)
            ]
    found["cell_changes"] = found["cell_changes"][:MAX_CELLS]
    found["formula_cells"] = found["formula_cells"][:MAX_CELLS]
    found["line_changes"] = found["line_changes"][:MAX_LINES]
    return found


def _cell_row(before, after, cell: str) -> dict[str, Any]:
    """One cell of a sheet (two ``grader.extract.Part``) as the page's table shows it."""
    return {
        "sheet": after.name,
        "cell": cell,
        "before": before.cells.get(cell),
        "after": after.cells.get(cell),
    }


def _cell_order(coordinate: str) -> tuple[int, int, str]:
    letters = "".join(ch for ch in coordinate if ch.isalpha()).upper()
    digits = "".join(ch for ch in coordinate if ch.isdigit())
    column = 0
    for ch in letters:
        column = column * 26 + (ord(ch) - 64)
    return (int(digits) if digits else 0, column, coordinate)


def world_diff(cache: SnapshotCache, before_uri: str, after_uri: str) -> dict[str, Any]:
    """Files added/changed/deleted (with extracted text and cell changes); mails, calendar
    events and chat messages added, removed and changed, field by field
    (``grader.diff.record_changes``), and the typed mails sent, events and chat changes as the
    grade records them. Raises ``AtollError`` when a snapshot cannot be read."""
    key = (before_uri, after_uri)
    remembered = cache.remembered(key)
    if remembered is not None:
        return remembered
    require_extra("formats", "the viewer's world diff")
    from grader.diff import diff_snapshots, record_changes
    from grader.extract import ExtractOptions, extension
    from grader.snapshot import virtual_path

    # No OCR and no LibreOffice recalculation: the page shows what the files hold, quickly.
    options = ExtractOptions(ocr=False, recalculate=False)
    before, after = cache.snapshot(before_uri), cache.snapshot(after_uri)
    diff = diff_snapshots(before, after, options)
    texts = {artifact.path: artifact for artifact in diff.artifacts if artifact.kind == "file"}
    compared = [
        c
        for c in diff.changes.files
        if c.path.startswith("filesystem/")
        and c.change == "modified"
        and extension(c.path) in _SHEETS | _TEXTS
    ]
    old_bytes = before.read_many({c.path for c in compared})
    new_bytes = after.read_many({c.path for c in compared})
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
                **(
                    _content_changes(
                        old_bytes.get(change.path), new_bytes.get(change.path), change.path, options
                    )
                    if change in compared
                    else _content_changes(None, None, change.path, options)
                ),
            }
        )
    result = {
        "files": files,
        # Mails, events and chat messages added, removed and changed, field by field.
        "records": [asdict(record) for record in record_changes(diff.changes)],
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
        raise AtollError(ErrorCode.unknown_file, f"no file {member!r} in this snapshot")
    return snapshot.read(member)
