"""Content-addressed blobs in an artifact store, and the store roots they live under.

A blob is one file content, stored gzip'd (level 6, mtime 0, no name) at
``blobs/sha256/<hex[:2]>/<hex>``, named by the sha256 of the *uncompressed* content. It is
written only when absent, under a temporary name first and then moved into place (two writers
of the same blob move the same bytes), its content hashed on the way in; every read checks the
content against the name. :mod:`atoll.world_store` builds stored worlds on it.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol, cast

import fsspec

from atoll.errors import AtollError, ErrorCode
from atoll.world_archive import COMPRESS_LEVEL

BLOB_FOLDER = "blobs/sha256"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_CHUNK = 1 << 20


class HasFilesystem(Protocol):
    """What :class:`BlobStore` takes from a store object (``orchestrator.artifacts.ArtifactStore``)."""

    url: str
    fs: Any
    root: str


class BlobIntegrityError(AtollError):
    """A stored blob whose content is not what its name says (tampered or torn)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.blob_corrupt, message)


# --- store roots --------------------------------------------------------------------------


@dataclass(frozen=True)
class StoreRoot:
    """A store root: its filesystem, its path on it (no protocol) and its URL."""

    fs: Any
    path: str
    url: str

    def uri(self, path: str) -> str:
        return f"{protocol_of(self.fs)}://{path}"

    def full(self, key: str) -> str:
        return f"{self.path}/{key}" if key else self.path


def protocol_of(fs: Any) -> str:
    """The filesystem's protocol name (``file``, ``s3``)."""
    return fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]


def local_url(location: str) -> str:
    """Local paths and ``file://relative`` become absolute ``file://`` URLs (as the artifact
    store writes them); other URLs are returned as they are."""
    if "://" not in location:
        return "file://" + os.path.abspath(location)
    if location.startswith("file://") and not location.startswith("file:///"):
        return "file://" + os.path.abspath(location.removeprefix("file://"))
    return location


def store_root(
    store: str | Path | HasFilesystem | BlobStore | StoreRoot, storage_options: dict | None = None
) -> StoreRoot:
    """The store root of a URL or local folder (opened with ``storage_options``), of a store
    object (``url``, ``fs``, ``root``) or of a BlobStore."""
    if isinstance(store, StoreRoot):
        return store
    if isinstance(store, BlobStore):
        return store.store_root
    if isinstance(store, str | Path):
        url = local_url(str(store)).rstrip("/")
        try:
            fs, path = fsspec.core.url_to_fs(url, **(storage_options or {}))
        except (ImportError, ValueError) as exc:
            raise AtollError(ErrorCode.bad_artifact_store, f"artifact store {url}: {exc}") from None
        return StoreRoot(fs, path.rstrip("/"), url)
    return StoreRoot(store.fs, store.root.rstrip("/"), store.url)


def open_location(location: str | Path, storage_options: dict | None = None) -> tuple[Any, str]:
    """(filesystem, path) of a local path or fsspec URL; AtollError(``artifact_unreadable``)."""
    url = local_url(str(location))
    try:
        fs, path = fsspec.core.url_to_fs(url, **(storage_options or {}))
    except (ImportError, ValueError) as exc:
        raise AtollError(ErrorCode.artifact_unreadable, f"world {location}: {exc}") from None
    return fs, path


# --- blobs --------------------------------------------------------------------------------


