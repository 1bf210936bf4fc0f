"""Client of the grading service (``POST /grade``), for callers that run the grader remotely."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from atoll import telemetry
from atoll.benchmark import Task
from atoll.errors import AtollError, ErrorCode
from atoll.grade import Grade
from atoll.trajectory import Trajectory


async def grade_remote(
    url: str,
    task: Task,
    before: str | Path,
    after: str | Path,
    trajectory: Trajectory | None = None,
    judge: dict[str, Any] | None = None,
    *,
    timeout_s: float = 1800.0,
    headers: dict[str, str] | None = None,
) -> Grade:
    """Upload the snapshots to the service at ``url`` and return its Grade.

    ``judge`` holds JudgeConfig fields overriding the service's default (never the key).
    Raises AtollError("grader_rejected") for a 4xx answer (with the service's message),
    AtollError("model_endpoint") when the service's judge endpoint is misconfigured, and
    AtollError("grader_unavailable") for transport failures and other 5xx answers.
    """
    data = {"task": task.model_dump_json(by_alias=True)}
    if trajectory is not None:
        data["trajectory"] = trajectory.model_dump_json()
    if judge is not None:
        data["judge"] = json.dumps(judge)
    try:
        async with httpx.AsyncClient(
            base_url=url.rstrip("/"), timeout=timeout_s, headers=headers, event_hooks=telemetry.httpx_hooks()
        ) as client:
            with Path(before).open("rb") as before_file, Path(after).open("rb") as after_file:
                response = await client.post(
                    "/grade", data=data, files={"before": before_file, "after": after_file}
                )
    except httpx.HTTPError as exc:
        raise AtollError(
            ErrorCode.grader_unavailable, f"grader at {url}: {type(exc).__name__}: {exc}"
        ) from exc
    if response.status_code >= 400:
        try:
            error = response.json()["error"]
            code, message = error.get("code"), error["message"]
        except (ValueError, KeyError, TypeError, AttributeError):
            code, message = None, response.text[:300]
        if code == "model_endpoint":
            raise AtollError(ErrorCode.model_endpoint, f"grader at {url}: {message}")
    if 400 <= response.status_code < 500:
        raise AtollError(ErrorCode.grader_rejected, f"grader at {url}: {message}")
    if response.status_code >= 500:
        raise AtollError(ErrorCode.grader_unavailable, f"grader at {url}: HTTP {response.status_code}")
    return Grade.model_validate(response.json())
