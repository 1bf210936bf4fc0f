"""The trial page's data: prompt, transcript step by step, verdicts, and the world diff."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

import fsspec

from atoll.costs import cost_text, tokens_text
from atoll.defaults import DEFAULT_ARTIFACTS
from atoll.errors import AtollError, ErrorCode
from atoll.judge import JudgeIdentity
from atoll.trajectory import RAW_MODEL_CALLS_NAME
from atoll.trial import TrialResult, TrialSpec, TrialState
from orchestrator.artifacts import ArtifactStore, absolute_url, find_trial_folder, is_relative_url
from orchestrator.judging import describe_judge, judged_elsewhere, known_judges, recorded_judge
from orchestrator.store import TrialStore
from orchestrator.store_runs import RunRecord
from orchestrator.viewer.data import find_trial, load_json_artifact, trial_row
from orchestrator.viewer.worlddiff import SnapshotCache, world_diff

MAX_TEXT = 100_000  # characters of one message or tool result sent to the page


def _clip(text: object) -> str:
    text = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False, default=str)
    return (
        text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + f"\n[… {len(text) - MAX_TEXT} more characters]"
    )


def _content_text(content: Any) -> tuple[str, list[str]]:
    """Text of an OpenAI message content (string or parts) and its image URLs."""
    if content is None:
        return "", []
    if isinstance(content, str):
        return content, []
    texts, images = [], []
    for part in content if isinstance(content, list) else [content]:
        if isinstance(part, dict) and part.get("type") == "text":
            texts.append(str(part.get("text", "")))
        elif isinstance(part, dict) and part.get("type") == "image_url":
            url = (part.get("image_url") or {}).get("url", "")
            # Only inline images: a remote URL would make the page fetch what the agent chose.
            if isinstance(url, str) and url.startswith("data:image/"):
                images.append(url)
        else:
            texts.append(json.dumps(part, ensure_ascii=False, default=str))
    return "\n".join(texts), images


def transcript(trajectory: dict[str, Any]) -> dict[str, Any]:
    """The prompt, and the run as steps: each assistant turn with its tool calls and results."""
    calls = {call.get("id"): call for call in trajectory.get("tool_calls") or []}
    model_calls = trajectory.get("model_calls") or []
    prompt, system = "", ""
    steps: list[dict[str, Any]] = []
    answered: dict[str, dict[str, Any]] = {}
    for message in trajectory.get("messages") or []:
        role = message.get("role")
        text, images = _content_text(message.get("content"))
        if role == "system" and not steps:
            system = text
        elif role == "user" and not steps and not prompt:
            prompt = text
        elif role == "assistant":
            step: dict[str, Any] = {
                "index": len(steps) + 1,
                "kind": "assistant",
                "text": _clip(text),
                "images": images,
                "reasoning": _clip(message.get("reasoning_content") or message.get("reasoning") or ""),
                "tool_calls": [],
            }
            for requested in message.get("tool_calls") or []:
                function = requested.get("function") or {}
                recorded = calls.get(requested.get("id"), {})
                arguments = recorded.get("arguments", function.get("arguments", ""))
                if isinstance(arguments, str):
                    with contextlib.suppress(ValueError):  # malformed JSON from the model: shown as it came
                        arguments = json.loads(arguments)
                entry = {
                    "id": requested.get("id"),
                    "name": function.get("name") or recorded.get("name"),
                    "arguments": arguments,
                    "result": _clip(recorded.get("result", "")),
                    "images": [],
                    "is_error": bool(recorded.get("is_error")),
                    "error": recorded.get("error"),
                    "truncated": bool(recorded.get("truncated")),
                    "duration_s": recorded.get("duration_s"),
                }
                step["tool_calls"].append(entry)
                answered[str(requested.get("id"))] = entry
            steps.append(step)
        elif role == "tool":
            answer = answered.get(str(message.get("tool_call_id")))
            if answer is not None:
                if not answer["result"]:
                    answer["result"] = _clip(text)
                answer["images"] = images
        else:
            steps.append(
                {
                    "index": len(steps) + 1,
                    "kind": role or "message",
                    "text": _clip(text),
                    "images": images,
                    "reasoning": "",
                    "tool_calls": [],
                }
            )
    # Model calls are numbered by step; attach tokens and latency to the assistant turns.
    assistant_steps = [s for s in steps if s["kind"] == "assistant"]
    for position, step in enumerate(assistant_steps):
        call = model_calls[position] if position < len(model_calls) else None
        step["model_call"] = call and {
            "step": call.get("step"),  # the model call's step: its raw exchange's (record_raw)
            "duration_s": call.get("duration_s"),
            "usage": call.get("usage"),
            "retries": call.get("retries"),
            "error": call.get("error"),
        }
    return {"system": _clip(system), "prompt": _clip(prompt), "steps": steps}


def trial_detail(
    store: TrialStore, trial_id: str, *, run: str | None = None, snapshots: SnapshotCache | None = None
) -> dict[str, Any]:
    """Everything the trial page shows. Artifacts that cannot be read are named in ``problems``."""
    (spec, result, state, attempts), runs = find_trial(store, trial_id, run)
    record = store.run_record(spec.experiment)
    detail: dict[str, Any] = {
        "trial": trial_row(
            spec, result, state, attempts, judged_elsewhere=judged_elsewhere(record, spec.experiment)
        ),
        "runs": runs,
        "spec": spec.model_dump(mode="json"),
        "problems": [],
        "attempts": [_attempt(a, trial_id) for a in store.attempt_history(spec.experiment, trial_id)],
        "running": None,
    }
    detail["trial"]["checks_met"] = result.checks_met if result else None
    detail["trial"]["checks_total"] = result.checks_total if result else None
    detail["trial"]["check_disagreements"] = result.check_disagreements if result else None
    trajectory = grade = None
    if result is not None:
        for name, uri in (("trajectory", result.trajectory_uri), ("grade", result.grade_uri)):
            try:
                loaded = load_json_artifact(uri)
            except (AtollError, ValueError) as exc:
                detail["problems"].append(f"{name}: {getattr(exc, 'message', exc)}")
                loaded = None
            if name == "trajectory":
                trajectory = _atoll_form(loaded, detail["problems"])
            else:
                grade = loaded
    if state is TrialState.leased:
        # A running attempt: its trajectory so far, as its executor writes it.
        experiment = store.experiment_spec(spec.experiment) or {}
        url = experiment.get("artifacts") or DEFAULT_ARTIFACTS
        detail["running"] = {"attempt": attempts, "steps": 0, "artifacts": url}
        try:
            artifacts = ArtifactStore(run_artifacts_url(store, url))
            # Where it looked, for a page with no steps yet.
            detail["running"]["artifacts"] = artifacts.url
            live = _live_trajectory(artifacts, spec, attempts)
        except (AtollError, OSError, ValueError) as exc:
            detail["problems"].append(f"trajectory so far: {getattr(exc, 'message', exc)}")
            live = None
        if live is not None:
            trajectory, grade = live, None
            detail["running"]["steps"] = live.get("steps", 0)
    detail["downloads"] = {
        "trajectory": bool(result and result.trajectory_uri),
        "grade": bool(result and result.grade_uri),
        "before": bool(result and result.snapshot_before_uri),
        "after": bool(result and result.snapshot_after_uri),
    }
    if trajectory is not None:
        detail["transcript"] = transcript(trajectory)
        detail["final_answer"] = _clip(trajectory.get("final_answer") or "")
        detail["agent_reported_status"] = trajectory.get("agent_reported_status")
        detail["run_status"] = trajectory.get("status")
        detail["run_error"] = trajectory.get("error")
        detail["usage"] = trajectory.get("usage")
        # Continuations from agent checkpoints (atoll.trajectory.Resume), and why a checkpoint
        # was not used.
        detail["resumes"] = trajectory.get("resumes") or []
        detail["resume_refused"] = trajectory.get("resume_refused")
        detail["started_at"], detail["ended_at"] = trajectory.get("started_at"), trajectory.get("ended_at")
    detail["criteria"] = [_criterion(c) for c in (grade or {}).get("criteria") or []]
    detail["judge"] = _judges(record, result, grade)
    judge_tokens = int((grade or {}).get("judge_prompt_tokens") or 0) + int(
        (grade or {}).get("judge_completion_tokens") or 0
    )
    detail["grade"] = (
        None
        if grade is None
        else {
            "passed": grade.get("passed"),
            "score": grade.get("score"),
            "ungradeable": grade.get("ungradeable"),
            "ungradeable_reasons": grade.get("ungradeable_reasons") or [],
            "judge_cost_usd": grade.get("judge_cost_usd"),
            "judge_tokens": judge_tokens,
            "judge_tokens_text": tokens_text(
                judge_tokens,
                int(grade.get("judge_reasoning_tokens") or 0),
                int(grade.get("judge_cached_tokens") or 0),
            ),
            "judge_cost": cost_text(grade.get("judge_cost_usd") or 0.0, judge_tokens),
        }
    )
    detail["raw_model_calls"] = bool(result is not None and _raw_exists(result.trajectory_uri))
    detail["world_diff"] = None
    if (
        result is not None
        and result.snapshot_before_uri
        and result.snapshot_after_uri
        and snapshots is not None
    ):
        try:
            detail["world_diff"] = world_diff(
                snapshots, result.snapshot_before_uri, result.snapshot_after_uri
            )
        except AtollError as exc:
            detail["problems"].append(f"world diff: {exc.message}")
    return detail


def _atoll_form(trajectory: dict[str, Any] | None, problems: list[str]) -> dict[str, Any] | None:
    """A trajectory as the page reads it: atoll's own as it is, ATIF (an imported Harbor
    trial's, docs/interop.md) converted; an unreadable ATIF file is named in ``problems``."""
    from atoll.atif import from_atif, is_atif

    if not is_atif(trajectory):
        return trajectory
    try:
        return from_atif(trajectory).model_dump(mode="json")
    except AtollError as exc:
        problems.append(f"trajectory: {exc.message}")
        return None


