"""Archipelago's asynchronous data endpoints: populate and snapshot as jobs to poll.

``POST /data/populate/s3/start`` and ``POST /data/snapshot/s3/start`` answer at once with
``{"job_id"}``; ``GET /data/populate/s3/status/{job_id}`` and ``GET
/data/snapshot/s3/status/{job_id}`` answer ``{"status": "running" | "done" | "error",
"result", "error"}``. Request and result shapes are Archipelago's (its
``environment/runner/data``), so its clients work unchanged; the work itself is the same as
the synchronous routes' (same lock, limits, staging and deterministic archive). The
synchronous ``POST /data/snapshot/s3`` is routed here too: a body in Archipelago's form gets
the job's result directly, one with atoll's ``url``/``storage_options`` goes to atoll's form
(:func:`environment.data_routes.snapshot_to_url`).

Problems a client can fix (a lifecycle hook, no snapshot destination configured, a bad
subsystem) are refused when the job is started, with a 4xx; failures while the job runs
(the object store refusing, an unsafe archive) end the job with ``status: "error"`` and a
one-line ``error`` naming the URL or member.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import tarfile
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import IO, Any, Literal, TypeVar

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from atoll.errors import AtollError, ErrorCode, http_status
from atoll.http import http_error, strict_json
from environment.archipelago import S3Credentials, refuse_hooks, storage_options_for
from environment.data_routes import (
    SnapshotUploadRequest,
    SourceSpec,
    _build_snapshot,
    _http_error,
    _run_populate,
    _url_sources,
    run_in_data_thread,
    snapshot_to_url,
)
from environment.replies import SnapshotUploaded
from environment.snapshot import SnapshotInfo
from environment.url_policy import check_url, opener_options, refusal_in, resolve_url

logger = logging.getLogger("environment.jobs")
router = APIRouter()

#: Finished jobs kept for polling; the oldest finished ones are forgotten beyond this.
MAX_JOBS = 256
#: Archipelago's presigned URLs last 7 days.
PRESIGN_SECONDS = 7 * 24 * 3600
_SNAPSHOT_ID = r"^[A-Za-z0-9_-]{1,128}$"

JobState = Literal["running", "done", "error"]
_Model = TypeVar("_Model", bound=BaseModel)


class HookTiming(BaseModel):
    name: str
    duration_s: float


class PopulateJobRequest(BaseModel):
    """Archipelago's ``PopulateRequest``; ``mode`` is atoll's (merge by default)."""

    model_config = ConfigDict(extra="ignore")

    sources: list[SourceSpec] = Field(min_length=1)
    post_populate_hooks: list[dict[str, Any]] = Field(default_factory=list)
    s3_credentials: S3Credentials | None = None
    s3_transfer_backend: str = Field("boto3", description="accepted and ignored: atoll reads through fsspec")
    mode: Literal["merge", "replace"] = "merge"


class SnapshotJobRequest(BaseModel):
    """Archipelago's ``SnapshotRequest``: ``files`` (its default) or one ``tar.gz``."""

    model_config = ConfigDict(extra="ignore")

    format: Literal["files", "tar.gz"] = "files"
    pre_snapshot_hooks: list[dict[str, Any]] = Field(default_factory=list)
    snapshot_id: str | None = Field(None, pattern=_SNAPSHOT_ID)
    s3_credentials: S3Credentials | None = None
    snapshot_zip_enabled: bool = Field(True, description="accepted and ignored: no extra tar.zst copy")


class PopulateJobResult(BaseModel):
    objects_added: int
    hook_timings: list[HookTiming] = Field(default_factory=list)
    extracted_bytes: int
    skipped_members: int = 0
    subsystems: list[str]
    mode: str
    duration_ms: float


class SnapshotArchiveResult(BaseModel):
    """``format: "tar.gz"``: one archive at ``<prefix>/<snapshot_id>.tar.gz``."""

    snapshot_id: str
    s3_uri: str
    presigned_url: str
    size_bytes: int
    hook_timings: list[HookTiming] = Field(default_factory=list)
    sha256: str
    files: int


