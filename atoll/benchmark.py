"""Benchmark contracts: worlds, tasks, rubric criteria, checks, gold outputs, reference solutions.

The field names follow the public APEX-Agents layout (``tasks_and_rubrics.json``,
``world_descriptions.json``) so the real benchmark loads unchanged.  Unknown fields
are kept (``extra="allow"``) and written back out verbatim.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from atoll.coworkers import PersonaSummary
from atoll.targets import GradingTarget, derived_target, parse_target


class OutputType(StrEnum):
    """What a task asks the agent to deliver (APEX ``expected_output``)."""

    message_in_console = "message_in_console"
    make_new_doc = "make_new_doc"
    make_new_sheet = "make_new_sheet"
    make_new_slide_deck = "make_new_slide_deck"
    edit_existing_sheet = "edit_existing_sheet"
    edit_existing_doc = "edit_existing_doc"
    edit_existing_slide_deck = "edit_existing_slide_deck"


def path_segment_problem(value: str) -> str | None:
    """Why ``value`` cannot name one folder or file of a benchmark (None when it can).

    Task and world ids name ``task_files/<task_id>/``, ``gold_files/<task_id>/``,
    ``world_files_zipped/<world_id>.zip`` and ``worlds/<world_id>/``. A benchmark is not
    always the operator's (``hf://`` takes any published dataset), so an id that climbs
    (``../../etc``) or names a subfolder would make a world, an overlay or a gold output of a
    host folder or archive."""
    if not value or value in (".", "..") or any(char in value for char in "/\\\0"):
        return f"{value!r} must be one file name (not empty, '.' or '..'; no '/', '\\' or NUL)"
    if len(value.encode("utf-8", "surrogatepass")) > 200:
        return f"{value[:40]!r}… is longer than 200 bytes"
    return None


def _segment(value: str) -> str:
    problem = path_segment_problem(value)
    if problem:
        raise ValueError(problem)
    return value


class _Open(BaseModel):
    """Base for APEX records: unknown fields are kept, never rejected."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- programmatic checks ---------------------------------------------------------------------


class AnswerNumberCheck(_Closed):
    """A number in the final answer equals ``value`` within ``tolerance`` (absolute) or
    ``rel_tolerance`` (relative). Thousands separators, currency signs, ``%`` and
    ``k/m/bn`` suffixes are normalised."""

    kind: Literal["answer_number"] = "answer_number"
    value: float
    tolerance: float = 0.0
    rel_tolerance: float = 0.0


class AnswerRegexCheck(_Closed):
    """The final answer matches ``pattern`` (Python ``re.search``; case-insensitive unless
    ``case_sensitive``)."""

    kind: Literal["answer_regex"] = "answer_regex"
    pattern: str
    case_sensitive: bool = False


class CellValueCheck(_Closed):
    """A workbook in the final world has ``value`` in ``sheet``!``cell``.

    ``path`` is a glob over the filesystem tree (``/Reports/*.xlsx``); the first workbook that
    matches and satisfies the check passes.  ``sheet`` None means the first sheet.  Numbers
    compare within ``tolerance``; strings compare case-insensitively after trimming."""

    kind: Literal["cell_value"] = "cell_value"
    path: str
    sheet: str | None = None
    cell: str
    value: float | str
    tolerance: float = 0.0


class FileExistsCheck(_Closed):
    """A file of ``file_type`` matching ``path`` (glob, default any) exists in the final world;
    with ``changed`` it must have been created or modified by the agent.  ``contains`` (optional)
    must occur (case-insensitively) in its extracted text."""

    kind: Literal["file_exists"] = "file_exists"
    file_type: str
    path: str = "**"
    changed: bool = True
    contains: list[str] = Field(default_factory=list)


class EmailSentCheck(_Closed):
    """The agent sent a mail to ``to`` (every address listed must be among To/Cc) whose subject
    and body contain the given strings (case-insensitive); ``attachment_type`` requires an
    attachment with that extension."""

    kind: Literal["email_sent"] = "email_sent"
    to: list[str]
    subject_contains: str | None = None
    body_contains: list[str] = Field(default_factory=list)
    attachment_type: str | None = None


class EventCreatedCheck(_Closed):
    """The agent created a calendar event whose summary contains ``summary_contains``, on
    ``date`` (YYYY-MM-DD, optional) with every attendee in ``attendees``."""

    kind: Literal["event_created"] = "event_created"
    summary_contains: str
    date: str | None = None
    attendees: list[str] = Field(default_factory=list)


class ChatPostedCheck(_Closed):
    """The agent posted (or replied) in ``channel`` (name or id, optional) a message containing
    every string in ``contains``."""

    kind: Literal["chat_posted"] = "chat_posted"
    channel: str | None = None
    contains: list[str] = Field(default_factory=list)


class CoworkerContactedCheck(_Closed):
    """The agent contacted persona ``persona`` (name or email; docs/coworkers.md): a message of
    the agent's reached them, over ``channel`` when given (``chat`` or ``mail``), containing
    every string in ``contains``."""

    kind: Literal["coworker_contacted"] = "coworker_contacted"
    persona: str = Field(min_length=1)
    channel: Literal["chat", "mail"] | None = None
    contains: list[str] = Field(default_factory=list)


Check = Annotated[
    AnswerNumberCheck
    | AnswerRegexCheck
    | CellValueCheck
    | FileExistsCheck
    | EmailSentCheck
    | EventCreatedCheck
    | ChatPostedCheck
    | CoworkerContactedCheck,
    Field(discriminator="kind"),
]


