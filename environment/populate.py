"""Populate a world from archives or folders, all-or-nothing.

Every source is extracted by :class:`environment.archive.SafeExtractor` into a staging
directory inside its root (``.atoll-staging-<id>``, same filesystem, so moving is a rename).
Only when every source of the request succeeded is staging moved into place (``merge``:
archive wins on conflicts; ``replace``: the target is emptied first). On any error staging
is deleted and the world is left exactly as it was.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import stat
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Literal, cast
from urllib.parse import urlsplit

from atoll.errors import AtollError, ErrorCode
from atoll.members import APPS_DATA, FILESYSTEM, RESERVED_PREFIX, split_world_member
from atoll.runtime import world_work
from environment.archive import ArchiveLimits, SafeExtractor, UnsafeArchive, clean_member_name, copy_capped
from environment.archive_readers import copy_local_folder, extract_tar, extract_zip
from environment.url_policy import check_url, opener_options, refusal_in, resolve_url
from mcp_servers._core import beneath

if TYPE_CHECKING:
    from _typeshed import SupportsRead

    from environment.world_keep import KeepRequest, WorldKeeper

logger = logging.getLogger("environment.populate")

WORLD = "world"
STAGING_PREFIX = RESERVED_PREFIX

Mode = Literal["merge", "replace"]


@dataclass(frozen=True)
class WorldRoots:
    """The two directories of one world."""

    fs_root: Path
    apps_data_root: Path

    def root(self, top: str) -> Path:
        return self.fs_root if top == FILESYSTEM else self.apps_data_root


@dataclass(frozen=True)
class Subsystem:
    """Where a source goes: ``filesystem`` or ``.apps_data`` (optionally a folder inside), or
    ``world`` (the source holds top-level ``filesystem/`` and ``.apps_data/``)."""

    top: str
    nested: str = ""

    @classmethod
    def parse(cls, text: str) -> Subsystem:
        """Raises AtollError(bad_subsystem) for anything but the forms above."""
        value = (text or FILESYSTEM).strip().strip("/")
        if value == WORLD:
            return cls(WORLD)
        top, _, nested = value.partition("/")
        if top not in (FILESYSTEM, APPS_DATA):
            raise AtollError(
                ErrorCode.bad_subsystem,
                f"subsystem {text!r} must be 'filesystem', '.apps_data', a folder inside one of them, or 'world'",
            )
        try:
            cleaned = clean_member_name(nested) if nested else None
        except UnsafeArchive as exc:
            raise AtollError(
                ErrorCode.bad_subsystem, f"subsystem {text!r}: {exc.message.split(': ', 1)[-1]}"
            ) from exc
        return cls(top, cleaned or "")

    def __str__(self) -> str:
        return f"{self.top}/{self.nested}" if self.nested else self.top


@dataclass
class PopulateSource:
    """One input: an open binary file (an upload) or an fsspec URL (archive or folder)."""

    subsystem: Subsystem
    url: str | None = None
    file: BinaryIO | None = None

    @property
    def label(self) -> str:
        return self.url or "uploaded archive"


@dataclass
class PopulateResult:
    objects_added: int
    extracted_bytes: int
    skipped_members: int
    subsystems: list[str]
    mode: str
    sources: int
    details: dict[str, Any] = field(default_factory=dict)


def populate(
    sources: list[PopulateSource],
    roots: WorldRoots,
    *,
    mode: Mode = "merge",
    limits: ArchiveLimits | None = None,
    storage_options: dict[str, Any] | None = None,
    url_prefixes: list[str] | None = None,
    keep: KeepRequest | None = None,
) -> PopulateResult:
    """Extract every source, then commit them together. Blocking: call from a worker thread.

    URL sources are opened as ``environment.url_policy`` resolves them under ``url_prefixes``
    (``ATOLL_URL_ALLOW``; redirects and listed files re-checked). With ``keep``, a ``replace``
    from one local folder keeps the world's files that already hold what it would lay
    (:mod:`environment.world_keep`).

    Raises UnsafeArchive (4xx: names the member), AtollError for unreadable sources or bad
    subsystems; in these cases the world is unchanged. AtollError(``world_changed``) when the
    world changed while staging was moved into it (the move may then be partial).
    """
    if mode not in ("merge", "replace"):
        raise AtollError(ErrorCode.bad_mode, f"mode {mode!r} must be 'merge' or 'replace'")
    # Local sources only: an upload or a download waits on a peer, and would hold the lane.
    lane = world_work() if all(_is_local(source) for source in sources) else contextlib.nullcontext()
    with lane:
        return _populate(sources, roots, mode, limits, storage_options, url_prefixes, keep)


def _is_local(source: PopulateSource) -> bool:
    return source.url is not None and urlsplit(source.url).scheme in ("", "file")


def _populate(
    sources: list[PopulateSource],
    roots: WorldRoots,
    mode: Mode,
    limits: ArchiveLimits | None,
    storage_options: dict[str, Any] | None,
    url_prefixes: list[str] | None,
    keep: KeepRequest | None,
) -> PopulateResult:
    staging = _Staging(roots)
    keeper = None
    if keep is not None and _may_keep(sources, mode, roots):
        from environment.world_keep import WorldKeeper  # it reads the world as the walk does

        url = cast(str, sources[0].url)
        parked = None
        if keep.parking is not None and keep.laid_from != url:  # else the world itself is the base
            parked = keep.parking.take(url)
        keeper = WorldKeeper(keep, roots.root, staging.top_of, url, parked)
    staging.keeper = keeper
    extractor = SafeExtractor(staging.route_all, limits or ArchiveLimits(), keeper)
    try:
        for source in sources:
            staging.current = source.subsystem
            try:
                _read_source(source, extractor, storage_options or {}, url_prefixes or [])
            except UnsafeArchive:
                raise
            except AtollError:
                raise
            except FileNotFoundError as exc:
                raise AtollError(
                    ErrorCode.source_not_found, f"populate source {source.label!r} not found ({exc})"
                ) from exc
            except OSError as exc:
                raise AtollError(
                    ErrorCode.source_unreadable, f"populate source {source.label!r}: {exc}"
                ) from exc
        extractor.check_links()
        try:
            staging.commit(replace=[s.subsystem for s in sources] if mode == "replace" else [])
        except OSError as exc:
            # Only a world changing under us (code_exec still running) gets here: the moves
            # act on names inside directory descriptors, so nothing outside was touched.
            raise AtollError(
                ErrorCode.world_changed,
                f"the world changed while populate moved files into it ({exc}); retry",
            ) from exc
    finally:
        staging.discard()
        if keeper is not None:
            keeper.close()
    return PopulateResult(
        objects_added=extractor.files,
        extracted_bytes=extractor.bytes_written,
        skipped_members=extractor.skipped,
        subsystems=sorted({str(s.subsystem) for s in sources}),
        mode=mode,
        sources=len(sources),
        details={
            "kept_files": keeper.kept_files if keeper is not None else 0,
            # what the world was laid from, when it may be parked under it (world_parking)
            "laid_from": keeper.source if keeper is not None else None,
        },
    )


def _may_keep(sources: list[PopulateSource], mode: Mode, roots: WorldRoots) -> bool:
    """A replace of whole trees from one URL (a local folder is the only kind that asks to
    keep), with no ``code_exec`` call running over the world."""
    if mode != "replace" or len(sources) != 1 or sources[0].url is None or sources[0].subsystem.nested:
        return False
    from environment.world_keep import code_calls_in_flight

    return code_calls_in_flight(roots.fs_root) == 0


class _Staging:
    """One hidden staging directory per root, created on first use."""

    def __init__(self, roots: WorldRoots) -> None:
        self.roots = roots
        self.token = uuid.uuid4().hex[:12]
        self.dirs: dict[str, Path] = {}
        self.current = Subsystem(FILESYSTEM)
        self.keeper: WorldKeeper | None = None

    def top_of(self, staging_root: Path) -> str | None:
        """The world root (``filesystem`` or ``.apps_data``) whose staging is ``staging_root``."""
        return next((top for top, path in self.dirs.items() if path == staging_root), None)

    def dir_for(self, top: str) -> Path:
        if top not in self.dirs:
            root = self.roots.root(top)
            root.mkdir(parents=True, exist_ok=True)
            path = root / f"{STAGING_PREFIX}{self.token}"
            path.mkdir(mode=0o700)
            self.dirs[top] = path
        return self.dirs[top]

    def route_all(self, name: str) -> tuple[Path, str] | None:
        subsystem = self.current
        if subsystem.top == WORLD:
            tree = split_world_member(name)
            if tree is None or not tree[1]:
                return None  # e.g. a README beside the two trees, or a tree's own folder
            return self.dir_for(tree[0]), tree[1]
        return self.dir_for(subsystem.top), f"{subsystem.nested}/{name}" if subsystem.nested else name

    def commit(self, replace: list[Subsystem]) -> None:
        if self.keeper is not None:
            self.keeper.settle()
        for subsystem in replace:
            tops = (FILESYSTEM, APPS_DATA) if subsystem.top == WORLD else (subsystem.top,)
            for top in tops:
                with opened_dir(self.roots.root(top)) as root_fd:
                    if self.keeper is not None:  # whole trees only (_may_keep)
                        self.keeper.clear(top, root_fd, skip=lambda name: name.startswith(STAGING_PREFIX))
                    else:
                        _empty_target(root_fd, subsystem.nested)
        for top, path in self.dirs.items():
            with opened_dir(path) as source_fd, opened_dir(self.roots.root(top)) as root_fd:
                _merge_into(source_fd, root_fd)

    def discard(self) -> None:
        for path in self.dirs.values():
            shutil.rmtree(path, ignore_errors=True)


# -- moving staging into the world, by directory descriptors ---------------------------------
#
# The world may hold anything the agent made, and code_exec may still be changing it: every
# step below acts on a name inside a directory descriptor (``dir_fd=``), directories are
# entered with O_NOFOLLOW, so a folder swapped for a symlink to the host is never written
# through (it is replaced, like any other non-directory in the way).

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@contextlib.contextmanager
def _closing(descriptor: int) -> Iterator[int]:
    try:
        yield descriptor
    finally:
        os.close(descriptor)


def opened_dir(path: Path | str) -> contextlib.AbstractContextManager[int]:
    return _closing(os.open(path, DIR_FLAGS))


def open_subdir(dir_fd: int, name: str) -> int | None:
    """A descriptor of the real directory ``name`` in ``dir_fd``, or None if it is not one."""
    try:
        return os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
            return None
        raise


def _merge_into(source_fd: int, dest_fd: int) -> None:
    """Move the tree of ``source_fd`` into ``dest_fd`` (archive wins on conflicts)."""
    for name in sorted(os.listdir(source_fd)):
        source_info = os.stat(name, dir_fd=source_fd, follow_symlinks=False)
        try:
            dest_info = os.stat(name, dir_fd=dest_fd, follow_symlinks=False)
        except FileNotFoundError:
            os.rename(name, name, src_dir_fd=source_fd, dst_dir_fd=dest_fd)
            continue
        if stat.S_ISDIR(source_info.st_mode) and stat.S_ISDIR(dest_info.st_mode):
            dest_child = open_subdir(dest_fd, name)
            if dest_child is not None:
                with _closing(dest_child), _closing(os.open(name, DIR_FLAGS, dir_fd=source_fd)) as child:
                    _merge_into(child, dest_child)
                continue
        with contextlib.suppress(FileNotFoundError):
            beneath.remove_tree(dest_fd, name)
        os.rename(name, name, src_dir_fd=source_fd, dst_dir_fd=dest_fd)


def _empty_target(root_fd: int, nested: str) -> None:
    """Delete what ``replace`` replaces: the root's (or a folder's) contents, staging excepted."""
    current = os.dup(root_fd)
    try:
        for part in [p for p in nested.split("/") if p]:
            child = open_subdir(current, part)
            if child is None:  # missing, or a file or a symlink where the folder should be
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(part, dir_fd=current)
                return
            os.close(current)
            current = child
        for name in os.listdir(current):
            if not nested and name.startswith(STAGING_PREFIX):
                continue
            beneath.remove_tree(current, name)
    finally:
        os.close(current)


# -- reading sources ------------------------------------------------------------------------

_GZIP, _BZIP2, _XZ = b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00"


def _kind(head: bytes) -> tuple[str, str] | None:
    """(archive kind, compression) from the first bytes of a source."""
    for magic, compression in ((_GZIP, "gz"), (_BZIP2, "bz2"), (_XZ, "xz")):
        if head.startswith(magic):
            return "tar", compression
    if head[257:262] == b"ustar":
        return "tar", ""
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "zip", ""
    return None


def _read_source(
    source: PopulateSource, extractor: SafeExtractor, storage_options: dict[str, Any], prefixes: list[str]
) -> None:
    if source.file is not None:
        _read_archive(source.file, source.label, extractor)
        return
    url = source.url
    assert url is not None
    from fsspec.core import url_to_fs  # on the first URL source: not part of the start-up

    # Opened as checked: a local source by the real path the allow-list saw.
    target = resolve_url(url, prefixes, "populate source")
    try:
        fs, path = url_to_fs(target, **opener_options(target, prefixes, "populate source", storage_options))
    except (ValueError, ImportError) as exc:  # unknown protocol, or its library is not installed
        raise AtollError(ErrorCode.bad_source_url, f"populate source {url!r}: {exc}") from exc
    protocols = (fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol)
    is_local = "file" in protocols or "local" in protocols
    if is_local and os.path.isdir(path):
        copy_local_folder(Path(path), extractor)
        return
    if is_local:
        with fs.open(path, "rb") as stream:
            _read_archive(stream, url, extractor)
        return
    # Every call into a remote store goes through _store, which turns the store library's own
    # errors (botocore's NoCredentialsError, aiohttp's ClientError, ...) into one line naming
    # the URL, answered 502; our extraction errors pass through untouched.
    is_archive = path.endswith((".gz", ".tgz", ".tar", ".zip", ".bz2", ".xz"))
    if not is_archive and _store(url, fs.isdir, path):
        _copy_remote_folder(fs, path, extractor, url, prefixes)
        return
    with _store(url, fs.open, path, "rb") as stream:
        _read_archive(_StoreStream(stream, url), url, extractor)


class SourceUnavailable(AtollError):
    """The object store holding a populate source failed or refused (credentials, network, access)."""

    def __init__(self, url: str, exc: BaseException) -> None:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        detail = f"{type(exc).__name__}: {reason}" if reason else type(exc).__name__
        super().__init__(ErrorCode.source_unavailable, f"populate source {url!r} cannot be read: {detail}")
        self.url = url


def _store(url: str, call: Any, *args: Any, **kwargs: Any) -> Any:
    """``call(*args, **kwargs)`` on a remote filesystem, its failures reported as errors naming ``url``."""
    try:
        return call(*args, **kwargs)
    except (AtollError, UnsafeArchive):
        raise
    except Exception as exc:
        if (refusal := refusal_in(exc)) is not None:  # a redirect out of ATOLL_URL_ALLOW
            raise refusal from exc
        if isinstance(exc, FileNotFoundError):
            raise AtollError(
                ErrorCode.source_not_found, f"populate source {url!r} not found ({exc})"
            ) from exc
        # the store library's own error types are many and unrelated
        raise SourceUnavailable(url, exc) from exc


class _StoreStream:
    """A remote file whose read errors become :class:`SourceUnavailable`."""

    def __init__(self, stream: BinaryIO, url: str) -> None:
        self.stream = stream
        self.url = url

    def read(self, size: int = -1) -> bytes:
        return _store(self.url, self.stream.read, size)

    def seekable(self) -> bool:
        return bool(_store(self.url, self.stream.seekable))

    def seek(self, offset: int, whence: int = 0) -> int:
        return _store(self.url, self.stream.seek, offset, whence)

    def tell(self) -> int:
        return _store(self.url, self.stream.tell)


def _read_archive(stream: BinaryIO | _StoreStream, label: str, extractor: SafeExtractor) -> None:
    head = stream.read(512)
    sniffed = _kind(head)
    if sniffed is None:
        raise AtollError(
            ErrorCode.bad_archive, f"populate source {label!r} is not a tar, tar.gz or zip archive"
        )
    kind, compression = sniffed
    rest = _Prefixed(head, stream)
    if kind == "tar":
        extract_tar(rest, extractor, compression)
        return
    # zip needs random access: use the stream itself when it can seek, else spool it to disk.
    if stream.seekable():
        stream.seek(0)
        # zipfile reads, seeks and tells, all of which a _StoreStream does.
        extract_zip(cast(BinaryIO, stream), extractor)
        return
    with tempfile.TemporaryFile() as spooled:
        copy_capped(rest, spooled, extractor.limits.max_archive_file_bytes, f"zip source {label!r}")
        spooled.seek(0)
        extract_zip(spooled, extractor)


def _copy_remote_folder(fs: Any, path: str, extractor: SafeExtractor, url: str, prefixes: list[str]) -> None:
    base = path.rstrip("/")
    extractor.begin_source(lambda: 1 << 62)
    for name, info in sorted(_store(url, fs.find, base, detail=True).items()):
        if info.get("type") != "file":
            continue
        # A listing names its own URLs (an HTTP index page's links may climb out with '..'):
        # each is checked as the source was.
        check_url(fs.unstrip_protocol(name), prefixes, f"populate source {url!r}: listed file")
        relative = name[len(base) :].lstrip("/")
        with _store(url, fs.open, name, "rb") as source:
            extractor.add_file(relative, _StoreStream(source, url), int(info.get("size") or 0), False, None)


class _Prefixed:
    """A read-only stream that first returns ``head`` (already read to sniff the format)."""

    def __init__(self, head: bytes, rest: SupportsRead[bytes]) -> None:
        self.head = head
        self.rest = rest

    def read(self, size: int = -1) -> bytes:
        if self.head:
            if size < 0:
                data, self.head = self.head + self.rest.read(), b""
                return data
            data, self.head = self.head[:size], self.head[size:]
            if len(data) < size:
                data += self.rest.read(size - len(data))
            return data
        return self.rest.read(size)