def _judges(
    record: RunRecord | None, result: TrialResult | None, grade: dict[str, Any] | None
) -> dict[str, Any]:
    """The run's judge and the judge of this trial's grading (from the grade it counts;
    ``same`` False when they differ: the page then names each verdict's judge)."""
    run_judge = recorded_judge(record)
    grading = (grade or {}).get("judge")
    grading_id = result.judge_id if result is not None else None
    if grading is not None:
        identity = JudgeIdentity.model_validate(grading)
        shown = {"id": identity.id, "describe": identity.describe(), "model": identity.model}
    else:
        shown = {
            "id": grading_id,
            "describe": describe_judge(grading_id, known_judges(record)),
            "model": None,
        }
    return {
        "run": None
        if run_judge is None
        else {"id": run_judge.id, "describe": run_judge.describe(), "model": run_judge.model},
        "grading": shown if grade is not None else None,
        "same": grade is None or run_judge is None or shown["id"] in (None, run_judge.id),
    }


def _criterion(criterion: dict[str, Any]) -> dict[str, Any]:
    return {
        key: criterion.get(key)
        for key in (
            "verifier_id",
            "criterion",
            "verdict",
            "rationale",
            "evidence",
            "decided_by",
            "check_verdict",
            "check_agrees",
            "judge_model",
            "prompt_version",
            "samples",
            "ungradeable_reason",
            "cached",
            "evidence_note",
        )
    }


