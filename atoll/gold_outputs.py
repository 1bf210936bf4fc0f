"""Gold outputs as APEX-Agents v1 publishes them, read into :class:`GoldOutput`.

A v1 task carries ``gold_response`` and ``gold_response_type``: with ``"text"`` the response
is the answer; with ``"file"`` it is a snapshot id (``snap_<hex>``) and the files lie in
``gold_files/<task_id>/filesystem/…`` (their world paths are the paths below
``filesystem/``).  A task that already has an atoll ``gold_output`` keeps it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from atoll.benchmark import GoldFile, GoldOutput, Task
from atoll.errors import AtollError, ErrorCode
from atoll.hf_cache import LocalView, walk_files
from atoll.members import is_junk

GOLD_FILES_DIR = "gold_files"
_RESPONSE_TYPES = ("text", "file")


def _gold_file_entries(folder: Path, view: LocalView) -> list[GoldFile]:
    files: list[GoldFile] = []
    tree = folder / "filesystem"
    if not tree.is_dir():
        return files
    for path in walk_files(tree):
        if is_junk(path.relative_to(tree).as_posix()):  # __MACOSX/, .DS_Store, ._* …
            continue
        source = view.file(path)
        world_path = "/" + path.relative_to(tree).as_posix()
        files.append(GoldFile.model_validate({"path": world_path, "source": str(source)}))
    return files


def read_gold_output(view: LocalView, task: Task) -> GoldOutput | None:
    """The task's gold output from its v1 fields and ``gold_files/<task_id>/`` of the
    benchmark folder ``view`` (:func:`atoll.hf_cache.local_view`), or None
    when it has none.  Raises AtollError naming the task for an unknown
    ``gold_response_type`` or a ``"file"`` gold whose folder holds no file."""
    if task.gold_output is not None:
        return task.gold_output
    extra: dict[str, Any] = task.model_extra or {}
    response = extra.get("gold_response")
    kind = extra.get("gold_response_type")
    if kind is not None and kind not in _RESPONSE_TYPES:
        raise AtollError(
            ErrorCode.bad_benchmark,
            f"task {task.task_id!r}: gold_response_type {kind!r} is neither 'text' nor 'file'",
        )
    folder = view.root / GOLD_FILES_DIR / task.task_id
    files = _gold_file_entries(folder, view) if folder.is_dir() else []
    if kind == "file" and not files:
        raise AtollError(
            ErrorCode.bad_benchmark,
            f"task {task.task_id!r}: gold_response_type is 'file' but "
            f"{GOLD_FILES_DIR}/{task.task_id}/filesystem/ holds no file",
        )
    is_snapshot_id = isinstance(response, str) and response.startswith("snap_") and kind is None
    answer = (
        response
        if isinstance(response, str) and response.strip() and kind != "file" and not is_snapshot_id
        else None
    )
    if answer is None and not files:
        return None
    values: dict[str, Any] = {"answer": answer, "files": files}
    if kind == "file" and isinstance(response, str):
        values["snapshot_id"] = response
    return GoldOutput.model_validate(values)