class Criterion(_Open):
    """One binary rubric item (APEX ``rubric[]``)."""

    verifier_id: str
    criteria: str = Field(description="The criterion in natural language, as the judge reads it.")
    grading_target: GradingTarget | None = None
    check: Check | None = Field(
        default=None,
        description="Machine-checkable form; with check_only the judge is not consulted.",
    )
    check_only: bool = False

    @model_validator(mode="before")
    @classmethod
    def _target_spellings(cls, values: Any) -> Any:
        """Accept a string target, or Archipelago's ``expected_file_type`` in its place."""
        if not isinstance(values, dict):
            return values
        raw = values.get("grading_target")
        source = "grading_target"
        if raw is None and values.get("expected_file_type"):
            raw, source = values["expected_file_type"], "expected_file_type"
        if raw is None or isinstance(raw, GradingTarget):
            return values
        try:
            target = parse_target(raw)
        except ValueError as exc:
            label = values.get("verifier_id", "?")
            raise ValueError(f"criterion {label!r}: {source}: {exc}") from None
        return {**values, "grading_target": target}

    @field_validator("criteria")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("criterion text is empty")
        return value


# --- gold output and reference solution ------------------------------------------------------


class GoldFile(_Open):
    """A file of the gold output, relative to the task's gold folder or inline."""

    path: str = Field(description="Where the file lives in the world, e.g. /Reports/summary.xlsx")
    description: str | None = None


class GoldOutput(_Open):
    """What a correct solution delivers: the answer text and/or files it leaves."""

    answer: str | None = None
    files: list[GoldFile] = Field(default_factory=list)


class ReferenceStep(_Closed):
    """One tool call of a reference solution, by its gateway name (``{server}_{tool}``)."""

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ReferenceSolution(_Closed):
    """A list of tool calls an oracle replays, then the final answer it submits."""

    steps: list[ReferenceStep] = Field(default_factory=list)
    final_answer: str = ""


# --- tasks, worlds, benchmark ----------------------------------------------------------------


class Task(_Open):
    """One APEX task (an element of ``tasks_and_rubrics.json``)."""

    task_id: str
    task_name: str = ""
    domain: str = ""
    world_id: str
    prompt: str
    task_input_files: Any = None
    expected_output: OutputType | str | None = None
    rubric: list[Criterion]
    gold_output: GoldOutput | None = None
    reference_solution: ReferenceSolution | None = None

    def grading_target_for(self, criterion: Criterion) -> GradingTarget:
        """The criterion's own target, else the one derived from ``expected_output``."""
        return criterion.grading_target or derived_target(
            str(self.expected_output) if self.expected_output else None
        )

    @field_validator("rubric")
    @classmethod
    def _rubric_not_empty(cls, value: list[Criterion]) -> list[Criterion]:
        if not value:
            raise ValueError("rubric is empty: a task needs at least one criterion")
        return value

    @field_validator("task_id", "world_id")
    @classmethod
    def _ids_are_file_names(cls, value: str) -> str:
        return _segment(value)


class World(_Open):
    """One world (an element of ``world_descriptions.json``)."""

    world_id: str
    world_name: str = ""

    @field_validator("world_id")
    @classmethod
    def _id_is_a_file_name(cls, value: str) -> str:
        return _segment(value)


class Benchmark(BaseModel):
    """A loaded benchmark directory: tasks, worlds and where their files live."""

    model_config = ConfigDict(extra="forbid")

    root: str = Field(description="Absolute path of the benchmark directory")
    tasks: list[Task]
    worlds: list[World]
    world_archives: dict[str, str] = Field(
        default_factory=dict, description="world_id -> path of world_files_zipped/<world>.zip"
    )
    task_overlays: dict[str, str] = Field(
        default_factory=dict, description="task_id -> path of task_files/<task_id>/ (if present)"
    )
    layout: Literal["apex-v1", "apex-v1.1"] = Field(
        default="apex-v1", description="apex-v1: tasks_and_rubrics.json; apex-v1.1: Harbor task folders"
    )
    world_seeds: dict[str, dict[str, str]] = Field(
        default_factory=dict,
        description="world_id -> {subsystem: path of a tar.gz rooted at it} (v1.1 worlds/<id>/)",
    )
    unavailable_apps: dict[str, dict[str, str]] = Field(
        default_factory=dict, description="world_id -> {app: why atoll cannot serve it}"
    )
    warnings: list[str] = Field(default_factory=list)
    world_personas: dict[str, list[PersonaSummary]] = Field(
        default_factory=dict,
        description="world_id -> the personas of its .apps_data/coworkers/personas.json (docs/coworkers.md)",
    )

    def world_sources(self, world_id: str) -> list[tuple[str, str]]:
        """(subsystem, path) pairs that populate ``world_id``: its zip as ``world``, or its
        per-subsystem seeds."""
        if world_id in self.world_seeds:
            return sorted(self.world_seeds[world_id].items())
        return [("world", self.world_archives[world_id])]

    def unavailable_for(self, task: Task) -> dict[str, str]:
        """The apps the task's world lists that atoll cannot serve, with reasons."""
        return dict(self.unavailable_apps.get(task.world_id, {}))

    def task(self, task_id: str) -> Task:
        for task in self.tasks:
            if task.task_id == task_id:
                return task
        raise KeyError(f"no task {task_id!r} in benchmark {self.root}")

    def world(self, world_id: str) -> World:
        for world in self.worlds:
            if world.world_id == world_id:
                return world
        raise KeyError(f"no world {world_id!r} in benchmark {self.root}")
