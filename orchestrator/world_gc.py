"""Garbage collection of stored worlds: the seeds no trial in the store uses any more, and the
blobs no manifest in the artifact store names (``atoll gc``; ``atoll delete`` runs it).

The artifact store holds worlds by content (issue 30): ``blobs/sha256/<hex[:2]>/<hex>`` (a
file's content, gzip'd, named by the sha256 of the content), ``seeds/<key>.manifest.json`` (a
stored world, :class:`atoll.world_manifest.WorldManifest`; ``key`` is
:func:`orchestrator.executors.seeds.seed_key` of a trial's spec) and, from before, the archive
``seeds/<key>.tar.gz``. A trial's after-state is a delta in its own folder that holds the
blobs its seed lacks and names its seed manifest as ``base``.

**Mark**: the seed key of every trial in the trial store (every run, every state, archived
trials too), and every seed a stored result names: ``snapshot_before_uri`` when it is a seed,
else the ``base`` of its ``snapshot_after_uri`` delta. **Sweep**: a seed (manifest or archive)
that is not marked and was last written longer ago than the grace period goes; then a blob
that no remaining ``*.manifest.json`` anywhere in the store lists and that is older than the
grace period goes. The grace period covers what is being written now (a worker that builds a
seed writes its blobs before its manifest). A run's trials are in the store before any worker
uses their seed, and the store is marked again just before seeds go, so a run submitted while
the collector runs keeps its seeds; each object's time is read again just before it is removed
(a seed written again meanwhile stays), and the manifests are listed again before the blobs
go, so a seed stored while the collector ran keeps its blobs. What remains is a window of
milliseconds: a run submitted between the second marking and the removal of its old, unused
seed, whose worker finds the manifest still there and does not write it again.

Conservative by construction: a trial spec that cannot be read stops the seed sweep, and a
manifest that cannot be read stops the blob sweep (each is reported); nothing outside
``seeds/`` and ``blobs/`` is ever removed here. Temporary files of writers that crashed
(``*.partial`` there) go once older than the grace period.
"""

from __future__ import annotations

import gzip
import posixpath
import re
import tarfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from atoll.errors import AtollError, ErrorCode
from atoll.world_deltas import MANIFEST_MEMBER
from atoll.world_manifest import MAX_MANIFEST_BYTES, WorldManifest

if TYPE_CHECKING:
    from orchestrator.artifacts import ArtifactStore
    from orchestrator.store import TrialStore

DEFAULT_GRACE_HOURS = 24.0
SEEDS, BLOBS = "seeds", "blobs"
MANIFEST_SUFFIX = ".manifest.json"
_SEED = re.compile(r"^seeds/([0-9a-f]{24})(\.manifest\.json|\.tar\.gz)$")
_BLOB = re.compile(r"^blobs/sha256/([0-9a-f]{2})/([0-9a-f]{64})$")


class RemovedObject(BaseModel):
    key: str = Field(description="path inside the artifact store")
    size: int = Field(description="bytes")


class GcReport(BaseModel):
    """What ``atoll gc`` removed (or, with ``dry_run``, would remove) from one artifact store."""

    artifacts: str = Field(description="the artifact store's URL")
    dry_run: bool
    grace_hours: float
    marked_seeds: int = Field(description="seed keys still used by a trial or result in the store")
    seeds: list[RemovedObject] = Field(description="seed manifests and archives removed")
    seed_bytes: int
    blobs: int = Field(description="blobs removed")
    blob_bytes: int
    partials: int = Field(
        0, description="half-written seeds and blobs (*.partial) of crashed writers removed"
    )
    partial_bytes: int = 0
    kept_young: int = Field(description="unreferenced seeds and blobs kept: younger than the grace period")
    problems: list[str] = Field(description="what stopped a sweep or was left unread")


@dataclass
class _Listing:
    """The store's seeds, blobs and manifests: key → (size, modification time)."""

    seeds: dict[str, tuple[int, float]] = field(default_factory=dict)
    blobs: dict[str, tuple[int, float]] = field(default_factory=dict)
    partials: dict[str, tuple[int, float]] = field(default_factory=dict)
    manifests: dict[str, tuple[int, float]] = field(default_factory=dict)


