"""Read grading inputs from files: tasks, rubrics and trajectories, ours or Archipelago's shapes.

Accepted shapes
- task: an APEX task object, or an array of them (then a task id picks one);
- rubric: an APEX ``rubric`` array (``verifier_id``, ``criteria``, …), an object with a
  ``rubric`` key, or Archipelago's ``verifiers.json`` (``verifier_values.criteria``);
- trajectory: an atoll trajectory, an ATIF trajectory (Harbor's format, told by its
  ``schema_version``: :mod:`atoll.atif`), or Archipelago's ``{messages, output, status, time_elapsed}``;
- judge settings: a JudgeConfig object, or Archipelago's ``grading_settings.json``
  (``llm_judge_model``, ``llm_judge_extra_args``).
Every error is an AtollError naming the file and the problem.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from atoll.atif import from_atif, is_atif
from atoll.benchmark import Criterion, Task
from atoll.errors import AtollError, ErrorCode, first_problem
from atoll.trajectory import RunStatus, Trajectory
from grader.judge import JudgeConfig


def _read_json(path: Path, what: str) -> Any:
    if not path.is_file():
        raise AtollError(ErrorCode.bad_input, f"{what} {path}: no such file")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise AtollError(ErrorCode.bad_input, f"{what} {path}: not valid JSON: {exc}") from None


def _problem(exc: ValidationError) -> str:
    return str(first_problem(exc))


def load_task_file(path: Path, task_id: str | None = None) -> Task:
    """One task from a task JSON file (object, or array selected by ``task_id``)."""
    data = _read_json(path, "task file")
    if isinstance(data, list):
        matches = [
            t for t in data if isinstance(t, dict) and (task_id is None or t.get("task_id") == task_id)
        ]
        if len(matches) != 1:
            raise AtollError(
                ErrorCode.bad_input,
                f"task file {path}: "
                + (f"no task {task_id!r}" if task_id else "holds several tasks; give --task-id"),
            )
        data = matches[0]
    try:
        return Task.model_validate(data)
    except ValidationError as exc:
        raise AtollError(ErrorCode.bad_input, f"task file {path}: {_problem(exc)}") from None


def criterion_from_record(record: dict[str, Any]) -> Criterion:
    """An APEX rubric item, or an Archipelago verifier (criteria in ``verifier_values``)."""
    if "verifier_values" in record and "criteria" not in record:
        values = dict(record.get("verifier_values") or {})
        text = values.pop("criteria", None) or values.pop("criterion", None)
        extras = {k: v for k, v in values.items() if k not in ("grading_target", "check", "check_only")}
        return Criterion.model_validate(
            {
                "verifier_id": record.get("verifier_id"),
                "criteria": text,
                **{k: values[k] for k in ("grading_target", "check", "check_only") if k in values},
                **extras,
            }
        )
    return Criterion.model_validate(record)


def load_rubric(path: Path) -> list[Criterion]:
    """Criteria from a rubric file in any accepted shape; raises AtollError."""
    data = _read_json(path, "rubric file")
    if isinstance(data, dict):
        data = data.get("rubric") or data.get("verifiers")
    if not isinstance(data, list) or not data:
        raise AtollError(ErrorCode.bad_input, f"rubric file {path}: expected a non-empty array of criteria")
    criteria = []
    for index, record in enumerate(data):
        if not isinstance(record, dict):
            raise AtollError(ErrorCode.bad_input, f"rubric file {path}: item {index} is not an object")
        try:
            criteria.append(criterion_from_record(record))
        except ValidationError as exc:
            raise AtollError(
                ErrorCode.bad_input, f"rubric file {path}: item {index}: {_problem(exc)}"
            ) from None
    return criteria


_ARCHIPELAGO_STATUS = {
    "completed": RunStatus.completed,
    "failed": RunStatus.failed,
    "error": RunStatus.error,
    "cancelled": RunStatus.cancelled,
    "pending": RunStatus.error,
    "running": RunStatus.error,
}


def trajectory_from_data(data: Any, source: str = "trajectory") -> Trajectory:
    """An atoll trajectory, converting ATIF or Archipelago's shape when needed; raises AtollError."""
    if not isinstance(data, dict):
        raise AtollError(ErrorCode.bad_input, f"{source}: expected a JSON object")
    if is_atif(data):
        return from_atif(data, source)
    if "agent" in data and "started_at" in data:
        try:
            return Trajectory.model_validate(data)
        except ValidationError as exc:
            raise AtollError(ErrorCode.bad_input, f"{source}: {_problem(exc)}") from None
    if "messages" not in data:
        raise AtollError(
            ErrorCode.bad_input, f"{source}: neither an atoll trajectory nor Archipelago's (no 'messages')"
        )
    messages = [m for m in data["messages"] if isinstance(m, dict)]
    output = data.get("output") or {}
    answer = output.get("final_answer") if isinstance(output, dict) else None
    if not answer and messages:
        # Archipelago grades the content of the last message (ReAct toolbelt ends on a tool result).
        content = messages[-1].get("content")
        answer = content if isinstance(content, str) else None
    ended = datetime.now(UTC)
    return Trajectory(
        agent="archipelago",
        model=str(output.get("model", "unknown")) if isinstance(output, dict) else "unknown",
        status=_ARCHIPELAGO_STATUS.get(str(data.get("status", "completed")).lower(), RunStatus.completed),
        final_answer=answer,
        messages=messages,
        started_at=ended - timedelta(seconds=float(data.get("time_elapsed") or 0)),
        ended_at=ended,
    )


def load_trajectory(path: Path) -> Trajectory:
    """The atoll trajectory in the JSON file ``path``: atoll's own, ATIF or Archipelago's shape
    (told by content); raises AtollError naming the file and the problem."""
    return trajectory_from_data(_read_json(path, "trajectory"), f"trajectory {path}")


def load_judge_config(path: Path | str) -> JudgeConfig:
    """A JudgeConfig, or Archipelago's grading settings, from a JSON file or given inline (a
    string that starts with ``{``); raises AtollError naming the problem."""
    if isinstance(path, str) and path.lstrip().startswith("{"):
        try:
            data = json.loads(path)
        except ValueError as exc:
            raise AtollError(
                ErrorCode.bad_input, f"judge config (inline JSON): not valid JSON: {exc}"
            ) from None
        path = "(inline JSON)"
    else:
        data = _read_json(Path(path), "judge config")
    if isinstance(data, dict) and "llm_judge_model" in data:
        data = {"model": data["llm_judge_model"], "extra_args": data.get("llm_judge_extra_args") or {}}
    from atoll.llm.profiles import ProfileError, checked_judge

    try:
        return checked_judge(JudgeConfig.model_validate(data))
    except ValidationError as exc:
        raise AtollError(ErrorCode.bad_input, f"judge config {path}: {_problem(exc)}") from None
    except ProfileError as exc:  # a parameter the model refuses, named with the model
        raise AtollError(ErrorCode.bad_input, f"judge config {path}: {exc.message}") from None
