"""Safe extraction of untrusted archives (tar, tar.gz/bz2/xz, zip) and folders into a fresh directory.

Every member passes one gate, :class:`SafeExtractor`, which refuses (with
:class:`UnsafeArchive`, naming the member) the names :mod:`atoll.members` refuses, symlinks
that lead out of their root when resolved physically on the staging tree (:mod:`environment.links`),
hardlinks to anything but an earlier regular member, device files and FIFOs, writes through
symlinks, and archives that exceed the size, member-count or compression-ratio limits.
Desktop-archiver litter (``__MACOSX/``, ``.DS_Store``, …) is skipped and counted. The
extractor only ever writes into staging directories it was given; moving the result into
the world is ``populate``'s job, after :meth:`SafeExtractor.check_links` has judged every
link once more on the finished tree.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Protocol

from atoll.errors import ErrorCode
from atoll.members import UnsafeArchive, clean_member_name, is_junk
from environment.links import LinkEscape, resolve_link
from mcp_servers._core import beneath

if TYPE_CHECKING:
    from _typeshed import SupportsRead

__all__ = [
    "ArchiveLimits",
    "LocalFile",
    "Router",
    "SafeExtractor",
    "UnsafeArchive",
    "clean_member_name",
    "copy_capped",
]

_CHUNK = 1 << 20
_KERNEL_CHUNK = 64 << 20
# A filesystem (or a pair of them) that cannot do the copy in the kernel: use the next way.
_NO_KERNEL_COPY = frozenset({errno.EOPNOTSUPP, errno.EXDEV, errno.EINVAL, errno.ENOSYS})
_FICLONE = 0x40049409  # _IOW(0x94, 9, int), linux/fs.h


@dataclass(frozen=True)
class LocalFile:
    """A regular file opened from a local folder source, given to :meth:`SafeExtractor.add_file`
    so that its data is copied in the kernel (:meth:`SafeExtractor._copy_in_kernel`)."""

    descriptor: int


def _clone(source_fd: int, sink_fd: int) -> bool:
    """Whether the sink now shares the source's blocks (a reflink); False where the filesystem
    has none (ext4: EOPNOTSUPP; across filesystems: EXDEV)."""
    try:
        fcntl.ioctl(sink_fd, _FICLONE, source_fd)
    except OSError as exc:
        if exc.errno in _NO_KERNEL_COPY or exc.errno == errno.ENOTTY:
            return False
        raise
    return True


@dataclass(frozen=True)
class ArchiveLimits:
    """What one populate may write: bytes, members, and the compression ratio of each source."""

    max_bytes: int = 8 * 1024**3
    max_members: int = 200_000
    max_ratio: float = 200.0
    ratio_floor_bytes: int = 32 * 1024**2

    @property
    def max_archive_file_bytes(self) -> int:
        """Most bytes an archive *file* (compressed) may have before it is spooled to disk.

        An archive that may unpack to at most ``max_bytes`` is not much bigger than that even
        when its data does not compress: tar headers and padding, gzip and zip framing, and a
        multipart envelope add well under 5% + 1 MiB. Anything larger cannot be extracted
        within the limit, so it is refused before it fills the disk.
        """
        return self.max_bytes + self.max_bytes // 20 + 1024**2


def copy_capped(source: SupportsRead[bytes], target: BinaryIO, limit: int, label: str) -> None:
    """Copy ``source`` to ``target``; UnsafeArchive (``archive_too_large``) past ``limit`` bytes."""
    copied = 0
    while chunk := source.read(_CHUNK):
        copied += len(chunk)
        if copied > limit:
            raise UnsafeArchive("", f"{label} is larger than {limit} bytes", ErrorCode.archive_too_large)
        target.write(chunk)


#: Maps a cleaned member name to (staging root, path inside it), or None to skip the member.
Router = Callable[[str], "tuple[Path, str] | None"]


class Keeper(Protocol):
    """Decides which members the world already holds as they would be laid, so that nothing is
    written for them (:class:`environment.world_keep.WorldKeeper`)."""

    def keep_directory(self, staging_root: Path, relative: str) -> bool: ...

    def keep_file(
        self,
        staging_root: Path,
        relative: str,
        source: LocalFile,
        size: int,
        executable: bool,
        mtime: float | None,
    ) -> bool: ...


class SafeExtractor:
    """Writes members into staging roots, enforcing the safety rules and limits across one populate."""

    def __init__(self, router: Router, limits: ArchiveLimits, keeper: Keeper | None = None) -> None:
        self.router = router
        self.limits = limits
        self.keeper = keeper
        self.members = 0
        self.files = 0
        self.skipped = 0
        self.bytes_written = 0
        # Per source: compressed bytes read so far (callable) and bytes written at its start.
        self._compressed: Callable[[], int] = lambda: 0
        self._source_start = 0
        self._directories: set[tuple[Path, str]] = set()
        # Every symlink made so far, (root, path) -> member name: judged again at the end.
        self._links: dict[tuple[Path, str], str] = {}

    # -- per-source bookkeeping -------------------------------------------------------------

    def begin_source(self, compressed_bytes: Callable[[], int]) -> None:
        self._compressed = compressed_bytes
        self._source_start = self.bytes_written

    def _count_member(self, name: str) -> None:
        self.members += 1
        if self.members > self.limits.max_members:
            raise UnsafeArchive(
                name,
                f"more than {self.limits.max_members} members in one populate",
                ErrorCode.archive_too_large,
            )

    def check_ratio(self, name: str) -> None:
        """Refuse once this source wrote ``max_ratio`` times the compressed bytes read so far.

        Both sides are measured, never declared: bytes actually written, and bytes actually
        consumed from the source (for a zip, its member ranges, which may not overlap).
        """
        expanded = self.bytes_written - self._source_start
        if expanded < self.limits.ratio_floor_bytes:
            return
        compressed = max(self._compressed(), 1)
        if expanded / compressed > self.limits.max_ratio:
            raise UnsafeArchive(
                name,
                f"expands {expanded} bytes from {compressed} compressed bytes "
                f"(ratio above {self.limits.max_ratio:g}): decompression bomb",
                ErrorCode.archive_too_large,
            )

    def _reserve(self, name: str, size: int) -> None:
        if self.bytes_written + size > self.limits.max_bytes:
            raise UnsafeArchive(
                name,
                f"populate would write more than {self.limits.max_bytes} bytes",
                ErrorCode.archive_too_large,
            )

    # -- targets --------------------------------------------------------------------------

    def _target(self, name: str) -> tuple[Path, str, Path] | None:
        cleaned = clean_member_name(name)
        if cleaned is None:
            return None
        if is_junk(cleaned):
            self.skipped += 1
            return None
        routed = self.router(cleaned)
        if routed is None:
            return None
        root, relative = routed
        if not relative:
            return None
        return root, relative, root / relative

    def _make_parents(self, name: str, root: Path, relative: str) -> None:
        """Create the parent directories of ``relative`` without ever passing through a symlink."""
        parent = relative.rpartition("/")[0]
        if not parent or (root, parent) in self._directories:
            return
        current = root
        for part in parent.split("/"):
            current = current / part
            try:
                info = os.lstat(current)
            except FileNotFoundError:
                os.mkdir(current, 0o755)
                continue
            if stat.S_ISLNK(info.st_mode):
                raise UnsafeArchive(name, f"path goes through the symlink {part!r}")
            if not stat.S_ISDIR(info.st_mode):
                raise UnsafeArchive(name, f"parent {part!r} is not a directory")
        # Staging is written by this extractor alone, and a directory here can never be
        # replaced (``_clear`` refuses), so a checked parent stays safe: skip the lstats next time.
        self._directories.add((root, parent))

    def _clear(self, name: str, root: Path, relative: str, path: Path) -> None:
        """Make room for a member whose name appeared before (the later one wins, as with tar)."""
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(info.st_mode):
            raise UnsafeArchive(name, "a directory of the same name is already in the archive")
        os.unlink(path)
        self._links.pop((root, relative), None)

    # -- members --------------------------------------------------------------------------

    def add_directory(self, name: str) -> None:
        self._count_member(name)
        target = self._target(name)
        if target is None:
            return
        root, relative, path = target
        if self.keeper is not None and self.keeper.keep_directory(root, relative):
            return
        self._make_parents(name, root, relative)
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            os.mkdir(path, 0o755)
            return
        if not stat.S_ISDIR(info.st_mode):
            raise UnsafeArchive(name, "a file of the same name is already in the archive")

    def add_file(
        self,
        name: str,
        source: SupportsRead[bytes] | LocalFile,
        size: int,
        executable: bool,
        mtime: float | None,
    ) -> None:
        """Copy ``size`` bytes from ``source`` (a stream, or a local file copied in the kernel);
        refuses before writing when the limits would be passed."""
        self._count_member(name)
        self._reserve(name, size)
        target = self._target(name)
        if target is None:
            return
        root, relative, path = target
        if (
            self.keeper is not None
            and isinstance(source, LocalFile)
            and self.keeper.keep_file(root, relative, source, size, executable, mtime)
        ):
            self.files += 1  # in the world as laid: counted as if written
            self.bytes_written += size
            return
        self._make_parents(name, root, relative)
        self._clear(name, root, relative, path)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with os.fdopen(descriptor, "wb", buffering=0) as sink:
            if isinstance(source, LocalFile):
                self._copy_in_kernel(name, source, sink.fileno(), size)
            else:
                self._copy_stream(name, source, sink, size)
            if executable:
                os.fchmod(sink.fileno(), 0o755)
            if mtime is not None:
                os.utime(sink.fileno(), (mtime, mtime))
        self.files += 1

    def _copy_stream(self, name: str, source: SupportsRead[bytes], sink: BinaryIO, size: int) -> None:
        remaining = size
        while remaining > 0:
            chunk = source.read(min(_CHUNK, remaining))
            if not chunk:
                raise UnsafeArchive(name, "archive ends inside this member (truncated)")
            sink.write(chunk)
            remaining -= len(chunk)
            self.bytes_written += len(chunk)
            self.check_ratio(name)

    def _copy_in_kernel(self, name: str, source: LocalFile, sink_fd: int, size: int) -> None:
        """Exactly ``size`` bytes of a local file, without passing them through Python: a
        reflink (``FICLONE``: shared blocks, copy-on-write) where the filesystem has them, else
        ``copy_file_range``, else a read/write loop. The same caps as a stream: never more than
        ``size`` bytes (a file that grew is cut back to it), a file that shrank is refused."""
        if size > 0 and _clone(source.descriptor, sink_fd):
            cloned = os.fstat(sink_fd).st_size
            if cloned >= size:
                if cloned > size:  # grew since its size was taken: the size reserved is the cap
                    os.ftruncate(sink_fd, size)
                self.bytes_written += size
                self.check_ratio(name)
                return
            os.ftruncate(sink_fd, 0)  # shrank: copy it the plain way, which refuses it
        copied = 0
        use_range = True
        while copied < size:
            count = min(_KERNEL_CHUNK, size - copied)
            done = 0
            if use_range:
                try:
                    done = os.copy_file_range(source.descriptor, sink_fd, count, copied, copied)
                except OSError as exc:
                    if exc.errno not in _NO_KERNEL_COPY:
                        raise
                    use_range = False
            if not use_range:
                chunk = os.pread(source.descriptor, min(_CHUNK, count), copied)
                done = len(chunk)
                if done:
                    os.pwrite(sink_fd, chunk, copied)
            if done == 0:
                raise UnsafeArchive(name, "the file ends before its size (it shrank while copied)")
            copied += done
            self.bytes_written += done
            self.check_ratio(name)

    def add_symlink(self, name: str, link_target: str) -> None:
        """A symlink is kept only when it resolves inside its own root, physically."""
        self._count_member(name)
        target = self._target(name)
        if target is None:
            return
        root, relative, path = target
        if "\x00" in link_target:
            raise UnsafeArchive(name, f"symlink target contains a NUL byte ({link_target!r})")
        self._make_parents(name, root, relative)
        self._judge_link(name, root, relative, link_target)
        self._clear(name, root, relative, path)
        os.symlink(link_target, path)
        self._links[(root, relative)] = name

    def _judge_link(self, name: str, root: Path, relative: str, link_target: str) -> None:
        try:
            resolve_link(str(root), relative.rpartition("/")[0], link_target)
        except LinkEscape as exc:
            raise UnsafeArchive(
                name, f"symlink points outside the world ({link_target!r}: {exc.reason})"
            ) from None

    def check_links(self) -> None:
        """Judge every kept symlink again on the finished tree: a later link can change where an
        earlier one leads (``x -> d/..`` made before ``d -> ..``). Raises UnsafeArchive."""
        for (root, relative), name in self._links.items():
            self._judge_link(name, root, relative, os.readlink(root / relative))

    @staticmethod
    def _open_hardlink_source(name: str, root: Path, relative: str, link_target: str) -> int:
        """The earlier member's file, resolved physically beneath its staging root (links on
        the way followed only while they stay inside; the file itself never a link)."""
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
        try:
            with beneath.Root(root).fd() as root_fd:
                descriptor = beneath.open_beneath(root_fd, relative, flags)
        except beneath.OutsideRoot:
            raise UnsafeArchive(name, f"hardlink points outside the world ({link_target!r})") from None
        except FileNotFoundError:
            raise UnsafeArchive(
                name, f"hardlink to a member not extracted before ({link_target!r})"
            ) from None
        except OSError as exc:  # ELOOP: the source is itself a symlink; ENOTDIR: a file on the way
            raise UnsafeArchive(
                name, f"hardlink to something that is not a regular file ({link_target!r}: {exc.strerror})"
            ) from None
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            os.close(descriptor)
            raise UnsafeArchive(name, f"hardlink to something that is not a regular file ({link_target!r})")
        return descriptor

    def add_hardlink(self, name: str, link_target: str) -> None:
        """A hardlink becomes a copy of an earlier regular member of the same root.

        The source is opened through real directories only (never through a symlink, so a
        link chain cannot make it a host file); anything else is refused.
        """
        self._count_member(name)
        target = self._target(name)
        if target is None:
            return
        root, relative, path = target
        try:
            source_target = self._target(link_target)
        except UnsafeArchive as exc:
            raise UnsafeArchive(name, f"hardlink points outside the world ({link_target!r})") from exc
        if source_target is None or source_target[0] != root:
            raise UnsafeArchive(name, f"hardlink points outside its root ({link_target!r})")
        source_fd = self._open_hardlink_source(name, root, source_target[1], link_target)
        with os.fdopen(source_fd, "rb", buffering=0) as source:
            info = os.fstat(source.fileno())
            self._reserve(name, info.st_size)
            self._make_parents(name, root, relative)
            self._clear(name, root, relative, path)
            descriptor = os.open(
                path,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                info.st_mode & 0o755,
            )
            with os.fdopen(descriptor, "wb", buffering=0) as sink:
                while chunk := source.read(_CHUNK):
                    sink.write(chunk)
                    self.bytes_written += len(chunk)
        self.check_ratio(name)  # many hardlinks to one big member are a bomb too
        self.files += 1
