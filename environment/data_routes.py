"""``/data/*``: populate a world and take snapshots of it. Thin: the work is in populate/snapshot."""

from __future__ import annotations

import logging
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from functools import partial
from typing import IO, Any, BinaryIO

import anyio
from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, Field, ValidationError
from starlette.datastructures import UploadFile
from starlette.types import Message

from atoll.errors import AtollError, ErrorCode
from atoll.http import error_reply, http_error, strict_json
from atoll.world_manifest import WorldManifest
from environment.archipelago import S3Credentials, refuse_hooks, storage_options_for
from environment.archive import ArchiveLimits, UnsafeArchive
from environment.pipes import consume_piped
from environment.populate import Mode, PopulateSource, Subsystem, WorldRoots, populate
from environment.replies import Populated
from environment.settings import EnvironmentSettings
from environment.snapshot import (
    SnapshotInfo,
    SnapshotLimits,
    SnapshotTimeout,
    SnapshotTooLarge,
    UnlistableMember,
    build_manifest,
    write_snapshot,
)
from environment.url_policy import check_url, opener_options, refusal_in, resolve_url
from environment.world_delta import DeltaBase, WorldState, collect_delta, list_populated, write_world_delta
from environment.world_keep import KeepRequest
from environment.world_parking import parking_for

logger = logging.getLogger("environment.data")
router = APIRouter()

SHA256_HEADER = "X-Snapshot-SHA256"
DIGEST_HEADER = "X-World-Digest"


class SourceSpec(BaseModel):
    url: str = Field(min_length=1, description="fsspec URL of a tar(.gz), zip or folder")
    subsystem: str = "filesystem"


class PopulateRequest(BaseModel):
    sources: list[SourceSpec] = Field(min_length=1)
    mode: Mode | None = None
    # Archipelago's fields: credentials for this request; hooks are refused (environment.archipelago).
    s3_credentials: S3Credentials | None = None
    post_populate_hooks: list[dict[str, Any]] = Field(default_factory=list)


class SnapshotUploadRequest(BaseModel):
    url: str | None = Field(
        None, description="destination fsspec URL; default <snapshot_url_prefix>/<id>.tar.gz"
    )
    # It becomes part of an object name: letters, digits, '_' and '-' only (as Archipelago), so
    # an id like "../x" cannot move the snapshot out of the configured prefix.
    snapshot_id: str | None = Field(None, pattern=r"^[A-Za-z0-9_-]{1,128}$")
    storage_options: dict[str, Any] | None = None


def _settings(request: Request) -> EnvironmentSettings:
    return request.app.state.settings


def _roots(settings: EnvironmentSettings) -> WorldRoots:
    return WorldRoots(settings.fs_root.resolve(), settings.apps_data_root.resolve())


#: Worker threads for /data/* (extraction, archiving, uploads), apart from anyio's default pool
#: that FastMCP's synchronous tools share: a flood of long tool calls never delays these.
DATA_THREADS = 8


def _data_limiter(request: Request) -> anyio.CapacityLimiter:
    state = request.app.state
    if not hasattr(state, "data_limiter"):
        state.data_limiter = anyio.CapacityLimiter(DATA_THREADS)
    return state.data_limiter


async def run_in_data_thread(request: Request, function: Any, *args: Any) -> Any:
    """``function(*args)`` on a worker thread of the /data/* pool."""
    return await anyio.to_thread.run_sync(function, *args, limiter=_data_limiter(request))


def _world_lock(request: Request) -> anyio.Lock:
    # Populate and snapshot take turns, so a snapshot never sees half a populate.
    state = request.app.state
    if not hasattr(state, "world_lock"):
        state.world_lock = anyio.Lock()
    return state.world_lock


def _world_state(request: Request) -> WorldState:
    """The world's stat cache and populated base (environment.world_delta); under the lock."""
    state = request.app.state
    if not hasattr(state, "world_state"):
        state.world_state = WorldState()
    return state.world_state