def collect_garbage(
    store: TrialStore,
    artifacts: ArtifactStore,
    *,
    grace_hours: float = DEFAULT_GRACE_HOURS,
    dry_run: bool = False,
    now: float | None = None,
) -> GcReport:
    """Mark and sweep (module doc) ``artifacts`` against every trial of ``store``; returns what
    went (with ``dry_run``: what would go, nothing removed). ``grace_hours`` must be 0 or more."""
    if grace_hours < 0:
        raise AtollError(ErrorCode.bad_input, f"grace period {grace_hours} hours: must be 0 or more")
    cutoff = (now if now is not None else time.time()) - grace_hours * 3600
    report = GcReport(
        artifacts=artifacts.url,
        dry_run=dry_run,
        grace_hours=grace_hours,
        marked_seeds=0,
        seeds=[],
        seed_bytes=0,
        blobs=0,
        blob_bytes=0,
        kept_young=0,
        problems=[],
    )
    listing = _list(artifacts)
    marked = _marks(store, artifacts, report.problems)
    report.marked_seeds = len(marked)
    removed_manifests: set[str] = set()
    if not any(problem.startswith("seed sweep") for problem in report.problems):
        unmarked = {key: stat for key, stat in listing.seeds.items() if _seed_of(key) not in marked}
        if unmarked:  # marked again just before: a run submitted meanwhile keeps its seeds
            marked |= _marks(store, artifacts, [])
        for key, (size, modified) in sorted(unmarked.items()):
            if _seed_of(key) in marked:
                continue
            if modified > cutoff or not _removed(artifacts, key, cutoff, dry_run):
                report.kept_young += 1
                continue
            report.seeds.append(RemovedObject(key=key, size=size))
            report.seed_bytes += size
            removed_manifests.add(key)
    _sweep_blobs(artifacts, listing, removed_manifests, cutoff, dry_run, report)
    # A writer moves its temporary file into place when done: one older than the grace period
    # is a crashed writer's, and no reader ever opens it.
    for key, (size, modified) in sorted(listing.partials.items()):
        if modified <= cutoff and _removed(artifacts, key, cutoff, dry_run):
            report.partials += 1
            report.partial_bytes += size
    return report


def _sweep_blobs(
    artifacts: ArtifactStore,
    listing: _Listing,
    removed_manifests: set[str],
    cutoff: float,
    dry_run: bool,
    report: GcReport,
) -> None:
    if not listing.blobs:
        return
    # Listed again: a manifest stored while this collector ran keeps its blobs.
    manifests = set(listing.manifests) | set(_list(artifacts).manifests)
    referenced: set[str] = set()
    for key in sorted(manifests - removed_manifests):
        try:
            data = _read(artifacts, key, MAX_MANIFEST_BYTES + 1)
            referenced |= WorldManifest.from_bytes(data, artifacts.uri(key)).hashes()
        except FileNotFoundError:
            continue  # removed meanwhile (another collector): it names nothing now
        except (AtollError, OSError) as exc:
            message = exc.message if isinstance(exc, AtollError) else str(exc)
            report.problems.append(f"blob sweep skipped: manifest {key} cannot be read ({message})")
            return
    for key, (size, modified) in sorted(listing.blobs.items()):
        if _BLOB.match(key)[2] in referenced:  # type: ignore[index]
            continue
        if modified > cutoff or not _removed(artifacts, key, cutoff, dry_run):
            report.kept_young += 1
            continue
        report.blobs += 1
        report.blob_bytes += size


def _marks(store: TrialStore, artifacts: ArtifactStore, problems: list[str]) -> set[str]:
    """The seed keys in use (module doc); problems are added to ``problems`` (those that make
    the seed sweep unsafe start with "seed sweep")."""
    from orchestrator.executors.seeds import seed_key

    specs, unreadable = store.stored_specs()
    if unreadable:
        problems.append(f"seed sweep skipped: {unreadable} trial specs in the store cannot be read")
    marked = {seed_key(spec) for spec in specs}
    for result in store.stored_results():
        before = _seed_of(artifacts.key_of(result.snapshot_before_uri or ""))
        if before is not None:
            marked.add(before)
            continue
        after = key_inside(artifacts, result.snapshot_after_uri)
        if after is None or not after.endswith(".delta.tar.gz"):
            continue
        try:
            base = _delta_base(artifacts, after)
        except FileNotFoundError:
            continue  # its trial's folder is gone: it holds nothing back
        except (AtollError, OSError, tarfile.TarError, EOFError, gzip.BadGzipFile) as exc:
            problems.append(f"delta {after} cannot be read ({exc}); its trial's spec marks its seed")
            continue
        if (seed := _seed_of(base)) is not None:
            marked.add(seed)
    return marked


def _delta_base(artifacts: ArtifactStore, key: str) -> str | None:
    """The key of the manifest a stored delta builds on, or None (outside the store, or none)."""
    with (
        artifacts.fs.open(path_in(artifacts, key), "rb", block_size=1 << 16) as raw,
        tarfile.open(fileobj=raw, mode="r|gz") as tar,
    ):
        first = tar.next()
        if first is None or first.name != MANIFEST_MEMBER or not first.isreg():
            raise AtollError(ErrorCode.bad_world_manifest, f"its first member is not {MANIFEST_MEMBER}")
        handle = tar.extractfile(first)
        assert handle is not None
        manifest = WorldManifest.from_bytes(handle.read(MAX_MANIFEST_BYTES + 1), artifacts.uri(key))
    if not manifest.base:
        return None
    if "://" in manifest.base:
        return key_inside(artifacts, manifest.base)
    return _clean_key(posixpath.join(posixpath.dirname(key), manifest.base))


