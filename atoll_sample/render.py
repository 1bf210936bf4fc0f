"""World files kept as data (``atoll_sample/worlds/*.yaml``), rendered by the writers.

A data file lists ``files``, each ``{path, kind, ...}``; the kind names its writer:

- ``text``: ``body`` through :meth:`WorldDraft.text` (stripped, one final newline);
- ``exact``: ``body`` written as it is (CSV extracts whose bytes a task may read);
- ``docx``: ``blocks`` (:mod:`atoll_sample.documents`), ``author``, ``title``;
- ``pptx``: ``slides`` (:mod:`atoll_sample.slides`), ``author``, ``title``;
- ``xlsx``: ``sheets``, each the fields of :class:`atoll_sample.sheets.Sheet`, ``creator``;
- ``pdf``: ``pages`` (:mod:`atoll_sample.pdfs`), ``title``, ``author``.

Any string may name a field of a person of :mod:`atoll_sample.people` as ``{PRIYA.name}``, so
the cast is written once. Rendering is deterministic: the writers are.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from atoll.errors import AtollError, ErrorCode
from atoll_sample import people
from atoll_sample._world import WorldDraft
from atoll_sample.documents import write_document
from atoll_sample.pdfs import write_pdf
from atoll_sample.sheets import Sheet, write_workbook
from atoll_sample.slides import write_deck

WORLDS = Path(__file__).with_name("worlds")
_PERSON_FIELD = re.compile(r"\{([A-Z]+)\.(name|email|title|company)\}")


def files_from_data(name: str) -> Callable[[WorldDraft], None]:
    """The world-building step that renders ``worlds/<name>.yaml`` into a draft's filesystem."""

    def build_files(draft: WorldDraft) -> None:
        render_files(draft, WORLDS / f"{name}.yaml")

    build_files.__qualname__ = f"files_from_data({name!r})"
    return build_files


def render_files(draft: WorldDraft, data_file: Path) -> None:
    """Write every file ``data_file`` lists into ``draft``. Raises AtollError ``bad_input``
    naming a file of an unknown kind or an unknown person."""
    for entry in _with_people(yaml.safe_load(data_file.read_text(encoding="utf-8")))["files"]:
        kind = entry["kind"]
        if kind not in _WRITERS:
            raise AtollError(
                ErrorCode.bad_input, f"{data_file.name}: {entry['path']} has unknown kind {kind!r}"
            )
        _WRITERS[kind](draft, entry)


def _person_field(found: re.Match[str]) -> str:
    person = vars(people).get(found[1])
    if not isinstance(person, dict):
        raise AtollError(
            ErrorCode.bad_input, f"{found[0]}: {found[1]} is no person of atoll_sample/people.py"
        )
    return person[found[2]]


def _with_people(value: Any) -> Any:
    if isinstance(value, str):
        return _PERSON_FIELD.sub(_person_field, value)
    if isinstance(value, list):
        return [_with_people(item) for item in value]
    if isinstance(value, dict):
        return {key: _with_people(item) for key, item in value.items()}
    return value


def _text(draft: WorldDraft, entry: dict[str, Any]) -> None:
    draft.text(entry["path"], entry["body"])


def _exact(draft: WorldDraft, entry: dict[str, Any]) -> None:
    draft.fs(entry["path"]).write_text(entry["body"], encoding="utf-8")


def _docx(draft: WorldDraft, entry: dict[str, Any]) -> None:
    options = {key: entry[key] for key in ("author", "title") if key in entry}
    write_document(draft.fs(entry["path"]), entry["blocks"], **options)


def _pptx(draft: WorldDraft, entry: dict[str, Any]) -> None:
    options = {key: entry[key] for key in ("author", "title") if key in entry}
    write_deck(draft.fs(entry["path"]), entry["slides"], **options)


def _xlsx(draft: WorldDraft, entry: dict[str, Any]) -> None:
    options = {key: entry[key] for key in ("creator",) if key in entry}
    write_workbook(draft.fs(entry["path"]), [Sheet(**sheet) for sheet in entry["sheets"]], **options)


def _pdf(draft: WorldDraft, entry: dict[str, Any]) -> None:
    options = {key: entry[key] for key in ("author", "title") if key in entry}
    write_pdf(draft.fs(entry["path"]), entry["pages"], **options)


_WRITERS: dict[str, Callable[[WorldDraft, dict[str, Any]], None]] = {
    "text": _text,
    "exact": _exact,
    "docx": _docx,
    "pptx": _pptx,
    "xlsx": _xlsx,
    "pdf": _pdf,
}
