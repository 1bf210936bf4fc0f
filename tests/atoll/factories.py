"""Small builders for benchmark directories in the APEX layout."""

from __future__ import annotations

import io
import json
import stat
import zipfile
from pathlib import Path
from typing import Any


def make_task(task_id: str = "task-1", world_id: str = "world-a", **fields: Any) -> dict[str, Any]:
    task = {
        "task_id": task_id,
        "task_name": f"Task {task_id}",
        "domain": "Law",
        "world_id": world_id,
        "prompt": "Summarise the engagement letter.",
        "task_input_files": "",
        "expected_output": "message_in_console",
        "rubric": [{"verifier_id": f"{task_id}-v1", "criteria": "States the fee cap of $250,000"}],
    }
    task.update(fields)
    return task


def world_zip_bytes(members: dict[str, bytes] | None = None, symlinks: dict[str, str] | None = None) -> bytes:
    members = (
        members
        if members is not None
        else {
            "filesystem/Engagement/letter.txt": b"Fee cap: $250,000",
            ".apps_data/mail/inbox.mbox": b"",
        }
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content)
        for name, target in (symlinks or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, target)
    return buffer.getvalue()


def write_benchmark(
    root: Path,
    tasks: list[dict[str, Any]] | None = None,
    worlds: list[dict[str, Any]] | None = None,
    zips: dict[str, bytes] | None = None,
) -> Path:
    """Write a benchmark directory; by default one world with one task."""
    tasks = tasks if tasks is not None else [make_task()]
    worlds = worlds if worlds is not None else [{"world_id": "world-a", "world_name": "Alpha matter"}]
    zips = zips if zips is not None else {"world-a": world_zip_bytes()}
    root.mkdir(parents=True, exist_ok=True)
    (root / "tasks_and_rubrics.json").write_text(json.dumps(tasks))
    (root / "world_descriptions.json").write_text(json.dumps(worlds))
    (root / "world_files_zipped").mkdir(exist_ok=True)
    for world_id, content in zips.items():
        (root / "world_files_zipped" / f"{world_id}.zip").write_bytes(content)
    return root