class SnapshotFilesResult(BaseModel):
    """``format: "files"``: every file at ``<prefix>/<snapshot_id>/{filesystem,.apps_data}/…``."""

    snapshot_id: str
    files_uploaded: int
    total_bytes: int
    hook_timings: list[HookTiming] = Field(default_factory=list)
    s3_uri: str


class JobStarted(BaseModel):
    job_id: str


class JobStatus(BaseModel):
    status: JobState
    result: PopulateJobResult | SnapshotArchiveResult | SnapshotFilesResult | None = None
    error: str | None = None


@dataclass
class _Job:
    kind: str
    status: JobState = "running"
    result: BaseModel | None = None
    error: str | None = None
    task: asyncio.Task[None] | None = field(default=None, repr=False)


class _Jobs:
    """The app's jobs by id; running ones are never forgotten (the task is held here)."""

    def __init__(self) -> None:
        self._jobs: OrderedDict[str, _Job] = OrderedDict()

    def start(self, kind: str, work: Any) -> str:
        job_id = uuid.uuid4().hex
        job = _Job(kind)
        self._jobs[job_id] = job

        async def run() -> None:
            try:
                job.result = await work()
                job.status = "done"
            except HTTPException as exc:
                job.status, job.error = "error", _detail_line(exc.detail)
            except AtollError as exc:
                job.status, job.error = "error", exc.message
            except Exception as exc:  # our own bug: logged with its traceback, reported in one line
                logger.exception("%s job %s failed", kind, job_id)
                job.status, job.error = "error", f"internal error: {type(exc).__name__}: {exc}"
            if job.error:
                logger.warning("%s job failed", kind, extra={"job_id": job_id, "error": job.error})

        job.task = asyncio.create_task(run(), name=f"atoll-{kind}-{job_id}")
        self._forget_old()
        return job_id

    def status(self, kind: str, job_id: str) -> JobStatus:
        job = self._jobs.get(job_id)
        if job is None or job.kind != kind:
            # Archipelago's reply: its detail is the text (the code is the 404's own, not_found)
            raise HTTPException(http_status("not_found", refusal=True), f"Unknown {kind} job: {job_id}")
        return JobStatus(status=job.status, result=job.result, error=job.error)

    def _forget_old(self) -> None:
        finished = [key for key, job in self._jobs.items() if job.status != "running"]
        for key in finished[: max(0, len(self._jobs) - MAX_JOBS)]:
            del self._jobs[key]


def _jobs(request: Request) -> _Jobs:
    state = request.app.state
    if not hasattr(state, "data_jobs"):
        state.data_jobs = _Jobs()
    return state.data_jobs


def _detail_line(detail: Any) -> str:
    if isinstance(detail, dict):
        return str(detail.get("error") or detail)
    return str(detail)


@router.post(
    "/populate/s3/start", response_model=JobStarted, dependencies=[Depends(strict_json(PopulateJobRequest))]
)
async def start_populate(request: Request, body: PopulateJobRequest) -> JobStarted:
    """Start populating from URLs (any fsspec URL); poll ``/data/populate/s3/status/{job_id}``."""
    refuse_hooks(body.post_populate_hooks, "post_populate_hooks")
    try:
        sources = _url_sources(request, body.sources)
    except AtollError as exc:
        raise _http_error(exc) from exc
    settings = request.app.state.settings
    options = storage_options_for(body.s3_credentials, settings.storage_options)

    async def work() -> PopulateJobResult:
        try:
            reply = await _run_populate(request, sources, body.mode, None, storage_options=options)
        except AtollError as exc:
            raise _http_error(exc) from exc
        return PopulateJobResult.model_validate(reply, from_attributes=False)

    job_id = _jobs(request).start("populate", work)
    logger.info("populate job started", extra={"job_id": job_id, "sources": len(sources)})
    return JobStarted(job_id=job_id)


@router.get("/populate/s3/status/{job_id}", response_model=JobStatus)
async def populate_status(request: Request, job_id: str) -> JobStatus:
    return _jobs(request).status("populate", job_id)