def path_in(artifacts: ArtifactStore, key: str) -> str:
    """The filesystem path of ``key`` in the store (what its ``fs`` takes)."""
    return f"{artifacts.root}/{key}"


def _seed_of(key: str | None) -> str | None:
    match = _SEED.match(key or "")
    return match[1] if match else None


def _clean_key(key: str) -> str | None:
    """``key`` normalised, or None when it leaves the store (``..`` above its root)."""
    cleaned = posixpath.normpath(key)
    return None if cleaned in (".", "") or cleaned.startswith(("../", "/")) or cleaned == ".." else cleaned


def key_inside(artifacts: ArtifactStore, uri: str | None) -> str | None:
    """The key of ``uri`` in ``artifacts``, or None when it lies outside (another store, or a
    path that climbs out with ``..``)."""
    key = artifacts.key_of(uri or "")
    if key is None:
        return None
    cleaned = _clean_key(key)
    return cleaned if cleaned == key.rstrip("/") else None


def _list(artifacts: ArtifactStore) -> _Listing:
    listing = _Listing()
    fs, root = artifacts.fs, artifacts.root
    fs.invalidate_cache()
    if not fs.exists(root):
        return listing
    for path, info in fs.find(root, detail=True).items():
        if info.get("type") != "file":
            continue
        key = path[len(root) :].lstrip("/")
        stat = (int(info.get("size") or 0), modified_at(info))
        if _SEED.match(key):
            listing.seeds[key] = stat
        elif key.endswith(".partial") and key.startswith((f"{SEEDS}/", f"{BLOBS}/")):
            listing.partials[key] = stat
        elif _BLOB.match(key) and _BLOB.match(key)[1] == _BLOB.match(key)[2][:2]:  # type: ignore[index]
            listing.blobs[key] = stat
        if key.endswith(MANIFEST_SUFFIX):
            listing.manifests[key] = stat
    return listing


def modified_at(info: dict[str, Any]) -> float:
    """An fsspec entry's modification time in seconds since the epoch (local ``mtime``, S3
    ``LastModified``); 0 when the filesystem gives none (then only age decides nothing: the
    object counts as old)."""
    for name in ("mtime", "LastModified", "last_modified", "modified", "updated"):
        value = info.get(name)
        if isinstance(value, datetime):
            return value.timestamp()
        if isinstance(value, int | float):
            return float(value)
    return 0.0


def _removed(artifacts: ArtifactStore, key: str, cutoff: float, dry_run: bool) -> bool:
    """Remove ``key`` unless it was written again after ``cutoff`` (read afresh now); whether
    it is (or, dry, would be) gone."""
    path = path_in(artifacts, key)
    artifacts.fs.invalidate_cache(path)
    try:
        if modified_at(artifacts.fs.info(path)) > cutoff:
            return False
        if not dry_run:
            artifacts.fs.rm(path)
    except FileNotFoundError:
        return False  # gone already (another collector)
    return True


def _read(artifacts: ArtifactStore, key: str, limit: int) -> bytes:
    with artifacts.fs.open(path_in(artifacts, key), "rb") as handle:
        return handle.read(limit)


def described(report: GcReport) -> list[str]:
    """The report as lines for people."""
    verb = "would remove" if report.dry_run else "removed"
    lines = [
        f"gc {report.artifacts}: {verb} {len(report.seeds)} seeds ({_bytes(report.seed_bytes)}) and "
        f"{report.blobs} blobs ({_bytes(report.blob_bytes)}); {report.marked_seeds} seeds in use, "
        f"{report.kept_young} unreferenced objects younger than {report.grace_hours:g} h kept"
        + (
            f"; {verb} {report.partials} half-written files ({_bytes(report.partial_bytes)})"
            if report.partials
            else ""
        )
    ]
    lines += [f"  {verb} {item.key} ({_bytes(item.size)})" for item in report.seeds]
    lines += [f"  problem: {problem}" for problem in report.problems]
    return lines


def _bytes(size: int) -> str:
    if size < 1000:
        return f"{size} B"
    scaled, unit = float(size), "B"
    for unit in ("KB", "MB", "GB"):  # noqa: B007 - the last unit reached is the one shown
        scaled /= 1000
        if scaled < 1000:
            break
    return f"{scaled:.1f} {unit}"


__all__ = [
    "DEFAULT_GRACE_HOURS",
    "GcReport",
    "RemovedObject",
    "collect_garbage",
    "described",
    "key_inside",
    "path_in",
    "modified_at",
]