def run_artifacts_url(store: TrialStore, url: str) -> str:
    """The absolute artifacts URL of a run whose spec records ``url``. Runs record it absolute
    when submitted; one recorded relative (before that) resolves against the folder it was
    submitted from where that can be told — the folder above a SQLite store's file in which the
    relative path exists (``atoll run`` keeps ``atoll-out/atoll.db`` and
    ``atoll-out/artifacts`` side by side) — else against the viewer's working folder."""
    if not is_relative_url(url):
        return absolute_url(url)
    relative = url.removeprefix("file://")
    if store.is_sqlite and not os.path.exists(relative):
        database = Path(store.url.removeprefix("sqlite:///")).resolve()
        for folder in database.parents:
            if (folder / relative).is_dir():
                return absolute_url(url, folder)
    return absolute_url(url)


MAX_RAW_BYTES = 512 * 1024 * 1024  # a raw_model_calls.jsonl the viewer reads at most


def _raw_uri(trajectory_uri: str | None) -> str | None:
    """Where a trial's raw model exchanges are (``record_raw``): beside its trajectory."""
    suffix = "/trajectory.json"
    if not trajectory_uri or not trajectory_uri.endswith(suffix):
        return None
    return trajectory_uri[: -len(suffix)] + "/" + RAW_MODEL_CALLS_NAME


