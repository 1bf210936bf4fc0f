"""The grader as an HTTP service (``atoll grade serve``, default port 8082).

``POST /grade`` takes multipart fields ``task`` (APEX task JSON), ``trajectory`` (optional,
atoll or Archipelago JSON), ``judge`` (optional JudgeConfig JSON without secrets; fields
override the server's default judge; never a key, at most ``api_key_secret``, the name of a
secret provisioned on the service) and the files ``before`` and ``after`` (snapshot tar.gz
or world zip); it answers with the Grade JSON.  User errors are 400 with
``{"error": {"code", "message"}}`` (atoll.http.ErrorBody), as is every other error.  The API key is never taken from a request.
With a token (``ATOLL_GRADER_TOKEN``; required to listen beyond loopback) ``POST /grade`` needs
``Authorization: Bearer …``; bodies are bounded (``ATOLL_GRADER_MAX_BODY_BYTES``, 413).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Collection
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, File, Form, UploadFile
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from atoll import telemetry
from atoll.benchmark import Task
from atoll.errors import AtollError, ErrorCode, first_problem
from atoll.grade import Grade
from atoll.http import ERROR_RESPONSES, Health, add_error_handler, bearer_guard, model_reply
from atoll.http_guard import guard
from atoll.judge import JudgeConfig
from atoll.llm.admission import judge_from_request
from atoll.llm.endpoints import trust_endpoints
from grader.cache import VerdictCache
from grader.grading import grade_trial
from grader.inputs import trajectory_from_data
from grader.snapshot import Snapshot

_CHUNK = 1 << 20


def _json_field(text: str | None, name: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise AtollError(ErrorCode.bad_input, f"field {name}: not valid JSON: {exc}") from None
    except RecursionError:  # json's parser recurses per level: [[[[…]]]] of a megabyte
        raise AtollError(ErrorCode.bad_input, f"field {name}: JSON nested too deeply") from None


async def _save(upload: UploadFile, target: Path) -> Path:
    with target.open("wb") as out:
        while chunk := await upload.read(_CHUNK):
            out.write(chunk)
    return target


def create_app(
    judge: JudgeConfig | None = None,
    cache: VerdictCache | None = None,
    *,
    allowed_api_bases: Collection[str] = (),
    token: str | None = None,
    max_body_bytes: int | None = None,
    max_concurrent: int = 2,
) -> FastAPI:
    """The grading service; ``judge`` is the default judge (None = programmatic checks only).
    A request's judge may point only at the default's endpoint, one of ``allowed_api_bases`` or
    an endpoint on the key allow-list (atoll.llm.endpoints), and carries no key of its own.
    With ``token``, ``POST /grade`` needs ``Bearer <token>``; ``max_body_bytes`` bounds a body;
    at most ``max_concurrent`` grades are worked on at once (the others wait their turn), so
    the memory they take is bounded by the service, not by how many callers post at once."""
    allowed = frozenset(allowed_api_bases)
    # The operator's own endpoints: the service's keys may be sent there (atoll.llm.endpoints).
    # The operator's own endpoints, for its judge model's provider: the service's key of that
    # provider may be sent there, no other key (atoll.llm.endpoints).
    if judge is not None:
        trust_endpoints([(judge.model, judge.api_base), *((judge.model, url) for url in allowed)])
    # traces: service_options is {} unless an OTLP endpoint is set (atoll.telemetry)
    app = FastAPI(title="atoll grader", version="1", **telemetry.service_options("atoll-grader"))
    # Host allow-list, cross-site refusal and the body limit (atoll.http_guard)
    guard(app, max_body_bytes=max_body_bytes)
    authorize = bearer_guard(token)
    grading = asyncio.Semaphore(max_concurrent)

    # A misconfigured judge endpoint is an upstream failure, not the caller's bad request.
    add_error_handler(app)

    @app.get("/health", responses=ERROR_RESPONSES)
    async def health() -> Health:
        return Health(status="ok")

    @app.post(
        "/grade",
        dependencies=[Depends(authorize)],
        response_class=JSONResponse,
        responses={200: {"model": Grade, "description": "the Grade JSON"}, **ERROR_RESPONSES},
    )
    async def grade(
        task: str = Form(...),
        before: UploadFile = File(...),
        after: UploadFile = File(...),
        trajectory: str | None = Form(None),
        judge_config: str | None = Form(None, alias="judge"),
    ) -> Response:
        try:
            parsed_task = Task.model_validate(_json_field(task, "task"))
        except ValidationError as exc:
            raise AtollError(ErrorCode.bad_input, f"field task: {first_problem(exc).message}") from None
        parsed_trajectory = None
        if trajectory:
            parsed_trajectory = trajectory_from_data(
                _json_field(trajectory, "trajectory"), "field trajectory"
            )
        chosen = judge_from_request(_json_field(judge_config, "judge"), judge, allowed_api_bases=allowed)
        with tempfile.TemporaryDirectory(prefix="atoll-grade-") as scratch:
            before_path = await _save(before, Path(scratch) / "before")
            after_path = await _save(after, Path(scratch) / "after")
            async with grading:
                # Uploads are full archives only (tar.gz or zip): a manifest or delta names
                # files on the service's disk, which no caller may pick.
                before_snapshot = await asyncio.to_thread(_archive, before_path, "before")
                after_snapshot = await asyncio.to_thread(_archive, after_path, "after")
                result = await grade_trial(
                    parsed_task, before_snapshot, after_snapshot, parsed_trajectory, chosen, cache
                )
        return model_reply(result, by_alias=True)

    return app


def _archive(path: Path, field: str) -> Snapshot:
    """An uploaded snapshot, read as the full archive it must be; a stored world (a manifest or
    delta) is refused naming the field, AtollError(``bad_input``)."""
    from atoll.world_store import world_kind

    if world_kind(path) != "archive":
        raise AtollError(
            ErrorCode.bad_input,
            f"field {field}: a stored world's manifest or delta; POST /grade takes full archives "
            "(tar.gz or zip; `atoll grade` reads stored worlds)",
        )
    return Snapshot(path)