def _snapshot_work(
    request: Request, body: SnapshotJobRequest
) -> tuple[str, Callable[[], Awaitable[BaseModel]]]:
    """The snapshot ``body`` asks for, checked now (hooks, destination, allow-list: 4xx), as
    ``(snapshot_id, work)``; ``work()`` builds, uploads and returns Archipelago's result."""
    refuse_hooks(body.pre_snapshot_hooks, "pre_snapshot_hooks")
    settings = request.app.state.settings
    if not settings.snapshot_url_prefix:
        raise http_error(
            ErrorCode.no_snapshot_destination,
            "no snapshot destination: set ATOLL_SNAPSHOT_URL_PREFIX (e.g. s3://bucket/snapshots)",
        )
    prefix = settings.snapshot_url_prefix.rstrip("/")
    snapshot_id = body.snapshot_id or f"snap_{uuid.uuid4().hex}"
    try:
        check_url(f"{prefix}/{snapshot_id}", settings.url_prefixes, "snapshot destination")
    except AtollError as exc:
        raise _http_error(exc) from exc
    options = settings.storage_options
    if body.s3_credentials is not None:
        options = body.s3_credentials.storage_options(options)

    async def work() -> BaseModel:
        spool, info = await _build_snapshot(request)
        if body.format == "tar.gz":
            url = f"{prefix}/{snapshot_id}.tar.gz"
            signed = await _upload(request, url, options, lambda fs, path: _put_archive(fs, path, spool))
            return SnapshotArchiveResult(
                snapshot_id=snapshot_id,
                s3_uri=url,
                presigned_url=signed,
                size_bytes=info.size_bytes,
                sha256=info.sha256,
                files=info.files,
            )
        url = f"{prefix}/{snapshot_id}"
        uploaded: list[tuple[int, int]] = []
        await _upload(
            request, url, options, lambda fs, path: uploaded.append(_put_files(fs, path, spool, info))
        )
        ((files, total_bytes),) = uploaded
        return SnapshotFilesResult(
            snapshot_id=snapshot_id, files_uploaded=files, total_bytes=total_bytes, s3_uri=f"{url}/"
        )

    return snapshot_id, work


@router.post(
    "/snapshot/s3/start", response_model=JobStarted, dependencies=[Depends(strict_json(SnapshotJobRequest))]
)
async def start_snapshot(request: Request, body: SnapshotJobRequest | None = None) -> JobStarted:
    """Start a snapshot to ``ATOLL_SNAPSHOT_URL_PREFIX``; poll ``/data/snapshot/s3/status/{job_id}``."""
    snapshot_id, work = _snapshot_work(request, body or SnapshotJobRequest())
    job_id = _jobs(request).start("snapshot", work)
    logger.info("snapshot job started", extra={"job_id": job_id, "snapshot_id": snapshot_id})
    return JobStarted(job_id=job_id)


#: ``POST /data/snapshot/s3`` fields only atoll's form has, and those only Archipelago's has.
ATOLL_SNAPSHOT_FIELDS = frozenset({"url", "storage_options"})
ARCHIPELAGO_SNAPSHOT_FIELDS = frozenset(
    {"format", "s3_credentials", "pre_snapshot_hooks", "snapshot_zip_enabled"}
)