def _capped(request: Request, limit: int) -> Request:
    """``request`` whose body may not exceed ``limit`` bytes: a multipart upload is spooled to
    disk before extraction, so an oversized one must be stopped while it arrives."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise UnsafeArchive(
            "", f"upload of {declared} bytes is larger than {limit} bytes", ErrorCode.archive_too_large
        )
    received = 0

    async def receive() -> Message:
        nonlocal received
        message = await request.receive()
        received += len(message.get("body", b""))
        if received > limit:
            raise UnsafeArchive("", f"upload is larger than {limit} bytes", ErrorCode.archive_too_large)
        return message

    return Request(request.scope, receive)


def _limits(settings: EnvironmentSettings) -> ArchiveLimits:
    return ArchiveLimits(
        max_bytes=settings.max_archive_bytes,
        max_members=settings.max_archive_members,
        max_ratio=settings.max_compression_ratio,
        ratio_floor_bytes=settings.ratio_check_floor_bytes,
    )


def _url_sources(request: Request, specs: list[SourceSpec]) -> list[PopulateSource]:
    """Populate sources from URLs; AtollError(``url_not_allowed``) outside ATOLL_URL_ALLOW."""
    prefixes = _settings(request).url_prefixes
    for spec in specs:
        check_url(spec.url, prefixes, "populate source")
    return [PopulateSource(Subsystem.parse(spec.subsystem), url=spec.url) for spec in specs]


def _http_error(exc: AtollError) -> HTTPException:
    """A populate or snapshot error as its reply, its status from its code (``atoll.errors.HTTP_STATUS``:
    413 too big, 403 a URL outside ATOLL_URL_ALLOW, 502 an object store that failed or refused;
    a missing source is a 400)."""
    return error_reply(exc, member=getattr(exc, "member", None) or None)


_ARCHIVE = {"type": "string", "format": "binary"}
# /data/populate reads its body itself (three forms, told apart by Content-Type): declared here.
_POPULATE_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {"type": "object", "properties": {"archive": _ARCHIVE}, "required": ["archive"]}
            },
            "application/json": {"schema": {"$ref": "#/components/schemas/PopulateRequest"}},
            "application/gzip": {"schema": _ARCHIVE},
            "application/zip": {"schema": _ARCHIVE},
        },
    }
}


@router.post("/populate", openapi_extra=_POPULATE_BODY)
async def populate_world(
    request: Request,
    subsystem: str = Query(
        "filesystem", description="filesystem | .apps_data | <one of them>/<folder> | world"
    ),
    mode: Mode = Query("merge", description="merge (archive wins) or replace (target emptied first)"),
) -> Populated:
    """Multipart field ``archive`` (Archipelago's shape), or JSON ``{"sources": [{url, subsystem}]}``."""
    content_type = request.headers.get("content-type", "")
    form = None
    options = None
    try:
        if content_type.startswith("multipart/form-data"):
            form = await _capped(request, _limits(_settings(request)).max_archive_file_bytes).form(
                max_files=1, max_fields=16
            )
            refuse_hooks(form.get("post_populate_hooks") not in (None, "", "[]"), "post_populate_hooks")
            archive = form.get("archive")
            if not isinstance(archive, UploadFile):
                raise http_error(
                    ErrorCode.missing_archive, "multipart field 'archive' (a tar.gz or zip file) is required"
                )
            sources = [PopulateSource(Subsystem.parse(subsystem), file=archive.file)]
        elif content_type.startswith("application/json"):
            try:
                body = PopulateRequest.model_validate_json(await request.body(), strict=True)
            except (ValidationError, ValueError) as exc:
                raise http_error(
                    ErrorCode.invalid_request,
                    f"populate body must be {{'sources': [{{'url', 'subsystem'}}]}}: {exc}",
                ) from exc
            refuse_hooks(body.post_populate_hooks, "post_populate_hooks")
            mode = body.mode or mode
            sources = _url_sources(request, body.sources)
            options = storage_options_for(body.s3_credentials, _settings(request).storage_options)
        elif content_type.split(";")[0].strip() in RAW_ARCHIVE_TYPES:
            return Populated.model_validate(
                await _populate_from_body(request, Subsystem.parse(subsystem), mode, subsystem)
            )
        else:
            raise http_error(
                ErrorCode.unsupported_media_type,
                "send multipart/form-data with an 'archive' file, a raw archive body, or JSON with 'sources'",
            )
        return Populated.model_validate(
            await _run_populate(request, sources, mode, subsystem, storage_options=options)
        )
    except AtollError as exc:
        raise _http_error(exc) from exc
    finally:
        if form is not None:
            await form.close()


@router.post("/populate/s3", dependencies=[Depends(strict_json(PopulateRequest))])
async def populate_from_urls(request: Request, body: PopulateRequest) -> Populated:
    """Archipelago's URL form of populate (any fsspec URL, not only S3)."""
    refuse_hooks(body.post_populate_hooks, "post_populate_hooks")
    try:
        sources = _url_sources(request, body.sources)
        options = storage_options_for(body.s3_credentials, _settings(request).storage_options)
        return Populated.model_validate(
            await _run_populate(request, sources, body.mode or "merge", None, storage_options=options)
        )
    except AtollError as exc:
        raise _http_error(exc) from exc


RAW_ARCHIVE_TYPES = frozenset(
    {
        "application/gzip",
        "application/x-gzip",
        "application/x-tar",
        "application/zip",
        "application/octet-stream",
    }
)


async def _populate_from_body(
    request: Request, subsystem: Subsystem, mode: Mode, label: str
) -> dict[str, Any]:
    """Extract the request body while it arrives (:func:`environment.pipes.consume_piped`)."""

    async def extract(reader: BinaryIO) -> dict[str, Any]:
        return await _run_populate(request, [PopulateSource(subsystem, file=reader)], mode, label)

    return await consume_piped(request.stream(), extract, partial(run_in_data_thread, request))


async def _run_populate(
    request: Request,
    sources: list[PopulateSource],
    mode: Mode,
    subsystem: str | None,
    *,
    storage_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Populate under the world lock; ``storage_options`` replace the settings' for this call."""
    settings = _settings(request)
    metrics = request.app.state.metrics
    limits = _limits(settings)
    started = time.perf_counter()
    outcome = "error"
    try:
        async with _world_lock(request):
            world = _world_state(request)
            keep = None
            if settings.keep_unchanged_files:  # files kept keep their hashes (environment.world_keep)
                parking = None
                if settings.parked_worlds_dir is not None:
                    parking = parking_for(settings.parked_worlds_dir, settings.parked_worlds_mb * 1024**2)
                keep = KeepRequest(world.cache, _snapshot_limits(settings), parking, world.laid_from)
            else:
                world.cache.clear()  # every populate: the world's files are new ones
            result = await run_in_data_thread(
                request,
                partial(
                    populate,
                    sources,
                    _roots(settings),
                    mode=mode,
                    limits=limits,
                    storage_options=settings.storage_options if storage_options is None else storage_options,
                    url_prefixes=settings.url_prefixes,
                    keep=keep,
                ),
            )
            if result.mode == "replace":  # the new base of deltas, and a warm stat cache
                world.laid_from = result.details.get("laid_from")
                await run_in_data_thread(
                    request, list_populated, _roots(settings), world, _snapshot_limits(settings)
                )
        outcome = "ok"
        if result.mode == "replace":
            request.app.state.plane.world_replaced()
        # The live servers' mail, calendar and chat indexes are built now, not on the first call.
        request.app.state.plane.warm()
    except UnsafeArchive as exc:
        outcome = "rejected"
        logger.warning("populate rejected", extra={"error": exc.message, "member": exc.member})
        raise
    finally:
        metrics.populate_seconds.labels(outcome).observe(time.perf_counter() - started)
    metrics.populate_bytes.inc(result.extracted_bytes)
    duration_ms = (time.perf_counter() - started) * 1000
    logger.info(
        "populated",
        extra={
            "objects": result.objects_added,
            "kept": result.details.get("kept_files", 0),
            "bytes": result.extracted_bytes,
            "duration_ms": round(duration_ms, 1),
        },
    )
    return {
        "objects_added": result.objects_added,
        "extracted_bytes": result.extracted_bytes,
        "skipped_members": result.skipped_members,
        "subsystem": subsystem if subsystem is not None else ",".join(result.subsystems),
        "subsystems": result.subsystems,
        "mode": result.mode,
        "duration_ms": duration_ms,
    }


async def _build_snapshot(request: Request) -> tuple[IO[bytes], SnapshotInfo]:
    """Write the snapshot to a temp file (so its sha256 is known before sending).

    The file is deleted when the returned handle is closed.
    """
    settings = _settings(request)
    metrics = request.app.state.metrics
    started = time.perf_counter()
    spool = tempfile.NamedTemporaryFile(prefix="atoll-snapshot-", suffix=".tar.gz")  # noqa: SIM115
    limits = _snapshot_limits(settings)
    try:
        async with _world_lock(request):
            info = await run_in_data_thread(request, write_snapshot, _roots(settings), spool, limits)
        spool.flush()
    except (SnapshotTooLarge, SnapshotTimeout, OSError) as exc:
        spool.close()
        outcome = "error" if isinstance(exc, OSError) else "refused"
        metrics.snapshot_seconds.labels(outcome).observe(time.perf_counter() - started)
        raise _world_read_error(exc, "snapshot") from exc
    metrics.snapshot_seconds.labels("ok").observe(time.perf_counter() - started)
    metrics.snapshot_bytes.inc(info.size_bytes)
    spool.seek(0)
    return spool, info


def _snapshot_limits(settings: EnvironmentSettings) -> SnapshotLimits:
    return SnapshotLimits(
        max_bytes=settings.snapshot_max_bytes,
        max_allocated_bytes=settings.snapshot_max_allocated_bytes,
        timeout_s=settings.snapshot_timeout_s,
        max_file_bytes=settings.snapshot_max_file_bytes,
        max_sparse_bytes=settings.snapshot_max_sparse_bytes,
    )


def _world_read_error(exc: Exception, what: str) -> HTTPException:
    """A snapshot, manifest or delta that could not be read from the world, as its reply:
    413 too large, 503 past the deadline, 409 a name a manifest cannot carry, 500 else."""
    if isinstance(exc, AtollError):
        logger.error("%s refused", what, extra={"error": exc.message})
        return error_reply(exc)
    logger.error("%s failed", what, extra={"error": str(exc)})
    return http_error(ErrorCode.snapshot_failed, f"{what} failed: {exc}")


async def _chunks(request: Request, spool: IO[bytes], size: int) -> AsyncIterator[bytes]:
    # Async, reading on the /data/* pool: Starlette would iterate a plain generator on the
    # shared default pool, which a flood of tool calls can exhaust.
    sent = 0
    try:
        while chunk := await run_in_data_thread(request, spool.read, 1 << 20):
            sent += len(chunk)
            yield chunk
        if sent != size:
            # Content-Length is already promised; ending early makes the client see the truncation.
            raise OSError(f"snapshot spool shrank: sent {sent} of {size} bytes")
    finally:
        spool.close()


@router.post(
    "/snapshot",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/gzip": {"schema": {"type": "string", "format": "binary"}}}}},
)
async def snapshot(request: Request) -> StreamingResponse:
    """The world as a deterministic tar.gz; header ``X-Snapshot-SHA256`` carries its sha256."""
    spool, info = await _build_snapshot(request)
    snapshot_id = f"snap_{uuid.uuid4().hex[:16]}"
    logger.info("snapshot", extra={"bytes": info.size_bytes, "files": info.files, "sha256": info.sha256})
    return StreamingResponse(
        _chunks(request, spool, info.size_bytes),
        media_type="application/gzip",
        headers={
            "Content-Length": str(info.size_bytes),
            "Content-Disposition": f'attachment; filename="{snapshot_id}.tar.gz"',
            SHA256_HEADER: info.sha256,
            "X-Snapshot-Files": str(info.files),
            "X-Snapshot-Skipped": str(info.skipped),
            "X-Snapshot-Apparent-Bytes": str(info.apparent_bytes),
            "X-Snapshot-Allocated-Bytes": str(info.allocated_bytes),
        },
    )


class DeltaRequest(BaseModel):
    """What a delta builds on: ``base`` is stored verbatim in the delta's manifest. The base is
    the world the last ``replace`` populate left, or ``base_manifest`` when given (a world
    populated from a checkpoint still takes its deltas on the seed). A ``base_digest`` other
    than the base's is refused (409 ``base_mismatch``)."""

    model_config = {"extra": "forbid"}

    base: str | None = Field(
        None, max_length=4096, description="the base manifest's URI, relative to the delta's manifest"
    )
    base_digest: str | None = Field(
        None, pattern=r"^[0-9a-f]{64}$", description="the digest the client expects the base to have"
    )
    base_manifest: WorldManifest | None = Field(
        None,
        description="the base itself, instead of the world the last replace populate left: the "
        "delta carries the contents this manifest lacks, and its base_digest is this manifest's",
    )


_DIGEST_HEADERS = {
    DIGEST_HEADER: {"description": "the world's manifest digest", "schema": {"type": "string"}}
}


@router.post(
    "/snapshot/manifest",
    response_class=Response,
    responses={200: {"model": WorldManifest, "headers": _DIGEST_HEADERS}},
)
async def snapshot_manifest(request: Request) -> Response:
    """The world's manifest (the members ``POST /data/snapshot`` would archive, each file's
    size, sha256 and executable bit); header ``X-World-Digest`` carries its digest. Files whose
    stat is unchanged since they were last hashed are not read again."""
    settings = _settings(request)
    try:
        async with _world_lock(request):
            manifest = await run_in_data_thread(
                request,
                build_manifest,
                _roots(settings),
                _snapshot_limits(settings),
                _world_state(request).cache,
            )
    except (SnapshotTooLarge, SnapshotTimeout, UnlistableMember, OSError) as exc:
        raise _world_read_error(exc, "manifest") from exc
    digest, body = await run_in_data_thread(request, lambda: (manifest.digest(), manifest.to_bytes()))
    return Response(body, media_type="application/json", headers={DIGEST_HEADER: digest})


@router.post(
    "/snapshot/delta",
    response_class=StreamingResponse,
    dependencies=[Depends(strict_json(DeltaRequest))],
    responses={
        200: {"content": {"application/gzip": {"schema": _ARCHIVE}}, "headers": _DIGEST_HEADERS},
        409: {"description": "base_mismatch: the base_digest given is not the base's"},
    },
)
async def snapshot_delta(request: Request, body: DeltaRequest | None = None) -> StreamingResponse:
    """The world as a delta against the world the last ``replace`` populate left (before any:
    the empty world), or against ``base_manifest`` when given: its whole manifest (``base`` as
    given, ``base_digest`` the base's digest) and a blob for each file content the base lacks. Headers:
    ``X-World-Digest``, ``X-Base-Digest``, ``X-Delta-Blobs``, ``X-Delta-SHA256``."""
    body = body or DeltaRequest()
    settings = _settings(request)
    world = _world_state(request)
    given = None
    if body.base_manifest is not None:
        try:
            body.base_manifest.check_order("base_manifest")
        except AtollError as exc:
            raise http_error(ErrorCode.invalid_request, exc.message) from None
        given = await run_in_data_thread(request, DeltaBase.of, body.base_manifest)
        if body.base_digest is not None and body.base_digest != given.digest:
            raise http_error(
                ErrorCode.base_mismatch,
                f"base_digest {body.base_digest} is not the digest {given.digest} of the base_manifest given",
                base_digest=body.base_digest,
                base_manifest_digest=given.digest,
            )
    try:
        async with _world_lock(request):
            if given is None and body.base_digest is not None and body.base_digest != world.populated_digest:
                raise http_error(
                    ErrorCode.base_mismatch,
                    f"base_digest {body.base_digest} is not the populated world's "
                    f"digest {world.populated_digest}",
                    base_digest=body.base_digest,
                    populated_digest=world.populated_digest,
                )
            contents = await run_in_data_thread(
                request,
                collect_delta,
                _roots(settings),
                world,
                _snapshot_limits(settings),
                body.base,
                given,
            )
    except (SnapshotTooLarge, SnapshotTimeout, UnlistableMember, OSError) as exc:
        raise _world_read_error(exc, "delta") from exc
    # Compressed after the lock is released: it reads only the contents copied under it.
    spool = tempfile.TemporaryFile(prefix="atoll-delta-", suffix=".tar.gz")  # noqa: SIM115
    try:
        info = await run_in_data_thread(request, write_world_delta, contents, spool)
        spool.seek(0)
    except BaseException:
        spool.close()
        raise
    logger.info(
        "delta",
        extra={
            "bytes": info.size_bytes,
            "blobs": info.blobs,
            "blob_bytes": info.blob_bytes,
            "digest": contents.digest,
        },
    )
    return StreamingResponse(
        _chunks(request, spool, info.size_bytes),
        media_type="application/gzip",
        headers={
            "Content-Length": str(info.size_bytes),
            DIGEST_HEADER: contents.digest,
            "X-Base-Digest": str(contents.manifest.base_digest),
            "X-Delta-Blobs": str(info.blobs),
            "X-Delta-Blob-Bytes": str(info.blob_bytes),
            "X-Delta-SHA256": info.sha256,
        },
    )


async def snapshot_to_url(request: Request, body: SnapshotUploadRequest | None = None) -> dict[str, Any]:
    """Write the snapshot to an fsspec URL (S3 in production); returns URL, size and sha256.

    atoll's form of ``POST /data/snapshot/s3``; the route (``environment.data_jobs``) sends a
    request here when it carries atoll's fields, else answers in Archipelago's shape."""
    settings = _settings(request)
    body = body or SnapshotUploadRequest()
    snapshot_id = body.snapshot_id or f"snap_{uuid.uuid4().hex[:16]}"
    url = body.url
    if url is None:
        if not settings.snapshot_url_prefix:
            raise http_error(
                ErrorCode.no_snapshot_destination,
                "no snapshot destination: give 'url', or set ATOLL_SNAPSHOT_URL_PREFIX",
            )
        url = f"{settings.snapshot_url_prefix.rstrip('/')}/{snapshot_id}.tar.gz"
    try:
        # Written where it was checked: a local destination by its real path, an HTTP one
        # following only allowed redirects.
        target = resolve_url(url, settings.url_prefixes, "snapshot destination")
        if settings.url_prefixes and body.storage_options:
            # Request options could point the URL's scheme at another endpoint.
            raise AtollError(
                ErrorCode.url_not_allowed, "request storage_options are refused while ATOLL_URL_ALLOW is set"
            )
    except AtollError as exc:
        raise _http_error(exc) from exc
    storage_options = opener_options(
        target,
        settings.url_prefixes,
        "snapshot destination",
        {**settings.storage_options, **(body.storage_options or {})},
    )
    spool, info = await _build_snapshot(request)

    def upload() -> None:
        from fsspec.core import url_to_fs  # on the first upload: not part of the start-up

        with spool:
            fs, path = url_to_fs(target, **storage_options)
            # put_file completes the object only at the end (S3: one PUT or a completed multipart
            # upload), so a failed upload never leaves an archive that looks whole.
            fs.put_file(spool.name, path)

    try:
        await run_in_data_thread(request, upload)
    except Exception as exc:  # the object store's error, reported with the URL
        if (refusal := refusal_in(exc)) is not None:
            raise _http_error(refusal) from exc
        logger.error("snapshot upload failed", extra={"url": url, "error": str(exc)})
        raise http_error(ErrorCode.upload_failed, f"cannot write snapshot to {url!r}: {exc}") from exc
    logger.info("snapshot uploaded", extra={"url": url, "bytes": info.size_bytes, "sha256": info.sha256})
    return {
        "snapshot_id": snapshot_id,
        "url": url,
        "s3_uri": url,
        "size_bytes": info.size_bytes,
        "sha256": info.sha256,
        "files": info.files,
    }