def _raw_exists(trajectory_uri: str | None) -> bool:
    uri = _raw_uri(trajectory_uri)
    if uri is None:
        return False
    try:
        fs, path = fsspec.core.url_to_fs(uri)
        return bool(fs.exists(path))
    except (OSError, ValueError, ImportError):
        return False


def raw_exchanges(store: TrialStore, trial_id: str, step: int, *, run: str | None = None) -> dict[str, Any]:
    """The raw model exchanges (request as sent to litellm, raw response) recorded for model call
    step ``step`` of the trial: ``{"step", "exchanges": [...]}``. AtollError ``unknown_file`` when
    the trial recorded none (``record_raw`` was off) or none for that step."""
    (_spec, result, _state, _attempts), _runs = find_trial(store, trial_id, run)
    uri = _raw_uri(result.trajectory_uri if result is not None else None)
    if uri is None or not _raw_exists(result.trajectory_uri if result is not None else None):
        raise AtollError(
            ErrorCode.unknown_file, f"trial {trial_id} recorded no raw model calls (agent option record_raw)"
        )
    prefix = f'{{"step": {int(step)},'.encode()
    found: list[dict[str, Any]] = []
    try:
        with fsspec.open(uri, "rb") as handle:
            read = 0
            for line in handle:
                read += len(line)
                if read > MAX_RAW_BYTES:
                    raise AtollError(
                        ErrorCode.artifact_unreadable, f"{uri}: larger than {MAX_RAW_BYTES} bytes"
                    )
                if line.startswith(prefix):
                    found.append(json.loads(line))
    except (OSError, ValueError) as exc:
        raise AtollError(ErrorCode.artifact_unreadable, f"artifact {uri}: {exc}") from None
    if not found:
        raise AtollError(
            ErrorCode.unknown_file, f"trial {trial_id} recorded no raw model call at step {step}"
        )
    return {"step": step, "exchanges": found}


def _live_trajectory(artifacts: ArtifactStore, spec: TrialSpec, attempt: int) -> dict[str, Any] | None:
    """The trajectory so far of a running attempt (orchestrator.executors.evidence), or None
    when it has written none yet."""
    from orchestrator.executors.evidence import TRAJECTORY_NAME

    folder = find_trial_folder(artifacts, spec, attempt)
    if folder is None or not artifacts.exists(f"{folder}/{TRAJECTORY_NAME}"):
        return None
    return json.loads(artifacts.get_bytes(f"{folder}/{TRAJECTORY_NAME}"))


def _attempt(row: dict[str, Any], trial_id: str) -> dict[str, Any]:
    """One recorded attempt: outcome, error, duration and steps, and a link to the trajectory
    it kept (an infra_error attempt keeps its trajectory so far)."""
    shown = {
        key: row.get(key) for key in ("attempt", "worker", "outcome", "accepted", "error", "finished_at")
    }
    result = TrialResult.model_validate_json(row["result_json"]) if row.get("result_json") else None
    shown["duration_s"] = result.duration_s if result else None
    shown["steps"] = result.steps if result else None
    shown["trajectory"] = (
        f"/api/trials/{quote(trial_id, safe='')}/download/trajectory?attempt={row.get('attempt')}"
        if result is not None and result.trajectory_uri
        else None
    )
    return shown