@router.post(
    "/snapshot/s3",
    response_model=None,
    responses={200: {"model": SnapshotUploaded | SnapshotArchiveResult | SnapshotFilesResult}},
)
async def snapshot_s3(request: Request) -> Any:
    """The synchronous snapshot upload, in either of two forms told apart by their fields.

    With atoll's ``url`` or ``storage_options``: one tar.gz at that URL, atoll's reply
    (``url``, ``sha256``, ``files``…). Otherwise the body is Archipelago's ``SnapshotRequest``
    (an empty or absent body included, as its clients send) and the reply is Archipelago's:
    the same result as the ``/start`` job's, returned when the upload is done.
    """
    fields = await _json_object(request)
    refuse_hooks(fields.get("pre_snapshot_hooks"), "pre_snapshot_hooks")
    if ATOLL_SNAPSHOT_FIELDS & fields.keys():
        mixed = sorted(ARCHIPELAGO_SNAPSHOT_FIELDS & fields.keys())
        if mixed:
            raise http_error(
                ErrorCode.mixed_snapshot_request,
                f"{', '.join(mixed)} belong to Archipelago's snapshot request and "
                f"{', '.join(sorted(ATOLL_SNAPSHOT_FIELDS & fields.keys()))} to atoll's: give one form",
            )
        return await snapshot_to_url(request, _validated(SnapshotUploadRequest, fields))
    snapshot_id, work = _snapshot_work(request, _validated(SnapshotJobRequest, fields))
    try:
        result = await work()
    except AtollError as exc:
        raise _http_error(exc) from exc
    logger.info("snapshot uploaded", extra={"snapshot_id": snapshot_id, "form": "archipelago"})
    return result.model_dump(mode="json")


async def _json_object(request: Request) -> dict[str, Any]:
    """The request's JSON object; ``{}`` for an empty body; 422 for anything else."""
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RequestValidationError(
            [{"type": "json_invalid", "loc": ("body",), "msg": f"JSON decode error: {exc}", "input": {}}]
        ) from None
    if not isinstance(value, dict):
        raise RequestValidationError(
            [{"type": "dict_type", "loc": ("body",), "msg": "Input should be a JSON object", "input": value}]
        )
    return value


def _validated(model: type[_Model], fields: dict[str, Any]) -> _Model:
    try:
        return model.model_validate(fields, strict=True)  # as the document declares: no coercion
    except ValidationError as exc:
        raise RequestValidationError(
            [{**error, "loc": ("body", *error["loc"])} for error in exc.errors(include_url=False)]
        ) from None


@router.get("/snapshot/s3/status/{job_id}", response_model=JobStatus)
async def snapshot_status(request: Request, job_id: str) -> JobStatus:
    return _jobs(request).status("snapshot", job_id)


async def _upload(request: Request, url: str, options: dict[str, Any], put: Any) -> str:
    """Run ``put(fs, path)`` in a thread; returns a presigned URL (or ``url`` where the store
    cannot sign). Store failures become one line naming ``url``."""

    prefixes = request.app.state.settings.url_prefixes
    target = resolve_url(url, prefixes, "snapshot destination")  # written where it was checked

    def run() -> str:
        from fsspec.core import url_to_fs  # on the first upload: not part of the start-up

        fs, path = url_to_fs(target, **opener_options(target, prefixes, "snapshot destination", options))
        put(fs, path)
        try:
            return str(fs.sign(path, expiration=PRESIGN_SECONDS))
        except (NotImplementedError, AttributeError):
            return url

    try:
        return await run_in_data_thread(request, run)
    except Exception as exc:  # the object store's error, reported with the URL
        if (refusal := refusal_in(exc)) is not None:
            raise refusal from exc
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise AtollError(ErrorCode.upload_failed, f"cannot write snapshot to {url!r}: {reason}") from exc


def _put_archive(fs: Any, path: str, spool: IO[bytes]) -> None:
    with spool:
        # put_file completes the object only at the end, so a failed upload leaves nothing whole.
        fs.put_file(spool.name, path)


def _put_files(fs: Any, base: str, spool: IO[bytes], info: SnapshotInfo) -> tuple[int, int]:
    """Upload every file of the snapshot archive as its own object under ``base``.

    Read from the finished archive, so the files are exactly the snapshot's (same symlink
    rules, same moment) and the world lock is not held during the upload.
    """
    uploaded = total = 0
    with spool, tarfile.open(fileobj=spool, mode="r:gz") as archive:
        for member in archive:
            if not member.isfile():
                continue
            source = archive.extractfile(member)
            assert source is not None
            with fs.open(f"{base}/{member.name}", "wb") as target:
                shutil.copyfileobj(source, target, 1 << 20)
            uploaded += 1
            total += member.size
    if uploaded != info.files:
        raise OSError(f"snapshot archive holds {uploaded} files, expected {info.files}")
    return uploaded, total