class BlobStore:
    """The content-addressed blobs of a store root, under ``folder`` (``blobs/sha256``).

    ``store`` is a root URL or local folder (with ``storage_options`` for fsspec), or any object
    with ``url``, ``fs`` and ``root`` (an ``ArtifactStore``). :attr:`written` counts the blobs
    this object stored (not those it found already there).
    """

    def __init__(
        self,
        store: str | Path | HasFilesystem | StoreRoot,
        *,
        storage_options: dict | None = None,
        folder: str = BLOB_FOLDER,
    ) -> None:
        self.store_root = store_root(store, storage_options)
        self.folder = folder.strip("/")
        self.written = 0

    @property
    def fs(self) -> Any:
        return self.store_root.fs

    def key(self, sha256: str) -> str:
        """The blob's key relative to the store root; ValueError for a name that is no sha256."""
        if not _SHA256.match(sha256):
            raise ValueError(f"{sha256!r} is not a sha256 (64 lowercase hex digits)")
        return f"{self.folder}/{sha256[:2]}/{sha256}"

    def path(self, sha256: str) -> str:
        return self.store_root.full(self.key(sha256))

    def uri(self, sha256: str) -> str:
        return self.store_root.uri(self.path(sha256))

    def has(self, sha256: str) -> bool:
        return bool(self.fs.exists(self.path(sha256)))

    def put(self, sha256: str, content: bytes | BinaryIO) -> bool:
        """Store ``content`` (bytes or a reader) as blob ``sha256`` unless it is there; True when
        this call wrote it. The content is hashed while it is compressed: AtollError
        (``blob_corrupt``) when it is not what ``sha256`` names (nothing is stored then)."""
        if self.has(sha256):
            return False
        self._write(sha256, content)
        return True

    def _write(self, sha256: str, content: bytes | BinaryIO) -> None:
        """Write the blob whether or not it is there (a caller that has just asked)."""
        path = self.path(sha256)
        folder = path.rsplit("/", 1)[0]
        self.fs.makedirs(folder, exist_ok=True)
        partial = f"{path}.{uuid.uuid4().hex}.partial"
        reader = io.BytesIO(content) if isinstance(content, bytes | bytearray | memoryview) else content
        digest = hashlib.sha256()
        try:
            with (
                self.fs.open(partial, "wb") as sink,
                gzip.GzipFile(
                    filename="", mode="wb", fileobj=sink, mtime=0, compresslevel=COMPRESS_LEVEL
                ) as gz,
            ):
                while block := reader.read(_CHUNK):
                    digest.update(block)
                    gz.write(block)
            if digest.hexdigest() != sha256:
                raise BlobIntegrityError(
                    f"blob {sha256[:12]}…: the content given hashes to {digest.hexdigest()[:12]}…"
                )
            # Two writers of the same blob move the same bytes into place: either move wins.
            self.fs.mv(partial, path)
        except BaseException:
            try:
                if self.fs.exists(partial):
                    self.fs.rm(partial)
            except OSError:
                pass
            raise
        self.written += 1

    def open(self, sha256: str) -> BinaryIO:
        """A reader of the blob's content; its end raises AtollError(``blob_corrupt``) when what
        was read is not what the name says. AtollError(``blob_missing``) when it is absent."""
        uri = self.uri(sha256)
        try:
            handle = self.fs.open(self.path(sha256), "rb")
        except FileNotFoundError:
            raise AtollError(ErrorCode.blob_missing, f"blob {uri}: not in the store") from None
        except OSError as exc:
            raise AtollError(ErrorCode.artifact_unreadable, f"blob {uri}: {exc}") from None
        return cast(BinaryIO, _VerifyingReader(handle, sha256, uri))  # a binary reader, as io.RawIOBase

    def get(self, sha256: str) -> bytes:
        """The blob's content, checked against its name (errors as :meth:`open`)."""
        with self.open(sha256) as reader:
            return reader.read()


class _VerifyingReader(io.RawIOBase):
    """Decompresses a stored blob and checks its sha256 when the end is reached."""

    def __init__(self, handle: BinaryIO, sha256: str, uri: str) -> None:
        self._handle = handle
        self._gz = gzip.GzipFile(fileobj=handle, mode="rb")
        self._digest = hashlib.sha256()
        self._sha256 = sha256
        self._uri = uri
        self._done = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        try:
            data = self._gz.read(len(buffer))
        except (OSError, EOFError) as exc:
            raise BlobIntegrityError(f"blob {self._uri}: not a gzip'd blob ({exc})") from None
        if not data and not self._done:
            self._done = True
            if self._digest.hexdigest() != self._sha256:
                raise BlobIntegrityError(f"blob {self._uri}: its content does not match its name")
        self._digest.update(data)
        buffer[: len(data)] = data
        return len(data)

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            chunks = []
            while block := super().read(_CHUNK):
                chunks.append(block)
            return b"".join(chunks)
        return super().read(size) or b""

    def close(self) -> None:
        """Closes the blob; one read only in part (a tar member takes exactly its size) is read
        to its end first, so that its hash is checked all the same."""
        if self.closed:
            return
        try:
            if not self._done:
                while super().read(_CHUNK):
                    pass
        finally:
            self._gz.close()
            self._handle.close()
            super().close()


__all__ = [
    "BLOB_FOLDER",
    "BlobIntegrityError",
    "BlobStore",
    "HasFilesystem",
    "StoreRoot",
    "local_url",
    "open_location",
    "protocol_of",
    "store_root",
]
