"""Grading targets: which evidence a criterion is judged on, in every spelling users bring.

Three spellings are accepted for a criterion's ``grading_target``:

- atoll's object: ``{"kind": "file_type", "file_types": ["xlsx"], "with_answer": true}``;
- a plain string: ``"final answer"``, ``"all"``, ``"app data"``, ``"xlsx"``/``".xlsx"``
  (files of that type) or ``"/Reports/memo.docx"`` (one file);
- Archipelago's ``expected_file_type`` values (its ``FileTypeCategory``), e.g.
  ``"Final Answer Only (No Files)"`` or ``"Spreadsheets (.xlsx, .xls, .xlsm, .ods)"``, given
  either as ``grading_target`` or as the criterion's own ``expected_file_type`` field (as in a
  ``verifiers.json``'s ``verifier_values``).

When a criterion has no target, one is derived from its task's ``expected_output``
(:func:`derived_target`); with neither, the criterion sees everything (``all``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class GradingTarget(BaseModel):
    """Which evidence a criterion is judged on.

    ``final_answer``: only the agent's final answer; ``file_type``: files of the listed types
    created or modified (``file_types`` like ``["xlsx"]``; ``file_type`` is the one-type form),
    plus the final answer when ``with_answer``; ``file``: one named file (``path``, a path under
    ``filesystem/`` as the agent sees it, e.g. ``/Reports/memo.docx``); ``app_data``:
    mail/calendar/chat changes; ``all``: everything (the default).
    """

    model_config = ConfigDict(extra="forbid")

    kind: Literal["final_answer", "file_type", "file", "app_data", "all"] = "all"
    file_type: str | None = None
    file_types: list[str] = Field(default_factory=list)
    with_answer: bool = False
    path: str | None = None

    def wanted_types(self) -> list[str]:
        """The file extensions (lower case, no dot) a ``file_type`` target selects."""
        types = [self.file_type] if self.file_type else []
        return [_extension(t) for t in [*types, *self.file_types] if _extension(t)]


def _extension(value: str) -> str:
    return value.strip().lower().lstrip(".")


def _files(*types: str, with_answer: bool = False) -> GradingTarget:
    return GradingTarget(kind="file_type", file_types=list(types), with_answer=with_answer)


# Archipelago's FileTypeCategory values (grading/runner/evals/output_llm/artifact_filters.py)
# and their extension lists; "Any File Type" and "any" are its older spellings of "all".
# A specific category shows only files of those types, never the final answer, as there.
ARCHIPELAGO_FILE_TYPES: dict[str, GradingTarget] = {
    "Final Answer Only (No Files)": GradingTarget(kind="final_answer"),
    "Word Documents (.docx, .doc, .odt)": _files("docx", "doc", "odt"),
    "Text Files (.txt)": _files("txt"),
    "PDF Documents (.pdf)": _files("pdf"),
    "Spreadsheets (.xlsx, .xls, .xlsm, .ods)": _files("xlsx", "xls", "xlsm", "ods"),
    "Presentations (.pptx, .ppt, .odp)": _files("pptx", "ppt", "odp"),
    "Python Files (.py)": _files("py"),
    "JavaScript/TypeScript (.js, .ts, .jsx, .tsx)": _files("js", "ts", "jsx", "tsx"),
    "Markdown (.md)": _files("md"),
    "JSON/YAML (.json, .yaml, .yml)": _files("json", "yaml", "yml"),
    "Database Files (.db)": _files("db"),
    "Images (.png, .jpg, .jpeg, .webp)": _files("png", "jpg", "jpeg", "webp"),
    "All output (modified files and final message in console)": GradingTarget(kind="all"),
    "Any File Type": GradingTarget(kind="all"),
    "any": GradingTarget(kind="all"),
}
_ARCHIPELAGO_FOLDED = {name.casefold(): target for name, target in ARCHIPELAGO_FILE_TYPES.items()}

# Plain-string spellings, compared after folding case and treating "_", "-" as spaces.
_PLAIN: dict[str, GradingTarget] = {
    "final answer": GradingTarget(kind="final_answer"),
    "final answer only": GradingTarget(kind="final_answer"),
    "answer": GradingTarget(kind="final_answer"),
    "message in console": GradingTarget(kind="final_answer"),
    "all": GradingTarget(kind="all"),
    "everything": GradingTarget(kind="all"),
    "app data": GradingTarget(kind="app_data"),
    "apps data": GradingTarget(kind="app_data"),
}

# Extensions a plain string may name on its own ("xlsx", ".docx").
_KNOWN_EXTENSIONS = frozenset(t for target in ARCHIPELAGO_FILE_TYPES.values() for t in target.file_types) | {
    "csv",
    "html",
    "htm",
    "rtf",
    "eml",
    "ics",
    "mbox",
}

# expected_output -> the office file types a correct answer leaves (Archipelago's categories).
_OUTPUT_FILE_TYPES: dict[str, tuple[str, ...]] = {
    "make_new_doc": ("docx", "doc", "odt"),
    "edit_existing_doc": ("docx", "doc", "odt"),
    "make_new_sheet": ("xlsx", "xls", "xlsm", "ods"),
    "edit_existing_sheet": ("xlsx", "xls", "xlsm", "ods"),
    "make_new_slide_deck": ("pptx", "ppt", "odp"),
    "edit_existing_slide_deck": ("pptx", "ppt", "odp"),
}


def parse_target(value: Any) -> GradingTarget:
    """A GradingTarget from any accepted spelling (object, plain string, Archipelago value).

    Raises ValueError naming the value when a string is none of the known spellings.
    """
    if isinstance(value, GradingTarget):
        return value
    if isinstance(value, dict):
        return GradingTarget.model_validate(value)
    if not isinstance(value, str):
        raise ValueError(f"grading target must be an object or a string, got {type(value).__name__}")
    text = value.strip()
    archipelago = _ARCHIPELAGO_FOLDED.get(text.casefold())
    if archipelago is not None:
        return archipelago.model_copy(deep=True)
    folded = " ".join(text.casefold().replace("_", " ").replace("-", " ").split())
    if folded in _PLAIN:
        return _PLAIN[folded].model_copy(deep=True)
    if text.startswith("/"):
        return GradingTarget(kind="file", path=text)
    if _extension(text) in _KNOWN_EXTENSIONS:
        return _files(_extension(text))
    raise ValueError(
        f"grading target {value!r} is not known: use 'final answer', 'all', 'app data', a file type "
        "such as 'xlsx', a path such as '/Reports/memo.docx', an atoll target object, or one of "
        "Archipelago's expected_file_type values (e.g. 'Final Answer Only (No Files)')"
    )


def derived_target(expected_output: str | None) -> GradingTarget:
    """The target a criterion without one is judged on, from its task's ``expected_output``.

    ``message_in_console`` -> the final answer.  ``make_new_*``/``edit_existing_*`` -> the
    files of that type the agent created or modified, plus the final answer: v1 rubrics mix
    criteria about the deliverable with criteria about what the agent reports, and nothing
    says which is which, so the judge sees both rather than wrongly failing either kind.
    No (or an unknown) ``expected_output`` -> everything.
    """
    kind = str(expected_output or "")
    if kind == "message_in_console":
        return GradingTarget(kind="final_answer")
    if kind in _OUTPUT_FILE_TYPES:
        return _files(*_OUTPUT_FILE_TYPES[kind], with_answer=True)
    return GradingTarget(kind="all")
